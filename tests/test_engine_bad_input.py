"""Bad input to ``plan``: one clear line for the user, and nothing written to the fork.

Every case runs twice: through the API (a ``ForksyncError`` with a one-line message) and
through the CLI as a subprocess (non-zero exit, exactly one line on stderr, no traceback).
Around both, the fork's refs and object count must not move.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.factory import (
    PLAIN_CONFIG,
    Scenario,
    git,
    init_repo,
    object_count,
    refs_snapshot,
)


@dataclass
class Case:
    """The arguments of one bad ``plan`` call, and what its message must mention."""

    fork: str
    upstream: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    mentions: tuple[str, ...] = ()


_CLI_FLAGS = {"from_rev": "--from", "to_rev": "--to", "config_path": "--config",
              "fork_branch": "--fork-branch"}


def _cli() -> list[str]:
    script = Path(sys.executable).parent / "forksync"
    return [str(script)] if script.exists() else [sys.executable, "-m", "bot.cli"]


def synced(tmp_path: Path, config: str = PLAIN_CONFIG) -> Scenario:
    s = Scenario(tmp_path / "repos", config=config)
    s.sync_fork()
    s.upstream_pr(11, "A change in the window", "bob", files={"slime/new.py": "x = 1\n"})
    return s


def check_bad_input(tmp_path: Path, s: Scenario, case: Case) -> str:
    """Run ``case`` through the API and the CLI; return the API's message."""
    from bot.engine.pipeline import plan
    from bot.errors import ForksyncError

    before = (refs_snapshot(s.fork_git), object_count(s.fork_git))
    with pytest.raises(ForksyncError) as info:
        plan(case.fork, case.upstream, workdir=str(tmp_path / "work-api"), **case.kwargs)
    message = str(info.value)
    assert message.strip() and "\n" not in message.strip(), repr(message)
    for needle in case.mentions:
        assert needle in message, f"{needle!r} not in {message!r}"

    argv = [*_cli(), "plan", "--fork", case.fork, "--upstream", case.upstream,
            "--workdir", str(tmp_path / "work-cli"), "--quiet"]
    for key, value in case.kwargs.items():
        argv += [_CLI_FLAGS[key], value]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode != 0
    stderr = proc.stderr.strip()
    assert stderr and "\n" not in stderr, f"stderr is not one line:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr
    assert proc.stdout == "", proc.stdout

    assert (refs_snapshot(s.fork_git), object_count(s.fork_git)) == before
    return message


# ------------------------------------------------------------------------- repositories


@pytest.mark.parametrize("side", ["fork", "upstream"])
def test_path_that_is_not_a_git_repository(tmp_path: Path, side: str) -> None:
    s = synced(tmp_path)
    plain = tmp_path / "plain-dir"
    plain.mkdir()
    (plain / "file.txt").write_text("not a repository\n")
    case = (Case(str(plain), str(s.upstream_dir), mentions=(str(plain),)) if side == "fork"
            else Case(str(s.fork_dir), str(plain), mentions=(str(plain),)))
    check_bad_input(tmp_path, s, case)


def test_path_that_does_not_exist(tmp_path: Path) -> None:
    s = synced(tmp_path)
    missing = str(tmp_path / "nowhere")
    check_bad_input(tmp_path, s, Case(str(s.fork_dir), missing, mentions=(missing,)))


def test_unreachable_upstream_url(tmp_path: Path) -> None:
    s = synced(tmp_path)
    url = "http://127.0.0.1:9/nope.git"
    check_bad_input(tmp_path, s, Case(str(s.fork_dir), url, mentions=(url,)))


def test_missing_fork_branch(tmp_path: Path) -> None:
    s = synced(tmp_path)
    check_bad_input(tmp_path, s, Case(str(s.fork_dir), str(s.upstream_dir),
                                      {"fork_branch": "no-such-branch"}, ("no-such-branch",)))


@pytest.mark.parametrize("key,rev", [("to_rev", "no-such-rev"), ("to_rev", "0" * 40),
                                     ("from_rev", "deadbeefdead"), ("to_rev", "#999")])
def test_missing_revision(tmp_path: Path, key: str, rev: str) -> None:
    s = synced(tmp_path)
    mention = rev if not rev.startswith("#") else "999"
    check_bad_input(tmp_path, s, Case(str(s.fork_dir), str(s.upstream_dir), {key: rev},
                                      (mention[:12],)))


def test_fork_without_upstream_sync_trailer(tmp_path: Path) -> None:
    s = Scenario(tmp_path / "repos", config=PLAIN_CONFIG)
    s.sync_fork(message="Sync")  # the factory still adds the trailer: remove it below
    head = s.fork_head
    tree = git(s.fork_git, "rev-parse", f"{head}^{{tree}}").decode().strip()
    bare = git(s.fork_git, "commit-tree", tree, input=b"Import without trailers\n").decode()
    git(s.fork_git, "update-ref", "refs/heads/main", bare.strip())
    check_bad_input(tmp_path, s, Case(str(s.fork_dir), str(s.upstream_dir),
                                      mentions=("Upstream-Sync",)))


