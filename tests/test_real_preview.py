"""``bench/real_preview.py``'s check of one-click suggestions against commit 1: a
suggestion must cover exactly one marker region and hold exactly its item's proposal."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from bench.real_preview import suggestion_problems

MARKED = ("def f():\n"
          "<<<<<<< ours\n"
          "    return 1\n"
          "||||||| base\n"
          "    return 0\n"
          "=======\n"
          "    return 2\n"
          ">>>>>>> theirs\n")


def _commit(tmp_path: Path) -> tuple[str, str]:
    repo = tmp_path / "r.git"
    subprocess.run(["git", "init", "-q", "--bare", str(repo)], check=True)
    run = lambda *a, **kw: subprocess.run(  # noqa: E731
        ["git", f"--git-dir={repo}", *a], capture_output=True, check=True, **kw).stdout
    blob = run("hash-object", "-w", "--stdin", input=MARKED.encode()).decode().strip()
    tree = run("mktree", input=f"100644 blob {blob}\tf.py\n".encode()).decode().strip()
    commit = run("commit-tree", tree, "-m", "commit 1",
                 env={**os.environ, "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@x",
                      "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@x"}
                 ).decode().strip()
    return str(repo), commit


def _review(commit: str, start: int, end: int, text: str) -> dict[str, Any]:
    body = f"**Q1 · Confirm** — merged\n\n```suggestion\n{text}```\n\nAnswer: ..."
    return {"commit_id": commit, "comments": [
        {"path": "f.py", "start_line": start, "line": end, "side": "RIGHT", "body": body}]}


def _plan(suggestion: str) -> dict[str, Any]:
    item = {"id": "Q1", "path": "f.py", "start_line": 2, "end_line": 8,
            "suggestion": suggestion}
    return {"files": [{"path": "f.py", "marker_size": 7, "review_items": [item]}]}


def test_a_suggestion_over_the_whole_region_with_the_proposal_passes(tmp_path: Path) -> None:
    repo, commit = _commit(tmp_path)
    assert suggestion_problems(_review(commit, 2, 8, "    return 3\n"),
                               _plan("    return 3\n"), repo) == (1, [])


def test_a_suggestion_off_the_region_or_not_the_proposal_is_a_problem(tmp_path: Path) -> None:
    repo, commit = _commit(tmp_path)
    found, problems = suggestion_problems(_review(commit, 2, 8, "    return 4\n"),
                                          _plan("    return 3\n"), repo)
    assert found == 1 and problems == ["the suggestion on f.py L2-8 is not Q1's proposal"]
    plan = _plan("    return 3\n")
    plan["files"][0]["review_items"][0].update(start_line=3, end_line=8)  # one line short
    found, problems = suggestion_problems(_review(commit, 3, 8, "    return 3\n"), plan, repo)
    assert problems == ["the suggestion on f.py L3-8 does not cover one marker region"]
    found, problems = suggestion_problems(_review(commit, 1, 8, "x\n"), _plan("x\n"), repo)
    assert problems == ["the suggestion on f.py L1-8 is on no item's region"]
