"""The follow-up: which review items people resolved, and the rescan's writes."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bot.engine.markers import find_marker_regions, split_lines
from bot.sync.followup import classify_resolution, rescan, resolution_text, scan
from bot.sync.publish import publish_sync
from bot.sync.state import load_fork_state, load_plan
from tests.conftest import FakeContext
from tests.factory import Scenario, make_demo
from tests.partial import serve_filters
from tests.test_publish import FORK, UPSTREAM, Hub, git

COMMIT1 = """\
a
<<<<<<< ours
x1
||||||| base
x0
=======
x2
>>>>>>> theirs
b
<<<<<<< ours
y1
||||||| base
y0
=======
y2
>>>>>>> theirs
c
"""


def plan_for(*items: dict[str, Any], path: str = "f.py") -> dict[str, Any]:
    return {"upstream": {"repo": UPSTREAM, "branch": "main"}, "window_label": "#1..#2",
            "files": [{"path": path, "status": "conflict", "note": "",
                       "review_items": list(items)}]}


def conflict(item_id: str, start: int, end: int, suggestion: str | None) -> dict[str, Any]:
    region = next(r for r in find_marker_regions(COMMIT1) if r.start_line == start)
    return {"id": item_id, "kind": "conflict", "path": "f.py", "tier": "Confirm",
            "reason": "r", "question": None, "start_line": start, "end_line": end,
            "ours": region.ours, "base": region.base, "theirs": region.theirs,
            "suggestion": suggestion, "prs": []}


Q1 = conflict("Q1", 2, 8, "x2\n")
Q2 = conflict("Q2", 10, 16, "y1\ny2\n")


def apply_suggestion(text: str, item: dict[str, Any]) -> str:
    """What GitHub's "Commit suggestion" does: the commented lines become the suggestion."""
    lines = split_lines(text)
    start, end = item["start_line"], item["end_line"]
    return "".join(lines[:start - 1]) + item["suggestion"] + "".join(lines[end:])


def test_nothing_is_resolved_at_commit_1() -> None:
    result = scan(plan_for(Q1, Q2), {"f.py": COMMIT1}, {"f.py": COMMIT1}, answers={})
    assert result.resolved == []
    assert [(r.item_id, r.start_line, r.end_line) for r in result.remaining] == [
        ("Q1", 2, 8), ("Q2", 10, 16)]


def test_a_committed_suggestion_resolves_its_hunk_and_only_that_one() -> None:
    head = "new first line\n" + apply_suggestion(COMMIT1, Q1)
    result = scan(plan_for(Q1, Q2), {"f.py": COMMIT1}, {"f.py": head}, answers={})
    assert result.resolved == ["Q1"] and result.resolutions == {"Q1": "suggested"}
    # Q2 moved: one line added above, six marker lines gone.
    assert [(r.item_id, r.start_line, r.end_line) for r in result.remaining] == [
        ("Q2", 5, 11)]


def test_how_each_hunk_was_resolved_is_recorded() -> None:
    head = COMMIT1.replace("<<<<<<< ours\nx1\n||||||| base\nx0\n=======\nx2\n>>>>>>> theirs\n",
                           "x1\n").replace(
        "<<<<<<< ours\ny1\n||||||| base\ny0\n=======\ny2\n>>>>>>> theirs\n", "y2 and more\n")
    result = scan(plan_for(Q1, Q2), {"f.py": COMMIT1}, {"f.py": head}, answers={})
    assert result.resolutions == {"Q1": "ours", "Q2": "edited"}
    assert result.remaining == []


def test_markers_people_leave_or_paste_keep_the_check_failing() -> None:
    stray = "z\n<<<<<<< HEAD\nmine\n=======\nyours\n>>>>>>> other\n"
    head = apply_suggestion(apply_suggestion(COMMIT1, Q2), Q1) + stray
    result = scan(plan_for(Q1, Q2), {"f.py": COMMIT1}, {"f.py": head}, answers={})
    assert result.resolved == ["Q1", "Q2"]
    # Another tool's labels: a question the check asks (it may be content), not a pass.
    assert [(r.item_id, r.marker, r.orphan) for r in result.remaining] == [("M1", False, True)]
    # The bot's own labels pasted back are surely a leftover.
    stray = "z\n<<<<<<< ours\nmine\n=======\nyours\n>>>>>>> theirs\n"
    head = apply_suggestion(apply_suggestion(COMMIT1, Q2), Q1) + stray
    result = scan(plan_for(Q1, Q2), {"f.py": COMMIT1}, {"f.py": head}, answers={})
    assert [(r.item_id, r.marker, r.orphan) for r in result.remaining] == [(None, True, False)]


