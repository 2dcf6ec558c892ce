"""Rows of the post-norm compensator study (docs/results-gemma3.md): candidate compensators of
tools/postnorm_compensators.py over the same windows as tools/ppl_rows.py, one CSV per row (the
columns of `echotk ppl --csv`), each paired against the 16-bit row's CSV.

    python tools/postnorm_study.py --gguf $(scripts/setup_gemma3.sh) --text data/smollm2/moby-dick.txt.gz \
        --windows 16 --length 512 --out data/gemma3/ppl/moby --rows kind-static4 ...

A row name is TRANSPORT-CANDIDATE: TRANSPORT one of TRANSPORTS (bits, group, rotation),
CANDIDATE one of CANDIDATES (states and units of the compensator).
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from postnorm_compensators import Candidate, StudyAllReduce, calibrate_gains, post_norm_weights  # noqa: E402

from echotk import ExactAllReduce, Spec  # noqa: E402
from echotk.models import bos_id, load_model, load_tokenizer  # noqa: E402
from echotk.eval.ppl import (  # noqa: E402
    THREADS_HELP, paired, plan_windows, read_csv, read_text, score_windows,
    summarize_run, windows_of, write_csv,
)
from echotk.tensor_parallel import tensor_parallel, undo_tensor_parallel  # noqa: E402

TRANSPORTS = {
    "q4": dict(bits=4),
    "q8": dict(bits=8),
    "q4rot": dict(bits=4, rotation="hadamard"),
    "q4rot64": dict(bits=4, rotation="hadamard", group=64),
}
CANDIDATES = {
    "paper": Candidate(),
    "kind": Candidate(states="per-kind"),
    "static": Candidate(units="static"),
    "kind-static": Candidate(states="per-kind", units="static"),
    "dynamic": Candidate(units="dynamic"),
    "kind-dynamic": Candidate(states="per-kind", units="dynamic"),
    "oracle": Candidate(units="oracle"),
    "kind-oracle": Candidate(states="per-kind", units="oracle"),
    "jacobian": Candidate(units="jacobian"),
    "kind-jacobian": Candidate(states="per-kind", units="jacobian"),
    "partial": Candidate(units="partial"),
    "dynpartial": Candidate(units="dynpartial"),
    "dynself": Candidate(units="dynself"),
    "self": Candidate(units="self"),
    "closed": Candidate(units="closed", residual="local", profile=1.0),
}


def parse_row(name: str):
    transport, _, candidate = name.partition("-")
    if transport not in TRANSPORTS:
        raise ValueError(f"row {name!r}: transport {transport!r} is not one of {list(TRANSPORTS)}")
    # CANDIDATE[@etaE][@local][@profP][@floorF][@b1_B][@b2_B][@clipC|@clipkeepC][@radial][@lastsite]: eta E
    # instead of 0.75, the local residual instead of the global one, the per-feature profile's power and
    # floor, the averages' decays, the correction clamped to C times the rank's own per-token RMS (its
    # clamped-off part dropped or kept in the residual), the residual's component along the delivered row
    # not carried, dynpartial's ratio from the last site whatever its kind
    base, *mods = candidate.split("@")
    if base not in CANDIDATES:
        raise ValueError(f"row {name!r}: candidate {base!r} is not one of {list(CANDIDATES)}")
    c = CANDIDATES[base]
    for mod in mods:
        if mod.startswith("eta"):
            c = dataclasses.replace(c, eta=float(mod[3:]))
        elif mod == "local":
            c = dataclasses.replace(c, residual="local")
        elif mod.startswith("prof"):
            c = dataclasses.replace(c, profile=float(mod[4:]))
        elif mod.startswith("floor"):
            c = dataclasses.replace(c, floor=float(mod[5:]))
        elif mod.startswith("b1_"):
            c = dataclasses.replace(c, beta1=float(mod[3:]))
        elif mod.startswith("b2_"):
            c = dataclasses.replace(c, beta2=float(mod[3:]))
        elif mod.startswith("clipkeep"):
            c = dataclasses.replace(c, clip=float(mod[8:]), keep=True)
        elif mod.startswith("clip"):
            c = dataclasses.replace(c, clip=float(mod[4:]))
        elif mod == "lastsite":
            c = dataclasses.replace(c, last_site=True)
        elif mod == "radial":
            c = dataclasses.replace(c, radial=True)
        elif mod.startswith("pre"):
            c = dataclasses.replace(c, prescale=float(mod[3:]))
        else:
            raise ValueError(f"row {name!r}: unknown modifier @{mod}")
    return Spec(compensator="off", **TRANSPORTS[transport]), c


def report_line(name: str, run: dict, base: dict, last: str) -> str:
    """| name | perplexity | d log ppl vs base | its 95% interval | last |"""
    s = summarize_run(run)
    d, half = paired(run, base)
    return f"| {name} | {s['perplexity']:.2f} | {d:+.4f} | [{d - half:+.4f}, {d + half:+.4f}] | {last} |"


def cal_window(args, tokenizer, ids, bos) -> torch.Tensor:
    """The calibration window: the first --calibration-length tokens of --calibration-text (or of
    the text), after BOS where the model wants one."""
    cal_ids = ids if not args.calibration_text else torch.tensor(
        tokenizer.encode(read_text(args.calibration_text)).ids, dtype=torch.long)
    cal = cal_ids[: args.calibration_length]
    if bos is not None:
        cal = torch.cat([cal.new_tensor([bos]), cal[:-1]])
    return cal


@torch.no_grad()
def equalize_gains(model, cal: torch.Tensor, ranks: int) -> None:
    """Scales site k's o_proj / down_proj weight by alpha_k = G_k / G: the site's output becomes
    alpha_k y_k, which its RMSNorm divides out (up to the norm's eps), and its gain w_k / rms
    becomes G for every site."""
    gains, _ = calibrate_gains(model, cal, ranks)
    g = math.exp(sum(math.log(v) for v in gains) / len(gains))
    for layer_idx, layer in enumerate(model.model.layers):
        for kind, linear in ((0, layer.self_attn.o_proj), (1, layer.mlp.down_proj)):
            linear.weight.mul_(gains[2 * layer_idx + kind] / g)
    after, _ = calibrate_gains(model, cal, ranks)
    print(f"# equalized gains: before {min(gains):.3g}..{max(gains):.3g}, after {min(after):.3g}..{max(after):.3g}",
          flush=True)


def run_arguments(description: str, out_help: str) -> argparse.ArgumentParser:
    """The model, text, windows, ranks and output prefix of a run of rows."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--gguf", required=True)
    p.add_argument("--text", required=True)
    p.add_argument("--windows", type=int, default=16)
    p.add_argument("--length", type=int, default=512)
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--out", required=True, help=out_help)
    p.add_argument("--threads", type=int, default=0, help=THREADS_HELP)
    return p


