"""What `python -m echotk advise` writes: the table on the terminal, and in the output folder
advice.md, advice.csv, advice.png (quality against wire bits) and spec.json (the recommended spec,
the JSON object of echotk.Spec.to_json(), which Spec.from_json, `echotk replay --spec-file` and,
as a Spec, echotk.AllReduce and echotk.distributed.AllReduce take). The files are written under
temporary names and renamed together at the end, so a failed run leaves none of them half written."""
from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import json
import math
import os
from typing import Dict, List

from .._spec import Spec
from .candidates import BASELINE, describe
from .hazards import Hazard, site_list
from .loading import Source
from .measure import SiteMeasures
from .ranking import Candidate, table_order
from .timing import REFERENCE_ELEMENTS
from . import plot

FILES = ("advice.md", "advice.csv", "advice.png", "spec.json")
CSV_COLUMNS = ("rank", "candidate", "setting", "wire_bits", "modelled_ms", "modelled_speedup", "windows",
               "d_log_ppl", "ci_low", "ci_high", "ppl_ratio", "verdict", "recommended", "spec")


def spec_json(spec: Spec) -> str:
    """spec.json's text: echotk.Spec.to_json() (one key per field). Until Spec has it, the same
    JSON object written here."""
    to_json = getattr(spec, "to_json", None)
    if to_json is not None:
        return to_json()
    return json.dumps(dataclasses.asdict(spec), indent=2) + "\n"


@dataclasses.dataclass
class Advice:
    """Everything one run found, as the writers below need it."""

    source: Source
    text: str
    text_tokens: int
    ranks: int
    budget_percent: float
    limit: float
    bits_max: float
    windows: int
    length: int
    device: str
    candidates: List[Candidate]
    recommended: Candidate
    sites: SiteMeasures
    hazards: List[Hazard]
    seconds: Dict[str, float]

    @property
    def falls_back(self) -> bool:
        """Nothing cheaper than 16-bit is within budget."""
        return self.recommended.name == BASELINE

    def baseline(self) -> Candidate:
        return next(c for c in self.candidates if c.name == BASELINE)


def verdict_text(c: Candidate, advice: Advice) -> str:
    if c is advice.recommended:
        return "recommended" if not advice.falls_back else "recommended (nothing cheaper is within budget)"
    if c.skipped:
        return f"skipped: {c.skipped}"
    v = c.verdict(advice.limit)
    return f"{v} (stopped after {c.stopped_after} windows)" if 0 < c.stopped_after < advice.windows else v


def _result_cells(c: Candidate) -> tuple:
    """(windows, d log ppl, 95% interval, ppl ratio) as text; blank for a candidate without windows."""
    if not c.diffs:
        return "", "", "", ""
    mean, low, high = c.interval()
    return str(len(c.diffs)), f"{mean:+.4f}", f"[{low:+.4f}, {high:+.4f}]", f"{math.exp(mean):.4f}"


def rows(advice: Advice) -> List[dict]:
    """One dict per candidate in table order, with the CSV's columns."""
    base_seconds = advice.baseline().modelled_seconds
    out = []
    for rank, c in enumerate(table_order(advice.candidates), 1):
        mean, low, high = c.interval() if c.diffs else ("", "", "")
        out.append({
            "rank": rank if c.running else "", "candidate": c.name, "setting": describe(c.spec),
            "wire_bits": c.wire_bits, "modelled_ms": c.modelled_seconds * 1e3,
            "modelled_speedup": base_seconds / c.modelled_seconds, "windows": len(c.diffs),
            "d_log_ppl": mean, "ci_low": low, "ci_high": high, "ppl_ratio": math.exp(mean) if c.diffs else "",
            "verdict": verdict_text(c, advice), "recommended": int(c is advice.recommended),
            "spec": "" if c.spec is None else json.dumps(dataclasses.asdict(c.spec), sort_keys=True)})
    return out


