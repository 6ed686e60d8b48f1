"""Which upstream commits changed a review item's lines: line history, read from one git log.

The answer is the union of two line histories, both on upstream's own (untranslated)
files, following renames:

- theirs' side: the commits ``git log -L <start>,<end>:<path> cutoff..tip`` would list
  for the region's lines at the tip (a range mapped back through each commit's diff,
  touched when a hunk's new side overlaps it);
- base' side: for each base line of the region, the commit that deleted or changed it,
  as ``git blame --reverse cutoff..tip`` tells (the child of the last commit the line
  was seen in).

All of it comes from ``git log -p -U0 --first-parent -M`` over the files that need it
(two, run side by side: one diffed as ``log -L`` diffs, one as ``blame`` does), so the
cost is two git processes per plan, not one per item. Translation keeps line
numbers (rules rewrite within lines), so a region's lines in theirs'/base' are its lines
in upstream's files; where that does not hold, the item is left to the caller's fallback.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from bot.engine.git import Background, Git
from bot.engine.markers import split_lines

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_DIFF = re.compile(r'^diff --git ("?)a/(.*)\1 ("?)b/(.*)\3$')
_RS = "\x1e"


@dataclass(frozen=True)
class Hunk:
    """One -U0 hunk, as 0-based half-open line ranges on the old and new side."""

    old_start: int
    old_end: int
    new_start: int
    new_end: int


@dataclass
class FileDiff:
    old_path: str | None  # None: the commit added the file
    new_path: str | None  # None: the commit deleted the file
    hunks: list[Hunk] = field(default_factory=list)


@dataclass
class CommitDiff:
    sha: str
    files: list[FileDiff]

    def by_new(self, path: str) -> FileDiff | None:
        return next((f for f in self.files if f.new_path == path), None)

    def by_old(self, path: str) -> FileDiff | None:
        return next((f for f in self.files if f.old_path == path), None)


def start_history(work: Git, cutoff: str, tip: str, paths: Iterable[str], *,
                  for_blame: bool = False) -> Background | None:
    """``git log -p -U0`` of the window over ``paths`` (include a renamed file's old path).

    ``git log -L`` diffs with plain xdiff and ``git blame`` with the indent heuristic;
    they slide ambiguous hunks differently, so each line history reads its own log.
    """
    wanted = sorted(set(paths))
    if not wanted:
        return None
    heuristic = "--indent-heuristic" if for_blame else "--no-indent-heuristic"
    # --first-parent shows a merge commit's diff against its first parent: the PR as merged.
    return work.start("-c", "core.quotePath=false", "log", "-p", "--first-parent", "-M", "-U0",
                      heuristic, "--no-color", "--no-ext-diff", "--format=%x1e%H",
                      f"{cutoff}..{tip}", "--", *wanted)


def parse_history(out: str) -> list[CommitDiff]:
    """The commits of a ``start_history`` log, newest first, with their hunks."""
    commits: list[CommitDiff] = []
    for record in out.split(_RS)[1:]:
        sha, _, patch = record.partition("\n")
        commits.append(CommitDiff(sha.strip(), _parse_patch(patch)))
    return commits


def _parse_patch(patch: str) -> list[FileDiff]:
    files: list[FileDiff] = []
    current: FileDiff | None = None
    for line in patch.split("\n"):
        if line.startswith("diff --git "):
            m = _DIFF.match(line)
            current = FileDiff(m.group(2), m.group(4)) if m else FileDiff(None, None)
            files.append(current)
        elif current is None:
            continue
        elif line.startswith("@@ "):
            h = _HUNK.match(line)
            if h:
                current.hunks.append(_hunk(*h.groups()))
        elif line.startswith("new file mode"):
            current.old_path = None
        elif line.startswith("deleted file mode"):
            current.new_path = None
        elif line.startswith("rename from "):
            current.old_path = line[len("rename from "):]
        elif line.startswith("rename to "):
            current.new_path = line[len("rename to "):]
    return files


def _hunk(os_: str, oc: str | None, ns: str, nc: str | None) -> Hunk:
    old_n = 1 if oc is None else int(oc)
    new_n = 1 if nc is None else int(nc)
    # With a count of 0 the start names the line *before* the empty range.
    old_s = int(os_) if old_n == 0 else int(os_) - 1
    new_s = int(ns) if new_n == 0 else int(ns) - 1
    return Hunk(old_s, old_s + old_n, new_s, new_s + new_n)


def _overlaps(a0: int, a1: int, b0: int, b1: int) -> bool:
    # line-log.c's ranges_overlap: an empty hunk strictly inside the range touches it.
    return not (a1 <= b0 or b1 <= a0)


Ranges = list[tuple[int, int]]


def _union(ranges: Ranges) -> Ranges:
    """Sorted, with touching or overlapping ranges joined and empty ones dropped."""
    out: Ranges = []
    for start, end in sorted(r for r in ranges if r[0] < r[1]):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _difference(ranges: Ranges, cut: Ranges) -> Ranges:
    """line-log.c's range_set_difference: an empty cut inside a range still splits it."""
    out: Ranges = []
    j = 0
    for start, end in ranges:
        while start < end:
            while j < len(cut) and start >= cut[j][1]:
                j += 1
            if j >= len(cut) or end <= cut[j][0]:
                out.append((start, end))
                break
            if start < cut[j][0]:
                out.append((start, cut[j][0]))
            start = cut[j][1]
    return out


def _map_back(ranges: Ranges, hunks: Sequence[Hunk]) -> tuple[bool, Ranges]:
    """line-log.c's range_set_map_across_diff: is the range set touched, and its parent lines.

    A touched hunk hands its parent-side lines to the set in place of its new-side
    lines; the rest of the set is shifted by the hunks before it.
    """
    touched = [h for h in hunks
               if any(_overlaps(h.new_start, h.new_end, s, e) for s, e in ranges)]
    rest = _difference(ranges, [(h.new_start, h.new_end) for h in touched])
    shifted: Ranges = []
    for start, end in rest:
        offset = sum((h.old_end - h.old_start) - (h.new_end - h.new_start)
                     for h in hunks if start >= h.new_start)
        shifted.append((start + offset, end + offset))
    return bool(touched), _union(shifted + [(h.old_start, h.old_end) for h in touched])


def log_l(history: Sequence[CommitDiff], path: str, start: int, end: int) -> list[str]:
    """The commits that changed lines [start, end) of ``path`` at the tip, newest first."""
    found: list[str] = []
    ranges: Ranges = [(start, end)] if start < end else []
    for commit in history:
        if not ranges:
            break
        f = commit.by_new(path)
        if f is None:
            continue
        if f.old_path is None:  # added here: every line of the range came from this commit
            found.append(commit.sha)
            break
        touched, ranges = _map_back(ranges, f.hunks)
        if touched:
            found.append(commit.sha)
        path = f.old_path
    return found


def blame_reverse(history: Sequence[CommitDiff], path: str, lines: Iterable[int]) -> list[str]:
    """For each cutoff line (0-based), the commit that deleted or changed it, oldest first."""
    alive = {line: line for line in lines}  # cutoff line -> its line now
    found: list[str] = []
    for commit in reversed(history):
        if not alive:
            break
        f = commit.by_old(path)
        if f is None:
            continue
        gone = {k for k, pos in alive.items() if f.new_path is None
                or any(h.old_start <= pos < h.old_end for h in f.hunks)}
        if gone and commit.sha not in found:
            found.append(commit.sha)
        for k in gone:
            del alive[k]
        for k, pos in alive.items():
            alive[k] = pos + sum((h.new_end - h.new_start) - (h.old_end - h.old_start)
                                 for h in f.hunks if h.old_end <= pos)
        if f.new_path is None:
            break
        path = f.new_path
    return found


def touched_file(history: Sequence[CommitDiff], path: str) -> list[str]:
    """Every commit that changed ``path`` (named at the tip), following renames back."""
    found: list[str] = []
    for commit in history:
        f = commit.by_new(path)
        if f is None:
            continue
        found.append(commit.sha)
        if f.old_path is None:
            break
        path = f.old_path
    return found


def deleted_file(history: Sequence[CommitDiff], path: str) -> list[str]:
    """Every commit that changed ``path`` (named at the cutoff), following renames forward."""
    found: list[str] = []
    for commit in reversed(history):
        f = commit.by_old(path)
        if f is None:
            continue
        found.append(commit.sha)
        if f.new_path is None:
            break
        path = f.new_path
    return found


def locate(file_text: str, side: str, before: str | None, after: str | None,
           not_before: int = 0) -> tuple[int, int] | None:
    """Where ``side`` (a region's section) sits in ``file_text``: a 0-based [start, end).

    git puts a region between lines that neither side changed, so the merged file's
    lines just before and after the region are the neighbours of its section in each
    side's file too; they pick among repeated candidates. ``None`` when absent.
    """
    lines = split_lines(file_text)
    want = split_lines(side)
    n = len(want)
    fallback: tuple[int, int] | None = None
    for pos in range(max(0, not_before), len(lines) - n + 1):
        if lines[pos:pos + n] != want:
            continue
        ok_before = pos == 0 if before is None else pos > 0 and lines[pos - 1] == before
        ok_after = pos + n == len(lines) if after is None else (
            pos + n < len(lines) and lines[pos + n] == after)
        if ok_before and ok_after:
            return pos, pos + n
        if fallback is None and n and (ok_before or ok_after):
            fallback = (pos, pos + n)
    return fallback


__all__ = [
    "CommitDiff",
    "FileDiff",
    "Hunk",
    "blame_reverse",
    "deleted_file",
    "locate",
    "log_l",
    "parse_history",
    "start_history",
    "touched_file",
]
