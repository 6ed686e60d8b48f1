"""`forksync plan` and `forksync sync` as users run them: real processes, real repositories."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.factory import Scenario, git_text, object_count, refs_snapshot


def forksync(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot.cli", *args], capture_output=True,
                          text=True, cwd=cwd, env={**os.environ, "PYTHONPATH": os.getcwd()})


@pytest.fixture
def scenario(tmp_path: Path) -> Scenario:
    s = Scenario(tmp_path / "repos")
    s.sync_fork()
    s.fork_commit("Fork: vLLM timeouts", files={
        "vime/utils/timeouts.py": "TIMEOUT = 30  # vllm needs longer\n"})
    s.upstream_pr(4, "Add timeouts", "alice", files={"slime/utils/timeouts.py": "TIMEOUT = 10\n"})
    s.upstream_pr(5, "Add retries", "bob", files={"slime/retry.py": "RETRIES = 3\n"})
    return s


def test_plan_writes_nothing_and_reports(scenario: Scenario, tmp_path: Path) -> None:
    before = refs_snapshot(scenario.fork_git), object_count(scenario.fork_git)
    out = forksync("plan", "--fork", str(scenario.fork_dir), "--upstream",
                   str(scenario.upstream_dir), "--workdir", str(tmp_path / "w"),
                   "--json", str(tmp_path / "r.json"), "--markdown", str(tmp_path / "r.md"))
    assert out.returncode == 0, out.stderr
    assert "window #4..#5" in out.stdout and "1 conflict" in out.stdout
    assert (refs_snapshot(scenario.fork_git), object_count(scenario.fork_git)) == before
    report = json.loads((tmp_path / "r.json").read_text())
    statuses = {f["path"]: f["status"] for f in report["files"]}
    assert statuses == {"vime/utils/timeouts.py": "conflict", "vime/retry.py": "new"}
    assert [w["number"] for w in report["window"]] == [4, 5]
    assert "- [ ] `vime/utils/timeouts.py`" in (tmp_path / "r.md").read_text()


def test_sync_creates_only_the_branch_with_trailers_and_is_repeatable(
        scenario: Scenario, tmp_path: Path) -> None:
    fork = scenario.fork_bare
    main_before = git_text(fork, "rev-parse", "refs/heads/main")
    args = ["sync", "--fork", str(fork), "--upstream", str(scenario.upstream_dir),
            "--workdir", str(tmp_path / "w")]
    first = forksync(*args)
    assert first.returncode == 0, first.stderr
    branch = first.stdout.strip().splitlines()[-1]
    assert branch.startswith("forksync/sync-")
    assert git_text(fork, "rev-parse", "refs/heads/main") == main_before
    refs = git_text(fork, "for-each-ref", "--format=%(refname)").split()
    assert sorted(refs) == sorted(["refs/heads/main", f"refs/heads/{branch}"])
    message = git_text(fork, "log", "-1", "--format=%B", branch)
    assert f"Upstream-Sync: THUDM/slime@{scenario.tip}" in message
    assert "Upstream-Window: #4..#5" in message
    assert git_text(fork, "rev-parse", f"{branch}^") == main_before  # parent: fork main
    merged = git_text(fork, "show", f"{branch}:vime/utils/timeouts.py")
    assert "<<<<<<< ours" in merged and ">>>>>>> theirs" in merged
    assert git_text(fork, "show", f"{branch}:vime/retry.py") == "RETRIES = 3"
    # Same inputs, same commit: running again is a no-op, not an error.
    commit = git_text(fork, "rev-parse", branch)
    again = forksync(*args)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip().splitlines()[-1] == branch
    assert git_text(fork, "rev-parse", branch) == commit


def test_sync_never_moves_an_existing_branch(scenario: Scenario, tmp_path: Path) -> None:
    fork = scenario.fork_bare
    subprocess.run(["git", f"--git-dir={fork}", "branch", "taken", "main"], check=True)
    out = forksync("sync", "--fork", str(fork), "--upstream", str(scenario.upstream_dir),
                   "--workdir", str(tmp_path / "w"), "--branch", "taken")
    assert out.returncode == 3
    assert out.stderr.count("\n") == 1 and "already exists" in out.stderr
    assert git_text(fork, "rev-parse", "taken") == git_text(fork, "rev-parse", "main")


def test_next_sync_starts_where_the_last_one_ended(scenario: Scenario, tmp_path: Path) -> None:
    # Land a sync (its commit carries the trailer), then upstream moves on.
    scenario.upstream_pr(6, "Docs", "carol", files={"docs/en/retry.md": "retries\n"})
    out = forksync("plan", "--fork", str(scenario.fork_dir), "--upstream",
                   str(scenario.upstream_dir), "--workdir", str(tmp_path / "w"),
                   "--from", scenario.prs[5], "--json", str(tmp_path / "r.json"))
    assert out.returncode == 0, out.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert [w["number"] for w in report["window"]] == [6]
    assert report["files"][0]["status"] == "new"


def test_check_config_ok_and_error(tmp_path: Path, scenario: Scenario) -> None:
    good = forksync("check-config", str(scenario.fork_dir / ".github/forksync.yml"))
    assert good.returncode == 0 and "ok" in good.stdout
    bad = tmp_path / "bad.yml"
    bad.write_text("upstream: {repo: THUDM/slime}\ntranslate:\n  replace:\n    - {from: '(x'}\n")
    out = forksync("check-config", str(bad))
    assert out.returncode == 2
    assert out.stderr.startswith(f"forksync: error: {bad}:4")
    assert "Traceback" not in out.stderr


def test_whole_file_items_carry_each_sides_entry(tmp_path: Path) -> None:
    from bot.engine.pipeline import plan

    s = Scenario(tmp_path / "repos")
    s.upstream_pr(4, "Add model", "alice",
                  files={"slime/model.bin": b"\0v1", "slime/gone.py": "a\n"})
    s.sync_fork()
    s.fork_commit("Fork: retrain", files={"vime/model.bin": b"\0fork", "vime/gone.py": None})
    s.upstream_pr(5, "Retrain", "bob", files={"slime/model.bin": b"\0v2", "slime/gone.py": "b\n"})
    p = plan(str(s.fork_dir), str(s.upstream_dir), workdir=tmp_path / "w")
    items = {i.path: i for i in p.items}
    binary, deleted = items["vime/model.bin"], items["vime/gone.py"]
    assert binary.sides is not None and deleted.sides is not None
    fork_blob = git_text(s.fork_git, "rev-parse", "main:vime/model.bin")
    up_blob = git_text(s.upstream_git, "rev-parse", "main:slime/model.bin")
    assert binary.sides["ours"] == {"mode": "100644", "oid": fork_blob}
    assert binary.sides["theirs"] == {"mode": "100644", "oid": up_blob}  # binary: untranslated
    assert deleted.sides["ours"] is None and deleted.sides["theirs"] is not None
    assert p.to_json()["files"][0]["review_items"][0]["sides"]


def test_commit_one_of_a_fork_without_translation_names_upstreams_trees(tmp_path: Path) -> None:
    s = Scenario(tmp_path / "repos", config="upstream: {repo: THUDM/slime, branch: main}\n"
                 "translate: {}\n")
    s.sync_fork()
    s.fork_commit("Fork: longer timeouts", files={"slime/t.py": "TIMEOUT = 30\n"})
    s.upstream_pr(4, "Add timeouts", "alice", files={"slime/t.py": "TIMEOUT = 10\n"})
    fork = s.fork_bare
    out = forksync("sync", "--fork", str(fork), "--upstream", str(s.upstream_dir),
                   "--workdir", str(tmp_path / "w"), "--json", str(tmp_path / "r.json"))
    assert out.returncode == 0, out.stderr
    message = git_text(fork, "log", "-1", "--format=%B", out.stdout.split()[-1])
    assert "· base = upstream@" in message and "translate(" not in message
    assert "\n1 upstream PR, 1 path: 1 conflict\n" in message  # counted in words
    assert json.loads((tmp_path / "r.json").read_text())["translated"] is False
