"""python -m echotk advise (echotk.advise): the paired comparison, early stop and ranking on
synthetic results, the modelled time against docs/performance.md, the per-site arithmetic and
hazards, spec.json through Python and the CLI, bad input, and short runs on a tiny random Qwen3."""
import dataclasses
import gzip
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import echotk
from echotk.advise import command, hazards, plot, ranking, report, sites, timing
from echotk.advise.candidates import BASELINE, CANDIDATES
from echotk.advise.evaluate import WINDOWS_PER_BATCH, run_windows
from echotk.advise.measure import SiteMeasures, count_wide_groups, find_post_norms
from echotk.advise.ranking import OUT, UNDECIDED, WITHIN, Candidate
from conftest import REPO, load_tool

transformers = pytest.importorskip("transformers")

LIMIT = ranking.budget_limit(1.0)


# --- the paired comparison, the early stop and the ranking, on synthetic results ---------------

def test_paired_interval_is_the_student_t_interval_of_the_differences():
    mean, low, high = ranking.paired_interval([0.1, 0.2, 0.3])
    half = 4.302652729911275 * 0.1 / math.sqrt(3)  # t(0.975, 2) * sd / sqrt(n)
    assert mean == pytest.approx(0.2) and low == pytest.approx(0.2 - half) and high == pytest.approx(0.2 + half)
    assert ranking.paired_interval([0.5])[1:] == (-math.inf, math.inf)
    assert ranking.paired_interval([0.0, 0.0, 0.0]) == (0.0, 0.0, 0.0)


def test_budget_is_a_percentage_and_its_limit_log_one_plus_it():
    assert command.parse_budget("1%") == command.parse_budget("1") == 1.0
    assert command.parse_budget("0.5%") == 0.5
    for bad in ("0", "-1%", "abc", "nan", "inf%"):
        with pytest.raises(Exception, match="percentage"):
            command.parse_budget(bad)
    assert ranking.budget_limit(1.0) == pytest.approx(math.log(1.01))


def _candidate(name, bits=4.25, seconds=1e-3, diffs=(), spec=None):
    return Candidate(name, spec, bits, seconds, list(diffs))


def _synthetic(cost_of, windows):
    """A score function: 16-bit's mean NLL varies by window, each candidate adds cost_of[name](w)."""
    calls = []

    def score(candidate, start):
        calls.append((candidate.name, start))
        return 4.0 + 0.3 * math.sin(start) + cost_of.get(candidate.name, lambda w: 0.0)(start)
    return score, calls


def test_early_stop_drops_a_clearly_costly_candidate_after_one_batch():
    starts = list(range(12))
    rows = [_candidate(BASELINE, 16), _candidate("costly"), _candidate("cheap"), _candidate("close")]
    score, calls = _synthetic({"costly": lambda w: 0.3 + 0.01 * (w % 3), "cheap": lambda w: 1e-3 + 1e-4 * (w % 2),
                               "close": lambda w: LIMIT + 0.01 * (-1) ** w}, starts)
    run_windows(starts, rows, score, LIMIT, progress=False)
    costly, cheap, close = rows[1:]
    assert costly.stopped_after == WINDOWS_PER_BATCH and len(costly.diffs) == WINDOWS_PER_BATCH
    assert costly.verdict(LIMIT) == OUT
    assert len(cheap.diffs) == len(close.diffs) == len(rows[0].diffs) == 12
    assert cheap.verdict(LIMIT) == WITHIN and close.verdict(LIMIT) == UNDECIDED
    assert cheap.diffs[0] == pytest.approx(1e-3)
    assert len(calls) == 12 * 3 + WINDOWS_PER_BATCH  # 16-bit, cheap, close on every window; costly on one batch


def test_the_windows_stop_once_no_candidate_but_16bit_runs():
    rows = [_candidate(BASELINE, 16), _candidate("a"), _candidate("b", 4.5)]
    score, calls = _synthetic({"a": lambda w: 1.0 + 0.01 * w, "b": lambda w: 0.5 - 0.01 * w}, range(16))
    run_windows(list(range(16)), rows, score, LIMIT, progress=False)
    assert len(calls) == 3 * WINDOWS_PER_BATCH
    assert all(c.stopped_after == WINDOWS_PER_BATCH for c in rows[1:])
    assert ranking.recommend(rows, LIMIT).name == BASELINE


