"""No one-click button commits Python that does not parse where a plain side would. Pure.

A rule's combination of two edits can be text no interpreter accepts: a word merge that
leaves a string's closing quote on the other side's line, the fork's lines kept beside
upstream's deletion of the block they were indented in. A suggestion that is a starting
point is still one click from a commit, so in a Python file (``.py``, ``.pyi``) each
region's suggestion is checked before it is offered (:func:`check_parses`).

Nothing is judged while the file with every region replaced by its suggestion (and a
region without one by theirs: the file once every button is clicked) parses, which is
one compile for most files. Where it does not, each region with a suggestion is judged
on its own: the file is built three ways, that region replaced by its suggestion, by
theirs and by ours, and every *other* region by theirs in all three, so that one
region's broken suggestion never hides another's (and two suggestions that parse each on
its own, but not together, keep their buttons). If the suggestion's variant does not
parse but a side's does, the suggestion is withheld: the item becomes a Decide without a
suggestion block, its reason says where and why the text does not parse, and its
choices are the sides that do parse. Its rule and its ``candidate`` stay as they were,
so the replay still measures what the rule would have committed
(``Proposal.candidate``). If no variant parses, the file is broken anyway (a template,
Python 2, syntax newer than this interpreter's): nothing is said and nothing changes.

"Parses" is :func:`compile` to bytecode with this interpreter (warnings silenced): the
parser's errors and the compiler's (``return`` outside a function, ``break`` outside a
loop), what importing the module would raise first.

Cost, capped: a file over ``MAX_CHARS`` characters is not judged (the replay's own limit
for a file merged by hand; compiling takes about a third of a second per million
characters), and at most ``MAX_PARSES`` variants are compiled per file, fewer in a large
file, ``MAX_COMPILED`` characters in all (about two seconds), each distinct text once
(the variant with theirs in a region is the same file for every region). A region the
budget does not reach keeps its suggestion unjudged.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import PurePosixPath

from bot.engine.markers import MarkerRegion
from bot.engine.model import Tier
from bot.engine.suggest import Proposal

PYTHON_SUFFIXES = frozenset({".py", ".pyi"})
MAX_CHARS = 1_000_000  # a larger file is not judged
MAX_PARSES = 24  # distinct variants compiled per file at most
MAX_COMPILED = 6_000_000  # characters compiled per file at most


def is_python(path: str) -> bool:
    """A file the check reads as Python source, by its name."""
    return PurePosixPath(path).suffix.lower() in PYTHON_SUFFIXES


@dataclass(frozen=True)
class _Piece:
    """Where a run of a variant's lines comes from: the merged file (``line``, 1-based, in
    commit 1) or the fill of region ``region``."""

    first: int  # the run's first line in the variant, 1-based
    count: int
    line: int | None = None
    region: int | None = None


@dataclass(frozen=True)
class _Failure:
    """Why a variant does not parse: the compiler's message and its line in the variant."""

    msg: str
    lineno: int | None


class _Unknown(Exception):
    """The compiler could not judge the text (null bytes, too deep to recurse), or the
    budget of compiles is spent."""


def _lines_in(text: str) -> int:
    return text.count("\n") + (0 if not text or text.endswith("\n") else 1)


def _assemble(lines: Sequence[str], regions: Sequence[MarkerRegion],
              fills: Sequence[str]) -> tuple[str, list[_Piece]]:
    """The merged file with region ``j`` replaced by ``fills[j]``, and where each run of its
    lines comes from."""
    parts: list[str] = []
    pieces: list[_Piece] = []
    at, prev = 1, 0
    for j, region in enumerate(regions):
        kept = lines[prev:region.start_line - 1]
        if kept:
            parts += kept
            pieces.append(_Piece(at, len(kept), line=prev + 1))
            at += len(kept)
        fill = fills[j]
        if fill and not fill.endswith("\n") and region.end_line < len(lines):
            fill += region.eol  # a line of its own, as a suggestion block commits it
        parts.append(fill)
        n = _lines_in(fill)
        pieces.append(_Piece(at, n, region=j))
        at += n
        prev = region.end_line
    rest = lines[prev:]
    if rest:
        parts += rest
        pieces.append(_Piece(at, len(rest), line=prev + 1))
    return "".join(parts), pieces


