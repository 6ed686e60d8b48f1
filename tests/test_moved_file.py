"""A new file git moved into a directory the other side renamed (``CONFLICT (file
location)``), on real repositories: the item says who added it and where git put it, its
sides are that version and no file, and it recommends keeping the move.
"""

from __future__ import annotations

from pathlib import Path

from bot.engine.report import render_body
from bot.engine.report.groups import recommend
from tests.factory import Scenario, git
from tests.test_engine_oracle import merged_blob, run_plan


def test_upstreams_new_file_in_a_directory_the_fork_renamed_is_kept_where_git_moved_it(
        tmp_path: Path) -> None:
    # schildichat-android-next@fbcd7aec0b: the fork moved `fastlane/` under
    # `upstream_infra/`; upstream added a changelog in `fastlane/`. The item said "the fork
    # deleted this file; upstream  changed it" and recommended keeping the deletion.
    s = Scenario(tmp_path / "repos")
    s.sync_fork()
    s.fork_commit("Fork: move the ray actors", renames={
        "vime/ray/__init__.py": "vime/actors/__init__.py",
        "vime/ray/rollout.py": "vime/actors/rollout.py"})
    s.upstream_pr(21, "Add a placement helper", "erin",
                  files={"slime/ray/placement.py": "def place(n):\n    return list(range(n))\n"})
    p = run_plan(s, tmp_path)
    items = [i for f in p.files for i in f.review_items]
    (item,) = [i for i in items if i.path == "vime/actors/placement.py"]
    assert (item.kind.value, item.tier.value, item.rule) == ("file", "Decide", "file location")
    assert item.reason == ("Upstream added this file as `vime/ray/placement.py`, inside a "
                           "directory the fork renamed, so git moved it here; commit 1 holds "
                           "upstream's version at this path.")
    assert item.sides is not None and item.sides["ours"] is None
    held = merged_blob(p, "vime/actors/placement.py")
    assert held == b"def place(n):\n    return list(range(n))\n"
    # `theirs` is exactly what commit 1 holds: the recommended answer keeps the move.
    assert item.sides["theirs"] == {"mode": "100644", "oid": git(
        p.work_git_dir, "rev-parse", f"{p.merged_tree}:vime/actors/placement.py").decode().strip()}
    action, choice = recommend(item.to_json())
    assert choice == "theirs" and action.startswith("keep upstream's new file where git moved")
    body = render_body(p.to_json())
    assert "deleted" not in body.split("vime/actors/placement.py", 1)[1].split("\n- ", 1)[0]
    assert ("1 new file of upstream's that git moved into a directory the fork renamed, with "
            "the move proposed: one command takes it, `/sync answer Q") in body


def test_the_forks_new_file_in_a_directory_upstream_renamed_is_the_mirror(
        tmp_path: Path) -> None:
    s = Scenario(tmp_path / "repos")
    s.sync_fork()
    s.fork_commit("Fork: a placement helper",
                  {"vime/ray/placement.py": "def place(n):\n    return [0] * n\n"})
    s.upstream_pr(22, "Move the ray actors", "erin", renames={
        "slime/ray/__init__.py": "slime/actors/__init__.py",
        "slime/ray/rollout.py": "slime/actors/rollout.py"})
    p = run_plan(s, tmp_path)
    (item,) = [i for f in p.files for i in f.review_items if i.path == "vime/actors/placement.py"]
    assert item.rule == "file location" and item.sides is not None
    assert item.sides["theirs"] is None and item.sides["ours"] is not None
    assert item.reason.startswith("The fork added this file as `vime/ray/placement.py`, inside "
                                  "a directory upstream renamed")
    assert recommend(item.to_json())[1] == "ours"