def main(argv=None) -> int:
    p = run_arguments(__doc__.splitlines()[0], "prefix of the CSV files: OUT-ROW.csv")
    p.add_argument("--baseline", help="the 16-bit row's CSV (default OUT-p4-16bit.csv; made when missing)")
    p.add_argument("--calibration-text", help="text of the static gains' calibration window "
                                              "(default: --text); its first --calibration-length tokens")
    p.add_argument("--calibration-length", type=int, default=256)
    p.add_argument("--rows", nargs="+", required=True)
    p.add_argument("--reuse", action="store_true", help="keep rows whose CSV exists")
    p.add_argument("--equalize-gains", action="store_true",
                   help="the causal test: scale each site's row-parallel weight by G_k / G (G_k its static gain "
                        "from the calibration window, G their geometric mean), which the post-norm undoes, so "
                        "the model computes the same function with every site's gain equal to G")
    args = p.parse_args(argv)
    for name in args.rows:
        parse_row(name)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    begin = time.perf_counter()
    tokenizer = load_tokenizer(args.gguf)
    ids = torch.tensor(tokenizer.encode(read_text(args.text)).ids, dtype=torch.long)
    starts = plan_windows(len(ids), args.windows, args.length)
    bos = bos_id(args.gguf)
    model = load_model(args.gguf)
    hidden = model.config.hidden_size
    norms = post_norm_weights(model)
    print(f"# {args.text}: {len(ids)} tokens, {args.windows} x {args.length}; "
          f"{sum(w is not None for w in norms)} of {len(norms)} sites with a post-norm; "
          f"{torch.get_num_threads()} torch threads; load {time.perf_counter() - begin:.0f} s", flush=True)

    if args.equalize_gains:
        equalize_gains(model, cal_window(args, tokenizer, ids, bos), args.ranks)
    baseline = args.baseline or f"{args.out}-p4-16bit.csv"
    if not os.path.isfile(baseline):
        tensor_parallel(model, ranks=args.ranks, allreduce=ExactAllReduce(ranks=args.ranks, dtype="bf16"))
        try:
            write_csv(baseline, score_windows(model, ids, starts, args.length, bos, progress=False))
        finally:
            undo_tensor_parallel(model)
    base = read_csv(baseline)

    gains = None
    cal = cal_window(args, tokenizer, ids, bos)

    for name in args.rows:
        spec, candidate = parse_row(name)
        path = f"{args.out}-{name}.csv"
        if args.reuse and os.path.isfile(path):
            run, speed = read_csv(path), float("nan")
        else:
            if candidate.units in ("static", "partial") and gains is None:
                gains, kappas = calibrate_gains(model, cal, args.ranks)
                print("# static gains: " + " ".join(f"{g:.3g}" for g in gains), flush=True)
                print("# kappas: " + " ".join(f"{g:.3g}" for g in kappas), flush=True)
            reduce = StudyAllReduce(args.ranks, spec, candidate, hidden, norms, gains,
                                    kappas if gains is not None else None)
            tensor_parallel(model, ranks=args.ranks, allreduce=reduce)
            try:
                rows = score_windows(model, ids, starts, args.length, bos, progress=False)
            finally:
                undo_tensor_parallel(model)
            write_csv(path, rows)
            run = windows_of(rows)
            speed = len(rows) * args.length / sum(r[6] for r in rows)
        print(report_line(name, run, base, f"{speed:.0f} tok/s"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
