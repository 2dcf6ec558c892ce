"""`python -m echotk train`: trains echotk.train.model.TPLlama (P emulated tensor-parallel ranks, every
site's all-reduce exact or Echo) on the token ids of data/training, with a CSV of losses per step,
the all-reduce's per-site errors every few steps, and resume from a saved state
(docs/python-training.md, docs/results-training.md)."""
from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys

import torch

from .._cli import EXIT_BAD_INPUT, add_spec_options
from .._util import BadInput
from .model import ModelConfig
from .trainer import Trainer


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m echotk train", description=" ".join(__doc__.split()),
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--out", required=True, help="run folder: config.json, train.csv, sites.csv, state.pt")
    p.add_argument("--data", default="data/training", help="folder of train.npy, val.npy, manifest.json")
    p.add_argument("--allreduce", default="exact", choices=["exact", "echo"])
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"],
                   help="bf16: bf16 autocast and a bf16 all-reduce; fp32: fp32 throughout")
    p.add_argument("--ranks", "-P", type=int, default=4, help="emulated tensor-parallel ranks (1..8)")
    add_spec_options(p)
    d = ModelConfig()
    for name in ("dim", "layers", "heads", "ffn", "seq"):
        p.add_argument(f"--{name}", type=int, default=getattr(d, name), help=f"model {name}")
    p.add_argument("--dropout", type=float, default=d.dropout,
                   help="dropout on the embedding output and on the attention and MLP outputs before each "
                        "residual add (0: none; drawn from torch's generator, seeded by --seed)")
    p.add_argument("--tokens", type=int, default=50_000_000, help="training tokens (steps = tokens / (batch * seq))")
    p.add_argument("--batch", type=int, default=32, help="sequences per step")
    p.add_argument("--lr", type=float, default=1e-3, help="peak learning rate")
    p.add_argument("--min-lr-ratio", type=float, default=0.1, help="final learning rate / peak")
    p.add_argument("--warmup", type=int, default=100, help="warm-up steps")
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--adam-beta1", type=float, default=0.9)
    p.add_argument("--adam-beta2", type=float, default=0.95)
    p.add_argument("--adam-eps", type=float, default=1e-5)
    p.add_argument("--grad-clip", type=float, default=1.0, help="global gradient norm clip (0: off)")
    p.add_argument("--seed", type=int, default=0, help="initialization seed")
    p.add_argument("--data-seed", type=int, default=0, help="data order seed (same order for every run)")
    p.add_argument("--eval-every", type=int, default=100, help="validation loss every N steps and at the end (0: end only)")
    p.add_argument("--eval-sequences", type=int, default=0, help="validation sequences (0: the whole split)")
    p.add_argument("--site-every", type=int, default=100,
                   help="per-site all-reduce errors every N steps into sites.csv (0: never; Echo runs only)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--deterministic", action="store_true",
                   help="torch's deterministic algorithms (and cuBLAS's fixed workspace), so that a run on a "
                        "GPU repeats bit for bit with the same seed, device and software (without it the "
                        "backward's atomics make repeated runs part after a few steps)")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its state.pt "
                   "(or start it when there is none)")
    p.add_argument("--max-seconds", type=float, default=0, help="stop and save before this many seconds (0: no limit)")
    p.add_argument("--stop-after", type=int, default=0, help="stop and save after this many steps (0: no limit)")
    p.add_argument("--save-every", type=int, default=0, help="also save the state every N steps (0: at the stop only)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    return p


def _check_args(args):
    for name in ("batch", "tokens", "ranks"):
        if getattr(args, name) < 1:
            raise BadInput(f"--{name} must be >= 1, got {getattr(args, name)}")
    for name in ("warmup", "eval_every", "eval_sequences", "site_every", "stop_after", "save_every", "threads"):
        if getattr(args, name) < 0:
            raise BadInput(f"--{name.replace('_', '-')} must be >= 0, got {getattr(args, name)}")
    if not (math.isfinite(args.dropout) and 0 <= args.dropout < 1):
        raise BadInput(f"--dropout must lie in [0, 1), got {args.dropout}")
    if not (math.isfinite(args.weight_decay) and args.weight_decay >= 0):
        raise BadInput(f"--weight-decay must be >= 0, got {args.weight_decay}")
    for name in ("lr", "adam_eps"):
        if not (math.isfinite(getattr(args, name)) and getattr(args, name) > 0):
            raise BadInput(f"--{name.replace('_', '-')} must be a positive number, got {getattr(args, name)}")
    if not 0 <= args.min_lr_ratio <= 1:
        raise BadInput(f"--min-lr-ratio must lie in [0, 1], got {args.min_lr_ratio}")
    if args.tokens < args.batch * args.seq:
        raise BadInput(f"--tokens {args.tokens} is less than one step of {args.batch} x {args.seq} tokens")
    if args.max_seconds < 0 or not math.isfinite(args.max_seconds):
        raise BadInput(f"--max-seconds must be >= 0, got {args.max_seconds}")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise BadInput("--device cuda: no CUDA device is visible")
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise BadInput(f"--out {args.out} is a file, not a folder")


@contextlib.contextmanager
def _deterministic_algorithms(on: bool):
    """torch's deterministic algorithms for the run when asked, the caller's setting restored after.
    cuBLAS reads CUBLAS_WORKSPACE_CONFIG when it creates its handle, so it is set first (kept if
    the caller set it). An op without a deterministic implementation is a BadInput naming it."""
    if not on:
        yield
        return
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    except RuntimeError as e:
        if "deterministic" in str(e):
            raise BadInput(f"--deterministic: {e}") from e
        raise
    finally:
        torch.use_deterministic_algorithms(before)


def main(argv=None) -> int:
    try:
        args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
        _check_args(args)
        if args.threads:
            torch.set_num_threads(args.threads)
        with _deterministic_algorithms(args.deterministic):
            return Trainer(args, vars(build_parser().parse_args(["--out", args.out]))).run()
    except (ValueError, FileNotFoundError) as e:  # BadInput is a ValueError
        print(f"echotk train: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
