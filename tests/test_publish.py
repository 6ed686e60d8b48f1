"""The publisher: pure helpers, and ``publish_sync`` on real git repos behind the FakeGH.

The fork and upstream are bare repositories reached over ``file://`` (``git_url``),
so fetch, ``ls-remote`` and ``push --force-with-lease`` are real git. GitHub is the
one FakeGH, given a little state (PRs, reviews, check runs) through its callables.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from gidgethub import BadRequest

from bot.engine.gate import Remaining, check_annotations, initial_remaining
from bot.engine.report import BEGIN, END
from bot.engine.review import local_diff, plan_items, review_marker
from bot.errors import ForksyncError
from bot.github import remote
from bot.github.checks import MAX_ANNOTATIONS, upsert_check_run
from bot.sync.publish import publish_sync
from bot.sync.publish.run import published
from bot.sync.state import (
    MAX_PLANS,
    load_fork_state,
    load_plan,
    save_fork_state,
    save_plan,
    sync_branch_name,
)
from tests.conftest import FakeContext, FakeGH, Request
from tests.factory import Scenario, make_demo
from tests.partial import serve_filters

FORK = "vime-org/vime"
UPSTREAM = "THUDM/slime"

def item(**kw: Any) -> dict[str, Any]:
    base = {"id": "Q1", "kind": "conflict", "path": "vime/a.py", "upstream_path": "slime/a.py",
            "tier": "Decide", "reason": "both changed", "question": "which?",
            "choices": ["ours", "theirs"], "start_line": 2, "end_line": 8, "ours": "    return 1\n",
            "base": "    return 0\n", "theirs": "    return 2\n", "suggestion": "    return 2\n",
            "prs": [5]}
    return base | kw


# -- pure helpers ------------------------------------------------------------------


def test_remaining_at_commit_1_is_every_region_and_every_unanswered_decision() -> None:
    plan = {"files": [{"path": "p", "review_items": [
        item(id="Q1"), item(id="Q2", tier="Settled", kind="policy", start_line=None),
        item(id="Q3", kind="file", start_line=None, end_line=None),
        item(id="Q4", kind="flag", start_line=3, end_line=3)]}]}
    remaining = initial_remaining(plan, {"Q4": "keep"})
    assert [(r.item_id, r.marker) for r in remaining] == [("Q1", True), ("Q3", False)]
    notes = check_annotations(remaining)
    assert notes == [{"path": "vime/a.py", "start_line": 2, "end_line": 8,
                      "annotation_level": "failure", "title": "Q1: conflict markers remain",
                      "message": "Q1 (Decide): both changed"},  # a hunk's reason
                     # A decision about the whole file sits on its first line.
                     {"path": "vime/a.py", "start_line": 1, "end_line": 1,
                      "annotation_level": "warning",
                      "title": "Q3: open decision on the whole file",
                      "message": "Q3 (Decide): which?"}]


def test_published_needs_every_step_after_the_push_and_each_step_reads_its_own_key() -> None:
    sync = {"commit": "c1", "pr": 7, "review_commit": "c1", "check_runs": {"c1": 100}}
    assert published(sync)
    for key in ("pr", "review_commit", "check_runs"):
        assert not published({k: v for k, v in sync.items() if k != key}), key
    assert not published(sync | {"review_commit": "c0"})  # the review of an older commit 1
    assert not published(sync | {"check_runs": {"c0": 99}})  # a check on another head
    assert not published(sync | {"pr": None})


# -- the check run through the FakeGH --------------------------------------------------


class Hub:
    """Just enough GitHub state behind a FakeGH for the publisher: PRs, reviews, checks."""

    def __init__(self, gh: FakeGH, fork_git: Path | None = None) -> None:
        self.gh = gh
        self.fork_git = fork_git
        self.pulls: dict[int, dict[str, Any]] = {}
        self.reviews: dict[int, list[dict[str, Any]]] = {}
        self.runs: dict[int, dict[str, Any]] = {}
        self.comments: list[dict[str, Any]] = []
        f = re.escape(FORK)
        gh.on("GET", f"/repos/{FORK}", {"default_branch": "main", "full_name": FORK,
                                        "html_url": f"https://github.com/{FORK}"})
        gh.on("GET", f"/repos/{FORK}/pulls", self.list_pulls)
        gh.on("POST", f"/repos/{FORK}/pulls", self.create_pull)
        gh.on("GET", re.compile(rf"/repos/{f}/pulls/(\d+)"), self.get_pull)
        gh.on("PATCH", re.compile(rf"/repos/{f}/pulls/(\d+)"), self.update_pull)
        gh.on("GET", re.compile(rf"/repos/{f}/pulls/(\d+)/reviews"), self.list_reviews)
        gh.on("POST", re.compile(rf"/repos/{f}/pulls/(\d+)/reviews"), self.create_review)
        gh.on("GET", re.compile(rf"/repos/{f}/commits/(\w+)/check-runs"), self.list_runs)
        gh.on("POST", f"/repos/{FORK}/check-runs", self.create_run)
        gh.on("PATCH", re.compile(rf"/repos/{f}/check-runs/(\d+)"), self.update_run)
        gh.on("POST", re.compile(rf"/repos/{f}/issues/(\d+)/comments"), self.comment)

    @staticmethod
    def _number(request: Request) -> int:
        return int(re.findall(r"/(\d+)(?:/|$|\?)", request.url)[0])

    def list_pulls(self, request: Request) -> list[dict[str, Any]]:
        query = dict(p.split("=", 1) for p in request.url.partition("?")[2].split("&") if p)
        return [p for p in self.pulls.values()
                if query.get("state", "open") in ("all", p["state"])
                and ("head" not in query or query["head"] == f"vime-org:{p['head']['ref']}")]

    def create_pull(self, request: Request) -> dict[str, Any]:
        number = 7 + len(self.pulls)
        self.pulls[number] = {"number": number, "state": "open", "body": request.data["body"],
                              "draft": request.data["draft"], "title": request.data["title"],
                              "head": {"ref": request.data["head"], "sha": None}}
        return self.pulls[number]

    def get_pull(self, request: Request) -> Any:
        pull = self.pulls[self._number(request)]
        if request.accept and "diff" in request.accept:
            assert self.fork_git is not None
            return local_diff(str(self.fork_git), "refs/heads/main",
                              f"refs/heads/{pull['head']['ref']}")
        if self.fork_git is not None:
            pull["head"]["sha"] = subprocess.run(
                ["git", f"--git-dir={self.fork_git}", "rev-parse", pull["head"]["ref"]],
                capture_output=True, text=True).stdout.strip()
        return pull

    def update_pull(self, request: Request) -> dict[str, Any]:
        pull = self.pulls[self._number(request)]
        pull.update(request.data)
        return pull

    def list_reviews(self, request: Request) -> list[dict[str, Any]]:
        return self.reviews.get(self._number(request), [])

    def create_review(self, request: Request) -> dict[str, Any]:
        review = {"id": len(self.comments) + 1, **request.data}
        self.reviews.setdefault(self._number(request), []).append(review)
        return review

    def list_runs(self, request: Request) -> dict[str, Any]:
        sha = request.url.split("/commits/")[1].split("/")[0]
        runs = [r for r in self.runs.values() if r["head_sha"] == sha]
        return {"total_count": len(runs), "check_runs": runs}

    def _apply(self, run: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
        output = data.get("output") or {}
        run["output"]["annotations_count"] += len(output.get("annotations", []))
        run["output"].update({k: v for k, v in output.items() if k != "annotations"})
        run.update({k: v for k, v in data.items() if k in ("status", "conclusion")})
        return run

    def create_run(self, request: Request) -> dict[str, Any]:
        run = {"id": 100 + len(self.runs), "name": request.data["name"],
               "head_sha": request.data["head_sha"], "output": {"annotations_count": 0}}
        self.runs[run["id"]] = run
        return self._apply(run, request.data)

    def update_run(self, request: Request) -> dict[str, Any]:
        return self._apply(self.runs[self._number(request)], request.data)

    def comment(self, request: Request) -> dict[str, Any]:
        self.comments.append(request.data)
        return {"id": len(self.comments)}


def first_tip(world: World) -> str:
    return git("--git-dir", world.remotes / f"{UPSTREAM}.git", "rev-parse", "main")


def many_items(n: int) -> dict[str, Any]:
    return {"upstream": {"repo": UPSTREAM, "branch": "main"}, "window_label": "#1..#2",
            "files": [{"path": f"f{i}.py", "status": "conflict", "note": "",
                       "review_items": [item(id=f"Q{i}", path=f"f{i}.py")]}
                      for i in range(1, n + 1)]}


async def test_check_run_sends_annotations_in_batches_of_fifty_and_only_once(
        fake_gh: FakeGH) -> None:
    hub = Hub(fake_gh)
    plan = many_items(120)
    remaining = initial_remaining(plan, {})
    await upsert_check_run(fake_gh, FORK, "a" * 40, plan, remaining)
    assert fake_gh.write_count == math.ceil(120 / MAX_ANNOTATIONS)
    (run,) = hub.runs.values()
    assert run["conclusion"] == "failure" and run["output"]["annotations_count"] == 120
    assert all(len(w.data["output"]["annotations"]) <= MAX_ANNOTATIONS for w in fake_gh.writes)
    await upsert_check_run(fake_gh, FORK, "a" * 40, plan, remaining)
    assert fake_gh.write_count == 3  # nothing changed: no request


async def test_check_run_resumes_after_a_crash_between_batches(fake_gh: FakeGH) -> None:
    hub = Hub(fake_gh)
    plan = many_items(120)
    remaining = initial_remaining(plan, {})
    await upsert_check_run(fake_gh, FORK, "a" * 40, plan, remaining, max_batches=1)
    await upsert_check_run(fake_gh, FORK, "a" * 40, plan, remaining)  # the rerun
    (run,) = hub.runs.values()
    assert run["output"]["annotations_count"] == 120
    assert fake_gh.write_count == 3


async def test_check_run_passes_when_nothing_remains(fake_gh: FakeGH) -> None:
    hub = Hub(fake_gh)
    await upsert_check_run(fake_gh, FORK, "b" * 40, many_items(2), [])
    (run,) = hub.runs.values()
    assert run["conclusion"] == "success"
    assert run["output"]["title"] == "All conflicts resolved"


# -- publish_sync on real repositories --------------------------------------------------


def git(*args: str | Path) -> str:
    return subprocess.run(["git", *map(str, args)], check=True, capture_output=True,
                          text=True).stdout.strip()


@dataclasses.dataclass
class World:
    scenario: Scenario
    remotes: Path
    ctx: FakeContext
    hub: Hub

    @property
    def fork_remote(self) -> Path:
        return self.remotes / f"{FORK}.git"

    def remote_head(self, branch: str) -> str | None:
        out = git("--git-dir", self.fork_remote, "for-each-ref", "--format=%(objectname)",
                  f"refs/heads/{branch}")
        return out or None

    def upstream_pr(self, work: Path, number: int, title: str, files: dict[str, str]) -> None:
        """Merge an upstream PR (squash style) straight into the upstream remote."""
        if not work.exists():
            git("clone", "-q", self.remotes / f"{UPSTREAM}.git", work)
        for path, text in files.items():
            (work / path).parent.mkdir(parents=True, exist_ok=True)
            (work / path).write_text(text)
            git("-C", work, "add", path)
        git("-C", work, "-c", "user.name=bob", "-c", "user.email=bob@x", "commit", "-qm",
            f"{title} (#{number})")
        git("-C", work, "push", "-q", "origin", "HEAD:main")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    return make_demo(tmp_path_factory.mktemp("demo"))


@pytest.fixture
def world(tmp_path: Path, demo: Scenario, fake_ctx: FakeContext) -> World:
    remotes = tmp_path / "remotes"
    for name, src in ((UPSTREAM, demo.upstream_dir), (FORK, demo.fork_dir)):
        git("clone", "-q", "--bare", src, remotes / f"{name}.git")
        serve_filters(remotes / f"{name}.git")  # the App's caches are partial clones
    fake_ctx.settings = dataclasses.replace(fake_ctx.settings, git_url=f"file://{remotes}")
    hub = Hub(fake_ctx.gh, remotes / f"{FORK}.git")
    return World(demo, remotes, fake_ctx, hub)


async def test_a_sync_opens_one_draft_pr_with_one_review_and_a_failing_check(
        world: World) -> None:
    gh, hub = world.ctx.gh, world.hub
    result = await publish_sync(world.ctx, FORK, 1)
    state = load_fork_state(world.ctx.store, FORK)
    plan = json.loads(Path(state["sync"]["plan_file"]).read_text())
    assert result.action == "opened" and result.pr_number == 7
    assert result.branch == sync_branch_name(plan["cutoff"])
    assert world.remote_head(result.branch) == result.commit
    assert state["pushed"] == [result.commit]
    assert (state["upstream"], state["installation_id"]) == (UPSTREAM, 1)

    (pull,) = hub.pulls.values()
    assert pull["draft"] is True and pull["body"].startswith(BEGIN) and END in pull["body"]
    assert "#11..#20" in pull["title"]
    (review,) = hub.reviews[7]
    assert review["event"] == "COMMENT" and review["commit_id"] == result.commit
    assert review_marker(result.commit) in review["body"]
    # Every item whose file is in the PR diff has a thread; the others (a binary conflict
    # and two policies keep the fork's file) have none, and both bodies say so.
    diff = local_diff(str(world.fork_remote), "refs/heads/main", result.commit)
    in_diff = set(re.findall(r"^\+\+\+ b/(.*)$", diff, re.MULTILINE))
    items = plan_items(plan)
    assert result.unanchored == [i["id"] for i in items if i["path"] not in in_diff] \
        == ["Q1", "Q2", "Q4"]
    carried = [i for c in review["comments"] for i in re.findall(r"\*\*(Q\d+) ·", c["body"])]
    assert carried == [i["id"] for i in items if i["path"] in in_diff]
    for comment in review["comments"]:
        assert comment["side"] == "RIGHT" and comment["body"]
    n, threads = len(items), len(review["comments"])
    assert threads == n - 3 >= 3
    assert f"{threads} threads for {n} review items" in review["body"]
    assert "**3 items with no thread**" in review["body"]
    assert f"{threads} of {n} review items have a review thread" in pull["body"]
    (run,) = hub.runs.values()
    assert run["head_sha"] == result.commit and run["conclusion"] == "failure"
    assert run["output"]["annotations_count"] >= 1

    items = len(plan["files"] and [i for f in plan["files"] for i in f["review_items"]])
    assert result.writes == gh.write_count <= 5 + math.ceil(items / 50)
    # The PR, its review, then its body says what the review carries; the check.
    assert [(w.method, w.url) for w in gh.writes] == [
        ("POST", f"/repos/{FORK}/pulls"), ("POST", f"/repos/{FORK}/pulls/7/reviews"),
        ("PATCH", f"/repos/{FORK}/pulls/7"), ("POST", f"/repos/{FORK}/check-runs")]
    assert "review thread" not in gh.writes[0].data["body"]  # nothing claimed before


async def test_running_the_same_sync_again_writes_nothing(world: World) -> None:
    first = await publish_sync(world.ctx, FORK, 1)
    writes = world.ctx.gh.write_count
    again = await publish_sync(world.ctx, FORK, 1)
    assert again.action == "unchanged" and again.pr_number == first.pr_number
    assert world.ctx.gh.write_count == writes


async def test_a_crash_after_every_step_still_ends_with_one_of_each(world: World) -> None:
    """Lose the state after the run (a kill -9 before it was saved): GitHub is searched."""
    first = await publish_sync(world.ctx, FORK, 1)
    state = load_fork_state(world.ctx.store, FORK)
    sync = state["sync"]
    for key in ("pr", "review_commit", "check_runs", "unanchored", "delivery"):
        sync.pop(key)
    save_fork_state(world.ctx.store, FORK, state)
    writes = world.ctx.gh.write_count
    again = await publish_sync(world.ctx, FORK, 1)
    assert again.action == "resumed" and again.commit == first.commit
    assert len(world.hub.pulls) == 1 and len(world.hub.reviews[7]) == 1
    assert len(world.hub.runs) == 1
    assert world.ctx.gh.write_count == writes


async def test_a_newer_upstream_updates_the_open_pr_and_never_opens_another(
        world: World, tmp_path: Path) -> None:
    await publish_sync(world.ctx, FORK, 1)
    world.upstream_pr(tmp_path / "up", 21, "Another change", {"slime/new.py": "x = 1\n"})
    world.upstream_pr(tmp_path / "up", 22, "And one more", {"slime/new2.py": "y = 1\n"})
    writes = world.ctx.gh.write_count
    result = await publish_sync(world.ctx, FORK, 1)
    assert result.action == "behind"
    assert len(world.hub.pulls) == 1
    assert "Behind upstream by 2 PRs" in world.hub.pulls[7]["body"]
    (run,) = world.hub.runs.values()
    assert "Behind upstream by 2 PRs" in run["output"]["summary"]
    assert world.ctx.gh.write_count - writes == 2
    assert load_fork_state(world.ctx.store, FORK)["sync"]["behind"] == 2


async def test_people_text_in_the_body_is_kept_when_the_bot_rewrites_its_section(
        world: World, tmp_path: Path) -> None:
    await publish_sync(world.ctx, FORK, 1)
    world.hub.pulls[7]["body"] = "Notes from Vera.\n\n" + world.hub.pulls[7]["body"]
    world.upstream_pr(tmp_path / "up", 23, "Late change", {"slime/late.py": "z = 1\n"})
    await publish_sync(world.ctx, FORK, 1)
    assert world.hub.pulls[7]["body"].startswith("Notes from Vera.\n\n" + BEGIN)
    assert "Behind upstream by 1 PR" in world.hub.pulls[7]["body"]


async def test_the_bot_never_pushes_over_a_head_it_did_not_write(world: World) -> None:
    first = await publish_sync(world.ctx, FORK, 1)
    world.hub.pulls[7]["state"] = "closed"  # closed unmerged: the same window again
    # A person pushes to the sync branch.
    git("--git-dir", world.fork_remote, "update-ref", f"refs/heads/{first.branch}",
        world.scenario.fork_head)
    state = load_fork_state(world.ctx.store, FORK)
    state["sync"]["ours"] = "0" * 40  # so the rerun does not resume the same sync
    save_fork_state(world.ctx.store, FORK, state)
    result = await publish_sync(world.ctx, FORK, 1)
    assert result.action == "refused"
    assert world.remote_head(first.branch) == world.scenario.fork_head
    (comment,) = world.hub.comments
    remotes = world.remotes
    assert f"git push file://{remotes}/{FORK}.git --delete {first.branch}" in comment["body"]
    assert (f"forksync sync --fork . --upstream file://{remotes}/{UPSTREAM}.git "
            f"--to {first_tip(world)} --branch {first.branch}-manual") in comment["body"]
    await publish_sync(world.ctx, FORK, 1)
    assert len(world.hub.comments) == 1  # said once


async def test_a_rejected_review_is_posted_again_with_its_comments_in_the_body(
        world: World) -> None:
    gh = world.ctx.gh
    rejected = BadRequest(422, "Unprocessable Entity")  # type: ignore[arg-type]
    rejected.errors = ["Line could not be resolved"]  # type: ignore[attr-defined]
    create = world.hub.create_review
    calls: list[int] = []

    def once_422(request: Request) -> dict[str, Any]:
        calls.append(1)
        if len(calls) == 1:
            raise rejected
        return create(request)

    gh.on("POST", re.compile(r"/repos/vime-org/vime/pulls/(\d+)/reviews"), once_422)
    result = await publish_sync(world.ctx, FORK, 1)
    (review,) = world.hub.reviews[7]
    assert "comments" not in review and review_marker(result.commit) in review["body"]
    # The review body carries every item GitHub refused, and the PR body lists them.
    assert "items with no thread**" in review["body"]
    assert "GitHub refused the comment on `vime/backends/vllm_utils/vllm_engine.py`" \
        in review["body"]
    body = world.hub.pulls[7]["body"]
    assert "Items with no thread on the diff" in body
    assert "**Q3** `vime/backends/vllm_utils/vllm_engine.py` L21–28" in body
    assert re.search(r" 0 of \d+ review items have a review thread\.", body)
    assert set(result.unanchored) >= {"Q3", "Q5"}
    assert len(calls) == 2


async def test_a_config_error_is_reported_as_a_failing_check_on_fork_main(
        world: World, tmp_path: Path) -> None:
    work = tmp_path / "fix"
    git("clone", "-q", world.fork_remote, work)
    (work / ".github" / "forksync.yml").write_text("upstream: {repo: 3}\n")
    git("-C", work, "-c", "user.name=v", "-c", "user.email=v@x", "commit", "-qam", "break")
    git("-C", work, "push", "-q", "origin", "HEAD:main")
    result = await publish_sync(world.ctx, FORK, 1)
    assert result.action == "refused"
    (run,) = world.hub.runs.values()
    assert run["conclusion"] == "failure" and "forksync.yml" in run["output"]["summary"]
    assert world.hub.pulls == {}


async def test_a_repository_without_config_is_left_alone(world: World, tmp_path: Path) -> None:
    work = tmp_path / "fix"
    git("clone", "-q", world.fork_remote, work)
    git("-C", work, "rm", "-q", ".github/forksync.yml")
    git("-C", work, "-c", "user.name=v", "-c", "user.email=v@x", "commit", "-qm", "drop")
    git("-C", work, "push", "-q", "origin", "HEAD:main")
    result = await publish_sync(world.ctx, FORK, 1)
    assert result.action == "not-configured" and world.ctx.gh.write_count == 0


def test_remaining_round_trips_through_json() -> None:
    r = Remaining("p", "Q1", 1, 3, "m", marker=False)
    assert Remaining.from_json(json.loads(json.dumps(r.to_json()))) == r


def _forget_the_steps_after_the_pr(world: World, *, other_machine: bool,
                                   plan: str = "store") -> dict[str, Any]:
    """As if the run died right after opening the PR. ``other_machine``: the replica that
    takes the job over lacks the fork's cache (which held commit 1), as on another
    machine or after an eviction; ``plan``: where it finds the plan ("file": its own
    disk, "store": the store's copy alone, "nowhere": neither, as an older forksync on
    another machine left it)."""
    world.hub.reviews.clear()
    world.hub.runs.clear()
    state = load_fork_state(world.ctx.store, FORK)
    for key in ("review_commit", "check_runs"):
        state["sync"].pop(key)
    if plan == "nowhere":
        assert world.ctx.store.delete_state(state["sync"].pop("plan_key"))
    save_fork_state(world.ctx.store, FORK, state)
    if plan != "file":
        Path(state["sync"]["plan_file"]).unlink()
    if other_machine:
        shutil.rmtree(remote.mirror_path(world.ctx.settings.cache_dir, FORK))
    return state


async def test_a_crash_during_the_review_resumes_with_the_open_pr(world: World) -> None:
    first = await publish_sync(world.ctx, FORK, 1)
    _forget_the_steps_after_the_pr(world, other_machine=False, plan="file")
    again = await publish_sync(world.ctx, FORK, 1)
    assert again.action == "resumed" and again.pr_number == first.pr_number
    assert len(world.hub.pulls) == 1 and len(world.hub.reviews[7]) == 1
    assert len(world.hub.runs) == 1


def _move_fork_main(world: World, work: Path) -> None:
    git("clone", "-q", world.fork_remote, work)
    (work / "NOTES.md").write_text("the fork moved on\n")
    git("-C", work, "add", "NOTES.md")
    git("-C", work, "-c", "user.name=v", "-c", "user.email=v@x", "commit", "-qm", "move")
    git("-C", work, "push", "-q", "origin", "HEAD:main")


@pytest.mark.parametrize("plan", ["file", "store", "nowhere"])
@pytest.mark.parametrize("main_moved", [False, True], ids=["main as it was", "main moved"])
async def test_a_takeover_without_commit_1_in_its_cache_finishes_the_pr(
        world: World, tmp_path: Path, plan: str, main_moved: bool) -> None:
    first = await publish_sync(world.ctx, FORK, 1)
    _forget_the_steps_after_the_pr(world, other_machine=True, plan=plan)
    if main_moved:
        _move_fork_main(world, tmp_path / "moved")
    again = await publish_sync(world.ctx, FORK, 1)
    (run,) = world.hub.runs.values()
    assert run["head_sha"] == first.commit and run["conclusion"] == "failure"
    state = load_fork_state(world.ctx.store, FORK)
    if main_moved and plan == "nowhere":
        # Computed again, the sync gives another commit 1: the PR says so on commit 1.
        assert again.action == "refused" and world.hub.reviews.get(7, []) == []
        assert run["output"]["title"] == "forksync cannot finish this sync"
        assert "`/sync refresh`" in run["output"]["summary"]
    else:
        # The plan (read, or computed again from the same inputs) and commit 1 (fetched
        # from the sync branch, or made again): its review and check, on the same PR.
        assert again.action == "resumed" and again.commit == first.commit
        assert len(world.hub.pulls) == 1 and len(world.hub.reviews[7]) == 1
        assert run["output"]["title"] != "forksync cannot finish this sync"
        assert load_plan(state["sync"], world.ctx.store)["tip"] == state["sync"]["tip"]
    assert world.remote_head(state["sync"]["branch"]) == first.commit  # nothing pushed over it


async def test_a_replica_without_the_plan_file_reads_the_stores_copy(world: World) -> None:
    first = await publish_sync(world.ctx, FORK, 1)
    sync = load_fork_state(world.ctx.store, FORK)["sync"]
    on_disk = load_plan(sync)
    Path(sync["plan_file"]).unlink()  # another machine's data directory
    with pytest.raises(ForksyncError, match="`/sync refresh`"):
        load_plan(sync)
    assert load_plan(sync, world.ctx.store) == on_disk
    assert re.fullmatch(rf"plan:{FORK}:\d{{15}}:{first.commit}", sync["plan_key"])


def test_the_store_keeps_a_forks_newest_plans(fake_ctx: FakeContext,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    store, settings = fake_ctx.store, fake_ctx.settings
    # A plan saved by round 13's forksync has a key without a time: the oldest of all.
    store.put_state(f"plan:{FORK}:{'0' * 40}", {"saved_at": 9e9, "plan": {"n": -1}})
    clock = iter(range(1_800_000_000, 1_800_000_100))
    monkeypatch.setattr("bot.sync.state.time.time", lambda: float(next(clock)))
    # Commits whose names sort against their age: the order must come from the time.
    saved = [save_plan(settings, FORK, f"{99 - n:040x}", {"n": n}, store)
             for n in range(MAX_PLANS + 2)]
    assert store.state_keys(f"plan:{FORK}:") == [s["plan_key"] for s in saved[2:]]
    assert all(store.get_state(s["plan_key"])["plan"] == {"n": n}  # type: ignore[index]
               for n, s in enumerate(saved) if n >= 2)
    save_plan(settings, "other/fork", "f" * 40, {"n": 0}, store)  # another fork's: apart
    assert len(store.state_keys(f"plan:{FORK}:")) == MAX_PLANS
    # A replica whose clock is behind keeps the plan it just saved; an older one goes.
    monkeypatch.setattr("bot.sync.state.time.time", lambda: 1_700_000_000.0)
    late = save_plan(settings, FORK, "e" * 40, {"n": "late"}, store)
    kept = store.state_keys(f"plan:{FORK}:")
    assert late["plan_key"] in kept and saved[2]["plan_key"] not in kept
    assert len(kept) == MAX_PLANS


async def test_the_schedule_queues_a_sync_only_when_upstream_moved(
        world: World, tmp_path: Path) -> None:
    from bot.sync.jobs import SYNC, poll_job

    await publish_sync(world.ctx, FORK, 1)
    await poll_job(world.ctx, {"fork": FORK, "installation_id": 1})
    assert world.ctx.enqueued == []
    world.upstream_pr(tmp_path / "up", 24, "Moved on", {"slime/moved.py": "m = 1\n"})
    await poll_job(world.ctx, {"fork": FORK, "installation_id": 1})
    await poll_job(world.ctx, {"fork": FORK, "installation_id": 1})  # the next tick
    head = git("--git-dir", world.remotes / f"{UPSTREAM}.git", "rev-parse", "main")
    assert world.ctx.enqueued == [(SYNC, FORK, {"fork": FORK, "installation_id": 1},
                                   f"sync:{FORK}:{head}")]


@pytest.fixture
def fresh(tmp_path: Path, fake_ctx: FakeContext) -> tuple[Scenario, Path]:
    """A fork synced up to the upstream tip: a window with nothing in it."""
    s = Scenario(tmp_path / "fresh")
    s.sync_fork()
    remotes = tmp_path / "remotes"
    for name, src in ((UPSTREAM, s.upstream_dir), (FORK, s.fork_dir)):
        git("clone", "-q", "--bare", src, remotes / f"{name}.git")
        serve_filters(remotes / f"{name}.git")
    fake_ctx.settings = dataclasses.replace(fake_ctx.settings, git_url=f"file://{remotes}")
    Hub(fake_ctx.gh, remotes / f"{FORK}.git")
    return s, remotes


async def test_an_empty_window_opens_nothing(fresh: tuple[Scenario, Path],
                                             fake_ctx: FakeContext) -> None:
    result = await publish_sync(fake_ctx, FORK, 1)
    assert result.action == "up-to-date" and fake_ctx.gh.write_count == 0
    assert load_fork_state(fake_ctx.store, FORK)["upstream"] == UPSTREAM


async def test_an_engine_error_people_must_fix_is_one_failing_check_on_fork_main(
        fresh: tuple[Scenario, Path], fake_ctx: FakeContext, tmp_path: Path) -> None:
    scenario, remotes = fresh
    # The config names an upstream the fork never synced from: there is no cutoff.
    git("clone", "-q", "--bare", scenario.upstream_dir, remotes / "other" / "slime.git")
    work = tmp_path / "fix"
    git("clone", "-q", remotes / f"{FORK}.git", work)
    config = work / ".github" / "forksync.yml"
    config.write_text(config.read_text().replace("THUDM/slime", "other/slime"))
    git("-C", work, "-c", "user.name=v", "-c", "user.email=v@x", "commit", "-qam", "move")
    git("-C", work, "push", "-q", "origin", "HEAD:main")
    hub = Hub(fake_ctx.gh, remotes / f"{FORK}.git")
    for _ in range(2):
        result = await publish_sync(fake_ctx, FORK, 1)
        assert result.action == "refused"
    (run,) = hub.runs.values()
    assert run["conclusion"] == "failure" and "Upstream-Sync" in run["output"]["summary"]
    assert "git commit --allow-empty" in run["output"]["summary"]
    assert fake_ctx.gh.write_count == 1 and hub.pulls == {}

    # The first sync names its cutoff explicitly (as `forksync sync --publish --from`).
    first = git("--git-dir", remotes / "other" / "slime.git", "rev-list", "--max-parents=0",
                "main")
    result = await publish_sync(fake_ctx, FORK, 1, cutoff=first)
    assert result.action == "opened" and len(hub.pulls) == 1
    assert load_fork_state(fake_ctx.store, FORK)["sync"]["cutoff"] == first


async def test_a_pr_created_by_a_lost_first_try_is_found_not_created_again(
        world: World) -> None:
    create = world.hub.create_pull

    def created_then_422(request: Request) -> dict[str, Any]:
        create(request)  # the first try got through, but its answer was lost
        raise BadRequest(422, "Validation Failed")  # type: ignore[arg-type]

    world.ctx.gh.on("POST", f"/repos/{FORK}/pulls", created_then_422)
    result = await publish_sync(world.ctx, FORK, 1)
    assert result.pr_number == 7 and len(world.hub.pulls) == 1
    assert len(world.hub.reviews[7]) == 1


async def test_a_diff_too_large_to_render_is_read_from_the_file_patches(world: World) -> None:
    from unidiff.patch import PatchSet

    hub, gh = world.hub, world.ctx.gh
    get_pull = hub.get_pull

    def no_whole_diff(request: Request) -> Any:
        if request.accept and "diff" in request.accept:
            raise BadRequest(406, "diff too large")  # type: ignore[arg-type]
        return get_pull(request)

    def files(request: Request) -> list[dict[str, Any]]:
        pull = hub.pulls[7]
        diff = local_diff(str(world.fork_remote), "refs/heads/main",
                          f"refs/heads/{pull['head']['ref']}")
        return [{"filename": pf.path, "patch": "".join(str(h) for h in pf)}
                for pf in PatchSet(diff) if not pf.is_binary_file]

    gh.on("GET", re.compile(r"/repos/vime-org/vime/pulls/(\d+)"), no_whole_diff)
    gh.on("GET", re.compile(r"/repos/vime-org/vime/pulls/(\d+)/files"), files)
    result = await publish_sync(world.ctx, FORK, 1)
    (review,) = hub.reviews[7]
    # The same threads as from the whole diff: every item but those on unchanged files.
    items = len(plan_items(load_plan(load_fork_state(world.ctx.store, FORK)["sync"])))
    assert len(review["comments"]) == items - 3 and result.unanchored == ["Q1", "Q2", "Q4"]
    assert gh.sent("GET", "/repos/vime-org/vime/pulls/7/files")


async def test_a_report_too_long_for_the_body_is_committed_and_linked(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    import bot.engine.pipeline

    monkeypatch.setattr(bot.engine.pipeline, "needs_overflow", lambda plan: True)
    result = await publish_sync(world.ctx, FORK, 1)
    sync = load_fork_state(world.ctx.store, FORK)["sync"]
    path = sync["report_url"].split(f"/blob/{result.commit}/", 1)[1]
    assert sync["report_url"].startswith(f"https://github.com/{FORK}/blob/{result.commit}/")
    report = git("--git-dir", world.fork_remote, "show", f"{result.branch}:{path}")
    assert report.startswith(BEGIN) and "Window: 11 upstream changes" in report


def test_publish_from_the_cli_needs_the_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.errors import ForksyncError
    from bot.sync.publish.cli import publish_from_cli

    monkeypatch.delenv("GITHUB_REPOSITORY", raising=False)
    with pytest.raises(ForksyncError, match="GITHUB_REPOSITORY"):
        publish_from_cli(None)


async def test_fake_gh_answers_status_like_github(fake_gh: FakeGH) -> None:
    fake_gh.on("GET", "/repos/a/b/collaborators/c", {})
    assert await fake_gh.getstatus("/repos/a/b/collaborators/c") == 200
    assert await fake_gh.getstatus("/repos/a/b/collaborators/d") == 404
