"""Perplexity rows from an index file and the per-window CSVs it names.

An index (data/gemma3/ppl/rows.csv, data/smollm2/ppl/rows.csv) has one line per text and row:

    text,row,csv,baseline,options,wire_bits,compensated

`csv` and `baseline` are per-window files as `echotk ppl --csv` writes them, relative to the index;
`options` the row's command-line options; `compensated` 0 or 1. Next to it, tables.csv says which
rows each marked table of the docs shows:

    table,text,rows,label

one line per row (or fnmatch pattern of rows) of a table, in the table's order, with an optional
label in place of the row name. The pattern `*` stands for the rows of its text that no other line
of the spec names or matches: a new line in the index lands in the table that ends in `*` (or in
those whose patterns match it) without any change to the code or the spec."""
from __future__ import annotations

import csv
import dataclasses
import fnmatch
import math
import os
from typing import Dict, List, Optional, Tuple

from . import stats

INDEX_COLUMNS = ["text", "row", "csv", "baseline", "options", "wire_bits", "compensated"]
SPEC_COLUMNS = ["table", "text", "rows", "label"]
REST = "*"  # in tables.csv: the rows of the text that no other line claims
WINDOW_COLUMNS = {"start", "tokens", "predictions", "nll_sum", "seconds"}


class DataError(ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class Row:
    index: str          # the index file
    text: str
    name: str
    csv: str            # absolute paths
    baseline: str
    options: str
    wire_bits: float
    compensated: bool


@dataclasses.dataclass(frozen=True)
class Windows:
    """One per-window CSV: per window (by start) the loss sum, predictions, tokens, seconds."""
    path: str
    nll: Dict[int, float]
    predictions: Dict[int, int]
    tokens: Dict[int, int]
    seconds: Dict[int, float]

    def mean_loss(self) -> Dict[int, float]:
        return {s: self.nll[s] / self.predictions[s] for s in self.nll}


@dataclasses.dataclass(frozen=True)
class RowStats:
    windows: int
    predictions: int
    perplexity: float
    ci: Tuple[float, float]        # of the perplexity, over windows
    d: float                       # paired mean difference in log-perplexity against the baseline
    d_ci: Tuple[float, float]
    tokens_per_s: float

    @property
    def ratio(self) -> float:
        return math.exp(self.d)


def read_csv(path: str, columns) -> List[dict]:
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            lines = list(reader)
            header = reader.fieldnames or []
    except OSError as e:
        raise DataError(f"{path}: {e.strerror}") from e
    if isinstance(columns, list) and header != columns:
        raise DataError(f"{path}: columns {','.join(header)}; expected {','.join(columns)}")
    if isinstance(columns, set) and not columns <= set(header):
        raise DataError(f"{path}: lacks the column(s) {', '.join(sorted(columns - set(header)))}")
    return lines


def read_index(path: str) -> List[Row]:
    folder = os.path.dirname(os.path.abspath(path))
    rows, seen = [], set()
    for number, line in enumerate(read_csv(path, INDEX_COLUMNS), 2):
        where = f"{path}:{number}"
        key = (line["text"], line["row"])
        if key in seen:
            raise DataError(f"{where}: text {key[0]} row {key[1]} appears twice")
        seen.add(key)
        if line["compensated"] not in ("0", "1"):
            raise DataError(f"{where}: compensated must be 0 or 1, not {line['compensated']!r}")
        try:
            wire_bits = float(line["wire_bits"])
        except ValueError:
            raise DataError(f"{where}: wire_bits {line['wire_bits']!r} is not a number") from None
        rows.append(Row(index=path, text=line["text"], name=line["row"],
                        csv=os.path.normpath(os.path.join(folder, line["csv"])),
                        baseline=os.path.normpath(os.path.join(folder, line["baseline"])),
                        options=line["options"], wire_bits=wire_bits, compensated=line["compensated"] == "1"))
    return rows


def read_windows(path: str) -> Windows:
    nll, predictions, tokens, seconds = {}, {}, {}, {}
    for number, line in enumerate(read_csv(path, WINDOW_COLUMNS), 2):
        try:
            start = int(line["start"])
            nll[start] = float(line["nll_sum"])
            predictions[start] = int(line["predictions"])
            tokens[start] = int(line["tokens"])
            seconds[start] = float(line["seconds"])
        except ValueError as e:
            raise DataError(f"{path}:{number}: {e}") from None
        if not math.isfinite(nll[start]) or predictions[start] < 1:
            raise DataError(f"{path}:{number}: nll_sum {line['nll_sum']} over {line['predictions']} predictions")
    if not nll:
        raise DataError(f"{path}: no windows")
    return Windows(path, nll, predictions, tokens, seconds)


class Index:
    """An index file, its rows' per-window CSVs (read once) and its tables spec."""

    def __init__(self, path: str):
        self.path = path
        self.rows = read_index(path)
        self._windows: Dict[str, Windows] = {}
        spec = os.path.join(os.path.dirname(os.path.abspath(path)), "tables.csv")
        self.spec = read_csv(spec, SPEC_COLUMNS)
        self.spec_path = spec

    def windows(self, path: str) -> Windows:
        if path not in self._windows:
            self._windows[path] = read_windows(path)
        return self._windows[path]

    def row(self, text: str, name: str) -> Row:
        for r in self.rows:
            if r.text == text and r.name == name:
                return r
        raise DataError(f"{self.path}: no row {name} of text {text}")

    def find(self, like: Row, options: str) -> Optional[Row]:
        """The row of like's text and baseline (the same run of rows) with these options, in any order."""
        words = sorted(_option_pairs(options))
        return next((r for r in self.rows if r.text == like.text and r.baseline == like.baseline and
                     sorted(_option_pairs(r.options)) == words), None)

    def tables(self) -> List[str]:
        return list(dict.fromkeys(line["table"] for line in self.spec))

    def table(self, name: str) -> List[Tuple[Row, str]]:
        """(row, label) of a table, in the spec's order; DataError when a named row is missing."""
        out, taken = [], set()
        for number, line in enumerate(self.spec, 2):
            if line["table"] != name:
                continue
            pattern = line["rows"]
            if pattern == REST:
                matched = [r for r in self.rows if r.text == line["text"] and not self._claimed(r)]
            else:
                matched = [r for r in self.rows if r.text == line["text"] and fnmatch.fnmatchcase(r.name, pattern)]
            if not matched and not any(c in pattern for c in "*?["):
                raise DataError(f"{self.spec_path}:{number}: {self.path} has no row {pattern} of text {line['text']}")
            for r in matched:
                if (r.text, r.name) not in taken:
                    taken.add((r.text, r.name))
                    out.append((r, line["label"] or r.name))
        if not out:
            raise DataError(f"{self.spec_path}: table {name} has no rows")
        return out

    def _claimed(self, row: Row) -> bool:
        """Whether a line of the spec other than `*` names or matches the row."""
        return any(line["text"] == row.text and line["rows"] != REST and fnmatch.fnmatchcase(row.name, line["rows"])
                   for line in self.spec)

    def stats(self, row: Row) -> RowStats:
        return compare(self.windows(row.csv), self.windows(row.baseline))


def compare(run: Windows, base: Windows) -> RowStats:
    """A run's perplexity with its interval over windows, and its paired difference against base."""
    if sorted(run.nll) != sorted(base.nll):
        raise DataError(f"{run.path}: its windows differ from those of its baseline {base.path}")
    starts = sorted(run.nll)
    mean_nll = math.fsum(run.nll.values()) / sum(run.predictions.values())
    losses, base_losses = run.mean_loss(), base.mean_loss()
    low, high = stats.t_interval(mean_nll, [losses[s] for s in starts])
    d, d_ci = stats.paired([losses[s] for s in starts], [base_losses[s] for s in starts])
    seconds = math.fsum(run.seconds.values())
    return RowStats(windows=len(starts), predictions=sum(run.predictions.values()),
                    perplexity=math.exp(mean_nll), ci=(math.exp(low), math.exp(high)), d=d, d_ci=d_ci,
                    tokens_per_s=sum(run.tokens.values()) / seconds if seconds > 0 else math.nan)


def _option_pairs(options: str) -> List[str]:
    """"--ranks 4 --allreduce echo" -> ["--allreduce echo", "--ranks 4"]: options with their values."""
    out = []
    for word in options.split():
        if word.startswith("--") or not out:
            out.append(word)
        else:
            out[-1] += " " + word
    return out
