"""tools/results.py: the committed docs equal what it writes from the committed data, a changed
number in any kind of CSV makes --check fail naming the doc and the table, writing repairs the docs
and draws the figures; and the pieces (markers, statistics, indices) on small inputs."""
import csv
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from scipy import stats as scipy_stats

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))

from results_lib import markers, ppl, ppl_tables, stats  # noqa: E402

RESULTS = REPO / "tools" / "results.py"
# What tools/results.py reads and writes: the docs and the data behind their tables.
COPIED = ["README.md", "docs", "data/gemma3/ppl", "data/gemma3/recorded", "data/smollm2/ppl", "data/smollm2/cpp-ppl",
          "data/smollm2/cpp2-ppl", "data/smollm2/w64-ppl", "data/smollm2/w128-ppl", "data/smollm2/py2-ppl",
          "data/smollm2/python-ppl", "data/smollm2/recorded", "data/paper",
          "data/training/runs", "data/bench", "data/advise"]
FIGURES = ["docs/figures/training-loss.png", "docs/figures/training-lr.png", "docs/figures/training-sites.png"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def results(root, *args):
    return subprocess.run([sys.executable, str(RESULTS), "--root", str(root), *args], capture_output=True, text=True)


@pytest.fixture
def copy(tmp_path):
    """The docs and their data, copied: what --root points at."""
    for part in COPIED:
        src, dst = REPO / part, tmp_path / part
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.h5", "*.gz", "history"))
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dst)
    return tmp_path


