"""The training loop of `python -m echotk train` and its run folder: config.json, train.csv,
sites.csv and state.pt, resumed from where the last invocation saved."""
from __future__ import annotations

import csv
import json
import math
import os
import sys
import time
from typing import List

import numpy as np
import torch

from .. import AllReduce, ExactAllReduce
from .._cli import spec_from_args
from .._util import BadInput, atomic_path, write_atomic
from ..nn import TensorParallelGroup
from .batches import DataOrder, learning_rate, validation_batches
from .data import load as load_ids
from .model import ModelConfig, TPLlama, parameter_count
from .summary import summarize

STATE_FILE, CONFIG_FILE, TRAIN_CSV, SITES_CSV = "state.pt", "config.json", "train.csv", "sites.csv"
TRAIN_COLUMNS = ["step", "tokens", "train_loss", "val_loss", "lr", "step_seconds", "allreduce_share"]
SITE_COLUMNS = ["step", "direction", "site", "kind", "injected_error", "net_error", "correction_norm",
                "sum_norm", "relative_error", "scale_exponent", "poisoned_groups"]
# Arguments that only steer one invocation; every other one defines the run and must match on resume.
INVOCATION_ONLY = ("out", "resume", "max_seconds", "stop_after", "save_every", "progress", "threads", "data")


def run_config(args) -> dict:
    return {k: v for k, v in sorted(vars(args).items()) if k not in INVOCATION_ONLY}


def _csv_keep(path: str, columns: List[str], last_step: int):
    """Rewrites a CSV keeping the rows of steps <= last_step (rows written after the last save)."""
    rows = []
    if os.path.isfile(path):
        with open(path, newline="") as f:
            rows = [r for r in csv.reader(f)][1:]
    kept = [r for r in rows if r and int(r[0]) <= last_step]
    write_atomic(path, ",".join(columns) + "\n" + "".join(",".join(r) + "\n" for r in kept))


