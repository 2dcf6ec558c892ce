"""tools/postnorm_study.py's row names and the clipped correction of tools/postnorm_compensators.py
on a small random Gemma 3: bad rows are refused naming what is wrong; a clip changes the logits and
keeps them finite, in the rank's own units and in the calibrated ones."""

import pytest
import torch

from echotk.tensor_parallel import tensor_parallel, undo_tensor_parallel
from conftest import load_tool, tiny_gemma3

pytest.importorskip("transformers")
RANKS = 4
COMMON = dict(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
IDS = torch.tensor([[5, 17, 3, 88, 42, 9, 61, 2, 33, 70, 11]])


@pytest.mark.parametrize("row, words", [
    ("q4-static@prof0.5", "profile is read by units"),
    ("q4-self@local@clip-1", "finite number >= 0"),
    ("q4-self@local@clipkeep0", "keep needs a clip > 0"),
    ("q4-self@local@clipnan", "finite number >= 0"),
    ("q4-self@wobble", "unknown modifier @wobble"),
    ("q4-self@local@lastsite", "last_site is read by units 'dynpartial' only"),
    ("q5-self", "transport 'q5'"),
])
def test_bad_rows_are_refused_naming_what_is_wrong(row, words):
    with pytest.raises(ValueError, match=words):
        load_tool("postnorm_study").parse_row(row)


def test_clip_rows_parse_into_the_candidates_fields():
    study = load_tool("postnorm_study")
    _, plain = study.parse_row("q4-self@local@clip2")
    _, kept = study.parse_row("q4-self@local@clipkeep0.5")
    assert (plain.units, plain.residual, plain.clip, plain.keep) == ("self", "local", 2.0, False)
    assert (kept.clip, kept.keep) == (0.5, True)
    _, dyn = study.parse_row("q4-dynpartial@local@lastsite@radial")
    assert (dyn.units, dyn.last_site, dyn.radial) == ("dynpartial", True, True)


@torch.no_grad()
def _logits(study, row):
    model = tiny_gemma3(COMMON)
    spec, candidate = study.parse_row(row)
    gains = kappas = None
    if candidate.units == "partial":
        gains, kappas = study.calibrate_gains(model, IDS[0], RANKS)
    reduce = study.StudyAllReduce(RANKS, spec, candidate, COMMON["hidden_size"], study.post_norm_weights(model),
                                  gains, kappas)
    tensor_parallel(model, ranks=RANKS, allreduce=reduce)
    try:
        return model(IDS).logits
    finally:
        undo_tensor_parallel(model)


@pytest.mark.parametrize("units", ["self", "partial", "dynpartial"])
def test_a_tight_clip_changes_the_correction_and_keeps_the_logits_finite(units):
    # 0.01 of the partial sum's per-token RMS: below a 4-bit error's typical size, so the clamp binds
    study = load_tool("postnorm_study")
    free = _logits(study, f"q4-{units}@local@prof0.5")
    clipped = _logits(study, f"q4-{units}@local@prof0.5@clip0.01")
    kept = _logits(study, f"q4-{units}@local@prof0.5@clipkeep0.01")
    for logits in (free, clipped, kept):
        assert torch.isfinite(logits).all()
    assert not torch.equal(free, clipped)
    assert not torch.equal(clipped, kept)


def test_the_sums_rms_estimate_and_the_radial_part_change_the_correction():
    # dynpartial's factor (r / rho_i of the last same-kind call, or of the last call with @lastsite),
    # dynself's ratio of factors and the radial part left out of the residual each change what is carried
    study = load_tool("postnorm_study")
    own = _logits(study, "q4-self@local@prof0.5@clip1")
    radial = _logits(study, "q4-self@local@prof0.5@clip1@radial")
    dyn = _logits(study, "q4-dynpartial@local@prof0.5@clip1")
    last = _logits(study, "q4-dynpartial@local@prof0.5@clip1@lastsite")
    deferred = _logits(study, "q4-dynself@local@prof0.5@clip1")
    for logits in (own, radial, dyn, last, deferred):
        assert torch.isfinite(logits).all()
    assert not torch.equal(own, radial)
    assert not torch.equal(own, dyn)
    assert not torch.equal(dyn, last)
    assert not torch.equal(own, deferred) and not torch.equal(dyn, deferred)
