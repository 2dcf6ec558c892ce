"""echotk.nn's tensor-parallel layers, the TP Llama and `python -m echotk train` (docs/python-training.md)."""
import csv
import dataclasses
import json
import math
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import echotk
from echotk import nn as tpnn
from echotk.train import command as train_cli
from echotk.train import data as train_data
from echotk.train import summary as train_summary
from echotk.train.batches import DataOrder, learning_rate
from echotk.train.model import ModelConfig, TPLlama, rotate

from conftest import REPO, bits

# The TP path adds the P partial sums in fp32 in rank order after P matmuls; one full matmul adds
# the same products in the GEMM's own order. Both are fp32 sums of O(100) terms: relative
# differences of a few ulps (1.2e-7 each) per element, far below this.
FP32_GRAD_REL_TOL = 1e-5
DATA = REPO / "data" / "training"
TINY = ModelConfig(vocab_size=97, dim=32, layers=2, heads=4, ffn=48, seq=16)

devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def has_cuda_build():
    return torch.cuda.is_available() and getattr(echotk._C, "HAS_CUDA", False)


def make_model(allreduce, config=TINY, seed=0, device="cpu"):
    torch.manual_seed(seed)
    group = tpnn.TensorParallelGroup(allreduce.ranks, allreduce)
    return TPLlama(config, group).to(device)


def reference_loss(model, ids, targets):
    """The same network on one device: nn.Linear weights assembled from the shards, no all-reduce."""
    c = model.config
    B, T = ids.shape
    cos, sin = model.cos[:T], model.sin[:T]
    x = model.embed(ids)
    for block in model.blocks:
        wq, wk, wv = block.attn.qkv.full_weights()
        h = block.attn_norm(x)
        q, k, v = (F.linear(h, w).view(B, T, c.heads, -1).transpose(1, 2) for w in (wq, wk, wv))
        y = F.scaled_dot_product_attention(rotate(q, cos, sin), rotate(k, cos, sin), v, is_causal=True)
        x = x + F.linear(y.transpose(1, 2).reshape(B, T, -1), block.attn.out.full_weight())
        h = block.mlp_norm(x)
        wg, wu = block.mlp.gate_up.full_weights()
        x = x + F.linear(F.silu(F.linear(h, wg)) * F.linear(h, wu), block.mlp.down.full_weight())
    logits = F.linear(model.norm(x), model.embed.weight)
    return F.cross_entropy(logits.reshape(-1, c.vocab_size), targets.reshape(-1))


def relative(a, b):
    return float(((a - b).norm() / b.norm().clamp_min(1e-30)).detach())


@pytest.mark.parametrize("device", devices)
def test_exact_tp_gradients_equal_single_device(device):
    model = make_model(echotk.ExactAllReduce(ranks=4, dtype="fp32", device=device), device=device)
    ids = torch.randint(0, TINY.vocab_size, (3, TINY.seq + 1), generator=torch.Generator().manual_seed(1)).to(device)
    params = list(model.parameters())
    loss = model.loss(ids[:, :-1], ids[:, 1:])
    grads = torch.autograd.grad(loss, params)
    ref = reference_loss(model, ids[:, :-1], ids[:, 1:])
    ref_grads = torch.autograd.grad(ref, params)
    assert relative(loss, ref) < FP32_GRAD_REL_TOL
    for (name, _), g, r in zip(model.named_parameters(), grads, ref_grads):
        assert relative(g, r) < FP32_GRAD_REL_TOL, name


