"""The ``"command"`` job: run the ``/sync ...`` commands of one PR comment.

Every command comment gets reactions and exactly ONE reply: ``eyes`` when a command
is accepted (the reply says how it ended), ``confused`` when one is wrong (the reply
says what was wrong and the usage), ``-1`` when the author may not run commands (the
reply says so politely, and nothing else is written).

Commands that change the sync branch (``resolve``, ``answer`` on a conflict region,
``extend``, ``refresh``) commit as the bot on top of the head they just read and push
with a lease on that head, so they never overwrite a push they did not see. The push
then triggers the normal rescan. ``extend`` and ``refresh`` first record every
resolution people made (``bot.engine.rerere``), make a new commit 1, replay the resolutions
onto it in a second commit, and carry over people's other edits with a 3-way file
merge, so no human work is lost. If people pushed commits, that second commit also
has the old head as a parent: the push is then a fast-forward and their commits stay
in the history (DESIGN: never force-push over commits people pushed). Only a branch
that holds nothing but the bot's own commits is replaced.

Every step is idempotent: a retried job finds its reply, its pushed commit (by the
``Forksync-Command`` trailer) or its half-finished extend (``sync["pending"]``).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from bot.app.context import JobContext
from bot.engine import rerere
from bot.engine.git import Git
from bot.errors import ForksyncError
from bot.github import remote
from bot.github.client import get_or_none
from bot.sync.commands import gitops
from bot.sync.commands.gitops import TRAILER
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
)
from bot.sync.commands.replay import Recorded, Replayed, record_branch, replay_onto
from bot.sync.commands.request import CommandFailed, CommandRequest, Outcome, join_and, reply_marker
from bot.sync.publish import (
    CONFIG_PATH,
    Remaining,
    clone_url,
    comment_items,
    initial_remaining,
    load_fork_state,
    load_plan,
    local_diff,
    post_review,
    pr_title,
    remember_pushed,
    render_pr_body,
    save_fork_state,
    save_plan,
    split_anchored,
    upsert_check_run,
)

log = logging.getLogger(__name__)

WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})
MAX_RESOLUTIONS = 20_000  # recorded hunks kept per sync; far beyond any real window
MAX_DONE = 200  # comment ids remembered as answered
_LOCAL_WORK_BRANCH = "forksync/command-work"
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


# -- running commands -------------------------------------------------------------------


@dataclass
class _Branch:
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

    async def load(self) -> None:
        self.state = await asyncio.to_thread(load_fork_state, self.ctx.store, self.req.fork)

    async def save(self) -> None:
        await asyncio.to_thread(save_fork_state, self.ctx.store, self.req.fork, self.state)

    async def mark_done(self) -> None:
        done = [c for c in self.state.get("commands_done", []) if c != self.req.key]
        self.state["commands_done"] = [*done, self.req.key][-MAX_DONE:]
        await self.save()

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

    async def run(self, parsed: ParsedLine) -> Outcome:
        if isinstance(parsed.result, CommandError):
            return Outcome(parsed.line, str(parsed.result), ok=False)
        try:
            text = await self.execute(parsed.result)
        except CommandFailed as exc:
            return Outcome(parsed.line, str(exc), ok=False)
        except remote.PushRejected as exc:
            return Outcome(parsed.line, "Someone pushed to the sync branch while I was working, "
                           f"so I did not overwrite it ({exc}). Please run the command again.")
        except ForksyncError as exc:
            log.warning("%s#%d: %s failed: %s", self.req.fork, self.req.pr, parsed.line, exc)
            return Outcome(parsed.line, f"This failed: {exc}")
        return Outcome(parsed.line, text)

    async def execute(self, command: Command) -> str:
        if isinstance(command, Help):
            return help_text()
        if isinstance(command, StatusCommand):
            return self.status()
        if isinstance(command, Answer):
            return await self.answer(command)
        if isinstance(command, Resolve):
            return await self.resolve(command)
        if isinstance(command, Extend):
            return await self.rebuild(command)
        if isinstance(command, Refresh):
            return await self.rebuild(command)
        raise AssertionError(command)  # pragma: no cover

    # -- status ------------------------------------------------------------------------

    def status(self) -> str:
        sync = self.sync
        plan_json = load_plan(sync)
        return status_text(plan_json, sync)

    # -- answer ------------------------------------------------------------------------

    async def answer(self, command: Answer) -> str:
        sync = self.sync
        plan_json = load_plan(sync)
        item = _item(plan_json, command.question)
        choice = validate_answer(item, command.question, command.choice)
        answers: dict[str, str] = sync.setdefault("answers", {})
        extra = ""
        head_before = sync.get("head")
        if choice in ("ours", "theirs", "suggested") and item.get("start_line") is not None:
            # The comment on a conflict region promises that answering takes that side.
            extra = await self.resolve_regions(item["path"], choice, only={item["id"]})
        elif choice in ("ours", "theirs") and item.get("kind") == "file" and item.get("sides"):
            branch = await self.read_branch()
            tag = f"{self.req.comment_id}:{item['path']}:{choice}"
            extra = await self.take_whole_file(branch, item["path"], choice, item, tag)
        if answers.get(item["id"]) != choice:
            # After a push the rescan of the new head updates the check; else do it here.
            await self.record_answer(plan_json, item["id"], choice,
                                     check=sync.get("head") == head_before)
        return f"Recorded **{item['id']}**: `{choice}`. The decisions in the PR description " \
               f"are updated.{extra}"

    async def record_answer(self, plan_json: dict[str, Any], item_id: str, choice: str, *,
                            check: bool) -> None:
        answers: dict[str, str] = self.sync.setdefault("answers", {})
        if answers.get(item_id) == choice:
            return
        answers[item_id] = choice
        await self.save()
        await self.refresh_pr(plan_json, answered=item_id, check=check)

    async def take_whole_file(self, branch: _Branch, path: str, side: str,
                              item: dict[str, Any], tag: str) -> str:
        """Put one side's version of a whole-file conflict (modify/delete, binary) back."""
        sides = item.get("sides") or {}
        how = (f"Push the version you want (or delete the file), then record the decision "
               f"with `/sync answer {item['id']} ours` or `/sync answer {item['id']} theirs`.")
        if side not in ("ours", "theirs") or side not in sides:
            raise CommandFailed(
                f"`{path}` has a whole-file conflict ({item.get('reason', 'CONFLICT')}), not "
                f"conflict markers, so only `ours` or `theirs` can resolve it. {how}")
        done = await asyncio.to_thread(gitops.commit_with_trailer, branch.git, branch.head, tag)
        if done:
            return f"\n\nDone already in {done[:12]}."
        entry = sides[side]
        if entry is not None and not await asyncio.to_thread(self._bring_object, branch.git,
                                                             entry):
            raise CommandFailed(f"{side}'s version of `{path}` is no longer in my caches. "
                                f"{how}")
        message = (f"forksync: resolve {path} with {side}\n\nRequested by @{self.req.author} "
                   f"in #{self.req.pr} ({item['id']}).\n\n{TRAILER}: {tag}\n")
        commit = await asyncio.to_thread(gitops.commit_entry, branch.git, branch.head, path, entry,
                                         message)
        if commit is None:
            return (f"\n\n`{path}` is already {side}'s version at `{branch.head[:12]}`; "
                    "nothing to change.")
        await self.push(branch, commit)
        what = "deleted" if entry is None else f"set to {side}'s version"
        return (f"\n\n`{path}` is {what} in {commit[:12]} ({item['id']}). The checklist "
                "and the check update after the rescan.")

    def _bring_object(self, git: Git, entry: dict[str, str]) -> bool:
        """Make the side's object readable in the fork cache (it may only be upstream's)."""
        if entry["mode"] == "160000" or git.run_proc("cat-file", "-e", entry["oid"]).returncode \
                == 0:
            return True
        upstream = self.state.get("upstream")
        # The engine's scratch repositories (pipeline.work_repo) hold translated blobs.
        candidates = [str(p) for p in sorted((self.ctx.settings.data_dir / "work" / "work")
                                             .glob("*.git"))]
        if upstream:
            candidates.insert(0, remote.ensure_mirror(self.ctx.cache_dir, upstream))
        for repo in candidates:
            proc = Git(repo).run_proc("cat-file", "blob", entry["oid"])
            if proc.returncode == 0:
                return git.hash_blobs([proc.stdout]) == [entry["oid"]]
        return False

    # -- resolve -----------------------------------------------------------------------

    async def resolve(self, command: Resolve) -> str:
        plan_json = load_plan(self.sync)
        files = {f["path"]: f for f in plan_json.get("files", [])}
        conflicted = [p for p, f in files.items() if f.get("status") == "conflict"]
        if command.path not in files or files[command.path].get("status") != "conflict":
            listed = ", ".join(f"`{p}`" for p in conflicted[:20]) or "none"
            raise CommandFailed(f"`{command.path}` is not a conflicted file of this sync. "
                                f"Conflicted files: {listed}.")
        text = await self.resolve_regions(command.path, command.side)
        return text.strip()

    async def resolve_regions(self, path: str, side: str, only: set[str] | None = None) -> str:
        """Rewrite the marker regions of ``path`` (all, or the items ``only``) on the branch."""
        sync = self.sync
        plan_json = load_plan(sync)
        branch = await self.read_branch()
        tag = f"{self.req.comment_id}:{path}:{side}"
        done = await asyncio.to_thread(gitops.commit_with_trailer, branch.git, branch.head, tag)
        if done:
            return f"\n\nDone already in {done[:12]}."
        files = await asyncio.to_thread(gitops.read_texts, branch.git,
                                        [sync["commit"], branch.head], path)
        at_commit, at_head = files
        if at_head is None:
            raise CommandFailed(f"`{path}` no longer exists on the sync branch "
                                f"(head `{branch.head[:12]}`).")
        items = [i for f in plan_json["files"] if f["path"] == path for i in f["review_items"]]
        by_key = _items_by_region(items, at_commit or "", path)
        regions = rerere.parse_regions(at_head)
        targets = [r for r in regions if only is None or by_key.get(r.key(path), {}).get("id")
                   in only]
        whole_file = [i for i in items if i.get("kind") == "file"]
        if not targets and whole_file and only is None:
            item = whole_file[0]
            extra = await self.take_whole_file(branch, path, side, item, tag)
            await self.record_answer(plan_json, item["id"], side,
                                     check=self.sync.get("head") == branch.head)
            return extra
        if not targets:
            what = f" for {', '.join(sorted(only))}" if only else ""
            return (f"\n\n`{path}` has no conflict markers left{what} at "
                    f"`{branch.head[:12]}`; nothing to change.")
        if side == "suggested":
            unknown = [r for r in targets if r.key(path) not in by_key]
            lacking = [by_key[r.key(path)]["id"] for r in targets
                       if r.key(path) in by_key and by_key[r.key(path)].get("suggestion") is None]
            if unknown:
                lines = ", ".join(f"L{r.start + 1}" for r in unknown)
                raise CommandFailed(f"`{path}` has conflict regions this sync did not write "
                                    f"({lines}), so there is no suggestion for them. Resolve "
                                    "them by hand, or with `ours` or `theirs`.")
            if lacking:
                raise CommandFailed(f"{join_and(lacking)} in `{path}` "
                                    f"{'has' if len(lacking) == 1 else 'have'} no suggestion. "
                                    "Resolve with `ours` or `theirs`, or by hand.")
        wanted = {r.start for r in targets}

        def choose(region: rerere.Region) -> str | None:
            if region.start not in wanted:
                return None
            if side == "suggested":
                suggestion: str = by_key[region.key(path)]["suggestion"]
                return suggestion
            return region.side(side)

        new_text, count = rerere.rewrite(at_head, choose)
        ids = [by_key[r.key(path)]["id"] for r in targets if r.key(path) in by_key]
        message = (f"forksync: resolve {path} with {side}\n\n"
                   f"Requested by @{self.req.author} in #{self.req.pr}"
                   + (f" ({', '.join(ids)})" if ids else "") + f".\n\n{TRAILER}: {tag}\n")
        commit = await asyncio.to_thread(gitops.commit_files, branch.git, branch.head,
                                         {path: new_text}, message)
        await self.push(branch, commit)
        regions_word = "region" if count == 1 else "regions"
        return (f"\n\nResolved {count} conflict {regions_word} in `{path}` with **{side}**"
                + (f" ({', '.join(ids)})" if ids else "")
                + f" in {commit[:12]}. The checklist and the check update after the rescan.")

    # -- extend / refresh --------------------------------------------------------------

    async def rebuild(self, command: Extend | Refresh) -> str:
        """Redo the merge (new tip or newer fork main) and replay every resolution made."""
        from bot.engine.config import load_config
        from bot.engine.pipeline import sync as engine_sync
        from bot.engine.window import resolve_rev

        sync = self.sync
        old_plan = load_plan(sync)
        branch = await self.read_branch()
        pending = sync.get("pending")
        if pending and pending.get("head") == branch.head:
            await self.finish_rebuild(pending)  # a retry after the push: only the rest
            return str(pending["reply"])
        sync.pop("pending", None)

        fork_branch = str(self.state.get("fork_branch") or old_plan.get("fork_branch") or "main")
        await asyncio.to_thread(remote.fetch, branch.git.git_dir, branch.url,
                                [f"+refs/heads/{fork_branch}:refs/heads/{fork_branch}"],
                                branch.token)
        fork_main = branch.git.rev_parse(f"refs/heads/{fork_branch}")
        config_text = await asyncio.to_thread(gitops.read_text, branch.git, fork_main or "",
                                              CONFIG_PATH)
        if fork_main is None or config_text is None:
            raise CommandFailed(f"the fork's `{fork_branch}` branch has no `{CONFIG_PATH}` "
                                "any more, so I cannot redo the merge.")
        config = load_config(config_text, CONFIG_PATH)
        upstream = config.upstream_repo
        upstream_branch = config.upstream_branch
        upstream_git = await asyncio.to_thread(remote.ensure_mirror, self.ctx.cache_dir,
                                               upstream)
        upstream_url = await self.clone_url(upstream)
        await asyncio.to_thread(remote.fetch, upstream_git, upstream_url,
                                [f"+refs/heads/{upstream_branch}:refs/heads/{upstream_branch}"],
                                branch.token)
        up = Git(upstream_git)
        old_tip = str(sync.get("tip") or old_plan["tip"])
        if isinstance(command, Extend):
            rev = f"#{command.pr}" if command.pr is not None else command.sha or upstream_branch
            tip = await asyncio.to_thread(resolve_rev, up, rev,
                                          f"refs/heads/{upstream_branch}", "the extend target")
            if tip == old_tip or up.is_ancestor(tip, old_tip):
                raise CommandFailed(f"{command.target} (`{tip[:12]}`) is already in this "
                                    f"window, which ends at `{old_tip[:12]}`.")
            if not up.is_ancestor(old_tip, tip):
                raise CommandFailed(f"{command.target} (`{tip[:12]}`) does not come after this "
                                    f"window's tip `{old_tip[:12]}` on upstream "
                                    f"`{upstream_branch}`.")
        else:
            tip = old_tip
            if fork_main == sync.get("ours"):
                return (f"The sync is already based on the newest `{fork_branch}` "
                        f"(`{fork_main[:12]}`); nothing to refresh.")

        # 1. Record what people resolved so far (before anything can fail on the way).
        recorded = await asyncio.to_thread(record_branch, branch.git, old_plan, sync["commit"],
                                           branch.head)
        store: dict[str, str] = sync.setdefault("rerere", {})
        store.update(recorded.resolutions)
        if len(store) > MAX_RESOLUTIONS:
            sync["rerere"] = dict(list(store.items())[-MAX_RESOLUTIONS:])
        await self.save()

        # 2. The new merge.
        git = branch.git
        git.run("update-ref", "-d", f"refs/heads/{_LOCAL_WORK_BRANCH}", ok_codes=(0, 1))
        result = await asyncio.to_thread(
            engine_sync, git.git_dir, upstream_git, to_rev=tip, config=config,
            fork_branch=fork_branch, branch=_LOCAL_WORK_BRANCH,
            workdir=str(self.ctx.settings.data_dir / "work"))
        plan_json: dict[str, Any] = result.plan.to_json()
        if plan_json["cutoff"] != old_plan["cutoff"]:
            raise CommandFailed(
                f"`{fork_branch}` now starts from upstream `{plan_json['cutoff'][:12]}`, not "
                f"this window's cutoff `{old_plan['cutoff'][:12]}` (a newer sync was merged). "
                "Close this PR; the next sync starts from there.")
        commit1 = str(result.commit)

        # 3. Replay the resolutions, and carry people's other edits over.
        replay = await asyncio.to_thread(
            replay_onto, git, plan_json, commit1, dict(sync["rerere"]), old_commit=sync["commit"],
            old_head=branch.head)
        # Commits people pushed are never dropped from the branch: then the replay commit
        # also has the old head as a parent, and the push is a fast-forward.
        people = await asyncio.to_thread(gitops.commits_by_people, git, sync["commit"], branch.head,
                                         set(self.state.get("pushed", [])))
        head = commit1
        if replay.files or people:
            verb = "extend" if isinstance(command, Extend) else "refresh"
            message = (f"forksync: replay {replay.replayed} resolutions\n\n"
                       f"Recorded from {branch.head[:12]} for `/sync {verb}` requested by "
                       f"@{self.req.author} in #{self.req.pr}.\n")
            if people:
                message += (f"\nThe previous head {branch.head[:12]} is its second parent, so "
                            f"the {len(people)} commit(s) people pushed stay in the history.\n")
            # Dated like commit 1, so a retried job makes the very same commit.
            date = git.text("log", "-1", "--format=%ct +0000", commit1).strip()
            head = await asyncio.to_thread(
                gitops.commit_files, git, commit1, replay.files, message, date=date,
                extra_parents=[branch.head] if people else [])

        replay.kept_history = bool(people)

        # 4. Remember the new heads before pushing, then push over the head just read.
        answers, dropped = migrate_answers(old_plan, plan_json, dict(sync.get("answers", {})))
        reply = rebuild_text(command, old_plan, plan_json, recorded, replay, branch.head, head,
                             dropped)
        pending = {
            "head": head, "commit": commit1, "tip": plan_json["tip"], "ours": fork_main,
            "window_label": plan_json.get("window_label"), "answers": answers,
            "report_path": result.report_path,
            "plan_file": await asyncio.to_thread(save_plan, self.ctx.settings, self.req.fork,
                                                 commit1, plan_json),
            "reply": reply,
        }
        sync["pending"] = pending
        remember_pushed(self.state, commit1)
        remember_pushed(self.state, head)
        await self.save()
        await self.push(branch, head)
        await self.finish_rebuild(pending)
        return reply

    async def finish_rebuild(self, pending: dict[str, Any]) -> None:
        """Point the state at the new commit 1, then update the PR, its review and check."""
        sync = self.sync
        for key in ("resolved", "remaining", "review_commit", "unanchored", "resolutions",
                    "resolved_by_command", "refused_head"):
            sync.pop(key, None)
        sync.update({k: v for k, v in pending.items()
                     if k not in ("head", "reply", "report_path")})
        sync["behind"] = 0
        sync["head"] = pending["head"]
        pull = await self.gh.getitem(f"/repos/{self.req.fork}/pulls/{self.req.pr}")
        html = (pull.get("base") or {}).get("repo", {}).get("html_url") \
            or f"https://github.com/{self.req.fork}"
        sync["report_url"] = (f"{html}/blob/{sync['commit']}/{pending['report_path']}"
                              if pending.get("report_path") else None)
        sync.pop("pending", None)
        await self.save()

        plan_json = load_plan(sync)
        git = Git(await asyncio.to_thread(remote.ensure_mirror, self.ctx.cache_dir,
                                          self.req.fork))
        from bot.sync.followup import scan

        paths = [f["path"] for f in plan_json.get("files", [])]
        commit_files = await asyncio.to_thread(gitops.read_many, git, sync["commit"], paths)
        head_files = await asyncio.to_thread(gitops.read_many, git, pending["head"], paths)
        result = scan(plan_json, commit_files, head_files, answers=dict(sync.get("answers", {})))
        sync["resolved"] = result.resolved
        sync["remaining"] = [r.to_json() for r in result.remaining]

        still_open = {r.item_id for r in result.remaining}
        items = [i for i in comment_items(plan_json) if i["id"] in still_open]
        diff = await asyncio.to_thread(local_diff, git.git_dir, sync["ours"], sync["commit"])
        anchored, unanchored = split_anchored(items, diff)
        sync["unanchored"] = [i["id"] for i in unanchored]
        await self.save()

        await self.patch_pr(pull, render_pr_body(plan_json, sync), title=pr_title(plan_json))
        if sync.get("review_commit") != sync["commit"]:
            moved = await self.post_review(sync["commit"], anchored, len(unanchored))
            sync["review_commit"] = sync["commit"]
            if moved:
                sync["unanchored"] = [*sync["unanchored"], *moved]
                await self.save()
                pull = await self.gh.getitem(f"/repos/{self.req.fork}/pulls/{self.req.pr}")
                await self.patch_pr(pull, render_pr_body(plan_json, sync))
        check_id = await upsert_check_run(self.gh, self.req.fork, pending["head"], plan_json,
                                          result.remaining, behind=0, max_batches=1)
        sync.setdefault("check_runs", {})[pending["head"]] = check_id
        await self.save()

    async def post_review(self, commit: str, anchored: list[dict[str, Any]],
                          unanchored: int) -> list[str]:
        """One review on the new commit 1 for the items still open (find-or-create).

        Returns the ids of items whose comment GitHub rejected (422): they move to the
        PR body, and the review goes out without them, as the publisher does.
        """
        rejected = await post_review(self.gh, self.req.fork, self.req.pr, commit, anchored,
                                     unanchored)
        return rejected or []

    # -- shared steps ------------------------------------------------------------------

    async def clone_url(self, full_name: str) -> str:
        return await clone_url(self.gh, self.ctx.settings, full_name)

    async def read_branch(self) -> _Branch:
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
        return _Branch(git, url, token, head)

    async def push(self, branch: _Branch, commit: str) -> None:
        remember_pushed(self.state, commit)
        await self.save()
        await asyncio.to_thread(remote.push_with_lease, branch.git.git_dir, branch.url, commit,
                                self.sync["branch"], branch.head, branch.token)
        self.sync["head"] = commit
        await self.save()

    async def refresh_pr(self, plan_json: dict[str, Any], *, answered: str,
                         check: bool = True) -> None:
        """After an answer: re-render the decisions and drop it from the check's open list."""
        sync = self.sync
        pull = await self.gh.getitem(f"/repos/{self.req.fork}/pulls/{self.req.pr}")
        await self.patch_pr(pull, render_pr_body(plan_json, sync))
        if "remaining" in sync:
            remaining = [Remaining.from_json(r) for r in sync["remaining"]]
        else:
            remaining = initial_remaining(plan_json, dict(sync.get("answers", {})))
        # An answer settles a question; a conflict region stays until its markers go.
        remaining = [r for r in remaining if r.marker or r.item_id != answered]
        sync["remaining"] = [r.to_json() for r in remaining]
        await self.save()
        if not check:
            return
        head = str(pull.get("head", {}).get("sha") or sync.get("head") or sync["commit"])
        check_id = await upsert_check_run(self.gh, self.req.fork, head, plan_json, remaining,
                                          behind=int(sync.get("behind", 0)), max_batches=1)
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


