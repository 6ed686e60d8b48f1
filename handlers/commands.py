"""Webhook handlers: ``/sync ...`` commands in comments on a sync PR become a ``"command"`` job.

Commands come as comments in the PR's conversation (``issue_comment``) or as replies in
a review thread (``pull_request_review_comment``), where the bot's suggestion comments
invite ``/sync answer Qn ...``. The handlers only decide whether a comment is for us;
the job (``bot.sync.commands.jobs``) checks permission, runs the commands, reacts and replies.
"""

from __future__ import annotations

import asyncio
from typing import Any

from gidgethub import routing, sansio

from bot.app.context import JobContext
from bot.github.client import get_or_none
from bot.sync.commands.jobs import COMMAND_JOB
from bot.sync.commands.parse import command_lines
from bot.sync.commands.request import REVIEW_COMMENT, CommandRequest
from bot.sync.state import is_sync_branch, load_fork_state

router = routing.Router()


def command_dedup(request: CommandRequest) -> str:
    """One job per comment, however often GitHub delivers it."""
    return f"{COMMAND_JOB}:{request.fork}:{request.key}"


@router.register("issue_comment", action="created")
async def comment_created(event: sansio.Event, ctx: JobContext) -> None:
    data = event.data
    comment, issue = data["comment"], data["issue"]
    if _by_bot(data) or "pull_request" not in issue:
        return
    body = comment.get("body") or ""
    if not command_lines(body):
        return
    fork = data["repository"]["full_name"]
    number = int(issue["number"])
    if not await _is_sync_pr(ctx, fork, number):
        return
    installation = (data.get("installation") or {}).get("id", ctx.installation_id)
    request = CommandRequest(fork=fork, installation_id=installation, pr=number,
                             comment_id=int(comment["id"]), author=comment["user"]["login"],
                             body=body)
    await ctx.enqueue(COMMAND_JOB, fork, request.to_payload(), command_dedup(request))


@router.register("pull_request_review_comment", action="created")
async def review_comment_created(event: sansio.Event, ctx: JobContext) -> None:
    data = event.data
    comment, pull = data["comment"], data["pull_request"]
    if _by_bot(data) or not _own_sync_branch(pull, data["repository"]["full_name"]):
        return
    body = comment.get("body") or ""
    if not command_lines(body):
        return
    fork = data["repository"]["full_name"]
    installation = (data.get("installation") or {}).get("id", ctx.installation_id)
    request = CommandRequest(fork=fork, installation_id=installation, pr=int(pull["number"]),
                             comment_id=int(comment["id"]), author=comment["user"]["login"],
                             body=body, source=REVIEW_COMMENT,
                             thread_id=int(comment.get("in_reply_to_id") or comment["id"]))
    await ctx.enqueue(COMMAND_JOB, fork, request.to_payload(), command_dedup(request))


def _by_bot(data: dict[str, Any]) -> bool:
    """Our own replies (and other bots) quote commands; they must never run them."""
    return "Bot" in ((data.get("sender") or {}).get("type"),
                     (data["comment"].get("user") or {}).get("type"))


async def _is_sync_pr(ctx: JobContext, fork: str, number: int) -> bool:
    state = await asyncio.to_thread(load_fork_state, ctx.store, fork)
    if (state.get("sync") or {}).get("pr") == number:
        return True
    # The state may not know it (an older sync PR, or state lost): ask for the head branch.
    gh = await ctx.gh_for(ctx.installation_id)
    pull = await get_or_none(gh, f"/repos/{fork}/pulls/{number}")
    return pull is not None and _own_sync_branch(pull, fork)


def _own_sync_branch(pull: dict[str, Any], fork: str) -> bool:
    """The PR's head is a sync branch of the fork itself (not of someone's fork of it)."""
    head = pull.get("head") or {}
    head_repo = (head.get("repo") or {}).get("full_name")
    return is_sync_branch(str(head.get("ref", ""))) and head_repo == fork