def test_column_parallel_backward_sums_the_ranks_partial_gradients():
    """One column-parallel site alone: the input gradient is the all-reduce of the P ranks'
    partial products, the weight gradient each rank's own."""
    group = tpnn.TensorParallelGroup(4, echotk.ExactAllReduce(ranks=4, dtype="fp32"))
    layer = tpnn.ColumnParallelLinear(group, 8, (12, 4), site=0, kind=0)
    x = torch.randn(5, 8, requires_grad=True)
    a, b = layer(x)
    wa, wb = layer.full_weights()
    ga, gb = torch.randn_like(a), torch.randn_like(b)
    gx, = torch.autograd.grad((a * ga).sum() + (b * gb).sum(), x)
    assert relative(gx, ga @ wa + gb @ wb) < FP32_GRAD_REL_TOL
    assert relative(a, x @ wa.T) < FP32_GRAD_REL_TOL and relative(b, x @ wb.T) < FP32_GRAD_REL_TOL


def record_calls(group):
    """Every all-reduce call of the group and every reset, in order, with host copies."""
    log = []
    group.observer = lambda d, site, kind, parts, out: log.append(
        ("call", d, site, parts.detach().cpu().clone(), out.detach().cpu().clone()))
    reset = group.allreduce.reset

    def logged_reset(direction=None):
        log.append(("reset", direction))
        reset(direction)
    group.allreduce.reset = logged_reset
    return log


def replay_on_cpu(log, spec, ranks=4):
    """Feeds the recorded contributions through a CPU AllReduce with the same resets and checks
    that its outputs equal the recorded ones bit for bit; returns the number of calls."""
    ar = echotk.AllReduce(ranks=ranks, spec=spec, device="cpu")
    calls = 0
    for entry in log:
        if entry[0] == "reset":
            ar.reset(entry[1])
            continue
        _, direction, site, parts, out = entry
        np.testing.assert_array_equal(bits(ar(parts, direction)), bits(out),
                                      err_msg=f"call {calls}: {direction} site {site}")
        calls += 1
    return calls


def train_steps(model, steps, device, seed=2):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        ids = torch.randint(0, model.config.vocab_size, (2, model.config.seq + 1), generator=gen).to(device)
        model.loss(ids[:, :-1], ids[:, 1:]).backward()
        opt.step()
        opt.zero_grad()


def test_sites_run_in_pass_order_with_resets():
    spec = echotk.Spec(bits=4, dtype="fp32")
    model = make_model(echotk.AllReduce(ranks=4, spec=spec))
    log = record_calls(model.group)
    train_steps(model, 2, "cpu")
    n = 2 * TINY.layers
    one_step = ([("reset", "forward")] + [("forward", s) for s in range(n)]
                + [("reset", "backward")] + [("backward", s) for s in reversed(range(n))])
    seen = [e[:2] if e[0] == "reset" else (e[1], e[2]) for e in log]
    assert seen == one_step * 2
    # The state carries from site to site within a pass and restarts at each pass.
    assert replay_on_cpu(log, spec) == 4 * n


@pytest.mark.skipif(not has_cuda_build(), reason="needs a CUDA device and the CUDA build")
def test_cuda_run_allreduce_outputs_equal_cpu_bits():
    """A few fp32 training steps on the GPU; every all-reduce output equals the CPU reference's on
    the same contributions, with the same resets, bit for bit (both directions)."""
    for residual in ("global", "local"):
        spec = echotk.Spec(bits=4, dtype="fp32", residual=residual, eta=1.0 if residual == "local" else 0.75)
        model = make_model(echotk.AllReduce(ranks=4, spec=spec, device="cuda"), device="cuda")
        log = record_calls(model.group)
        train_steps(model, 3, "cuda")
        assert replay_on_cpu(log, spec) == 3 * 4 * TINY.layers


def test_bad_layer_arguments():
    group = tpnn.TensorParallelGroup(4, echotk.ExactAllReduce(ranks=4, dtype="fp32"))
    with pytest.raises(ValueError, match="multiple of ranks"):
        tpnn.ColumnParallelLinear(group, 8, (6,), site=0, kind=0)
    with pytest.raises(ValueError, match="multiple of ranks"):
        tpnn.RowParallelLinear(group, 10, 8, site=0, kind=0)
    with pytest.raises(ValueError, match="ranks"):
        tpnn.TensorParallelGroup(2, echotk.ExactAllReduce(ranks=4))
    with pytest.raises(ValueError, match="heads 6 must be a multiple of ranks 4"):
        TPLlama(ModelConfig(dim=48, heads=6), group)
    with pytest.raises(ValueError, match="direction"):
        group.begin_pass("sideways")


