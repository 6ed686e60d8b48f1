"""Who changed a file since the two sides split: the lines each side added or removed. Pure.

A conflict hunk alone does not say whose file it is. A fork that rewrote most of a file
(a runtime it replaced, a page it redesigned) usually keeps its own version where
upstream's edit collides with it; a file the fork touched in two places usually takes
upstream's. ``bot.engine.suggest`` reads this to propose the fork's side of a conflict
in a file the fork owns (its rule "conflict, the fork's file").

Lines are counted as ``git diff --numstat`` counts them (added plus removed), from a
patience diff of the whole file, base against each side.
"""

from __future__ import annotations

from bot.engine.align import Patience
from bot.engine.markers import split_lines
from bot.engine.model import Changed


def changed_lines(base: str, side: str) -> int:
    """Lines added plus lines removed from ``base`` to ``side`` (``git diff --numstat``)."""
    a, b = split_lines(base), split_lines(side)
    if a == b:
        return 0
    ops = Patience(None, a, b).get_opcodes()
    return sum((i2 - i1) + (j2 - j1) for tag, i1, i2, j1, j2 in ops if tag != "equal")


def file_changes(base: str | None, ours: str | None, theirs: str | None) -> Changed | None:
    """What each side changed in a file; None when a version is missing or not text (an
    add/add has no base, and a file one side deleted is a whole-file question)."""
    if base is None or ours is None or theirs is None:
        return None
    return Changed(changed_lines(base, ours), changed_lines(base, theirs))
