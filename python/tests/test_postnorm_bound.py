"""tools/postnorm_bound.py, the delayed exact cancellation of docs/results-gemma3.md, on small random
models: with delay 0 each site's own error leaves the stream at once, so the logits are the exact
all-reduce's; with delay 1 they are neither the exact nor the uncompensated ones; bad rows are
refused."""
import importlib.util

import pytest
import torch

import echotk
from echotk.tensor_parallel import tensor_parallel, undo_tensor_parallel
from conftest import REPO, tiny_gemma3

transformers = pytest.importorskip("transformers")
RANKS = 4
COMMON = dict(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
IDS = torch.tensor([[5, 17, 3, 88, 42, 9, 61, 2, 33, 70, 11]])
# Delay 0 subtracts norm(y_q) - norm(y_exact) from norm(y_q) in fp32: the exact output up to the
# rounding of that subtraction and addition (a few fp32 ulps per element, through the layers).
CANCELLATION_TOLERANCE = 1e-5


def _bound():
    spec = importlib.util.spec_from_file_location("postnorm_bound", REPO / "tools" / "postnorm_bound.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _gemma():
    return tiny_gemma3(COMMON), True


def _llama():
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**COMMON)).float().eval(), False


@torch.no_grad()
def _logits(model, allreduce, post_norms=False, bound=None, delay=None):
    tensor_parallel(model, ranks=RANKS, allreduce=allreduce)
    handles = bound.install_cancellation(model, allreduce, delay) if post_norms and delay is not None else []
    try:
        return model(input_ids=IDS, use_cache=False).logits.double()
    finally:
        for h in handles:
            h.remove()
        undo_tensor_parallel(model)


@pytest.mark.parametrize("make", [_gemma, _llama], ids=["post-norms", "pre-norms"])
def test_delay_0_gives_the_exact_all_reduce_and_delay_1_neither(make):
    bound = _bound()
    model, post_norms = make()
    spec, _, _ = bound.parse_row("q4")
    exact = _logits(model, echotk.ExactAllReduce(RANKS, dtype="bf16"))
    plain = _logits(model, echotk.AllReduce(RANKS, spec))

    def cancelled(delay):
        reduce = bound.ExactBeside(RANKS, spec, None if post_norms else delay)
        return _logits(model, reduce, post_norms, bound, delay)

    rel = lambda a, b: float((a - b).norm() / b.norm())  # noqa: E731
    assert rel(cancelled(0), exact) < CANCELLATION_TOLERANCE
    one = cancelled(1)
    assert rel(one, exact) > 10 * CANCELLATION_TOLERANCE
    assert rel(one, plain) > 10 * CANCELLATION_TOLERANCE


def test_bad_rows_are_refused():
    bound = _bound()
    assert bound.parse_row("q4rot64@delay2")[1:] == (2, None)
    assert bound.parse_row("q4@through")[1:] == (1, 1.0)
    assert bound.parse_row("q4@through0")[1:] == (1, 0.0)
    for name, what in (("q5", "transport"), ("q4@late", "modifier"), ("q4@delay-1", ">= 0"), ("q4@delayx", "whole number"), ("q4@throughx", "power")):
        with pytest.raises(ValueError, match=what):
            bound.parse_row(name)


@pytest.mark.parametrize("profile", [1.0, 0.0])
def test_through_carries_the_correction_in_the_next_message(profile):
    bound = _bound()
    model, _ = _gemma()
    spec, _, _ = bound.parse_row("q4@through")
    exact = _logits(model, echotk.ExactAllReduce(RANKS, dtype="bf16"))
    plain = _logits(model, echotk.AllReduce(RANKS, spec))
    reduce = bound.CorrectedTransport(RANKS, spec, bound.effective_weights(model), profile)
    tensor_parallel(model, ranks=RANKS, allreduce=reduce)
    handles = bound.install_through(model, reduce)
    try:
        with torch.no_grad():
            through = model(input_ids=IDS, use_cache=False).logits.double()
    finally:
        for h in handles:
            h.remove()
        undo_tensor_parallel(model)
    assert torch.isfinite(through).all()
    assert reduce.site == 2 * COMMON["num_hidden_layers"]   # every site's call went through it
    rel = lambda a, b: float((a - b).norm() / b.norm())  # noqa: E731
    assert rel(through, plain) > 10 * CANCELLATION_TOLERANCE
    assert rel(through, exact) > 10 * CANCELLATION_TOLERANCE
