"""Step 1: fork main and the upstream, fetched into the local caches; the fork's config.

Writes ``upstream``, ``upstream_branch``, ``upstream_mirror``, ``fork_branch`` and
``last_seen_upstream`` to the fork's state, and the run's :class:`Repos`. Nothing to
resume: every run fetches the newest heads. The upstream is read as
:mod:`bot.sync.access` allows, or the run ends with a failing check saying why.
"""

from __future__ import annotations

import asyncio
import logging

from bot.app.settings import Settings
from bot.engine.config import CONFIG_PATH, Config, load_config, upstream_only
from bot.engine.git import Git
from bot.engine.merge import FORK, UPSTREAM
from bot.engine.window import resolve_rev
from bot.errors import ForksyncError, GitError
from bot.github import remote
from bot.github.checks import report_error
from bot.github.client import GitHubClient
from bot.sync.access import UpstreamRefused, upstream_access
from bot.sync.publish.context import PublishResult, Repos, RunContext

log = logging.getLogger(__name__)


async def fetch(run: RunContext) -> Config | PublishResult:
    """Fetch fork main and the upstream into the caches; the fork's config, or an outcome."""
    settings, fork, gh = run.ctx.settings, run.fork, run.gh
    fork_repo = await gh.getitem(f"/repos/{fork}")
    fork_branch = fork_repo.get("default_branch") or "main"
    fork_url = settings.clone_url(fork, fork_repo.get("clone_url"))
    fork_git = await asyncio.to_thread(remote.ensure_mirror, settings.cache_dir, fork)
    before = Git(fork_git).rev_parse(f"refs/heads/{fork_branch}")
    # The history's trees are never read: fork main's tree (or what changed in it since
    # the last sync) and its config's blob come, nothing else.
    fork_main = await asyncio.to_thread(remote.fetch_branch, fork_git, fork_url, fork_branch,
                                        run.token)
    if fork_main is not None:
        await asyncio.to_thread(remote.fetch_files, fork_git, fork_url, [fork_main],
                                [CONFIG_PATH], run.token, base=before, repo=FORK)
    config_text = await asyncio.to_thread(read_config_text, fork_git,
                                          f"refs/heads/{fork_branch}")
    if fork_main is None or config_text is None:
        log.info("%s has no %s on %s: nothing to sync", fork, CONFIG_PATH, fork_branch)
        return run.result("not-configured")
    try:
        if upstream_only(config_text, CONFIG_PATH):
            log.info("%s: its %s only lists downstream forks: nothing to sync", fork,
                     CONFIG_PATH)
            return run.result("not-configured")
        config = load_config(config_text, CONFIG_PATH)
    except ForksyncError as exc:
        await report_error(gh, fork, fork_main, "The forksync config has an error", str(exc))
        return run.result("refused")
    upstream, branch = config.upstream_repo, config.upstream_branch
    run.state.update(upstream=upstream, upstream_branch=branch,
                     upstream_mirror=config.upstream_mirror, fork_branch=fork_branch)

    try:
        access = await upstream_access(run.ctx, fork, run.state.get("installation_id"),
                                       upstream)
    except UpstreamRefused as exc:
        await run.save()  # the upstream and its mirror are recorded even so
        await report_error(gh, fork, fork_main, "forksync cannot read the upstream", str(exc))
        return run.result("refused")
    log.info("%s: reading the upstream %s (%s)", fork, upstream, access.how)
    upstream_url = access.url
    upstream_git = await asyncio.to_thread(remote.ensure_mirror, settings.cache_dir, upstream)
    # The window's trees come once the window is known (prepare).
    upstream_head = await asyncio.to_thread(remote.fetch_branch, upstream_git, upstream_url,
                                            branch, access.token)
    if upstream_head is None:
        raise GitError(f"the upstream {upstream} has no branch {branch}")
    run.state["last_seen_upstream"] = upstream_head
    run.repos = Repos(fork_git, upstream_git, fork_url, upstream_url,
                      fork_repo.get("html_url") or f"https://github.com/{fork}",
                      fork_branch, fork_main, upstream_head, access.token)
    return config


def resolve_tip(repos: Repos, upstream_branch: str, tip: str | None) -> str:
    """The window's tip: the upstream head just fetched, or the SHA or ``#N`` asked for."""
    if not tip:
        return repos.upstream_head
    return resolve_rev(Git(repos.upstream_git), tip, f"refs/heads/{upstream_branch}", "tip")


async def window_trees(upstream_git: str, url: str, cutoff: str, tip: str,
                       token: str | None) -> None:
    """The trees of the window's commits (the caches fetch commits alone).

    The cutoff's tree is there already when the previous sync read it: then only what
    the window changed is fetched.
    """
    up = Git(upstream_git)
    if not await asyncio.to_thread(up.is_ancestor, cutoff, tip):
        return  # not a window: the engine says so
    chain = await asyncio.to_thread(
        up.text, "rev-list", "--first-parent", f"{cutoff}..{tip}", "--")
    await asyncio.to_thread(remote.fetch_trees, upstream_git, url, [cutoff, *chain.split()],
                            token, base=cutoff, repo=UPSTREAM)


def read_config_text(git_dir: str, rev: str) -> str | None:
    proc = Git(git_dir).run_proc("cat-file", "blob", f"{rev}:{CONFIG_PATH}")
    return proc.stdout.decode("utf-8", "replace") if proc.returncode == 0 else None


async def clone_url(gh: GitHubClient, settings: Settings, full_name: str) -> str:
    """The URL git fetches and pushes ``owner/repo`` at (GitHub's own, or the configured base)."""
    if settings.git_url:
        return settings.clone_url(full_name)
    repo = await gh.getitem(f"/repos/{full_name}")
    return settings.clone_url(full_name, repo.get("clone_url"))
