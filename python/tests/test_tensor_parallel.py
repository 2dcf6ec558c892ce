"""echotk.tensor_parallel on tiny random-config Hugging Face models (no weight files)."""
import numpy as np
import pytest
import torch

import echotk
from echotk.nn import ATTENTION, MLP, TensorParallelGroup
from echotk.tensor_parallel import RowParallelLinear, slice_begin, tensor_parallel_group
from conftest import bits

transformers = pytest.importorskip("transformers")

# An fp32 forward with the sites split over ranks differs from the plain one only by the order
# of fp32 additions inside the matmuls: relative L2 of the logits well below this.
FP32_REORDER_TOLERANCE = 1e-5

COMMON = dict(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)


def make(arch: str):
    torch.manual_seed(0)
    if arch == "llama":
        cfg = transformers.LlamaConfig(**COMMON)
        model = transformers.LlamaForCausalLM(cfg)
    elif arch == "mistral":
        model = transformers.MistralForCausalLM(transformers.MistralConfig(**COMMON))
    elif arch == "qwen2":
        model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**COMMON))
    elif arch == "qwen3":
        model = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**COMMON, head_dim=16))
    elif arch == "gemma3":
        cfg = transformers.Gemma3TextConfig(**COMMON, head_dim=16, sliding_window=8)
        model = transformers.Gemma3ForCausalLM(cfg)
    else:
        raise AssertionError(arch)
    return model.float().eval()


def relative_l2(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


ARCHS = ["llama", "mistral", "qwen2", "qwen3", "gemma3"]
IDS = torch.tensor([[5, 17, 3, 88, 42, 9, 61, 2, 33, 70, 11]])


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("ranks", [1, 3, 4, 8])  # 8 > 4 heads: the slices cut inside heads
def test_exact_fp32_sites_give_the_plain_forward(arch, ranks):
    model = make(arch)
    with torch.no_grad():
        plain = model(input_ids=IDS).logits
        tp = echotk.tensor_parallel(model, ranks=ranks, allreduce=echotk.ExactAllReduce(ranks, dtype="fp32"))
        split = tp(input_ids=IDS).logits
    assert sum(isinstance(m, RowParallelLinear) for m in tp.modules()) == 2 * COMMON["num_hidden_layers"]
    assert relative_l2(split, plain) < FP32_REORDER_TOLERANCE


@pytest.mark.parametrize("arch", ARCHS)
def test_echo_sites_run_and_reset_every_pass(arch):
    model = make(arch)
    ar = echotk.AllReduce(ranks=4, spec=echotk.Spec(bits=4))
    tp = echotk.tensor_parallel(model, ranks=4, allreduce=ar)
    with torch.no_grad():
        first = tp(input_ids=IDS).logits
        second = tp(input_ids=IDS).logits
        exact = make(arch)(input_ids=IDS).logits
    np.testing.assert_array_equal(bits(first), bits(second))  # state reset at each forward
    assert 0 < relative_l2(first, exact) < 0.5
    assert ar.report is not None and ar.report.correction_norm > 0  # the last site was compensated


def test_partial_sums_are_the_feature_slices_of_docs_model_md():
    torch.manual_seed(1)
    linear = torch.nn.Linear(10, 6, bias=True)
    x = torch.randn(7, 10)
    for ranks in (1, 2, 3, 4, 7):
        group = TensorParallelGroup(ranks, echotk.ExactAllReduce(ranks, dtype="fp32"))
        site = RowParallelLinear.from_linear(group, linear, 0, ATTENTION)
        got = site.partial_sums(x)
        for r in range(ranks):
            lo, hi = slice_begin(10, ranks, r), slice_begin(10, ranks, r + 1)
            want = x[:, lo:hi] @ linear.weight[:, lo:hi].T
            torch.testing.assert_close(got[r], want, rtol=1e-6, atol=1e-6)
        with torch.no_grad():
            torch.testing.assert_close(site(x), linear(x), rtol=1e-5, atol=1e-5)  # bias added once


def test_slices_are_head_aligned_when_p_divides_the_heads():
    assert [slice_begin(576, 3, r) for r in range(4)] == [0, 192, 384, 576]  # 3 heads of 64 each
    assert [slice_begin(576, 4, r) for r in range(5)] == [0, 144, 288, 432, 576]


def test_torch_compile_gives_the_eager_bits():
    model = make("llama")
    ar = echotk.AllReduce(ranks=2)
    tp = echotk.tensor_parallel(model, ranks=2, allreduce=ar)
    with torch.no_grad():
        eager = tp(input_ids=IDS).logits
        compiled = torch.compile(tp, backend="aot_eager")(input_ids=IDS).logits
    np.testing.assert_array_equal(bits(eager), bits(compiled))


def test_other_architectures_are_refused():
    cfg = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=50)
    with pytest.raises(ValueError, match="supports LlamaForCausalLM.*got GPT2LMHeadModel"):
        echotk.tensor_parallel(transformers.GPT2LMHeadModel(cfg), ranks=2,
                               allreduce=echotk.AllReduce(ranks=2))


def test_rank_mismatch_and_double_conversion_are_refused():
    model = make("llama")
    with pytest.raises(ValueError, match="ranks"):
        echotk.tensor_parallel(model, ranks=4, allreduce=echotk.AllReduce(ranks=2))
    echotk.tensor_parallel(model, ranks=2, allreduce=echotk.AllReduce(ranks=2))
    with pytest.raises(ValueError, match="already"):
        echotk.tensor_parallel(model, ranks=2, allreduce=echotk.AllReduce(ranks=2))


class SiteRecorder(echotk.ExactAllReduce):
    """The exact sum, declaring that it takes the site: the group passes each call's Site."""

    takes_site = True

    def __init__(self, ranks):
        super().__init__(ranks, dtype="fp32")
        self.calls = []

    def __call__(self, parts, direction="forward", *, site):
        self.calls.append((direction, site))
        return super().__call__(parts, direction)


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_sites_carry_their_kind_and_post_norm(arch):
    model = make(arch)
    with torch.no_grad():
        plain = model(input_ids=IDS).logits
    ar = SiteRecorder(2)
    tp = echotk.tensor_parallel(model, ranks=2, allreduce=ar)
    sites = tensor_parallel_group(tp).sites
    assert [(s.index, s.kind) for s in sites] == [(0, ATTENTION), (1, MLP), (2, ATTENTION), (3, MLP)]
    for s in sites:
        layer = tp.model.layers[s.index // 2]
        if arch == "gemma3":  # the norms on the site outputs, the model's own Parameters
            norm = layer.post_attention_layernorm if s.kind == ATTENTION else layer.post_feedforward_layernorm
            assert s.post_norm is norm.weight
        else:
            assert s.post_norm is None
    with torch.no_grad():
        split = tp(input_ids=IDS).logits
    assert [(d, s.index) for d, s in ar.calls] == [("forward", k) for k in range(4)]
    assert all(s is sites[s.index] for _, s in ar.calls)
    assert relative_l2(split, plain) < FP32_REORDER_TOLERANCE  # the site argument changes no number


def test_a_site_has_one_kind():
    group = TensorParallelGroup(2, echotk.ExactAllReduce(2, dtype="fp32"))
    assert group.site(3, MLP) is group.site(3, MLP)
    with pytest.raises(ValueError, match="site 3 is of kind 1 already"):
        group.site(3, ATTENTION)
    with pytest.raises(ValueError, match="kind must be ATTENTION"):
        group.site(4, 2)
    with pytest.raises(ValueError, match="site index"):
        group.site(-1, MLP)
