"""Replaying a past merge: what forksync would have proposed at each conflict, and what
people committed there. Local git in, data out.

A merge commit M with parents P1 and P2 is merged again by git (``git merge-tree``, diff3
markers). Each marker region of the result is found again in M's tree by anchoring on the
lines around it; the text between the anchors is what people committed. The benchmark
(``bench/replay_suggestions.py``) measures the rules this way across projects, and
``forksync learn`` (:mod:`bot.engine.learn`) measures them on one fork's own history.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

from bot.engine.git import CatFile, Git
from bot.engine.markers import (
    MARKER_SIZE,
    MarkerRegion,
    find_marker_regions_in_lines,
    has_markers,
    split_lines,
)
from bot.engine.model import Changed
from bot.engine.parsecheck import check_parses, is_python
from bot.engine.share import file_changes
from bot.engine.suggest import Proposal, propose_region
from bot.errors import GitError

MAX_FILE = 1_000_000  # bytes: larger files are generated data, not code people merge by hand
CONTEXT = 3  # lines of context on each side used to find the region in M
MAX_CONTEXT = 8  # extended while the context has no line with real content


def merge_tree(git: Git, p1: str, p2: str) -> tuple[str, dict[str, dict[int, str]]]:
    """git's own merge of the two parents: the tree (markers kept) and each conflicted
    path's stages, with the blob of each."""
    proc = git.run_proc("-c", "merge.conflictStyle=diff3", "merge-tree", "--write-tree", "-z",
                        p1, p2)
    if proc.returncode not in (0, 1):
        raise GitError(Git.describe_failure(["merge-tree"], proc.returncode, proc.stderr))
    head, _, _messages = proc.stdout.partition(b"\0\0")
    fields = head.split(b"\0")
    stages: dict[str, dict[int, str]] = defaultdict(dict)
    for entry in fields[1:]:
        if not entry:
            continue
        info, _, path = entry.partition(b"\t")
        _mode, oid, stage = info.decode().split()
        stages[path.decode("utf-8", "surrogateescape")][int(stage)] = oid
    return fields[0].decode(), stages


@dataclass(frozen=True)
class Remerged:
    """A past merge merged again by git: its tree (markers kept) and the conflicted paths'
    stages."""

    sha: str
    tree: str
    stages: dict[str, dict[int, str]]


def conflicting_merges(git: Git, rev: str, limit: int, *, extra: tuple[str, ...] = (),
                       max_files: int = 100) -> Iterator[Remerged]:
    """Two-parent merges under ``rev`` whose replay has at least one text conflict and at
    most ``max_files`` conflicted files, newest first, with the replay itself (so that no
    caller merges them a second time)."""
    lines = git.text("rev-list", "--merges", "--parents", *extra, rev).splitlines()
    found = 0
    for line in lines:
        parts = line.split()
        if len(parts) != 3:
            continue
        try:
            tree, stages = merge_tree(git, parts[1], parts[2])
        except GitError:
            continue
        if len(stages) <= max_files and any({1, 2, 3} <= st.keys() for st in stages.values()):
            found += 1
            yield Remerged(parts[0], tree, stages)
            if found >= limit:
                return


def text_of(data: bytes) -> str | None:
    """A blob as text, or None if it is binary, not UTF-8 or too large to be merged by hand."""
    if b"\0" in data[:8000] or len(data) > MAX_FILE:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def stage_changes(cat: CatFile, stages: dict[int, str]) -> Changed | None:
    """What each side changed in a conflicted file, from its index stages (1 base, 2 ours,
    3 theirs); None for an add/add, a deletion, or a version that is not text."""
    if not {1, 2, 3} <= stages.keys():
        return None
    texts = [text_of(data) for _, data in cat.read_many([stages[n] for n in (1, 2, 3)])]
    return file_changes(*texts)


def _significant(lines: list[str]) -> bool:
    return any(len(ln.strip()) >= 3 for ln in lines)


def _key(line: str) -> str:
    return line.rstrip()


def context_before(lines: list[str], region: MarkerRegion, floor: int) -> list[str] | None:
    """Up to CONTEXT lines above the region (more if they are all blank), not crossing
    ``floor`` (the end of the previous region); None when nothing can anchor it."""
    start = region.start_line - 1  # 0-based index of the <<<<<<< line
    if start == 0:
        return []
    lo = start - CONTEXT
    while lo > floor and lo > start - MAX_CONTEXT and not _significant(lines[max(lo, 0):start]):
        lo -= 1
    lo = max(lo, floor)
    ctx = lines[lo:start]
    return ctx if ctx and _significant(ctx) else None


