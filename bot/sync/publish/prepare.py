"""Step 2: commit 1 and its plan: the ones a killed run made, or new ones from the engine.

Writes the window to ``sync`` (``branch``, ``commit``, ``cutoff``, ``tip``, ``ours``,
``behind``, ``window_label``, ``plan_file``, ``report_url``) and the plan to its file.
Its idempotency key is (``ours``, ``tip``): the same fork main and tip resume the
commit 1 a killed run made; the engine dates that commit from its inputs, so making it
again would give the same commit anyway.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from bot.app.settings import Settings
from bot.engine.config import Config
from bot.engine.git import Git
from bot.engine.learn import Learned
from bot.engine.learn import from_state as learned_from_state
from bot.engine.merge import FORK, UPSTREAM
from bot.engine.needs import Needs
from bot.engine.pipeline import needs as engine_needs
from bot.engine.pipeline import sync as engine_sync
from bot.engine.window import find_cutoff, newest_by_ancestry, resolve_rev
from bot.errors import DiskFull, ForksyncError, GitError, GitTimeout, MissingObject
from bot.github import caches, remote
from bot.github.checks import report_error
from bot.sync.publish.context import PublishResult, Repos, RunContext
from bot.sync.publish.fetch import window_trees
from bot.sync.state import load_plan, save_plan, sync_branch_name

_LOCAL_WORK_BRANCH = "forksync/local-work"

RETRY_NOTE = "\n\nforksync tries this sync again later (with a growing delay)."

RESUME_FAILED = """A run of forksync stopped after it opened sync PR #{pr} and before it posted the
review and this check, and its plan is on another machine's disk only. Computed again
here, the sync no longer gives commit 1 (`{commit}`): fork main or the window changed
since, or the sync branch no longer holds commit 1.

Comment `/sync refresh` on the PR to compute the sync afresh, or close the PR: the next
sync opens a new one."""

FIRST_SYNC_ADVICE = """

The window starts at the upstream commit named in the newest `Upstream-Sync:` trailer on
`{branch}`. For the first sync, record the upstream commit the fork was last synced with:

```
git commit --allow-empty -m "Mark the last upstream sync" -m "Upstream-Sync: {upstream}@<sha>"
git push origin {branch}
```

or run the sync once from a workflow with `forksync sync --publish --from <sha>`.
"""


async def prepare(run: RunContext, config: Config, tip_sha: str, cutoff: str | None = None
                  ) -> tuple[dict[str, Any], str] | PublishResult:
    """Commit 1 and its plan, and whether they are new (``opened``) or a killed run's."""
    repos, sync = run.repos, run.state.get("sync") or {}
    if (sync.get("commit") and sync.get("ours") == repos.fork_main
            and sync.get("tip") == tip_sha and sync.get("plan_file")
            and Path(sync["plan_file"]).exists()
            and Git(repos.fork_git).rev_parse(sync["commit"]) is not None):
        return load_plan(sync, run.ctx.store), "resumed"
    if cutoff is not None:
        cutoff = await asyncio.to_thread(
            resolve_rev, Git(repos.upstream_git), cutoff,
            f"refs/heads/{run.state['upstream_branch']}", "the cutoff")
    else:
        cutoff = await asyncio.to_thread(find_sync_cutoff, repos, run.state["upstream"],
                                         run.state.get("last_synced_tip"))
    if cutoff is not None and await asyncio.to_thread(_up_to_date, repos, cutoff, tip_sha):
        await run.save()
        return run.result("up-to-date")
    made = await _compute(run, config, tip_sha, cutoff)
    if isinstance(made, PublishResult):
        return made
    plan_json, commit, report_path = made
    run.state["sync"] = {
        "branch": sync_branch_name(plan_json["cutoff"]), "commit": commit,
        "cutoff": plan_json["cutoff"], "tip": plan_json["tip"], "ours": repos.fork_main,
        "behind": 0, "window_label": plan_json.get("window_label"),
        **await asyncio.to_thread(save_plan, run.ctx.settings, run.fork, commit, plan_json,
                                  run.ctx.store),
        "report_url": (f"{repos.fork_html_url}/blob/{commit}/{report_path}"
                       if report_path else None),
    }
    return plan_json, "opened"


