"""Compensator units 'stream' (docs/numerics.md 6.1) through echotk: the site each forward call
needs, bit-exactness with the C++ reference's replay, and echotk.tensor_parallel supplying Gemma 3's
post-norms (scale 1 + weight) and nothing for pre-norm models."""
import numpy as np
import pytest
import torch

import echotk
from echotk.capture import write_trace
from echotk.nn import ATTENTION, MLP, Site
from echotk.tensor_parallel import tensor_parallel_group
from conftest import REPO, bits, tiny_gemma3

RANKS, TOKENS, HIDDEN, SITES = 4, 3, 64, 4
STREAM = echotk.Spec(compensator_units="stream", residual="local")


def contributions(seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(SITES, RANKS, TOKENS * HIDDEN, generator=g)
    # Rows and sites at different scales, as a post-norm model's are.
    scale = torch.logspace(-1, 1, SITES * RANKS * TOKENS).reshape(SITES, RANKS, TOKENS, 1)
    return (x.reshape(SITES, RANKS, TOKENS, HIDDEN) * scale).reshape(SITES, RANKS, -1)


def weights():
    return torch.linspace(0.05, 4.0, SITES * HIDDEN).reshape(SITES, HIDDEN)


def first_site():
    """Site 0's contributions (bf16 [P, n] on the CPU), its post-norm weights and their RMS."""
    w = weights()[0]
    return contributions(4)[0].bfloat16(), w, float(echotk._C.post_norm_weight_rms(w.numpy()))


NEEDS_GPU_OP = pytest.mark.skipif(not torch.cuda.is_available() or not getattr(echotk._C, "HAS_CUDA", False),
                                  reason="needs a CUDA device and echotk built with CUDA")


def test_a_forward_call_without_its_site_raises():
    ar = echotk.AllReduce(RANKS, STREAM)
    with pytest.raises(ValueError, match="site"):
        ar(contributions()[0].bfloat16())
    ar(contributions()[0].bfloat16(), "backward")          # backward calls use unit gains
    echotk.AllReduce(RANKS, echotk.Spec(compensator_units="stream", compensator="off"))(contributions()[0].bfloat16())


def test_unknown_units_are_a_value_error():
    with pytest.raises(ValueError, match="compensator_units"):
        echotk.Spec(compensator_units="residual")


@pytest.mark.parametrize("options", [dict(), dict(compensator_profile="sqrt", compensator_clip=1.0,
                                                   compensator_gains="sum")], ids=["stream", "sqrt-clip1-sum"])
def test_sites_without_a_post_norm_are_the_site_units(options):
    """A pre-norm model (SmolLM2, Llama, Qwen): every stream-units setting is the site units' bits."""
    x = contributions(1).bfloat16()
    a = echotk.AllReduce(RANKS, echotk.Spec(compensator_units="stream", residual="local", **options))
    b = echotk.AllReduce(RANKS, echotk.Spec(residual="local"))
    for k in range(SITES):
        site = Site(k, k % 2)
        np.testing.assert_array_equal(bits(a(x[k], site=site)), bits(b(x[k], site=site)))


def test_post_norm_sites_change_the_carried_error():
    x = contributions(2).bfloat16()
    a, b = echotk.AllReduce(RANKS, STREAM), echotk.AllReduce(RANKS, echotk.Spec(residual="local"))
    w = weights()
    differ = False
    for k in range(SITES):
        ya = a(x[k], site=Site(k, k % 2, w[k]))
        yb = b(x[k], site=Site(k, k % 2, w[k]))
        differ |= not np.array_equal(bits(ya), bits(yb))
    assert differ     # the first call is the same; later ones apply corrections in other units


SQRT_CLIP = echotk.Spec(compensator_units="stream", residual="local", compensator_profile="sqrt", compensator_clip=1.0)


def test_the_profile_and_the_clip_change_the_carried_error():
    """Each of profile 'sqrt' and a tight clip changes what later calls deliver at post-norm sites,
    and neither touches a site without a post-norm."""
    x = contributions(6).bfloat16()
    w = weights()
    specs = {"flat": STREAM,
             "sqrt": echotk.Spec(compensator_units="stream", residual="local", compensator_profile="sqrt"),
             "clip": echotk.Spec(compensator_units="stream", residual="local", compensator_clip=0.01)}
    outputs = {}
    for name, spec in specs.items():
        ar = echotk.AllReduce(RANKS, spec)
        outputs[name] = [bits(ar(x[k], site=Site(k, k % 2, w[k]))) for k in range(SITES)]
        ar.reset()
        outputs[name + "-pre-norm"] = [bits(ar(x[k], site=Site(k, k % 2))) for k in range(SITES)]
    for name in ("sqrt", "clip"):
        np.testing.assert_array_equal(outputs[name][0], outputs["flat"][0])     # the first call applies nothing
        assert any(not np.array_equal(a, b) for a, b in zip(outputs[name], outputs["flat"]))
        for a, b in zip(outputs[name + "-pre-norm"], outputs["flat-pre-norm"]):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("options", [dict(compensator_profile="sqrt"), dict(compensator_clip=1.0),
                                     dict(compensator_gains="sum")])
def test_the_profile_the_clip_and_the_gains_need_stream_units(options):
    with pytest.raises(ValueError, match="units 'stream' only"):
        echotk.AllReduce(RANKS, echotk.Spec(residual="local", **options))


@pytest.mark.parametrize("clip", [-1.0, float("nan"), float("inf"), 2000.0])
def test_a_clip_out_of_range_is_a_value_error(clip):
    with pytest.raises(ValueError, match="compensator_clip"):
        echotk.Spec(compensator_units="stream", compensator_clip=clip)


def test_the_op_checks_the_site_weights():
    """profile 'sqrt' without the weights, or with weights of another length or dtype: ValueError
    naming what is missing or wrong (the op straight, as a caller without echotk.AllReduce would)."""
    x, w, rms = first_site()
    m = torch.zeros(RANKS, x.shape[1])
    call = lambda weights: torch.ops.echotk.allreduce(x, m.clone(), m.clone(), SQRT_CLIP.key(), RANKS, "forward",
                                                      True, HIDDEN, rms, weights)
    with pytest.raises(ValueError, match="post-norm weights"):
        call(None)
    with pytest.raises(ValueError, match="site_weights"):
        call(w[:-1])
    with pytest.raises(ValueError, match="site_weights"):
        call(w.double())
    call(w)


def test_the_op_checks_the_site_kind_and_the_row_ratios():
    """gains 'sum' at a post-norm site without its kind, without the ratios, or with ratios of
    another shape or dtype: ValueError naming what is missing or wrong."""
    x, w, rms = first_site()
    m = torch.zeros(RANKS, x.shape[1])
    ratios, held = torch.zeros(2, RANKS, TOKENS), torch.zeros(2, dtype=torch.uint8)

    def call(kind, ratios, held):
        return torch.ops.echotk.allreduce_ratios(x, m.clone(), m.clone(), ratios, held, SUM.key(), RANKS, "forward",
                                                 True, HIDDEN, rms, w, kind)
    with pytest.raises(ValueError, match="site's kind"):
        call(-1, ratios, held)
    with pytest.raises(ValueError, match="row ratios"):
        torch.ops.echotk.allreduce(x, m.clone(), m.clone(), SUM.key(), RANKS, "forward", True, HIDDEN, rms, w,
                                   ATTENTION)
    with pytest.raises(ValueError, match="ratios"):
        call(ATTENTION, torch.zeros(2, RANKS, TOKENS + 1), held)
    with pytest.raises(ValueError, match="ratios_held"):
        call(ATTENTION, ratios, held.float())
    call(MLP, ratios, held)
    assert held.tolist() == [0, 1]                  # the call kept the MLP site's ratios
    assert bool((ratios[1] > 0).all()) and bool((ratios[0] == 0).all())


def test_opcheck_of_the_ratios_op():
    """echotk::allreduce_ratios at a post-norm site with gains 'sum': schema, fake and mutations."""
    x, w, rms = first_site()
    m = torch.zeros(RANKS, x.shape[1])
    ratios, held = torch.zeros(2, RANKS, TOKENS), torch.zeros(2, dtype=torch.uint8)
    torch.library.opcheck(torch.ops.echotk.allreduce_ratios.default,
                          (x, m.clone(), m.clone(), ratios, held, SUM.key(), RANKS, "forward", True, HIDDEN, rms, w,
                           MLP))


@pytest.mark.parametrize("op", ["emulate_allreduce", "emulate_allreduce_ratios"])
def test_the_gpu_ops_name_themselves_when_given_cpu_tensors(op):
    """A GPU op called with CPU tensors: ValueError naming that op and its CPU twin."""
    x, w, rms = first_site()
    state, ratios = torch.zeros(16, dtype=torch.uint8), torch.zeros(16, dtype=torch.uint8)
    head = (x, state, ratios) if op.endswith("ratios") else (x, state)
    with pytest.raises(ValueError, match=rf"echotk::{op} takes CUDA tensors \(CPU tensors: "
                                         rf"echotk::{op.replace('emulate_', '')}\)"):
        getattr(torch.ops.echotk, op)(*head, SUM.key(), RANKS, "forward", True, False, HIDDEN, rms, w, MLP)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("op", ["allreduce", "allreduce_ratios"])
def test_the_cpu_ops_name_themselves_when_given_cuda_tensors(op):
    """A CPU op called with CUDA tensors: ValueError naming that op and its GPU twin."""
    x, w, rms = first_site()
    x, m = x.cuda(), torch.zeros(RANKS, x.shape[1], device="cuda")
    head = (x, m, m.clone()) + ((torch.zeros(2, RANKS, TOKENS, device="cuda"),
                                 torch.zeros(2, dtype=torch.uint8, device="cuda")) if op.endswith("ratios") else ())
    with pytest.raises(ValueError, match=rf"echotk::{op} takes CPU tensors \(CUDA tensors: echotk::emulate_{op}\)"):
        getattr(torch.ops.echotk, op)(*head, SUM.key(), RANKS, "forward", True, HIDDEN, rms, w.cuda(), MLP)


def test_a_weight_that_is_not_finite_is_a_value_error():
    w = weights()[0].clone()
    w[5] = float("nan")
    ar = echotk.AllReduce(RANKS, SQRT_CLIP)
    with pytest.raises(ValueError, match="weight 5 is not finite"):
        ar(contributions()[0].bfloat16(), site=Site(0, 0, w))
    ar(contributions()[0].bfloat16(), site=Site(0, 0, weights()[0]))


SUM = echotk.Spec(compensator_units="stream", residual="local", compensator_profile="sqrt", compensator_clip=1.0,
                  compensator_gains="sum")
DEFICIT = echotk.Spec(compensator="deficit", compensator_units="stream", residual="local", compensator_gains="sum",
                      compensator_clip=1.0)


@pytest.mark.parametrize("spec,flags", [(STREAM, []),
                                        (SQRT_CLIP, ["--compensator-profile", "sqrt", "--compensator-clip", "1"]),
                                        (SUM, ["--compensator-profile", "sqrt", "--compensator-clip", "1",
                                               "--compensator-gains", "sum"]),
                                        (DEFICIT, ["--compensator", "deficit", "--compensator-clip", "1",
                                                   "--compensator-gains", "sum"])],
                         ids=["flat", "sqrt-clip1", "sum-sqrt-clip1", "deficit-clip1"])
def test_the_python_op_is_the_replay_bit_for_bit(tmp_path, echotk_cli, spec, flags):
    x = contributions(3)
    w = weights()
    trace = tmp_path / "t.h5"
    write_trace(str(trace), x.bfloat16().float().numpy()[None], "bf16", RANKS, tokens=TOKENS, hidden=HIDDEN,
                site_kind=np.array([k % 2 for k in range(SITES)], dtype=np.int8),
                post_norm_weights=w.numpy())
    out = tmp_path / "r.h5"
    echotk_cli("replay", trace, "--out", out, "--save-outputs", "--compensator-units", "stream",
               "--residual", "local", *flags)
    import h5py
    with h5py.File(out, "r") as f:
        replayed = f["outputs"][0, :, 0, :]                    # [sites, n] of rank 0
    ar = echotk.AllReduce(RANKS, spec)
    for k in range(SITES):
        y = ar(x[k].bfloat16(), site=Site(k, k % 2, w[k]))
        np.testing.assert_array_equal(bits(y.float()), bits(torch.from_numpy(replayed[k])))


def test_a_trace_without_post_norm_is_refused_by_the_replay(tmp_path, echotk_cli):
    trace = tmp_path / "t.h5"
    write_trace(str(trace), contributions(4).bfloat16().float().numpy()[None], "bf16", RANKS,
                tokens=TOKENS, hidden=HIDDEN)
    result = echotk_cli("replay", trace, "--out", tmp_path / "r.h5", "--compensator-units", "stream", check=False)
    assert result.returncode == 2
    assert "post_norm" in result.stderr
    assert not (tmp_path / "r.h5").exists()


def test_unknown_gains_are_a_value_error():
    with pytest.raises(ValueError, match="compensator_gains"):
        echotk.Spec(compensator_units="stream", compensator_gains="delivered")


def test_gains_sum_start_afresh_after_reset_and_keep_ratios_per_kind():
    """The first call applies nothing; after reset() a pass gives the first pass's bits again; the
    MLP sites apply the MLP ratios once an MLP site has run (not the attention ones)."""
    x = contributions(6).bfloat16()
    w = weights()
    ar, own = echotk.AllReduce(RANKS, SUM), echotk.AllReduce(RANKS, SQRT_CLIP)
    first = [bits(ar(x[k], site=Site(k, k % 2, w[k]))) for k in range(SITES)]
    np.testing.assert_array_equal(first[0], bits(own(x[0], site=Site(0, 0, w[0]))))
    ar.reset()
    again = [bits(ar(x[k], site=Site(k, k % 2, w[k]))) for k in range(SITES)]
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    # The same calls with every site's kind attention: sites 2 and 3 then read other ratios.
    ar.reset()
    same_kind = [bits(ar(x[k], site=Site(k, ATTENTION, w[k]))) for k in range(SITES)]
    np.testing.assert_array_equal(same_kind[1], first[1])          # site 1 read site 0's ratios either way
    assert not np.array_equal(same_kind[3], first[3])


def test_a_trace_without_site_kinds_is_refused_by_gains_sum(tmp_path, echotk_cli):
    trace = tmp_path / "t.h5"
    write_trace(str(trace), contributions(4).bfloat16().float().numpy()[None], "bf16", RANKS,
                tokens=TOKENS, hidden=HIDDEN, post_norm_weights=weights().numpy())
    result = echotk_cli("replay", trace, "--out", tmp_path / "r.h5", "--compensator-units", "stream",
                        "--compensator-gains", "sum", check=False)
    assert result.returncode == 2
    assert "site_kind" in result.stderr
    assert not (tmp_path / "r.h5").exists()


transformers = pytest.importorskip("transformers")
COMMON = dict(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
IDS = torch.tensor([[5, 17, 3, 88, 42, 9, 61, 2, 33, 70, 11]])


def test_tensor_parallel_supplies_gemma3s_post_norm_scales(tmp_path):
    model = tiny_gemma3(COMMON)
    tp = echotk.tensor_parallel(model, RANKS, echotk.AllReduce(RANKS, STREAM))
    group = tensor_parallel_group(tp)
    layer = model.model.layers[0]
    scale = group.sites[0].post_norm_scale()
    np.testing.assert_array_equal(scale.numpy(), (layer.post_attention_layernorm.weight.detach().float() + 1.0).numpy())
    assert [s.kind for s in group.sites] == [ATTENTION, MLP, ATTENTION, MLP]
    with torch.no_grad():
        logits = tp(input_ids=IDS).logits
    assert torch.isfinite(logits).all()
    path = echotk.capture(model, IDS, RANKS, str(tmp_path / "g.h5"))
    import h5py
    with h5py.File(path, "r") as f:
        assert f.attrs["post_norm"] == "rmsnorm"
        np.testing.assert_array_equal(f["post_norm_weights"][0], scale.numpy())


def test_pre_norm_models_record_no_post_norm(tmp_path):
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**COMMON)).float().eval()
    tp = echotk.tensor_parallel(model, RANKS, echotk.AllReduce(RANKS, STREAM))
    assert all(s.post_norm_scale() is None for s in tensor_parallel_group(tp).sites)
    with torch.no_grad():
        tp(input_ids=IDS)
    path = echotk.capture(model, IDS, RANKS, str(tmp_path / "l.h5"))
    import h5py
    with h5py.File(path, "r") as f:
        assert f.attrs["post_norm"] == "none"
        assert "post_norm_weights" not in f


