"""Tables recorded from a run whose inputs are not committed (a model file, a build's timing): the
CSV holds the table's cells as the run printed them (data/*/recorded/, each folder's README names
the command), and the doc shows them as they are."""
from __future__ import annotations

import csv

from .ppl import DataError
from .text import markdown


def table(path: str) -> str:
    try:
        with open(path, newline="") as f:
            lines = list(csv.reader(f))
    except OSError as e:
        raise DataError(f"{path}: {e.strerror}") from e
    if len(lines) < 2:
        raise DataError(f"{path}: a header and at least one row are needed")
    header, body = lines[0], lines[1:]
    for number, line in enumerate(body, 2):
        if len(line) != len(header):
            raise DataError(f"{path}:{number}: {len(line)} cells, the header has {len(header)}")
    return markdown(header, body)