def test_a_file_merged_at_a_larger_marker_size_is_scanned_at_that_size() -> None:
    # Its inputs had a setext underline, so the merge wrote 8-character markers.
    commit1 = ("Title\n=======\n<<<<<<<< ours\nours\n|||||||| upstream@0123456789ab\nbase\n"
               "========\ntheirs\n>>>>>>>> theirs\n")
    (region,) = find_marker_regions(commit1, 8)
    item = {"id": "Q1", "kind": "conflict", "path": "f.md", "tier": "Decide", "reason": "r",
            "question": "?", "start_line": 3, "end_line": 9, "ours": region.ours,
            "base": region.base, "theirs": region.theirs, "suggestion": None, "prs": []}
    plan = plan_for(item, path="f.md")
    plan["files"][0]["marker_size"] = 8
    open_ = scan(plan, {"f.md": commit1}, {"f.md": commit1}, answers={})
    assert [(r.item_id, r.start_line, r.end_line) for r in open_.remaining] == [("Q1", 3, 9)]
    # Read at git's default size (a report without the size) the region is invisible,
    # and the item would tick while its markers are still there.
    del plan["files"][0]["marker_size"]
    assert scan(plan, {"f.md": commit1}, {"f.md": commit1}, answers={}).resolved == ["Q1"]
    plan["files"][0]["marker_size"] = 8
    done = scan(plan, {"f.md": commit1}, {"f.md": "Title\n=======\nours\n"}, answers={})
    assert done.resolved == ["Q1"] and done.resolutions == {"Q1": "ours"}


def test_a_deleted_file_resolves_its_hunks() -> None:
    result = scan(plan_for(Q1, Q2), {"f.py": COMMIT1}, {"f.py": None}, answers={})
    assert result.resolved == ["Q1", "Q2"] and result.resolutions["Q1"] == "deleted"


def test_decisions_without_a_region_need_an_answer_or_a_change() -> None:
    flag = {"id": "Q3", "kind": "flag", "path": "f.py", "tier": "Decide", "reason": "flag",
            "question": "keep?", "start_line": 17, "end_line": 17, "prs": []}
    whole = {"id": "Q4", "kind": "file", "path": "f.py", "tier": "Decide", "reason": "binary",
             "question": "which?", "start_line": None, "end_line": None, "prs": []}
    settled = {"id": "Q5", "kind": "policy", "path": "f.py", "tier": "Settled", "reason": "ours",
               "start_line": None, "end_line": None, "prs": []}
    plan = plan_for(flag, whole, settled)
    open_ = scan(plan, {"f.py": "c\n"}, {"f.py": "c\n"}, answers={})
    assert [(r.item_id, r.marker) for r in open_.remaining] == [("Q3", False), ("Q4", False)]
    # A whole-file item does not tick because the file changed (issue 11): it needs one of
    # its answers; with no tree entries to compare, only an answer closes it.
    edited = scan(plan, {"f.py": "c\n"}, {"f.py": "changed\n"}, answers={"Q3": "keep"})
    assert edited.resolved == ["Q3"] and [r.item_id for r in edited.remaining] == ["Q4"]
    done = scan(plan, {"f.py": "c\n"}, {"f.py": "changed\n"},
                answers={"Q3": "keep", "Q4": "ours"})
    assert done.resolved == ["Q3", "Q4"] and done.remaining == []


