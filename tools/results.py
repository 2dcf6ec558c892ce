#!/usr/bin/env python3
"""Writes every table of numbers in docs/results-*.md, docs/outliers.md, docs/bench.md, the
emulation's table in docs/performance.md, the README's results section, and the figures those
docs link, from the committed CSVs under data/.
Tables go between markers in the docs (`<!-- results:NAME -->` ... `<!-- /results:NAME -->`,
tools/results_lib/markers.py); text outside the markers is left as it is.

    python tools/results.py            # rewrite the marked tables and the figures
    python tools/results.py --check    # exit 1 naming each doc and table that differs from its data
    python tools/results.py docs/bench.md    # one doc (no figures)

--check compares the docs only (a figure's bytes depend on the matplotlib version). Data:
data/gemma3/ppl/rows.csv and data/smollm2/ppl/rows.csv (perplexity indices, with tables.csv beside
each), data/paper/ (Tables 4 and 8), data/training/runs/, data/bench/. Needs scipy and matplotlib.
"""
from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
from typing import Callable, Dict

from results_lib import (advise, bench, markers, paper, ppl, ppl_tables as pt, recorded, smollm2_text as st, training,
                         training_tables as tt, training_text as tx)
from results_lib.closed_loop_text import closed_loop_text

EXIT_DIFFERS = 1
EXIT_BAD_DATA = 2
STUDY = "m256x4-p0.2"  # the training study's model (docs/results-training.md, "Model selection")


