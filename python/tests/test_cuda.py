"""GPU checks (skipped without a CUDA device): echotk.AllReduce(device="cuda"), the one-GPU
emulation kernel, equals the CPU reference bit for bit (outputs, compensator states after several
calls, reports) across the configuration sweep; the exact all-reduce on the GPU equals the
reference; bad input raises; a tensor-parallel forward gives the same bits eager, under
torch.compile and replayed from a CUDA graph."""
import math

import numpy as np
import pytest
import torch

import echotk
from echotk import _C
from echotk._util import TORCH_DTYPES
from conftest import bits, contributions

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
needs_kernel = pytest.mark.skipif(not getattr(_C, "HAS_CUDA", False),
                                  reason="echotk built without CUDA (-C cmake.define.ECHO_PYTHON_CUDA=ON)")

# The GPU report's norms sum squares over elements in torch's order, the reference in index order:
# float64 sums of n <= 1e5 terms agree to n * 2^-52 relatively, far inside this bound.
kNormRelTolerance = 1e-9


def assert_same_report(cpu, gpu):
    for field in ("direction", "poisoned_groups", "scale_exponent", "exact_path", "nonfinite_inputs"):
        assert getattr(cpu, field) == getattr(gpu, field), f"{field}: cpu {getattr(cpu, field)} gpu {getattr(gpu, field)}"
    for field in ("injected_error", "net_error", "correction_norm", "sum_norm"):
        c, g = getattr(cpu, field), getattr(gpu, field)
        assert (math.isnan(c) and math.isnan(g)) or math.isclose(c, g, rel_tol=kNormRelTolerance, abs_tol=0.0) \
            or c == g, f"{field}: cpu {c!r} gpu {g!r}"


def compare(spec, ranks, n, directions=("forward",) * 3, nonfinite=False, seed=0):
    """The same calls (one pass, or two with a reset between) through the CPU reference and the GPU
    kernel: every output, report and the final states bit for bit."""
    try:
        spec.handle(ranks)
    except ValueError as e:
        pytest.skip(f"the reference refuses this configuration: {e}")
    cpu = echotk.AllReduce(ranks, spec, device="cpu")
    gpu = echotk.AllReduce(ranks, spec, device="cuda")
    nonzero = False
    for call, direction in enumerate(directions):
        if direction == "reset":
            cpu.reset()
            gpu.reset()
            continue
        x = contributions(ranks, n, spec.dtype, seed * 100 + call, nonfinite)
        want = cpu(x, direction=direction)
        got = gpu(x.cuda(), direction=direction)
        np.testing.assert_array_equal(bits(want), bits(got), err_msg=f"call {call} ({direction}) output")
        assert_same_report(cpu.report, gpu.report)
        nonzero |= bool(torch.any(want.float() != 0))
    assert nonzero, "all-zero outputs cannot show agreement"
    for direction in ("forward", "backward"):
        want, got = cpu.state(direction), gpu.state(direction)
        assert (want is None) == (got is None), direction
        if want is not None:
            np.testing.assert_array_equal(bits(want[0]), bits(got[0]), err_msg=f"{direction} m1")
            if want[1] is not None:
                np.testing.assert_array_equal(bits(want[1]), bits(got[1]), err_msg=f"{direction} m2")


@needs_kernel
@pytest.mark.parametrize("bits_", [2, 3, 4, 5, 6, 7, 8])
@pytest.mark.parametrize("quantizer", ["zero-aware", "naive", "symmetric"])
def test_bits_and_quantizers(bits_, quantizer):
    compare(echotk.Spec(bits=bits_, quantizer=quantizer), 4, 4099, seed=bits_)


@needs_kernel
@pytest.mark.parametrize("compensator", ["dual", "single", "off"])
@pytest.mark.parametrize("residual", ["global", "local"])
@pytest.mark.parametrize("state_dtype", ["fp32", "bf16"])
def test_compensator_modes(compensator, residual, state_dtype):
    spec = echotk.Spec(compensator=compensator, residual=residual, state_dtype=state_dtype, beta=0.5)
    compare(spec, 4, 3000, directions=("forward", "forward", "backward", "forward", "backward"))