# -- pure helpers -----------------------------------------------------------------------


def _item(plan_json: dict[str, Any], question: str) -> dict[str, Any]:
    items = [i for f in plan_json.get("files", []) for i in f.get("review_items", [])]
    for item in items:
        if str(item["id"]).upper() == question.upper():
            found: dict[str, Any] = item
            return found
    if not items:
        raise CommandFailed(f"There is no {question}: this sync has no review items.")
    raise CommandFailed(f"There is no {question} in this sync; its items are "
                        f"{items[0]['id']}–{items[-1]['id']}.")


def validate_answer(item: dict[str, Any], question: str, choice: str) -> str:
    """The choice as recorded, or CommandFailed saying which choices the item takes."""
    choices = [str(c) for c in item.get("choices") or []]
    if item.get("tier") == "Settled" or item.get("kind") == "policy":
        raise CommandFailed(f"{item['id']} is settled ({item.get('reason', '')}) and needs "
                            "no answer.")
    for known in choices:
        if known.lower() == choice.lower():
            return known
    if item.get("tier") == "Decide" or not choices:
        return choice  # a free-text decision
    options = ", ".join(f"`{c}`" for c in choices)
    raise CommandFailed(f"`{choice}` is not a choice for {item['id']}; choose one of {options}. "
                        f"Usage: `/sync answer {item['id']} <choice>`")


