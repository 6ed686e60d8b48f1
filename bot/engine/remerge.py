"""A finer re-merge inside one conflict region: lines first, then words. Pure.

git reports a conflict wherever the two sides' edits touch or overlap, judged on whole
lines aligned by Myers' diff. Inside the region we merge again, the way IntelliJ's
"resolve simple conflicts" does: the region's lines with patience alignment (unique
lines anchor, so moved or repeated boilerplate does not pair up by accident), then,
for each chunk that still conflicts, its words. The three-way merge itself is
Breezy's ``merge3``; this module only chooses the sequences and the alignment, and how
a chunk that still conflicts may be resolved (:func:`fine_merge`): both sides' added
lines kept (:mod:`keepboth`), its words merged, or the fork's added lines kept beside
upstream's deletion.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import merge3

from bot.engine.align import Difflib, Patience
from bot.engine.keepboth import keep_both
from bot.engine.markers import split_lines

# Version numbers (``1.20.1``), words, runs of blanks, line ends, and every other
# character on its own: an edit to one argument or one operator stays a small edit,
# layout is kept as tokens of its own, and a version is one value (two bumps of one
# version conflict instead of merging digit by digit).
_TOKEN = re.compile(r"\d+(?:\.\d+)+|\w+|[^\S\n]+|\n|.", re.DOTALL)
# Past this many tokens per side a word merge is not attempted: a chunk that large is
# a rewrite, and a person should read it whole.
MAX_WORD_TOKENS = 4000


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


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
    matcher = Patience if patience else Difflib
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


@dataclass
class Resolved:
    """A region merged again without a conflict left, and how each chunk was resolved."""

    text: str = ""
    words: bool = False  # some chunk needed the word-level merge
    both_added: str = ""  # how a keep-both was ordered, if one was needed
    both_added_sure: bool = True  # the order came from the surroundings, or one side holds
    # the other's lines
    beside: bool = False  # the fork's added lines kept where upstream deleted lines around


def fine_merge(base: str, ours: str, theirs: str, before: Sequence[str] = (),
               after: Sequence[str] = ()) -> Resolved | None:
    """The region merged line by line, each chunk that still conflicts resolved by the
    first way that fits; None when one chunk cannot be. ``before`` and ``after`` are the
    lines around the region, which decide the order of two added blocks."""
    res = Resolved()
    chunks = merge_lines(base, ours, theirs)
    for i, chunk in enumerate(chunks):
        if not chunk.conflict:
            res.text += chunk.text
            continue
        after_text = "".join(c.text if not c.conflict else c.ours for c in chunks[i + 1:])
        if not _resolve(chunk, res, list(before) + split_lines(res.text),
                        split_lines(after_text) + list(after)):
            return None
    return res


def _resolve(chunk: Chunk, res: Resolved, before: list[str], after: list[str]) -> bool:
    """Resolve one chunk that still conflicts line by line; False if it cannot be."""
    if not chunk.base.strip() and chunk.ours.strip() and chunk.theirs.strip():
        both = keep_both(chunk.ours, chunk.theirs, before, after)
        if both is None:
            return False
        res.text += both.text
        res.both_added = both.how
        res.both_added_sure = res.both_added_sure and both.sure
        return True
    words = merge_words(chunk.base, chunk.ours, chunk.theirs)
    if words is not None:
        res.text += words
        res.words = True
        return True
    added = added_only(chunk.base, chunk.ours) if not chunk.theirs.strip() else None
    if added is None:
        return False
    res.text += added
    res.beside = True
    return True


def both_changed_a_line(base: str, ours: str, theirs: str) -> bool:
    """Some line of ``base`` both sides changed or deleted: their merge needed its words,
    not only its lines (edits on lines apart conflict too where they touch)."""
    b = split_lines(base)

    def touched(side: str) -> set[int]:
        ops = difflib.SequenceMatcher(None, b, split_lines(side), autojunk=False).get_opcodes()
        return {k for tag, i1, i2, _, _ in ops if tag != "equal" for k in range(i1, i2)}
    return bool(touched(ours) & touched(theirs))


def added_only(base: str, side: str) -> str | None:
    """The lines ``side`` added, when it kept every line of ``base`` and only added lines
    (some not blank); None otherwise. Aligned by the longest runs, so a block added above
    a look-alike block is taken whole."""
    b, s = split_lines(base), split_lines(side)
    ops = difflib.SequenceMatcher(None, b, s, autojunk=False).get_opcodes()
    if any(tag not in ("equal", "insert") for tag, *_ in ops):
        return None
    added = [ln for tag, _i1, _i2, j1, j2 in ops if tag == "insert" for ln in s[j1:j2]]
    return "".join(added) if any(ln.strip() for ln in added) else None
