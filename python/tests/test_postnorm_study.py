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


def test_closed_rows_parse_and_settings_the_loop_cannot_take_are_refused():
    study = load_tool("postnorm_study")
    _, closed = study.parse_row("q4rot64-closed@local@clip0.5@eta1")
    fields = (closed.units, closed.residual, closed.profile, closed.clip, closed.eta)
    assert fields == ("closed", "local", 1.0, 0.5, 1.0)
    with pytest.raises(ValueError, match="local residual"):
        study.Candidate(units="closed")
    for row in ("q4-closed@clipkeep1", "q4-closed@pre1"):
        with pytest.raises(ValueError, match="are refused"):
            study.parse_row(row)


# What the deficit's fp32 arithmetic may leave against the float64 sums, relative to the largest
# partial sum: each call rounds x', u and u - c once per element (a few fp32 ulps of the partial
# sums), and the loop adds up to six calls' worth, times the post-norm's gain w / r (about 3 here).
DEFICIT_TOLERANCE = 1e-5


@pytest.mark.parametrize("with_norms", [False, True])
def test_the_closed_loops_state_is_what_the_stream_lacks(with_norms):
    # Summed over ranks, the state after each call is the sum over calls of the exact sum less the
    # delivered one, through each post-norm's first-order gain diag(w) / r of the delivered row (the
    # identity without a post-norm): what the loop has not yet returned, whatever it applied.
    study = load_tool("postnorm_study")
    from echotk import Spec
    hidden, tokens, sites = 64, 6, 6
    gen = torch.Generator().manual_seed(3)
    norms = [((torch.rand(hidden, generator=gen) * 2 + 0.2) * 10.0 ** (k % 3 - 1)) if with_norms else None
             for k in range(sites)]
    candidate = study.Candidate(units="closed", residual="local", profile=1.0, clip=1.0 if with_norms else 0.0)
    reduce = study.StudyAllReduce(RANKS, Spec(compensator="off"), candidate, hidden, norms)
    deficit = torch.zeros(tokens * hidden, dtype=torch.float64)
    applied = False
    for k in range(sites):
        parts = (torch.randn(RANKS, tokens * hidden, generator=gen) * 3).bfloat16()
        y = reduce(parts).double()
        z = parts.double().sum(dim=0)
        applied = applied or not torch.equal(y, reduce._inner(parts.float().contiguous()).bfloat16().double())
        if norms[k] is None:
            deficit += z - y
        else:
            r = y.reshape(tokens, hidden).pow(2).mean(dim=1).sqrt()
            deficit += ((z - y).reshape(tokens, hidden) * norms[k].double() / r[:, None]).reshape(-1)
        state = reduce._states[0].m1.double().sum(dim=0)
        scale = parts.double().abs().max() * (1.0 if norms[k] is None else float((norms[k].max() / r.min())))
        assert (state - deficit).abs().max() <= DEFICIT_TOLERANCE * scale, f"call {k}"
    assert applied, "the loop never changed a delivered output: the test would not see a wrong update"


def test_the_closed_loop_changes_the_logits_and_keeps_them_finite():
    study = load_tool("postnorm_study")
    off = _logits(study, "q4-self@local@eta0")
    closed = _logits(study, "q4-closed@local@clip1")
    radial = _logits(study, "q4-closed@local@clip1@radial")
    for logits in (closed, radial):
        assert torch.isfinite(logits).all()
    assert not torch.equal(off, closed)
    assert not torch.equal(closed, radial)
