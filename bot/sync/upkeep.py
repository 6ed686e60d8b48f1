"""The caches' upkeep: within ``FORKSYNC_CACHE_MAX_GB``, repacked, and mended when broken.

- Every job that reads the caches runs inside :func:`cached`: the caches it opens stay
  in use (eviction and ``git gc`` pass over them) until it ends, and a cache it finds
  broken is deleted and the job run once more (every job is safe to run twice); the
  next use makes the cache afresh.
- After such a job, the same process looks after this machine's caches
  (:func:`upkeep`): past the bound it deletes the least recently used until they fit,
  and once every ``FORKSYNC_CACHE_GC_HOURS`` it runs ``git gc`` on each one no job
  uses, keeping what open sync PRs need (commit 1, the heads of their branches, the
  blobs of their whole-file decisions). The caches belong to the machine, not to the
  shared queue: with replicas on several machines each one bounds its own, and on one
  machine a file lock lets one process at a time do it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.app.context import JobContext
from bot.app.settings import Settings
from bot.app.store import Store
from bot.errors import ForksyncError
from bot.github import caches, remote
from bot.sync.state import STATE_PREFIX, load_plan

log = logging.getLogger(__name__)

GC_STAMP = ".gc-done"  # in the cache directory; its mtime: the last repack
UPKEEP_LOCK = ".upkeep"  # in the cache directory: one process of the machine at a time

JobFn = Callable[[JobContext, dict[str, Any]], Awaitable[None]]


def cached(fn: JobFn) -> JobFn:
    """Run a job with the caches it opens held in use; mend a broken cache once."""

    @functools.wraps(fn)
    async def run(ctx: JobContext, payload: dict[str, Any]) -> None:
        for attempt in (1, 2):
            try:
                with caches.job_scope(mend=attempt == 1):
                    await fn(ctx, payload)
                break
            except remote.CacheBroken as exc:
                # Our own locks are released by now: the cache can be deleted unless
                # another job is in it (then the queue retries this one later).
                if attempt == 2 or not await asyncio.to_thread(caches.rebuild, exc.git_dir):
                    raise
                log.warning("%s: deleted, to be fetched afresh; running the job again", exc)
        try:
            await asyncio.to_thread(upkeep, ctx.settings, ctx.store)
        except (ForksyncError, OSError) as exc:  # the job is done; its caches can wait
            log.warning("caches: upkeep failed: %s", exc)

    return run


@dataclass
class Upkeep:
    """What one upkeep did (for the log and the tests)."""

    eviction: caches.Eviction | None = None
    repacked: list[caches.Repacked] = field(default_factory=list)
    busy: int = 0  # caches in use, left for the next repack


def upkeep(settings: Settings, store: Store, now: float | None = None) -> Upkeep | None:
    """This machine's caches: evicted to the bound, repacked when due (None: another
    process of the machine is at it)."""
    now = time.time() if now is None else now
    with caches.exclusive(settings.cache_dir / UPKEEP_LOCK) as mine:
        if not mine:
            return None
        done = Upkeep()
        if settings.cache_max_bytes is not None:
            ev = caches.evict(settings.cache_max_bytes, *settings.cache_roots)
            done.eviction = ev
            if ev.evicted or ev.busy:
                log.info("caches: %d MB -> %d MB; evicted %s; over the bound but in use: %s",
                         ev.before >> 20, ev.after >> 20, ", ".join(ev.evicted) or "none",
                         ", ".join(ev.busy) or "none")
        stamp = settings.cache_dir / GC_STAMP
        if settings.cache_gc_hours <= 0 or \
                caches.age_seconds(stamp, now) <= settings.cache_gc_hours * 3600:
            return done
        keep = open_pr_objects(store, settings.cache_dir)
        for cache in caches.caches(*settings.cache_roots):
            # A scratch repository keeps what its fork's cache keeps (it holds the
            # translated versions of whole-file decisions).
            wanted = keep.get(cache.owner.name, {})
            try:
                result = caches.repack(cache, wanted.get("refs", {}),
                                       blobs=wanted.get("blobs", []),
                                       timeout=settings.git_timeout_seconds)
            except ForksyncError as exc:  # one cache's trouble is not the others'
                log.warning("caches: cannot repack %s: %s", cache.path, exc)
                continue
            if result is None:
                done.busy += 1
            else:
                done.repacked.append(result)
        if not done.busy:  # the ones in use now get their turn next time
            stamp.touch()
        return done


def open_pr_objects(store: Store, cache_dir: Path) -> dict[str, dict[str, Any]]:
    """Per fork cache (by directory name): the objects its open sync PR needs kept."""
    out: dict[str, dict[str, Any]] = {}
    for key in store.state_keys(STATE_PREFIX):
        state = store.get_state(key) or {}
        sync = state.get("sync") or {}
        fork = state.get("fork")
        if not fork or not sync.get("pr") or not sync.get("commit"):
            continue
        name = Path(remote.mirror_path(cache_dir, str(fork))).name
        refs = {f"refs/forksync/keep/{what}": sha for what, sha in (
            ("commit", sync.get("commit")), ("head", sync.get("head")),
            ("pending-commit", (sync.get("pending") or {}).get("commit")),
            ("pending-head", (sync.get("pending") or {}).get("head"))) if sha}
        blobs: list[str] = []
        try:
            plan = load_plan(sync, store)
        except ForksyncError:
            plan = {}
        for f in plan.get("files", []):
            for item in f.get("review_items", []):
                for side in (item.get("sides") or {}).values():
                    if side and side.get("mode") != "160000" and side.get("oid"):
                        blobs.append(str(side["oid"]))
        out[name] = {"refs": refs, "blobs": sorted(set(blobs))}
    return out


__all__ = ["GC_STAMP", "Upkeep", "cached", "open_pr_objects", "upkeep"]