def test_ranking_is_wire_bits_then_modelled_time_then_d_and_the_advice_the_first_within():
    within = [0.001, 0.002, 0.0015]
    rows = [_candidate(BASELINE, 16, 4.6e-3, [0, 0, 0]),
            _candidate("slow", 4.25, 5.5e-3, within), _candidate("fast", 4.25, 1.2e-3, within),
            _candidate("wider", 4.5, 1.3e-3, within), _candidate("fast-worse", 4.25, 1.2e-3, [0.004, 0.005, 0.0045]),
            _candidate("fast-costly", 4.25, 1.2e-3, [0.3, 0.31, 0.29]), _candidate("skipped", 8.25, 2e-3)]
    rows[-1].skipped = "8.25 wire bits > --bits-max 4.5"
    ranking.stop_out_of_budget(rows, LIMIT)
    assert [c.name for c in ranking.ranked(rows)] == ["fast", "fast-worse", "slow", "wider", BASELINE]
    assert ranking.recommend(rows, LIMIT).name == "fast"
    assert [c.name for c in ranking.table_order(rows)][-2:] == ["fast-costly", "skipped"]
    rows[2].diffs = [0.01, 0.02, 0.03]  # "fast" now undecided: the next cheapest within is the advice
    assert ranking.recommend(rows, LIMIT).name == "fast-worse"


def test_a_budget_nothing_meets_leaves_16bit_as_the_advice():
    rows = [_candidate(BASELINE, 16, 4.6e-3, [0, 0]), _candidate("a", 4.25, 1e-3, [0.05, 0.06]),
            _candidate("b", 4.5, 1e-3, [0.0, 0.02])]
    assert ranking.recommend(rows, ranking.budget_limit(0.1)).name == BASELINE


def test_every_candidate_is_a_valid_spec_and_the_list_has_16bit_first():
    assert CANDIDATES[0] == (BASELINE, None)
    names = [name for name, _ in CANDIDATES]
    assert len(set(names)) == len(names)
    for _, spec in CANDIDATES[1:]:
        spec.handle(4)


# --- the modelled time: docs/performance.md's floors -------------------------------------------

def test_the_modelled_time_gives_docs_performance_floors_at_1_gib():
    ms = lambda spec, ranks=4: timing.allreduce_seconds(spec, ranks) * 1e3  # noqa: E731
    assert ms(echotk.Spec(compensator="off")) == pytest.approx(1.22, abs=0.005)        # link floor, P = 4
    assert ms(echotk.Spec(compensator="off"), 8) == pytest.approx(1.43, abs=0.005)
    assert ms(echotk.Spec(bits=8, compensator="off")) == pytest.approx(2.37, abs=0.005)
    assert ms(None) == pytest.approx(4.60, abs=0.005)                                   # NCCL measured 4.53
    assert ms(echotk.Spec(residual="local", state_dtype="bf16")) == pytest.approx(1.95, abs=0.005)
    assert ms(echotk.Spec(residual="local")) == pytest.approx(3.25, abs=0.01)           # "3.3 ms"
    assert ms(echotk.Spec()) == pytest.approx(5.53, abs=0.01)                           # 2.93 + 2.63 estimated
    assert timing.hbm_bytes_per_element(echotk.Spec()) == 34                            # "about 34 bytes"


# --- the per-site arithmetic and the hazards ----------------------------------------------------

def test_cancellation_gain_and_partial_sums():
    e = np.zeros((1, 2, 4))
    e[0, 0, 0], e[0, 1, 0] = 1.0, -1.0
    assert sites.cancellation(e)[0] == 0.0
    e[0, 1, 0] = 1.0
    assert sites.cancellation(e)[0] == pytest.approx(math.sqrt(2))
    assert sites.partial_sum_peak(e) == pytest.approx(2.0)
    f, post = sites.post_norm_errors(np.ones((1, 2, 4)), e, 2, lambda k, v: 3.0 * v)
    assert np.array_equal(f, 3.0 * e) and np.array_equal(post, 3.0 * (1.0 - e))
    assert np.nanmax(sites.norm_gain(f, e)) == pytest.approx(3.0)


def test_peak_to_rms_per_site_and_a_non_finite_contribution_named():
    x = np.ones((2, 3, 2, 8))
    x[1, 2, 0, 5] = 8.0
    ratios = sites.peak_to_rms(x)
    assert ratios[0] == ratios[1] == 1.0 and ratios[2] == pytest.approx(8 / math.sqrt((31 + 64) / 32))
    x[0, 1, 1, 0] = np.nan
    with pytest.raises(ValueError, match="pass 0 site 1"):
        sites.peak_to_rms(x)


