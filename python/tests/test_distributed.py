"""echotk.distributed.AllReduce, one process per GPU over the P2P communicator. Without the CUDA
build: a clear error. With it, on one GPU: a world of one process (torch.distributed over a
FileStore, gloo for the id exchange) gives the bits of echotk.AllReduce(ranks=1) on the GPU and on
the CPU, call after call, across resets and in both directions, under torch.compile and from a CUDA
graph; bad input raises. With two or more GPUs: one process per GPU (torch.multiprocessing, as
torchrun starts them) gives every rank the bits of the one-GPU emulation of the same contributions,
over both transports."""
import os
import pickle

import numpy as np
import pytest
import torch
import torch.distributed as dist

import echotk
from echotk import _C
from conftest import bits, contributions

HAS_COMMUNICATOR = getattr(_C, "HAS_COMMUNICATOR", False)
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
needs_communicator = pytest.mark.skipif(not HAS_COMMUNICATOR,
                                        reason="echotk built without the communicator (ECHO_PYTHON_CUDA=ON)")

# Configurations the communicator implements (4 and 8 bits, owner), each compensator and residual
# mode, every dtype, both state dtypes, other quantizers and groups, and the exact path.
SPECS = {
    "default": echotk.Spec(),
    "8bit": echotk.Spec(bits=8),
    "single-local": echotk.Spec(compensator="single", residual="local"),
    "off": echotk.Spec(compensator="off"),
    "fp16-naive": echotk.Spec(dtype="fp16", quantizer="naive", group=64),
    "fp32-symmetric": echotk.Spec(dtype="fp32", quantizer="symmetric", group=256),
    "bf16-state": echotk.Spec(state_dtype="bf16", group=32),
    "exact-path": echotk.Spec(exact_max_count=1 << 20),
}
# One pass of three calls, a reset, then a pass mixing directions.
CALLS = ("forward", "forward", "backward", "forward", "reset", "backward", "forward", "forward")


@pytest.fixture
def world_of_one(tmp_path):
    """torch.distributed with one process (gloo over a FileStore), torn down after the test."""
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.skipif(HAS_COMMUNICATOR, reason="this build has the communicator")
def test_without_the_cuda_build_a_clear_error():
    with pytest.raises(RuntimeError, match="built without"):
        echotk.distributed.AllReduce()


@needs_gpu
@needs_communicator
def test_needs_an_initialized_process_group():
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="init_process_group"):
        echotk.distributed.AllReduce()


@needs_gpu
@needs_communicator
@pytest.mark.parametrize("transport", ["p2p", "nccl"])
@pytest.mark.parametrize("name", list(SPECS))
def test_world_of_one_equals_the_emulation_and_the_reference(world_of_one, name, transport):
    spec = SPECS[name]
    n = 4099 if name != "exact-path" else 1000
    with echotk.distributed.AllReduce(spec=spec, transport=transport) as ar:
        assert (ar.world, ar.rank, ar.transport) == (1, 0, transport)
        gpu = echotk.AllReduce(1, spec, device="cuda")
        cpu = echotk.AllReduce(1, spec, device="cpu")
        nonzero = False
        for call, direction in enumerate(CALLS):
            if direction == "reset":
                for a in (ar, gpu, cpu):
                    a.reset()
                continue
            parts = contributions(1, n, spec.dtype, seed=call)
            got = ar(parts[0].cuda(), direction=direction)
            want_gpu = gpu(parts.cuda(), direction=direction)
            want_cpu = cpu(parts, direction=direction)
            np.testing.assert_array_equal(bits(got), bits(want_gpu), err_msg=f"call {call} ({direction}) vs cuda")
            np.testing.assert_array_equal(bits(got), bits(want_cpu), err_msg=f"call {call} ({direction}) vs cpu")
            r, w = ar.report, cpu.report
            assert (r.direction, r.poisoned_groups, r.scale_exponent, r.exact_path) == \
                (w.direction, w.poisoned_groups, w.scale_exponent, w.exact_path), f"call {call} report"
            nonzero |= bool(torch.any(want_cpu.float() != 0))
        assert nonzero, "all-zero outputs cannot show agreement"
    assert ar.closed


