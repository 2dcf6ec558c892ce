"""docs/bench.md from data/bench/: one table per mode of bench.csv in nccl-tests' columns, and the
notes of the run (bench-settle.csv, bench-clock-limits.csv) as a sentence and a table."""
from __future__ import annotations

from typing import Dict, List

from .ppl import read_csv
from .text import markdown

BENCH_COLUMNS = {"row", "ranks", "mode", "size", "count", "type", "time", "algbw", "busbw", "#wrong",
                 "ratio_vs_nccl", "rel_error"}
NUMERIC = ["---:"]


class Bench:
    def __init__(self, folder: str):
        self.rows = read_csv(f"{folder}/bench.csv", BENCH_COLUMNS)
        self.limits = read_csv(f"{folder}/bench-clock-limits.csv", ["mode", "row", "size", "limited_ms", "row_ms"])
        self.settle: Dict[str, str] = {r["mode"]: r["waited_s"] for r in
                                       read_csv(f"{folder}/bench-settle.csv", ["mode", "waited_s"])}

    def table(self, mode: str) -> str:
        """Every row of one mode: size, count, type, time, algbw, busbw, #wrong (and #differ where
        the CSV has it), the speedup against nccl-bf16 and the relative error."""
        differ = "#differ" in self.rows[0]
        header = ["row", "size (B)", "count", "type", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "#wrong"]
        header += ["#differ"] if differ else []
        header += ["speedup", "rel. error"]
        align = ["---", "---:", "---:", "---"] + NUMERIC * (len(header) - 4)
        lines = []
        for r in self.rows:
            if r["mode"] != mode:
                continue
            line = [r["row"], r["size"], r["count"], r["type"], r["time"], r["algbw"], r["busbw"], r["#wrong"] or "-"]
            line += [r["#differ"] or "-"] if differ else []
            line += [f"{r['ratio_vs_nccl']}x" if r["ratio_vs_nccl"] else "-", r["rel_error"] or "-"]
            lines.append(line)
        if not lines:
            raise ValueError(f"bench.csv: no rows of mode {mode}")
        return markdown(header, lines, align)

    def notes(self, mode: str) -> str:
        """The wait for power to settle, and the rows across which the clock-limit counters advanced."""
        text = []
        if mode in self.settle:
            text.append(f"Waited {self.settle[mode]} s in all for the GPUs' power to settle before rows.")
        limits: List[List[str]] = [[r["row"], r["size"], r["limited_ms"], r["row_ms"]]
                                   for r in self.limits if r["mode"] == mode]
        if limits:
            text.append("NVML's power and thermal clock-limit counters advanced across these rows (most limited\n"
                        "GPU; the counters advance in steps of up to 100 ms):")
            text.append("")
            text.append(markdown(["row", "size (B)", "counters advanced (ms)", "row ran for (ms)"], limits,
                                 ["---", "---:", "---:", "---:"]))
        return "\n".join(text) if text else "No notes."


EMULATE_COLUMNS = ["device", "ranks", "count", "dtype", "bits", "compensator", "residual", "state_dtype", "units",
                   "profile", "clip", "iterations", "median_ms", "traffic_gb", "copy_before_ms", "copy_after_ms",
                   "copy_ratio"]


def emulate_units_table(path: str) -> str:
    """docs/performance.md's compensator-units table of the one-GPU emulation (one run of
    echo_cuda_emulate_bench, each row beside a device copy): median, its fraction of the copy's
    bandwidth, and its time against the units 'site' row."""
    rows = read_csv(path, EMULATE_COLUMNS)
    site = [r for r in rows if r["units"] == "site"]
    if len(site) != 1:
        raise ValueError(f"{path}: {len(site)} rows of units site, expected 1")
    lines = []
    for r in rows:
        label = f"`{r['units']}`"
        label += f", profile `{r['profile']}`" if r["profile"] != "flat" else ""
        label += f", clip {r['clip']}" if float(r["clip"]) != 0 else ""
        against = float(r["median_ms"]) / float(site[0]["median_ms"])
        lines.append([label, f"{float(r['median_ms']):.3f} ms", r["copy_ratio"], f"{against:.2f}"])
    return markdown(["units (same row)", "median", "of the copy", "against units `site`"], lines,
                    ["---"] + NUMERIC * 3)
