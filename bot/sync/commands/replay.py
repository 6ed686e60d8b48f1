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
from bot.engine.markers import MARKER_SIZE
from bot.engine.model import marker_sizes
from bot.sync.commands.gitops import decode, encode, read_bytes, read_many, read_text


@dataclass
class Recorded:
    """What :func:`record_branch` found: resolutions by hunk key, and what it could not record."""

    resolutions: dict[str, str] = field(default_factory=dict)
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
        recorded.pending += found.pending
        if found.unplaced:
            recorded.unplaced.append(path)
    return recorded


@dataclass
class Replayed:
    """What :func:`replay_onto` changed on top of the new commit 1."""

    files: dict[str, str | None] = field(default_factory=dict)
    replayed: int = 0
    carried: list[str] = field(default_factory=list)  # paths with other edits carried over
    not_carried: list[str] = field(default_factory=list)  # paths whose edits overlapped
    kept_history: bool = False  # the old head is a parent of the new head


def replay_onto(git: Git, plan_json: dict[str, Any], commit1: str,
                resolutions: dict[str, str], *, old_commit: str, old_head: str) -> Replayed:
    """Replay recorded resolutions onto the new commit 1, and carry over other edits.

    Other edits (outside marker regions, or to clean files) are the changes from the old
    commit 1 to the old head; each changed file is merged 3-way (base: old commit 1,
    ours: the new merge with resolutions replayed, theirs: the old head). Where an edit
    overlaps a change of the new merge, the new merge wins and the path is reported.
    """
    out = Replayed()
    paths = [f["path"] for f in plan_json.get("files", [])]
    sizes = marker_sizes(plan_json)  # the new merge's
    new_texts = read_many(git, commit1, paths)
    replayed: dict[str, str | None] = {}
    for path, text in new_texts.items():
        size = sizes.get(path, MARKER_SIZE)
        if text is None or not rerere.has_markers(text, size):
            continue
        new_text, count = rerere.replay(text, resolutions, path=path, size=size)
        if count:
            replayed[path] = new_text
            out.replayed += count
    changed = [p for p in git.text("diff", "--name-only", "-z", "--no-renames", old_commit,
                                   old_head, "--").split("\0") if p]
    for path in changed:
        base = read_bytes(git, old_commit, path)
        theirs = read_bytes(git, old_head, path)
        current_text = replayed[path] if path in replayed else read_text(git, commit1, path)
        current = encode(current_text) if current_text is not None else None
        if current == theirs:
            continue
        if current == base:
            # The new merge left this path as it was: people's version stands, even deleted.
            replayed[path] = decode(theirs)
            out.carried.append(path)
            continue
        merged, clean = _merge_file(git, current, base, theirs)
        if merged is None:  # deleted on one side and changed on the other, or binary
            out.not_carried.append(path)
            continue
        if merged != current:
            replayed[path] = decode(merged)
            out.carried.append(path)
        if not clean:
            out.not_carried.append(path)
    out.files = replayed
    return out


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
