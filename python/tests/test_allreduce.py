"""echotk.AllReduce against `echotk replay` (the C++ reference run by the CLI): bit for bit on the
bundled traces and on random ones, for every knob; bad input raises; state and report."""

import h5py
import numpy as np
import pytest
import torch

import echotk
from echotk import _C
from echotk.capture import write_trace
from conftest import REPO, bits

TORCH = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
SHORT = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def run_op(contributions, dtype, spec, direction="forward"):
    """Every site of every pass through echotk.AllReduce, reset per pass: outputs as float32
    [passes, sites, n] and the reports."""
    passes, sites, ranks, n = contributions.shape
    ar = echotk.AllReduce(ranks=ranks, spec=spec)
    outputs, reports = np.zeros((passes, sites, n), np.float32), []
    for p in range(passes):
        ar.reset()
        for s in range(sites):
            parts = torch.from_numpy(contributions[p, s]).to(TORCH[dtype])
            outputs[p, s] = ar(parts, direction=direction).float().numpy()
            reports.append(ar.report)
    return outputs, reports


def replay(echotk_cli, trace, spec, tmp_path, *extra):
    out = tmp_path / "replay.h5"
    echotk_cli("replay", trace, "--out", out, "--save-outputs", "--quiet", *spec.cli_args(), *extra)
    with h5py.File(out, "r") as f:
        return f["outputs"][:], f["injected_norm"][:]


def assert_same_as_replay(echotk_cli, trace, spec, tmp_path, *extra):
    with h5py.File(trace, "r") as f:
        contributions = f["contributions"][:]
        dtype = f["contributions"].attrs["dtype"]
        dtype = dtype.decode() if isinstance(dtype, bytes) else dtype
        direction = f.attrs["direction"]
        direction = direction.decode() if isinstance(direction, bytes) else direction
    spec = echotk.Spec(**{**spec.__dict__, "dtype": SHORT[dtype]})
    expected, injected = replay(echotk_cli, trace, spec, tmp_path, *extra)
    got, reports = run_op(contributions, dtype, spec, direction)
    ranks = contributions.shape[2]
    for r in range(ranks):  # every rank receives the same bits
        np.testing.assert_array_equal(bits(expected[:, :, r]), bits(got))
    # The injected error is computed by the same float64 formula in the same order.
    np.testing.assert_array_equal(np.array([r.injected_error for r in reports]), injected.reshape(-1))
    assert np.any(got != 0), "an all-zero output cannot show agreement"
    return reports


SPECS = [
    echotk.Spec(),
    echotk.Spec(compensator="off"),
    echotk.Spec(compensator="single", residual="local", beta=0.5),
    echotk.Spec(bits=8, quantizer="naive"),
    echotk.Spec(bits=3, group=64, quantizer="symmetric", state_dtype="bf16"),
    echotk.Spec(algorithm="ring", bits=5),
    echotk.Spec(exact_max_count=1 << 20),
]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"b{s.bits}-{s.quantizer}-{s.compensator}-{s.algorithm}-x{s.exact_max_count}")
def test_bundled_synthetic_trace_equals_replay(echotk_cli, tmp_path, spec):
    assert_same_as_replay(echotk_cli, REPO / "data/examples/synthetic_p4.h5", spec, tmp_path)


@pytest.mark.parametrize("spec", SPECS[:2], ids=["dual", "off"])
def test_bundled_smollm2_trace_equals_replay(echotk_cli, tmp_path, spec):
    assert_same_as_replay(echotk_cli, REPO / "data/smollm2/trace-p4-moby-2x16.h5", spec, tmp_path)


@pytest.mark.parametrize("spec", SPECS[:2], ids=["dual", "off"])
def test_bundled_gemma3_trace_equals_replay(echotk_cli, tmp_path, spec):
    assert_same_as_replay(echotk_cli, REPO / "data/gemma3/trace-gemma3-p4-moby-2x16.h5", spec, tmp_path)


RANDOM_CASES = [
    # ranks, n, dtype, direction, spec
    (1, 1, "bfloat16", "forward", echotk.Spec()),
    (2, 127, "float32", "forward", echotk.Spec(group=16)),
    (3, 1000, "float16", "forward", echotk.Spec(residual="local", state_dtype="bf16")),
    (5, 4099, "bfloat16", "backward", echotk.Spec()),
    (8, 2053, "float32", "backward", echotk.Spec(compensator="single", bits=2, group=1024)),
    (7, 777, "float16", "backward", echotk.Spec(quantizer="naive", bits=6)),
    (4, 300, "bfloat16", "forward", echotk.Spec(exact_max_count=300)),
]


