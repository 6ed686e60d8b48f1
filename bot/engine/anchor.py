"""Where each review item's thread goes on the PR diff: a region, one line, the file, or none.

GitHub takes a review comment only on lines the PR diff shows, and a multi-line one (which
a ```suggestion``` needs, to replace a whole marker region) only inside ONE hunk; anything
else makes it reject the whole review with a 422. A file-level comment
(``subject_type: file``) needs only the path to be in the diff. So every item gets the
best place the diff offers (:class:`Where`), and a thread carries the ids of its items.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchSet

from bot.errors import ForksyncError

Json = dict[str, Any]


class Where(StrEnum):
    """The place a thread gets; the first one the diff allows wins."""

    REGION = "region"  # the whole marker region inside one hunk: a one-click suggestion
    LINE = "line"  # one line of the first hunk the item touches: answered by a command
    FILE = "file"  # a file-level comment: the path is in the diff, with no line to take
    NONE = "none"  # the path is not in the diff (commit 1 keeps the fork's file): no thread


@dataclass(frozen=True)
class DiffLine:
    kind: str  # " " context, "+" added, "-" removed
    old: int | None
    new: int | None
    text: str


@dataclass(frozen=True)
class DiffHunk:
    header: str
    first: int  # RIGHT-side lines first..last (1-based, inclusive); last < first: none
    last: int
    lines: tuple[DiffLine, ...] = ()

    def has(self, start: int, end: int) -> bool:
        return self.first <= start and end <= self.last

    def touches(self, start: int, end: int) -> bool:
        return self.first <= end and start <= self.last

    def right_text(self, start: int, end: int) -> list[str]:
        """The new file's lines ``start..end`` as this hunk shows them."""
        return [ln.text for ln in self.lines
                if ln.kind != "-" and ln.new is not None and start <= ln.new <= end]


@dataclass(frozen=True)
class DiffFile:
    path: str  # the new path
    status: str  # added | removed | modified | renamed
    previous: str | None = None
    binary: bool = False
    hunks: tuple[DiffHunk, ...] = ()

    @property
    def right_hunks(self) -> tuple[DiffHunk, ...]:
        return tuple(h for h in self.hunks if h.last >= h.first)


@dataclass(frozen=True)
class PrDiff:
    """The PR diff as GitHub shows it: every path in it, with its hunks (maybe none)."""

    files: dict[str, DiffFile] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> PrDiff:
        """From a unified diff (``git diff``, or GitHub's ``application/vnd.github.diff``)."""
        try:
            patch = PatchSet(text)
        except UnidiffParseError as exc:
            raise ForksyncError(f"the PR diff cannot be read: {exc}") from None
        files = {}
        for patched in patch:
            status = ("added" if patched.is_added_file else "removed" if patched.is_removed_file
                      else "renamed" if patched.is_rename else "modified")
            previous = patched.source_file[2:] if patched.is_rename else None
            hunks = tuple(_hunk(h) for h in patched)
            files[patched.path] = DiffFile(patched.path, status, previous,
                                           bool(patched.is_binary_file), hunks)
        return cls(files)

    @classmethod
    def from_listing(cls, listing: Iterable[Json]) -> PrDiff:
        """From ``GET /pulls/{n}/files`` entries: a file with no ``patch`` has no line."""
        files = {}
        for f in listing:
            name, previous = f["filename"], f.get("previous_filename")
            patch = f.get("patch")
            hunks: tuple[DiffHunk, ...] = ()
            if patch is not None:
                old = previous or name
                one = cls.parse(f"diff --git a/{old} b/{name}\n--- a/{old}\n+++ b/{name}\n"
                                f"{patch}\n").files
                hunks = one[name].hunks if name in one else ()
            files[name] = DiffFile(name, f.get("status", "modified"), previous,
                                   patch is None, hunks)
        return cls(files)

    def hunk_at(self, path: str, line: int) -> DiffHunk | None:
        f = self.files.get(path)
        return next((h for h in f.right_hunks if h.has(line, line)), None) if f else None


def _hunk(h: Any) -> DiffHunk:
    lines = tuple(DiffLine(ln.line_type, ln.source_line_no, ln.target_line_no,
                           ln.value.rstrip("\n")) for ln in h if ln.line_type in " +-")
    header = f"@@ -{h.source_start},{h.source_length} +{h.target_start},{h.target_length} @@"
    if h.section_header:
        header += f" {h.section_header}"
    return DiffHunk(header, h.target_start, h.target_start + h.target_length - 1, lines)


@dataclass(frozen=True)
class Thread:
    """One comment on the PR and the review items it carries."""

    ids: tuple[str, ...]
    path: str
    where: Where
    line: int | None = None  # REGION and LINE: the comment's (last) line
    start_line: int | None = None  # REGION: the region's first line
    note: str = ""  # why it sits where it does, for people (empty for a plain region)


