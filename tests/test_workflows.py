"""Workflow files without the App's Workflows permission (issue 11): kept, and listed to port.

GitHub refuses an App's push that changes ``.github/workflows/`` unless the App has the
*Workflows* permission (``tests/sim/workflows.py`` models that). ``plan(workflows=False)``
keeps every workflow file as the fork has it and turns upstream's change into an item
with its diff; ``workflows=True`` merges them like other files.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.engine.gate import check_output
from bot.engine.gate import initial_remaining as open_at_commit_1
from bot.engine.markers import has_markers
from bot.engine.model import Plan
from bot.engine.pipeline import plan
from bot.engine.report import render_body
from tests.factory import PLAIN_CONFIG, Scenario, git

CI = ".github/workflows/ci.yml"
CI_TEXT = "name: CI\non: [push]\njobs:\n  test:\n    runs-on: ubuntu-latest\n"


def scenario(root: Path, config: str = PLAIN_CONFIG, *, fork_edits_ci: bool = False) -> Scenario:
    s = Scenario(root, config=config, skeleton=False)
    s.upstream_pr(1, "Add CI", files={CI: CI_TEXT, "slime/a.py": "a = 1\n"})
    s.sync_fork()
    if fork_edits_ci:
        s.fork_commit("Fork: our runners", files={CI: CI_TEXT.replace("ubuntu-latest",
                                                                      "self-hosted")})
    s.upstream_pr(2, "CI on 24.04, and a release workflow", files={
        CI: CI_TEXT.replace("ubuntu-latest", "ubuntu-24.04"),
        ".github/workflows/release.yml": "name: Release\non: [release]\n",
        "slime/a.py": "a = 2\n"})
    return s


def blob(p: Plan, path: str) -> bytes | None:
    """The file at ``path`` in the plan's merge result (commit 1's tree); None if absent."""
    out = git(p.work_git_dir, "ls-tree", p.merged_tree, "--", path).decode().split()
    return git(p.work_git_dir, "cat-file", "blob", out[2]) if out else None


def test_without_the_permission_workflow_files_stay_and_each_change_is_an_item(
        tmp_path: Path) -> None:
    s = scenario(tmp_path / "repos")
    p = plan(str(s.fork_dir), str(s.upstream_dir), workdir=str(tmp_path / "w"),
             workflows=False)
    files = {f.path: f for f in p.files}
    assert blob(p, CI) == CI_TEXT.encode()  # as the fork has it
    assert blob(p, ".github/workflows/release.yml") is None  # not added
    assert blob(p, "vime/a.py") == b"a = 2\n"  # everything else merges
    for path in (CI, ".github/workflows/release.yml"):
        f = files[path]
        assert (f.status.value, f.policy) == ("skipped", "workflows")
        (item,) = f.review_items
        assert (item.kind.value, item.tier.value, item.choices) == ("manual", "Decide",
                                                                    ["done", "skip"])
        assert "Workflows permission" in item.reason and item.prs == [2]
    assert "-    runs-on: ubuntu-latest\n+    runs-on: ubuntu-24.04" in \
        files[CI].review_items[0].theirs
    assert "+name: Release" in files[".github/workflows/release.yml"].review_items[0].theirs
    # The PR body and the check list each change with its diff.
    plan_json = p.to_json()
    body = render_body(plan_json)
    assert "### Workflow files to port by hand" in body and "+name: Release" in body
    conclusion, _, summary = check_output(plan_json, open_at_commit_1(plan_json, {}))
    assert conclusion == "failure"
    assert "-    runs-on: ubuntu-latest\n+    runs-on: ubuntu-24.04" in summary
    # Once answered, an item leaves the check's list.
    answered = {files[CI].review_items[0].id: "done"}
    _, _, summary = check_output(plan_json, open_at_commit_1(plan_json, answered))
    assert "ubuntu-24.04" not in summary and "+name: Release" in summary


def test_with_the_permission_workflow_files_merge_like_others(tmp_path: Path) -> None:
    s = scenario(tmp_path / "repos")
    p = plan(str(s.fork_dir), str(s.upstream_dir), workdir=str(tmp_path / "w"))
    assert b"ubuntu-24.04" in (blob(p, CI) or b"")
    assert blob(p, ".github/workflows/release.yml") == b"name: Release\non: [release]\n"
    assert not any(f.policy == "workflows" for f in p.files)
    assert "Workflow files" not in render_body(p.to_json())


def test_a_conflicted_workflow_file_gets_no_markers_without_the_permission(
        tmp_path: Path) -> None:
    s = scenario(tmp_path / "repos", fork_edits_ci=True)
    with_permission = plan(str(s.fork_dir), str(s.upstream_dir), workdir=str(tmp_path / "w1"))
    assert has_markers((blob(with_permission, CI) or b"").decode())
    p = plan(str(s.fork_dir), str(s.upstream_dir), workdir=str(tmp_path / "w2"),
             workflows=False)
    assert blob(p, CI) == CI_TEXT.replace("ubuntu-latest", "self-hosted").encode()
    (f,) = [f for f in p.files if f.path == CI]
    assert f.policy == "workflows" and f.review_items[0].kind.value == "manual"


@pytest.mark.parametrize(("action", "kept_by"), [("skip", "skip"), ("ours", "ours"),
                                                  ("theirs", "workflows")])
def test_a_policy_that_keeps_the_forks_file_wins_and_theirs_cannot_be_pushed(
        tmp_path: Path, action: str, kept_by: str) -> None:
    config = (PLAIN_CONFIG
              + f"policies:\n  - {{paths: ['.github/workflows/**'], action: {action}}}\n")
    s = scenario(tmp_path / "repos", config)
    p = plan(str(s.fork_dir), str(s.upstream_dir), workdir=str(tmp_path / "w"),
             workflows=False)
    assert blob(p, CI) == CI_TEXT.encode()
    (f,) = [f for f in p.files if f.path == CI]
    assert f.policy == kept_by
    # Only "theirs", which cannot be honoured, asks a person to port the change.
    assert any(i.kind.value == "manual" for i in f.review_items) is (action == "theirs")