def _compile(text: str, path: str) -> _Failure | None:
    """None if ``text`` compiles as Python; else why not. Raises ``_Unknown`` where the
    compiler cannot say."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        return _Failure(str(exc.msg), exc.lineno)
    except (ValueError, OverflowError, RecursionError, MemoryError) as exc:
        raise _Unknown from exc
    return None


_DETECTED = re.compile(r"\s*\(detected at line \d+\)")
_LINE = re.compile(r"\bline (\d+)")


def _where(lineno: int | None, pieces: Sequence[_Piece], own: int,
           regions: Sequence[MarkerRegion]) -> str:
    """A variant's line as a reviewer finds it: a line of the region's proposal, a line of
    the merged file (commit 1's numbering), or another conflict region."""
    if lineno is None:
        return "somewhere in the file"
    for p in pieces:
        if p.first <= lineno < p.first + p.count:
            if p.region == own:
                return f"line {lineno - p.first + 1} of the proposal"
            if p.region is not None:
                return f"the conflict at line {regions[p.region].start_line}"
            assert p.line is not None
            return f"line {p.line + lineno - p.first}"
    return "the end of the file"


def _said(failure: _Failure, pieces: Sequence[_Piece], own: int,
          regions: Sequence[MarkerRegion]) -> str:
    """``line 3 of the proposal: unterminated string literal``."""
    msg = _LINE.sub(lambda m: _where(int(m.group(1)), pieces, own, regions),
                    _DETECTED.sub("", failure.msg)).rstrip(".")
    return f"{_where(failure.lineno, pieces, own, regions)}: {msg}"


_SIDES = {("ours", "theirs"): "either side's version (ours or theirs)",
          ("ours",): "the fork's version (ours)",
          ("theirs",): "upstream's version (theirs)"}


def withheld(prop: Proposal, said: str, sides: tuple[str, ...]) -> Proposal:
    """``prop`` as a Decide without its suggestion: its text does not parse (``said``:
    where and why) while ``sides`` do. Its rule and candidate are kept (the replay counts
    them); its choices are the sides that parse."""
    reason = (f"{prop.reason.rstrip()} The proposal does not parse as Python ({said}), "
              f"though {_SIDES[sides]} does, so there is no button: pick a side or fix it "
              "by hand.")
    return replace(prop, tier=Tier.DECIDE, reason=reason, suggestion=None,
                   question="Both sides changed these lines, and their combination does not "
                   "parse. Keep ours, take upstream's (theirs), or combine them by hand?",
                   choices=sides, learned="")


def check_parses(path: str, lines: Sequence[str], regions: Sequence[MarkerRegion],
                 proposals: Sequence[Proposal]) -> list[Proposal]:
    """``proposals`` (one per region of the merged file ``lines``, in order), each
    suggestion that does not parse where a plain side would withheld (``withheld``).
    Files that are not Python, or too large, are returned as they are."""
    out = list(proposals)
    offered = [j for j, p in enumerate(proposals) if p.suggestion is not None]
    size = sum(map(len, lines))
    if not offered or not is_python(path) or size > MAX_CHARS:
        return out
    budget = min(MAX_PARSES, max(1, MAX_COMPILED // max(size, 1)))
    theirs = [r.theirs for r in regions]
    seen: dict[str, _Failure | None] = {}

    def fails(fills: list[str]) -> tuple[_Failure | None, list[_Piece]]:
        text, pieces = _assemble(lines, regions, fills)
        if text not in seen:
            if len(seen) >= budget:
                raise _Unknown
            seen[text] = _compile(text, path)
        return seen[text], pieces

    try:
        every, _ = fails([p.suggestion if p.suggestion is not None else r.theirs
                          for p, r in zip(proposals, regions, strict=True)])
        if every is None:
            return out
        for j in offered:
            suggestion = proposals[j].suggestion
            assert suggestion is not None
            failure, pieces = fails([*theirs[:j], suggestion, *theirs[j + 1:]])
            if failure is None:
                continue
            parsing = tuple(side for side, text in (("ours", regions[j].ours),
                                                    ("theirs", regions[j].theirs))
                            if fails([*theirs[:j], text, *theirs[j + 1:]])[0] is None)
            if parsing:
                out[j] = withheld(proposals[j], _said(failure, pieces, j, regions), parsing)
    except _Unknown:  # the compiler could not say, or the budget is spent: no more judged
        return out
    return out


__all__ = ["MAX_CHARS", "MAX_PARSES", "PYTHON_SUFFIXES", "check_parses", "is_python",
           "withheld"]
