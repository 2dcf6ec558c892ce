"""`python -m echotk ppl`: perplexity over evenly spaced windows of a text with every row-parallel
site all-reduced by Echo or the exact sum; the windows, summary lines and CSV columns of
`echotk ppl` (cli/cmd_ppl.cpp, model/src/perplexity.cpp), and with --baseline the paired interval
of tools/paired_ppl.py."""
from __future__ import annotations

import argparse
import csv
import gzip
import math
import os
import sys
import time
from typing import List, Sequence

import torch

from .. import AllReduce, ExactAllReduce, Spec, tensor_parallel
from .._cli import EXIT_BAD_INPUT, add_spec_options, spec_from_args
from .._util import BadInput, write_atomic
from ..models import bos_id, default_model_path, load_model, load_tokenizer

# --threads of echotk ppl and of the row tools (tools/ppl_rows.py, tools/postnorm_study.py).
THREADS_HELP = "torch CPU threads (0: torch's default, the machine's core count)"


def student_t_975(df: int) -> float:
    """Two-sided 95% Student-t quantile (the 97.5% point) with df degrees of freedom, from scipy.stats
    (imported here: only the summaries need it). The C++ `echotk ppl` rounds it to 3 decimals, so the
    two tools' intervals may differ in their last printed digit."""
    if df == 0:
        return math.inf
    from scipy import stats

    return float(stats.t.ppf(0.975, df))


def plan_windows(num_tokens: int, num_windows: int, length: int) -> List[int]:
    """Starts of num_windows windows of length tokens spread evenly (plan_windows in C++)."""
    if num_windows < 1 or length < 2:
        raise BadInput("need at least one window of at least 2 tokens")
    if num_windows > num_tokens // length:
        raise BadInput(f"{num_windows} windows of {length} tokens do not fit in {num_tokens} tokens")
    slack = num_tokens - num_windows * length
    return [w * length + (slack * w // (num_windows - 1) if num_windows > 1 else 0)
            for w in range(num_windows)]


def window_nll(logits: torch.Tensor, tokens: torch.Tensor) -> float:
    """Sum over t < T-1 of -log softmax(logits[t])[tokens[t+1]], in float64."""
    logits = logits.double()
    lse = torch.logsumexp(logits[:-1], dim=-1)
    picked = logits[:-1].gather(1, tokens[1:].unsqueeze(1)).squeeze(1)
    return float((lse - picked).sum())


def summarize(nll: Sequence[float], predictions: Sequence[int]) -> dict:
    total, count, windows = sum(nll), sum(predictions), len(nll)
    mean = total / count
    stderr = 0.0
    if windows > 1:
        means = [a / b for a, b in zip(nll, predictions)]
        s, sq = sum(means), sum(m * m for m in means)
        stderr = math.sqrt(max(0.0, (sq - s * s / windows) / (windows - 1)) / windows)
    half = student_t_975(windows - 1) * stderr if windows > 1 else 0.0
    return {"windows": windows, "predictions": count, "mean_nll": mean, "stderr": stderr,
            "perplexity": math.exp(mean), "ci_low": math.exp(mean - half), "ci_high": math.exp(mean + half)}


def windows_of(rows) -> dict:
    """{start: (nll_sum, predictions)} of score_windows' rows, as read_csv gives a CSV's."""
    return {r[1]: (r[4], r[3]) for r in rows}


def summarize_run(run: dict) -> dict:
    """summarize() of a {start: (nll_sum, predictions)} run, windows in start order."""
    return summarize([run[k][0] for k in sorted(run)], [run[k][1] for k in sorted(run)])


def paired(run: dict, base: dict) -> tuple:
    """Mean per-window difference of log-perplexity against the baseline and its 95% half-width
    (tools/paired_ppl.py)."""
    if sorted(run) != sorted(base):
        raise BadInput("--baseline: its windows differ from this run's")
    diffs = [run[s][0] / run[s][1] - base[s][0] / base[s][1] for s in sorted(run)]
    n = len(diffs)
    d = sum(diffs) / n
    sd = math.sqrt(sum((x - d) ** 2 for x in diffs) / (n - 1)) if n > 1 else 0.0
    return d, (student_t_975(n - 1) * sd / math.sqrt(n) if n > 1 else 0.0)


def window_ids(ids: torch.Tensor, start: int, length: int, bos) -> torch.Tensor:
    """The `length` input ids of the window at `start`: the text's ids, or, for a model that wants
    BOS first (Gemma 3), BOS and the text's first length - 1 ids."""
    if bos is None:
        return ids[start : start + length]
    return torch.cat([ids.new_tensor([bos]), ids[start : start + length - 1]])


@torch.no_grad()
def score_windows(model, ids: torch.Tensor, starts: Sequence[int], length: int, bos=None, device="cpu",
                  progress=True) -> list:
    """One forward pass per window; rows (window, start, tokens, predictions, nll_sum, mean_nll,
    seconds) as the CSV has them."""
    rows = []
    for w, start in enumerate(starts):
        window = window_ids(ids, start, length, bos).to(device)
        begin = time.perf_counter()
        logits = model(input_ids=window.unsqueeze(0), use_cache=False).logits[0]
        seconds = time.perf_counter() - begin
        nll = window_nll(logits, window)
        rows.append((w, start, length, length - 1, nll, nll / (length - 1), seconds))
        if progress:
            print(f"\rppl {w + 1}/{len(starts)} windows", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    return rows


def write_csv(path: str, rows) -> None:
    """The per-window CSV (columns of `echotk ppl --csv`), written to a temporary name and renamed."""
    write_atomic(path, "window,start,tokens,predictions,nll_sum,mean_nll,seconds\n" + "".join(
        f"{r[0]},{r[1]},{r[2]},{r[3]},{r[4]!r},{r[5]!r},{r[6]!r}\n" for r in rows))


def read_csv(path: str) -> dict:
    """{start: (nll_sum, predictions)} of a per-window CSV."""
    with open(path, newline="") as f:
        return {int(r["start"]): (float(r["nll_sum"]), int(r["predictions"])) for r in csv.DictReader(f)}


def read_text(path: str) -> str:
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".gz"):
        data = gzip.decompress(data)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"{path}: not UTF-8 text ({e})") from e