def _measures(**changes):
    n = 6
    base = dict(kind=np.arange(n) % 2, peak_to_rms=np.full(n, 10.0), wide_groups=np.zeros(n, dtype=np.int64),
                post_norm=np.zeros(n, dtype=bool), gain=np.ones(n),
                relative_error={"echo4": np.full(n, 0.4), "nocomp4": np.full(n, 0.2)},
                cancellation={"echo4": np.array([0.3, 0.3]), "nocomp4": np.array([1.0, 1.0])},
                cancellation_after={"echo4": np.array([1.1, 1.2]), "nocomp4": np.array([1.0, 1.0])},
                tokens=16, passes=2)
    base.update(changes)
    return SiteMeasures(**base)


def test_hazards_name_their_sites():
    assert hazards.find_hazards(_measures()) == []
    peaks = np.full(6, 10.0)
    peaks[[1, 2, 5]] = [150.0, hazards.MASSIVE_PEAK_TO_RMS, 99.9]
    wide = np.zeros(6, dtype=np.int64)
    wide[4] = 3
    found = {h.name: h for h in hazards.find_hazards(_measures(peak_to_rms=peaks, wide_groups=wide,
                                                               post_norm=np.ones(6, dtype=bool),
                                                               gain=np.array([0.3, 1, 2, 100, 5000, 7.0])))}
    assert found["massive activations"].sites == [1, 2]
    assert found["overflow"].sites == [4] and "3 groups" in found["overflow"].detail
    assert found["post-norm"].sites == list(range(6))
    assert "0.3 to 5e+03" in found["post-norm"].detail and "1.15 after them" in found["post-norm"].detail
    assert hazards.site_list([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"


def _tiny(arch):
    common = dict(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, head_dim=16)
    torch.manual_seed(0)
    if arch == "gemma3":
        return transformers.Gemma3ForCausalLM(transformers.Gemma3TextConfig(**common, sliding_window=8)).eval()
    return transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**common)).eval()


def test_post_norms_are_found_where_a_norm_takes_the_site_output():
    ids = torch.tensor([[2, 5, 17, 3, 88, 42]])
    gemma = _tiny("gemma3")
    norms = find_post_norms(gemma, ids)
    layers = gemma.model.layers
    assert norms == [m for layer in layers for m in (layer.post_attention_layernorm, layer.post_feedforward_layernorm)]
    assert find_post_norms(_tiny("qwen3"), ids) == [None] * 4


def test_groups_past_the_fp16_scale_limit_are_counted():
    x = torch.randn(1, 2, 4, 512).numpy().astype(np.float32)
    assert count_wide_groups(x, "cpu").tolist() == [0, 0]
    x[0, 1, 2, 7] = 2e6  # a range past 65504 * 15 in one pushed group and in the sum's
    assert count_wide_groups(x, "cpu").tolist()[0] == 0 and count_wide_groups(x, "cpu").tolist()[1] >= 1


def test_the_tools_compute_through_the_library():
    trace = REPO / "data" / "smollm2" / "trace-p4-moby-2x16.h5"
    pytest.importorskip("h5py")
    ratios = load_tool("rank_sites").site_ratios(str(trace))
    assert sorted(np.argsort(ratios)[-5:].tolist()) == [3, 5, 19, 23, 57]  # docs/outliers.md's outlier sites


# --- spec.json: the JSON of echotk.Spec.to_json, through Python and the CLI --------------------

SPEC = echotk.Spec(bits=8, group=64, compensator="single", beta=0.5, residual="local", rotation="hadamard",
                   state_dtype="bf16")


def test_spec_json_names_every_field_and_loads_back():
    text = report.spec_json(SPEC)
    fields = json.loads(text)
    assert list(fields) == [f.name for f in dataclasses.fields(echotk.Spec)]
    assert echotk.Spec(**fields) == SPEC


def test_spec_json_round_trips_through_spec_from_json():
    if not hasattr(echotk.Spec, "from_json"):
        pytest.skip("echotk.Spec.from_json does not exist in this tree yet")
    assert echotk.Spec.from_json(report.spec_json(SPEC)) == SPEC