# -- python -m echotk train --------------------------------------------------------------------

TINY_CLI = ["--dim", "32", "--layers", "2", "--heads", "4", "--ffn", "48", "--seq", "32", "--batch", "2",
            "--dtype", "fp32", "--threads", "1", "--eval-every", "2", "--eval-sequences", "2",
            "--site-every", "2", "--warmup", "2", "--no-progress", "--data", str(DATA)]


def train(out, *extra):
    return train_cli.main(["--out", str(out), *TINY_CLI, *extra])


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_resume_gives_the_uninterrupted_losses(tmp_path):
    steps = ["--tokens", str(6 * 2 * 32), "--allreduce", "echo"]
    assert train(tmp_path / "straight", *steps) == 0
    assert train(tmp_path / "split", *steps, "--stop-after", "3") == 0
    assert len(read_rows(tmp_path / "split" / "train.csv")) == 3
    assert train(tmp_path / "split", *steps, "--resume") == 0
    straight = read_rows(tmp_path / "straight" / "train.csv")
    split = read_rows(tmp_path / "split" / "train.csv")
    assert len(straight) == 6
    key = ("step", "tokens", "train_loss", "val_loss", "lr")
    assert [[r[k] for k in key] for r in split] == [[r[k] for k in key] for r in straight]
    site_key = ("step", "direction", "site", "injected_error", "net_error")
    a = read_rows(tmp_path / "straight" / "sites.csv")
    b = read_rows(tmp_path / "split" / "sites.csv")
    assert len(a) == 4 * 8  # steps 1, 3, 5 and the last, 4 forward + 4 backward sites each
    assert [[r[k] for k in site_key] for r in a] == [[r[k] for k in site_key] for r in b]
    # A complete run resumed again does nothing.
    assert train(tmp_path / "split", *steps, "--resume") == 0
    assert len(read_rows(tmp_path / "split" / "train.csv")) == 6


def test_training_learns(tmp_path):
    assert train(tmp_path / "run", "--tokens", str(40 * 2 * 32), "--lr", "1e-2", "--eval-every", "0") == 0
    rows = read_rows(tmp_path / "run" / "train.csv")
    first = np.mean([float(r["train_loss"]) for r in rows[:5]])
    last = np.mean([float(r["train_loss"]) for r in rows[-5:]])
    assert last < first - 1.0, (first, last)
    assert float(rows[-1]["val_loss"]) < float(rows[0]["train_loss"]) - 1.0


@pytest.mark.parametrize("extra, message", [
    (["--batch", "0"], "--batch must be >= 1"),
    (["--tokens", "10"], "less than one step"),
    (["--heads", "6", "--dim", "36"], "heads 6 must be a multiple of ranks 4"),
    (["--allreduce", "echo", "--bits", "9"], "bits"),
    (["--lr", "nan"], "--lr must be a positive number"),
    (["--min-lr-ratio", "2"], "--min-lr-ratio"),
    (["--data", "/nonexistent"], "manifest.json: no such file"),
])
def test_bad_arguments_exit_2_with_a_message(tmp_path, capsys, extra, message):
    assert train(tmp_path / "run", "--tokens", "640", *extra) == 2
    assert message in capsys.readouterr().err


def test_existing_run_needs_resume_and_the_same_settings(tmp_path, capsys):
    out = tmp_path / "run"
    assert train(out, "--tokens", "256", "--stop-after", "1") == 0
    assert train(out, "--tokens", "256") == 2
    assert "pass --resume" in capsys.readouterr().err
    assert train(out, "--tokens", "256", "--resume", "--lr", "5e-3") == 2
    assert "saved for other settings (lr)" in capsys.readouterr().err
    (tmp_path / "file").write_text("x")
    assert train(tmp_path / "file", "--tokens", "256") == 2
    assert "is a file" in capsys.readouterr().err


