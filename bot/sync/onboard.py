"""Onboarding, the way Renovate does it: one PR proposing `.github/forksync.yml` to a new fork.

When the App is installed on a GitHub fork that has no config, the ``"onboard"`` job
opens ONE PR from ``forksync/onboarding``: the config (upstream from GitHub's fork
parent, translation rules as a commented template) in a commit that carries the
inferred cutoff as the first ``Upstream-Sync:`` trailer. Merging it registers the
fork and starts the first sync; closing it unmerged is an answer too, so the PR is
never opened again. A repository that is not a fork (the upstream itself, say) gets
nothing. Every step is find-or-create, so the job is safe to run twice.

State (``Store`` key ``onboarding:<owner>/<repo>``): ``pushed`` (heads the job
wrote), ``pr``, ``cutoff``, ``outcome``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from bot.app.context import JobContext
from bot.engine.config import CONFIG_PATH
from bot.engine.git import Git
from bot.engine.onboarding import (
    ONBOARDING_BRANCH,
    ONBOARDING_TITLE,
    onboarding_commit,
    propose_from_repos,
)
from bot.engine.window import find_cutoff, last_trailer
from bot.github import remote
from bot.github.client import GitHubClient, get_or_none

log = logging.getLogger(__name__)

ONBOARD = "onboard"
STATE_PREFIX = "onboarding:"


def state_key(fork: str) -> str:
    return f"{STATE_PREFIX}{fork}"


async def enqueue_onboarding(ctx: JobContext, fork: str, installation_id: int | None) -> None:
    """Queue the onboarding of ``fork`` (once: later installs find its PR and stop)."""
    await ctx.enqueue(ONBOARD, fork, {"fork": fork, "installation_id": installation_id},
                      f"{ONBOARD}:{fork}")


def is_onboarding_pr(data: dict[str, Any]) -> bool:
    """The App's own onboarding PR: its branch, in the repository itself (not a fork's PR)."""
    pull = data["pull_request"]
    head_repo = (pull["head"].get("repo") or {}).get("full_name")
    return bool(pull["head"]["ref"] == ONBOARDING_BRANCH
                and head_repo == data["repository"]["full_name"])


async def _existing_pr(gh: GitHubClient, fork: str) -> dict[str, Any] | None:
    owner = fork.split("/", 1)[0]
    async for pull in gh.getiter(f"/repos/{fork}/pulls?state=all&head={owner}:"
                                 f"{ONBOARDING_BRANCH}"):
        found: dict[str, Any] = pull
        return found
    return None


async def onboard(ctx: JobContext, fork: str, installation_id: int | None) -> str:
    """Job ``"onboard"``: open the onboarding PR if the fork needs one; what happened."""
    gh = await ctx.gh_for(installation_id)
    repo = await gh.getitem(f"/repos/{fork}")
    branch = repo.get("default_branch") or "main"
    if await get_or_none(gh, f"/repos/{fork}/contents/{CONFIG_PATH}?ref={branch}") is not None:
        return "configured"
    parent = repo.get("parent")
    if not isinstance(parent, dict) or not parent.get("full_name"):
        # Not a GitHub fork: no upstream to propose. The upstream itself lands here when
        # the App is installed on it for its webhooks.
        log.info("onboarding %s: not a fork, no upstream to propose", fork)
        return "not-a-fork"
    state = await ctx.get_state(state_key(fork)) or {}
    existing = await _existing_pr(gh, fork)
    if existing is not None:
        outcome = ("open" if existing.get("state") == "open" else
                   "merged" if existing.get("merged_at") else "declined")
        state.update(pr=existing["number"], outcome=outcome)
        await ctx.put_state(state_key(fork), state)
        return outcome

    settings, token = ctx.settings, await ctx.git_token_for(installation_id)
    upstream = str(parent["full_name"])
    upstream_branch = parent.get("default_branch") or "main"
    fork_url = settings.clone_url(fork, repo.get("clone_url"))
    upstream_url = settings.clone_url(upstream, parent.get("clone_url"))
    fork_git = await asyncio.to_thread(remote.ensure_mirror, settings.cache_dir, fork)
    # Whole: the cutoff search translates whole upstream trees (bot.engine.cutoff), so
    # these caches hold every blob, unlike a sync's partial ones.
    await asyncio.to_thread(remote.fetch, fork_git, fork_url,
                            [f"+refs/heads/{branch}:refs/heads/{branch}"], token, blobs=True)
    if find_cutoff(Git(fork_git), f"refs/heads/{branch}", upstream) is not None:
        return "has-cutoff"  # someone recorded it already; the config is all that is missing
    upstream_git = await asyncio.to_thread(remote.ensure_mirror, settings.cache_dir, upstream)
    await asyncio.to_thread(remote.fetch, upstream_git, upstream_url,
                            [f"+refs/heads/{upstream_branch}:refs/heads/{upstream_branch}"],
                            token, blobs=True)
    proposal = await asyncio.to_thread(
        propose_from_repos, Git(fork_git), f"refs/heads/{branch}", Git(upstream_git),
        f"refs/heads/{upstream_branch}", upstream_repo=upstream,
        upstream_branch=upstream_branch, fork_branch=branch,
        workdir=settings.data_dir / "work", fork_name=str(repo.get("name") or ""))
    commit = await asyncio.to_thread(onboarding_commit, proposal)
    head = await asyncio.to_thread(remote.remote_head, fork_url, ONBOARDING_BRANCH, token)
    pushed: list[str] = state.setdefault("pushed", [])
    if head is None:
        pushed.append(commit)
        await ctx.put_state(state_key(fork), state)  # before the push: a crash after it
        await asyncio.to_thread(remote.push_with_lease, proposal.work_git_dir, fork_url,
                                commit, ONBOARDING_BRANCH, None, token)
    elif head not in pushed:
        # Someone else's branch by that name: never overwrite it, and say nothing twice.
        log.warning("onboarding %s: %s exists at %s, not ours; no PR", fork, ONBOARDING_BRANCH,
                    head[:12])
        return "refused"
    pull = await gh.post(f"/repos/{fork}/pulls", data={
        "title": ONBOARDING_TITLE, "head": ONBOARDING_BRANCH, "base": branch,
        "body": proposal.explanation(), "maintainer_can_modify": True})
    state.update(pr=pull["number"], cutoff=proposal.cutoff, outcome="open")
    await ctx.put_state(state_key(fork), state)
    log.info("onboarding %s: opened #%s, cutoff %s (%d of %d candidates measured)", fork,
             pull["number"], proposal.cutoff[:12], len(proposal.guess.measured),
             len(proposal.guess.candidates))
    return "opened"


async def onboard_job(ctx: JobContext, payload: dict[str, Any]) -> None:
    installation = payload.get("installation_id")
    await onboard(ctx, payload["fork"], int(installation) if installation is not None else None)


async def merged_cutoff(ctx: JobContext, fork: str, number: int) -> str | None:
    """The cutoff a merged onboarding PR's commits carry: the last trailer among them.

    Read from the PR, not from main: a squash merge may drop the trailer from main's
    history, and people may have pushed their own commits (the rules) on top of it.
    """
    gh = await ctx.gh_for()
    found = None
    async for commit in gh.getiter(f"/repos/{fork}/pulls/{number}/commits"):
        found = last_trailer((commit.get("commit") or {}).get("message") or "") or found
    return found


__all__ = ["ONBOARD", "enqueue_onboarding", "is_onboarding_pr", "merged_cutoff", "onboard",
           "onboard_job", "state_key"]
