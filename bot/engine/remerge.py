"""A finer re-merge inside one conflict region: lines first, then words. Pure.

git reports a conflict wherever the two sides' edits touch or overlap, judged on whole
lines aligned by Myers' diff. Inside the region we merge again, the way IntelliJ's
"resolve simple conflicts" does: the region's lines with patience alignment (unique
lines anchor, so moved or repeated boilerplate does not pair up by accident), then,
for each chunk that still conflicts, its words. The three-way merge itself is
Breezy's ``merge3``; this module only chooses the sequences and the alignment.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import merge3
import patiencediff

from bot.engine.markers import split_lines

# Words, runs of blanks, line ends, and every other character on its own: an edit to one
# argument or one operator stays a small edit, and layout is kept as tokens of its own.
_TOKEN = re.compile(r"\w+|[^\S\n]+|\n|.", re.DOTALL)
# Past this many tokens per side a word merge is not attempted: a chunk that large is
# a rewrite, and a person should read it whole.
MAX_WORD_TOKENS = 4000


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


class _Difflib(difflib.SequenceMatcher[str]):
    """difflib's matcher without the "popular element" heuristic, which would treat
    spaces and brackets as junk and misalign words."""

    def __init__(self, isjunk: Any = None, a: Sequence[str] = (), b: Sequence[str] = (),
                 autojunk: bool = False) -> None:
        super().__init__(isjunk, a, b, autojunk=False)


class _Patience(difflib.SequenceMatcher[str]):
    """Patience alignment, or difflib's where patience gives up.

    patiencediff stops after a fixed recursion depth (its Rust build panics, which
    reaches Python as a ``BaseException``); a region that deep is rare, and difflib
    aligns it instead.
    """

    def __init__(self, isjunk: Any = None, a: Sequence[str] = (), b: Sequence[str] = (),
                 autojunk: bool = False) -> None:
        super().__init__(None, a, b, autojunk=False)
        self._left, self._right = a, b

    def get_matching_blocks(self) -> list[difflib.Match]:
        try:
            blocks = patiencediff.PatienceSequenceMatcher(None, self._left, self._right) \
                .get_matching_blocks()
        except BaseException as exc:  # see the class docstring
            if isinstance(exc, KeyboardInterrupt | SystemExit | MemoryError):
                raise
            return _Difflib(None, self._left, self._right).get_matching_blocks()
        return [difflib.Match(*b) for b in blocks]


@dataclass(frozen=True)
class Chunk:
    """A run of the re-merged region: settled text, or a conflict still to decide."""

    text: str = ""  # when not a conflict: the merged text
    conflict: bool = False
    base: str = ""
    ours: str = ""
    theirs: str = ""


def merge_sequences(base: Sequence[str], ours: Sequence[str], theirs: Sequence[str], *,
                    patience: bool) -> list[Chunk]:
    """One three-way merge of two edits of ``base``, as settled and conflicting chunks."""
    matcher = _Patience if patience else _Difflib
    m = merge3.Merge3(list(base), list(ours), list(theirs),
                      sequence_matcher=cast(Any, matcher))
    out: list[Chunk] = []
    for group in m.merge_groups():
        if group[0] == "conflict":
            _, b, o, t = group
            out.append(Chunk(conflict=True, base="".join(b), ours="".join(o),
                             theirs="".join(t)))
        else:
            text = "".join(group[1])
            if out and not out[-1].conflict:
                out[-1] = Chunk(text=out[-1].text + text)
            else:
                out.append(Chunk(text=text))
    return out


def merge_lines(base: str, ours: str, theirs: str) -> list[Chunk]:
    """The region's lines merged again, aligned with patience diff."""
    return merge_sequences(split_lines(base), split_lines(ours), split_lines(theirs),
                           patience=True)


def merge_words(base: str, ours: str, theirs: str) -> str | None:
    """The word-by-word merge of one conflicting chunk, or None if words conflict too."""
    b, o, t = tokens(base), tokens(ours), tokens(theirs)
    if max(len(b), len(o), len(t)) > MAX_WORD_TOKENS:
        return None
    chunks = merge_sequences(b, o, t, patience=False)
    if any(c.conflict for c in chunks):
        return None
    return "".join(c.text for c in chunks)
