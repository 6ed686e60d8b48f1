"""Step 6: the ``forksync`` check run on commit 1, failing while anything remains.

Owns ``sync.remaining`` and ``sync.head`` (what is open at commit 1, which the
follow-up updates on every push) and ``sync.check_runs[commit]``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from bot.engine.rescan import read_head
from bot.engine.review import one_click_ids
from bot.github.checks import upsert_check_run
from bot.sync.publish.context import RunContext


def done(sync: dict[str, Any]) -> bool:
    return sync["commit"] in sync.get("check_runs", {})


async def put_check(run: RunContext, plan_json: dict[str, Any]) -> None:
    """Find or create the check on commit 1: every conflict region and open decision.

    Commit 1 is scanned like any later head, so the first check and every rescan agree.
    """
    sync = run.sync
    result, _, _ = await asyncio.to_thread(read_head, run.repos.fork_git, plan_json, sync,
                                           sync["commit"])
    remaining = result.remaining
    sync["remaining"] = [r.to_json() for r in remaining]
    sync["head"] = sync["commit"]
    check_id = await upsert_check_run(run.gh, run.fork, sync["commit"], plan_json, remaining,
                                      behind=int(sync.get("behind", 0)),
                                      one_click=one_click_ids(sync))
    sync.setdefault("check_runs", {})[sync["commit"]] = check_id
    await run.save()