@pytest.mark.parametrize("case", RANDOM_CASES, ids=lambda c: f"P{c[0]}-n{c[1]}-{c[2]}-{c[3]}")
def test_random_traces_equal_replay(echotk_cli, tmp_path, case):
    ranks, n, dtype, direction, spec = case
    rng = np.random.default_rng(ranks * 1000 + n)
    # Heavy-tailed values over several magnitudes, and some exact zeros and negative zeros.
    x = rng.standard_t(3, size=(2, 4, ranks, n)) * np.exp(rng.normal(0, 2, size=(2, 4, ranks, 1)))
    x = x.astype(np.float32)
    x.reshape(-1)[:: 97] = 0.0
    x.reshape(-1)[1:: 101] = -0.0
    trace = tmp_path / "random.h5"
    write_trace(str(trace), x, SHORT[dtype], ranks, direction=direction)
    reports = assert_same_as_replay(echotk_cli, trace, spec, tmp_path)
    if direction == "backward":
        assert any(r.scale_exponent != 0 for r in reports)
    if spec.exact_max_count >= n:
        assert all(r.exact_path for r in reports)


def test_nonfinite_inputs_poison_groups_as_replay(echotk_cli, tmp_path):
    rng = np.random.default_rng(7)
    x = rng.normal(size=(1, 3, 4, 600)).astype(np.float32)
    x[0, 1, 2, 5] = np.nan
    x[0, 2, 0, 300] = np.inf
    trace = tmp_path / "nonfinite.h5"
    write_trace(str(trace), x, "bf16", 4)
    reports = assert_same_as_replay(echotk_cli, trace, echotk.Spec(), tmp_path, "--allow-nonfinite")
    assert reports[1].nonfinite_inputs == 1 and reports[1].poisoned_groups >= 1
    assert reports[0].nonfinite_inputs == 0 and reports[0].poisoned_groups == 0


def test_reset_starts_again_and_directions_keep_their_own_state():
    rng = np.random.default_rng(3)
    seq = [torch.from_numpy(rng.normal(size=(4, 513)).astype(np.float32)).bfloat16() for _ in range(3)]
    ar = echotk.AllReduce(ranks=4)
    first = [ar(p) for p in seq]
    ar(seq[0], direction="backward")  # must not disturb the forward state
    ar.reset()
    again = [ar(p) for p in seq]
    for a, b in zip(first, again):
        np.testing.assert_array_equal(bits(a), bits(b))
    fresh = echotk.AllReduce(ranks=4)
    fresh(seq[0])
    carried = fresh(seq[1])
    assert not np.array_equal(bits(carried), bits(echotk.AllReduce(ranks=4)(seq[1]))), \
        "the compensator state must carry from one call to the next"


def test_numpy_raw_bf16_bits_give_the_torch_result():
    rng = np.random.default_rng(11)
    parts = torch.from_numpy(rng.normal(size=(3, 1000)).astype(np.float32)).bfloat16()
    expected = echotk.AllReduce(ranks=3)(parts)
    raw = parts.view(torch.int16).numpy().view(np.uint16).copy()
    got = echotk.AllReduce(ranks=3)(raw)
    assert got.dtype == torch.uint16
    np.testing.assert_array_equal(bits(expected), got.numpy())


def test_exact_allreduce_is_the_rank_order_fp32_sum():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(5, 333)).astype(np.float32)
    parts = torch.from_numpy(x).bfloat16()
    out = echotk.ExactAllReduce(ranks=5)(parts)
    acc = parts[0].float()
    for r in range(1, 5):
        acc = acc + parts[r].float()
    np.testing.assert_array_equal(bits(out), bits(acc.bfloat16()))


def test_report_names_the_errors():
    rng = np.random.default_rng(2)
    parts = torch.from_numpy(rng.normal(size=(4, 4096)).astype(np.float32)).bfloat16()
    ar = echotk.AllReduce(ranks=4)
    assert ar.report is None
    exact = parts.float().double().sum(0)
    out = ar(parts)
    r = ar.report
    assert r.direction == "forward" and not r.exact_path and r.poisoned_groups == 0
    assert r.net_error == pytest.approx(float((out.double() - exact).norm()), rel=1e-9)
    assert 0 < r.relative_error < 0.2 and r.correction_norm == 0.0  # the first call has no correction
    ar(parts)
    assert ar.report.correction_norm > 0


def test_torch_compile_gives_the_eager_bits():
    rng = np.random.default_rng(9)
    seq = [torch.from_numpy(rng.normal(size=(4, 700)).astype(np.float32)) for _ in range(3)]

    def passes(ar, xs):
        ar.reset()
        return [ar(x.bfloat16()) for x in xs]

    eager = passes(echotk.AllReduce(ranks=4), seq)
    compiled_ar = echotk.AllReduce(ranks=4)
    compiled = torch.compile(passes, backend="aot_eager", fullgraph=False)(compiled_ar, seq)
    for a, b in zip(eager, compiled):
        np.testing.assert_array_equal(bits(a), bits(b))


def test_opcheck_of_the_custom_op():
    parts = torch.randn(4, 300).bfloat16()
    m1 = torch.zeros(4, 300)
    m2 = torch.zeros(4, 300)
    torch.library.opcheck(torch.ops.echotk.allreduce.default,
                          (parts, m1, m2, echotk.Spec().key(), 4, "forward", True))
    torch.library.opcheck(torch.ops.echotk.exact_allreduce.default, (parts, "bf16", 4))


