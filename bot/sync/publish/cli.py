"""``forksync sync --publish``: the same publish run from a workflow (Action mode)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from pathlib import Path
from typing import Any

import aiohttp

from bot.app.context import Platform
from bot.app.settings import Settings
from bot.app.store.sqlite import SQLiteStore
from bot.errors import ForksyncError
from bot.sync.publish.context import PublishResult
from bot.sync.publish.run import publish_sync


def publish_from_cli(args: Any) -> int:
    """``forksync sync --publish`` in a workflow: token mode, the fork is GITHUB_REPOSITORY."""
    fork = os.environ.get("GITHUB_REPOSITORY", "").strip()
    if not fork:
        raise ForksyncError("GITHUB_REPOSITORY: --publish needs the fork as owner/repo "
                            "(GitHub Actions sets it)")
    settings = Settings.from_env(os.environ)
    if not os.environ.get("FORKSYNC_DATA_DIR"):
        settings = dataclasses.replace(settings, data_dir=Path(args.workdir or ".forksync"))

    async def run() -> PublishResult:
        store = SQLiteStore(settings.db_path)
        try:
            async with aiohttp.ClientSession() as session:
                ctx = Platform(settings, store, session).context()
                return await publish_sync(ctx, fork, None, tip=args.to_rev,
                                          cutoff=args.from_rev)
        finally:
            store.close()

    outcome = asyncio.run(run())
    print(f"{outcome.action}: {fork}#{outcome.pr_number or '-'} {outcome.branch or ''} "
          f"({outcome.writes} write requests)")
    return 0 if outcome.action != "refused" else 1
