"""tools/postnorm_bound.py, the delayed exact cancellation of docs/results-gemma3.md, on small random
models: with delay 0 each site's own error leaves the stream at once, so the logits are the exact
all-reduce's; with delay 1 they are neither the exact nor the uncompensated ones; bad rows are
refused."""

import pytest
import torch

import echotk
from echotk.tensor_parallel import tensor_parallel, undo_tensor_parallel
from conftest import load_tool, tiny_gemma3

transformers = pytest.importorskip("transformers")
RANKS = 4
COMMON = dict(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
IDS = torch.tensor([[5, 17, 3, 88, 42, 9, 61, 2, 33, 70, 11]])
# Delay 0 subtracts norm(y_q) - norm(y_exact) from norm(y_q) in fp32: the exact output up to the
# rounding of that subtraction and addition (a few fp32 ulps per element, through the layers).
CANCELLATION_TOLERANCE = 1e-5


def _gemma():
    return tiny_gemma3(COMMON), True


def _llama():
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**COMMON)).float().eval(), False


@torch.no_grad()
def _logits(model, allreduce, install=None):
    """The logits of IDS with the model made tensor-parallel over `allreduce`; install(model), when
    given, registers hooks for the forward and returns their handles."""
    tensor_parallel(model, ranks=RANKS, allreduce=allreduce)
    handles = install(model) if install is not None else []
    try:
        return model(input_ids=IDS, use_cache=False).logits.double()
    finally:
        for h in handles:
            h.remove()
        undo_tensor_parallel(model)


def _rel(a, b) -> float:
    return float((a - b).norm() / b.norm())


def _references(model, spec):
    """The exact all-reduce's logits and the uncompensated transport's."""
    return _logits(model, echotk.ExactAllReduce(RANKS, dtype="bf16")), _logits(model, echotk.AllReduce(RANKS, spec))


@pytest.mark.parametrize("make", [_gemma, _llama], ids=["post-norms", "pre-norms"])
def test_delay_0_gives_the_exact_all_reduce_and_delay_1_neither(make):
    bound = load_tool("postnorm_bound")
    model, post_norms = make()
    spec = bound.parse_row("q4")[0]
    exact, plain = _references(model, spec)

    def cancelled(delay):
        reduce = bound.ExactBeside(RANKS, spec, None if post_norms else delay)
        hooks = (lambda m: bound.install_cancellation(m, reduce, delay)) if post_norms else None
        return _logits(model, reduce, hooks)

    assert _rel(cancelled(0), exact) < CANCELLATION_TOLERANCE
    one = cancelled(1)
    assert _rel(one, exact) > 10 * CANCELLATION_TOLERANCE
    assert _rel(one, plain) > 10 * CANCELLATION_TOLERANCE


def test_bad_rows_are_refused():
    bound = load_tool("postnorm_bound")
    assert bound.parse_row("q4rot64@delay2")[1:] == (2, None, False)
    assert bound.parse_row("q4@through")[1:] == (1, 1.0, False)
    assert bound.parse_row("q4@through0")[1:] == (1, 0.0, False)
    assert bound.parse_row("q4@beside0.5")[1:] == (1, 0.5, True)
    refused = (("q5", "transport"), ("q4@late", "modifier"), ("q4@delay-1", ">= 0"), ("q4@delayx", "whole number"),
               ("q4@throughx", "power"), ("q4@besidey", "power"))
    for name, what in refused:
        with pytest.raises(ValueError, match=what):
            bound.parse_row(name)


@pytest.mark.parametrize("profile, beside", [(1.0, False), (0.0, False), (1.0, True)])
def test_through_carries_the_correction_in_the_next_message(profile, beside):
    bound = load_tool("postnorm_bound")
    model, _ = _gemma()
    spec = bound.parse_row("q4@through")[0]
    exact, plain = _references(model, spec)

    def carried(beside):
        reduce = bound.CorrectedTransport(RANKS, spec, bound.post_norm_weights(model), profile, beside)
        logits = _logits(model, reduce, lambda m: bound.install_through(m, reduce))
        assert reduce.site == 2 * COMMON["num_hidden_layers"]   # every site's call went through it
        return logits

    through = carried(beside)
    assert torch.isfinite(through).all()
    assert _rel(through, plain) > 10 * CANCELLATION_TOLERANCE
    assert _rel(through, exact) > 10 * CANCELLATION_TOLERANCE
    if beside:   # the correction outside the message: not the in-message row
        assert _rel(through, carried(False)) > 10 * CANCELLATION_TOLERANCE