# ------------------------------------------------------------------------------ config

_BAD_CONFIGS = {
    "yaml syntax": "upstream: {repo: THUDM/slime, branch: main\ntranslate: [\n",
    "wrong type": "upstream: {repo: THUDM/slime, branch: main}\ntranslate:\n  replace: 5\n",
    "unknown key": "upstream: {repo: THUDM/slime, branch: main}\ntranslat: {}\n",
    "bad regex": "upstream: {repo: THUDM/slime, branch: main}\ntranslate:\n  replace:\n"
                 "    - {from: 'sglang(', to: vllm, regex: true}\n",
    "bad policy": "upstream: {repo: THUDM/slime, branch: main}\npolicies:\n"
                  "  - {paths: ['a/**'], action: sometimes}\n",
}


@pytest.mark.parametrize("name", sorted(_BAD_CONFIGS))
def test_bad_config_file(tmp_path: Path, name: str) -> None:
    s = synced(tmp_path)
    cfg = tmp_path / "forksync.yml"
    cfg.write_text(_BAD_CONFIGS[name])
    check_bad_input(tmp_path, s, Case(str(s.fork_dir), str(s.upstream_dir),
                                      {"config_path": str(cfg)}, (str(cfg),)))


def test_bad_config_on_the_fork_branch(tmp_path: Path) -> None:
    s = synced(tmp_path)
    s.fork_commit("Break the config", {".github/forksync.yml": _BAD_CONFIGS["wrong type"]})
    check_bad_input(tmp_path, s, Case(str(s.fork_dir), str(s.upstream_dir),
                                      mentions=(".github/forksync.yml",)))


def test_missing_config_file(tmp_path: Path) -> None:
    s = synced(tmp_path)
    missing = str(tmp_path / "absent.yml")
    check_bad_input(tmp_path, s, Case(str(s.fork_dir), str(s.upstream_dir),
                                      {"config_path": missing}, (missing,)))


@pytest.mark.parametrize("preexisting", [False, True])
def test_two_upstream_paths_translate_to_the_same_path(tmp_path: Path,
                                                       preexisting: bool) -> None:
    s = Scenario(tmp_path / "repos", config=PLAIN_CONFIG)
    if preexisting:
        s.upstream_pr(10, "Add the sglang helper", "alice",
                      files={"slime/helper_sglang.py": "a = 1\n"})
    s.sync_fork()
    files = {"slime/helper_vllm.py": "b = 2\n"}
    if not preexisting:
        files["slime/helper_sglang.py"] = "a = 1\n"
    s.upstream_pr(11, "Add helpers", "bob", files=files)
    message = check_bad_input(tmp_path, s, Case(str(s.fork_dir), str(s.upstream_dir),
                                                mentions=("vime/helper_vllm.py",)))
    assert "slime/helper_sglang.py" in message and "slime/helper_vllm.py" in message


# ---------------------------------------------------------------------- upstream history


def test_upstream_force_push(tmp_path: Path) -> None:
    s = synced(tmp_path)
    cutoff = s.cutoff
    s.upstream_force_push(s.prs[2])  # drop #3 (and everything after): rewritten history
    s.upstream_pr(12, "Rewritten history", "mallory", files={"slime/other.py": "y = 2\n"})
    tip = s.tip
    message = check_bad_input(tmp_path, s, Case(str(s.fork_dir), str(s.upstream_dir)))
    assert cutoff[:7] in message and tip[:7] in message, message


def test_upstream_force_push_cutoff_gone(tmp_path: Path) -> None:
    """A fresh clone of a force-pushed upstream does not even have the cutoff commit."""
    s = synced(tmp_path)
    cutoff = s.cutoff
    s.upstream_force_push(s.prs[2])
    s.upstream_pr(12, "Rewritten history", "mallory", files={"slime/other.py": "y = 2\n"})
    clone = tmp_path / "fresh-upstream.git"
    subprocess.run(["git", "clone", "-q", "--bare", "--no-local", str(s.upstream_dir),
                    str(clone)], check=True, capture_output=True)
    message = check_bad_input(tmp_path, s, Case(str(s.fork_dir), str(clone)))
    assert cutoff[:7] in message, message


def test_fixture_helpers_notice_writes(tmp_path: Path) -> None:
    """The 'nothing written' check would catch a write: refs and objects both count."""
    repo = init_repo(tmp_path / "r", bare=True)
    before = (refs_snapshot(repo), object_count(repo))
    blob = git(repo, "hash-object", "-w", "--stdin", input=b"x\n").decode().strip()
    assert object_count(repo) == before[1] + 1
    git(repo, "update-ref", "refs/heads/x", git(repo, "commit-tree", git(
        repo, "mktree", input=f"100644 blob {blob}\tx\n".encode()).decode().strip(),
        input=b"m\n").decode().strip())
    assert refs_snapshot(repo) != before[0]

