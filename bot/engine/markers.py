"""Conflict markers: the one parser of marker regions, and the scanner the gate relies on. Pure.

git writes a region as ``<<<<<<< ours``, optionally ``||||||| base``, ``=======`` and
``>>>>>>> theirs``, each at the start of a line and exactly ``size`` characters long
(the ``conflict-marker-size`` attribute, 7 by default). :func:`find_marker_regions`
follows that structure in that order, as git's own rerere does, so a Markdown setext
underline (``=======``) outside a region, or above the ``|||||||`` line inside one, is
content. The merge picks, per path, a size that no line of the file's inputs can be
mistaken for (:func:`safe_marker_size` of its
:func:`marker_runs`) and records it in the plan, so a file is
always parsed at the size it was merged with.

:func:`scan` is what a gate needs on top: the complete regions, and every *orphan*
marker line (a line that looks like a marker and belongs to no complete region),
each with a verdict: ``marker`` (a leftover of a merge: fail) or ``unsure`` (it could
be content; ask a person rather than pass).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

MARKER_SIZE = 7  # git's default conflict-marker-size
# The labels of the bot's merges: ``<<<<<<< ours``, ``||||||| upstream@<cutoff>``,
# ``>>>>>>> theirs``. A leftover line with these labels was written by the bot.
OURS_LABEL = "ours"
THEIRS_LABEL = "theirs"
BASE_LABEL_PREFIX = "upstream@"


class MarkerKind(StrEnum):
    """The four marker lines of a region; the value is the marker character."""

    OURS = "<"
    BASE = "|"
    SEP = "="
    THEIRS = ">"


class Verdict(StrEnum):
    """What an orphan marker line is, as far as the text can tell."""

    MARKER = "marker"  # a leftover of a merge: the gate fails
    UNSURE = "unsure"  # could be a marker or content: the gate asks a person


@dataclass(frozen=True)
class MarkerRegion:
    """One ``<<<<<<<`` … ``>>>>>>>`` region; lines are 1-based and include the markers."""

    start_line: int
    end_line: int
    ours: str
    base: str | None  # None for merge-style (no ``|||||||`` section)
    theirs: str
    eol: str = "\n"
    base_line: int | None = None  # the ``|||||||`` line
    sep_line: int = 0  # the ``=======`` line


@dataclass(frozen=True)
class Orphan:
    """A line that looks like a marker and is not part of a complete region."""

    line: int  # 1-based
    kind: MarkerKind
    text: str  # the line, without its line ending
    size: int  # the marker size it has
    verdict: Verdict
    reason: str


@dataclass(frozen=True)
class MarkerScan:
    """Everything marker-like in one file: complete regions and orphan marker lines."""

    size: int
    regions: list[MarkerRegion] = field(default_factory=list)
    orphans: list[Orphan] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """No region and no orphan: nothing in the file can be a conflict marker."""
        return not self.regions and not self.orphans

    @property
    def unsure(self) -> list[Orphan]:
        return [o for o in self.orphans if o.verdict is Verdict.UNSURE]


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


def marker_kind(line: str, size: int = MARKER_SIZE) -> MarkerKind | None:
    """The marker ``line`` is at ``size``, read as git's rerere reads markers.

    Exactly ``size`` marker characters at the start of the line, then the end of the
    line or whitespace and a label; ``=======`` takes no label. ``<<<<<<<<`` is not a
    marker at size 7, nor is ``<<<<<<<HEAD`` or an indented ``<<<<<<< x``.
    """
    if len(line) < size or line[0] not in "<|=>":
        return None
    char = line[0]
    body = _strip_eol(line)
    if body[:size] != char * size:
        return None
    rest = body[size:]
    if char == "=":
        return MarkerKind.SEP if not rest.strip(" \t") else None
    if not rest or rest[0] in " \t":
        return MarkerKind(char)
    return None


def is_marker_line(line: str, char: str, size: int = MARKER_SIZE) -> bool:
    """``line`` is a marker of the kind ``char`` (``<``, ``|``, ``=`` or ``>``) at ``size``."""
    kind = marker_kind(line, size)
    return kind is not None and kind.value == char


def has_markers(text: str, size: int = MARKER_SIZE) -> bool:
    """True if ``text`` still holds the start or end of a conflict region at ``size``."""
    return any(marker_kind(line, size) in (MarkerKind.OURS, MarkerKind.THEIRS)
               for line in split_lines(text))


def find_marker_regions(text: str, size: int = MARKER_SIZE) -> list[MarkerRegion]:
    """Every complete marker region in ``text``, in order; incomplete ones are ignored."""
    return find_marker_regions_in_lines(split_lines(text), size)


def find_marker_regions_in_lines(lines: list[str], size: int = MARKER_SIZE) -> list[MarkerRegion]:
    """The same, over lines already split with :func:`split_lines`."""
    kinds = [marker_kind(line, size) for line in lines]
    regions: list[MarkerRegion] = []
    i = 0
    while i < len(lines):
        if kinds[i] is not MarkerKind.OURS:
            i += 1
            continue
        region, resume = _region_at(lines, kinds, i)
        if region is not None:
            regions.append(region)
        i = resume
    return regions


def _region_at(lines: list[str], kinds: list[MarkerKind | None],
               start: int) -> tuple[MarkerRegion | None, int]:
    """The region opened at ``start``, and where to go on looking (past it, or past the break).

    Sections come in git's order: ours, then an optional base, then theirs. A ``=======``
    seen before the ``|||||||`` line is ours' content: a diff3 region always has its
    ``|||||||`` line before its divider.
    """
    base_at: int | None = None
    sep_at: int | None = None
    j = start + 1
    while j < len(lines):
        kind = kinds[j]
        if kind is MarkerKind.OURS:
            return None, j  # a new region opens before this one closed: this one is broken
        if kind is MarkerKind.BASE and base_at is None:
            base_at, sep_at = j, None  # any divider so far was a line of ours
        elif kind is MarkerKind.SEP and sep_at is None:
            sep_at = j
        elif kind is MarkerKind.THEIRS:
            if sep_at is None:
                return None, j + 1
            return _region(lines, start, base_at, sep_at, j), j + 1
        j += 1
    return None, j


def _region(lines: list[str], start: int, base_at: int | None, sep_at: int,
            end: int) -> MarkerRegion:
    ours_end = base_at if base_at is not None else sep_at
    return MarkerRegion(
        start_line=start + 1,
        end_line=end + 1,
        ours="".join(lines[start + 1:ours_end]),
        base="".join(lines[base_at + 1:sep_at]) if base_at is not None else None,
        theirs="".join(lines[sep_at + 1:end]),
        eol="\r\n" if lines[start].endswith("\r\n") else "\n",
        base_line=base_at + 1 if base_at is not None else None,
        sep_line=sep_at + 1,
    )


def region_marker_lines(region: MarkerRegion) -> list[int]:
    """The 1-based numbers of a region's own marker lines."""
    numbers = [region.start_line, region.sep_line, region.end_line]
    if region.base_line is not None:
        numbers.insert(1, region.base_line)
    return numbers


