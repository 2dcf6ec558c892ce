"""Generated text in the docs sits between two HTML comments, which Markdown does not render:

    <!-- results:NAME -->              a block (a table): the markers on lines of their own,
                                       a blank line, the table, a blank line
    <!-- /results:NAME -->

    ... text <!-- results:NAME -->generated words<!-- /results:NAME --> text ...   (inline)

`regions` finds them; `fill` writes what the generators give in place of what is there."""
from __future__ import annotations

import dataclasses
import re
from typing import Callable, Dict, List

BEGIN = re.compile(r"<!-- results:([a-z0-9][a-z0-9-]*) -->")


class MarkerError(ValueError):
    pass


@dataclasses.dataclass
class Region:
    name: str
    start: int    # offset of the content (after the begin marker)
    end: int      # offset of the end marker
    block: bool   # the begin marker ends its line

    def content(self, text: str) -> str:
        return text[self.start:self.end]


def end_marker(name: str) -> str:
    return f"<!-- /results:{name} -->"


def regions(text: str, where: str) -> List[Region]:
    """The marked regions of text, in order; MarkerError naming `where` for an unclosed, nested or
    repeated marker."""
    found, seen, pos = [], set(), 0
    while True:
        begin = BEGIN.search(text, pos)
        if begin is None:
            break
        name = begin.group(1)
        if name in seen:
            raise MarkerError(f"{where}: marker results:{name} appears twice")
        end = text.find(end_marker(name), begin.end())
        if end < 0:
            raise MarkerError(f"{where}: results:{name} has no {end_marker(name)}")
        inner = BEGIN.search(text, begin.end(), end)
        if inner is not None:
            raise MarkerError(f"{where}: results:{inner.group(1)} begins inside results:{name}")
        block = text.startswith("\n", begin.end())
        found.append(Region(name, begin.end(), end, block))
        seen.add(name)
        pos = end + len(end_marker(name))
    return found


def rendered(region: Region, body: str) -> str:
    """What goes between the markers: a block's body between blank lines, an inline body as is."""
    body = body.strip("\n")
    if region.block:
        return "\n\n" + body + "\n\n"
    if "\n" in body:
        raise MarkerError(f"results:{region.name} is inline but its text has several lines")
    return body


def fill(text: str, where: str, generators: Dict[str, Callable[[], str]]) -> str:
    """text with every region replaced by its generator's output; MarkerError when a region has no
    generator or a generator has no region."""
    found = regions(text, where)
    names = {r.name for r in found}
    unknown = sorted(names - set(generators))
    if unknown:
        raise MarkerError(f"{where}: no generator for the marker(s) {', '.join(unknown)}")
    missing = sorted(set(generators) - names)
    if missing:
        raise MarkerError(f"{where}: the marker(s) {', '.join(missing)} are missing")
    out, pos = [], 0
    for r in found:
        out.append(text[pos:r.start])
        out.append(rendered(r, generators[r.name]()))
        pos = r.end
    out.append(text[pos:])
    return "".join(out)


def differing(old: str, new: str, where: str) -> List[str]:
    """Names of the regions whose content differs between two versions of one doc."""
    before = {r.name: r.content(old) for r in regions(old, where)}
    after = {r.name: r.content(new) for r in regions(new, where)}
    return [name for name in after if before.get(name) != after[name]]