def describe(args, spec: Spec) -> str:
    """One line naming the all-reduce, as model/cli/run_options.cpp's describe()."""
    dtype = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}[spec.dtype]
    head = f"P={args.ranks} {dtype} "
    if args.allreduce == "exact":
        return head + "exact"
    text = f"{head}echo {spec.bits}-bit {spec.quantizer} g={spec.group} {spec.algorithm} "
    if spec.outliers > 0:
        text += f"outliers={spec.outliers} "
    if spec.rotation != "none":
        text += f"rotation={spec.rotation} "
    if spec.overflow_groups != Spec.overflow_groups:
        text += f"overflow-groups={spec.overflow_groups} "
    text += spec.compensator
    if spec.compensator != "off":
        extra = (f", a={spec.a:g}, beta1={spec.beta1:g}, beta2={spec.beta2:g}" if spec.compensator == "dual"
                 else f", beta={spec.beta:g}")
        text += f"({spec.residual}, eta={spec.eta:g}{extra})"
    return text


def wire_bits(args, spec: Spec) -> float:
    """Bits per element on the wire: the spec's (QuantSpec::wire_bits_per_element, the same at
    every site here), or the dtype's width for the exact all-reduce."""
    if args.allreduce == "exact":
        return {"fp32": 32.0, "bf16": 16.0, "fp16": 16.0}[spec.dtype]
    return spec.wire_bits_per_element()