def test_spec_json_round_trips_through_echotk_replay(echotk_cli, tmp_path):
    if "--spec-file" not in echotk_cli("replay", "--help").stdout:
        pytest.skip("this build's echotk replay has no --spec-file yet")
    import h5py
    trace = REPO / "data" / "examples" / "synthetic_p4.h5"
    (tmp_path / "spec.json").write_text(report.spec_json(SPEC))
    outputs = {}
    for name, args in (("file", ["--spec-file", tmp_path / "spec.json"]), ("flags", SPEC.cli_args())):
        out = tmp_path / f"{name}.h5"
        echotk_cli("replay", trace, "--out", out, "--quiet", "--save-outputs", *args)
        with h5py.File(out, "r") as f:
            outputs[name] = f["outputs"][:]
    np.testing.assert_array_equal(outputs["file"].view(np.uint32), outputs["flags"].view(np.uint32))


def test_stream_candidates_run_only_where_a_site_has_a_post_norm():
    import argparse
    stream = {name for name, spec in CANDIDATES
              if spec is not None and spec.compensator_units == "stream" and spec.compensator != "deficit"}
    assert stream == {"stream-local", "stream-local-sqrt-clip1", "stream-local-sqrt-clip1-sum", "rot-stream-local",
                      "echo8-stream-local"}
    for post_norm, device, reason in ((True, "cpu", None), (False, "cpu", "no site has a post-norm"),
                                      (True, "cuda", None)):
        args = argparse.Namespace(ranks=4, bits_max=8.25, device=device)
        found = {c.name: c for c in command.candidates_for(args, post_norm=post_norm)}
        for name in stream:
            why = reason
            if why is None:
                assert not found[name].skipped
            else:
                assert why in found[name].skipped
        assert not found["echo4"].skipped
        assert not found["deficit-clip1"].skipped           # a loop of its own, pre-norm or not


# --- the command on a tiny random Qwen3 ---------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-qwen3")
    return str(load_tool("random_model").write_random_model(str(folder), "tiny"))


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    path = tmp_path_factory.mktemp("text") / "moby.txt"
    with gzip.open(REPO / "data" / "smollm2" / "moby-dick.txt.gz", "rt", encoding="utf-8") as f:
        path.write_text(f.read(20000))
    return str(path)


def advise(*args):
    """python -m echotk advise in this process: (exit code, stdout, stderr)."""
    import contextlib
    import io
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = command.main([*map(str, args), "--no-progress"])
        except SystemExit as e:  # argparse's own refusals
            code = e.code
    return code, out.getvalue(), err.getvalue()


