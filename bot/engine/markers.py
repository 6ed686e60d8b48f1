"""Finding git's conflict-marker regions in a file (diff3 or merge style). Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass

# git writes exactly seven marker characters; the labels after them vary.
_OURS = re.compile(r"^<{7}(?: .*)?$")
_BASE = re.compile(r"^\|{7}(?: .*)?$")
_SEP = re.compile(r"^={7}$")
_THEIRS = re.compile(r"^>{7}(?: .*)?$")


@dataclass(frozen=True)
class MarkerRegion:
    """One ``<<<<<<<`` … ``>>>>>>>`` region; lines are 1-based and include the markers."""

    start_line: int
    end_line: int
    ours: str
    base: str | None  # None for merge-style (no ``|||||||`` section)
    theirs: str
    eol: str = "\n"


def _strip_eol(line: str) -> str:
    return line.rstrip("\r\n")


def split_lines(text: str) -> list[str]:
    """Lines with their ``\n`` kept. Unlike ``str.splitlines`` only ``\n`` ends a line, as
    for git and GitHub, so line numbers agree with theirs even around ``\x0c`` or U+2028."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def is_marker_line(line: str, char: str) -> bool:
    """Seven ``char`` then the end of the line or a space and a label, as git writes them."""
    body = _strip_eol(line)
    return body == char * 7 or body.startswith(char * 7 + " ")


def find_marker_regions(text: str) -> list[MarkerRegion]:
    """Every complete marker region in ``text``, in order; incomplete ones are ignored."""
    return find_marker_regions_in_lines(split_lines(text))


def find_marker_regions_in_lines(lines: list[str]) -> list[MarkerRegion]:
    """The same, over lines already split with :func:`split_lines`."""
    regions: list[MarkerRegion] = []
    i = 0
    n = len(lines)
    while i < n:
        if not _OURS.match(_strip_eol(lines[i])):
            i += 1
            continue
        start = i
        eol = "\r\n" if lines[i].endswith("\r\n") else "\n"
        ours: list[str] = []
        base: list[str] | None = None
        theirs: list[str] = []
        section = ours
        j = i + 1
        end = None
        while j < n:
            bare = _strip_eol(lines[j])
            if section is ours and _BASE.match(bare):
                base = []
                section = base
            elif section is not theirs and _SEP.match(bare):
                section = theirs
            elif section is theirs and _THEIRS.match(bare):
                end = j
                break
            elif _OURS.match(bare):
                break  # a new region starts before this one closed: this one is broken
            else:
                section.append(lines[j])
            j += 1
        if end is None:
            i = j if j > i + 1 else i + 1
            continue
        regions.append(
            MarkerRegion(
                start_line=start + 1,
                end_line=end + 1,
                ours="".join(ours),
                base="".join(base) if base is not None else None,
                theirs="".join(theirs),
                eol=eol,
            )
        )
        i = end + 1
    return regions
