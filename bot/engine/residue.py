"""Translation residue: upstream names left in fork files (say, ``sglang`` pasted back in by a
resolution). A line has residue when translating it would still change it. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from bot.engine.markers import MARKER_SIZE, MarkerKind, marker_kind, split_lines
from bot.engine.translate import Translator

MAX_PER_FILE = 20  # enough to point a person at the problem; the check says when there are more


@dataclass(frozen=True)
class Residue:
    path: str
    line: int  # 1-based
    text: str  # the line as it is
    expected: str  # the line as translation would make it


def find_residue(translator: Translator, fork_path: str, upstream_path: str, text: str,
                 *, limit: int = MAX_PER_FILE, marker_size: int = MARKER_SIZE) -> list[Residue]:
    """Lines of ``text`` (a fork file) that the fork's translation would still rewrite.

    Marker lines (at the file's ``marker_size``) are the merge's, not content: skipped.
    """
    if translator.is_excluded(upstream_path):
        return []
    # Most files have none: one translation of the whole text answers that first.
    if translator.text(text, upstream_path) == text:
        return []
    found: list[Residue] = []
    for number, line in enumerate((ln.rstrip("\r\n") for ln in split_lines(text)), 1):
        if marker_kind(line, marker_size) not in (None, MarkerKind.SEP):
            continue
        expected = translator.text(line, upstream_path)
        if expected != line:
            found.append(Residue(fork_path, number, line, expected))
            if len(found) >= limit:
                break
    return found
