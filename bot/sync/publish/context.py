"""What the steps of one publish run share: the job's clients, the repositories, the state.

The state is saved after every step that GitHub or the fork's branch can see, so a run
killed at any point is continued, not repeated, by the next one.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from bot.app.context import JobContext
from bot.github.client import GitHubClient
from bot.sync.state import load_fork_state, save_fork_state


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
class Repos:
    """The two local caches and what was read from them at the start of the job."""

    fork_git: str
    upstream_git: str
    fork_url: str
    upstream_url: str
    fork_html_url: str
    fork_branch: str
    fork_main: str
    upstream_head: str
    upstream_token: str | None = None  # what reads the upstream (bot.sync.access); None: anonymous


class RunContext:
    """One run of the ``"sync"`` job: its collaborators, and the fork's state as it goes."""

    def __init__(self, ctx: JobContext, fork: str, gh: GitHubClient, token: str) -> None:
        self.ctx = ctx
        self.fork = fork
        self.gh = gh
        self.token = token
        self.writes_before = gh.write_count
        self.state: dict[str, Any] = {}
        self._repos: Repos | None = None

    @classmethod
    async def start(cls, ctx: JobContext, fork: str, installation_id: int | None) -> RunContext:
        """The run's client and token, and the fork's state as the last run left it."""
        run = cls(ctx, fork, await ctx.gh_for(installation_id),
                  await ctx.git_token_for(installation_id))
        run.state = await asyncio.to_thread(load_fork_state, ctx.store, fork)
        run.state["installation_id"] = installation_id
        return run

    @property
    def repos(self) -> Repos:
        assert self._repos is not None, "fetch first"
        return self._repos

    @repos.setter
    def repos(self, repos: Repos) -> None:
        self._repos = repos

    @property
    def sync(self) -> dict[str, Any]:
        sync: dict[str, Any] = self.state.setdefault("sync", {})
        return sync

    async def save(self) -> None:
        await asyncio.to_thread(save_fork_state, self.ctx.store, self.fork, self.state)

    def result(self, action: str) -> PublishResult:
        sync = self.state.get("sync") or {}
        return PublishResult(self.fork, action, pr_number=sync.get("pr"),
                             branch=sync.get("branch"), commit=sync.get("commit"),
                             writes=self.gh.write_count - self.writes_before,
                             unanchored=list(sync.get("unanchored", [])))
