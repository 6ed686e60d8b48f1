"""Keeping both sides' added lines where they added them at the same place. Pure.

Every line of both sides is kept, in each side's own order, including lines that also
occur on the other side (a closing ``end`` or ``}``, a blank line): two added blocks
that look alike at their edges are still two blocks. What is chosen is the order of
the two blocks, from the surroundings.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from bot.engine.markers import split_lines

# The name a line assigns or defines: ``key:``, ``key =``, ``"key":``, ``def key(``. Not a
# call (``f(x)``) nor a Ruby symbol argument (``before_action :x``): two of those are two
# additions.
_KEY = re.compile(r"""^\s*(?:(?:def|class|function)\s+([\w.$]+)\s*[(:]|"""
                  r"""(?:(?:const|let|var|export)\s+)?["']?([\w.\-@$]+)["']?\s*"""
                  r"""(?::(?=\s|$)|=(?!=)))""")


@dataclass(frozen=True)
class Both:
    text: str
    how: str  # the order chosen, in words: "ours first, then upstream's"
    sure: bool  # the surroundings decided the order (sorted) or one side contains the other


def same_keys(ours: str, theirs: str) -> set[str]:
    """Names that both sides' added lines assign or define: two values for one setting
    are a choice, not two additions."""
    def keys(text: str) -> set[str]:
        return {m.group(1) or m.group(2) for ln in split_lines(text) if (m := _KEY.match(ln))}
    return keys(ours) & keys(theirs)


def keep_both(ours: str, theirs: str, before: list[str], after: list[str]) -> Both | None:
    """Both additions, in the order the surroundings suggest; None when they are two
    values for the same names rather than two additions."""
    o, t = split_lines(ours), split_lines(theirs)
    if _contains(o, t):
        return Both(ours, "which is the fork's addition: upstream's lines are already in it",
                    True)
    if _contains(t, o):
        return Both(theirs, "which is upstream's addition: the fork's lines are already in it",
                    True)
    if same_keys(ours, theirs):
        return None
    sorted_text = _sorted_union(o, t, before, after)
    if sorted_text is not None:
        return Both(sorted_text, "in sorted order, like the lines around them", True)
    # Each side keeps its own blank lines, even where both end with the same separator:
    # replayed, people kept both separators in 33 such hunks and one in 9 (training).
    return Both(_join(o, t), "the fork's lines first, then upstream's", False)


def _join(first: list[str], second: list[str]) -> str:
    text = "".join(first)
    if text and not text.endswith("\n") and second:
        text += "\n"
    return text + "".join(second)


def _core(lines: list[str]) -> list[str]:
    """The lines without the blank lines at either end."""
    lo, hi = 0, len(lines)
    while lo < hi and not lines[lo].strip():
        lo += 1
    while hi > lo and not lines[hi - 1].strip():
        hi -= 1
    return [ln.strip() for ln in lines[lo:hi]]


def _contains(big: list[str], small: list[str]) -> bool:
    """``small`` (without blank lines at its ends) is a run of consecutive lines of ``big``,
    indentation aside (the bigger side may have wrapped it in a block)."""
    inner, outer = _core(small), [ln.strip() for ln in big]
    if not inner or len(inner) > len(outer):
        return False
    n = len(inner)
    return any(outer[i:i + n] == inner for i in range(len(outer) - n + 1))


def _item_key(line: str) -> str:
    return line.strip().lower()


def _sorted_union(o: list[str], t: list[str], before: list[str],
                  after: list[str]) -> str | None:
    """Both sides' lines merged in sorted order, when the region sits in a sorted list.

    It must look like a list: single lines at one indentation, each side's lines sorted,
    and at least two neighbours above or below that are sorted with them.
    """
    items = o + t
    if any(not ln.strip() for ln in items) or not all(ln.endswith("\n") for ln in items):
        return None
    indent = _indent(items[0])
    if any(_indent(ln) != indent for ln in items):
        return None
    above = _neighbours(reversed(before), indent)[::-1]
    below = _neighbours(after, indent)
    if len(above) + len(below) < 2:
        return None
    keys = [_item_key(ln) for ln in above]
    for side in (o, t):
        seq = keys + [_item_key(ln) for ln in side] + [_item_key(ln) for ln in below]
        if seq != sorted(seq):
            return None
    return "".join(sorted(items, key=_item_key))


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _neighbours(lines: Iterable[str], indent: str) -> list[str]:
    """The run of non-blank lines at ``indent`` next to the region (nearest first)."""
    out: list[str] = []
    for ln in lines:
        if not ln.strip() or _indent(ln) != indent:
            break
        out.append(ln)
    return out