def wire_bits_terms(args) -> str:
    if args.allreduce == "exact":
        return f"the exact all-reduce in {args.dtype}"
    return "codes, parameters, outlier entries; every site"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m echotk ppl", description=__doc__.splitlines()[0])
    p.add_argument("--gguf", default=default_model_path(),
                   help="GGUF model file (default: $ECHO_MODEL_GGUF or the cache scripts/setup_model.sh fills)")
    p.add_argument("--text", default="data/smollm2/moby-dick.txt.gz", help="UTF-8 text, plain or .gz")
    p.add_argument("--windows", "-n", type=int, default=8, help="number of windows N")
    p.add_argument("--length", "-L", type=int, default=512, help="tokens per window L (L - 1 predictions each)")
    p.add_argument("--ranks", "-P", type=int, default=4, help="tensor-parallel ranks (1..8)")
    p.add_argument("--allreduce", default="exact", choices=["exact", "echo"])
    p.add_argument("--dtype", default="bf16", choices=["fp32", "bf16", "fp16"],
                   help="type of the contributions and of the all-reduce")
    p.add_argument("--device", default="cpu", help="cpu | cuda (the model and the all-reduce)")
    p.add_argument("--threads", type=int, default=0, help=THREADS_HELP)
    p.add_argument("--csv", help="write per-window results (start, nll, seconds) to this CSV file")
    p.add_argument("--baseline", help="a CSV of another run over the same windows: print the paired "
                                      "difference in log-perplexity and its 95%% interval")
    add_spec_options(p)
    return p


def run(argv) -> int:
    args = build_parser().parse_args(argv)
    for path, flag in ((args.text, "--text"), (args.gguf, "--gguf")) + (
            ((args.baseline, "--baseline"),) if args.baseline else ()):
        if not os.path.isfile(path):
            raise BadInput(f"{flag} {path}: no such file" +
                           (" (scripts/setup_model.sh fetches the model)" if flag == "--gguf" else ""))
    if args.csv and os.path.isdir(args.csv):
        raise BadInput(f"--csv {args.csv} is a folder")
    if not 2 <= args.length <= 8192 or args.windows < 1:
        raise BadInput("--length must lie in [2, 8192] and --windows be >= 1")
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    spec = spec_from_args(args)
    try:
        if args.allreduce == "echo":
            reduce = AllReduce(ranks=args.ranks, spec=spec, device=args.device)
        else:
            reduce = ExactAllReduce(ranks=args.ranks, dtype=args.dtype, device=args.device)
    except ValueError as e:
        raise BadInput(str(e)) from e
    text = read_text(args.text)
    tokenizer = load_tokenizer(args.gguf)
    ids = torch.tensor(tokenizer.encode(text).ids, dtype=torch.long)
    starts = plan_windows(len(ids), args.windows, args.length)
    model = tensor_parallel(load_model(args.gguf, device=args.device), ranks=args.ranks, allreduce=reduce)

    rows = score_windows(model, ids, starts, args.length, bos_id(args.gguf), args.device)
    nll, predictions = [r[4] for r in rows], [r[3] for r in rows]
    seconds_total = sum(r[6] for r in rows)

    s = summarize(nll, predictions)
    print(f"model        {getattr(model.config, 'name_or_path', '')} ({args.gguf})")
    print(f"text         {args.text} ({len(ids)} tokens)")
    print(f"allreduce    {describe(args, spec)}")
    print(f"wire bits    {wire_bits(args, spec):.4f} per element ({wire_bits_terms(args)})")
    print(f"windows      {s['windows']} x {args.length} tokens, evenly spaced ({s['predictions']} predictions)")
    print(f"mean nll     {s['mean_nll']:.6f} (standard error over windows {s['stderr']:.6f})")
    print(f"perplexity   {s['perplexity']:.4f}  95% CI [{s['ci_low']:.4f}, {s['ci_high']:.4f}] (Student t over windows)")
    print(f"speed        {len(starts) * args.length / seconds_total:.1f} tokens/s forward on {args.device} "
          f"({seconds_total / len(starts):.2f} s per window)")
    if args.baseline:
        base = read_csv(args.baseline)
        d, half = paired(windows_of(rows), base)
        print(f"paired       d log ppl vs {args.baseline}: {d:+.5f}  95% CI [{d - half:+.5f}, {d + half:+.5f}]"
              f"  (ppl ratio {math.exp(d):.4f})")
    sys.stdout.flush()
    if args.csv:
        write_csv(args.csv, rows)
    return 0


def main(argv=None) -> int:
    try:
        return run(sys.argv[1:] if argv is None else argv)
    except (ValueError, FileNotFoundError) as e:  # BadInput is a ValueError
        print(f"echotk ppl: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
