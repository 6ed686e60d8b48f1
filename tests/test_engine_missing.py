"""Broken object stores and stuck git: one clear line and exit code 3, never a hang.

Each case builds a real upstream and fork, then deletes one loose object (a blob, a
tree or a commit) after writing it, or replaces it with garbage, or with a FIFO that
blocks whoever opens it (a stuck disk, for git). ``plan`` must fail with one line that
names the object and where it was needed, through the API and through the CLI.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.engine.git import Git
from bot.engine.pipeline import plan
from bot.errors import GitTimeout, MissingObject
from tests.factory import PLAIN_CONFIG, Scenario, git_text


@dataclass(frozen=True)
class Broken:
    """Which object to break: in which repository, and how to name it there."""

    repo: str  # "upstream" or "fork"
    rev: str  # what `git rev-parse` gets to find the object
    mentions: str  # what the message must say about where it was needed


CASES = {
    "upstream blob": Broken("upstream", "main:slime/utils/arguments.py",
                            "slime/utils/arguments.py"),
    "upstream tree": Broken("upstream", "main:slime/utils", "directory slime/utils at the tip"),
    "upstream commit in the window": Broken("upstream", "main~1", "the history from"),
    "upstream tip commit": Broken("upstream", "main", "the head of branch main"),
    "fork blob": Broken("fork", "main:vime/utils/arguments.py", "vime/utils/arguments.py"),
    "fork tree": Broken("fork", "main:vime/utils", "directory vime/utils on fork main"),
    "fork commit in its history": Broken("fork", "main~1", "the history of main"),
    "fork head commit": Broken("fork", "main", "the head of branch main"),
}


def window(tmp_path: Path) -> Scenario:
    """A fork and an upstream that both changed vime/utils/arguments.py; two PRs upstream."""
    s = Scenario(tmp_path / "repos", config=PLAIN_CONFIG)
    s.sync_fork()
    s.fork_commit("Fork: arguments", {"vime/utils/arguments.py": "x = 'fork'\n"})
    s.fork_commit("Fork: more", {"vime/extra.py": "y = 1\n"})
    s.upstream_pr(11, "Upstream: arguments", "bob",
                  files={"slime/utils/arguments.py": "x = 'upstream sglang'\n"})
    s.upstream_pr(12, "Upstream: a new module", "bob", files={"slime/new/mod.py": "z = 1\n"})
    return s


def loose(s: Scenario, repo: str, rev: str) -> tuple[str, Path]:
    git_dir = s.upstream_git if repo == "upstream" else s.fork_git
    oid = git_text(git_dir, "rev-parse", rev)
    path = Path(git_dir) / "objects" / oid[:2] / oid[2:]
    assert path.exists(), "the factory writes loose objects"
    return oid, path


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).parent / "forksync"
    argv = [str(script)] if script.exists() else [sys.executable, "-m", "bot.cli"]
    return subprocess.run([*argv, *args], capture_output=True, text=True, timeout=120,
                          check=False)


def assert_one_line_exit_3(s: Scenario, tmp_path: Path, *needles: str) -> None:
    proc = cli("plan", "--fork", str(s.fork_dir), "--upstream", str(s.upstream_dir),
               "--workdir", str(tmp_path / "work-cli"), "--quiet")
    assert proc.returncode == 3, proc.stderr
    stderr = proc.stderr.strip()
    assert stderr.count("\n") == 0 and "Traceback" not in stderr, proc.stderr
    for needle in needles:
        assert needle in stderr, (needle, stderr)


@pytest.mark.parametrize("case", list(CASES))
def test_a_missing_object_fails_with_one_line_naming_it_and_where(tmp_path: Path,
                                                                  case: str) -> None:
    broken = CASES[case]
    s = window(tmp_path)
    oid, path = loose(s, broken.repo, broken.rev)
    path.unlink()
    with pytest.raises(MissingObject) as info:
        plan(str(s.fork_dir), str(s.upstream_dir), workdir=str(tmp_path / "work"))
    message = str(info.value)
    assert "\n" not in message and info.value.exit_code == 3
    assert oid in message and broken.mentions in message, message
    assert f"the {broken.repo} repository" in message, message
    assert_one_line_exit_3(s, tmp_path, oid, broken.mentions)


@pytest.mark.parametrize("repo, rev, mentions", [
    ("upstream", "main:slime/utils/arguments.py", "slime/utils/arguments.py"),
    ("fork", "main:vime/utils/arguments.py", "vime/utils/arguments.py"),
])
def test_a_corrupt_object_fails_the_same_way(tmp_path: Path, repo: str, rev: str,
                                             mentions: str) -> None:
    s = window(tmp_path)
    oid, path = loose(s, repo, rev)
    path.chmod(0o644)
    path.write_bytes(b"not a zlib stream\n")
    with pytest.raises(MissingObject) as info:
        plan(str(s.fork_dir), str(s.upstream_dir), workdir=str(tmp_path / "work"))
    assert oid in str(info.value) and mentions in str(info.value)
    assert "corrupt" in str(info.value)
    assert_one_line_exit_3(s, tmp_path, oid, mentions)


def test_a_missing_blob_among_large_ones_does_not_hang(tmp_path: Path) -> None:
    """The reported hang: cat-file's answers after a ``missing`` one filled the pipe."""
    s = Scenario(tmp_path / "repos", config=PLAIN_CONFIG)
    s.sync_fork()
    big = {f"slime/data/big{i}.py": "# sglang\n" + "x = 1\n" * 40_000 for i in range(3)}
    s.upstream_pr(11, "Large files", "bob", files={"slime/data/a_small.py": "sglang = 1\n", **big})
    oid, path = loose(s, "upstream", "main:slime/data/a_small.py")
    path.unlink()
    started = time.monotonic()
    assert_one_line_exit_3(s, tmp_path, oid, "slime/data/a_small.py")
    assert time.monotonic() - started < 60


