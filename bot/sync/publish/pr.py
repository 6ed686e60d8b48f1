"""Step 4: the window's draft PR, found or created; its title and the bot's part of its body.

Owns ``sync.pr``. The PR is found by the state, then by its head branch, so a retried
POST whose first try got through finds that PR instead of opening a second one.
"""

from __future__ import annotations

from typing import Any

from gidgethub import BadRequest

from bot.engine.model import conflicts_label
from bot.engine.review import pr_section
from bot.github.client import GitHubClient
from bot.sync.publish.context import RunContext


def done(sync: dict[str, Any]) -> bool:
    return bool(sync.get("pr"))


async def open_pr(run: RunContext, plan_json: dict[str, Any]) -> Any:
    """The sync PR of commit 1 (found, or opened as a draft), remembered in the state."""
    pull = await _find_or_create_pr(run.gh, run.fork, run.repos.fork_branch, run.sync,
                                    plan_json)
    run.sync["pr"] = pull["number"]
    await run.save()
    return pull


def render_pr_body(plan_json: dict[str, Any], sync: dict[str, Any]) -> str:
    """The bot's section of the PR body from the plan and what the state knows now."""
    return pr_section(plan_json, sync)


def _title_stem(plan_json: dict[str, Any]) -> str:
    upstream = plan_json.get("upstream", {}).get("repo", "upstream")
    return f"sync({upstream} {plan_json.get('window_label') or ''}): 3-way merge"


def pr_title(plan_json: dict[str, Any], open_files: int | None = None) -> str:
    """The PR title: how many conflicted files still need review, worded as commit 1's message.

    ``open_files`` is counted by the rescan; None means "as at commit 1".
    """
    if open_files is None:
        open_files = plan_json.get("summary", {}).get("status", {}).get("conflict", 0)
        status = f" [{conflicts_label(open_files)}]" if open_files else ""
    elif open_files:
        status = f" [{conflicts_label(open_files)}]"
    else:
        status = " [conflicts resolved]"
    return f"{_title_stem(plan_json)}{status}"[:256]


def retitle(plan_json: dict[str, Any], old_title: str, open_files: int) -> str | None:
    """The new title, or None to leave it: people's own titles are never rewritten."""
    if not old_title.startswith(_title_stem(plan_json)):
        return None
    title = pr_title(plan_json, open_files)
    return title if title != old_title else None


async def _find_or_create_pr(gh: GitHubClient, fork: str, base: str, sync: dict[str, Any],
                             plan_json: dict[str, Any]) -> Any:
    if sync.get("pr"):
        pull = await gh.getitem(f"/repos/{fork}/pulls/{sync['pr']}")
        if pull.get("state") == "open":
            return pull
    owner = fork.split("/", 1)[0]
    url = f"/repos/{fork}/pulls?state=open&head={owner}:{sync['branch']}"
    async for pull in gh.getiter(url):
        return pull
    try:
        return await gh.post(f"/repos/{fork}/pulls", data={
            "title": pr_title(plan_json), "head": sync["branch"], "base": base,
            "body": render_pr_body(plan_json, sync), "draft": True,
            "maintainer_can_modify": True})
    except BadRequest as exc:
        # "A pull request already exists": a retried POST whose first try got through.
        if exc.status_code != 422:
            raise
        async for pull in gh.getiter(url):
            return pull
        raise
