"""`python -m echotk advise`: which all-reduce setting is the cheapest one that keeps a model within
a perplexity budget, and what in the model makes low-bit all-reduce hazardous (docs/advise.md).

    python -m echotk advise (--model DIR | --gguf FILE) --text FILE [--ranks 4] [--budget 1%]
        [--bits-max 4.5] [--windows 8] [--length 256] [--device cpu|cuda] [--out advice]

Exit codes: 0 with a quantized setting recommended; 2 for bad input (a message names it; nothing
is written) and when no setting of at most --bits-max wire bits is within the budget (the advice
is then 16-bit: said on stderr and in advice.md, no spec.json); 1 for other failures.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

import torch

from .._cli import EXIT_BAD_INPUT
from .._util import BadInput, check_ranks
from ..eval.ppl import plan_windows, read_text, window_ids
from ..ops import require_cuda_build
from . import loading, report
from .candidates import CANDIDATES
from .evaluate import evaluate
from .hazards import find_hazards, site_list
from .measure import TRACE_PASSES, TRACE_TOKENS, measure_sites
from .ranking import Candidate, budget_limit, recommend
from .timing import allreduce_seconds


def parse_budget(text: str) -> float:
    """The budget in percent: "1%" or "1" (both 1%), "0.5%"; positive and finite."""
    try:
        value = float(text[:-1] if text.endswith("%") else text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage such as 1% or 0.5%") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"the budget must be a positive percentage, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m echotk advise", description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    model = p.add_mutually_exclusive_group(required=True)
    model.add_argument("--model", metavar="DIR", help="Hugging Face model folder: config.json, *.safetensors "
                                                      "and a tokenizer (loaded offline)")
    model.add_argument("--gguf", metavar="FILE", help="GGUF model file (SmolLM2's or Gemma 3's tokenizer)")
    p.add_argument("--text", required=True, help="UTF-8 text to measure perplexity on, plain or .gz")
    p.add_argument("--ranks", "-P", type=int, default=4, help="tensor-parallel ranks (1..8)")
    p.add_argument("--budget", type=parse_budget, default=1.0, metavar="PERCENT",
                   help="perplexity increase allowed against 16-bit, in percent (1%% or 1)")
    p.add_argument("--bits-max", type=float, default=4.5,
                   help="most wire bits per element a setting may send (8-bit settings send 8.25)")
    p.add_argument("--windows", "-n", type=int, default=8, help="windows of the text, evenly spaced (>= 2)")
    p.add_argument("--length", "-L", type=int, default=256, help="tokens per window")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                   help="where the model and the all-reduce run (cuda: the one-GPU emulation kernel)")
    p.add_argument("--out", default="advice", help="folder for advice.md, advice.csv, advice.png, spec.json")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (0: torch's default). One, since on a machine other work shares, "
                        "threads that spin waiting for each other cost more than they gain (docs/advise.md)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    return p


def check_args(args) -> loading.Source:
    """Every check that needs neither the model's weights nor the text's tokens."""
    check_ranks(args.ranks)
    if args.windows < 2:
        raise BadInput(f"--windows must be >= 2 (a paired interval needs two windows), got {args.windows}")
    if not 2 <= args.length <= 8192:
        raise BadInput(f"--length must lie in [2, 8192], got {args.length}")
    if not args.bits_max > 0:
        raise BadInput(f"--bits-max must be positive, got {args.bits_max}")
    if args.threads < 0:
        raise BadInput(f"--threads must be >= 0, got {args.threads}")
    if not os.path.isfile(args.text):
        raise BadInput(f"--text {args.text}: no such file")
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise BadInput(f"--out {args.out} is a file, not a folder")
    if args.device == "cuda":
        if not torch.cuda.is_available():
            raise BadInput("--device cuda: no CUDA device is visible")
        try:
            require_cuda_build()
        except RuntimeError as e:
            raise BadInput(f"--device cuda: {e}") from e
    return loading.check_source(args.model, args.gguf)


def candidates_for(args, post_norm: bool = True) -> list:
    """A Candidate per entry of CANDIDATES; those above --bits-max are skipped, and those in
    stream units where no site has a post-norm (every gain 1: their site-units rows), except
    compensator 'deficit', whose loop differs from every site-units row."""
    out = []
    for name, spec in CANDIDATES:
        bits = 16.0 if spec is None else spec.wire_bits_per_element()
        c = Candidate(name, spec, bits, allreduce_seconds(spec, args.ranks))
        stream = spec is not None and spec.compensator_units == "stream" and spec.compensator != "deficit"
        if bits > args.bits_max and spec is not None:
            c.skipped = f"{bits:g} wire bits > --bits-max {args.bits_max:g}"
        elif stream and not post_norm:
            c.skipped = "no site has a post-norm: stream units are the site units bit for bit"
        out.append(c)
    return out


def run(argv) -> int:
    args = build_parser().parse_args(argv)
    begin = time.perf_counter()
    source = check_args(args)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    say = lambda text: print(f"advise: {text}", file=sys.stderr, flush=True)  # noqa: E731
    say(f"loading {source.describe()}")
    tokenizer = loading.load_tokenizer(source)
    ids = torch.tensor(tokenizer.encode(read_text(args.text)), dtype=torch.long)
    starts = plan_windows(len(ids), args.windows, args.length)
    trace_tokens = min(TRACE_TOKENS, args.length)
    trace = torch.stack([window_ids(ids, s, trace_tokens, tokenizer.bos)
                         for s in plan_windows(len(ids), TRACE_PASSES, trace_tokens)]).to(args.device)
    model = loading.load_model(source, args.device)
    loaded = time.perf_counter()
    say(f"measuring the {2 * model.config.num_hidden_layers} sites on a trace of {TRACE_PASSES} x {trace_tokens} tokens")
    sites = measure_sites(model, trace, args.ranks, args.device)
    hazards = find_hazards(sites)
    for h in hazards:
        say(f"hazard: {h.name} at sites {site_list(h.sites)}")
    measured = time.perf_counter()
    candidates = candidates_for(args, post_norm=bool(sites.post_norm.any()))
    limit = budget_limit(args.budget)
    evaluate(model, ids, starts, args.length, tokenizer.bos, args.ranks, args.device, candidates, limit,
             progress=args.progress)
    recommended = recommend(candidates, limit)
    end = time.perf_counter()
    advice = report.Advice(source=source, text=args.text, text_tokens=len(ids), ranks=args.ranks,
                           budget_percent=args.budget, limit=limit, bits_max=args.bits_max,
                           windows=args.windows, length=args.length, device=args.device,
                           candidates=candidates, recommended=recommended, sites=sites, hazards=hazards,
                           seconds={"load": loaded - begin, "sites": measured - loaded,
                                    "evaluate": end - measured, "total": end - begin})
    written = report.write_outputs(advice, args.out)
    sys.stdout.write(report.terminal_table(advice))
    print(report.summary_line(advice))
    for h in hazards:
        print(f"hazard: {h.name} at sites {site_list(h.sites)}: {h.detail}")
    print(f"wrote {', '.join(written)} ({advice.seconds['total']:.0f} s)")
    sys.stdout.flush()
    if advice.falls_back:
        say(f"no setting within --bits-max {args.bits_max:g} meets the budget of +{args.budget:g}%: "
            "the advice is the 16-bit all-reduce")
        return EXIT_BAD_INPUT
    return 0


def main(argv=None) -> int:
    try:
        return run(sys.argv[1:] if argv is None else argv)
    except (ValueError, FileNotFoundError) as e:  # BadInput is a ValueError
        print(f"echotk advise: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