def test_max_seconds_stops_before_the_limit_and_saves(tmp_path):
    out = tmp_path / "run"
    assert train(out, "--tokens", str(1000 * 2 * 32), "--max-seconds", "0.5") == 0
    assert (out / "state.pt").is_file()
    assert len(read_rows(out / "train.csv")) < 1000


# -- data ----------------------------------------------------------------------------------------

def test_learning_rate_schedule():
    lr = lambda s: learning_rate(s, 1000, 1e-3, 100, 0.1)  # noqa: E731
    assert lr(0) == pytest.approx(1e-5) and lr(99) == pytest.approx(1e-3)
    assert lr(100) == pytest.approx(1e-3) and lr(1000) == pytest.approx(1e-4)
    assert all(lr(s) >= lr(s + 1) for s in range(100, 1000))


def test_data_order_is_a_function_of_the_seed():
    ids = np.arange(10_000, dtype=np.uint16)
    a, b = DataOrder(ids, 32, 0), DataOrder(ids, 32, 0)
    assert np.array_equal(a.batch(7, 4), b.batch(7, 4))
    assert not np.array_equal(a.batch(7, 4), DataOrder(ids, 32, 1).batch(7, 4))
    per = a.per_epoch()
    starts = [int(a.batch(g, 1)[0, 0]) for g in range(per)]
    assert len(set(starts)) == per  # an epoch visits each window once
    batch = a.batch(3, 2)
    assert batch.shape == (2, 33) and np.all(np.diff(batch, axis=1) == 1)


def test_committed_ids_match_their_manifest(tmp_path):
    manifest, ids = train_data.load(str(DATA))
    assert len(ids["train"]) == manifest["splits"]["train"]["tokens"]
    assert int(ids["train"].max()) < manifest["vocab_size"]
    assert ids["val"][-1] == manifest["eos_id"]
    broken = tmp_path / "broken"
    shutil.copytree(DATA, broken)
    data = bytearray((broken / "val.npy").read_bytes())
    data[-1] ^= 1
    (broken / "val.npy").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="val.npy: sha256"):
        train_data.load(str(broken))


def test_addresses_split_by_year():
    text = "=== 2008_a_b ===\nfirst\n\n=== 2009_c_d ===\nsecond words\n"
    assert train_data.split_addresses(text) == [(2008, "first"), (2009, "second words")]
    with pytest.raises(ValueError, match="headers"):
        train_data.split_addresses("no headers")


def test_ids_regenerate_byte_identically(tmp_path):
    from echotk.models import default_model_path
    gguf = default_model_path()
    if not os.path.isfile(gguf):
        pytest.skip("the SmolLM2 GGUF is not cached (scripts/setup_model.sh)")
    candidates = [Path(os.environ["ECHO_CORPORA"])] if "ECHO_CORPORA" in os.environ else []
    candidates += [REPO.parent / "shared" / "corpora", REPO.parent.parent / "shared" / "corpora"]
    corpora = next((c for c in candidates if (c / "state-of-the-union.txt.gz").is_file()), None)
    if corpora is None:
        pytest.skip("no shared/corpora beside the repository (set ECHO_CORPORA)")
    train_data.make(str(corpora), gguf, str(tmp_path))
    for name in ("manifest.json", "train.npy", "val.npy"):
        assert (tmp_path / name).read_bytes() == (DATA / name).read_bytes(), name


# -- dropout and the validation summary --------------------------------------------------------

