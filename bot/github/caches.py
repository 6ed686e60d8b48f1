"""The git caches on disk: which a job uses, their size, evicting and repacking them.

Two kinds of repository are caches: the partial clones of forks and upstreams
(``<data>/git/*.git``, made by ``remote.ensure_mirror``) and the engine's scratch
repositories (``<data>/work/work/*.git``, whose ``objects/info/alternates`` name the
fork's cache first). Everything in them can be fetched or computed again, so any of
them may be deleted, but never while a job uses it:

- a job holds a **shared lock** on each cache it opens, from the first use to its end
  (:func:`job_scope`, :func:`use`); a scratch repository counts as used with its fork's
  cache;
- eviction and ``git gc`` take the **exclusive lock** without waiting, and pass over a
  cache that is in use;
- a cache is deleted by renaming it into ``.trash/`` first, so no one ever opens a
  half-deleted repository.

Locks are ``flock`` on files in ``.locks/`` beside the caches, so they hold across
the processes of one machine, and die with a killed process.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from bot.engine.git import Git, TreeEntry, TreeWriter

USED_STAMP = "forksync-used"  # its mtime: when a job last opened the cache
LOCKS = ".locks"
TRASH = ".trash"
KEEP_PREFIX = "refs/forksync/keep/"
_scope: ContextVar[_Scope | None] = ContextVar("forksync_cache_scope", default=None)


class _Scope:
    """The caches one job holds, released together at its end."""

    def __init__(self, mend: bool) -> None:
        self.held: dict[Path, IO[str]] = {}
        self.mend = mend

    def close(self) -> None:
        for fh in self.held.values():
            fh.close()  # closing the file releases its flock
        self.held.clear()


@contextlib.contextmanager
def job_scope(*, mend: bool = False) -> Iterator[None]:
    """Caches opened inside (threads started with ``asyncio.to_thread`` too) stay in use
    until the end of the block. ``mend``: a cache found broken may be made afresh."""
    scope = _Scope(mend)
    token = _scope.set(scope)
    try:
        yield
    finally:
        _scope.reset(token)
        scope.close()


def may_mend() -> bool:
    """Whether the running job may have a broken cache made afresh (once per job)."""
    scope = _scope.get()
    return scope is not None and scope.mend


def lock_file(git_dir: str | Path) -> Path:
    path = Path(git_dir)
    return path.parent / LOCKS / f"{path.name}.lock"


def use(git_dir: str | Path) -> None:
    """Mark ``git_dir`` as used by the running job (shared lock; waits for a running gc)."""
    path = Path(git_dir)
    scope = _scope.get()
    if scope is not None and path not in scope.held:
        lock = lock_file(path)
        lock.parent.mkdir(parents=True, exist_ok=True)
        fh = open(lock, "a")  # noqa: SIM115 - held until the job's scope ends
        fcntl.flock(fh, fcntl.LOCK_SH)
        scope.held[path] = fh
    stamp = path / USED_STAMP
    with contextlib.suppress(OSError):  # a full disk must not stop a job here
        stamp.touch()


@contextlib.contextmanager
def exclusive(git_dir: str | Path) -> Iterator[bool]:
    """The exclusive lock of ``git_dir`` if no job uses it (never waits); yields whether."""
    lock = lock_file(git_dir)
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@dataclass(frozen=True)
class Cache:
    path: Path
    bytes: int  # disk space used (allocated blocks)
    last_used: float
    owner: Path  # whose lock says it is in use: itself, or a scratch repository's fork cache


def disk_bytes(path: Path) -> int:
    """Disk space used under ``path`` (allocated blocks, so sparse or small files count right)."""
    total = 0
    stack = [path]
    while stack:
        current = stack.pop()
        with contextlib.suppress(OSError), os.scandir(current) as it:
            for entry in it:
                with contextlib.suppress(OSError):
                    st = entry.stat(follow_symlinks=False)
                    total += st.st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
    return total


def _last_used(path: Path) -> float:
    for candidate in (path / USED_STAMP, path):
        with contextlib.suppress(OSError):
            return candidate.stat().st_mtime
    return 0.0


def _owner(path: Path) -> Path:
    """A scratch repository belongs to the fork cache its first alternate names."""
    alternates = path / "objects" / "info" / "alternates"
    with contextlib.suppress(OSError):
        first = alternates.read_text().splitlines()[0].strip()
        if first:
            return Path(first).parent
    return path


def caches(*roots: Path) -> list[Cache]:
    """Every cache repository under ``roots``, with its size and when it was last used."""
    found = []
    for root in roots:
        with contextlib.suppress(OSError):
            for path in sorted(root.glob("*.git")):
                found.append(Cache(path, disk_bytes(path), _last_used(path), _owner(path)))
    return found


def total_bytes(*roots: Path) -> int:
    return sum(c.bytes for c in caches(*roots))


def gauges(roots: Sequence[Path], max_bytes: int | None
           ) -> list[tuple[str, dict[str, str], float]]:
    """The caches' disk use for ``/metrics`` (and their bound, when there is one)."""
    found = caches(*roots)
    out: list[tuple[str, dict[str, str], float]] = [
        ("forksync_cache_bytes", {}, float(sum(c.bytes for c in found))),
        ("forksync_cache_repositories", {}, float(len(found)))]
    if max_bytes is not None:
        out.append(("forksync_cache_max_bytes", {}, float(max_bytes)))
    return out