def terminal_table(advice: Advice) -> str:
    """The table printed on the terminal: wire bits, d log-ppl with its paired 95% interval, verdict."""
    header = ("rank", "candidate", "wire bits", "vs 16-bit", "windows", "d log ppl", "95% CI (paired)", "verdict")
    lines = [header]
    for r, c in zip(rows(advice), table_order(advice.candidates)):
        windows, d, interval, _ = _result_cells(c)
        lines.append((str(r["rank"]), c.name, f"{c.wire_bits:.4g}", f"{r['modelled_speedup']:.2f}x", windows, d,
                      interval, r["verdict"]))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)) + "  " + line[-1]
                     for line in lines) + "\n"


def summary_line(advice: Advice) -> str:
    """The advice in one sentence."""
    b = f"+{advice.budget_percent:g}% perplexity"
    if advice.falls_back:
        closest = min((c for c in advice.candidates if c.name != BASELINE and c.diffs),
                      key=lambda c: c.interval()[0], default=None)
        text = (f"No setting of at most {advice.bits_max:g} wire bits per element is within {b} of 16-bit: "
                "use the 16-bit (exact) all-reduce.")
        if closest is not None:
            mean, low, high = closest.interval()
            text += (f" The closest: {closest.name} ({describe(closest.spec)}, {closest.wire_bits:g} bits) at "
                     f"{mean:+.4f} nats per token [{low:+.4f}, {high:+.4f}], perplexity x{math.exp(mean):.3f}.")
        return text
    c = advice.recommended
    mean, low, high = c.interval()
    speedup = advice.baseline().modelled_seconds / c.modelled_seconds
    return (f"Use {c.name}: {describe(c.spec)}. {c.wire_bits:g} wire bits per element, d log ppl {mean:+.4f} "
            f"[{low:+.4f}, {high:+.4f}] (perplexity x{math.exp(mean):.3f}, within {b}), modelled all-reduce "
            f"speed {speedup:.2f}x 16-bit's at P = {advice.ranks}. spec.json holds it.")