@NEEDS_GPU_OP
@pytest.mark.parametrize("spec", [STREAM, echotk.Spec(compensator_units="stream", residual="local", rotation="hadamard"),
                                  echotk.Spec(compensator_units="stream", bits=8, compensator="single"),
                                  echotk.Spec(compensator_units="stream", residual="local", exact_max_count=4096),
                                  SQRT_CLIP,
                                  echotk.Spec(compensator_units="stream", rotation="hadamard", compensator_profile="sqrt",
                                              compensator_clip=0.5),
                                  echotk.Spec(compensator_units="stream", residual="local", compensator="single",
                                              compensator_clip=0.05, exact_max_count=4096),
                                  SUM,
                                  echotk.Spec(compensator_units="stream", rotation="hadamard", group=64,
                                              compensator_gains="sum", state_dtype="bf16"),
                                  echotk.Spec(compensator_units="stream", residual="local", compensator_gains="sum",
                                              exact_max_count=4096),
                                  DEFICIT,
                                  echotk.Spec(compensator="deficit", compensator_units="stream", residual="local",
                                              compensator_gains="sum", rotation="hadamard", group=64,
                                              state_dtype="bf16", compensator_clip=0.5),
                                  echotk.Spec(compensator="deficit", compensator_units="stream", residual="local",
                                              compensator_gains="sum", bits=8, dtype="fp32"),
                                  echotk.Spec(compensator="deficit", compensator_units="stream", residual="local",
                                              compensator_gains="sum", exact_max_count=4096)],
                         ids=["local", "local-rotation", "global-8bit-single", "exact-path", "sqrt-clip1",
                              "rotation-global-sqrt-clip0.5", "exact-path-clip0.05", "sum-sqrt-clip1",
                              "sum-rotation64-global-bf16-state", "sum-exact-path", "deficit-clip1",
                              "deficit-rotation64-bf16-state-clip0.5", "deficit-8bit-fp32", "deficit-exact-path"])