@pytest.mark.parametrize(("old", "new", "expected"), [
    ("a\nX\nY\nb\n", "a\nZ\nb\n", "Z\n"),
    ("a\nX\nY\nb\n", "a\nb\n", ""),
    ("a\nX\nY\nb\n", "new\na\nX2\nY\nb\n", "X2\nY\n"),
])
def test_resolution_text_is_what_replaced_the_lines(old: str, new: str, expected: str) -> None:
    assert resolution_text(old, new, 2, 3) == expected


def test_classify_prefers_the_suggestion_when_sides_agree() -> None:
    assert classify_resolution({"suggestion": "x\n", "theirs": "x\n", "ours": "o\n"},
                               "x\n") == "suggested"
    assert classify_resolution({"suggestion": None, "theirs": "t\n", "ours": "o\n"},
                               "o\n") == "ours"
    assert classify_resolution({"suggestion": None}, None) == "edited"


# -- the rescan job, on the demo's real repositories ------------------------------------


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    return make_demo(tmp_path_factory.mktemp("demo"))


@dataclasses.dataclass
class Published:
    ctx: FakeContext
    hub: Hub
    remote: Path
    branch: str
    commit: str
    pr: int

    def person_pushes(self, work: Path, edit: dict[str, str]) -> str:
        if not work.exists():
            git("clone", "-q", "-b", self.branch, self.remote, work)
        for path, text in edit.items():
            (work / path).write_text(text)
            git("-C", work, "add", path)
        git("-C", work, "-c", "user.name=vera", "-c", "user.email=v@x", "commit", "-qm", "fix")
        git("-C", work, "push", "-q", "origin", f"HEAD:{self.branch}")
        return git("-C", work, "rev-parse", "HEAD")

    def text_at_commit(self, path: str) -> str:
        return subprocess.run(["git", f"--git-dir={self.remote}", "show", f"{self.commit}:{path}"],
                              check=True, capture_output=True, text=True).stdout


@pytest.fixture
async def published(tmp_path: Path, demo: Scenario, fake_ctx: FakeContext) -> Published:
    remotes = tmp_path / "remotes"
    for name, src in ((UPSTREAM, demo.upstream_dir), (FORK, demo.fork_dir)):
        git("clone", "-q", "--bare", src, remotes / f"{name}.git")
        serve_filters(remotes / f"{name}.git")  # the App's caches are partial clones
    fake_ctx.settings = dataclasses.replace(fake_ctx.settings, git_url=f"file://{remotes}")
    hub = Hub(fake_ctx.gh, remotes / f"{FORK}.git")
    result = await publish_sync(fake_ctx, FORK, 1)
    assert result.pr_number and result.branch and result.commit
    return Published(fake_ctx, hub, remotes / f"{FORK}.git", result.branch, result.commit,
                     result.pr_number)


def item_by_path(ctx: FakeContext, path: str) -> dict[str, Any]:
    plan = load_plan(load_fork_state(ctx.store, FORK)["sync"])
    return next(i for f in plan["files"] for i in f["review_items"]
                if i["path"] == path and i["kind"] == "conflict")


async def test_a_push_that_resolves_a_file_ticks_it_and_moves_the_check(
        published: Published, tmp_path: Path) -> None:
    p, gh = published, published.ctx.gh
    path = "vime/backends/vllm_utils/vllm_engine.py"
    item = item_by_path(p.ctx, path)
    resolved = apply_suggestion(p.text_at_commit(path), item | {"suggestion": item["theirs"]})
    head = p.person_pushes(tmp_path / "work", {path: resolved})
    before = gh.write_count
    result = await rescan(p.ctx, FORK, 1, p.pr, head)
    assert result is not None and item["id"] in result.resolved
    assert gh.write_count - before <= 2
    body = p.hub.pulls[p.pr]["body"]
    assert f"- [x] `{path}`" in body and "- [ ] `vime/utils/arguments.py`" in body
    assert p.hub.pulls[p.pr]["title"].endswith("[3 conflicted files need review]")
    (run,) = [r for r in p.hub.runs.values() if r["head_sha"] == head]
    assert run["conclusion"] == "failure" and path not in run["output"]["summary"]
    state = load_fork_state(p.ctx.store, FORK)["sync"]
    assert state["resolutions"][item["id"]] == "theirs" and state["head"] == head

    again = gh.write_count
    await rescan(p.ctx, FORK, 1, p.pr, head)  # the same head again: nothing to send
    assert gh.write_count == again