def context_after(lines: list[str], region: MarkerRegion, ceiling: int) -> list[str] | None:
    end = region.end_line  # 0-based index of the line after >>>>>>>
    if end >= len(lines):
        return []
    hi = end + CONTEXT
    while hi < ceiling and hi < end + MAX_CONTEXT and not _significant(lines[end:hi]):
        hi += 1
    hi = min(hi, ceiling)
    ctx = lines[end:hi]
    return ctx if ctx and _significant(ctx) else None


def _matches(hay: list[str], needle: list[str], at: int) -> bool:
    return at >= 0 and at + len(needle) <= len(hay) and all(
        _key(hay[at + i]) == _key(n) for i, n in enumerate(needle))


def anchor(committed: list[str], before: list[str], after: list[str], expected: int,
           limit: int) -> tuple[int, int] | None:
    """Where the region's resolution sits in ``committed``: (first, end) line indices.

    The resolution is what lies between an occurrence of ``before`` and the next
    occurrence of ``after`` at most ``limit`` lines further; with several candidates
    the one nearest to ``expected`` wins, and a tie is no anchor at all.
    """
    if before:
        starts = [i + len(before) for i in range(len(committed) - len(before) + 1)
                  if _matches(committed, before, i)]
    else:
        starts = [0]
    found: list[tuple[int, int]] = []
    for s in starts:
        if not after:
            if len(committed) - s <= limit:
                found.append((s, len(committed)))
            continue
        for e in range(s, min(len(committed), s + limit) + 1):
            if _matches(committed, after, e):
                found.append((s, e))
                break
    if not found:
        return None
    found.sort(key=lambda se: abs(se[0] - expected))
    if len(found) > 1 and abs(found[0][0] - expected) == abs(found[1][0] - expected) \
            and found[0] != found[1]:
        return None
    return found[0]


def same_text(a: str, b: str) -> bool:
    """Equal but for trailing whitespace on each line (and at the end)."""
    return [_key(x) for x in split_lines(a)] == [_key(x) for x in split_lines(b)]


@dataclass(frozen=True)
class Replayed:
    """One conflict region of a replayed file: forksync's proposal and what was committed."""

    region: MarkerRegion
    proposal: Proposal
    committed: str


@dataclass
class FileReplay:
    """The regions of one file found again in the commit, and how many were not."""

    regions: list[Replayed]
    unanchored: int = 0
    committed_with_markers: int = 0


def replay_file(path: str, merged: str, resolved: str, *, added_both: bool,
                size: int = MARKER_SIZE, changed: Changed | None = None) -> FileReplay:
    """Each marker region of ``merged`` (git's merge, diff3 markers of ``size``) against
    the text people committed at the same place in ``resolved``."""
    lines = split_lines(merged)
    committed = split_lines(resolved)
    regions = find_marker_regions_in_lines(lines, size)
    out = FileReplay([])
    found: list[tuple[int, str]] = []  # the regions found again: index, committed text
    shift = 0  # how far the committed file has moved relative to the merged one so far
    for i, region in enumerate(regions):
        floor = regions[i - 1].end_line if i else 0
        ceiling = regions[i + 1].start_line - 1 if i + 1 < len(regions) else len(lines)
        before = context_before(lines, region, floor)
        after = context_after(lines, region, ceiling)
        if before is None or after is None:
            out.unanchored += 1
            continue
        span = len(split_lines(region.ours)) + len(split_lines(region.theirs)) \
            + len(split_lines(region.base or ""))
        where = anchor(committed, before, after, region.start_line - 1 + shift, span + 40)
        if where is None:
            out.unanchored += 1
            continue
        piece = committed[where[0]:where[1]]
        shift = where[1] - region.end_line
        # A region left whole or in part, at the file's marker size or git's default.
        if any(has_markers("".join(piece), s) for s in {size, MARKER_SIZE}):
            out.committed_with_markers += 1
            continue
        found.append((i, "".join(piece)))
    # The proposals as classify makes them: a Python file's are checked together, every
    # region's (``bot.engine.parsecheck``); elsewhere only the regions found again.
    wanted = range(len(regions)) if is_python(path) else [i for i, _ in found]
    props = {i: propose_region(lines, regions[i], added_both=added_both, path=path,
                               changed=changed) for i in wanted}
    if is_python(path):
        props = dict(enumerate(check_parses(path, lines, regions,
                                            [props[i] for i in range(len(regions))])))
    out.regions = [Replayed(regions[i], props[i], text) for i, text in found]
    return out