@needs_kernel
@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("group", [32, 128, 256])
def test_dtypes_and_groups(dtype, group):
    compare(echotk.Spec(dtype=dtype, group=group), 3, 5000)


@needs_kernel
@pytest.mark.parametrize("ranks", range(1, 9))
@pytest.mark.parametrize("n", [1, 7, 129, 1000, 65537])
def test_ranks_and_awkward_sizes(ranks, n):
    compare(echotk.Spec(), ranks, n, seed=ranks)


@needs_kernel
@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
def test_backward_scaling_and_reset(dtype):
    compare(echotk.Spec(dtype=dtype), 4, 4099,
            directions=("backward", "backward", "reset", "backward", "forward", "backward"))


@needs_kernel
@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("n", [100, 4096])
def test_exact_small_message_path(dtype, n):
    compare(echotk.Spec(dtype=dtype, exact_max_count=4096), 4, n,
            directions=("forward", "forward", "backward", "backward"))


@needs_kernel
@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_non_finite_inputs(dtype, direction):
    compare(echotk.Spec(dtype=dtype), 4, 4099, directions=(direction,) * 3, nonfinite=True)


@needs_kernel
def test_without_norms_the_report_still_has_the_device_fields():
    x = contributions(4, 1000, "bf16", 1, nonfinite=True)
    ar = echotk.AllReduce(4, device="cuda", norms=False)
    ref = echotk.AllReduce(4, device="cpu")
    np.testing.assert_array_equal(bits(ref(x)), bits(ar(x.cuda())))
    assert ar.report.poisoned_groups == ref.report.poisoned_groups > 0
    assert ar.report.net_error is None and ar.report.relative_error is None