async def test_rescan_of_the_bots_own_commit_writes_nothing(published: Published) -> None:
    before = published.ctx.gh.write_count
    result = await rescan(published.ctx, FORK, 1, published.pr, published.commit)
    assert result is not None and result.resolved == []
    assert published.ctx.gh.write_count == before


async def test_rescan_of_a_pr_that_is_not_the_sync_pr_does_nothing(
        published: Published) -> None:
    assert await rescan(published.ctx, FORK, 1, published.pr + 1, published.commit) is None


def test_residue_counts_only_in_lines_people_changed() -> None:
    from bot.engine.config import load_config
    from bot.engine.translate import Translator
    from bot.sync.followup import residue_remaining
    from tests.factory import DEFAULT_CONFIG

    translator = Translator(load_config(DEFAULT_CONFIG, ".github/forksync.yml").translate)
    plan = {"files": [{"path": "vime/x.py", "upstream_path": "slime/x.py", "review_items": []}]}
    before = "import vllm  # fine\nold = 1\nlegacy = 'sglang'  # the fork's own\n"
    after = before.replace("old = 1", "engine = sglang.Engine()")
    (residue,) = residue_remaining(translator, plan, {"vime/x.py": before},
                                   {"vime/x.py": after})
    assert (residue.path, residue.start_line, residue.residue, residue.marker) == (
        "vime/x.py", 2, True, False)
    assert "vllm.Engine()" in residue.message
    assert residue_remaining(translator, plan, {"vime/x.py": before},
                             {"vime/x.py": before}) == []


async def test_a_resolution_with_upstream_names_keeps_the_check_failing(
        published: Published, tmp_path: Path) -> None:
    p = published
    path = "vime/backends/vllm_utils/vllm_engine.py"
    item = item_by_path(p.ctx, path)
    pasted = "        return sglang.generate(prompts)  # pasted from upstream\n"
    resolved = apply_suggestion(p.text_at_commit(path), item | {"suggestion": pasted})
    head = p.person_pushes(tmp_path / "work", {path: resolved})
    result = await rescan(p.ctx, FORK, 1, p.pr, head)
    assert result is not None and item["id"] in result.resolved
    (residue,) = [r for r in result.remaining if r.residue]
    assert residue.path == path
    (run,) = [r for r in p.hub.runs.values() if r["head_sha"] == head]
    assert run["conclusion"] == "failure" and "Translation residue" in run["output"]["summary"]


async def test_a_lost_plan_is_reported_on_the_head_not_raised(published: Published) -> None:
    sync = load_fork_state(published.ctx.store, FORK)["sync"]
    Path(sync["plan_file"]).unlink()  # this replica's copy: the store's still serves
    assert await rescan(published.ctx, FORK, 1, published.pr, published.commit) is not None
    assert published.ctx.store.delete_state(sync["plan_key"])  # and the store's
    assert await rescan(published.ctx, FORK, 1, published.pr, published.commit) is None
    (run,) = [r for r in published.hub.runs.values() if r["head_sha"] == published.commit]
    assert run["conclusion"] == "failure" and "/sync refresh" in run["output"]["summary"]


def test_the_title_follows_the_count_but_never_overwrites_peoples_own() -> None:
    from bot.sync.publish.pr import pr_title, retitle

    plan = {"upstream": {"repo": UPSTREAM}, "window_label": "#1..#4",
            "summary": {"status": {"conflict": 2}}}
    first = pr_title(plan)
    assert first == "sync(THUDM/slime #1..#4): 3-way merge [2 conflicted files need review]"
    assert retitle(plan, first, 2) is None
    # One wording with commit 1's message, singular included.
    assert retitle(plan, first, 1) == first.replace("[2 conflicted files need",
                                                    "[1 conflicted file needs")
    assert retitle(plan, first, 0) == "sync(THUDM/slime #1..#4): 3-way merge [conflicts resolved]"
    assert retitle(plan, "Sync upstream (do not merge before Friday)", 0) is None