BAD_CALLS = [
    (lambda ar: ar(torch.zeros(4, 10, 2, dtype=torch.bfloat16)), "shape"),
    (lambda ar: ar(torch.zeros(3, 10, dtype=torch.bfloat16)), "P = 4"),
    (lambda ar: ar(torch.zeros(4, 0, dtype=torch.bfloat16)), "no elements"),
    (lambda ar: ar(torch.zeros(4, 10, dtype=torch.float32)), "dtype"),
    (lambda ar: ar(torch.zeros(10, 4, dtype=torch.bfloat16).t()), "contiguous"),
    (lambda ar: ar(torch.zeros(4, 10, dtype=torch.bfloat16, device="meta")), "meta"),
    (lambda ar: ar(torch.zeros(4, 10, dtype=torch.bfloat16), direction="sideways"), "direction"),
]


@pytest.mark.parametrize("call,words", BAD_CALLS, ids=[w for _, w in BAD_CALLS])
def test_bad_calls_raise_value_error_naming_the_problem(call, words):
    with pytest.raises(ValueError, match=words):
        call(echotk.AllReduce(ranks=4))


def test_size_change_without_reset_is_refused():
    ar = echotk.AllReduce(ranks=2)
    ar(torch.ones(2, 10, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="reset"):
        ar(torch.ones(2, 11, dtype=torch.bfloat16))
    ar.reset()
    ar(torch.ones(2, 11, dtype=torch.bfloat16))


@pytest.mark.parametrize("kwargs,words", [
    ({"ranks": 0}, "ranks"), ({"ranks": 9}, "ranks"),
    ({"spec": {"bits": 9}}, "bits"), ({"spec": {"group": 100}}, "group"),
    ({"spec": {"eta": 1.5}}, "eta"), ({"spec": {"quantizer": "round"}}, "quantizer"),
    ({"spec": {"beta1": 1.0}}, "beta1"), ({"spec": {"algorithm": "ring", "residual": "local"}}, "ring"),
])
def test_bad_specs_raise_value_error(kwargs, words):
    with pytest.raises(ValueError, match=words):  # from Spec (a field) or AllReduce (the whole spec)
        if "spec" in kwargs:
            kwargs = {**kwargs, "spec": echotk.Spec(**kwargs["spec"])}
        echotk.AllReduce(**{"ranks": 4, **kwargs})


def test_bad_dtype_names_raise():
    with pytest.raises(ValueError, match="dtype"):
        echotk.Spec(dtype="int8")


def test_cuda_without_a_cuda_build_says_so():
    if _C.HAS_CUDA:
        pytest.skip("this build has the CUDA emulation kernel")
    with pytest.raises(RuntimeError, match="built without CUDA"):
        echotk.AllReduce(ranks=4, device="cuda")


def test_extension_rejects_bad_arrays_directly():
    handle = echotk.Spec().handle(2)
    report = np.zeros(_C.REPORT_SLOTS, np.float64)
    state = np.zeros((2, 8), np.float32)
    out = np.zeros(8, np.uint16)
    with pytest.raises(ValueError, match="dtype"):
        _C.allreduce(handle, "forward", np.zeros((2, 8), np.float64), out, state, state, True, report)
    with pytest.raises(ValueError, match="contiguous"):
        _C.allreduce(handle, "forward", np.zeros((8, 2), np.uint16).T, out, state, state, True, report)
    with pytest.raises(ValueError, match="state m1"):
        _C.allreduce(handle, "forward", np.zeros((2, 8), np.uint16), out, state[:, :4].copy(), state,
                     True, report)


def test_state_reads_the_averages_of_each_direction():
    x = torch.randn(3, 500).bfloat16()
    ar = echotk.AllReduce(ranks=3)
    assert ar.state("forward") is None  # before any call
    ar(x)
    m1, m2 = ar.state("forward")
    assert m1.shape == m2.shape == (3, 500) and torch.any(m1 != 0) and torch.any(m2 != 0)
    assert ar.state("backward") is None
    ar.reset()
    assert ar.state("forward") is None
    single = echotk.AllReduce(ranks=3, spec=echotk.Spec(compensator="single"))
    single(x)
    assert single.state()[1] is None
    off = echotk.AllReduce(ranks=3, spec=echotk.Spec(compensator="off"))
    off(x)
    assert off.state() is None


def test_reset_of_one_direction_keeps_the_other():
    ar = echotk.AllReduce(ranks=4, spec=echotk.Spec(bits=4, dtype="fp32"))
    x = torch.randn(4, 256)
    ar(x)
    ar(x, direction="backward")
    ar.reset("backward")
    assert ar.state("forward") is not None and ar.state("backward") is None
    ar.reset()
    assert ar.state("forward") is None
    with pytest.raises(ValueError, match="direction"):
        ar.reset("sideways")
    with pytest.raises(ValueError, match="direction"):
        echotk.ExactAllReduce(ranks=4).reset("sideways")
