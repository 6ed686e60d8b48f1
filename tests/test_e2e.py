"""End to end: the ``forksync serve`` process against the GitHub simulator.

Real HTTP and real git on both sides: the simulator serves the REST API, git smart
HTTP and signed webhooks (and checks every request against GitHub's OpenAPI
description); the bot runs as its own process, authenticates as the App, and is
killed with SIGKILL in one test. Repositories come from ``tests.factory``.

Every test runs twice: with the zero-config SQLite store, and with PostgreSQL
(``FORKSYNC_DATABASE_URL``, migrated by ``forksync db upgrade`` first, as a deployment
does) on the server the test session starts.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.app.store import open_store
from bot.engine.markers import find_marker_regions, split_lines
from bot.engine.report import BEGIN, END
from bot.sync.state import load_fork_state, save_fork_state
from tests.factory import PLAIN_CONFIG, Scenario
from tests.sim import Simulator, github_sim, signature  # noqa: F401 - github_sim is a fixture

REPO_ROOT = Path(__file__).resolve().parents[1]
UPSTREAM = "THUDM/slime"
FORK = "vime-org/vime"
A, B, C = "vime/table_a.py", "vime/table_b.py", "vime/table_c.py"
D, E = "vime/table_d.py", "vime/table_e.py"  # twins: one conflict, twice
M, N = "vime/table_mu.py", "vime/table_nu.py"  # under a `manual` policy (world param)
LEASE_SECONDS = 2.0




def markers(run: Any) -> list[Any]:
    """The check's annotations on files, without the config warnings on the config file."""
    return [a for a in run.annotations if a["path"] != ".github/forksync.yml"]

def table(name: str, n: int = 40) -> str:
    return "".join(f"{name}_{i} = {i}\n" for i in range(1, n + 1))


def edit(text: str, changes: dict[int, str]) -> str:
    lines = split_lines(text)
    for number, line in changes.items():
        lines[number - 1] = line + "\n"
    return "".join(lines)


def build_scenario(root: Path, *, third_table: bool = False,
                   twin_tables: bool = False, manual: bool = False) -> Scenario:
    """Upstream + translated fork; the fork changed lines that upstream is about to change
    (beta_10) and lines right next to them (alpha_4, beta_29): git conflicts on all three,
    and the finer re-merge has a starting point for the two neighbours. ``third_table``
    adds C, where both sides change the same three lines (three Decides, no suggestion).
    ``twin_tables`` adds D and E, one table in two places, where both sides change the
    same line alike in both: the same conflict twice (twins). ``manual`` adds M and N
    under a ``manual`` policy, which the fork never changes."""
    config = PLAIN_CONFIG + (f"policies:\n  - {{paths: ['{M}', '{N}'], action: manual}}\n"
                             if manual else "")
    s = Scenario(root, config=config)
    twin_up = {f"slime/{Path(p).name}": table("delta") for p in (D, E)} if twin_tables else {}
    manual_up = {f"slime/{Path(p).name}": table(Path(p).stem[-2:]) for p in (M, N)} \
        if manual else {}
    s.upstream_pr(4, "Add tables", "dana", files={"slime/table_a.py": table("alpha"),
                                                  "slime/table_b.py": table("beta"),
                                                  **({"slime/table_c.py": table("gamma")}
                                                     if third_table else {}), **twin_up,
                                                  **manual_up})
    s.sync_fork()
    s.fork_commit("Fork: tune the tables", {
        A: edit(table("alpha"), {4: "alpha_4 = 40  # fork"}),
        B: edit(table("beta"), {10: "beta_10 = 100  # fork", 29: "beta_29 = 290  # fork"}),
        **({C: edit(table("gamma"), {n: f"gamma_{n} = {n}0  # fork" for n in (5, 15, 25)})}
           if third_table else {}),
        **({p: edit(table("delta"), {7: "delta_7 = 70  # fork"}) for p in (D, E)}
           if twin_tables else {})})
    return s


UPSTREAM_CHANGE = {
    "slime/table_a.py": edit(table("alpha"), {5: "alpha_5 = 5000  # upstream",
                                              25: "alpha_25 = 25000  # upstream"}),
    "slime/table_b.py": edit(table("beta"), {10: "beta_10 = 1000  # upstream",
                                             30: "beta_30 = 3000  # upstream"}),
    "slime/fresh.py": "fresh = True\n",
}
TWIN_CHANGE = {f"slime/{Path(p).name}": edit(table("delta"), {7: "delta_7 = 7000  # upstream"})
               for p in ("vime/table_d.py", "vime/table_e.py")}