def remove(git_dir: str | Path) -> None:
    """Delete a cache: renamed into ``.trash`` first (atomic), then removed."""
    path = Path(git_dir)
    trash = path.parent / TRASH
    trash.mkdir(parents=True, exist_ok=True)
    target = trash / f"{path.name}.{uuid.uuid4().hex[:8]}"
    with contextlib.suppress(FileNotFoundError):
        os.replace(path, target)
    empty_trash(path.parent)


def empty_trash(root: Path) -> None:
    """Finish deletions a killed process left half done."""
    with contextlib.suppress(OSError):
        for leftover in (root / TRASH).iterdir():
            shutil.rmtree(leftover, ignore_errors=True)


@dataclass(frozen=True)
class Eviction:
    before: int
    after: int
    evicted: list[str]
    busy: list[str]  # over the limit, but in use: left alone


def evict(max_bytes: int, *roots: Path) -> Eviction:
    """Delete the least recently used caches until they fit in ``max_bytes``.

    A cache a job uses is passed over. Deleting a fork's cache deletes the scratch
    repositories that borrow its objects too (they would be broken without it).
    """
    found = caches(*roots)
    before = total = sum(c.bytes for c in found)
    evicted: list[str] = []
    busy: list[str] = []
    gone: set[Path] = set()
    for cache in sorted(found, key=lambda c: c.last_used):
        if total <= max_bytes:
            break
        if cache.path in gone:
            continue
        with exclusive(cache.owner) as free:
            if not free:
                busy.append(str(cache.path))
                continue
            for victim in [cache] + [c for c in found if c.owner == cache.path
                                     and c.path != cache.path]:
                if victim.path not in gone:
                    remove(victim.path)
                    gone.add(victim.path)
                    total -= victim.bytes
                    evicted.append(str(victim.path))
    return Eviction(before, total, evicted, busy)


@dataclass(frozen=True)
class Repacked:
    path: str
    before: int
    after: int


def repack(cache: Cache, keep: Mapping[str, str], *, blobs: Sequence[str] = (),
           prune: str = "1.hour.ago", timeout: float | None = None) -> Repacked | None:
    """``git gc`` on a cache no job uses (None if in use), keeping ``keep`` and ``blobs``.

    ``keep`` (ref -> object) and ``blobs`` name what open sync PRs need that no branch
    reaches any more: commit 1 and their heads, the blobs of whole-file decisions;
    those refs replace the previous ones. A partial clone is repacked with a promisor
    remote named, as its fetches name one: the blobs and trees fetched so far stay, and
    git knows the others are not lost but not fetched.
    """
    with exclusive(cache.owner) as free:
        if not free:
            return None
        before = disk_bytes(cache.path)
        git = Git(cache.path, timeout=timeout)
        refs = {ref: oid for ref, oid in keep.items() if oid}
        missing = set(git.missing_objects(list(refs.values()) + list(blobs)))
        refs = {ref: oid for ref, oid in refs.items() if oid not in missing}
        present = sorted(set(blobs) - missing)
        if present:  # a tree of them, which a ref can keep
            with TreeWriter(git) as writer:
                refs[KEEP_PREFIX + "blobs"] = writer.write(
                    TreeEntry("100644", oid, oid) for oid in present)
        lines = [f"delete {ref}\n" for ref in _refs(git, KEEP_PREFIX) if ref not in refs]
        lines += [f"update {ref} {oid}\n" for ref, oid in refs.items()]
        if lines:
            git.run("update-ref", "--stdin", input="".join(lines).encode())
        # gc.auto=0 is for the jobs; here the repository is ours alone. A bitmap needs
        # every object a pack reaches, which a partial clone does not have.
        git.run("-c", "remote.origin.promisor=true", "-c", "remote.origin.url=file:///dev/null",
                "-c", "repack.writeBitmaps=false", "gc", "--quiet", f"--prune={prune}")
        return Repacked(str(cache.path), before, disk_bytes(cache.path))


def _refs(git: Git, prefix: str) -> list[str]:
    return git.text("for-each-ref", "--format=%(refname)", prefix).split()


def rebuild(git_dir: str | Path) -> bool:
    """Delete a broken cache so that the next use makes it afresh (False: in use)."""
    with exclusive(git_dir) as free:
        if free:
            remove(git_dir)
        return free


def age_seconds(path: Path, now: float | None = None) -> float:
    """Seconds since ``path`` was modified (inf if it does not exist)."""
    try:
        return (now or time.time()) - path.stat().st_mtime
    except OSError:
        return float("inf")


__all__ = ["Cache", "Eviction", "Repacked", "age_seconds", "caches", "disk_bytes",
           "empty_trash", "evict", "exclusive", "gauges", "job_scope", "lock_file", "may_mend",
           "rebuild", "remove", "repack", "total_bytes", "use"]
