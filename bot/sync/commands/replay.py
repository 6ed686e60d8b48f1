"""Carrying people's work from the old sync branch onto a new commit 1 (git only, in threads).

``/sync extend`` and ``/sync refresh`` make a new merge. Before that,
:func:`record_branch` records every conflict region people resolved (``bot.engine.rerere``);
after it, :func:`replay_onto` replays those resolutions and carries people's other edits
over with ``git merge-file``, so no human work is lost.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

from bot.engine import rerere
from bot.engine.git import Git
from bot.engine.markers import MARKER_SIZE, Verdict
from bot.engine.markers import scan as scan_markers
from bot.engine.model import marker_sizes
from bot.engine.workflows import is_workflow
from bot.sync.commands.gitops import decode, encode, read_bytes, read_many, read_text


@dataclass
class Recorded:
    """What :func:`record_branch` found: resolutions by hunk key, and what it could not record."""

    resolutions: dict[str, str] = field(default_factory=dict)
    # hunk key -> the region it resolved ({"path", "ours", "base", "theirs"})
    hunks: dict[str, dict[str, str]] = field(default_factory=dict)
    pending: int = 0
    unplaced: list[str] = field(default_factory=list)  # paths


def record_branch(git: Git, plan_json: dict[str, Any], commit: str, head: str) -> Recorded:
    """Every resolution people made on the branch: commit 1's file vs the head's, per file."""
    recorded = Recorded()
    paths = [f["path"] for f in plan_json.get("files", [])
             if any(i.get("start_line") is not None for i in f.get("review_items", []))]
    before = read_many(git, commit, paths)
    after = read_many(git, head, paths)
    sizes = marker_sizes(plan_json)  # commit 1's, so its regions are read as written
    for path in paths:
        old, new = before.get(path), after.get(path)
        if old is None or new is None:
            continue
        found = rerere.record_file(old, new, path=path, size=sizes.get(path, MARKER_SIZE))
        recorded.resolutions.update(found.resolutions)
        recorded.hunks.update({key: {"path": path, "ours": r.ours, "base": r.base,
                                     "theirs": r.theirs} for key, r in found.regions.items()})
        recorded.pending += found.pending
        if found.unplaced:
            recorded.unplaced.append(path)
    return recorded


@dataclass
class Replayed:
    """What :func:`replay_onto` changed on top of the new commit 1.

    Each path people changed is in at most one of ``carried``, ``partly`` and
    ``not_carried``, so the reply names it once.
    """

    files: dict[str, str | None] = field(default_factory=dict)
    replayed: int = 0
    carried: list[str] = field(default_factory=list)  # paths with other edits carried over
    partly: list[str] = field(default_factory=list)  # some edits overlapped the new merge
    not_carried: list[str] = field(default_factory=list)  # none of the edits could be carried
    # new hunk key -> a resolution of the same spot that the new merge changed again
    earlier: dict[str, rerere.Earlier] = field(default_factory=dict)
    changed_again: dict[str, int] = field(default_factory=dict)  # path -> such regions
    # workflow files people changed, not carried: without the Workflows permission GitHub
    # refuses a push that changes them (their commits keep the edit)
    workflow_files: list[str] = field(default_factory=list)
    kept_history: bool = False  # the old head is a parent of the new head


def replay_onto(git: Git, plan_json: dict[str, Any], commit1: str,
                resolutions: dict[str, str], *, old_commit: str, old_head: str,
                hunks: dict[str, dict[str, str]] | None = None,
                old_sizes: dict[str, int] | None = None, workflows: bool = True) -> Replayed:
    """Replay recorded resolutions onto the new commit 1, and carry over other edits.

    A region whose hunk was resolved before gets that resolution back. A region the new
    merge changed again stays whole, and the resolution of the same spot (``hunks``) is
    kept in ``earlier`` to show beside it. Other edits (outside the resolved regions, or
    to clean files) are carried with ``git merge-file``: base is the old commit 1 *with
    the recorded resolutions in place*, so a resolution is never carried as an edit (that
    is how a deleted ``<<<<<<<`` line once left a broken region behind, issue 11); ours
    is the new merge with the resolutions replayed, theirs the old head. Where an edit
    overlaps a change of the new merge, the new merge wins and the path is reported; a
    result that would break a region is never kept.
    """
    out = Replayed()
    paths = [f["path"] for f in plan_json.get("files", [])]
    sizes = marker_sizes(plan_json)  # the new merge's
    new_texts = read_many(git, commit1, paths)
    replayed: dict[str, str | None] = {}
    by_path: dict[str, list[rerere.Hunk]] = {}
    for key, h in (hunks or {}).items():
        if key in resolutions:
            by_path.setdefault(h["path"], []).append(
                rerere.Hunk(h["ours"], h["base"], h["theirs"], resolutions[key]))
    for path, text in new_texts.items():
        size = sizes.get(path, MARKER_SIZE)
        if text is None or not rerere.has_markers(text, size):
            continue
        new_text, count = rerere.replay(text, resolutions, path=path, size=size)
        if count:
            replayed[path] = new_text
            out.replayed += count
        _find_earlier(new_text, path, size, by_path.get(path, []), out)
    changed = [p for p in git.text("diff", "--name-only", "-z", "--no-renames", old_commit,
                                   old_head, "--").split("\0") if p]
    for path in changed:
        if not workflows and is_workflow(path):
            out.workflow_files.append(path)
            continue
        _carry(git, path, resolutions, old_commit, old_head, commit1, replayed,
               (old_sizes or {}).get(path, MARKER_SIZE), sizes.get(path, MARKER_SIZE), out)
    out.files = replayed
    return out


def _find_earlier(text: str, path: str, size: int, hunks: list[rerere.Hunk],
                  out: Replayed) -> None:
    """For each region left whole, the earlier resolution of the same spot, if any."""
    left = list(hunks)
    for region in rerere.parse_regions(text, size):
        found = rerere.earlier_resolution(region, left)
        if found is None:
            continue
        hunk, earlier = found
        left.remove(hunk)
        out.earlier[region.key(path)] = earlier
        out.changed_again[path] = out.changed_again.get(path, 0) + 1


def _carry(git: Git, path: str, resolutions: dict[str, str], old_commit: str, old_head: str,
           commit1: str, replayed: dict[str, str | None], old_size: int, size: int,
           out: Replayed) -> None:
    """Carry people's other edits to ``path`` onto the new merge (see :func:`replay_onto`)."""
    base = read_bytes(git, old_commit, path)
    theirs = read_bytes(git, old_head, path)
    current_text = replayed[path] if path in replayed else read_text(git, commit1, path)
    current = encode(current_text) if current_text is not None else None
    if current == theirs:
        return
    resolved_base = base
    if base is not None and b"\0" not in base:
        # The old commit 1 as the people's resolutions left it: only their *other* edits
        # differ from it at the old head.
        text, _ = rerere.replay(decode(base) or "", resolutions, path=path, size=old_size)
        resolved_base = encode(text)
    if current in (base, resolved_base):
        # The new merge left this path as it was: people's version stands, even deleted.
        replayed[path] = decode(theirs)
        out.carried.append(path)
        return
    merged, clean = _merge_file(git, current, resolved_base, theirs)
    if merged is None:  # deleted on one side and changed on the other, or binary
        out.not_carried.append(path)
        return
    if merged == current:
        if not clean:
            out.not_carried.append(path)
        return
    if not _keeps_regions(decode(merged) or "", current_text or "", size):
        out.not_carried.append(path)  # it would break a region: the new merge stands
        return
    replayed[path] = decode(merged)
    (out.carried if clean else out.partly).append(path)