def test_the_gpu_emulation_is_the_reference_bit_for_bit(spec):
    """device='cuda' (echo::cuda::emulate_allreduce with the site's gains scratch) against the CPU
    reference: every output and the final states, over sites with and without a post-norm, two
    passes, backward calls between (unit gains)."""
    x = contributions(5).bfloat16()
    w = weights()
    cpu, gpu = echotk.AllReduce(RANKS, spec), echotk.AllReduce(RANKS, spec, device="cuda")
    for _ in range(2):
        cpu.reset()
        gpu.reset()
        for k in range(SITES):
            site = Site(k, k % 2, w[k] if k != 2 else None)
            np.testing.assert_array_equal(bits(cpu(x[k], site=site)), bits(gpu(x[k].cuda(), site=site).cpu()))
            np.testing.assert_array_equal(bits(cpu(x[k], "backward")), bits(gpu(x[k].cuda(), "backward").cpu()))
        for direction in ("forward", "backward"):
            for a, b in zip(cpu.state(direction), gpu.state(direction)):
                if a is not None:
                    np.testing.assert_array_equal(a.numpy().view(np.uint32), b.numpy().view(np.uint32))
    with pytest.raises(ValueError, match="site"):
        gpu(x[0].cuda())


@NEEDS_GPU_OP
def test_the_gpu_op_needs_the_weights_for_the_profile():
    """profile 'sqrt' on the GPU op without the weights: the emulation's check names them."""
    x, w, rms = first_site()
    x = x.cuda()
    state = torch.empty(echotk.ops.state_bytes(SQRT_CLIP.key(), RANKS, x.shape[1]), dtype=torch.uint8, device="cuda")
    call = lambda weights: torch.ops.echotk.emulate_allreduce(x, state, SQRT_CLIP.key(), RANKS, "forward", True, False,
                                                              HIDDEN, rms, weights)
    with pytest.raises((ValueError, RuntimeError), match="weights on the device"):
        call(None)
    with pytest.raises(ValueError, match="site_weights"):
        call(w[:-1].cuda())
    call(w.cuda())


