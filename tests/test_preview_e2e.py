"""End to end: the App posts exactly what ``forksync sync --preview`` wrote, and it works.

The real ``forksync serve`` opens the sync PR of :func:`tests.factory.make_threads` on the
GitHub simulator (every request checked against GitHub's OpenAPI description), while the
CLI previews the same window from clones of the same repositories. The request bodies
the simulator received are the preview's files, byte for byte; and the command a
comment offers where GitHub cannot take a suggestion does resolve its region.
"""

from __future__ import annotations

import json
import math
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.engine.markers import find_marker_regions
from tests.factory import make_threads
from tests.sim import Simulator
from tests.sim import fixtures as sim_fixtures
from tests.test_e2e import FORK, Bot, World
from tests.test_preview import forksync

github_sim = sim_fixtures.github_sim

REVIEWS = "/repos/{owner}/{repo}/pulls/{pull_number}/reviews"
COMMENTS = "/repos/{owner}/{repo}/pulls/{pull_number}/comments"
CHECKS = "/repos/{owner}/{repo}/check-runs"
PULLS = "/repos/{owner}/{repo}/pulls"


@pytest.fixture
async def threads_world(github_sim: Simulator, tmp_path: Path) -> AsyncIterator[World]:
    s = make_threads(tmp_path / "repos")
    github_sim.create_repo("THUDM", "slime", s.upstream_dir, install=False)
    github_sim.create_repo("vime-org", "vime", s.fork_dir, install=False)
    bot = Bot(github_sim, tmp_path / "bot")
    await bot.start()
    github_sim.bot_url = f"{bot.url}/webhook"
    try:
        yield World(github_sim, s, bot, tmp_path)
    finally:
        bot.stop()


def bodies(sim: Simulator, method: str, operation: str) -> list[Any]:
    return [w.body for w in sim.writes(FORK) if (w.method, w.operation) == (method, operation)]


async def test_the_app_posts_the_previews_request_bodies_and_its_commands_work(
        threads_world: World, tmp_path: Path) -> None:
    world, sim = threads_world, threads_world.sim
    s = world.scenario
    # The preview, from clones of the repositories the simulator serves.
    for name, src in (("fork.git", s.fork_dir), ("up.git", s.upstream_dir)):
        subprocess.run(["git", "clone", "-q", "--bare", str(src), str(tmp_path / name)],
                       check=True)
    out = tmp_path / "preview"
    done = forksync("sync", "--fork", str(tmp_path / "fork.git"), "--upstream",
                    str(tmp_path / "up.git"), "--workdir", str(tmp_path / "cli-work"),
                    "--preview", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    review = json.loads((out / "review.json").read_text())
    file_comments = json.loads((out / "file-comments.json").read_text())
    check = json.loads((out / "check.json").read_text())

    # Installing the App on the fork opens the window's sync PR.
    await sim.install("THUDM")
    await sim.install("vime-org")
    await world.idle()
    pr = world.sync_pr()
    assert pr.head_sha == review["commit_id"]  # the same commit 1
    assert bodies(sim, "POST", REVIEWS) == [review]
    assert bodies(sim, "POST", COMMENTS) == file_comments and len(file_comments) == 1
    assert bodies(sim, "POST", CHECKS) == [check]
    # The PR opens saying nothing of threads; once the review is in, its body is pr.md.
    (opened,) = bodies(sim, "POST", PULLS)
    assert "review thread" not in opened["body"]
    (updated,) = bodies(sim, "PATCH", "/repos/{owner}/{repo}/pulls/{pull_number}")
    assert updated == {"body": (out / "pr.md").read_text()} and pr.body == updated["body"]
    assert "5 of 7 review items have a review thread" in pr.body
    world.assert_clean()  # every request valid against GitHub's OpenAPI description

    # What GitHub made of them: a thread per item whose file is in the diff.
    threads = sim.review_comments(FORK, pr.number)
    assert [(c.path, c.subject_type, c.start_line, c.line) for c in threads] == [
        ("vime/utils/arguments.py", "line", None, 10),
        ("vime/utils/legacy.py", "line", None, 1),
        ("vime/utils/table.py", "line", None, 10),
        ("vime/utils/table.py", "line", 96, 105),
        ("imgs/logo.png", "file", None, None)]
    items = 7
    assert len(sim.writes(FORK)) <= 5 + math.ceil(items / 50)

    # Q6's region spans two hunks: its comment offers a command, which resolves it.
    sim.add_collaborator(FORK, "vera", "write")
    (q6,) = [c for c in threads if c.body.startswith("**Q6 ")]
    assert "spans 2 hunks" in q6.body and "```suggestion" not in q6.body
    await sim.reply(FORK, pr.number, q6.id, "vera", "/sync answer Q6 theirs")
    await world.idle()
    pr = world.sync_pr()
    text = world.file_at(pr.head_sha, "vime/utils/table.py")
    regions = find_marker_regions(text)
    # Only Q7's region is left, moved up: Q6's 67 lines (L10–76) became theirs' 21.
    assert [r.start_line for r in regions] == [96 - 67 + 21]
    assert "row_10 = 10  # upstream\n" in text and "row_30 = 30  # upstream\n" in text
    run = world.check(pr.head_sha)
    assert run.conclusion == "failure"
    assert [a["title"] for a in run.annotations if a["annotation_level"] == "failure"] == [
        "Q7: conflict markers remain"]
    world.assert_clean()