# -- choosing a size the inputs cannot be mistaken for -----------------------------------


_MARKER_RUN = re.compile(rb"^(<+|\|+|=+|>+)(?=[ \t\r\n]|$)", re.MULTILINE)


def marker_runs(data: bytes) -> set[int]:
    """The lengths of marker-character runs that start a line of ``data`` like a marker does."""
    return {len(m.group(1)) for m in _MARKER_RUN.finditer(data)}


def count_marker_lines(data: bytes, size: int = MARKER_SIZE) -> int:
    """How many lines of ``data`` start like a marker of exactly ``size`` characters."""
    return sum(1 for m in _MARKER_RUN.finditer(data) if len(m.group(1)) == size)


def safe_marker_size(taken: Iterable[int]) -> int:
    """The smallest size from git's default up that is not one of the ``taken`` run lengths.

    With ``taken`` the :func:`marker_runs` of a file's inputs, no line of the inputs
    looks like a marker at that size: every marker line of the merge is one git wrote,
    and the regions read back without guessing.
    """
    used = set(taken)
    size = MARKER_SIZE
    while size in used:
        size += 1
    return size


# -- the scanner ---------------------------------------------------------------------------


def bot_marker(kind: MarkerKind, text: str, size: int) -> bool:
    """``text`` is a marker line exactly as the bot's merges write it at ``size``."""
    label = text[size:].strip()
    if kind is MarkerKind.OURS:
        return label == OURS_LABEL
    if kind is MarkerKind.THEIRS:
        return label == THEIRS_LABEL
    if kind is MarkerKind.BASE:
        return label.startswith(BASE_LABEL_PREFIX)
    return True  # the divider carries no label


@dataclass(frozen=True)
class _Reference:
    """What the bot's own merge result held: its marker lines and its content lines."""

    markers: frozenset[str]
    content: frozenset[str]


def _reference(text: str | None, size: int, known: frozenset[str]) -> _Reference | None:
    if text is None and not known:
        return None
    lines = split_lines(text or "")
    marker_at = {n - 1 for region in find_marker_regions_in_lines(lines, size)
                 for n in region_marker_lines(region)}
    markers = frozenset(_strip_eol(lines[i]) for i in marker_at) - known
    content = frozenset(_strip_eol(line) for i, line in enumerate(lines)
                        if i not in marker_at) | known
    return _Reference(markers, content)