class Progress:
    """tqdm when it is installed, else a line every 10 seconds."""

    def __init__(self, total: int, initial: int, enabled: bool):
        self.enabled, self.total, self.step, self._last = enabled, total, initial, 0.0
        self.bar = None
        if enabled:
            try:
                from tqdm import tqdm
                self.bar = tqdm(total=total, initial=initial, unit="step", dynamic_ncols=True,
                                mininterval=1.0 if sys.stderr.isatty() else 10.0)
            except ImportError:
                pass

    def update(self, **info):
        self.step += 1
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(info, refresh=False)
        elif time.monotonic() - self._last > 10 or self.step == self.total:
            self._last = time.monotonic()
            print(f"train {self.step}/{self.total} " + " ".join(f"{k}={v}" for k, v in info.items()),
                  file=sys.stderr, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


class Trainer:
    """One run of the command: `args` its parsed options, `defaults` the options' defaults (a
    state saved before an option existed counts as saved with its default)."""

    def __init__(self, args, defaults: dict):
        self.args, self.defaults = args, defaults
        self.device = torch.device(args.device)
        self.config = ModelConfig(dim=args.dim, layers=args.layers, heads=args.heads, ffn=args.ffn, seq=args.seq,
                                  dropout=args.dropout)
        try:
            self.config.check(args.ranks)
            spec = spec_from_args(args)
            if args.allreduce == "echo":
                self.allreduce = AllReduce(ranks=args.ranks, spec=spec, device=args.device)
            else:
                self.allreduce = ExactAllReduce(ranks=args.ranks, dtype=args.dtype, device=args.device)
        except (ValueError, RuntimeError) as e:  # RuntimeError: device="cuda" without the CUDA build
            raise BadInput(str(e)) from e
        self.manifest, ids = load_ids(args.data)
        if self.manifest["vocab_size"] > self.config.vocab_size:
            raise BadInput(f"{args.data}: vocabulary of {self.manifest['vocab_size']} tokens, the model has "
                           f"{self.config.vocab_size}")
        self.data = DataOrder(ids["train"], args.seq, args.data_seed)
        self.val = validation_batches(ids["val"], args.seq, args.batch, args.eval_sequences)
        self.steps = args.tokens // (args.batch * args.seq)
        torch.manual_seed(args.seed)  # the CPU and every CUDA generator: initialization, then dropout
        self.group = TensorParallelGroup(args.ranks, self.allreduce)
        self.model = TPLlama(self.config, self.group).to(self.device)
        decay = [p for n, p in self.model.named_parameters() if p.dim() >= 2]
        other = [p for n, p in self.model.named_parameters() if p.dim() < 2]
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": args.weight_decay}, {"params": other, "weight_decay": 0.0}],
            lr=args.lr, betas=(args.adam_beta1, args.adam_beta2), eps=args.adam_eps)
        self.step = 0
        self.autocast = args.dtype == "bf16"

    # -- state ------------------------------------------------------------------------------
    def save(self):
        """state.pt through a temporary name. The compensator states need no saving: both are
        reset at the start of every pass, so between steps they are empty."""
        state = {"version": 1, "step": self.step, "config": run_config(self.args),
                 "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                 "rng_cpu": torch.get_rng_state(),
                 "rng_cuda": torch.cuda.get_rng_state_all() if self.device.type == "cuda" else None}
        with atomic_path(os.path.join(self.args.out, STATE_FILE)) as tmp:
            torch.save(state, tmp)

    def load(self, path: str):
        # On the CPU, as saved: load_state_dict copies the weights and moments onto the model's
        # device, AdamW's step counts stay CPU tensors as in an unbroken run, and torch takes the
        # generator states as CPU bytes.
        state = torch.load(path, map_location="cpu", weights_only=False)
        now = run_config(self.args)
        # An option added after the state was saved counts as its default there (e.g. --dropout 0).
        saved = {**{k: self.defaults[k] for k in now if k not in state.get("config", {})}, **state.get("config", {})}
        if saved != now:
            diff = [k for k in sorted(set(saved) | set(now)) if saved.get(k) != now.get(k)]
            raise BadInput(f"{path}: saved for other settings ({', '.join(diff)}); use the run's own "
                           f"arguments or another --out")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng_cpu"])
        if state["rng_cuda"] is not None and self.device.type == "cuda":
            torch.cuda.set_rng_state_all(state["rng_cuda"])
        self.step = state["step"]

    # -- steps ------------------------------------------------------------------------------
    def _autocast(self):
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast)

    def _tensors(self, windows: np.ndarray):
        t = torch.from_numpy(windows).to(self.device, non_blocking=True)
        return t[:, :-1], t[:, 1:]

    def evaluate(self) -> float:
        """Mean next-token loss over the validation sequences (the run's all-reduce in the forward)."""
        self.model.eval()
        total, count = 0.0, 0
        with torch.no_grad(), self._autocast():
            for windows in self.val:
                ids, targets = self._tensors(windows)
                total += float(self.model.loss(ids, targets)) * targets.numel()
                count += targets.numel()
        self.model.train()
        return total / count

    def train_step(self, record_sites: bool):
        args = self.args
        lr = learning_rate(self.step, self.steps, args.lr, args.warmup, args.min_lr_ratio)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        ids, targets = self._tensors(self.data.batch(self.step, args.batch))
        self.group.timing = True
        self.group.record_reports = record_sites
        self.group.reports.clear()
        if isinstance(self.allreduce, AllReduce) and self.device.type == "cuda":
            self.allreduce.norms = record_sites  # the report's norms need x'; other steps skip it
        with self._autocast():
            loss = self.model.loss(ids, targets)
        loss.backward()
        if args.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), args.grad_clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        value = float(loss.detach())
        self.group.record_reports = False
        return value, lr

    def run(self) -> int:
        args = self.args
        start = time.monotonic()
        os.makedirs(args.out, exist_ok=True)
        state_path = os.path.join(args.out, STATE_FILE)
        if os.path.isfile(state_path):
            if not args.resume:
                raise BadInput(f"--out {args.out} holds a run already (state.pt); pass --resume or another folder")
            self.load(state_path)
        elif os.path.isfile(os.path.join(args.out, TRAIN_CSV)):
            if not args.resume:
                raise BadInput(f"--out {args.out} holds a run's CSV already; pass --resume or another folder")
        write_atomic(os.path.join(args.out, CONFIG_FILE), json.dumps(
            {**run_config(self.args), "parameters": parameter_count(self.model), "steps": self.steps,
             "data_manifest": self.manifest["splits"]}, indent=2) + "\n")
        _csv_keep(os.path.join(args.out, TRAIN_CSV), TRAIN_COLUMNS, self.step)
        _csv_keep(os.path.join(args.out, SITES_CSV), SITE_COLUMNS, self.step)
        print(f"train: {parameter_count(self.model) / 1e6:.2f} M parameters, {self.steps} steps of "
              f"{args.batch} x {args.seq} tokens, all-reduce {self.allreduce}, from step {self.step}",
              file=sys.stderr, flush=True)
        if self.step >= self.steps:
            print(f"train: {args.out} is complete ({self.steps} steps)", file=sys.stderr)
            return 0
        echo = isinstance(self.allreduce, AllReduce)
        progress = Progress(self.steps, self.step, args.progress)
        step_times, shares = [], []
        longest_step = longest_eval = 0.0
        save_seconds = 2.0  # until a save has been timed
        done_here, val = 0, float("nan")
        train_csv = open(os.path.join(args.out, TRAIN_CSV), "a", newline="")
        sites_csv = open(os.path.join(args.out, SITES_CSV), "a", newline="")
        try:
            while self.step < self.steps:
                last = self.step + 1 == self.steps
                evaluate = last or (args.eval_every and (self.step + 1) % args.eval_every == 0)
                if args.max_seconds:
                    need = 2 * longest_step + (2 * longest_eval if evaluate else 0) + 2 * save_seconds + 1.0
                    if time.monotonic() - start + need > args.max_seconds:
                        break
                if args.stop_after and done_here >= args.stop_after:
                    break
                record = echo and args.site_every > 0 and (self.step % args.site_every == 0 or last)
                begin = time.perf_counter()
                loss, lr = self.train_step(record)
                if self.device.type == "cuda":
                    torch.cuda.synchronize()
                seconds = time.perf_counter() - begin
                share = self.group.allreduce_seconds() / seconds
                self.step += 1
                done_here += 1
                longest_step = max(longest_step, seconds) if done_here > 1 else longest_step
                step_times.append(seconds)
                shares.append(share)
                if not math.isfinite(loss):
                    raise FloatingPointError(f"the training loss is {loss} at step {self.step}")
                for direction, site, kind, r in self.group.reports:
                    sites_csv.write(f"{self.step},{direction},{site},{kind},{r.injected_error!r},{r.net_error!r},"
                                    f"{r.correction_norm!r},{r.sum_norm!r},{r.relative_error!r},"
                                    f"{r.scale_exponent},{r.poisoned_groups}\n")
                val_text = ""
                if evaluate:
                    eval_begin = time.perf_counter()
                    val = self.evaluate()
                    longest_eval = max(longest_eval, time.perf_counter() - eval_begin)
                    val_text = repr(val)
                train_csv.write(f"{self.step},{self.step * args.batch * args.seq},{loss!r},{val_text},{lr!r},"
                                f"{seconds!r},{share!r}\n")
                train_csv.flush()
                sites_csv.flush()
                progress.update(loss=f"{loss:.3f}", val=f"{val:.3f}")
                if args.save_every and self.step % args.save_every == 0 and self.step < self.steps:
                    save_begin = time.perf_counter()
                    self.save()
                    save_seconds = time.perf_counter() - save_begin
        finally:
            train_csv.close()
            sites_csv.close()
            progress.close()
        self.save()
        if step_times:
            timed = step_times[1:] or step_times  # the first step pays for warm-up
            median = float(np.median(timed))
            print(f"train: steps {self.step - done_here}..{self.step} of {self.steps} in "
                  f"{time.monotonic() - start:.1f} s; median step {median * 1000:.1f} ms, "
                  f"{args.batch * args.seq / median:.0f} tokens/s, all-reduce share {np.median(shares[1:] or shares):.3f}",
                  file=sys.stderr)
        state = "complete" if self.step >= self.steps else "stopped (resume with --resume)"
        print(f"train: {args.out} {state} at step {self.step}, last validation loss {val:.4f}", file=sys.stderr)
        try:  # over the whole run's train.csv, earlier calls included
            print(f"train: {summarize(args.out).details()}", file=sys.stderr)
        except ValueError:
            pass  # no validation loss evaluated yet
        return 0
