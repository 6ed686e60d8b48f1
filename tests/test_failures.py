"""A failed job says why: its real cause in ``last_error``, logged once, and when it retries.

On the real server (``bot.app.server.serve``) with webhook handlers that fail the
way real ones do: a ``ForksyncError`` a person can act on, and a bug.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from gidgethub import routing, sansio

from bot.app.context import JobContext
from bot.app.settings import Settings
from bot.app.store import store_for
from bot.errors import GitError
from tests.serving import PUSH_BODY, Opener, exchange, raw_post, serve_here, settings_for


@pytest.fixture
def base(tmp_path: Path) -> Settings:
    return settings_for(tmp_path)


@pytest.fixture
async def start(base: Settings) -> AsyncIterator[Opener]:
    async with serve_here(base) as opener:
        yield opener


GIT_FAILURE = "fetching from http://git.example/o/fork.git: fatal: repository not found"


def failing_router() -> routing.Router:
    router = routing.Router()

    @router.register("push")
    async def fetch_fork(event: sansio.Event, ctx: JobContext) -> None:
        raise GitError(GIT_FAILURE)

    @router.register("push")
    async def read_installation(event: sansio.Event, ctx: JobContext) -> None:
        event.data["installation"]["account"]  # a bug: the key is missing

    @router.register("push")
    async def works(event: sansio.Event, ctx: JobContext) -> None:
        pass

    return router


async def test_a_failed_attempt_records_the_real_cause_logs_it_once_and_says_when_it_retries(
        start: Opener, base: Settings, caplog: Any) -> None:
    caplog.set_level(logging.INFO)
    port = await start(router=failing_router(), retry_backoff_seconds=40.0)
    assert await exchange(port, raw_post(PUSH_BODY)) == 202
    store = store_for(base)
    try:
        deadline = time.monotonic() + 20
        while not (jobs := [j for j in store.list_jobs() if j.attempts >= 1
                            and store.job_error(j.id)]):
            assert time.monotonic() < deadline, caplog.text
            await asyncio.sleep(0.05)
        (job,) = jobs
        error = store.job_error(job.id) or ""
        retry_at = store.get_job(job.id).ready_at  # type: ignore[union-attr]
    finally:
        store.close()
    # The causes, not "HandlersFailed: 2 of 3 handler(s) failed".
    assert GIT_FAILURE in error and "KeyError: 'account'" in error, error
    assert "HandlersFailed" not in error
    await asyncio.sleep(0.2)
    # One record for the failed attempt, with one traceback (the bug's, not the GitError's).
    (failed,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert f"job {job.id} " in failed.getMessage()
    assert failed.exc_info is not None and failed.exc_info[0] is KeyError
    assert GIT_FAILURE in failed.getMessage() and "KeyError: 'account'" in failed.getMessage()
    assert caplog.text.count("Traceback") == 1
    # The delay before the retry, not how long the attempt took.
    delay = float(re.search(r"retry in (\d+)s", failed.getMessage()).group(1))  # type: ignore[union-attr]
    assert 15 <= delay <= 40 and abs(delay - (retry_at - time.time())) < 5, failed.getMessage()