async def _compute(run: RunContext, config: Config, tip_sha: str, cutoff: str | None
                   ) -> tuple[dict[str, Any], str, str | None] | PublishResult:
    """The engine's commit 1 and plan for this window, with what it reads fetched first."""
    repos = run.repos
    # Without the Workflows permission GitHub refuses a push that changes a workflow
    # file: the merge then keeps the fork's and lists upstream's changes to port by hand.
    workflows = await run.ctx.may_write_workflows(run.state.get("installation_id"))
    try:
        if cutoff is not None:  # the caches hold commits: the window's trees come first
            await window_trees(repos.upstream_git, repos.upstream_url, cutoff, tip_sha,
                               repos.upstream_token)
    except (MissingObject, DiskFull, GitTimeout) as exc:
        return await _cannot_sync(run, exc, cutoff)  # said on the head, then retried
    try:
        wanted = await asyncio.to_thread(_needs, run.ctx.settings, repos, config, tip_sha,
                                         cutoff)
    except ForksyncError as exc:
        return await _cannot_sync(run, _mend(repos, exc), cutoff)
    try:
        await fetch_needed(repos, wanted, run.token)
    except (MissingObject, DiskFull, GitTimeout) as exc:
        return await _cannot_sync(run, exc, cutoff)  # said on the head, then retried
    # (any other failure to fetch is the network's: the job fails and is retried)
    try:
        return await _run_engine(run.ctx.settings, repos, config, tip_sha, cutoff, workflows,
                                 learned_from_state(run.state.get("learned")))
    except ForksyncError as exc:
        return await _cannot_sync(run, _mend(repos, exc), cutoff)


async def resume_plan(run: RunContext, config: Config) -> dict[str, Any] | PublishResult:
    """The plan of the open sync PR's commit 1, which a killed run pushed and opened the PR
    for, with commit 1 and what the check reads of it in this replica's cache.

    The plan is its file or the store's copy; commit 1 comes from the sync branch where
    the cache lacks it (a takeover on another machine, a cache evicted since). Without a
    plan anywhere (one saved by an older forksync on another machine), both are computed
    again: the same inputs make the same commit 1. If fork main moved or the commit comes
    out different, a failing check on commit 1 says so."""
    from bot.sync.followup import fetch_read_files, have_head

    repos, sync = run.repos, run.sync

    async def access() -> tuple[str, str]:
        return repos.fork_url, run.token

    git = Git(repos.fork_git)
    try:
        plan_json = load_plan(sync, run.ctx.store)
    except ForksyncError:
        plan_json = None
    if plan_json is not None and await have_head(git, sync, sync["commit"], access):
        await fetch_read_files(git, plan_json, sync, sync["commit"], access)
        return plan_json
    made: tuple[dict[str, Any], str, str | None] | None = None
    if sync.get("ours") == repos.fork_main:
        computed = await _compute(run, config, sync["tip"], sync.get("cutoff"))
        if isinstance(computed, PublishResult):
            return computed
        made = computed
    if made is None or made[1] != sync["commit"]:
        await report_error(run.gh, run.fork, sync["commit"], "forksync cannot finish this sync",
                           RESUME_FAILED.format(pr=sync.get("pr"), commit=sync["commit"][:12]))
        await run.save()
        return run.result("refused")
    plan_json = made[0]
    sync.update(await asyncio.to_thread(save_plan, run.ctx.settings, run.fork,
                                        sync["commit"], plan_json, run.ctx.store))
    await run.save()
    return plan_json


