"""The shared runner: the state, the sync branch and the PR that every command works on.

Commands that change the sync branch (``resolve``, ``answer`` on a conflict region,
``extend``, ``refresh``) read its head with :meth:`Runner.read_branch`, commit as the bot
on top of it, and :meth:`Runner.push` with a lease on that head, so they never overwrite
a push they did not see. The push then triggers the normal rescan.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from bot.app.context import JobContext
from bot.engine.config import CONFIG_PATH
from bot.engine.gate import Remaining, initial_remaining
from bot.engine.git import Git
from bot.engine.review import one_click_ids
from bot.errors import ForksyncError
from bot.github import remote
from bot.github.checks import upsert_check_run
from bot.github.client import get_or_none
from bot.sync.commands.request import CommandFailed, CommandRequest, reply_marker
from bot.sync.publish.fetch import clone_url
from bot.sync.publish.pr import render_pr_body
from bot.sync.state import load_fork_state, load_plan, remember_pushed, save_fork_state

WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})
MAX_DONE = 200  # comment ids remembered as answered
REFUSAL_REPLY_EVERY = 3600.0  # seconds between two refusal replies to one author on one PR
_HEAD_REF = "refs/forksync/command-head"


async def has_write_access(gh: Any, fork: str, user: str) -> bool:
    """Whether ``user`` may push to ``fork`` (admin, maintain or write)."""
    # 403 or 404: not a collaborator, or no such user.
    data = await get_or_none(gh, f"/repos/{fork}/collaborators/{user}/permission",
                             missing=(403, 404))
    if data is None:
        return False
    roles = {str(data.get("permission") or ""), str(data.get("role_name") or "")}
    return bool(roles & WRITE_PERMISSIONS)


async def react(gh: Any, req: CommandRequest, content: str) -> None:
    """Add a reaction to the comment (GitHub answers 200 instead of 201 if it is there)."""
    await gh.post(f"{req.comment_url}/reactions", data={"content": content})


async def post_reply(gh: Any, req: CommandRequest, body: str) -> None:
    await gh.post(req.replies_url, data={"body": body})


@dataclass
class Branch:
    """The sync branch as read at the start of a command that writes to it."""

    git: Git
    url: str
    token: str
    head: str


class Runner:
    """The commands of one comment, sharing one state, one client and one fetch."""

    def __init__(self, ctx: JobContext, gh: Any, req: CommandRequest) -> None:
        self.ctx = ctx
        self.gh = gh
        self.req = req
        self.state: dict[str, Any] = {}

    # -- the fork's state ----------------------------------------------------------------

    async def load(self) -> None:
        self.state = await asyncio.to_thread(load_fork_state, self.ctx.store, self.req.fork)

    async def save(self) -> None:
        await asyncio.to_thread(save_fork_state, self.ctx.store, self.req.fork, self.state)

    async def mark_done(self) -> None:
        done = [c for c in self.state.get("commands_done", []) if c != self.req.key]
        self.state["commands_done"] = [*done, self.req.key][-MAX_DONE:]
        await self.save()

    @property
    def _refusal_key(self) -> str:
        return f"{self.req.pr}:{self.req.author.lower()}"

    def refusal_reply_due(self, now: float) -> bool:
        """Whether this author was not told "write access only" on this PR in the last hour."""
        last = self.state.get("refusals_replied", {}).get(self._refusal_key)
        return last is None or now - float(last) >= REFUSAL_REPLY_EVERY

    def replied_refusal(self, now: float) -> None:
        """Remember the refusal reply (saved with ``mark_done``); forget those over an hour old."""
        replied = {key: at for key, at in self.state.get("refusals_replied", {}).items()
                   if now - float(at) < REFUSAL_REPLY_EVERY}
        replied[self._refusal_key] = now
        self.state["refusals_replied"] = replied

    def last_attempt(self) -> bool:
        job = getattr(self.ctx, "job", None)
        return job is None or job.attempts >= self.ctx.store.max_attempts

    async def already_replied(self) -> bool:
        """After a crash between reply and save, the reply is on the PR: find it."""
        job = getattr(self.ctx, "job", None)
        if job is None or job.attempts <= 1:
            return False
        marker = reply_marker(self.req.comment_id)
        async for comment in self.gh.getiter(self.req.listing_url):
            if marker in (comment.get("body") or ""):
                return True
        return False

    @property
    def sync(self) -> dict[str, Any]:
        sync = self.state.get("sync")
        if not sync or sync.get("pr") != self.req.pr:
            open_pr = sync.get("pr") if sync else None
            where = f" The open sync PR is #{open_pr}." if open_pr else ""
            raise CommandFailed(f"#{self.req.pr} is not this fork's open sync PR, so there is "
                                f"nothing to do here.{where}")
        live: dict[str, Any] = sync  # the live dict: edits to it are saved with the state
        return live

    # -- the sync branch and the PR ------------------------------------------------------

    async def clone_url(self, full_name: str) -> str:
        return await clone_url(self.gh, self.ctx.settings, full_name)

    async def read_branch(self) -> Branch:
        """Fetch the sync branch and return its head: the only head a push may replace."""
        sync = self.sync
        token = await self.ctx.git_token_for(self.req.installation_id)
        git_dir = await asyncio.to_thread(remote.ensure_mirror, self.ctx.cache_dir,
                                          self.req.fork)
        url = await self.clone_url(self.req.fork)
        head = await asyncio.to_thread(remote.remote_head, url, sync["branch"], token)
        if head is None:
            raise CommandFailed(f"the sync branch `{sync['branch']}` is gone from the fork.")
        await asyncio.to_thread(remote.fetch, git_dir, url,
                                [f"+refs/heads/{sync['branch']}:{_HEAD_REF}"], token)
        git = Git(git_dir)
        fetched = git.rev_parse(_HEAD_REF)
        if fetched != head:
            raise remote.PushRejected(sync["branch"], head, "it moved while it was fetched")
        # The cache is a partial clone: every command reads the window's files at the head
        # or at commit 1, so they come now, in one fetch.
        revs = [rev for rev in (sync.get("commit"), head) if rev and git.rev_parse(rev)]
        try:
            paths = [f["path"] for f in load_plan(sync, self.ctx.store).get("files", [])]
        except ForksyncError:
            paths = []  # the command says so itself when it needs the plan
        await asyncio.to_thread(remote.fetch_files, git_dir, url, revs, [*paths, CONFIG_PATH],
                                token, base=sync.get("ours"), repo="the fork repository")
        return Branch(git, url, token, head)

    async def push(self, branch: Branch, commit: str) -> None:
        remember_pushed(self.state, commit)
        await self.save()
        try:
            await asyncio.to_thread(remote.push_with_lease, branch.git.git_dir, branch.url,
                                    commit, self.sync["branch"], branch.head, branch.token)
        except remote.WorkflowsRefused as exc:
            raise CommandFailed(str(exc)) from None
        self.sync["head"] = commit
        await self.save()

    async def record_answer(self, plan_json: dict[str, Any], item_id: str, choice: str, *,
                            check: bool) -> None:
        """Record a decision, then update the PR's decisions and (if ``check``) the check."""
        answers: dict[str, str] = self.sync.setdefault("answers", {})
        if answers.get(item_id) == choice:
            return
        answers[item_id] = choice
        await self.save()
        await self.refresh_pr(plan_json, answered=item_id, check=check)

    async def record_answers(self, plan_json: dict[str, Any], choices: dict[str, str], *,
                             check: bool) -> None:
        """Record several decisions at once: one PR update and one check update for all."""
        answers: dict[str, str] = self.sync.setdefault("answers", {})
        new = {k: v for k, v in choices.items() if answers.get(k) != v}
        if not new:
            return
        answers.update(new)
        await self.save()
        await self.refresh_pr(plan_json, answered=set(new), check=check)

    async def refresh_pr(self, plan_json: dict[str, Any], *, answered: str | set[str],
                         check: bool = True) -> None:
        """After an answer: drop it from the check's open list, re-render the decisions.

        The same rule as the rescan's: an answer settles a question (a decision, a whole
        file already in the state answered, or a marker-like line answered ``content``);
        a conflict region or a sure marker line stays until it goes.
        """
        sync = self.sync
        if "remaining" in sync:
            remaining = [Remaining.from_json(r) for r in sync["remaining"]]
        else:
            remaining = initial_remaining(plan_json, dict(sync.get("answers", {})))
        done = {answered} if isinstance(answered, str) else answered
        content = sync.get("content_lines", {})
        kept = [r for r in remaining if r.marker or (
            r.item_id not in done
            and not (r.orphan and set(r.texts) <= set(content.get(r.path, ()))))]
        items = {i["id"] for f in plan_json.get("files", []) for i in f.get("review_items", [])}
        settled = {str(r.item_id) for r in remaining
                   if r not in kept and r.item_id is not None and r.item_id in items}
        sync["resolved"] = [*sync.get("resolved", []),
                            *sorted(settled - set(sync.get("resolved", [])))]
        sync["remaining"] = [r.to_json() for r in kept]
        await self.save()
        pull = await self.gh.getitem(f"/repos/{self.req.fork}/pulls/{self.req.pr}")
        await self.patch_pr(pull, render_pr_body(plan_json, sync))
        if not check:
            return
        head = str(pull.get("head", {}).get("sha") or sync.get("head") or sync["commit"])
        check_id = await upsert_check_run(self.gh, self.req.fork, head, plan_json, kept,
                                          behind=int(sync.get("behind", 0)),
                                          one_click=one_click_ids(sync), max_batches=1)
        sync.setdefault("check_runs", {})[head] = check_id
        await self.save()

    async def patch_pr(self, pull: dict[str, Any], section: str, *,
                       title: str | None = None) -> None:
        """Rewrite only the bot's section of the body (and the title); no request if unchanged."""
        from bot.engine.report import BODY_LIMIT, merge_body

        old = pull.get("body") or ""
        data: dict[str, Any] = {}
        body = merge_body(old, section)[:BODY_LIMIT]
        if body != old:
            data["body"] = body
        if title is not None and title != pull.get("title"):
            data["title"] = title
        if data:
            await self.gh.patch(f"/repos/{self.req.fork}/pulls/{self.req.pr}", data=data)


__all__ = ["MAX_DONE", "REFUSAL_REPLY_EVERY", "WRITE_PERMISSIONS", "Branch", "Runner",
           "has_write_access", "post_reply", "react"]