def test_dropout_zero_draws_nothing_and_dropout_changes_the_training_loss():
    ids = torch.randint(0, TINY.vocab_size, (2, TINY.seq + 1), generator=torch.Generator().manual_seed(3))
    ar = echotk.ExactAllReduce(ranks=4, dtype="fp32")
    plain = make_model(ar)
    rng = torch.get_rng_state()
    train_loss = plain.loss(ids[:, :-1], ids[:, 1:])
    assert torch.equal(torch.get_rng_state(), rng)  # --dropout 0 leaves the generator alone
    plain.eval()
    np.testing.assert_array_equal(bits(train_loss), bits(plain.loss(ids[:, :-1], ids[:, 1:])))
    dropped = make_model(ar, config=dataclasses.replace(TINY, dropout=0.2))
    assert torch.equal(dropped.state_dict()["embed.weight"], plain.state_dict()["embed.weight"])
    losses = [float(dropped.loss(ids[:, :-1], ids[:, 1:]).detach()) for _ in range(2)]
    assert losses[0] != losses[1]  # fresh masks each forward
    dropped.eval()
    assert float(dropped.loss(ids[:, :-1], ids[:, 1:]).detach()) == float(train_loss.detach())  # eval: no dropout
    with pytest.raises(ValueError, match="dropout must lie in"):
        TPLlama(dataclasses.replace(TINY, dropout=1.0), plain.group)


def train_losses(folder):
    return [r["train_loss"] for r in read_rows(folder / "train.csv")]


def test_dropout_runs_reproduce_by_seed(tmp_path):
    steps = ["--tokens", str(4 * 2 * 32), "--dropout", "0.2", "--eval-every", "0"]
    assert train(tmp_path / "a", *steps) == 0
    assert train(tmp_path / "b", *steps) == 0
    assert train(tmp_path / "c", *steps, "--seed", "1") == 0
    assert train(tmp_path / "none", "--tokens", str(4 * 2 * 32), "--eval-every", "0") == 0
    assert train_losses(tmp_path / "a") == train_losses(tmp_path / "b")
    assert train_losses(tmp_path / "a") != train_losses(tmp_path / "c")
    # The same initialization (seed 0) and data: only the dropout masks differ from the run without.
    assert train_losses(tmp_path / "a")[0] != train_losses(tmp_path / "none")[0]


def test_deterministic_is_recorded_and_the_callers_setting_restored(tmp_path):
    assert not torch.are_deterministic_algorithms_enabled()
    assert train(tmp_path / "det", "--tokens", str(2 * 2 * 32), "--deterministic") == 0
    assert not torch.are_deterministic_algorithms_enabled()
    with open(tmp_path / "det" / "config.json") as f:
        assert json.load(f)["deterministic"] is True
    assert train(tmp_path / "plain", "--tokens", str(2 * 2 * 32)) == 0
    assert train_losses(tmp_path / "det") == train_losses(tmp_path / "plain")  # the CPU's ops are deterministic


@pytest.mark.skipif(not has_cuda_build(), reason="needs a CUDA device and the CUDA build")
def test_cuda_deterministic_runs_repeat_bit_for_bit(tmp_path):
    # bf16 autocast, dropout and Echo 4-bit on the GPU: the same seed gives the same losses twice.
    steps = ["--tokens", str(12 * 2 * 32), "--device", "cuda", "--dtype", "bf16", "--dropout", "0.1",
             "--allreduce", "echo", "--eval-every", "0", "--deterministic"]
    assert train(tmp_path / "a", *steps) == 0
    assert train(tmp_path / "b", *steps) == 0
    assert train_losses(tmp_path / "a") == train_losses(tmp_path / "b")


