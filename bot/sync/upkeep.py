"""The caches' upkeep: within ``FORKSYNC_CACHE_MAX_GB``, repacked, and mended when broken.

- Every job that reads the caches runs inside :func:`cached`: the caches it opens stay
  in use (eviction and ``git gc`` pass over them) until it ends, and a cache it finds
  broken is deleted and the job run once more (every job is safe to run twice); the
  next use makes the cache afresh.
- After such a job, the ``caches`` job is queued (at most once per few minutes) when
  the caches are over the limit or were last repacked longer ago than
  ``FORKSYNC_CACHE_GC_HOURS``. It has one key, so one runs at a time, whichever
  replica claims it: it evicts the least recently used caches until they fit, then
  runs ``git gc`` on each one no job uses, keeping what open sync PRs need (commit 1,
  the heads of their branches, the blobs of their whole-file decisions).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bot.app.context import JobContext
from bot.app.store import Store
from bot.errors import ForksyncError
from bot.github import caches, remote
from bot.sync.state import STATE_PREFIX, load_plan

log = logging.getLogger(__name__)

CACHES_JOB = "caches"
CACHES_KEY = "forksync:caches"
GC_STAMP = ".gc-done"  # in the cache directory; its mtime: the last repack
QUEUE_EVERY = 300.0  # seconds: the upkeep is queued at most this often

JobFn = Callable[[JobContext, dict[str, Any]], Awaitable[None]]


def roots(ctx: JobContext) -> tuple[Path, Path]:
    """Where the caches are: the mirrors, and the engine's scratch repositories."""
    return ctx.settings.cache_roots


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
        await queue_upkeep(ctx)

    return run


async def queue_upkeep(ctx: JobContext, now: float | None = None) -> int | None:
    """Queue the ``caches`` job if the caches are over the limit or due a repack."""
    now = time.time() if now is None else now
    settings = ctx.settings
    due = (settings.cache_gc_hours > 0 and caches.age_seconds(
        settings.cache_dir / GC_STAMP, now) > settings.cache_gc_hours * 3600)
    if not due and settings.cache_max_bytes is not None:
        due = await asyncio.to_thread(caches.total_bytes, *roots(ctx)) > settings.cache_max_bytes
    if not due:
        return None
    return await ctx.enqueue(CACHES_JOB, CACHES_KEY, {},
                             dedup=f"{CACHES_JOB}:{int(now // QUEUE_EVERY)}")


async def caches_job(ctx: JobContext, payload: dict[str, Any]) -> None:
    """Job ``"caches"``: evict down to the limit, then repack what is due."""
    settings = ctx.settings
    if settings.cache_max_bytes is not None:
        ev = await asyncio.to_thread(caches.evict, settings.cache_max_bytes, *roots(ctx))
        if ev.evicted or ev.busy:
            log.info("caches: %d MB -> %d MB; evicted %s; in use, kept: %s", ev.before >> 20,
                     ev.after >> 20, ", ".join(ev.evicted) or "none",
                     ", ".join(ev.busy) or "none")
    stamp = settings.cache_dir / GC_STAMP
    if settings.cache_gc_hours <= 0 or caches.age_seconds(stamp) <= settings.cache_gc_hours * 3600:
        return
    keep = await asyncio.to_thread(open_pr_objects, ctx.store, settings.cache_dir)
    busy = 0
    for cache in await asyncio.to_thread(caches.caches, *roots(ctx)):
        # A scratch repository keeps what its fork's cache keeps (it holds the translated
        # versions of whole-file decisions).
        wanted = keep.get(cache.owner.name, {})
        try:
            done = await asyncio.to_thread(
                caches.repack, cache, wanted.get("refs", {}), blobs=wanted.get("blobs", []),
                timeout=settings.git_timeout_seconds)
        except ForksyncError as exc:  # one cache's trouble is not the others'
            log.warning("caches: cannot repack %s: %s", cache.path, exc)
            continue
        busy += done is None
    if not busy:  # the ones in use now get their turn next time
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.touch()


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
            plan = load_plan(sync)
        except ForksyncError:
            plan = {}
        for f in plan.get("files", []):
            for item in f.get("review_items", []):
                for side in (item.get("sides") or {}).values():
                    if side and side.get("mode") != "160000" and side.get("oid"):
                        blobs.append(str(side["oid"]))
        out[name] = {"refs": refs, "blobs": sorted(set(blobs))}
    return out


__all__ = ["CACHES_JOB", "CACHES_KEY", "GC_STAMP", "cached", "caches_job", "open_pr_objects",
           "queue_upkeep", "roots"]