def scan(text: str, size: int = MARKER_SIZE, *, reference: str | None = None,
         content: Iterable[str] = ()) -> MarkerScan:
    """The complete regions of ``text`` at ``size``, and every orphan marker line.

    ``size`` is the marker size the path was merged with (``marker_size`` in the plan).
    ``reference`` is the merge result the bot committed for this path (commit 1): a
    line it held as content is content (a setext underline, a documented ``<<<<<<<``
    line in a code block), and a line it held as a marker is a leftover. Lines at
    git's default size count too when ``size`` is larger (a marker from a merge made
    elsewhere), except where the reference had them as content: that content is why
    the merge stepped up to ``size``.

    A ``=======`` line is an orphan only where a region could be: after an orphan
    ``<<<<<<<`` or ``|||||||`` line, or before an orphan ``>>>>>>>`` line.

    ``content`` names lines known to be content whatever the reference says: the marker
    lines of a region the merge did not write (a documented example in a clean file), or
    lines a person said are content.

    Verdicts: ``marker`` for a line the reference had as a marker, or one with the
    bot's own labels at ``size``; ``unsure`` where the text cannot tell (another tool's
    labels, git's default size on a path merged with a larger one, or a line that is
    both a marker and content in the reference).
    """
    lines = split_lines(text)
    regions = find_marker_regions_in_lines(lines, size)
    inside = {i for region in regions
              for i in range(region.start_line - 1, region.end_line)}
    ref = _reference(reference, size, frozenset(_strip_eol(line) for line in content))
    orphans: list[Orphan] = []
    sizes = (size,) if size == MARKER_SIZE else (size, MARKER_SIZE)
    for at_size in sizes:
        candidates = [(i, kind) for i, line in enumerate(lines)
                      if i not in inside and (kind := marker_kind(line, at_size)) is not None]
        candidates = _where_regions_could_be(candidates)
        found = [_judge(i, kind, _strip_eol(lines[i]), at_size, size, ref)
                 for i, kind in candidates if kind is not MarkerKind.SEP]
        # A divider has no label: it is as sure as the orphan markers it stands between.
        sure = any(o is not None and o.verdict is Verdict.MARKER for o in found)
        found += [_judge(i, kind, _strip_eol(lines[i]), at_size, size, ref, sure)
                  for i, kind in candidates if kind is MarkerKind.SEP]
        orphans += [o for o in found if o is not None]
    orphans.sort(key=lambda o: o.line)
    return MarkerScan(size, regions, orphans)


def _where_regions_could_be(candidates: list[tuple[int, MarkerKind]]
                            ) -> list[tuple[int, MarkerKind]]:
    """Drop the ``=======`` lines that no orphan opener precedes and no orphan closer follows."""
    after_opener: set[int] = set()
    opened = False
    for i, kind in candidates:
        if kind in (MarkerKind.OURS, MarkerKind.BASE):
            opened = True
        elif kind is MarkerKind.THEIRS:
            opened = False
        elif opened:
            after_opener.add(i)
    before_closer: set[int] = set()
    closing = False
    for i, kind in reversed(candidates):
        if kind is MarkerKind.THEIRS:
            closing = True
        elif kind is MarkerKind.OURS:
            closing = False
        elif kind is MarkerKind.SEP and closing:
            before_closer.add(i)
    return [(i, kind) for i, kind in candidates
            if kind is not MarkerKind.SEP or i in after_opener or i in before_closer]


def _judge(i: int, kind: MarkerKind, text: str, at_size: int, size: int,
           ref: _Reference | None, sure_neighbours: bool = False) -> Orphan | None:
    """The orphan at line ``i``, or None where the line is known content."""
    in_content = ref is not None and text in ref.content
    in_markers = ref is not None and text in ref.markers
    if at_size != size:
        if in_content:
            return None  # the very content the merge's larger size steps around
        return Orphan(i + 1, kind, text, at_size, Verdict.UNSURE,
                      f"has git's default marker size, but this file was merged with size "
                      f"{size}: a marker from a merge made elsewhere, or content?")
    if in_content and in_markers:
        return Orphan(i + 1, kind, text, at_size, Verdict.UNSURE,
                      "the merge result has this same line both as a marker and as content")
    if in_content:
        return None
    if in_markers:
        return Orphan(i + 1, kind, text, at_size, Verdict.MARKER,
                      "a marker line of the merge, left without the rest of its region")
    if kind is MarkerKind.SEP and not sure_neighbours:
        return Orphan(i + 1, kind, text, at_size, Verdict.UNSURE,
                      "a divider between marker lines that may be content")
    if bot_marker(kind, text, at_size):
        return Orphan(i + 1, kind, text, at_size, Verdict.MARKER,
                      "a conflict marker as forksync writes it, outside any complete region")
    return Orphan(i + 1, kind, text, at_size, Verdict.UNSURE,
                  "looks like a conflict marker, but not one this sync's merge wrote")