def place(items: Sequence[Json], diff: PrDiff, *, file_comments: int,
          whole: Collection[str] = ()) -> list[Thread]:
    """A thread for every item, in item order; at most ``file_comments`` file-level ones.

    File-level comments cost one request each (the review carries all the others), so
    beyond the budget an item that would get one has no thread (:attr:`Where.NONE`).

    The conflict regions of a path in ``whole`` (a lockfile, a generated file, a file with
    very many regions: :mod:`bot.engine.generated`) share ONE thread, at the place of the
    first: a file-level comment, or where the budget is spent, a comment on the first
    region's first line; never a thread per region.
    """
    threads: list[Thread] = []
    by_file: dict[str, int] = {}  # one file-level comment per path carries all its items
    shared: dict[str, tuple[int, list[str]]] = {}  # each path in ``whole``: its thread, ids
    for item in items:
        if item.get("kind") == "conflict" and item["path"] in whole:
            path = item["path"]
            if path in shared:
                shared[path][1].append(item["id"])
                continue
            t = _place_whole(item, diff, room=len(by_file) < file_comments)
            if t.where is Where.FILE:
                by_file[path] = len(threads)
            shared[path] = (len(threads), [])
            threads.append(t)
            continue
        t = _place_one(item, diff)
        if t.where is not Where.FILE:
            threads.append(t)
        elif t.path in by_file:
            i = by_file[t.path]
            threads[i] = Thread((*threads[i].ids, *t.ids), t.path, Where.FILE, note=t.note)
        elif len(by_file) < file_comments:
            by_file[t.path] = len(threads)
            threads.append(t)
        else:
            threads.append(Thread(t.ids, t.path, Where.NONE, note=(
                f"`{t.path}` has no line in the PR diff, and a file-level comment would "
                "go over the write budget of this sync PR")))
    for k, more in shared.values():
        if more:
            threads[k] = replace(threads[k], ids=(*threads[k].ids, *more))
    return threads


def _place_whole(item: Json, diff: PrDiff, *, room: bool) -> Thread:
    """The one thread of a file whose regions share it, placed by its first region."""
    ids, path = (item["id"],), item["path"]
    f = diff.files.get(path)
    if f is None:
        return _place_one(item, diff)
    hunks = f.right_hunks
    if room:
        return Thread(ids, path, Where.FILE, note="" if hunks else (
            f"The PR diff shows `{path}` with no line GitHub can show, so this comment is "
            "on the whole file."))
    if not hunks:
        return Thread(ids, path, Where.NONE, note=(
            f"`{path}` has no line in the PR diff, and a file-level comment would go over "
            "the write budget of this sync PR"))
    start = int(item.get("start_line") or hunks[0].first)
    line = start if any(h.has(start, start) for h in hunks) else hunks[0].first
    return Thread(ids, path, Where.LINE, line=line, note=(
        f"One comment for the whole of `{path}`, on its first conflict region (L{line}): "
        "its conflict regions are answered together."))


def _place_one(item: Json, diff: PrDiff) -> Thread:
    ids, path = (item["id"],), item["path"]
    f = diff.files.get(path)
    if f is None:
        return Thread(ids, path, Where.NONE, note=(
            f"`{path}` is not changed by this PR (commit 1 keeps the fork's version), so "
            "GitHub has no place for a thread on it"))
    hunks = f.right_hunks
    if not hunks:
        why = "a binary file" if f.binary else "no line GitHub can show"
        return Thread(ids, path, Where.FILE, note=f"The PR diff shows `{path}` as {why}, "
                      "so this comment is on the whole file.")
    start, end = item.get("start_line"), item.get("end_line")
    if start is None:
        return Thread(ids, path, Where.LINE, line=hunks[0].first, note=(
            "This item is about the whole file, so it sits on the file's first line in "
            "the PR diff."))
    end = end if item.get("kind") == "conflict" and end is not None else start
    if end > start and any(h.has(start, end) for h in hunks):
        return Thread(ids, path, Where.REGION, line=end, start_line=start)
    touched = [h for h in hunks if h.touches(start, end)]
    if touched and end > start:
        n = len(touched)
        spans = f"spans {n} hunks of the PR diff" if n > 1 else \
            "is not wholly inside one hunk of the PR diff"
        return Thread(ids, path, Where.LINE, line=max(start, touched[0].first), note=(
            f"This region (L{start}–{end}) {spans}, and GitHub takes a suggestion only "
            "inside one hunk, so there is no one-click button: this comment sits on its "
            "first line."))
    if touched:
        return Thread(ids, path, Where.LINE, line=start)
    nearest = min(hunks, key=lambda h: min(abs(h.first - start), abs(h.last - start)))
    line = nearest.first if abs(nearest.first - start) <= abs(nearest.last - start) \
        else nearest.last
    return Thread(ids, path, Where.LINE, line=line, note=(
        f"L{start} is not part of the PR diff, so this comment sits on the nearest line "
        f"that is (L{line})."))