@pytest.mark.skipif(not has_cuda_build(), reason="needs a CUDA device and the CUDA build")
def test_cuda_resume_gives_the_uninterrupted_losses(tmp_path):
    # The saved state holds the CPU and CUDA generators; torch.load puts them on the device and
    # they must go back as CPU bytes. Deterministic kernels, so the split run repeats the straight one.
    steps = ["--tokens", str(6 * 2 * 32), "--device", "cuda", "--dtype", "bf16", "--dropout", "0.1",
             "--allreduce", "echo", "--deterministic"]
    assert train(tmp_path / "straight", *steps) == 0
    assert train(tmp_path / "split", *steps, "--stop-after", "3") == 0
    assert train(tmp_path / "split", *steps, "--resume") == 0
    key = ("step", "train_loss", "val_loss")
    straight, split = read_rows(tmp_path / "straight" / "train.csv"), read_rows(tmp_path / "split" / "train.csv")
    assert len(straight) == 6
    assert [[r[k] for k in key] for r in split] == [[r[k] for k in key] for r in straight]


def test_resume_with_dropout_gives_the_uninterrupted_losses(tmp_path):
    steps = ["--tokens", str(6 * 2 * 32), "--dropout", "0.3"]
    assert train(tmp_path / "straight", *steps) == 0
    assert train(tmp_path / "split", *steps, "--stop-after", "2") == 0
    assert train(tmp_path / "split", *steps, "--resume", "--stop-after", "2") == 0
    assert train(tmp_path / "split", *steps, "--resume") == 0
    key = ("step", "train_loss", "val_loss")
    straight, split = read_rows(tmp_path / "straight" / "train.csv"), read_rows(tmp_path / "split" / "train.csv")
    assert len(straight) == 6
    assert [[r[k] for k in key] for r in split] == [[r[k] for k in key] for r in straight]


def test_state_without_a_newer_option_resumes_at_its_default(tmp_path):
    out = tmp_path / "run"
    assert train(out, "--tokens", "256", "--stop-after", "1") == 0
    state = torch.load(out / "state.pt", weights_only=False)
    del state["config"]["dropout"]  # a state saved before --dropout existed
    torch.save(state, out / "state.pt")
    assert train(out, "--tokens", "256", "--resume") == 0
    assert train(out, "--tokens", "256", "--resume", "--dropout", "0.1") == 2


def test_flatness_over_the_last_fifth():
    steps = list(range(100, 1001, 100))
    assert train_summary.flatness(steps, [5, 4, 3, 3, 3, 3, 3, 3, 3.02, 3.01], 1000) == pytest.approx(3.02 / 3.01 - 1)
    assert train_summary.is_flat(train_summary.flatness(steps, [9] * 8 + [3.0, 3.0301], 1000)) is False
    assert train_summary.is_flat(train_summary.flatness(steps, [9] * 8 + [3.0, 3.0299], 1000)) is True
    # Only evaluations after step 800 count: the big drop at 800 is outside.
    assert train_summary.flatness(steps, [1] * 7 + [9, 2.0, 2.0], 1000) == 0.0
    assert math.isnan(train_summary.flatness(steps, [1.0] * 10, 5000))  # none in the last fifth yet
    assert math.isnan(train_summary.flatness([1000], [3.0], 1000))     # one evaluation only


def test_summary_of_a_run(tmp_path, capsys):
    out = tmp_path / "run"
    (out).mkdir()
    (out / "config.json").write_text('{"steps": 10}')
    rows = [(s, 5.0 - 0.1 * s if s < 6 else 4.4 + 0.2 * (s - 6)) for s in range(1, 11)]
    (out / "train.csv").write_text("step,train_loss,val_loss\n" + "".join(
        f"{s},{v - 1},{v if s % 2 == 0 or s > 5 else ''}\n" for s, v in rows))
    r = train_summary.summarize(str(out))
    assert (r.min_step, r.min_val, r.final_val) == (6, pytest.approx(4.4), pytest.approx(5.2))
    assert r.flat == pytest.approx(5.2 / 5.0 - 1) and r.trend > 0 and r.complete  # steps 9 and 10
    assert "not flat" in r.line() and "rising" in r.line()
    assert train_summary.main([str(out), str(tmp_path / "missing")]) == 2
    captured = capsys.readouterr()
    assert captured.out.startswith("run: val min 4.4000 at step 6") and "missing" in captured.err