C_CHANGE = {"slime/table_c.py": edit(table("gamma"), {n: f"gamma_{n} = {n}000  # upstream"
                                                      for n in (5, 15, 25)})}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Bot:
    """The ``forksync serve`` process, configured like a deployment pointed at the simulator.

    ``database_url`` shares a PostgreSQL database between several bots (replicas);
    without it each bot keeps SQLite in its own data directory. ``role`` is passed to
    ``forksync serve --role``.
    """

    def __init__(self, sim: Simulator, data_dir: Path, *, database_url: str | None = None,
                 role: str = "all", lease_seconds: float | None = LEASE_SECONDS,
                 port: int | None = None) -> None:
        self.role = role
        # port=0: the kernel picks a free port at the first start (no other process can
        # take it first) and restarts reuse it; None: one picked now, so that the URL is
        # known before the bot runs (the App's registration names it).
        self.port = free_port() if port is None else port
        self.data_dir = data_dir
        self.log_path = data_dir / "serve.log"
        data_dir.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("FORKSYNC_", "GITHUB_", "GIT_"))}
        env.update({
            "FORKSYNC_APP_ID": str(sim.app_id), "FORKSYNC_PRIVATE_KEY": sim.private_key_pem,
            "FORKSYNC_WEBHOOK_SECRET": sim.webhook_secret, "FORKSYNC_API_URL": sim.base_url,
            "FORKSYNC_GIT_URL": sim.base_url, "FORKSYNC_DATA_DIR": str(data_dir),
            "FORKSYNC_HOST": "127.0.0.1", "FORKSYNC_WORKERS": "2", "FORKSYNC_LOG_LEVEL": "INFO",
            "FORKSYNC_POLL_INTERVAL": "0",  # no polls: the tests drive every sync
            "FORKSYNC_RETRY_BACKOFF_SECONDS": "0.5", "FORKSYNC_RETRY_BACKOFF_CAP_SECONDS": "2"})
        if lease_seconds is not None:  # None: the default lease, as deployed
            # Short: a killed process's job is taken again within seconds.
            env["FORKSYNC_JOB_LEASE_SECONDS"] = str(lease_seconds)
        if database_url is not None:
            env["FORKSYNC_DATABASE_URL"] = database_url
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        # Port 0 rather than a port picked in advance: no other process can take it first.
        self.env["FORKSYNC_PORT"] = str(self.port)
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child process
        self.proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "serve",
                                      "--role", self.role],
                                     cwd=REPO_ROOT, env=self.env, stdout=log,
                                     stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.port == 0:
                with open(self.log_path, "rb") as fh:
                    fh.seek(offset)
                    found = re.search(rb"forksync serving on 127\.0\.0\.1:(\d+)", fh.read())
                if found is None:
                    if self.proc.poll() is not None:
                        break
                    await asyncio.sleep(0.05)
                    continue
                self.port = int(found.group(1))
            try:
                await self.health()
                return
            except (aiohttp.ClientError, OSError):
                if self.proc.poll() is not None:
                    break
                await asyncio.sleep(0.1)
        raise AssertionError(f"forksync serve did not start:\n{self.log_tail()}")

    def upgrade_db(self) -> str:
        """``forksync db upgrade``, as a deployment runs it before starting the replicas."""
        proc = subprocess.run([sys.executable, "-m", "bot.cli", "db", "upgrade"], cwd=REPO_ROOT,
                              env=self.env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    def kill9(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)

    async def health(self) -> dict[str, Any]:
        async with aiohttp.ClientSession() as session, \
                session.get(f"{self.url}/healthz", timeout=aiohttp.ClientTimeout(total=5)) as r:
            data: dict[str, Any] = await r.json()
            return data

    def log_tail(self, lines: int = 60) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


@dataclass
class World:
    sim: Simulator
    scenario: Scenario
    bot: Bot
    tmp: Path

    async def idle(self, timeout: float = 120) -> dict[str, int]:
        """Wait until every webhook is delivered and the bot's queue is empty, twice in a row."""
        deadline = time.monotonic() + timeout
        calm = 0
        while True:
            await self.sim.wait_deliveries()
            jobs = (await self.bot.health())["jobs"]
            calm = calm + 1 if jobs["queued"] == 0 and jobs["running"] == 0 else 0
            if calm >= 3:
                assert jobs["dead"] == 0, f"a job died:\n{self.bot.log_tail()}"
                return dict(jobs)
            if time.monotonic() > deadline:
                raise AssertionError(f"the bot is still busy ({jobs}):\n{self.bot.log_tail()}")
            await asyncio.sleep(0.2)

    async def merge_upstream(self, branch: str = "tune",
                             extra: dict[str, str] | None = None) -> str:
        """An upstream PR is merged on GitHub: sends push and pull_request closed."""
        await self.sim.commit(UPSTREAM, branch, UPSTREAM_CHANGE | (extra or {}),
                              "Tune the tables", user="alice")
        pr = await self.sim.open_pr(UPSTREAM, branch, title="Tune the tables", user="alice")
        return await self.sim.merge_pr(UPSTREAM, pr.number, method="squash", user="zhuzilin")

    async def open_sync(self, collaborator: str = "vera",
                        extra: dict[str, str] | None = None) -> Any:
        """``collaborator`` may write to the fork; an upstream PR merges (with ``extra``
        files changed too); the sync PR opens."""
        self.sim.add_collaborator(FORK, collaborator, "write")
        await self.merge_upstream(extra=extra)
        await self.idle()
        return self.sync_pr()

    def sync_prs(self) -> list[Any]:
        return [p for p in self.sim.prs(FORK) if p.head_ref.startswith("forksync/sync-")]

    def sync_pr(self) -> Any:
        (pr,) = self.sync_prs()
        return pr

    def file_at(self, sha: str, path: str) -> str:
        return subprocess.run(["git", f"--git-dir={self.sim.git_dir(FORK)}", "show",
                               f"{sha}:{path}"], check=True, capture_output=True,
                              text=True).stdout

    def check(self, sha: str) -> Any:
        (run,) = self.sim.check_runs(FORK, sha, "forksync")
        return run

    def _store(self) -> Any:
        return open_store(self.bot.env.get("FORKSYNC_DATABASE_URL")
                          or self.bot.data_dir / "forksync.sqlite3")

    def state(self) -> dict[str, Any]:
        """The fork's state as the bot saved it (read from its store)."""
        store = self._store()
        try:
            return load_fork_state(store, FORK)
        finally:
            store.close()

    def update_state(self, key: str, value: Any) -> None:
        """Set one key of the fork's state, as if the bot had saved it (the bot is idle)."""
        store = self._store()
        try:
            state = load_fork_state(store, FORK)
            state[key] = value
            save_fork_state(store, FORK, state)
        finally:
            store.close()

    def snapshot(self) -> dict[str, int]:
        """How many of each thing the bot ever made: "nothing twice" compares these."""
        prs = self.sim.prs(FORK)
        return {
            "prs": len(prs),
            "reviews": sum(len(self.sim.reviews(FORK, p.number)) for p in prs),
            "review_comments": sum(len(self.sim.review_comments(FORK, p.number)) for p in prs),
            "issue_comments": sum(len(self.sim.issue_comments(FORK, p.number)) for p in prs),
            "check_runs": len(self.sim.check_runs(FORK)),
            "writes": len(self.sim.writes()),
        }

    def assert_clean(self) -> None:
        assert self.sim.violations == [], self.sim.violations
        assert self.sim.unimplemented == [], self.sim.unimplemented
        assert self.sim.internal_errors == [], self.sim.internal_errors
        assert "Traceback" not in self.bot.log_path.read_text(errors="replace"), \
            self.bot.log_tail()


@pytest.fixture
async def world(github_sim: Simulator, tmp_path: Path,  # noqa: F811
                request: pytest.FixtureRequest, backend: str,
                store_location: str) -> AsyncIterator[World]:
    param = getattr(request, "param", {})
    scenario = build_scenario(tmp_path / "repos", third_table=bool(param.get("third_table")),
                              twin_tables=bool(param.get("twin_tables")),
                              manual=bool(param.get("manual")))
    private_upstream = bool(param.get("private_upstream"))
    github_sim.create_repo("THUDM", "slime", scenario.upstream_dir, install=False,
                           private=private_upstream)
    github_sim.create_repo("vime-org", "vime", scenario.fork_dir, install=False)
    bot = Bot(github_sim, tmp_path / "bot",
              database_url=store_location if backend == "postgres" else None)
    if backend == "postgres":
        assert "applied migration 1" in bot.upgrade_db()
    await bot.start()
    github_sim.bot_url = f"{bot.url}/webhook"
    w = World(github_sim, scenario, bot, tmp_path)
    try:
        # Installing the App registers the fork; its first sync finds nothing new.
        await github_sim.install("THUDM")
        await github_sim.install("vime-org", permissions={"workflows": param["workflows"]}
                                 if param.get("workflows") else None)
        await w.idle()
        assert w.sync_prs() == []
        yield w
    finally:
        bot.stop()


def suggestion_of(comment_body: str) -> str:
    m = re.search(r"(`{3,})suggestion\n(.*?)\1", comment_body, re.DOTALL)
    assert m, comment_body
    return m.group(2)


def commit_suggestion(text: str, comment: Any) -> str:
    """What GitHub's "Commit suggestion" button writes: the commented lines replaced."""
    lines = split_lines(text)
    start = comment.start_line or comment.line
    return "".join(lines[:start - 1]) + suggestion_of(comment.body) + "".join(lines[comment.line:])


def resolve_by_hand(text: str) -> str:
    """A person's own resolution: both sides' values kept as one line per region."""
    lines = split_lines(text)
    for region in reversed(find_marker_regions(text)):
        merged = region.ours.strip().split(" = ")[0] + " = 0  # agreed\n"
        lines[region.start_line - 1:region.end_line] = [merged]
    return "".join(lines)


# -- (a) an upstream merge → draft PR, report, one review with suggestions, failing check --


async def test_upstream_merge_opens_a_draft_pr_with_one_review_and_a_failing_check(
        world: World) -> None:
    sim = world.sim
    await world.merge_upstream()
    await world.idle()

    pr = world.sync_pr()
    assert pr.draft and pr.state == "open" and pr.base_ref == "main"
    assert pr.body.startswith(BEGIN) and END in pr.body
    assert "Conflicts (2 files)" in pr.body
    assert f"- [ ] `{A}`" in pr.body and f"- [ ] `{B}`" in pr.body
    commit1 = pr.head_sha
    message = subprocess.run(["git", f"--git-dir={sim.git_dir(FORK)}", "log", "-1",
                              "--format=%B", commit1], capture_output=True, text=True).stdout
    assert f"Upstream-Sync: {UPSTREAM}@{sim.ref(UPSTREAM, 'main')}" in message

    (review,) = sim.reviews(FORK, pr.number)
    assert review.state == "COMMENTED" and review.commit_id == commit1
    assert f"<!-- forksync:review {commit1} -->" in review.body
    comments = sorted(sim.review_comments(FORK, pr.number), key=lambda c: (c.path, c.line))
    assert [c.path for c in comments] == [A, B, B]
    for c in comments:
        assert c.side == "RIGHT" and c.start_side == "RIGHT" and c.start_line < c.line
        region = world.file_at(commit1, c.path).splitlines()[c.start_line - 1:c.line]
        assert region[0].startswith("<<<<<<<") and region[-1].startswith(">>>>>>>")
    on_a, same_line, next_line = comments
    # Edits on neighbouring lines of code: both edits in one click, as a starting point
    # (a word merge in code is what people commit six times in ten: not a Confirm).
    assert suggestion_of(on_a.body) == "alpha_4 = 40  # fork\nalpha_5 = 5000  # upstream\n"
    assert "· Decide**" in next_line.body and "```suggestion" in next_line.body
    assert "starting point" in next_line.body
    # The same line changed twice: a Decide with both changes shown and no side offered.
    assert "· Decide**" in same_line.body and "```suggestion" not in same_line.body
    assert "+beta_10 = 1000  # upstream" in same_line.body
    assert "+beta_10 = 100  # fork" in same_line.body
    # Its reason says what each side did, once; the answers are listed once.
    assert "to `beta_10 = 1000  # upstream`; the fork changed `" in same_line.body
    assert same_line.body.count("to `beta_10 = 100  # fork`") == 1
    assert same_line.body.count("/sync answer") == 2  # ours and theirs, in the answer line
    assert "or combine them by hand?" not in same_line.body  # no generic question
    assert "2 of 3 conflict hunks have a one-click suggestion" in pr.body
    assert ("| 1 hunk to combine by hand (both edits shown as diffs) | Q2 |\n"
            "| 2 starting points to check, one click each | Q1, Q3 |\n") in pr.body

    run = world.check(commit1)
    assert run.status == "completed" and run.conclusion == "failure"
    # The check counts the buttons the review has, as the PR body does.
    assert ("By what each needs: 1 hunk to combine by hand (both edits shown as diffs) · "
            "2 starting points to check, one click each.") in (run.summary or "")
    # Besides the markers, the DESIGN config's prose rule earns config warnings.
    assert sorted(a["path"] for a in run.annotations
                  if a["path"] != ".github/forksync.yml") == [A, B, B]
    assert {a["annotation_level"] for a in run.annotations
            if a["path"] == ".github/forksync.yml"} <= {"warning"}
    assert all(a["annotation_level"] == "failure" for a in markers(run))
    world.assert_clean()


def upstream_fetched(world: World) -> bool:
    """Whether the bot's cache holds the upstream's main: it read the upstream."""
    cache = world.bot.data_dir / "git" / "THUDM__slime.git"
    return cache.is_dir() and subprocess.run(
        ["git", f"--git-dir={cache}", "rev-parse", "--verify", "-q", "refs/heads/main"],
        capture_output=True).returncode == 0


@pytest.mark.parametrize("world", [{"private_upstream": True}], indirect=True)
async def test_a_private_upstream_of_another_account_is_refused_with_a_failing_check(
        world: World) -> None:
    # The App is installed on THUDM too; its token must not read THUDM's private code
    # for vime-org's fork (it did: the sync PR was built from it).
    await world.merge_upstream()
    await world.idle()
    assert world.sync_prs() == []
    assert not upstream_fetched(world)
    (run,) = world.sim.check_runs(FORK, world.sim.ref(FORK, "main"), "forksync")
    assert run.conclusion == "failure" and run.title == "forksync cannot read the upstream"
    assert f"`downstream: [{FORK}]`" in run.summary
    world.assert_clean()


@pytest.mark.parametrize("world", [{"private_upstream": True}], indirect=True)
async def test_a_private_upstream_that_lists_the_fork_is_read_with_its_installation(
        world: World) -> None:
    # THUDM opts in: its own .github/forksync.yml lists the fork. It lands with the merge.
    await world.sim.commit(UPSTREAM, "tune", {".github/forksync.yml": f"downstream: [{FORK}]\n"},
                           "Let vime read slime", user="zhuzilin")
    await world.merge_upstream()
    await world.idle()
    pr = world.sync_pr()
    assert pr.draft and len(world.sim.reviews(FORK, pr.number)) == 1
    assert world.check(pr.head_sha).conclusion == "failure"
    # The upstream's file is not merged into the fork's own config.
    assert world.file_at(pr.head_sha, ".github/forksync.yml") == \
        world.file_at(world.sim.ref(FORK, "main") or "", ".github/forksync.yml")
    assert "reading the upstream THUDM/slime (listed under downstream:" in \
        world.bot.log_path.read_text()
    world.assert_clean()


async def test_a_public_upstream_is_read_without_a_token(world: World) -> None:
    await world.merge_upstream()
    await world.idle()
    assert world.sync_pr().draft and upstream_fetched(world)
    assert "reading the upstream THUDM/slime (public, without a token)" in \
        world.bot.log_path.read_text()
    upstream_git = [r for r in world.sim.requests if r.kind == "git"
                    and r.path.startswith(f"/{UPSTREAM}.git")]
    assert upstream_git and all(r.actor is None for r in upstream_git)
    world.assert_clean()


# -- (b) people resolve some files, then all; (c) a committed suggestion resolves its hunk --


async def test_a_committed_suggestion_and_pushed_resolutions_tick_the_checklist_until_it_passes(
        world: World) -> None:
    sim = world.sim
    await world.merge_upstream()
    await world.idle()
    pr = world.sync_pr()
    commit1 = pr.head_sha

    # (c) vera clicks "Commit suggestion" on the comment in A.
    (on_a,) = [c for c in sim.review_comments(FORK, pr.number) if c.path == A]
    suggested = commit_suggestion(world.file_at(commit1, A), on_a)
    head = await sim.commit(FORK, pr.head_ref, {A: suggested},
                            "Apply suggestions from code review", user="vera")
    await world.idle()
    pr = world.sync_pr()
    assert pr.head_sha == head
    assert f"- [x] `{A}`" in pr.body and f"- [ ] `{B}`" in pr.body
    assert ("| 1 hunk to combine by hand (both edits shown as diffs) | Q2 |\n"
            "| 1 starting point to check, one click each | Q3 |\n") in pr.body
    run = world.check(head)
    assert run.conclusion == "failure"
    assert sorted(a["path"] for a in markers(run)) == [B, B]
    assert A not in run.summary

    # (b) then resolves B by hand: everything is resolved, the check passes.
    head = await sim.commit(FORK, pr.head_ref, {B: resolve_by_hand(world.file_at(head, B))},
                            "Resolve the tables", user="vera")
    await world.idle()
    pr = world.sync_pr()
    assert f"- [x] `{A}`" in pr.body and f"- [x] `{B}`" in pr.body
    assert pr.title.endswith("3-way merge [conflicts resolved]")
    run = world.check(head)
    assert run.conclusion == "success" and markers(run) == []
    # The first check stays where it was: on commit 1, failing.
    assert world.check(commit1).conclusion == "failure"

    # Re-running the check on the head rescans and sends nothing new.
    before = world.snapshot()
    await sim.rerequest_check_run(FORK, run.id, user="vera")
    await world.idle()
    assert world.snapshot() == before
    world.assert_clean()


async def test_one_committed_suggestion_resolves_its_hunk_and_no_other(world: World) -> None:
    sim = world.sim
    await world.merge_upstream()
    await world.idle()
    pr = world.sync_pr()
    first_on_b, second_on_b = sorted((c for c in sim.review_comments(FORK, pr.number)
                                      if c.path == B), key=lambda c: c.line)
    text = commit_suggestion(world.file_at(pr.head_sha, B), second_on_b)
    head = await sim.commit(FORK, pr.head_ref, {B: text}, "Apply suggestion from code review",
                            user="vera")
    await world.idle()
    run = world.check(head)
    assert run.conclusion == "failure"
    left = sorted((a["path"], a["start_line"]) for a in markers(run))
    assert left == [(A, next(c.start_line for c in sim.review_comments(FORK, pr.number)
                             if c.path == A)), (B, first_on_b.start_line)]
    pr = world.sync_pr()
    assert f"- [ ] `{B}`" in pr.body  # one of its two hunks is still open
    # A group's title names its ids; each item's line under it carries its state (the id
    # too, unless the group is that one item).
    resolved = re.findall(r"^- \*\*(Q\d+)\*\*[^\n]*\n(?:  - [^\n]*\n)*?  - [^\n]* — resolved$",
                          pr.body, re.M)
    assert len(resolved) == 1 and resolved[0] in second_on_b.body
    world.assert_clean()


def take_regions(text: str, side: str, count: int) -> str:
    """The first ``count`` marker regions of ``text`` replaced by one side, as by hand."""
    lines = split_lines(text)
    for region in reversed(find_marker_regions(text)[:count]):
        lines[region.start_line - 1:region.end_line] = split_lines(getattr(region, side))
    return "".join(lines)


@pytest.mark.parametrize("world", [{"third_table": True}], indirect=True)
async def test_two_hunks_resolved_alike_get_the_rest_of_the_file_a_one_click_follow_up(
        world: World) -> None:
    sim = world.sim
    pr = await world.open_sync(extra=C_CHANGE)
    commit1 = pr.head_sha
    on_c = sorted((c for c in sim.review_comments(FORK, pr.number) if c.path == C),
                  key=lambda c: c.line)
    assert len(on_c) == 3 and all("```suggestion" not in c.body for c in on_c)

    # vera keeps the fork's value in the first hunk only: no follow-up yet (one is not two).
    head = await sim.commit(FORK, pr.head_ref, {C: take_regions(world.file_at(commit1, C),
                                                                "ours", 1)},
                            "Keep the fork's gamma_5", user="vera")
    await world.idle()
    assert len(sim.reviews(FORK, pr.number)) == 1

    # ... then in the second one: the third gets a one-click suggestion of the fork's side.
    writes = len(sim.writes())
    head = await sim.commit(FORK, pr.head_ref, {C: take_regions(world.file_at(head, C),
                                                                "ours", 1)},
                            "Keep the fork's gamma_15", user="vera")
    await world.idle()
    reviews = sim.reviews(FORK, pr.number)
    assert len(reviews) == 2
    follow = reviews[-1]
    assert follow.commit_id == head and f"<!-- forksync:follow {head} -->" in follow.body
    assert f"- `{C}`: " in follow.body and "→ ours" in follow.body
    (comment,) = [c for c in sim.review_comments(FORK, pr.number) if c.review_id == follow.id]
    assert comment.path == C and comment.side == "RIGHT" and comment.start_side == "RIGHT"
    region = world.file_at(head, C).splitlines()[comment.start_line - 1:comment.line]
    assert region[0].startswith("<<<<<<<") and region[-1].startswith(">>>>>>>")
    assert suggestion_of(comment.body) == "gamma_25 = 250  # fork\n"
    assert "follow-up" in comment.body and "2,968 of 3,126" in comment.body
    assert "+gamma_25 = 25000  # upstream" in comment.body  # what committing it drops
    assert "/sync answer" in comment.body and "theirs`" in comment.body
    # The push costs its body update, its check run and the one follow-up review.
    assert len(sim.writes()) - writes <= 3

    # The check runs again on the same head: nothing is posted twice.
    before = world.snapshot()
    await sim.rerequest_check_run(FORK, world.check(head).id, user="vera")
    await world.idle()
    assert world.snapshot()["reviews"] == before["reviews"]

    # "Commit suggestion" resolves it; with A and B resolved too, the check passes.
    text = commit_suggestion(world.file_at(head, C), comment)
    head = await sim.commit(FORK, pr.head_ref, {
        C: text, A: resolve_by_hand(world.file_at(head, A)),
        B: resolve_by_hand(world.file_at(head, B))}, "Apply suggestion from code review",
        user="vera")
    await world.idle()
    assert world.file_at(head, C) == edit(table("gamma"), {n: f"gamma_{n} = {n}0  # fork"
                                                           for n in (5, 15, 25)})
    assert world.check(head).conclusion == "success"
    assert len(sim.reviews(FORK, pr.number)) == 2  # nothing is open: no new follow-up
    world.assert_clean()


@pytest.mark.parametrize("world", [{"twin_tables": True}], indirect=True)
async def test_a_conflict_resolved_once_is_offered_at_its_twin_in_one_click(
        world: World) -> None:
    sim = world.sim
    pr = await world.open_sync(extra=TWIN_CHANGE)
    # The first review names the twins on each, and the body says how they resolve.
    (on_d,) = [c for c in sim.review_comments(FORK, pr.number) if c.path == D]
    (on_e,) = [c for c in sim.review_comments(FORK, pr.number) if c.path == E]
    d_id, e_id = (re.match(r"\*\*(Q\d+) ", c.body).group(1)  # type: ignore[union-attr]
                  for c in (on_d, on_e))
    assert f"**Twin:** {e_id} in `{E}` is this very conflict" in on_d.body
    # The copy's comment is short: where the first one is, and its answers.
    assert f"· Decide** — the same conflict as {d_id} in `{D}`" in on_e.body
    assert "Upstream's change" in on_d.body and "Upstream's change" not in on_e.body
    assert "2 conflict hunks are 1 conflict that recurs exactly" in pr.body

    # vera resolves D by hand, with a value of her own, and pushes.
    writes = len(sim.writes())
    mine = "delta_7 = 77  # both, agreed\n"
    d_text = world.file_at(pr.head_sha, D)
    (region,) = find_marker_regions(d_text)
    lines = split_lines(d_text)
    lines[region.start_line - 1:region.end_line] = [mine]
    head = await sim.commit(FORK, pr.head_ref, {D: "".join(lines)}, "Resolve delta_7",
                            user="vera")
    await world.idle()
    follow = sim.reviews(FORK, pr.number)[-1]
    assert follow.commit_id == head and f"<!-- forksync:follow {head} -->" in follow.body
    assert f"- `{E}`: {e_id} → twin, as resolved at {d_id}" in follow.body
    (comment,) = [c for c in sim.review_comments(FORK, pr.number) if c.review_id == follow.id]
    assert comment.path == E and suggestion_of(comment.body) == mine
    assert f"follow-up: as resolved at {d_id}" in comment.body
    assert "4,381 of 4,422" in comment.body
    assert len(sim.writes()) - writes <= 3  # body, check, the follow-up review

    # "Commit suggestion" on E, and A and B by hand: the check passes.
    head = await sim.commit(FORK, pr.head_ref, {
        E: commit_suggestion(world.file_at(head, E), comment),
        A: resolve_by_hand(world.file_at(head, A)),
        B: resolve_by_hand(world.file_at(head, B))}, "Apply suggestion from code review",
        user="vera")
    await world.idle()
    assert world.file_at(head, E) == world.file_at(head, D)
    assert world.check(head).conclusion == "success"
    world.assert_clean()


async def test_people_text_in_the_pr_body_survives_every_rescan(world: World) -> None:
    sim = world.sim
    await world.merge_upstream()
    await world.idle()
    pr = world.sync_pr()
    token = sim.user_token("vera")
    sim.add_collaborator(FORK, "vera", "write")
    async with aiohttp.ClientSession() as session, session.patch(
            f"{sim.base_url}/repos/{FORK}/pulls/{pr.number}",
            headers={"Authorization": f"token {token}"},
            json={"body": "Vera's notes: check beta with the data team.\n\n" + pr.body}) as r:
        assert r.status == 200
    head = await sim.commit(FORK, pr.head_ref,
                            {A: resolve_by_hand(world.file_at(pr.head_sha, A))},
                            "Resolve A", user="vera")
    await world.idle()
    pr = world.sync_pr()
    assert pr.head_sha == head
    assert pr.body.startswith("Vera's notes: check beta with the data team.\n\n" + BEGIN)
    assert f"- [x] `{A}`" in pr.body
    world.assert_clean()


# -- (d) a redelivered webhook creates nothing twice ------------------------------------


async def test_redelivered_webhooks_create_nothing_twice(world: World) -> None:
    sim = world.sim
    await world.merge_upstream()
    await world.idle()
    before = world.snapshot()
    upstream_events = [d for d in sim.deliveries
                       if d.payload.get("repository", {}).get("full_name") == UPSTREAM
                       and d.event in ("push", "pull_request")]
    assert upstream_events
    async with aiohttp.ClientSession() as session:
        for delivery in upstream_events:
            body = json.dumps(delivery.payload).encode()
            # The same delivery again (GitHub's "Redeliver"), then as a new delivery id.
            for delivery_id in (delivery.id, str(uuid.uuid4())):
                headers = dict(delivery.headers) | {
                    "X-GitHub-Delivery": delivery_id,
                    "X-Hub-Signature-256": signature(sim.webhook_secret, body)}
                async with session.post(sim.bot_url or "", data=body, headers=headers) as r:
                    assert r.status in (200, 202), await r.text()
                    if delivery_id == delivery.id:  # stored once: never queued again
                        assert (await r.json())["status"] in ("duplicate", "ignored")
    await world.idle()
    assert world.snapshot() == before
    assert len(world.sync_prs()) == 1
    world.assert_clean()


# -- (e) kill -9 in the middle of a sync, restart: it completes, once -----------------------


@pytest.mark.parametrize("step", [
    r"/vime-org/vime\.git/git-receive-pack$",  # pushing commit 1
    rf"^/repos/{FORK}/pulls$",                  # opening the PR
    r"/pulls/\d+/reviews$",                     # posting the review
    rf"^/repos/{FORK}/check-runs$",             # creating the check
], ids=["push", "pull", "review", "check"])
async def test_kill_9_in_the_middle_of_a_sync_then_restart_completes_it_once(
        world: World, step: str) -> None:
    sim = world.sim
    # Hold this step's request long enough to kill the process while it waits for it.
    sim.inject_fault(step, "timeout", method="POST", delay=30)
    await world.merge_upstream()
    deadline = time.monotonic() + 60
    while not any(r.method == "POST" and re.search(step, r.path) for r in sim.requests):
        assert time.monotonic() < deadline, world.bot.log_tail()
        await asyncio.sleep(0.05)
    world.bot.kill9()
    sim.faults.clear()

    await world.bot.start()  # same data directory: the queue survived
    await world.idle()
    pr = world.sync_pr()
    assert sim.ref(FORK, pr.head_ref) == pr.head_sha
    assert len(sim.reviews(FORK, pr.number)) == 1
    assert len(sim.review_comments(FORK, pr.number)) == 3
    assert world.check(pr.head_sha).conclusion == "failure"
    assert len(sim.check_runs(FORK)) == 1
    created = [w for w in sim.writes(FORK) if w.method == "POST" and 200 <= w.status < 300]
    assert sorted(w.operation for w in created) == [
        "/repos/{owner}/{repo}/check-runs", "/repos/{owner}/{repo}/pulls",
        "/repos/{owner}/{repo}/pulls/{pull_number}/reviews"]
    world.assert_clean()


# -- (f) 5xx, 429 and secondary rate limits are retried and the sync completes ----------


async def test_server_errors_and_rate_limits_are_retried_and_the_sync_completes(
        world: World) -> None:
    sim = world.sim
    sim.inject_fault(rf"^/repos/{FORK}$", "status", method="GET", status=500)
    sim.inject_fault(r"/pulls$", "status", method="POST", status=502, times=2)
    sim.inject_fault(r"/pulls/\d+/reviews$", "rate_limit", method="POST", retry_after=1)
    sim.inject_fault(r"/check-runs$", "secondary_rate_limit", method="POST", retry_after=1)
    sim.inject_fault(r"/pulls/\d+$", "status", method="GET", status=503)
    await world.merge_upstream()
    await world.idle()
    faults = sorted(r.fault for r in sim.requests if r.fault)
    assert faults == ["rate_limit", "secondary_rate_limit", "status", "status", "status",
                      "status"]
    pr = world.sync_pr()
    assert len(sim.reviews(FORK, pr.number)) == 1
    assert len(sim.review_comments(FORK, pr.number)) == 3
    assert world.check(pr.head_sha).conclusion == "failure"
    assert len(sim.check_runs(FORK)) == 1
    world.assert_clean()


# -- (g) a forged signature gets 401 and nothing happens --------------------------------


async def test_a_forged_signature_gets_401_and_nothing_happens(world: World) -> None:
    sim = world.sim
    before_snapshot = world.snapshot()
    before_jobs = (await world.bot.health())["jobs"]
    push = next(d for d in sim.deliveries if d.event == "installation")
    payload = dict(push.payload)
    body = json.dumps(payload).encode()
    async with aiohttp.ClientSession() as session:
        for forged in (signature("not-the-secret", body), "sha256=" + "0" * 64, ""):
            headers = {"Content-Type": "application/json", "X-GitHub-Event": "installation",
                       "X-GitHub-Delivery": str(uuid.uuid4())}
            if forged:
                headers["X-Hub-Signature-256"] = forged
            async with session.post(sim.bot_url or "", data=body, headers=headers) as r:
                assert r.status == 401
    await world.idle()
    assert (await world.bot.health())["jobs"] == before_jobs
    assert world.snapshot() == before_snapshot
    world.assert_clean()


# -- after the sync PR is merged, the next upstream merge opens the next window -----------


@pytest.mark.parametrize("method", ["merge", "squash"])
async def test_the_next_window_starts_where_the_merged_sync_ended(world: World,
                                                                  method: str) -> None:
    sim = world.sim
    first_tip = await world.merge_upstream()
    await world.idle()
    pr = world.sync_pr()
    commit1 = pr.head_sha
    head = await sim.commit(FORK, pr.head_ref, {
        A: resolve_by_hand(world.file_at(pr.head_sha, A)),
        B: resolve_by_hand(world.file_at(pr.head_sha, B))}, "Resolve", user="vera")
    await world.idle()
    assert world.check(head).conclusion == "success"
    await sim.mark_ready(FORK, pr.number, user="vera")
    await sim.merge_pr(FORK, pr.number, method=method, user="vera")
    await world.idle()
    # What people committed at the three conflicts is remembered for later syncs: their
    # own lines, neither side (so no habit yet).
    learned = world.state()["learned"]["sources"]
    assert list(learned) == [commit1]
    assert sorted((path, ours, theirs) for path, _rule, _cand, ours, theirs
                  in learned[commit1]) == [(A, False, False), (B, False, False),
                                               (B, False, False)]

    await sim.commit(UPSTREAM, "more", {"slime/later.py": "later = 1\n"}, "Add later",
                     user="bob")
    more = await sim.open_pr(UPSTREAM, "more", title="Add later", user="bob")
    await sim.merge_pr(UPSTREAM, more.number, method="squash", user="zhuzilin")
    await world.idle()
    (second,) = [p for p in world.sync_prs() if p.state == "open"]
    assert second.number != pr.number
    assert f"after cutoff `{first_tip[:10]}`" in second.body
    assert "No conflicts" in second.body
    assert world.check(second.head_sha).conclusion == "success"
    world.assert_clean()


async def test_a_habit_of_earlier_merged_syncs_is_a_confirm(world: World) -> None:
    # Three earlier sync PRs, merged: at 18 conflicts in table_a.py people kept the fork's
    # lines every time (a Wilson lower bound of 0.82: a Confirm, in this fork only); in
    # table_b.py they took upstream's at 3 (too few to be a habit, and enough to keep the
    # folder from being one).
    world.update_state("learned", {"sources": {
        f"{n:040x}": [[A, "merge word by word", False, True, False]] * 6
        + [[B, "conflict", None, False, True]] for n in (1, 2, 3)}})
    await world.merge_upstream()
    await world.idle()
    pr = world.sync_pr()
    comments = sorted(world.sim.review_comments(FORK, pr.number), key=lambda c: (c.path, c.line))
    on_a = comments[0]
    assert on_a.path == A and "· Confirm**" in on_a.body
    region = find_marker_regions(world.file_at(pr.head_sha, A))[0]
    assert suggestion_of(on_a.body) == region.ours
    assert "people committed the fork's side (ours) at 18 of 18 conflict hunks in " \
        f"`{A}`, and at every one of them in 3 of 3 merges, the newest 2 included (the fork's " \
        "merged sync PRs, as forksync saw them)" in on_a.body
    assert "1 proposal follows this fork's own past resolutions" in pr.body
    # The other file has no habit: its hunks stay Decide.
    assert all("· Decide**" in c.body for c in comments[1:])
    world.assert_clean()


# -- the same publisher from a scheduled workflow: ``forksync sync --publish`` ----------


async def test_sync_publish_from_the_cli_in_token_mode(world: World) -> None:
    sim = world.sim
    sim.bot_url = None  # the App is not listening: only the workflow acts
    await sim.commit(UPSTREAM, "main", UPSTREAM_CHANGE, "Tune the tables (#7)", user="alice")
    env = {k: v for k, v in world.bot.env.items()
           if k not in ("FORKSYNC_APP_ID", "FORKSYNC_PRIVATE_KEY", "FORKSYNC_DATA_DIR")}
    env.update(GITHUB_REPOSITORY=FORK, FORKSYNC_TOKEN=sim.issue_token(FORK))
    proc = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "bot.cli", "sync", "--publish", "--fork", ".",
                         "--upstream", f"{sim.base_url}/{UPSTREAM}.git",
                         "--workdir", str(world.tmp / "action")],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("opened: vime-org/vime#1 forksync/sync-")
    pr = world.sync_pr()
    assert pr.draft and len(sim.reviews(FORK, pr.number)) == 1
    assert world.check(pr.head_sha).conclusion == "failure"
    world.assert_clean()
