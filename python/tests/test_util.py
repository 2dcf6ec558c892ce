"""echotk's shared helpers: atomic writes, argument checks, the report's named slots."""
import os

import pytest
import torch

import echotk
from echotk import _C
from echotk._report import SLOT_NAMES, AllReduceReport
from echotk._util import BadInput, atomic_path, check_direction, check_ranks, write_atomic


def test_atomic_write_leaves_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / "out.csv"
    write_atomic(str(path), "old\n")
    with pytest.raises(RuntimeError, match="disk on fire"):
        with atomic_path(str(path)) as tmp:
            with open(tmp, "w") as f:
                f.write("half")
            raise RuntimeError("disk on fire")
    assert path.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["out.csv"]  # the temporary file is gone
    write_atomic(str(path), b"new\n")
    assert path.read_bytes() == b"new\n"


def test_checks_name_the_argument():
    assert check_direction("backward") == "backward" and check_direction(None, allow_none=True) is None
    with pytest.raises(ValueError, match="direction must be 'forward' or 'backward', got 'up'"):
        check_direction("up")
    with pytest.raises(ValueError, match="direction must be 'forward', 'backward' or None, got 'up'"):
        check_direction("up", allow_none=True)
    with pytest.raises(ValueError, match="got None"):
        check_direction(None)
    for bad in (0, 9, True, 2.0):
        with pytest.raises(ValueError, match=r"ranks must lie in \[1, 8\]"):
            check_ranks(bad)
    with pytest.raises(TypeError, match="spec must be an echotk.Spec"):
        echotk.AllReduce(ranks=2, spec={"bits": 4})
    assert issubclass(BadInput, ValueError)


def test_report_reads_the_slots_by_name():
    assert len(SLOT_NAMES) == _C.REPORT_SLOTS
    r = AllReduceReport.from_tensor("backward", torch.arange(len(SLOT_NAMES), dtype=torch.float64))
    assert [getattr(r, name) for name in SLOT_NAMES] == [0, 1, True, 3, 4.0, 5.0, 6.0, 7.0]
    assert r.direction == "backward" and r.relative_error == 5.0 / 7.0
    partial = AllReduceReport(direction="forward", poisoned_groups=0, scale_exponent=0, exact_path=True)
    assert partial.net_error is None and partial.relative_error is None