@needs_gpu
@needs_communicator
def test_world_of_one_nonfinite_inputs(world_of_one):
    spec = echotk.Spec()
    with echotk.distributed.AllReduce(spec=spec) as ar:
        cpu = echotk.AllReduce(1, spec, device="cpu")
        for call in range(3):
            parts = contributions(1, 3000, spec.dtype, seed=10 + call, nonfinite=True)
            got = ar(parts[0].cuda())
            np.testing.assert_array_equal(bits(got), bits(cpu(parts)), err_msg=f"call {call}")
            assert ar.report.poisoned_groups == cpu.report.poisoned_groups > 0


@needs_gpu
@needs_communicator
def test_world_of_one_raw_bits_and_state_across_sizes(world_of_one):
    spec = echotk.Spec()
    with echotk.distributed.AllReduce(spec=spec) as ar:
        cpu = echotk.AllReduce(1, spec, device="cpu")
        for n in (1000, 70000, 333):  # the state grows and shrinks between passes
            ar.reset()
            cpu.reset()
            for call in range(2):
                parts = contributions(1, n, "bf16", seed=n + call)
                got = ar(parts[0].cuda().view(torch.uint16))
                assert got.dtype == torch.uint16
                np.testing.assert_array_equal(bits(got), bits(cpu(parts)), err_msg=f"n {n} call {call}")


@needs_gpu
@needs_communicator
def test_world_of_one_bad_input(world_of_one):
    with echotk.distributed.AllReduce() as ar:
        x = torch.randn(256, device="cuda").bfloat16()
        with pytest.raises(ValueError, match="dtype"):
            ar(x.float())
        with pytest.raises(ValueError, match=r"shape \[n\]"):
            ar(x[None])
        with pytest.raises(ValueError, match="cpu"):
            ar(x.cpu())
        with pytest.raises(ValueError, match="not contiguous"):
            ar(torch.randn(512, device="cuda").bfloat16()[::2])
        with pytest.raises(ValueError, match="no elements"):
            ar(x[:0])
        with pytest.raises(ValueError, match="direction"):
            ar(x, direction="sideways")
        with pytest.raises(TypeError, match="torch.Tensor"):
            ar([1.0])
        ar(x)
        with pytest.raises(ValueError, match="reset"):
            ar(x[:128].contiguous())
        if torch.cuda.device_count() > 1:
            with pytest.raises(ValueError, match="cuda:1"):
                ar(x.to("cuda:1"))
    with pytest.raises(RuntimeError, match="closed"):
        ar(x)
    ar.close()  # twice: nothing happens
    with pytest.raises(ValueError, match="does not implement"):
        echotk.distributed.AllReduce(spec=echotk.Spec(bits=3))
    # Outliers sent exactly are CPU reference only (docs/outliers.md): echo::cuda::can_implement.
    # Wide groups and the rotation run in the peer-to-peer kernels.
    for spec in (echotk.Spec(outliers=1), echotk.Spec(outliers=2, rotation="hadamard", overflow_groups="poison")):
        with pytest.raises(ValueError, match="does not implement.*outliers"):
            echotk.distributed.AllReduce(spec=spec)
    for spec in (echotk.Spec(rotation="hadamard"), echotk.Spec(overflow_groups="poison")):
        echotk.distributed.AllReduce(spec=spec).close()
    with pytest.raises(ValueError, match="transport"):
        echotk.distributed.AllReduce(transport="carrier-pigeon")
    with pytest.raises(TypeError, match="echotk.Spec"):
        echotk.distributed.AllReduce(spec="bits=4")


@needs_gpu
@needs_communicator
def test_world_of_one_torch_op_and_compile(world_of_one):
    spec = echotk.Spec()
    seq = [contributions(1, 3000, "bf16", seed=20 + call)[0].cuda() for call in range(3)]

    def one_pass(ar, xs):
        ar.reset()
        return [ar(x) * 2 for x in xs]

    with echotk.distributed.AllReduce(spec=spec) as eager_ar, echotk.distributed.AllReduce(spec=spec) as compiled_ar:
        torch.library.opcheck(torch.ops.echotk.comm_allreduce.default,
                              (seq[0], torch.zeros(1, dtype=torch.int64, device="cuda"), eager_ar._id,
                               eager_ar._key, "forward", True))
        eager = one_pass(eager_ar, seq)
        compiled_ar(seq[0])  # the state exists before tracing
        compiled = torch.compile(one_pass)(compiled_ar, seq)
        for call, (a, b) in enumerate(zip(eager, compiled)):
            np.testing.assert_array_equal(bits(a), bits(b), err_msg=f"call {call}")


