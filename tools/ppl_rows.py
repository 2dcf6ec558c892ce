"""Several `python -m echotk ppl` rows over the same windows in one process: the GGUF is loaded and
the text tokenized once, then each row makes the model tensor-parallel with its all-reduce, scores
the windows, writes ROW.csv (the columns of `echotk ppl --csv`) and undoes the conversion. Prints
the table of docs/results-*.md: perplexity, window interval, and the paired difference against
the first row.

    python tools/ppl_rows.py --gguf $(scripts/setup_gemma3.sh) --text data/smollm2/moby-dick.txt.gz \
        --windows 8 --length 512 --out data/gemma3/ppl/moby [--rows p4-16bit p4-echo4 ...]

`--set outliers` runs the rows of the transport options (OUTLIER_ROWS, docs/outliers.md) instead
of ROWS, `--set postnorm` those of compensator units 'stream' (POSTNORM_ROWS); `--rows` takes names
of any set.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

import torch

from echotk import AllReduce, ExactAllReduce, Spec
from echotk.models import bos_id, load_model, load_tokenizer
from echotk.eval.ppl import (
    THREADS_HELP, paired, plan_windows, read_csv, read_text, score_windows,
    summarize_run, windows_of, write_csv,
)
from echotk.tensor_parallel import tensor_parallel, undo_tensor_parallel

# name: (ranks, "exact" | spec options, the options as `echotk ppl` spells them)
ROWS = {
    "p4-16bit": (4, "exact", "--ranks 4 --allreduce exact"),
    "p4-echo8": (4, dict(bits=8), "--ranks 4 --allreduce echo --bits 8"),
    "p4-nocomp4": (4, dict(compensator="off"), "--ranks 4 --allreduce echo --compensator off"),
    "p4-nocomp8": (4, dict(bits=8, compensator="off"), "--ranks 4 --allreduce echo --bits 8 --compensator off"),
    "p4-echo4": (4, dict(), "--ranks 4 --allreduce echo"),
    "p4-naive": (4, dict(quantizer="naive"), "--ranks 4 --allreduce echo --quantizer naive"),
    "p4-symmetric": (4, dict(quantizer="symmetric"), "--ranks 4 --allreduce echo --quantizer symmetric"),
    "p4-local-eta1": (4, dict(residual="local", eta=1.0), "--ranks 4 --allreduce echo --residual local --eta 1"),
    "p2-echo4": (2, dict(), "--ranks 2 --allreduce echo"),
    "p8-echo4": (8, dict(), "--ranks 8 --allreduce echo"),
}

# The transport options of docs/outliers.md (CPU reference only), paired against ROWS' p4-16bit.
OUTLIER_ROWS = {
    "p4-nocomp4-rot": (4, dict(compensator="off", rotation="hadamard"),
                       "--ranks 4 --allreduce echo --compensator off --rotation hadamard"),
    "p4-nocomp4-rot64": (4, dict(compensator="off", rotation="hadamard", group=64),
                         "--ranks 4 --allreduce echo --compensator off --rotation hadamard --group 64"),
    "p4-nocomp4-out1": (4, dict(compensator="off", outliers=1),
                        "--ranks 4 --allreduce echo --compensator off --outliers 1"),
    "p4-nocomp4-out2": (4, dict(compensator="off", outliers=2),
                        "--ranks 4 --allreduce echo --compensator off --outliers 2"),
    "p4-rot": (4, dict(rotation="hadamard"), "--ranks 4 --allreduce echo --rotation hadamard"),
    "p4-rot-local1": (4, dict(rotation="hadamard", residual="local", eta=1.0),
                      "--ranks 4 --allreduce echo --rotation hadamard --residual local --eta 1"),
    "p4-rot64-local1": (4, dict(rotation="hadamard", group=64, residual="local", eta=1.0),
                        "--ranks 4 --allreduce echo --rotation hadamard --group 64 --residual local --eta 1"),
    "p4-out2": (4, dict(outliers=2), "--ranks 4 --allreduce echo --outliers 2"),
}


def _echo_at(options: dict, bits: int, rot64: bool) -> str:
    """The flags of a 4-rank Echo row at `bits` bits, with the rotation at group 64 where `rot64`
    (both also set in `options`), up to the compensator's flags."""
    flags = "--ranks 4 --allreduce echo "
    if bits != 4:
        options["bits"] = bits
        flags += f"--bits {bits} "
    if rot64:
        options.update(rotation="hadamard", group=64)
        flags += "--rotation hadamard --group 64 "
    return flags