@NEEDS_GPU_OP
def test_opcheck_of_the_gpu_ratios_op():
    """echotk::emulate_allreduce_ratios at a post-norm site with gains 'sum'."""
    x, w, rms = first_site()
    x = x.cuda()
    key, n = SUM.key(), x.shape[1]
    state = torch.empty(echotk.ops.state_bytes(key, RANKS, n), dtype=torch.uint8, device="cuda")
    ratios = torch.zeros(echotk.ops.ratios_bytes(key, RANKS, "forward", n, HIDDEN, rms), dtype=torch.uint8,
                         device="cuda")
    assert ratios.numel() > 0
    torch.library.opcheck(torch.ops.echotk.emulate_allreduce_ratios.default,
                          (x, state, ratios, key, RANKS, "forward", True, False, HIDDEN, rms, w.cuda(), MLP))


STREAM_CASES = ["stream-4bit-dual-local-bf16-p4", "stream-8bit-dual-fp32-p3", "stream-4bit-sqrt-clip-local-bf16-p4",
                "stream-sum-4bit-sqrt-clip-local-bf16-p4", "stream-sum-8bit-dual-fp32-p3",
                "deficit-4bit-clip-local-bf16-p4", "deficit-8bit-fp32-p3"]
DEVICES = ["cpu", pytest.param("cuda", marks=NEEDS_GPU_OP)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", STREAM_CASES)
def test_echotk_delivers_the_conformance_outputs_of_the_stream_cases(case, device):
    """The conformance pack's stream cases (docs/conformance.md) through echotk.AllReduce, each
    site's post-norm from the trace's /post_norm_weights: every output bit for bit the pack's."""
    h5py = pytest.importorskip("h5py")
    import json
    pack = REPO / "data" / "conformance"
    entry = next(c for c in json.loads((pack / "manifest.json").read_text())["cases"] if c["name"] == case)
    spec = echotk.Spec(dtype=entry["dtype"], **{k.replace("-", "_"): v for k, v in entry["spec"].items()})
    with h5py.File(pack / entry["trace"], "r") as f:
        x = torch.from_numpy(f["contributions"][:])
        weights = torch.from_numpy(f["post_norm_weights"][:])
        kinds = f["site_kind"][:] if "site_kind" in f else [k % 2 for k in range(x.shape[1])]
    with h5py.File(pack / entry["outputs"], "r") as f:
        expected = f["outputs"][:]
    dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}[entry["dtype"]]
    ar = echotk.AllReduce(entry["ranks"], spec, device=device)
    for p in range(x.shape[0]):
        ar.reset()
        for k in range(x.shape[1]):
            y = ar(x[p, k].to(dtype).to(device), site=Site(k, int(kinds[k]), weights[k]))
            np.testing.assert_array_equal(y.float().cpu().numpy().view(np.uint32),
                                          expected[p, k, 0].view(np.uint32), err_msg=f"pass {p} site {k}")


