"""docs/advise.md's results from the committed advice under data/advise/ (each run's folder as
`python -m echotk advise --out` wrote it, plus `terminal.txt`, its standard output): the runs'
terminal output, their time, whether two runs on the same model agree, and each recommended or
within-budget setting set against the result docs' full-length rows of the same options."""
from __future__ import annotations

import csv
import math
import os
import re
from typing import Dict, List, Sequence, Tuple

from .ppl import DataError, Index
from .text import markdown

SECONDS = re.compile(r"; (\d+) s in all \(loading (\d+) s, sites (\d+) s, evaluation (\d+) s\)")
BUDGET = re.compile(r"budget \+([0-9.]+)% perplexity")

# An advise candidate -> its row in a result doc's index, per model (the same options).
DOC_ROWS: Dict[str, Dict[str, str]] = {
    "smollm2": {"echo8": "cpp2-p4-echo8", "nocomp8": "cpp2-p4-nocomp8", "echo4": "cpp2-p4-echo4",
                "nocomp4": "cpp2-p4-nocomp4", "rot-local1": "cpp-p4-rot-local1",
                "rot64-local1": "cpp-p4-rot64-local1", "nocomp4-rot": "cpp2-p4-nocomp4-rot",
                "nocomp4-rot64": "cpp2-p4-nocomp4-rot64", "rot": "cpp-p4-rot"},
    "gemma3": {"echo8": "p4-echo8", "nocomp8": "p4-nocomp8", "echo4": "p4-echo4", "nocomp4": "p4-nocomp4",
               "rot": "p4-rot", "rot-local1": "p4-rot-local1", "rot64-local1": "p4-rot64-local1",
               "nocomp4-rot": "p4-nocomp4-rot", "nocomp4-rot64": "p4-nocomp4-rot64",
               "stream-local": "p4-stream-local", "stream-local-sqrt-clip1": "w16c-p4-stream-local-sqrt-clip1",
               "stream-local-sqrt-clip1-sum": "w16c-p4-stream-local-sqrt-clip1-sum",
               "rot-stream-local": "p4-rot-stream-local",
               "echo8-stream-local": "p4-echo8-stream-local"},
}


def _read(folder: str, name: str) -> str:
    path = os.path.join(folder, name)
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise DataError(f"{path}: {e.strerror}") from e


def advice_rows(folder: str) -> List[dict]:
    path = os.path.join(folder, "advice.csv")
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except OSError as e:
        raise DataError(f"{path}: {e.strerror}") from e


def terminal(folder: str, name: str = "terminal.txt") -> str:
    """A run's recorded output (its standard output by default) as a code block."""
    return "```\n" + _read(folder, name).rstrip("\n") + "\n```"


def seconds(folder: str) -> Tuple[int, int, int, int]:
    """(total, loading, sites, evaluation) seconds from advice.md."""
    found = SECONDS.search(_read(folder, "advice.md"))
    if found is None:
        raise DataError(f"{folder}/advice.md: no 'N s in all (loading ..., sites ..., evaluation ...)'")
    return tuple(int(g) for g in found.groups())


def time_text(folder: str) -> str:
    total, load, sites, evaluation = seconds(folder)
    return (f"{total} s in all ({total / 60:.1f} minutes: loading {load} s, measuring the sites {sites} s, "
            f"evaluating the candidates {evaluation} s)")


def same_advice_text(a: str, b: str) -> str:
    """Whether two runs' advice.csv are identical, in words (DataError when they are not)."""
    ra, rb = advice_rows(a), advice_rows(b)
    if ra != rb:
        raise DataError(f"{a}/advice.csv and {b}/advice.csv differ")
    return (f"identical advice.csv ({len(ra)} candidates, every number equal), so the same advice, "
            f"from the GGUF and from the folder transformers wrote from it")


def agreement_table(runs: Sequence[Tuple[str, str, str]], indices: Dict[str, Index],
                    texts: Sequence[str] = ("moby", "sotu")) -> str:
    """For each (label, model, folder): every candidate the run found within budget (the recommended
    one first), set against the result docs' row of the same options on each text: its perplexity
    ratio there against the run's budget."""
    header = ["run", "candidate", "verdict", "advice: ppl ratio"] + [f"docs, {t}: row, ppl ratio" for t in texts] + \
        ["within budget in the docs"]
    lines = []
    for label, model, folder in runs:
        budget = BUDGET.search(_read(folder, "advice.md"))
        if budget is None:
            raise DataError(f"{folder}/advice.md: no 'budget +N% perplexity'")
        limit = 1 + float(budget.group(1)) / 100
        rows = [r for r in advice_rows(folder) if r["verdict"] in ("recommended", "within budget")
                or r["verdict"].startswith("recommended")]
        for r in rows:
            name = r["candidate"]
            cells, ok = [], True
            if name == "16bit":
                cells = ["16-bit, 1.000"] * len(texts)
            else:
                doc_row = DOC_ROWS[model].get(name)
                if doc_row is None:
                    raise DataError(f"{folder}: candidate {name} has no row in the {model} docs (DOC_ROWS)")
                for t in texts:
                    ratio = indices[model].stats(indices[model].row(t, doc_row)).ratio
                    ok = ok and ratio <= limit
                    cells.append(f"{doc_row}, {ratio:.4f}")
            lines.append([label, f"`{name}`", r["verdict"].split(" (")[0], f"{float(r['ppl_ratio']):.4f}", *cells,
                          "yes" if ok else "no"])
    return markdown(header, lines)


def hazards_text(folder: str) -> str:
    """The hazard lines of the run's output."""
    found = [line[len("hazard: "):] for line in _read(folder, "terminal.txt").splitlines() if line.startswith("hazard: ")]
    return "; ".join(found) if found else "none"