# -- time limits ----------------------------------------------------------------------------


def stuck(path: Path) -> None:
    """Replace a loose object by a FIFO: git blocks opening it, as on a stuck disk."""
    path.unlink()
    os.mkfifo(path)


def git_children() -> list[str]:
    """The git processes this test process started that are still there (zombies too)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            name = stat.read_text().split("(", 1)[1].rsplit(")", 1)[0]
        except (OSError, IndexError):
            continue
        if int(fields[1]) == os.getpid() and name.startswith("git"):
            found.append(f"{stat.parent.name} {name} {fields[0]}")
    return found


@pytest.mark.parametrize("repo, rev, command, mentions", [
    # cat-file --batch (a long-running process) blocks reading the upstream blob.
    ("upstream", "main:slime/utils/arguments.py", "cat-file", "slime/utils/arguments.py"),
    # git merge-tree (one process) blocks reading the fork's blob.
    ("fork", "main:vime/utils/arguments.py", "merge-tree", ""),
])
def test_a_stuck_git_process_is_stopped_at_the_time_limit(tmp_path: Path, repo: str, rev: str,
                                                          command: str, mentions: str) -> None:
    s = window(tmp_path)
    _, path = loose(s, repo, rev)
    stuck(path)
    started = time.monotonic()
    with pytest.raises(GitTimeout) as info:
        plan(str(s.fork_dir), str(s.upstream_dir), workdir=str(tmp_path / "work"),
             git_timeout=1)
    elapsed = time.monotonic() - started
    message = str(info.value)
    assert f"git {command} did not finish" in message and "within 1 seconds" in message
    assert mentions in message and "\n" not in message and info.value.exit_code == 3
    assert elapsed < 30, elapsed
    assert git_children() == []


def test_a_background_git_is_stopped_at_the_time_limit(tmp_path: Path) -> None:
    s = window(tmp_path)
    oid, path = loose(s, "upstream", "main:slime/utils/arguments.py")
    stuck(path)
    job = Git(s.upstream_git, timeout=0.5).start("cat-file", "blob", oid)
    with pytest.raises(GitTimeout, match=r"git cat-file did not finish within 0\.5 seconds"):
        job.output()
    assert git_children() == []
    # And one that is never waited for is stopped on request.
    job = Git(s.upstream_git).start("cat-file", "blob", oid)
    job.stop()
    assert git_children() == []