@pytest.mark.parametrize("options", [dict(), dict(compensator_units="stream", compensator_gains="sum"),
                                     dict(compensator_units="stream", residual="local"),
                                     dict(compensator_units="stream", residual="local", compensator_gains="sum",
                                          compensator_profile="sqrt")],
                         ids=["site-units", "global-residual", "gains-own", "profile-sqrt"])
def test_deficit_without_its_settings_is_a_value_error(options):
    """Compensator 'deficit' (docs/numerics.md 6.2) runs with units 'stream', residual 'local',
    gains 'sum' and profile 'flat' only, and says so."""
    with pytest.raises(ValueError, match="compensator 'deficit' runs with units 'stream', residual 'local', "
                                         "gains 'sum' and profile 'flat'"):
        echotk.Spec(compensator="deficit", **options).handle(RANKS)


def test_deficit_reads_the_weights_and_closes_on_the_stream_deficit():
    """A non-finite post-norm weight is refused naming the mode; over sites with and without a
    post-norm the ranks' states sum (float64) to the stream's deficit, each call's sum_i x_i - y
    through diag(w) / r at a post-norm site."""
    w = weights()[0].clone()
    w[5] = float("nan")
    ar = echotk.AllReduce(RANKS, DEFICIT)
    with pytest.raises(ValueError, match=r"weight 5 is not finite \(compensator 'deficit' reads the weights\)"):
        ar(contributions()[0].bfloat16(), site=Site(0, 0, w))
    ar.reset()
    x, w = contributions(7).bfloat16(), weights() * torch.where(torch.arange(HIDDEN) % 4 == 1, -1.0, 1.0)
    deficit = torch.zeros(TOKENS * HIDDEN, dtype=torch.float64)
    for k in range(SITES):
        post = k != 2
        y = ar(x[k], site=Site(k, k % 2, w[k] if post else None)).double()
        lacking = x[k].double().sum(0) - y
        if post:
            r = y.reshape(TOKENS, HIDDEN).square().mean(1).sqrt()
            lacking = (lacking.reshape(TOKENS, HIDDEN) * w[k].double() / r[:, None]).reshape(-1)
        deficit += lacking
        total = ar.state()[0].double().sum(0)
        assert float((total - deficit).abs().max()) <= 1e-5 * float(deficit.abs().max())
