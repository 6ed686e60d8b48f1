"""Aligning two sequences (lines, words): patience diff, with difflib where it gives up. Pure.

Patience alignment anchors on the items each sequence holds once, so moved or repeated
boilerplate does not pair up by accident; Breezy's ``patiencediff`` computes it. Its Rust
build panics when the alignment recurses past a fixed depth, which sixteen lines can
reach (``tests/test_align.py``), and the panic reaches Python as a ``BaseException`` that
would stop a whole plan. Every patience alignment in forksync goes through
:class:`Patience`, which aligns such a pair with difflib instead.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

import patiencediff


class Difflib(difflib.SequenceMatcher[str]):
    """difflib's matcher without the "popular element" heuristic, which would treat
    spaces and brackets as junk and misalign words."""

    def __init__(self, isjunk: Any = None, a: Sequence[str] = (), b: Sequence[str] = (),
                 autojunk: bool = False) -> None:
        super().__init__(isjunk, a, b, autojunk=False)


class Patience(difflib.SequenceMatcher[str]):
    """Patience alignment, or difflib's (:class:`Difflib`) where patience gives up."""

    def __init__(self, isjunk: Any = None, a: Sequence[str] = (), b: Sequence[str] = (),
                 autojunk: bool = False) -> None:
        super().__init__(None, a, b, autojunk=False)
        self._left, self._right = a, b

    def get_matching_blocks(self) -> list[difflib.Match]:
        try:
            blocks = patiencediff.PatienceSequenceMatcher(None, self._left, self._right) \
                .get_matching_blocks()
        except BaseException as exc:  # the Rust build's panic: see the module docstring
            if isinstance(exc, KeyboardInterrupt | SystemExit | MemoryError):
                raise
            return Difflib(None, self._left, self._right).get_matching_blocks()
        return [difflib.Match(*b) for b in blocks]