def _stream_sqrt(rot64: bool, clip: float, eta=None, gains: str = "own", bits: int = 4):
    """A row of stream units with the local residual, profile 'sqrt' and `clip` (numerics 6.1), at
    the default eta or `eta`, with the rotation at group 64 where `rot64`, the gains `gains` (step 8)
    and `bits` bits."""
    options = dict(compensator_units="stream", residual="local", compensator_profile="sqrt", compensator_clip=clip)
    flags = _echo_at(options, bits, rot64) + "--residual local "
    if eta is not None:
        options["eta"] = eta
        flags += f"--eta {eta:g} "
    flags += f"--compensator-units stream --compensator-profile sqrt --compensator-clip {clip:g}"
    if gains != "own":
        options["compensator_gains"] = gains
        flags += f" --compensator-gains {gains}"
    return 4, options, flags


def _deficit(rot64: bool, clip: float, eta=None, bits: int = 4):
    """A row of compensator 'deficit' (numerics 6.2: units 'stream', the local residual, gains 'sum')
    with `clip`, at the default eta or `eta`, with the rotation at group 64 where `rot64`, at `bits`
    bits."""
    options = dict(compensator="deficit", compensator_units="stream", residual="local", compensator_gains="sum",
                   compensator_clip=clip)
    flags = _echo_at(options, bits, rot64)
    if eta is not None:
        options["eta"] = eta
        flags += f"--eta {eta:g} "
    flags += (f"--compensator deficit --compensator-units stream --residual local --compensator-gains sum "
              f"--compensator-clip {clip:g}")
    return 4, options, flags


# Compensator units 'stream' (docs/numerics.md 6.1, CPU reference only) and the 8-bit control
# without compensation, for post-norm models (docs/results-gemma3.md), paired against p4-16bit.
POSTNORM_ROWS = {
    "p4-nocomp8": ROWS["p4-nocomp8"],
    "p4-local": (4, dict(residual="local"), "--ranks 4 --allreduce echo --residual local"),
    "p4-stream-local": (4, dict(compensator_units="stream", residual="local"),
                        "--ranks 4 --allreduce echo --residual local --compensator-units stream"),
    "p4-rot-stream-local": (4, dict(rotation="hadamard", compensator_units="stream", residual="local"),
                            "--ranks 4 --allreduce echo --rotation hadamard --residual local --compensator-units stream"),
    "p4-rot64-stream-local": (4, dict(rotation="hadamard", group=64, compensator_units="stream", residual="local"),
                              "--ranks 4 --allreduce echo --rotation hadamard --group 64 --residual local "
                              "--compensator-units stream"),
    "p4-echo8-stream": (4, dict(bits=8, compensator_units="stream"),
                        "--ranks 4 --allreduce echo --bits 8 --compensator-units stream"),
    "p4-echo8-stream-local": (4, dict(bits=8, compensator_units="stream", residual="local"),
                              "--ranks 4 --allreduce echo --bits 8 --residual local --compensator-units stream"),
    "p4-echo8-local": (4, dict(bits=8, residual="local"), "--ranks 4 --allreduce echo --bits 8 --residual local"),
    # The compensator's own settings in stream units (docs/results-gemma3.md): the gain eta, the
    # averages' decays, one average, and plain error feedback (one average with decay 0 at gain 1:
    # each call applies exactly the previous call's residual).
    **{f"p4-stream-local-eta{tag}": (4, dict(compensator_units="stream", residual="local", eta=eta),
                                     f"--ranks 4 --allreduce echo --compensator-units stream --residual local "
                                     f"--eta {eta:g}")
       for tag, eta in (("1", 1.0), ("05", 0.5), ("035", 0.35), ("025", 0.25))},
    "p4-stream-local-slow-eta05": (4, dict(compensator_units="stream", residual="local", eta=0.5, beta1=0.9,
                                           beta2=0.5),
                                   "--ranks 4 --allreduce echo --compensator-units stream --residual local --eta 0.5 "
                                   "--beta1 0.9 --beta2 0.5"),
    "p4-stream-single-eta05": (4, dict(compensator_units="stream", residual="local", eta=0.5, compensator="single",
                                       beta=0.4),
                               "--ranks 4 --allreduce echo --compensator-units stream --residual local --eta 0.5 "
                               "--compensator single --beta 0.4"),
    "p4-stream-ef": (4, dict(compensator="single", beta=0.0, eta=1.0, compensator_units="stream", residual="local"),
                     "--ranks 4 --allreduce echo --compensator single --beta 0 --eta 1 --residual local "
                     "--compensator-units stream"),
    # The per-feature profile and the clip of stream units (docs/numerics.md 6.1, steps 6 and 7).
    "p4-stream-local-sqrt-clip1": _stream_sqrt(rot64=False, clip=1.0),
    "p4-rot64-stream-local-sqrt-clip1": _stream_sqrt(rot64=True, clip=1.0),
    "p4-stream-local-sqrt-clip1-eta085": _stream_sqrt(rot64=False, clip=1.0, eta=0.85),
    "p4-rot64-stream-local-sqrt-clip1-eta085": _stream_sqrt(rot64=True, clip=1.0, eta=0.85),
    "p4-rot64-stream-local-sqrt-clip1-eta1": _stream_sqrt(rot64=True, clip=1.0, eta=1.0),
    "p4-rot64-stream-local-sqrt-clip2": _stream_sqrt(rot64=True, clip=2.0),
    "p4-rot64-stream-local-sqrt-clip05": _stream_sqrt(rot64=True, clip=0.5),
    # Gains 'sum' (docs/numerics.md 6.1, step 8): the update at the delivered sum's row RMS, the apply
    # at the own RMS times the last same-kind site's ratio.
    "p4-stream-local-sqrt-clip1-sum": _stream_sqrt(rot64=False, clip=1.0, gains="sum"),
    "p4-rot64-stream-local-sqrt-clip1-sum": _stream_sqrt(rot64=True, clip=1.0, gains="sum"),
    "p4-rot64-stream-local-sqrt-clip05-sum": _stream_sqrt(rot64=True, clip=0.5, gains="sum"),
    "p4-echo8-stream-local-sqrt-clip1-sum": _stream_sqrt(rot64=False, clip=1.0, gains="sum", bits=8),
    # ... the rotation's rows with a tighter clip, and with clip 0.5 at eta 0.9.
    "p4-rot64-stream-local-sqrt-clip025-sum": _stream_sqrt(rot64=True, clip=0.25, gains="sum"),
    "p4-rot64-stream-local-sqrt-clip05-eta09-sum": _stream_sqrt(rot64=True, clip=0.5, eta=0.9, gains="sum"),
    # Compensator 'deficit' (docs/numerics.md 6.2): the closed loop on the stream's deficit.
    "p4-deficit-clip1": _deficit(rot64=False, clip=1.0),
    "p4-rot64-deficit-clip05": _deficit(rot64=True, clip=0.5),
    "p4-rot64-deficit-clip05-eta09": _deficit(rot64=True, clip=0.5, eta=0.9),
    "p4-echo8-deficit-clip1": _deficit(rot64=False, clip=1.0, bits=8),
}
ROW_SETS = {"main": ROWS, "outliers": OUTLIER_ROWS, "postnorm": POSTNORM_ROWS}
ALL_ROWS = {**ROWS, **OUTLIER_ROWS, **POSTNORM_ROWS}


