"""Publishing a sync: the one module that turns an engine result into GitHub calls.

One sync PR per window. Every step is find-or-create, so the ``"sync"`` job can run
again after a crash (``kill -9`` included) at any point and still ends with one
branch, one draft PR, one review and one check run:

1. fetch fork main and the upstream into local bare caches, run ``engine.sync``
   (its commit is dated from its inputs, so a rerun makes the same commit 1);
2. push commit 1 to the sync branch with a lease, only over a head the bot wrote;
3. find or create the draft PR, its body the report;
4. post ONE review: a ```suggestion``` comment per review item that the PR diff can
   carry; the others are listed in the PR body, so a 422 never loses the review;
5. find or create the ``forksync`` check run on the head, annotations in 50s.

While a sync PR is open, a newer upstream only updates that PR's status ("behind
upstream by N PRs"); it never opens a second PR.

Write budget per sync PR: 1 PR + 1 review + ⌈annotations/50⌉ check-run requests,
plus at most one body PATCH (and one review retry after a 422): ≤ 5 + ⌈items/50⌉.

The per-fork state it keeps is described in :mod:`bot.sync.state`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gidgethub import BadRequest

from bot.app.context import JobContext
from bot.app.settings import Settings
from bot.app.store import Store
from bot.engine.gate import (
    Remaining,
    initial_remaining,
)
from bot.engine.git import CatFile, Git
from bot.engine.review import (
    comment_items,
    local_diff,
    split_anchored,
    unanchored_lines,
)
from bot.errors import ForksyncError, GitError
from bot.github import remote
from bot.github.auth import AuthError
from bot.github.checks import report_error, upsert_check_run
from bot.github.client import GitHubClient
from bot.github.pulls import post_review, pr_diff, review_posted, update_body
from bot.sync.state import (
    load_fork_state,
    load_plan,
    remember_pushed,
    save_fork_state,
    save_plan,
    sync_branch_name,
)

log = logging.getLogger(__name__)

CONFIG_PATH = ".github/forksync.yml"
_LOCAL_WORK_BRANCH = "forksync/local-work"


# -- local git (run in threads) ------------------------------------------------------


def read_config_text(git_dir: str, rev: str) -> str | None:
    proc = Git(git_dir).run_proc("cat-file", "blob", f"{rev}:{CONFIG_PATH}")
    return proc.stdout.decode("utf-8", "replace") if proc.returncode == 0 else None


def read_blobs(git_dir: str, rev: str, paths: Iterable[str]) -> dict[str, str | None]:
    """Text of each path at ``rev``; None where the path is absent or not a file."""
    out: dict[str, str | None] = {}
    with CatFile(Git(git_dir)) as cat:
        for path in paths:
            try:
                kind, data = cat.read(f"{rev}:{path}")
            except GitError:
                out[path] = None
                continue
            out[path] = data.decode("utf-8", "replace") if kind == "blob" else None
    return out


# -- the job --------------------------------------------------------------------------


@dataclass
class PublishResult:
    """What one ``"sync"`` job did (for logs, the CLI and the benchmark)."""

    fork: str
    action: str  # opened | resumed | behind | unchanged | up-to-date | refused | not-configured
    pr_number: int | None = None
    branch: str | None = None
    commit: str | None = None
    writes: int = 0
    unanchored: list[str] = field(default_factory=list)


@dataclass
class _Repos:
    """The two local caches and what was read from them at the start of the job."""

    fork_git: str
    upstream_git: str
    fork_url: str
    upstream_url: str
    fork_html_url: str
    fork_branch: str
    fork_main: str
    upstream_head: str


async def publish_sync(ctx: JobContext, fork_full_name: str, installation_id: int | None, *,
                       tip: str | None = None, cutoff: str | None = None) -> PublishResult:
    """Job ``"sync"``: open the fork's sync PR, or bring the open one's status up to date.

    ``tip`` is a SHA or ``#N`` (upstream PR N); by default the upstream branch head.
    ``cutoff`` overrides the window's start (a first sync, before any trailer exists).
    """
    run = _SyncRun(ctx, fork_full_name, await ctx.gh_for(installation_id),
                   await ctx.git_token_for(installation_id))
    await run.load(installation_id)
    config = await run.fetch()
    if isinstance(config, PublishResult):
        return config
    tip_sha = await asyncio.to_thread(run.resolve_tip, config.upstream_branch, tip)
    followed = await run.follow_open_pr(tip_sha)
    if followed is not None:
        return followed
    prepared = await run.prepare(config, tip_sha, cutoff)
    if isinstance(prepared, PublishResult):
        return prepared
    plan_json, action = prepared
    if not await run.push():
        return run.result("refused")
    await run.finish(plan_json)
    return run.result(action)


class _SyncRun:
    """One run of the ``"sync"`` job: its collaborators, and the fork's state as it goes.

    The state is saved after every step that GitHub or the fork's branch can see, so
    a run killed at any point is continued, not repeated, by the next one.
    """

    def __init__(self, ctx: JobContext, fork: str, gh: GitHubClient, token: str) -> None:
        self.ctx = ctx
        self.fork = fork
        self.gh = gh
        self.token = token
        self.writes_before = gh.write_count
        self.state: dict[str, Any] = {}
        self._repos: _Repos | None = None

    @property
    def repos(self) -> _Repos:
        assert self._repos is not None, "fetch() first"
        return self._repos

    @property
    def sync(self) -> dict[str, Any]:
        sync: dict[str, Any] = self.state.setdefault("sync", {})
        return sync

    async def load(self, installation_id: int | None) -> None:
        self.state = await asyncio.to_thread(load_fork_state, self.ctx.store, self.fork)
        self.state["installation_id"] = installation_id

    async def save(self) -> None:
        await asyncio.to_thread(save_fork_state, self.ctx.store, self.fork, self.state)

    def result(self, action: str) -> PublishResult:
        sync = self.state.get("sync") or {}
        return PublishResult(self.fork, action, pr_number=sync.get("pr"),
                             branch=sync.get("branch"), commit=sync.get("commit"),
                             writes=self.gh.write_count - self.writes_before,
                             unanchored=list(sync.get("unanchored", [])))

    async def _upstream_access(self, upstream: str) -> tuple[GitHubClient, str]:
        """A client and token that can read the upstream.

        A public upstream is readable with the fork's token. A private one needs the
        App installed there too (its installation may differ from the fork's), so that
        installation's token is used when there is one.
        """
        try:
            installation = await self.ctx.installation_for_repo(upstream)
        except AuthError:
            installation = None  # not installed there: the fork's token must do (public)
        if installation is None or installation == self.ctx.installation_id:
            return self.gh, self.token
        return (await self.ctx.gh_for(installation),
                await self.ctx.git_token_for(installation))

    async def fetch(self) -> Any:
        """Fetch fork main and the upstream into the caches; the fork's config, or an outcome."""
        settings, fork, gh = self.ctx.settings, self.fork, self.gh
        fork_repo = await gh.getitem(f"/repos/{fork}")
        fork_branch = fork_repo.get("default_branch") or "main"
        fork_url = settings.clone_url(fork, fork_repo.get("clone_url"))
        fork_git = await asyncio.to_thread(remote.ensure_mirror, settings.cache_dir, fork)
        await asyncio.to_thread(remote.fetch, fork_git, fork_url,
                                [f"+refs/heads/{fork_branch}:refs/heads/{fork_branch}"],
                                self.token)
        fork_main = Git(fork_git).rev_parse(f"refs/heads/{fork_branch}")
        config_text = await asyncio.to_thread(read_config_text, fork_git,
                                              f"refs/heads/{fork_branch}")
        if fork_main is None or config_text is None:
            log.info("%s has no %s on %s: nothing to sync", fork, CONFIG_PATH, fork_branch)
            return self.result("not-configured")
        try:
            config = _load_config(config_text)
        except ForksyncError as exc:
            await report_error(gh, fork, fork_main, "The forksync config has an error",
                                str(exc))
            return self.result("refused")
        upstream, branch = config.upstream_repo, config.upstream_branch
        self.state.update(upstream=upstream, upstream_branch=branch, fork_branch=fork_branch)

        up_gh, up_token = await self._upstream_access(upstream)
        upstream_url = await clone_url(up_gh, settings, upstream)
        upstream_git = await asyncio.to_thread(remote.ensure_mirror, settings.cache_dir, upstream)
        await asyncio.to_thread(remote.fetch, upstream_git, upstream_url,
                                [f"+refs/heads/{branch}:refs/heads/{branch}"], up_token)
        upstream_head = Git(upstream_git).rev_parse(f"refs/heads/{branch}")
        if upstream_head is None:
            raise GitError(f"the upstream {upstream} has no branch {branch}")
        self.state["last_seen_upstream"] = upstream_head
        self._repos = _Repos(fork_git, upstream_git, fork_url, upstream_url,
                             fork_repo.get("html_url") or f"https://github.com/{fork}",
                             fork_branch, fork_main, upstream_head)
        return config

    def resolve_tip(self, upstream_branch: str, tip: str | None) -> str:
        if not tip:
            return self.repos.upstream_head
        from bot.engine.window import resolve_rev

        return resolve_rev(Git(self.repos.upstream_git), tip, f"refs/heads/{upstream_branch}",
                           "tip")

    async def follow_open_pr(self, tip_sha: str) -> PublishResult | None:
        """While the sync PR is open, a newer upstream only updates its status."""
        sync = self.state.get("sync") or {}
        if not sync.get("pr"):
            return None
        pull = await self.gh.getitem(f"/repos/{self.fork}/pulls/{sync['pr']}")
        if pull.get("state") == "open":
            if not _published(sync):
                # A crash after the PR was opened: finish the review and the check first.
                await self.finish(load_plan(sync))
                return self.result("resumed")
            return self.result(await self.record_behind(pull, tip_sha))
        if pull.get("merged"):
            # Whatever the merge method did to the trailers, this tip is in the fork now.
            self.state["last_synced_tip"] = sync.get("tip")
        self.state.pop("sync", None)  # closed or merged: the next window starts afresh
        return None

    async def prepare(self, config: Any, tip_sha: str, cutoff: str | None = None
                      ) -> tuple[dict[str, Any], str] | PublishResult:
        """Commit 1 and its plan: the ones a killed run made, or new ones from the engine."""
        repos, sync = self.repos, self.state.get("sync") or {}
        if (sync.get("commit") and sync.get("ours") == repos.fork_main
                and sync.get("tip") == tip_sha and sync.get("plan_file")
                and Path(sync["plan_file"]).exists()
                and Git(repos.fork_git).rev_parse(sync["commit"]) is not None):
            return load_plan(sync), "resumed"
        if cutoff is not None:
            from bot.engine.window import resolve_rev

            cutoff = await asyncio.to_thread(
                resolve_rev, Git(repos.upstream_git), cutoff,
                f"refs/heads/{self.state['upstream_branch']}", "the cutoff")
        else:
            cutoff = await asyncio.to_thread(find_sync_cutoff, repos, self.state["upstream"],
                                             self.state.get("last_synced_tip"))
        if cutoff is not None and await asyncio.to_thread(_up_to_date, repos, cutoff, tip_sha):
            await self.save()
            return self.result("up-to-date")
        try:
            plan_json, commit, report_path = await _run_engine(
                self.ctx.settings, repos, config, tip_sha, cutoff)
        except ForksyncError as exc:
            # The engine works on local repositories only, so its errors do not go away by
            # retrying: people must act (fix the config, name the cutoff). Say so on the
            # fork's head, where they look.
            advice = "" if cutoff is not None else FIRST_SYNC_ADVICE.format(
                upstream=self.state["upstream"], branch=repos.fork_branch)
            await report_error(self.gh, self.fork, repos.fork_main, "forksync cannot sync",
                               str(exc) + advice)
            await self.save()
            return self.result("refused")
        self.state["sync"] = {
            "branch": sync_branch_name(plan_json["cutoff"]), "commit": commit,
            "cutoff": plan_json["cutoff"], "tip": plan_json["tip"], "ours": repos.fork_main,
            "behind": 0, "window_label": plan_json.get("window_label"),
            "plan_file": await asyncio.to_thread(save_plan, self.ctx.settings, self.fork,
                                                 commit, plan_json),
            "report_url": (f"{repos.fork_html_url}/blob/{commit}/{report_path}"
                           if report_path else None),
        }
        return plan_json, "opened"

    async def push(self) -> bool:
        """Push commit 1 with a lease, unless the branch head is a commit the bot did not write."""
        repos, sync, token = self.repos, self.sync, self.token
        branch, commit = sync["branch"], sync["commit"]
        # Remembered before the push: after a crash between the push and the save, the
        # branch head is still recognised as the bot's own.
        remember_pushed(self.state, commit)
        await self.save()
        head = await asyncio.to_thread(remote.remote_head, repos.fork_url, branch, token)
        if head == commit:
            return True
        if head is None or head in self.state.get("pushed", []):
            try:
                await asyncio.to_thread(remote.push_with_lease, repos.fork_git, repos.fork_url,
                                        commit, branch, head, token)
                return True
            except remote.PushRejected:
                head = await asyncio.to_thread(remote.remote_head, repos.fork_url, branch, token)
                if head == commit:
                    return True
        await self.refuse_push(head or "")
        await self.save()
        return False

    async def refuse_push(self, head: str) -> None:
        """Tell people, where they look, why the bot stopped and how to go on by hand."""
        repos, sync, fork = self.repos, self.sync, self.fork
        if sync.get("refused_head") == head:
            return  # said so already
        text = manual_instructions(_public_url(repos.fork_url), sync["branch"], head,
                                   _public_url(repos.upstream_url), sync.get("tip", ""),
                                   repos.fork_branch)
        owner = fork.split("/", 1)[0]
        pulls = [p async for p in self.gh.getiter(
            f"/repos/{fork}/pulls?state=all&head={owner}:{sync['branch']}")]
        if pulls:
            await self.gh.post(f"/repos/{fork}/issues/{pulls[0]['number']}/comments",
                               data={"body": text})
        else:
            await report_error(self.gh, fork, repos.fork_main, "forksync could not push", text)
        sync["refused_head"] = head
        log.warning("%s: refused to push over %s at %s", fork, sync["branch"], head[:12])

    async def finish(self, plan_json: dict[str, Any]) -> None:
        """After the push: find-or-create the PR, post the review once, create the check."""
        gh, fork, sync = self.gh, self.fork, self.sync
        items = comment_items(plan_json)
        if "unanchored" not in sync:
            diff = await asyncio.to_thread(local_diff, self.repos.fork_git, sync["ours"],
                                           sync["commit"])
            sync["unanchored"] = [i["id"] for i in split_anchored(items, diff)[1]]
        pr = await _find_or_create_pr(gh, fork, self.repos.fork_branch, sync, plan_json)
        sync["pr"] = pr["number"]
        await self.save()

        if sync.get("review_commit") != sync["commit"]:
            await _post_review_once(gh, fork, pr, sync, plan_json, items)
            sync["review_commit"] = sync["commit"]
            await self.save()

        remaining = initial_remaining(plan_json, dict(sync.get("answers", {})))
        sync["remaining"] = [r.to_json() for r in remaining]
        sync["head"] = sync["commit"]
        check_id = await upsert_check_run(gh, fork, sync["commit"], plan_json, remaining,
                                          behind=int(sync.get("behind", 0)))
        sync.setdefault("check_runs", {})[sync["commit"]] = check_id
        await self.save()

    async def record_behind(self, pull: Any, tip_sha: str) -> str:
        """Say in the open PR how many upstream PRs merged after its window; never open another."""
        from bot.engine.window import list_window

        gh, fork, sync = self.gh, self.fork, self.sync
        behind = 0
        upstream = Git(self.repos.upstream_git)
        if (tip_sha != sync.get("tip") and upstream.rev_parse(sync["tip"])
                and upstream.is_ancestor(sync["tip"], tip_sha)):
            behind = len(await asyncio.to_thread(list_window, upstream, sync["tip"], tip_sha))
        if behind == int(sync.get("behind", 0)):
            await self.save()
            return "unchanged"
        sync["behind"] = behind
        plan_json = load_plan(sync)
        await update_body(gh, fork, pull["number"], pull.get("body") or "",
                          render_pr_body(plan_json, sync))
        head = pull["head"]["sha"]
        remaining = ([Remaining.from_json(r) for r in sync["remaining"]] if "remaining" in sync
                     else initial_remaining(plan_json, dict(sync.get("answers", {}))))
        check_id = await upsert_check_run(gh, fork, head, plan_json, remaining, behind=behind,
                                          max_batches=1)
        sync.setdefault("check_runs", {})[head] = check_id
        await self.save()
        return "behind"


FIRST_SYNC_ADVICE = """

The window starts at the upstream commit named in the newest `Upstream-Sync:` trailer on
`{branch}`. For the first sync, record the upstream commit the fork was last synced with:

```
git commit --allow-empty -m "Mark the last upstream sync" -m "Upstream-Sync: {upstream}@<sha>"
git push origin {branch}
```

or run the sync once from a workflow with `forksync sync --publish --from <sha>`.
"""


def _published(sync: dict[str, Any]) -> bool:
    """Whether every step after the push (PR, review, check run) is done for commit 1."""
    return bool(sync.get("pr") and sync.get("review_commit") == sync["commit"]
                and sync["commit"] in sync.get("check_runs", {}))


def _load_config(text: str) -> Any:
    from bot.engine.config import load_config

    return load_config(text, CONFIG_PATH)


async def clone_url(gh: GitHubClient, settings: Settings, full_name: str) -> str:
    """The URL git fetches and pushes ``owner/repo`` at (GitHub's own, or the configured base)."""
    if settings.git_url:
        return settings.clone_url(full_name)
    repo = await gh.getitem(f"/repos/{full_name}")
    return settings.clone_url(full_name, repo.get("clone_url"))


def find_sync_cutoff(repos: _Repos, upstream: str, merged_tip: str | None) -> str | None:
    """The newest upstream commit the fork has synced, however the sync PR was merged.

    The engine reads every ``Upstream-Sync:`` line on main's history; a squash merge
    may have dropped them all, so the tip of the last sync PR merged counts too. The
    newest candidate, by upstream ancestry, wins.
    """
    from bot.engine.window import find_cutoff, newest_by_ancestry

    fork, up = Git(repos.fork_git), Git(repos.upstream_git)
    found = find_cutoff(fork, f"refs/heads/{repos.fork_branch}", upstream, up)
    return newest_by_ancestry(up, [sha for sha in (found, merged_tip) if sha])


def _up_to_date(repos: _Repos, cutoff: str, tip_sha: str) -> bool:
    """The fork's last sync already brought in the tip: an empty window, nothing to open."""
    return cutoff == tip_sha or Git(repos.upstream_git).is_ancestor(tip_sha, cutoff)


async def _run_engine(settings: Settings, repos: _Repos, config: Any, tip_sha: str,
                      cutoff: str | None) -> tuple[dict[str, Any], str, str | None]:
    from bot.engine.pipeline import sync as engine_sync

    Git(repos.fork_git).run("update-ref", "-d", f"refs/heads/{_LOCAL_WORK_BRANCH}")
    result = await asyncio.to_thread(
        engine_sync, repos.fork_git, repos.upstream_git, from_rev=cutoff, to_rev=tip_sha,
        config=config, fork_branch=repos.fork_branch, branch=_LOCAL_WORK_BRANCH,
        workdir=str(settings.data_dir / "work"))
    plan_json: dict[str, Any] = result.plan.to_json()
    return plan_json, result.commit, result.report_path


def manual_instructions(fork_url: str, branch: str, head: str, upstream_url: str, tip: str,
                        fork_branch: str) -> str:
    """miss-islington style: what happened, and the exact commands to finish by hand."""
    name = fork_url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")
    return (
        f"forksync did not push the new sync to `{branch}`: the branch is at "
        f"`{head[:12] or 'an unknown commit'}`, which forksync did not write, and forksync "
        "never overwrites commits that people pushed.\n\n"
        "If that work is not needed any more, delete the branch; forksync starts the sync "
        "again on the next upstream change:\n\n"
        f"```\ngit push {fork_url} --delete {branch}\n```\n\n"
        "Or make the sync by hand and push it to a branch of its own:\n\n"
        "```\n"
        f"git clone --branch {fork_branch} {fork_url} {name} && cd {name}\n"
        f"forksync sync --fork . --upstream {upstream_url} --to {tip} --branch {branch}-manual\n"
        f"git push origin {branch}-manual\n"
        "```\n\n"
        f"then open a pull request from `{branch}-manual` into `{fork_branch}`.\n"
    )


def _public_url(url: str) -> str:
    """A clone URL without credentials, fit for instructions in a comment."""
    return re.sub(r"^(\w+://)[^/@]*@", r"\1", url)


def render_pr_body(plan_json: dict[str, Any], sync: dict[str, Any]) -> str:
    """The bot's section of the PR body from the plan and what the state knows now."""
    from bot.engine.report import render_body

    unanchored_ids = set(sync.get("unanchored", []))
    body: str = render_body(
        plan_json, resolved=set(sync.get("resolved", [])),
        answers=dict(sync.get("answers", {})), behind=int(sync.get("behind", 0)),
        unanchored=unanchored_lines([i for i in comment_items(plan_json)
                                     if i["id"] in unanchored_ids]),
        report_url=sync.get("report_url"))
    return body


def _title_stem(plan_json: dict[str, Any]) -> str:
    upstream = plan_json.get("upstream", {}).get("repo", "upstream")
    return f"sync({upstream} {plan_json.get('window_label') or ''}): 3-way merge"


def pr_title(plan_json: dict[str, Any], open_files: int | None = None) -> str:
    """The PR title, as in the hand-made sync PRs: how many conflict files still need review.

    ``open_files`` is counted by the rescan; None means "as at commit 1".
    """
    if open_files is None:
        open_files = plan_json.get("summary", {}).get("status", {}).get("conflict", 0)
        status = f" [{open_files} conflict files need review]" if open_files else ""
    elif open_files:
        status = f" [{open_files} conflict files need review]"
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


async def _post_review_once(gh: GitHubClient, fork: str, pr: Any, sync: dict[str, Any],
                            plan_json: dict[str, Any], items: list[dict[str, Any]]) -> None:
    number, commit = pr["number"], sync["commit"]
    if await review_posted(gh, fork, number, commit):
        return  # before fetching the diff: a resumed run needs neither
    diff = await pr_diff(gh, fork, number)
    if diff is not None:
        anchored, unanchored = split_anchored(items, diff)
    else:
        known = set(sync.get("unanchored", []))
        anchored = [i for i in items if i["id"] not in known]
        unanchored = [i for i in items if i["id"] in known]
    listed = set(sync.get("unanchored", []))
    rejected = await post_review(gh, fork, number, commit, anchored, len(unanchored),
                                 checked=True) or []
    sync["unanchored"] = [i["id"] for i in unanchored] + rejected
    if set(sync["unanchored"]) != listed:
        current = await gh.getitem(f"/repos/{fork}/pulls/{number}")
        await update_body(gh, fork, number, current.get("body") or "",
                          render_pr_body(plan_json, sync))


def publish_from_cli(args: Any) -> int:
    """``forksync sync --publish`` in a workflow: token mode, the fork is GITHUB_REPOSITORY."""
    import aiohttp

    from bot.app.context import Platform
    from bot.app.settings import Settings as _Settings

    fork = os.environ.get("GITHUB_REPOSITORY", "").strip()
    if not fork:
        raise ForksyncError("GITHUB_REPOSITORY: --publish needs the fork as owner/repo "
                            "(GitHub Actions sets it)")
    settings = _Settings.from_env(os.environ)
    if not os.environ.get("FORKSYNC_DATA_DIR"):
        settings = dataclasses.replace(settings, data_dir=Path(args.workdir or ".forksync"))

    async def run() -> PublishResult:
        store = Store(settings.db_path)
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


__all__ = [
    "CONFIG_PATH",
    "PublishResult",
    "clone_url",
    "find_sync_cutoff",
    "manual_instructions",
    "pr_title",
    "publish_from_cli",
    "publish_sync",
    "read_blobs",
    "render_pr_body",
    "retitle",
]