class Data:
    """The committed data under one repository root, each part read once, when first asked for."""

    def __init__(self, root: str):
        self.root = root

    def path(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    @functools.cached_property
    def gemma3(self) -> ppl.Index:
        return ppl.Index(self.path("data", "gemma3", "ppl", "rows.csv"))

    @functools.cached_property
    def smollm2(self) -> ppl.Index:
        return ppl.Index(self.path("data", "smollm2", "ppl", "rows.csv"))

    @functools.cached_property
    def table4(self):
        return paper.read_table4(self.path("data", "paper", "table4.csv"))

    @functools.cached_property
    def table8(self):
        return paper.read_table8(self.path("data", "paper", "table8.csv"))

    @functools.cached_property
    def study(self) -> tt.Study:
        return tt.Study(training.read_study(self.path("data", "training", "runs", STUDY)))

    @functools.cached_property
    def select(self):
        return training.read_study(self.path("data", "training", "runs", "select"))

    @functools.cached_property
    def first_attempt(self):
        return training.read_study(self.path("data", "training", "runs", "overfit-29m"))

    @functools.cached_property
    def bench(self) -> bench.Bench:
        return bench.Bench(self.path("data", "bench"))

    def recorded(self, model: str, tables: Dict[str, str]) -> Dict[str, Callable[[], str]]:
        """marker -> the table of data/MODEL/recorded/NAME.csv."""
        return {marker: functools.partial(recorded.table, self.path("data", model, "recorded", name + ".csv"))
                for marker, name in tables.items()}


def generators(d: Data) -> Dict[str, Dict[str, Callable[[], str]]]:
    """doc -> marker name -> the text between its markers."""
    first = d.first_attempt
    return {
        "README.md": {
            "readme-smollm2": lambda: pt.costs_text(d.smollm2, "moby", [
                ("Echo 8-bit", "cpp-p4-echo8", 1), ("Echo 4-bit", "cpp-p4-echo4", 0),
                ("uncompensated 4-bit", "cpp-p4-nocomp4", 0)]),
            "readme-training": lambda: tx.readme_sentence(d.study),
            "readme-gemma3-stream": lambda: pt.stream_summary_text(d.gemma3),
            "readme-advise-time": lambda: f"{advise.seconds(d.path('data', 'advise', 'smollm2-gguf'))[0]} s",
        },
        "docs/results-gemma3.md": {
            "gemma3-moby": lambda: pt.rows_table(d.gemma3, "gemma3-moby"),
            "gemma3-sotu": lambda: pt.rows_table(d.gemma3, "gemma3-sotu"),
            "gap-closed": lambda: pt.gap_closed_table([d.smollm2, d.gemma3], d.table4),
            **{name: functools.partial(pt.options_table, d.gemma3 if "gemma3" in name else d.smollm2, name)
               for name in ("stream-gemma3-moby", "stream-gemma3-sotu", "stream-gemma3-w16-moby",
                            "stream-gemma3-w16-sotu", "stream-smollm2-moby", "stream-smollm2-sotu",
                            "stream-gemma3-equalized", "stream-gemma3-candidates-moby",
                            "stream-gemma3-candidates-sotu", "stream-gemma3-settings-moby",
                            "stream-gemma3-bound-moby", "stream-gemma3-bound-sotu", "stream-smollm2-bound-moby",
                            "stream-smollm2-bound-sotu", "stream-gemma3-combined-moby",
                            "stream-gemma3-combined-sotu",
                            "stream-gemma3-heldout-moby", "stream-gemma3-heldout-sotu",
                            "stream-smollm2-heldout-moby", "stream-smollm2-heldout-sotu",
                            "stream-smollm2-w128-sotu", "stream-gemma3-closed-moby", "stream-gemma3-closed-sotu",
                            "stream-gemma3-closed-heldout-moby", "stream-gemma3-closed-heldout-sotu")},
            "stream-goals": lambda: pt.stream_goals_table({"gemma3": d.gemma3, "smollm2": d.smollm2}),
            "stream-bound-text": lambda: pt.stream_bound_text(d.gemma3, d.smollm2),
            "stream-combined-text": lambda: pt.stream_combined_text(d.gemma3),
            "stream-dynpartial-text": lambda: pt.stream_dynpartial_text(d.gemma3),
            "stream-gains-sum-text": lambda: pt.stream_gains_sum_text(d.gemma3),
            "stream-heldout-text": lambda: pt.stream_heldout_text(d.gemma3, d.smollm2),
            "stream-closed-text": lambda: closed_loop_text(d.gemma3, d.smollm2),
            **d.recorded("gemma3", {"gemma3-reference-logits": "reference-logits", "gemma3-postnorm": "postnorm-replay",
                                    "gemma3-site-contributions": "site-contributions"}),
        },
        "docs/advise.md": {
            "advise-time": lambda: advise.time_text(d.path("data", "advise", "smollm2-gguf")),
            "advise-smollm2": lambda: advise.terminal(d.path("data", "advise", "smollm2-gguf")),
            "advise-smollm2-hf": lambda: advise.same_advice_text(d.path("data", "advise", "smollm2-gguf"),
                                                                 d.path("data", "advise", "smollm2-hf")),
            "advise-smollm2-8bit": lambda: advise.terminal(d.path("data", "advise", "smollm2-gguf-8bit")),
            "advise-gemma3": lambda: advise.terminal(d.path("data", "advise", "gemma3-gguf")),
            "advise-agreement": lambda: advise.agreement_table(
                [("SmolLM2, defaults", "smollm2", d.path("data", "advise", "smollm2-gguf")),
                 ("SmolLM2, --bits-max 8.25", "smollm2", d.path("data", "advise", "smollm2-gguf-8bit")),
                 ("Gemma 3, --bits-max 8.25", "gemma3", d.path("data", "advise", "gemma3-gguf"))],
                {"smollm2": d.smollm2, "gemma3": d.gemma3}),
            "advise-gpu": lambda: advise.terminal(d.path("data", "advise"), "qwen3-0.6b-random-gpu.txt"),
        },
        "docs/results-smollm2.md": {
            "smollm2-cpp": lambda: pt.rows_table(d.smollm2, "smollm2-cpp", "d log ppl vs 16-bit P=4", speed=False),
            "smollm2-python": lambda: pt.two_tools_table(d.smollm2, "smollm2-python"),
            "smollm2-two-tools-reading": lambda: st.two_tools_reading(d.smollm2),
            "smollm2-cpp-speed": lambda: st.speed_text(d.smollm2),
            "smollm2-bf16-state": lambda: st.bf16_state_text(d.smollm2),
            "smollm2-paper-pattern": lambda: st.paper_pattern(d.smollm2, d.table4, d.table8),
            **d.recorded("smollm2", {"smollm2-speed": "speed"}),
        },
        "docs/outliers.md": {
            **{name: functools.partial(pt.options_table, d.smollm2, name)
               for name in ("outliers-smollm2-moby", "outliers-smollm2-sotu")},
            **{name: functools.partial(pt.options_table, d.gemma3, name)
               for name in ("outliers-gemma3-moby", "outliers-gemma3-sotu")},
            "smollm2-echo4-closed": lambda: pt.percent(
                pt.gap_closed(d.smollm2, d.smollm2.row("moby", "cpp-p4-echo4"))),
            "gemma3-compensated-cost": lambda: pt.compensated_cost_text(
                d.gemma3, ["outliers-gemma3-moby", "outliers-gemma3-sotu"]),
            **d.recorded("smollm2", {"outliers-replay": "replay-variants"}),
        },
        "docs/results-training.md": {
            "training-headline": lambda: tx.headline(d.study),
            "training-first-attempt": lambda: tt.trajectory_table(first["exact-s0"], first["echo4-s0"]),
            "training-first-speed": lambda: tt.first_speed_table(
                {"16-bit, full run": first["exact-s0"], "Echo 4-bit, full run": first["echo4-s0"]},
                {label: d.path("data", "training", "runs", "overfit-29m", f"timing-{name}.log") for label, name in (
                    ("16-bit, 30 steps", "exact"), ("Echo 4-bit, 30 steps", "echo4"),
                    ("Echo 4-bit local residual, eta 1, 30 steps", "echo4local"))}),
            "training-selection": lambda: tt.selection_table(d.select, STUDY),
            "training-results": lambda: tt.results_table(d.study),
            "training-comparisons": lambda: tt.comparison_table(d.study),
            "training-readings": lambda: tx.readings(d.study),
            "training-sweep": lambda: tt.sweep_table(d.study),
            "training-sites": lambda: tt.sites_table(d.study),
            "training-step-time": lambda: tt.step_time_table(d.study),
            "training-sweep-speed": lambda: tt.sweep_speed_text(d.study),
        },
        "docs/performance.md": {
            "emulate-units": lambda: bench.emulate_units_table(d.path("data", "bench", "emulate-stream-units-h100.csv")),
        },
        "docs/bench.md": {
            f"bench-{mode}{part}": functools.partial(d.bench.notes if part else d.bench.table, mode)
            for mode in ("plain", "graph", "background") for part in ("", "-notes")
        },
    }


def figures(d: Data) -> Dict[str, Callable[[str], None]]:
    """figure path -> a function that draws it into the path given."""
    from results_lib import training_figures as tf  # matplotlib only where figures are drawn

    return {
        "docs/figures/training-loss.png": lambda path: tf.loss_curves(d.study.runs, path),
        "docs/figures/training-lr.png": lambda path: tf.lr_sweep(d.study, path),
        "docs/figures/training-sites.png": lambda path: tf.site_errors(d.study, path),
    }


def write_atomically(path: str, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".results-", suffix=".md")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def run(root: str, check: bool, draw: bool, only=()) -> int:
    d = Data(root)
    differs = []
    docs = generators(d)
    unknown = sorted(set(only) - set(docs))
    if unknown:
        raise ValueError(f"no tables are generated in {', '.join(unknown)} (docs: {', '.join(docs)})")
    for doc, gens in docs.items():
        if only and doc not in only:
            continue
        path = d.path(doc)
        with open(path, encoding="utf-8", newline="") as f:
            old = f.read()
        new = markers.fill(old, doc, gens)
        if new == old:
            continue
        if check:
            differs += [f"{doc}: table {name} differs from what tools/results.py writes from its data"
                        for name in markers.differing(old, new, doc)]
        else:
            write_atomically(path, new)
            print(f"results: wrote {doc}", file=sys.stderr)
    if draw and not check and not only:
        for figure, draw_into in figures(d).items():
            draw_into(d.path(figure))
            print(f"results: drew {figure}", file=sys.stderr)
    for line in differs:
        print(line, file=sys.stderr)
    if differs:
        print("results: run `python tools/results.py` and commit the docs", file=sys.stderr)
        return EXIT_DIFFERS
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("docs", nargs="*", help="only these docs (paths as README.md, docs/bench.md; default: all)")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 naming every doc and table that differs")
    p.add_argument("--no-figures", action="store_true", help="write the docs only")
    p.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                   help="repository root (default: the one holding this script)")
    args = p.parse_args(argv)
    try:
        return run(args.root, args.check, not args.no_figures, args.docs)
    except (ppl.DataError, markers.MarkerError, ValueError, OSError) as e:
        print(f"results: error: {e}", file=sys.stderr)
        return EXIT_BAD_DATA


if __name__ == "__main__":
    sys.exit(main())