def markdown(advice: Advice) -> str:
    s, m = advice.seconds, advice.sites
    out = io.StringIO()
    w = lambda line="": out.write(line + "\n")  # noqa: E731
    w(f"# Advice: {advice.source.architecture}, P = {advice.ranks}, budget +{advice.budget_percent:g}% perplexity, "
      f"at most {advice.bits_max:g} wire bits")
    w()
    w(f"**{summary_line(advice)}**")
    w()
    w(f"Model: {advice.source.describe()}. Text: {advice.text} ({advice.text_tokens} tokens). "
      f"{advice.windows} windows of {advice.length} tokens, evenly spaced, each paired against 16-bit; "
      f"device {advice.device}; {s['total']:.0f} s in all (loading {s['load']:.0f} s, sites {s['sites']:.0f} s, "
      f"evaluation {s['evaluate']:.0f} s).")
    w()
    w("## Hazards")
    w()
    if not advice.hazards:
        w("None found (no massive activations, no groups past the fp16 scale limit, no post-norms).")
    for h in advice.hazards:
        w(f"- **{h.name}** at site{'s' if len(h.sites) > 1 else ''} {site_list(h.sites)}: {h.detail}.")
    w()
    w("## Candidates")
    w()
    w(f"Ranked by wire bits per element, then by the modelled all-reduce time (1 GiB of bf16 at P = "
      f"{advice.ranks}); \"d log ppl\" is the mean over windows of the candidate's mean loss minus 16-bit's, "
      f"with its paired 95% Student-t interval; the budget is d <= log(1 + {advice.budget_percent:g}%) = "
      f"{advice.limit:.5f}. A candidate whose interval lies above it stopped at the next batch of windows.")
    w()
    w("| rank | candidate | setting | wire bits | modelled ms | vs 16-bit | windows | d log ppl | 95% CI (paired) "
      "| ppl ratio | verdict |")
    w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r, c in zip(rows(advice), table_order(advice.candidates)):
        windows, d, interval, ratio = _result_cells(c)
        w(f"| {r['rank']} | `{c.name}` | {r['setting']} | {c.wire_bits:.4g} | {r['modelled_ms']:.2f} | "
          f"{r['modelled_speedup']:.2f}x | {windows} | {d} | {interval} | {ratio} | {r['verdict']} |")
    w()
    w("## Sites")
    w()
    w(f"From a trace of the 16-bit run ({m.passes} passes of {m.tokens} tokens, echotk.capture) replayed "
      f"through Echo 4-bit (`echo4`) and 4-bit without the compensator (`nocomp4`): max/RMS of the "
      f"contributions, groups past the fp16 scale limit at 4 bits, the gain of the site's post-norm on its "
      f"error (median over passes; - where none), and the relative error ||e_k|| / ||sum x||.")
    w()
    w("| site | kind | max/RMS | wide groups | post-norm gain | rel. error echo4 | rel. error nocomp4 |")
    w("| --- | --- | --- | --- | --- | --- | --- |")
    for k in range(len(m.kind)):
        gain = f"{m.gain[k]:.3g}" if m.post_norm[k] else "-"
        w(f"| {k} | {'attention' if m.kind[k] == 0 else 'mlp'} | {m.peak_to_rms[k]:.1f} | {int(m.wide_groups[k])} | "
          f"{gain} | {m.relative_error['echo4'][k]:.3f} | {m.relative_error['nocomp4'][k]:.3f} |")
    w()
    for name in m.cancellation:
        w(f"Cancellation of the carried error ||sum_k e_k|| / sqrt(sum_k ||e_k||^2) per pass, {name}: "
          f"{_per_pass(m.cancellation[name])}" +
          (f"; after the post-norms: {_per_pass(m.cancellation_after[name])}." if m.post_norm.any() else "."))
    w()
    w("## Using it")
    w()
    if advice.falls_back:
        w("No spec.json: the advice is the exact all-reduce (`echotk.ExactAllReduce`, or the framework's own).")
    else:
        load = ("echotk.Spec.from_json(open(\"spec.json\").read())" if hasattr(Spec, "from_json")
                else "echotk.Spec(**json.load(open(\"spec.json\")))")
        w("```python")
        w(f"spec = {load}")
        w(f"ar = echotk.AllReduce(ranks={advice.ranks}, spec=spec)   # or echotk.distributed.AllReduce(group, spec)")
        w("```")
    w()
    w(f"The modelled time is the larger of the link floor (push and gather each send (P - 1) / P of the "
      f"message's codes at 350 GB/s per GPU) and the HBM floor of the compensator's state at 3.3 TB/s "
      f"(docs/performance.md), for {REFERENCE_ELEMENTS} bf16 elements; 16-bit is NCCL's ring at the same link "
      f"rate. It is an estimate, not a measurement.")
    return out.getvalue()


def _per_pass(values) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def csv_text(advice: Advice) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for r in rows(advice):
        writer.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in r.items()})
    return out.getvalue()


def write_outputs(advice: Advice, folder: str) -> List[str]:
    """Writes advice.md, advice.csv, advice.png and (unless the advice is 16-bit) spec.json into
    `folder`: each to a temporary name first, all renamed once all are written; a spec.json of an
    earlier run is removed when this advice has none. Returns the paths written."""
    os.makedirs(folder, exist_ok=True)
    final = {name: os.path.join(folder, name) for name in FILES}
    temporary = {name: f"{path}.{os.getpid()}.tmp" for name, path in final.items()}
    texts = {"advice.md": markdown(advice), "advice.csv": csv_text(advice)}
    if not advice.falls_back:
        texts["spec.json"] = spec_json(advice.recommended.spec)
    written = [*texts, "advice.png"]
    try:
        for name, text in texts.items():
            with open(temporary[name], "w") as f:
                f.write(text)
        plot.draw(advice, temporary["advice.png"])
        for name in written:
            os.replace(temporary[name], final[name])
    finally:
        for path in temporary.values():
            with contextlib.suppress(OSError):
                os.unlink(path)
    if advice.falls_back:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(final["spec.json"])
    return [final[name] for name in written]