def make_allreduce(ranks, options):
    if options == "exact":
        return ExactAllReduce(ranks=ranks, dtype="bf16")
    return AllReduce(ranks=ranks, spec=Spec(**options))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gguf", required=True)
    p.add_argument("--text", required=True)
    p.add_argument("--windows", type=int, default=8)
    p.add_argument("--length", type=int, default=512)
    p.add_argument("--out", required=True, help="prefix of the CSV files: OUT-ROW.csv")
    p.add_argument("--set", default="main", choices=list(ROW_SETS),
                   help="the rows run when --rows is not given: ROWS (main), OUTLIER_ROWS (outliers) or "
                        "POSTNORM_ROWS (postnorm)")
    p.add_argument("--rows", nargs="+", choices=list(ALL_ROWS))
    p.add_argument("--threads", type=int, default=0, help=THREADS_HELP)
    p.add_argument("--reuse", action="store_true", help="keep rows whose CSV exists")
    args = p.parse_args(argv)
    if args.rows is None:
        args.rows = list(ROW_SETS[args.set])
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)

    begin = time.perf_counter()
    ids = torch.tensor(load_tokenizer(args.gguf).encode(read_text(args.text)).ids, dtype=torch.long)
    starts = plan_windows(len(ids), args.windows, args.length)
    bos = bos_id(args.gguf)
    model = load_model(args.gguf)
    print(f"# {args.text}: {len(ids)} tokens, {args.windows} x {args.length}, bos {bos}; "
          f"{torch.get_num_threads()} torch threads; tokenizer + model {time.perf_counter() - begin:.0f} s", flush=True)

    base = None
    print("| row | options | perplexity | 95% CI (windows) | d log ppl vs first row | 95% CI (paired) | "
          "ppl ratio | tokens/s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in args.rows:
        ranks, options, spelled = ALL_ROWS[name]
        path = f"{args.out}-{name}.csv"
        if args.reuse and os.path.isfile(path):
            run = read_csv(path)
            speed = float("nan")
        else:
            tensor_parallel(model, ranks=ranks, allreduce=make_allreduce(ranks, options))
            try:
                rows = score_windows(model, ids, starts, args.length, bos, progress=False)
            finally:
                undo_tensor_parallel(model)
            write_csv(path, rows)
            run = windows_of(rows)
            speed = len(rows) * args.length / sum(r[6] for r in rows)
        if base is None:
            base = run
        s = summarize_run(run)
        d, half = paired(run, base)
        print(f"| {name} | `{spelled}` | {s['perplexity']:.2f} | [{s['ci_low']:.2f}, {s['ci_high']:.2f}] | "
              f"{d:+.4f} | [{d - half:+.4f}, {d + half:+.4f}] | {math.exp(d):.3f} | {speed:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