@needs_kernel
def test_bad_input_raises():
    ar = echotk.AllReduce(4, device="cuda")
    x = contributions(4, 256, "bf16", 2).cuda()
    with pytest.raises(ValueError, match="cpu"):
        ar(x.cpu())
    with pytest.raises(ValueError, match="dtype"):
        ar(x.float())
    with pytest.raises(ValueError, match="contiguous"):
        ar(torch.cat([x, x], dim=1)[:, ::2])
    with pytest.raises(ValueError, match="shape"):
        ar(x[:3])
    ar(x)
    with pytest.raises(ValueError, match="reset"):
        ar(x[:, :128].contiguous())  # another size within a pass
    # The binding's own checks, for callers that bypass the Python layer.
    handle = echotk.Spec().handle(4)
    state = torch.empty(_C.emulate_state_bytes(handle, 256), dtype=torch.uint8, device="cuda")
    ws = torch.empty(_C.WORKSPACE_BYTES, dtype=torch.uint8, device="cuda")
    out = torch.empty(256, dtype=torch.bfloat16, device="cuda")
    none = torch.empty(0, device="cuda")
    no_gains = torch.empty(0, dtype=torch.uint8, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    with pytest.raises(ValueError, match="out is on cpu"):
        _C.allreduce_cuda(handle, "forward", x, out.cpu(), state, True, ws, none, -1, 0.0, no_gains, None, stream)
    with pytest.raises(ValueError, match="state has shape"):
        _C.allreduce_cuda(handle, "forward", x, out, state[:-1], True, ws, none, -1, 0.0, no_gains, None, stream)
    with pytest.raises(ValueError, match="workspace must be uint8"):
        _C.allreduce_cuda(handle, "forward", x, out, state, True, ws.view(torch.int8), none, -1, 0.0, no_gains, None,
                          stream)
    with pytest.raises(ValueError, match="parts is on cpu"):
        _C.allreduce_cuda(handle, "forward", x.cpu(), out, state, True, ws, none, -1, 0.0, no_gains, None, stream)


@needs_kernel
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_groups_past_the_fp16_scale_stay_finite(dtype):
    """The default spec's wide groups (docs/numerics.md 2.4): sums whose group scale overflows fp16
    come out finite, the same bits as the CPU reference."""
    x = contributions(4, 4099, dtype, 21)
    x[1, 200] = 3.0e6
    x[2, 1500] = -2.0e7
    x[0, 3000] = 1.0e30
    spec = echotk.Spec(dtype=dtype)
    cuda, cpu = echotk.AllReduce(4, spec, device="cuda"), echotk.AllReduce(4, spec, device="cpu")
    for call in range(2):
        got = cuda(x.cuda())
        np.testing.assert_array_equal(bits(cpu(x)), bits(got), err_msg=f"call {call}")
        assert torch.isfinite(got).all() and cuda.report.poisoned_groups == 0


@needs_kernel
@pytest.mark.parametrize("spec", [echotk.Spec(rotation="hadamard"), echotk.Spec(overflow_groups="poison"),
                                  echotk.Spec(rotation="hadamard", group=256, residual="local"),
                                  echotk.Spec(rotation="hadamard", overflow_groups="poison")],
                         ids=["rotation", "poison", "rotation-g256-local", "rotation-poison"])
def test_transport_options_match_the_reference(spec):
    """The emulation implements both overflow modes (wide groups, the default, and poison) and the
    rotation (docs/numerics.md 2.4, 2.6)."""
    compare(spec, 4, 4099, directions=("forward", "forward", "backward", "forward"))


@needs_kernel
@pytest.mark.parametrize("spec", [echotk.Spec(outliers=1), echotk.Spec(outliers=2, rotation="hadamard")],
                         ids=["outliers1", "outliers2-rotation"])
def test_transport_options_raise_not_abort(spec):
    """Outliers sent exactly are CPU reference only (docs/outliers.md): echotk.AllReduce refuses them
    up front, and the emulation's own checks refuse them to a caller of the op or of the binding."""
    with pytest.raises(ValueError, match="CUDA path implements outliers 0 only"):
        echotk.AllReduce(4, spec, device="cuda")
    x = contributions(4, 256, "bf16", 5).cuda()
    handle = spec.handle(4)
    state = torch.empty(_C.emulate_state_bytes(handle, 256), dtype=torch.uint8, device="cuda")
    with pytest.raises((ValueError, RuntimeError), match="CPU reference only"):
        torch.ops.echotk.emulate_allreduce(x, state, spec.key(), 4, "forward", True, True)
    ws = torch.empty(_C.WORKSPACE_BYTES, dtype=torch.uint8, device="cuda")
    out = torch.empty(256, dtype=torch.bfloat16, device="cuda")
    with pytest.raises((ValueError, RuntimeError), match="CPU reference only"):
        _C.allreduce_cuda(handle, "forward", x, out, state, True, ws, torch.empty(0, device="cuda"), -1, 0.0,
                          torch.empty(0, dtype=torch.uint8, device="cuda"), None,
                          torch.cuda.current_stream().cuda_stream)
    echotk.AllReduce(4, device="cuda")(x)  # the GPU is still usable


@needs_kernel
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_a_tensor_on_another_gpu_is_refused():
    with torch.cuda.device(0):
        ar = echotk.AllReduce(2, device="cuda")
    with pytest.raises(ValueError, match="cuda:1"):
        ar(torch.zeros(2, 8, dtype=torch.bfloat16, device="cuda:1"))


@needs_kernel
def test_opcheck():
    x = contributions(4, 1000, "bf16", 3).cuda()
    key = echotk.Spec().key()
    state = torch.empty(echotk.ops.state_bytes(key, 4, 1000), dtype=torch.uint8, device="cuda")
    torch.library.opcheck(torch.ops.echotk.emulate_allreduce.default, (x, state, key, 4, "forward", True, True))


@needs_kernel
def test_echo_under_inductor_gives_eager_bits():
    seq = [contributions(4, 3000, "bf16", s).cuda() for s in range(3)]

    def one_pass(ar, xs):
        ar.reset()
        return [ar(x) for x in xs]

    eager = one_pass(echotk.AllReduce(4, device="cuda"), seq)
    compiled_ar = echotk.AllReduce(4, device="cuda")
    compiled_ar(seq[0])  # the state exists before tracing
    compiled = torch.compile(one_pass)(compiled_ar, seq)
    for a, b in zip(eager, compiled):
        np.testing.assert_array_equal(bits(a), bits(b))


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
@pytest.mark.parametrize("ranks", [1, 3, 8])
def test_exact_allreduce_on_the_gpu_equals_the_reference(dtype, ranks):
    torch.manual_seed(ranks)
    x = (torch.randn(ranks, 4099) * torch.logspace(-3, 3, 4099)).to(TORCH_DTYPES[dtype])
    cpu = echotk.ExactAllReduce(ranks, dtype=dtype)(x)
    gpu = echotk.ExactAllReduce(ranks, dtype=dtype, device="cuda")(x.cuda())
    np.testing.assert_array_equal(bits(cpu), bits(gpu))


def test_a_tensor_on_another_device_is_refused():
    ar = echotk.ExactAllReduce(2, device="cuda")
    with pytest.raises(ValueError, match="cpu"):
        ar(torch.zeros(2, 8, dtype=torch.bfloat16))


def test_echo_on_cuda_needs_the_cuda_build():
    if _C.HAS_CUDA:
        pytest.skip("this build has the CUDA emulation kernel")
    with pytest.raises(RuntimeError, match="built without CUDA"):
        echotk.AllReduce(ranks=4, device="cuda")


def tp_forward_bits(ar):
    """Logits of a tiny random Llama, tensor-parallel over `ar`: eager, torch.compile'd and replayed
    from a CUDA graph (each forward resets the all-reduce, so each must give the same bits)."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2)
    model = transformers.LlamaForCausalLM(cfg).cuda().eval()
    echotk.tensor_parallel(model, ranks=4, allreduce=ar)
    ids = torch.randint(0, 97, (1, 12), device="cuda")
    with torch.no_grad():
        eager = model(input_ids=ids, use_cache=False).logits.clone()
        again = model(input_ids=ids, use_cache=False).logits.clone()
        # aot_eager: dynamo and AOTAutograd trace the ops (fake implementations, the state as a
        # mutated input) but run the eager kernels; Inductor fuses the model's own arithmetic
        # (norms, softmax) into other roundings.
        compiled = torch.compile(model, backend="aot_eager")(input_ids=ids, use_cache=False).logits
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            model(input_ids=ids, use_cache=False)  # warm-up outside the graph
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = model(input_ids=ids, use_cache=False).logits
        graph.replay()
        graph.replay()  # the state is reset inside the graph: a second replay repeats the first
        torch.cuda.synchronize()
    return eager, again, compiled, out


def test_tp_forward_compiled_and_graph_replayed_give_eager_bits():
    eager, again, compiled, replayed = tp_forward_bits(echotk.ExactAllReduce(4, device="cuda"))
    for other in (again, compiled, replayed):
        np.testing.assert_array_equal(bits(eager), bits(other))


@needs_kernel
def test_echo_tp_forward_compiled_and_graph_replayed_give_eager_bits():
    ar = echotk.AllReduce(4, echotk.Spec(bits=4), device="cuda")
    eager, again, compiled, replayed = tp_forward_bits(ar)
    for other in (again, compiled, replayed):
        np.testing.assert_array_equal(bits(eager), bits(other))
    # Read after the replays: the last replayed call's report, taken from the device.
    report = ar.report
    assert report.exact_path is False and report.poisoned_groups == 0
    assert report.injected_error > 0, "4-bit Echo should not be exact"
