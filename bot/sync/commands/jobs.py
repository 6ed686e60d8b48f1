"""The ``"command"`` job: run the ``/sync ...`` commands of one PR comment.

Every command comment gets reactions and exactly ONE reply: ``eyes`` when a command
is accepted (the reply says how it ended), ``confused`` when one is wrong (the reply
says what was wrong and the usage), ``-1`` when the author may not run commands (the
reply says so politely, and nothing else is written). That refusal is replied once per
author and PR an hour; within the hour, a refused comment only gets its ``-1``.

Every step is idempotent: a retried job finds its reply, its pushed commit (by the
``Forksync-Command`` trailer) or its half-finished extend (``sync["pending"]``).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from bot.app.context import JobContext, JobHandler
from bot.errors import ForksyncError
from bot.github import remote
from bot.sync.commands.answer import answer
from bot.sync.commands.parse import (
    Answer,
    Command,
    CommandError,
    Extend,
    Help,
    ParsedLine,
    Refresh,
    Resolve,
    StatusCommand,
    help_text,
    parse_comment,
)
from bot.sync.commands.rebuild import rebuild
from bot.sync.commands.request import (
    CommandFailed,
    CommandRequest,
    Outcome,
    refusal_text,
    render_reply,
    reply_marker,
)
from bot.sync.commands.resolve import resolve
from bot.sync.commands.runner import Runner, has_write_access, post_reply, react
from bot.sync.commands.status import status

log = logging.getLogger(__name__)

COMMAND_JOB = "command"


async def run_command(ctx: JobContext, payload: dict[str, Any]) -> None:
    """Job ``"command"``: check permission, run each command, react, and reply once."""
    req = CommandRequest.from_payload(payload)
    parsed = parse_comment(req.body)
    if not parsed:
        return
    gh = await ctx.gh_for(req.installation_id)
    runner = Runner(ctx, gh, req)
    await runner.load()
    if req.key in runner.state.get("commands_done", []):
        return
    if await runner.already_replied():
        await runner.mark_done()
        return
    if not await has_write_access(gh, req.fork, req.author):
        await react(gh, req, "-1")
        # Anyone may comment, and every reply spends the installation's write budget.
        if runner.refusal_reply_due(time.time()):
            await post_reply(gh, req, refusal_text(req.author, req.fork) + "\n\n"
                             + reply_marker(req.comment_id))
            runner.replied_refusal(time.time())
        await runner.mark_done()
        return
    if any(p.ok for p in parsed):
        await react(gh, req, "eyes")
    try:
        outcomes = [await run_line(runner, p) for p in parsed]
    except Exception:
        if not runner.last_attempt():
            raise  # the queue retries (GitHub down, a lost lease, ...)
        # The queue gives up after this: the person must not wait for a reply forever.
        log.exception("%s#%d: command comment %d failed for good", req.fork, req.pr,
                      req.comment_id)
        outcomes = [Outcome(p.line, "This failed unexpectedly, and retrying did not help. "
                            "The forksync logs have the details; please tell the "
                            "maintainers of this App.", ok=p.ok) for p in parsed]
    if not all(o.ok for o in outcomes):
        await react(gh, req, "confused")
    await post_reply(gh, req, render_reply(req.author, outcomes, req.comment_id))
    await runner.mark_done()


JOBS: dict[str, JobHandler] = {COMMAND_JOB: run_command}


async def run_line(runner: Runner, parsed: ParsedLine) -> Outcome:
    """Run one command line; every way it can end becomes what its reply says."""
    if isinstance(parsed.result, CommandError):
        return Outcome(parsed.line, str(parsed.result), ok=False)
    try:
        text = await execute(runner, parsed.result)
    except CommandFailed as exc:
        return Outcome(parsed.line, str(exc), ok=False)
    except remote.CacheBroken:
        raise  # the job deletes the cache and runs again (bot.sync.upkeep.cached)
    except remote.PushRejected as exc:
        return Outcome(parsed.line, "Someone pushed to the sync branch while I was working, "
                       f"so I did not overwrite it ({exc}). Please run the command again.")
    except ForksyncError as exc:
        log.warning("%s#%d: %s failed: %s", runner.req.fork, runner.req.pr, parsed.line, exc)
        return Outcome(parsed.line, f"This failed: {exc}")
    return Outcome(parsed.line, text)


async def execute(runner: Runner, command: Command) -> str:
    """Each command is a module of its own; this is the one place that knows them all."""
    if isinstance(command, Help):
        return help_text()
    if isinstance(command, StatusCommand):
        return status(runner)
    if isinstance(command, Answer):
        return await answer(runner, command)
    if isinstance(command, Resolve):
        return await resolve(runner, command)
    if isinstance(command, Extend | Refresh):
        return await rebuild(runner, command)
    raise AssertionError(command)  # pragma: no cover


__all__ = ["COMMAND_JOB", "JOBS", "execute", "run_command", "run_line"]
