"""The onboarding job against the simulator: one PR for a fork, nothing for anything else."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from bot.app.context import JobContext, Platform
from bot.app.settings import Settings
from bot.app.store.sqlite import SQLiteStore
from bot.sync.onboard import onboard, state_key
from tests.factory import PLAIN_CONFIG, Scenario
from tests.sim import Simulator, github_sim  # noqa: F401 - github_sim is a fixture

UPSTREAM, FORK = "THUDM/slime", "vime-org/vime"


@dataclass
class Setting:
    sim: Simulator
    scenario: Scenario
    ctx: JobContext

    async def onboard(self, repo: str = FORK) -> str:
        return await onboard(self.ctx, repo, self.sim.installation_id(repo))


@pytest.fixture
async def setting(github_sim: Simulator, tmp_path: Path) -> AsyncIterator[Setting]:  # noqa: F811
    s = Scenario(tmp_path / "repos", config=PLAIN_CONFIG)
    s.upstream_pr(4, "Four", files={"slime/four.py": "x = 4\n"})
    s.sync_fork(trailer=False, config=False)
    s.upstream_pr(5, "Five", files={"slime/five.py": "x = 5\n"})
    github_sim.create_repo("THUDM", "slime", s.upstream_dir)
    github_sim.create_repo("vime-org", "vime", s.fork_dir, fork_of=UPSTREAM)
    settings = Settings(app_id=github_sim.app_id, private_key=github_sim.private_key_pem,
                        webhook_secret="s", api_url=github_sim.base_url,
                        git_url=github_sim.base_url, data_dir=tmp_path / "data")
    store = SQLiteStore(settings.db_path)
    async with aiohttp.ClientSession() as session:
        yield Setting(github_sim, s, Platform(settings, store, session).context())
    store.close()
    assert github_sim.violations == [] and github_sim.unimplemented == []
    assert github_sim.internal_errors == [] and github_sim.response_violations == []


async def test_a_fork_gets_one_pr_however_often_the_job_runs(setting: Setting) -> None:
    sim = setting.sim
    assert await setting.onboard() == "opened"
    (pr,) = sim.prs(FORK)
    assert (pr.head_ref, pr.base_ref, pr.state) == ("forksync/onboarding", "main", "open")
    assert f"### The cutoff: `{setting.scenario.prs[4][:12]}`" in (pr.body or "")
    writes = len(sim.writes(FORK))
    assert await setting.onboard() == "open"
    assert len(sim.prs(FORK)) == 1 and len(sim.writes(FORK)) == writes
    state = await setting.ctx.get_state(state_key(FORK))
    assert state is not None and state["pr"] == pr.number
    assert state["cutoff"] == setting.scenario.prs[4]


async def test_a_declined_pr_is_never_opened_again(setting: Setting) -> None:
    assert await setting.onboard() == "opened"
    (pr,) = setting.sim.prs(FORK)
    await setting.sim.close_pr(FORK, pr.number)
    assert await setting.onboard() == "declined"
    assert len(setting.sim.prs(FORK)) == 1


async def test_the_upstream_itself_gets_nothing(setting: Setting) -> None:
    assert await setting.onboard(UPSTREAM) == "not-a-fork"
    assert setting.sim.prs(UPSTREAM) == [] and setting.sim.writes(UPSTREAM) == []


async def test_a_branch_someone_else_named_forksync_onboarding_is_left_alone(
        setting: Setting) -> None:
    sim = setting.sim
    theirs = await sim.commit(FORK, "forksync/onboarding", {"notes.txt": "mine\n"}, "Mine",
                              user="vera")
    assert await setting.onboard() == "refused"
    assert sim.ref(FORK, "forksync/onboarding") == theirs and sim.prs(FORK) == []


async def test_a_fork_with_a_config_needs_no_onboarding(setting: Setting) -> None:
    await setting.sim.commit(FORK, "main", {".github/forksync.yml": PLAIN_CONFIG}, "Config",
                             user="vera")
    assert await setting.onboard() == "configured"
    assert setting.sim.prs(FORK) == []
