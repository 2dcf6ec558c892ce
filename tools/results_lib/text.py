"""Generated text in the docs' shape: Markdown tables, and paragraphs and bullets wrapped at the docs'
line width."""
import textwrap
from typing import List, Sequence

WIDTH = 100


def paragraph(text: str) -> str:
    return textwrap.fill(text, WIDTH, break_long_words=False, break_on_hyphens=False)


def bullet(text: str) -> str:
    return textwrap.fill(text, WIDTH, initial_indent="- ", subsequent_indent="  ", break_long_words=False,
                         break_on_hyphens=False)


def markdown(header: Sequence[str], lines: List[Sequence[str]], align: Sequence[str] = ()) -> str:
    """A Markdown table; align holds each column's alignment cell (default ---)."""
    align = list(align) or ["---"] * len(header)
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    out += ["| " + " | ".join(str(c) for c in line) + " |" for line in lines]
    return "\n".join(out)