def change_cell(path: Path, line: int, column: str, change=lambda v: f"{float(v) * 1.01!r}"):
    """Changes one value of a CSV (line 0 is the first data line)."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        rows, header = list(reader), reader.fieldnames
    rows[line][column] = change(rows[line][column])
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, header, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def test_the_committed_docs_are_what_their_data_gives():
    done = results(REPO, "--check")
    assert done.returncode == 0, done.stderr


# One changed number per kind of data, and the doc and table that must then differ.
CHANGES = [
    ("data/gemma3/ppl/moby-p4-echo4.csv", 0, "nll_sum", "docs/results-gemma3.md: table gemma3-moby"),
    ("data/gemma3/ppl/sotu-p4-rot.csv", 3, "nll_sum", "docs/outliers.md: table outliers-gemma3-sotu"),
    ("data/smollm2/cpp-ppl/moby-p4-naive.csv", 5, "nll_sum", "docs/results-smollm2.md: table smollm2-cpp"),
    ("data/smollm2/cpp-ppl/sotu-p4-out1.csv", 2, "nll_sum", "docs/outliers.md: table outliers-smollm2-sotu"),
    ("data/smollm2/python-ppl/p4-echo4.csv", 1, "nll_sum", "docs/results-smollm2.md: table smollm2-python"),
    ("data/paper/table4.csv", 1, "ppl_echo_4bit", "docs/results-gemma3.md: table gap-closed"),
    ("data/smollm2/py2-ppl/sotu-bound-q4rot64.csv", 4, "nll_sum",
     "docs/results-gemma3.md: table stream-smollm2-bound-sotu"),
    ("data/training/runs/m256x4-p0.2/echo4-s1/train.csv", -1, "train_loss",
     "docs/results-training.md: table training-results"),
    ("data/training/runs/m256x4-p0.2/q4off-s2/train.csv", -1, "val_loss",
     "docs/results-training.md: table training-comparisons"),
    ("data/training/runs/select/m320x4-p0.2/train.csv", -1, "val_loss",
     "docs/results-training.md: table training-selection"),
    ("data/bench/bench.csv", 40, "time", "docs/bench.md: table bench-plain"),
    ("data/bench/bench-clock-limits.csv", 0, "limited_ms", "docs/bench.md: table bench-plain-notes"),
    ("data/bench/emulate-stream-units-h100.csv", 1, "median_ms", "docs/performance.md: table emulate-units"),
    ("data/gemma3/recorded/reference-logits.csv", 0, "relative L2 of the logits",
     "docs/results-gemma3.md: table gemma3-reference-logits"),
]


@pytest.mark.parametrize("path,line,column,named", CHANGES, ids=[c[0].split("/", 1)[1] for c in CHANGES])
def test_one_changed_number_fails_the_check(copy, path, line, column, named):
    change_cell(copy / path, line, column)
    done = results(copy, "--check")
    assert done.returncode == 1, done.stderr
    assert named + " differs" in done.stderr


def test_writing_repairs_the_docs_and_draws_the_figures(copy):
    change_cell(copy / "data/training/runs/m256x4-p0.2/exact-s0/train.csv", -1, "train_loss")
    for figure in FIGURES:
        (copy / figure).unlink()
    done = results(copy)
    assert done.returncode == 0, done.stderr
    assert results(copy, "--check").returncode == 0
    for figure in FIGURES:
        data = (copy / figure).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 10_000, figure
    assert not list((copy / "docs").glob(".results-*")) and not list((copy / "docs/figures").glob(".fig-*"))


def test_text_outside_the_markers_is_kept(copy):
    change_cell(copy / "data/bench/bench.csv", 0, "time")
    doc = copy / "docs/bench.md"
    before = doc.read_text()
    assert results(copy, "docs/bench.md").returncode == 0
    after = doc.read_text()
    assert before != after and outside_markers(before) == outside_markers(after)


def outside_markers(text):
    """The doc's text with every marked region's content left out."""
    pieces, pos = [], 0
    for r in markers.regions(text, "doc"):
        pieces.append(text[pos:r.start])
        pos = r.end
    return pieces + [text[pos:]]


def test_bad_data_is_named(copy):
    (copy / "data/smollm2/cpp-ppl/moby-p4-rot.csv").unlink()
    done = results(copy, "--check")
    assert done.returncode == 2 and "moby-p4-rot.csv" in done.stderr
    index = copy / "data/gemma3/ppl/rows.csv"
    text = index.read_text()
    index.write_text(text.replace("--ranks 4 --allreduce exact,16,0", "--ranks 4 --allreduce exact,16,2", 1))
    done = results(copy, "--check")
    assert done.returncode == 2 and "rows.csv:2: compensated must be 0 or 1" in done.stderr


def test_a_new_index_line_lands_in_the_table_of_its_text(copy):
    index = copy / "data/gemma3/ppl/rows.csv"
    with open(index, "a") as f:
        f.write("moby,p4-echo4-again,moby-p4-echo4.csv,moby-p4-16bit.csv,--ranks 4 --allreduce echo,4.25,1\n")
    done = results(copy, "--check")
    assert done.returncode == 1 and "docs/results-gemma3.md: table gemma3-moby differs" in done.stderr
    assert results(copy, "docs/results-gemma3.md").returncode == 0
    assert "| p4-echo4-again | `--ranks 4 --allreduce echo` |" in (copy / "docs/results-gemma3.md").read_text()


def test_markers_fill_blocks_and_inline_text():
    text = "a <!-- results:x -->old<!-- /results:x --> b\n<!-- results:t -->\nold\n<!-- /results:t -->\nend\n"
    new = markers.fill(text, "doc", {"x": lambda: "new", "t": lambda: "| 1 |"})
    assert new == ("a <!-- results:x -->new<!-- /results:x --> b\n"
                   "<!-- results:t -->\n\n| 1 |\n\n<!-- /results:t -->\nend\n")
    assert markers.differing(text, new, "doc") == ["x", "t"]
    assert markers.fill(new, "doc", {"x": lambda: "new", "t": lambda: "| 1 |"}) == new


@pytest.mark.parametrize("text,message", [
    ("<!-- results:x -->", "has no <!-- /results:x -->"),
    ("<!-- results:x --><!-- /results:x --><!-- results:x --><!-- /results:x -->", "appears twice"),
    ("<!-- results:x --><!-- results:y --><!-- /results:y --><!-- /results:x -->", "begins inside"),
    ("<!-- results:z --><!-- /results:z -->", "no generator"),
    ("", "missing"),
])
def test_markers_refuse_malformed_docs(text, message):
    with pytest.raises(markers.MarkerError, match=message):
        markers.fill(text, "doc", {"x": lambda: "x"} if "results:z" in text else {"x": lambda: "x", "y": lambda: "y"})


def test_intervals_are_scipy_t_and_welch():
    low, high = stats.t_interval(2.0, [1.0, 2.0, 3.0])  # sem 1/sqrt(3), t(0.975, 2) = 4.302653
    assert low == pytest.approx(2 - 4.302653 / math.sqrt(3), abs=1e-6)
    assert high == pytest.approx(2 + 4.302653 / math.sqrt(3), abs=1e-6)
    d, (low, high) = stats.paired([2.0, 3.0, 5.0], [1.0, 1.0, 2.0])  # differences 1, 2, 3
    assert d == 2.0 and high - d == pytest.approx(4.302653 / math.sqrt(3), abs=1e-6)
    # Welch: variances 1 and 4 over 3 values each, se^2 = 1/3 + 4/3, Welch-Satterthwaite degrees of freedom
    d, (low, high) = stats.welch([4.0, 5.0, 6.0], [0.0, 2.0, 4.0])
    se2, df = 5 / 3, (5 / 3) ** 2 / ((1 / 3) ** 2 / 2 + (4 / 3) ** 2 / 2)
    assert d == 3.0 and high - d == pytest.approx(scipy_stats.t.ppf(0.975, df) * math.sqrt(se2), rel=1e-9)
    assert 3.182 * math.sqrt(se2) < high - d < 4.303 * math.sqrt(se2)  # t(0.975) at 3 and at 2 degrees of freedom
    assert all(math.isnan(c) for c in stats.welch([1.0], [1.0, 2.0])[1])
    assert stats.t_interval(1.0, [1.0, 1.0]) == (1.0, 1.0)


def test_index_columns_and_windows_are_checked(tmp_path):
    (tmp_path / "rows.csv").write_text("text,row,csv\nmoby,a,a.csv\n")
    with pytest.raises(ppl.DataError, match="columns text,row,csv; expected"):
        ppl.read_index(str(tmp_path / "rows.csv"))
    (tmp_path / "w.csv").write_text("window,start,tokens,predictions,nll_sum,mean_nll,seconds\n0,0,4,3,nan,nan,1\n")
    with pytest.raises(ppl.DataError, match="w.csv:2: nll_sum nan"):
        ppl.read_windows(str(tmp_path / "w.csv"))


def test_a_gap_goal_at_95_percent_asks_the_windows(tmp_path):
    """closed_margin's mean is below 0 exactly where the row closes more than the target; its paired
    interval decides "yes", "no" or "undecided"."""
    def windows(name, losses):
        lines = ["window,start,tokens,predictions,nll_sum,mean_nll,seconds"]
        lines += [f"{i},{100 * i},11,10,{10 * v!r},{v!r},1" for i, v in enumerate(losses)]
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    windows("base.csv", [2.0, 2.0, 2.0, 2.0])
    windows("off.csv", [3.0, 3.2, 2.8, 3.0])      # the uncompensated gap: 1 nat on average
    windows("tight.csv", [2.3, 2.36, 2.24, 2.3])  # 30% of the gap left on every window: closes 70%
    windows("loose.csv", [2.1, 2.9, 2.2, 2.6])    # 45% left on average, widely spread
    (tmp_path / "rows.csv").write_text(
        "text,row,csv,baseline,options,wire_bits,compensated\n"
        "moby,16bit,base.csv,base.csv,--ranks 4 --allreduce exact,16,0\n"
        "moby,off,off.csv,base.csv,--ranks 4 --allreduce echo --compensator off,4.25,0\n"
        "moby,tight,tight.csv,base.csv,--ranks 4 --allreduce echo,4.25,1\n"
        "moby,loose,loose.csv,base.csv,--ranks 4 --allreduce echo --eta 1,4.25,1\n")
    (tmp_path / "tables.csv").write_text("table,text,rows,label\nt,moby,*,\n")
    index = ppl.Index(str(tmp_path / "rows.csv"))
    tight, loose = index.row("moby", "tight"), index.row("moby", "loose")
    for row in (tight, loose):
        for target in (0.3, 0.5, 0.7, 0.9):
            m, (low, high) = ppl_tables.closed_margin(index, row, target)
            assert (m < 0) == (ppl_tables.gap_closed(index, row) > target) and low <= m <= high
    assert ppl_tables.gap_closed(index, tight) == pytest.approx(0.7)
    assert ppl_tables.verdict_at_level(ppl_tables.closed_margin(index, tight, 0.6)[1], 0.0) == "yes"
    assert ppl_tables.verdict_at_level(ppl_tables.closed_margin(index, tight, 0.8)[1], 0.0) == "no"
    assert ppl_tables.verdict_at_level(ppl_tables.closed_margin(index, loose, 0.5)[1], 0.0) == "undecided"
