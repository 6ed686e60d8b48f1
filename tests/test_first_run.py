"""A new user's first run, end to end against the simulator, in one test.

`forksync setup` registers the App with GitHub's manifest flow and writes `.env`;
`forksync serve` starts from that file alone; installing the App on a GitHub fork
with no config opens ONE onboarding PR with the inferred cutoff; the user puts the
translation rules into it and merges it; the first sync PR opens at that cutoff.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.factory import FORK_MAINTAINER, PLAIN_CONFIG, Scenario
from tests.sim import Simulator, github_sim  # noqa: F401 - github_sim is a fixture
from tests.sim.apps import press_the_button
from tests.test_e2e import FORK, UPSTREAM, Bot, World
from tests.test_setup import SetupProcess, read_env

CONFIG = ".github/forksync.yml"
A = "slime/utils/arguments.py"


def unsynced_fork(root: Path) -> Scenario:
    """slime, and vime made from it at PR #6 with the Fork button, translated by hand."""
    s = Scenario(root, config=PLAIN_CONFIG)
    for n in range(4, 7):
        s.upstream_pr(n, f"Tune module {n}", "alice", files={f"slime/m{n}.py": f"v = {n}\n"})
    s.sync_fork(trailer=False, config=False, message="Start vime from slime")
    s.fork_commit("vime: our own argument default", {
        "vime/utils/arguments.py": s.translate_text(s.upstream_file(A), A).decode().replace(
            "default=1)", "default=2)  # vime", 1)}, author=FORK_MAINTAINER)
    for n in range(7, 10):
        s.upstream_pr(n, f"Tune module {n} again", "bob", files={f"slime/m{n - 3}.py": "v = 0\n"})
    s.upstream_pr(10, "Default of 4", "carol", files={
        A: s.upstream_file(A).decode().replace("default=1)", "default=4)", 1)})
    return s


@pytest.mark.parametrize("method", ["merge", "squash"])
async def test_from_setup_through_onboarding_to_the_first_sync_pr(
        github_sim: Simulator, tmp_path: Path, method: str) -> None:  # noqa: F811
    sim = github_sim
    s = unsynced_fork(tmp_path / "repos")
    sim.create_repo("THUDM", "slime", s.upstream_dir, install=False)
    sim.create_repo("vime-org", "vime", s.fork_dir, install=False, fork_of=UPSTREAM)
    sim.bot_url = None  # no App exists yet

    # 1. `forksync setup`: the manifest flow writes .env.
    bot = Bot(sim, tmp_path / "bot")
    setup = SetupProcess("--webhook-url", f"{bot.url}/webhook", "--api-url", sim.base_url,
                         "--github-url", sim.base_url, "--env-file", str(tmp_path / ".env"))
    try:
        status, _ = await press_the_button(setup.page)
        code, out, err = setup.finish()
        assert "Install it on your fork" in out
    finally:
        setup.kill()
    assert status == 200 and code == 0, err
    assert sim.bot_url == f"{bot.url}/webhook"

    # 2. `forksync serve` with the .env setup wrote (the simulator's old key is gone).
    env = read_env(tmp_path / ".env")
    for name in ("FORKSYNC_APP_ID", "FORKSYNC_PRIVATE_KEY", "FORKSYNC_WEBHOOK_SECRET",
                 "FORKSYNC_API_URL", "FORKSYNC_GIT_URL"):
        bot.env[name] = env[name]
    await bot.start()
    world = World(sim, s, bot, tmp_path)
    try:
        # 3. Installed on the fork only (nobody can install it on someone else's upstream).
        await sim.install("vime-org")
        await world.idle()
        (pr,) = sim.prs(FORK)
        assert (pr.head_ref, pr.title, pr.draft) == ("forksync/onboarding",
                                                     "Configure forksync", False)
        cutoff = s.prs[6]
        assert f"### The cutoff: `{cutoff[:12]}`" in pr.body
        assert f"Upstream-Sync: {UPSTREAM}@{cutoff}" in pr.body
        assert "the first sync PR will bring in the 4 upstream commits after it (#7..#10)" \
            in pr.body
        proposed = world.file_at(pr.head_sha, CONFIG)
        assert proposed.startswith("# forksync: keep this fork in sync with THUDM/slime.")
        assert sim.check_runs(FORK) == []  # nothing fails before the user opted in
        # Installing again (another event) opens nothing new.
        await sim.add_installation_repos("vime-org", [FORK])
        await world.idle()
        assert len(sim.prs(FORK)) == 1

        # 4. The user puts the translation rules into the proposal and merges it.
        rules = "\n".join(line for line in PLAIN_CONFIG.splitlines()
                          if not line.startswith("#")) + "\n"
        await sim.commit(FORK, pr.head_ref, {CONFIG: rules}, "Our translation rules",
                         user="vera")
        await world.idle()
        await sim.merge_pr(FORK, pr.number, method=method, user="vera")
        await world.idle()

        # 5. The first sync PR: the window starts at the inferred cutoff.
        (sync_pr,) = world.sync_prs()
        assert sync_pr.draft and sync_pr.state == "open"
        assert f"after cutoff `{cutoff[:10]}`" in sync_pr.body
        assert "#7..#10" in sync_pr.body
        message = subprocess.run(["git", f"--git-dir={sim.git_dir(FORK)}", "log", "-1",
                                  "--format=%B", sync_pr.head_sha], capture_output=True,
                                 text=True, check=True).stdout
        assert f"Upstream-Sync: {UPSTREAM}@{sim.ref(UPSTREAM, 'main')}" in message
        (comment,) = sim.review_comments(FORK, sync_pr.number)  # vime's default vs #10's
        assert comment.path == "vime/utils/arguments.py"
        assert world.check(sync_pr.head_sha).conclusion == "failure"
        world.assert_clean()
    finally:
        bot.stop()
