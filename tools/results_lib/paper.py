"""The paper's Table 4 (data/paper/table4.csv: WikiText perplexity at P = 4 per model) and Table 8
(data/paper/table8.csv: component ablations on Llama-3-8B)."""
from __future__ import annotations

import dataclasses
import math
from typing import List

from .ppl import DataError, read_csv

COLUMNS = ["model", "ppl_16bit", "ppl_4bit_uncompensated", "ppl_echo_8bit", "ppl_echo_4bit"]


@dataclasses.dataclass(frozen=True)
class Table4Row:
    model: str
    ppl_16bit: float
    ppl_4bit_uncompensated: float
    ppl_echo_8bit: float
    ppl_echo_4bit: float

    def closed(self) -> float:
        """Fraction of the 4-bit gap Echo closes, in perplexity."""
        return (self.ppl_4bit_uncompensated - self.ppl_echo_4bit) / (self.ppl_4bit_uncompensated - self.ppl_16bit)

    def closed_log(self) -> float:
        """The same in log-perplexity, the unit of the measured rows."""
        off, echo, base = (math.log(v) for v in (self.ppl_4bit_uncompensated, self.ppl_echo_4bit, self.ppl_16bit))
        return (off - echo) / (off - base)


def read_table4(path: str) -> List[Table4Row]:
    rows = []
    for number, line in enumerate(read_csv(path, COLUMNS), 2):
        try:
            rows.append(Table4Row(line["model"], *(float(line[c]) for c in COLUMNS[1:])))
        except ValueError as e:
            raise DataError(f"{path}:{number}: {e}") from None
    return rows


TABLE8_COLUMNS = ["row", "wt_4bit", "c4_4bit", "wt_8bit", "c4_8bit"]


def read_table8(path: str) -> dict:
    """{row: WikiText perplexity at 4 bits} of the ablation table."""
    out = {}
    for number, line in enumerate(read_csv(path, TABLE8_COLUMNS), 2):
        try:
            out[line["row"]] = float(line["wt_4bit"])
        except ValueError as e:
            raise DataError(f"{path}:{number}: {e}") from None
    return out
