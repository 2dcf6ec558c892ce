#!/usr/bin/env python3
"""Converts the tables of an `echotk bench --markdown` file into CSV (columns in
data/bench/README.md), for runs made before the bench wrote CSV itself: their tables have one
`#wrong` column (ranks against rank 0) and no `#differ`, and so has the CSV; newer tables are
refused (their runs wrote CSV themselves).

    python3 scripts/bench_markdown_to_csv.py RUN.md data/bench/bench.csv [--notes data/bench]

With --notes FOLDER it also writes the notes under each table (OUT.csv `-`: the notes only, as
for a run that wrote its CSV itself): FOLDER/bench-clock-limits.csv
(mode,row,size,limited_ms,row_ms: the rows across which NVML's clock-limit counters advanced) and
FOLDER/bench-settle.csv (mode,waited_s: the wait for the GPUs' power to settle before rows).
tools/results.py writes docs/bench.md from these files.

Every table whose header line starts with "# echotk bench" (or "## ...") becomes rows of the CSV; its ranks come
from the header ("2 x NVIDIA H200"), its mode from "CUDA graphs" (graph) and a background duty above
0% (background), plain otherwise. Exit code 2 when the file holds no table or a row is malformed.
"""
import csv
import os
import re
import sys
import tempfile

COLUMNS = ["row", "ranks", "mode", "size", "count", "type", "time", "algbw", "busbw", "#wrong",
           "ratio_vs_nccl", "rel_error"]
HEADER = re.compile(r"^#+ echotk bench \S+ \S+ UTC: (\d+) x ")
CLOCK_LIMIT = re.compile(r"^- (\S+) at (\d+) B: NVML's power and thermal clock-limit counters advanced (\d+) ms "
                         r"while the row ran for (\d+) ms")
SETTLE = re.compile(r"^- waited ([0-9.]+) s in all for the GPUs' power to settle before rows")
CLOCK_LIMIT_COLUMNS = ["mode", "row", "size", "limited_ms", "row_ms"]
SETTLE_COLUMNS = ["mode", "waited_s"]
DUTY = re.compile(r"background peer-to-peer duty (\d+)%")


def mode_of(header):
    graph = "CUDA graphs" in header
    duty = DUTY.search(header)
    background = duty is not None and int(duty.group(1)) > 0
    if graph and background:
        return "graph+background"
    return "graph" if graph else "background" if background else "plain"


def read_notes(path):
    """(clock-limit lines, settle lines) of the notes under each table."""
    limits, settles, mode = [], [], None
    with open(path, encoding="utf-8") as f:
        for line in f:
            if HEADER.match(line):
                mode = mode_of(line)
            elif mode is not None and CLOCK_LIMIT.match(line):
                limits.append([mode, *CLOCK_LIMIT.match(line).groups()])
            elif mode is not None and SETTLE.match(line):
                settles.append([mode, SETTLE.match(line).group(1)])
    return limits, settles


def read_rows(path):
    rows, ranks, mode = [], None, None
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            header = HEADER.match(line)
            if header:
                ranks, mode = int(header.group(1)), mode_of(line)
                continue
            if ranks is None or not line.startswith("| ") or line.startswith("| row "):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) != 10:
                raise ValueError(f"{path}:{number}: a table row needs 10 cells, found {len(cells)}")
            if not cells[1].isdigit():
                continue  # the table's alignment line
            name, size, count, dtype, time, algbw, busbw, wrong, speedup, error = cells
            blank = lambda v: "" if v == "-" else v
            rows.append([name, ranks, mode, size, count, dtype, time, algbw, busbw, blank(wrong),
                         blank(speedup).rstrip("x"), blank(error)])
    if not rows:
        raise ValueError(f"{path}: no echotk bench table found")
    return rows


def write_atomically(path, rows, columns=COLUMNS):
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".bench-", suffix=".csv.tmp")
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f, lineterminator="\n")
            writer.writerow(columns)
            writer.writerows(rows)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv):
    notes = None
    if len(argv) == 5 and argv[3] == "--notes":
        notes, argv = argv[4], argv[:3]
    if len(argv) != 3:
        print(f"usage: {argv[0]} BENCH.md OUT.csv [--notes FOLDER]", file=sys.stderr)
        return 2
    try:
        rows = read_rows(argv[1]) if argv[2] != "-" else []
        limits, settles = read_notes(argv[1])
    except (OSError, ValueError) as e:
        print(f"bench_markdown_to_csv: error: {e}", file=sys.stderr)
        return 2
    if argv[2] != "-":
        write_atomically(argv[2], rows)
    if notes is not None:
        write_atomically(os.path.join(notes, "bench-clock-limits.csv"), limits, CLOCK_LIMIT_COLUMNS)
        write_atomically(os.path.join(notes, "bench-settle.csv"), settles, SETTLE_COLUMNS)
    print(f"bench_markdown_to_csv: {len(rows)} rows -> {argv[2]}" +
          (f", {len(limits)} clock-limit and {len(settles)} settle notes -> {notes}" if notes else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
