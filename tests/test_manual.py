"""Files under a ``manual`` policy, on real repositories: ported by hand where the fork
rewrote them; upstream's version proposed where the fork never changed them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.factory import PLAIN_CONFIG, Scenario, git
from tests.test_engine_oracle import merged_blob, run_plan

UP = "slime/rollout/sglang_rollout.py"
FORK = "vime/rollout/vllm_rollout.py"
MANUAL_CONFIG = PLAIN_CONFIG + f"policies:\n  - {{paths: ['{FORK}'], action: manual}}\n"


REWRITE = '"""Rollout with vLLM (rewritten for the fork)."""\n'


def scenario(tmp_path: Path, fork_edit: Callable[[str], str] | None = None) -> Scenario:
    """A fork synced at the cutoff (``fork_edit``: what it did to the file since, if
    anything), then two upstream PRs that change the file."""
    s = Scenario(tmp_path / "repos", config=MANUAL_CONFIG)
    s.sync_fork()
    if fork_edit is not None:
        s.fork_commit("Fork: our rollout", {FORK: fork_edit(s.fork_file(FORK).decode())})
    text = s.upstream_file(UP).decode()
    s.upstream_pr(11, "Stream rollouts", "erin", files={
        UP: text + "\n\ndef stream_rollout(args, prompts):\n"
                   "    yield from generate_rollout(args, prompts)\n"})
    s.upstream_pr(12, "Log the sglang version", "bob", files={
        UP: "import logging\n" + s.upstream_file(UP).decode()})
    return s


def the_item(p: Any) -> Any:
    (item,) = [i for f in p.files if f.path == FORK for i in f.review_items]
    return item


def test_a_manual_file_the_fork_never_changed_proposes_upstreams_version(
        tmp_path: Path) -> None:
    s = scenario(tmp_path)
    assert s.fork_file(FORK) == s.translate_text(s.upstream_file(UP, s.cutoff), UP)
    p = run_plan(s, tmp_path)
    item = the_item(p)
    assert (item.kind.value, item.tier.value) == ("manual", "Confirm")
    assert item.choices == ["theirs", "done", "skip"]
    assert "the fork has not changed this file since the split" in item.reason
    assert "so upstream's change applies as it is" in item.reason
    assert item.prs == [11, 12]
    # Commit 1 keeps the fork's file; `theirs` is upstream's translated version.
    assert merged_blob(p, FORK) == s.fork_file(FORK)
    assert item.sides["ours"]["oid"] == git(s.fork_git, "rev-parse", f"main:{FORK}"
                                            ).decode().strip()
    theirs = git(p.work_git_dir, "cat-file", "blob", item.sides["theirs"]["oid"])
    assert theirs == s.translate_text(s.upstream_file(UP), UP)
    assert b"def stream_rollout" in theirs and b"vllm" in theirs and b"sglang" not in theirs
    # The file's status says so too (the PR body's checklist row).
    (f,) = [f for f in p.files if f.path == FORK]
    assert f.note == "manual policy, but the fork never changed it: upstream's version applies"


def test_a_manual_file_the_fork_rewrote_is_ported_by_hand(tmp_path: Path) -> None:
    s = scenario(tmp_path, lambda _: REWRITE)
    item = the_item(run_plan(s, tmp_path))
    assert (item.kind.value, item.tier.value) == ("manual", "Decide")
    assert item.choices == ["done", "skip"] and item.sides is None
    assert item.reason.endswith("the fork rewrote this file, so it is never merged textually")


def test_a_fork_change_of_whitespace_only_is_still_a_change(tmp_path: Path) -> None:
    # Upstream's version would drop it (in Python, indentation is meaning): ported by hand.
    s = scenario(tmp_path, lambda text: text.replace("\n", "  \n", 1))
    item = the_item(run_plan(s, tmp_path))
    assert (item.tier.value, item.choices, item.sides) == ("Decide", ["done", "skip"], None)