def _keeps_regions(merged: str, current: str, size: int) -> bool:
    """As many whole regions as the new merge has, and no marker line of it left alone.

    A region people edited inside stays a region (the gate then asks about it); a
    region missing a marker line is what must never be pushed.
    """
    before = scan_markers(current, size, reference=current)
    after = scan_markers(merged, size, reference=current)
    return (len(after.regions) == len(before.regions)
            and not any(o.verdict is Verdict.MARKER for o in after.orphans))


def _merge_file(git: Git, current: bytes | None, base: bytes | None,
                other: bytes | None) -> tuple[bytes | None, bool]:
    """git merge-file (the new merge wins where both sides changed); None if not textual."""
    if current is None or other is None:
        return None, False
    if base is None:
        base = b""
    if b"\0" in current or b"\0" in other or b"\0" in base:
        return None, False
    with tempfile.TemporaryDirectory(prefix="forksync-carry-") as tmp:
        names = []
        for name, data in (("current", current), ("base", base), ("other", other)):
            path = os.path.join(tmp, name)
            with open(path, "wb") as fh:
                fh.write(data)
            names.append(path)
        counted = git.run_proc("merge-file", "-p", *names)
        if counted.returncode < 0 or counted.returncode > 127:
            return None, False
        if counted.returncode == 0:
            return counted.stdout, True
        favoured = git.run_proc("merge-file", "-p", "--ours", *names)
        if favoured.returncode != 0 and favoured.returncode > 127:
            return None, False
        return favoured.stdout, False


__all__ = ["Recorded", "Replayed", "record_branch", "replay_onto"]