def test_a_short_run_advises_and_writes_every_output(tiny_model, text, tmp_path):
    out = tmp_path / "advice"
    code, stdout, stderr = advise("--model", tiny_model, "--text", text, "--windows", 2, "--length", 128,
                                  "--out", out)
    assert code == 0, stderr
    assert sorted(os.listdir(out)) == ["advice.csv", "advice.md", "advice.png", "spec.json"]
    import csv
    with open(out / "advice.csv") as f:
        rows = list(csv.DictReader(f))
    assert {r["candidate"] for r in rows} == {name for name, _ in CANDIDATES}
    chosen = [r for r in rows if r["recommended"] == "1"]
    assert len(chosen) == 1 and chosen[0]["verdict"] == "recommended"
    spec = echotk.Spec(**json.loads((out / "spec.json").read_text()))
    assert json.loads(chosen[0]["spec"]) == dataclasses.asdict(spec)
    assert float(chosen[0]["ci_high"]) <= LIMIT and float(chosen[0]["wire_bits"]) <= 4.5
    echotk.AllReduce(ranks=4, spec=spec)(torch.randn(4, 300).bfloat16())
    skipped = [r for r in rows if r["verdict"].startswith("skipped")]
    # 8-bit above --bits-max; stream units on a model without post-norms (their site-units rows).
    assert {r["candidate"] for r in skipped} == {"echo8", "nocomp8", "stream-local", "stream-local-sqrt-clip1",
                                                 "stream-local-sqrt-clip1-sum", "rot-stream-local",
                                                 "echo8-stream-local"}
    assert f"Use {chosen[0]['candidate']}" in stdout and "wire bits" in stdout and "95% CI (paired)" in stdout
    assert "## Hazards" in (out / "advice.md").read_text()
    assert (out / "advice.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_budget_nothing_meets_says_so_recommends_16bit_and_exits_2(tiny_model, text, tmp_path):
    # Within 4 wire bits no candidate can be: a random model's 4-bit rows can land on either side
    # of 16-bit, so a tiny budget alone would not decide it (the synthetic tests above cover that).
    out = tmp_path / "advice"
    out.mkdir()
    (out / "spec.json").write_text("{}")  # an earlier run's advice: it must not outlive this one
    code, stdout, stderr = advise("--model", tiny_model, "--text", text, "--windows", 2, "--length", 128,
                                  "--bits-max", 4, "--out", out)
    assert code == 2
    assert "meets the budget" in stderr and "16-bit" in stderr
    assert "use the 16-bit (exact) all-reduce" in stdout
    assert sorted(os.listdir(out)) == ["advice.csv", "advice.md", "advice.png"]
    assert "use the 16-bit (exact) all-reduce" in (out / "advice.md").read_text()


def _unknown_gguf(path):
    gguf = pytest.importorskip("gguf")  # writing the file needs the gguf package (absent on some GPU images)
    writer = gguf.GGUFWriter(str(path), "gpt2")
    writer.add_tensor("t", np.zeros(4, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.parametrize("case", ["no text", "no gguf", "no folder", "no config", "no weights", "gpt2 folder",
                                  "gpt2 gguf", "one window", "bad budget", "zero budget", "out is a file",
                                  "too many ranks", "text too short"])
def test_bad_input_exits_2_with_a_message_and_writes_nothing(case, tiny_model, text, tmp_path):
    out = tmp_path / "advice"
    args = {"--model": tiny_model, "--text": text, "--windows": 2, "--length": 128, "--out": out}
    words = {"no text": "no such file", "no gguf": "no such file", "no folder": "no such folder",
             "no config": "no config.json", "no weights": "no *.safetensors", "gpt2 folder": "'GPT2LMHeadModel'",
             "gpt2 gguf": "'gpt2'", "one window": "--windows", "bad budget": "percentage",
             "zero budget": "positive", "out is a file": "is a file", "too many ranks": "ranks",
             "text too short": "do not fit"}[case]
    gpt2 = tmp_path / "gpt2"
    gpt2.mkdir()
    (gpt2 / "config.json").write_text(json.dumps({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"}))
    if case == "no text":
        args["--text"] = tmp_path / "missing.txt"
    elif case == "no gguf":
        del args["--model"]
        args["--gguf"] = tmp_path / "missing.gguf"
    elif case == "no folder":
        args["--model"] = tmp_path / "missing"
    elif case == "no config":
        args["--model"] = tmp_path
    elif case == "no weights":
        (gpt2 / "config.json").write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"]}))
        args["--model"] = gpt2
    elif case == "gpt2 folder":
        args["--model"] = gpt2
    elif case == "gpt2 gguf":
        del args["--model"]
        args["--gguf"] = _unknown_gguf(tmp_path / "gpt2.gguf")
    elif case == "one window":
        args["--windows"] = 1
    elif case == "bad budget":
        args["--budget"] = "lots"
    elif case == "zero budget":
        args["--budget"] = "0%"
    elif case == "out is a file":
        out.write_text("keep me")
    elif case == "too many ranks":
        args["--ranks"] = 9
    elif case == "text too short":
        short = tmp_path / "short.txt"
        short.write_text("Call me Ishmael.")
        args["--text"] = short
    code, stdout, stderr = advise(*[str(x) for kv in args.items() for x in kv])
    assert code == 2 and words in stderr, stderr
    assert stdout == ""
    if case == "out is a file":
        assert out.read_text() == "keep me"
    else:
        assert not out.exists()


def test_a_failure_while_writing_leaves_no_output(tiny_model, text, tmp_path, monkeypatch):
    out = tmp_path / "advice"

    def broken_plot(advice, path):
        with open(path, "w") as f:
            f.write("half")
        raise RuntimeError("the plot failed")

    monkeypatch.setattr(plot, "draw", broken_plot)
    with pytest.raises(RuntimeError, match="the plot failed"):
        command.main(["--model", tiny_model, "--text", text, "--windows", "2", "--length", "128", "--out", str(out),
                      "--no-progress"])
    assert os.listdir(out) == []


def test_python_m_echotk_runs_advise():
    result = subprocess.run([sys.executable, "-m", "echotk", "advise", "--help"], capture_output=True, text=True,
                            cwd="/")
    assert result.returncode == 0 and "--bits-max" in result.stdout and "--budget" in result.stdout
    assert "advise" in subprocess.run([sys.executable, "-m", "echotk", "--help"], capture_output=True,
                                      text=True, cwd="/").stdout