@needs_gpu
@needs_communicator
def test_world_of_one_cuda_graph(world_of_one):
    spec = echotk.Spec()
    with echotk.distributed.AllReduce(spec=spec) as ar:
        cpu = echotk.AllReduce(1, spec, device="cpu")
        inputs = [contributions(1, 5000, "bf16", seed=30 + call) for call in range(3)]
        static = inputs[0][0].cuda()
        np.testing.assert_array_equal(bits(ar(static)), bits(cpu(inputs[0])))  # makes the state
        ar.report  # noqa: B018 - waits for the GPU before the capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = ar(static)
        for call in (1, 2):
            static.copy_(inputs[call][0].cuda())
            graph.replay()
            torch.cuda.synchronize()
            np.testing.assert_array_equal(bits(out), bits(cpu(inputs[call])), err_msg=f"replay {call}")


# --- one process per GPU -------------------------------------------------------------------------

MULTI_SPECS = [("default", "auto"), ("default", "nccl"), ("8bit", "auto"), ("single-local", "auto"),
               ("off", "nccl"), ("fp16-naive", "auto"), ("fp32-symmetric", "nccl"), ("bf16-state", "auto"),
               ("exact-path", "auto"), ("exact-path", "nccl")]
MULTI_N = 100_003  # awkward: segments of unequal length, a partial last group


def _rank_worker(rank, world, store_path, result_dir):
    """One rank, as torchrun would start it: records its mismatches instead of raising, so that no
    rank leaves the others waiting in a collective."""
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"file://{store_path}", rank=rank, world_size=world)
    problems = []
    for name, transport in MULTI_SPECS:
        spec = SPECS[name]
        n = MULTI_N if name != "exact-path" else 3001
        with echotk.distributed.AllReduce(spec=spec, transport=transport) as ar:
            emulation = echotk.AllReduce(world, spec, device="cuda")
            for call, direction in enumerate(CALLS):
                if direction == "reset":
                    ar.reset()
                    emulation.reset()
                    continue
                parts = contributions(world, n, spec.dtype, seed=call, nonfinite=call == 6).cuda()
                got = ar(parts[rank].clone(), direction=direction)
                want = emulation(parts, direction=direction)
                where = f"{name} over {ar.transport}, call {call} ({direction})"
                if not torch.equal(got.view(torch.uint8), want.view(torch.uint8)):
                    differ = int((got.view(torch.int16 if got.element_size() == 2 else torch.int32) !=
                                  want.view(torch.int16 if want.element_size() == 2 else torch.int32)).sum())
                    problems.append(f"{where}: {differ} of {n} elements differ")
                r, w = ar.report, emulation.report
                poisoned = torch.tensor([r.poisoned_groups], dtype=torch.int64, device="cuda")
                dist.all_reduce(poisoned)  # each rank counts its own segment's groups
                if (int(poisoned), r.scale_exponent, r.exact_path) != \
                        (w.poisoned_groups, w.scale_exponent, w.exact_path):
                    problems.append(f"{where}: report {(int(poisoned), r.scale_exponent, r.exact_path)} "
                                    f"!= {(w.poisoned_groups, w.scale_exponent, w.exact_path)}")
    with open(os.path.join(result_dir, f"rank{rank}.pkl"), "wb") as f:
        pickle.dump(problems, f)
    dist.destroy_process_group()


@needs_communicator
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 or more GPUs")
def test_one_process_per_gpu_equals_the_emulation(tmp_path):
    import torch.multiprocessing as mp

    world = min(torch.cuda.device_count(), 8)
    mp.spawn(_rank_worker, args=(world, str(tmp_path / "store"), str(tmp_path)), nprocs=world, join=True)
    problems = []
    for rank in range(world):
        with open(tmp_path / f"rank{rank}.pkl", "rb") as f:
            problems += [f"rank {rank}: {p}" for p in pickle.load(f)]
    assert not problems, "\n".join(problems)