def status_text(plan_json: dict[str, Any], sync: dict[str, Any]) -> str:
    """The ``/sync status`` reply: what is left, what is done, how far behind upstream."""
    items = [i for f in plan_json.get("files", []) for i in f.get("review_items", [])]
    answers: dict[str, str] = dict(sync.get("answers", {}))
    if "remaining" in sync:
        remaining = [Remaining.from_json(r) for r in sync["remaining"]]
    else:
        remaining = initial_remaining(plan_json, answers)
    regions_left = [r for r in remaining if r.marker]
    region_total = sum(1 for i in items if i.get("kind") == "conflict"
                       and i.get("start_line") is not None and i.get("tier") != "Settled")
    unknown = sum(1 for r in regions_left if r.item_id is None)
    left = len(regions_left) - unknown
    open_questions = [str(r.item_id) for r in remaining if not r.marker and r.item_id]
    files_left = sorted({r.path for r in regions_left})
    behind = int(sync.get("behind", 0))
    head = str(sync.get("head") or sync.get("commit") or "")
    lines = [f"**Status** of the sync {plan_json.get('window_label', '')}"
             + (f" at `{head[:12]}`" if head else "") + ":", ""]
    lines.append(f"- Conflict regions: **{left} remaining**, {region_total - left} resolved "
                 f"(of {region_total})"
                 + (f", in {join_and([f'`{p}`' for p in files_left[:10]])}"
                    + (f" and {len(files_left) - 10} more files" if len(files_left) > 10 else "")
                    if files_left else "") + ".")
    if unknown:
        lines.append(f"- {unknown} conflict region(s) that the sync did not write.")
    lines.append(f"- Open questions: **{len(open_questions)}**"
                 + (f" ({join_and(open_questions[:20])})" if open_questions else "")
                 + (f"; {len(answers)} answered" if answers else "") + ".")
    if behind:
        lines.append(f"- Behind upstream by **{behind}** PR{'s' if behind != 1 else ''}; "
                     "`/sync extend` brings them in and replays every resolution made.")
    else:
        lines.append("- Up to date with upstream as of the last check.")
    if not remaining:
        lines += ["", "Nothing is left: the `forksync` check passes, and the PR can be "
                  "marked ready for review."]
    return "\n".join(lines)