def _mend(repos: Repos, exc: ForksyncError) -> ForksyncError:
    """An object a cache should hold is missing or corrupt: made afresh, if this job may.

    The blobs were fetched and checked just before, and commits and trees come with
    every fetch, so the cache is damaged; the job deletes it and runs again, once.
    """
    if isinstance(exc, MissingObject) and exc.repo in (FORK, UPSTREAM) and caches.may_mend():
        raise remote.CacheBroken(repos.fork_git if exc.repo == FORK else repos.upstream_git,
                                 str(exc)) from exc
    return exc


async def _cannot_sync(run: RunContext, exc: ForksyncError, cutoff: str | None) -> PublishResult:
    """Say why on the fork's head; retry what may mend, refuse what people must fix.

    The engine works on local repositories only, so most of its errors do not go away
    by retrying: people must act (fix the config, name the cutoff).
    """
    repos = run.repos
    broken = isinstance(exc, MissingObject | GitTimeout | DiskFull)
    advice = "" if cutoff is not None or isinstance(exc, GitError) else \
        FIRST_SYNC_ADVICE.format(upstream=run.state["upstream"], branch=repos.fork_branch)
    await report_error(run.gh, run.fork, repos.fork_main, "forksync cannot sync",
                       str(exc) + (RETRY_NOTE if broken else advice))
    await run.save()
    if broken:
        # A broken or stuck repository may mend (a mirror fetched again, a disk back):
        # the job fails, its lease goes back, and the queue retries it.
        raise exc
    return run.result("refused")


def _needs(settings: Settings, repos: Repos, config: Config, tip_sha: str,
           cutoff: str | None) -> Needs:
    """The blobs the engine will read, worked out from the caches' commits and trees."""
    return engine_needs(repos.fork_git, repos.upstream_git, from_rev=cutoff, to_rev=tip_sha,
                        config=config, fork_branch=repos.fork_branch,
                        workdir=str(settings.work_dir),
                        git_timeout=settings.git_timeout_seconds)


async def fetch_needed(repos: Repos, wanted: Needs, token: str) -> None:
    """The blobs the window needs, one fetch per repository (the caches are partial clones)."""
    await asyncio.to_thread(remote.fetch_blobs, repos.fork_git, repos.fork_url, wanted.fork,
                            token, repo=FORK)
    await asyncio.to_thread(remote.fetch_blobs, repos.upstream_git, repos.upstream_url,
                            wanted.upstream, repos.upstream_token, repo=UPSTREAM)


def find_sync_cutoff(repos: Repos, upstream: str, merged_tip: str | None) -> str | None:
    """The newest upstream commit the fork has synced, however the sync PR was merged.

    The engine reads every ``Upstream-Sync:`` line on main's history; a squash merge
    may have dropped them all, so the tip of the last sync PR merged counts too. The
    newest candidate, by upstream ancestry, wins.
    """
    fork, up = Git(repos.fork_git), Git(repos.upstream_git)
    found = find_cutoff(fork, f"refs/heads/{repos.fork_branch}", upstream, up)
    return newest_by_ancestry(up, [sha for sha in (found, merged_tip) if sha])


def _up_to_date(repos: Repos, cutoff: str, tip_sha: str) -> bool:
    """The fork's last sync already brought in the tip: an empty window, nothing to open."""
    return cutoff == tip_sha or Git(repos.upstream_git).is_ancestor(tip_sha, cutoff)


async def _run_engine(settings: Settings, repos: Repos, config: Config, tip_sha: str,
                      cutoff: str | None, workflows: bool, learned: Learned | None = None
                      ) -> tuple[dict[str, Any], str, str | None]:
    Git(repos.fork_git).run("update-ref", "-d", f"refs/heads/{_LOCAL_WORK_BRANCH}")
    result = await asyncio.to_thread(
        engine_sync, repos.fork_git, repos.upstream_git, from_rev=cutoff, to_rev=tip_sha,
        config=config, fork_branch=repos.fork_branch, branch=_LOCAL_WORK_BRANCH,
        workdir=str(settings.work_dir), git_timeout=settings.git_timeout_seconds,
        workflows=workflows, learned=learned)
    plan_json: dict[str, Any] = result.plan.to_json()
    return plan_json, result.commit, result.report_path