def _items_by_region(items: list[dict[str, Any]], commit_text: str,
                     path: str) -> dict[str, dict[str, Any]]:
    """Review items keyed by the hunk key of their marker region in commit 1."""
    by_start = {r.start + 1: r for r in rerere.parse_regions(commit_text)}
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        region = by_start.get(item.get("start_line") or -1)
        key = (region.key(path) if region is not None
               else rerere.hunk_key(path, item.get("ours", ""), item.get("base") or "",
                                    item.get("theirs", "")))
        out.setdefault(key, item)
    return out


def migrate_answers(old_plan: dict[str, Any], new_plan: dict[str, Any],
                    answers: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """Carry answers to the new plan's item ids (matched by path and hunk); list the lost."""

    def identity(item: dict[str, Any]) -> tuple[str, str, str, str, str]:
        return (item["path"], item.get("kind", ""), item.get("ours", ""),
                item.get("base") or "", item.get("theirs", ""))

    old_items = {i["id"]: i for f in old_plan["files"] for i in f["review_items"]}
    new_by_identity: dict[tuple[str, str, str, str, str], str] = {}
    for f in new_plan["files"]:
        for item in f["review_items"]:
            new_by_identity.setdefault(identity(item), item["id"])
    migrated: dict[str, str] = {}
    dropped: list[str] = []
    for old_id, choice in answers.items():
        old = old_items.get(old_id)
        new_id = new_by_identity.get(identity(old)) if old else None
        if new_id is None:
            dropped.append(old_id)
        else:
            migrated[new_id] = choice
    return migrated, dropped


def rebuild_text(command: Extend | Refresh, old_plan: dict[str, Any], plan_json: dict[str, Any],
                 recorded: Recorded, replay: Replayed, old_head: str, new_head: str,
                 dropped: list[str]) -> str:
    if isinstance(command, Extend):
        first = (f"Extended the window to {command.target}: now "
                 f"{plan_json.get('window_label')} (was {old_plan.get('window_label')}).")
    else:
        first = (f"Refreshed the sync onto the newest fork main `{plan_json['ours'][:12]}` "
                 f"(was `{old_plan['ours'][:12]}`).")
    conflicts = plan_json.get("summary", {}).get("status", {}).get("conflict", 0)
    lines = [first, "",
             f"- New commit 1: the merge with {conflicts} conflicted file"
             f"{'s' if conflicts != 1 else ''}.",
             f"- Replayed **{replay.replayed}** recorded resolution"
             f"{'s' if replay.replayed != 1 else ''}"
             + (f" in a second commit `{new_head[:12]}`." if replay.files else ".")]
    if replay.kept_history:
        lines.append(f"- The commits people pushed stay in the branch's history: the previous "
                     f"head `{old_head[:12]}` is a parent of the new head, so this was a "
                     "fast-forward, not a force-push.")
    if replay.carried:
        lines.append(f"- Carried over other edits people made in {join_and(replay.carried[:10])}.")
    if replay.not_carried:
        lines.append("- These edits overlap the new merge and were **not** carried over; "
                     f"compare with the previous head `{old_head[:12]}`: "
                     f"{join_and([f'`{p}`' for p in replay.not_carried[:10]])}.")
    if recorded.unplaced:
        lines.append("- Some resolutions could not be recorded because the lines around them "
                     f"changed too: {join_and([f'`{p}`' for p in recorded.unplaced[:10]])}; "
                     f"see `{old_head[:12]}`.")
    if dropped:
        lines.append(f"- Answers to {join_and(dropped)} no longer match an item and were dropped.")
    lines.append(f"- The previous head was `{old_head[:12]}`.")
    return "\n".join(lines)


__all__ = ["Runner", "has_write_access", "migrate_answers", "post_reply", "react",
           "status_text", "validate_answer"]
