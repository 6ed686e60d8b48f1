"""The CLI's errors as a user meets them: one line on stderr, the exit code the README promises.

Each case runs the real ``forksync`` process. The README's table of exit codes must
equal ``bot.cli.EXIT_CODES``, and every row is produced here by at least one case.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.app.settings import ENV_VARS
from bot.cli import EXIT_CODES
from tests.factory import Scenario

REPO_ROOT = Path(__file__).resolve().parents[1]


def forksync(*args: str, env: dict[str, str] | None = None,
             timeout: float = 120) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("FORKSYNC_", "GITHUB_"))}
    return subprocess.run([sys.executable, "-m", "bot.cli", *args], capture_output=True,
                          text=True, cwd=REPO_ROOT, timeout=timeout,
                          env={**base, "PYTHONPATH": str(REPO_ROOT), **(env or {})})


def one_error_line(out: subprocess.CompletedProcess[str]) -> str:
    """The one ``forksync: error: ...`` line; anything else on stderr fails the test."""
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("forksync: error: "), out.stderr
    return lines[0].removeprefix("forksync: error: ")


@pytest.fixture(scope="module")
def repos(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    s = Scenario(tmp_path_factory.mktemp("cli") / "repos")
    s.sync_fork()
    s.upstream_pr(4, "Add timeouts", "alice", files={"slime/utils/timeouts.py": "T = 10\n"})
    s.upstream_pr(5, "Add retries", "bob", files={"slime/retry.py": "RETRIES = 3\n"})
    return s


def plan_args(s: Scenario, tmp: Path, *extra: str) -> list[str]:
    return ["plan", "--fork", str(s.fork_dir), "--upstream", str(s.upstream_dir),
            "--workdir", str(tmp / "work"), *extra]


# -- the README's table is the CLI's table ---------------------------------------------


def readme_exit_codes() -> list[tuple[int, str]]:
    text = (REPO_ROOT / "README.md").read_text()
    return [(int(code), meaning) for code, meaning in
            re.findall(r"^\| `(\d+)` \| (.+?) \|$", text, re.MULTILINE)]


def test_the_readme_lists_exactly_the_cli_exit_codes() -> None:
    assert readme_exit_codes() == list(EXIT_CODES)


# -- code 1: what the user named cannot be written; the server cannot start ----------------


def test_json_report_into_a_missing_directory(repos: Scenario, tmp_path: Path) -> None:
    out = forksync(*plan_args(repos, tmp_path, "--json", "/nonexistent/dir/r.json"))
    assert out.returncode == 1
    assert one_error_line(out) == ("cannot write the JSON report /nonexistent/dir/r.json: the "
                                   "directory /nonexistent/dir does not exist")
    assert not (tmp_path / "work").exists()  # refused before any work was done


def test_markdown_report_onto_a_directory(repos: Scenario, tmp_path: Path) -> None:
    out = forksync(*plan_args(repos, tmp_path, "--markdown", str(tmp_path)))
    assert out.returncode == 1
    assert one_error_line(out) == (f"the Markdown report {tmp_path} is a directory; expected "
                                   "a file name")


def test_workdir_that_is_a_file(repos: Scenario, tmp_path: Path) -> None:
    file = tmp_path / "f"
    file.write_text("x")
    out = forksync("plan", "--fork", str(repos.fork_dir), "--upstream", str(repos.upstream_dir),
                   "--workdir", str(file))
    assert out.returncode == 1
    assert one_error_line(out) == f"--workdir {file} is a file; expected a directory"


def serve_env(tmp: Path, port: int) -> dict[str, str]:
    return {"FORKSYNC_TOKEN": "ghp_test", "FORKSYNC_WEBHOOK_SECRET": "s",
            "FORKSYNC_HOST": "127.0.0.1", "FORKSYNC_PORT": str(port),
            "FORKSYNC_DATA_DIR": str(tmp / "data"), "FORKSYNC_POLL_INTERVAL": "0"}


def test_serve_on_a_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = forksync("serve", env=serve_env(tmp_path, port), timeout=60)
    assert out.returncode == 1
    # serve logs its startup; the failure itself is the one error line at the end.
    assert "Traceback" not in out.stderr, out.stderr
    errors = [ln for ln in out.stderr.splitlines() if "error" in ln.lower()]
    assert errors == [f"forksync: error: cannot listen on 127.0.0.1:{port}: address already in "
                      "use (set FORKSYNC_HOST/FORKSYNC_PORT)"], out.stderr


# -- code 2: config and settings --------------------------------------------------------


def test_serve_with_the_data_dir_on_a_file(tmp_path: Path) -> None:
    (tmp_path / "data").write_text("not a directory")
    out = forksync("serve", env=serve_env(tmp_path, 0), timeout=60)
    assert out.returncode == 2
    assert one_error_line(out) == (f"FORKSYNC_DATA_DIR: {tmp_path / 'data'} is a file; expected "
                                   "a directory (or a path where one can be created)")


def test_a_config_error_names_file_line_and_key(repos: Scenario, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("upstream: {repo: a/b}\npolicies:\n  - {paths: [x], action: our}\n")
    out = forksync(*plan_args(repos, tmp_path, "--config", str(bad)))
    assert out.returncode == 2
    assert one_error_line(out).startswith(f"{bad}:3: policies[0].action: ")


# -- code 3: repositories and revisions -------------------------------------------------


def test_a_pr_number_with_no_merge_commit_is_a_missing_revision(
        repos: Scenario, tmp_path: Path) -> None:
    out = forksync(*plan_args(repos, tmp_path, "--to", "#999"))
    assert out.returncode == 3
    assert one_error_line(out).startswith("upstream PR #999 has no merge commit on main")


def test_a_path_that_is_not_a_repository(tmp_path: Path) -> None:
    out = forksync("plan", "--fork", str(tmp_path), "--upstream", str(tmp_path),
                   "--workdir", str(tmp_path / "w"))
    assert out.returncode == 3
    assert one_error_line(out) == f"the fork path {tmp_path} is not a git repository"


# -- code 4: the window -----------------------------------------------------------------


def test_from_and_to_swapped_are_named_as_the_wrong_order(
        repos: Scenario, tmp_path: Path) -> None:
    out = forksync(*plan_args(repos, tmp_path, "--from", "#5", "--to", "#4"))
    assert out.returncode == 4
    message = one_error_line(out)
    assert message == (f"--from {repos.prs[5][:12]} is newer than --to {repos.prs[4][:12]}: "
                       "they are in the wrong order: the window runs from the older upstream "
                       "commit (--from) to the newer one (--to)")
    assert "rewritten" not in message


def test_a_fork_with_no_cutoff(tmp_path: Path) -> None:
    s = Scenario(tmp_path / "repos")
    s.sync_fork(trailer=False)
    out = forksync(*plan_args(s, tmp_path))
    assert out.returncode == 4
    assert one_error_line(out).startswith(
        "no cutoff: no `Upstream-Sync: THUDM/slime@<sha>` trailer on the fork's main branch")


# -- code 64: usage ----------------------------------------------------------------------


@pytest.mark.parametrize("args", [["plan"], ["plan", "--fork", "x", "--upstream", "y", "--nope"],
                                  ["frobnicate"], []])
def test_usage_errors_have_their_own_code(args: list[str]) -> None:
    out = forksync(*args)
    assert out.returncode == 64
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert lines[0].startswith("usage: forksync") and ": error: " in lines[-1]
    assert not any("error" in line for line in lines[:-1])


# -- code 0, and help that explains -----------------------------------------------------


def test_success_is_0_even_with_conflicts(repos: Scenario, tmp_path: Path) -> None:
    out = forksync(*plan_args(repos, tmp_path, "--json", str(tmp_path / "r.json")))
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "r.json").exists() and out.stderr == ""


@pytest.mark.parametrize("command", ["plan", "sync", "init", "check-config", "setup", "serve"])
def test_every_subcommand_help_describes_it(command: str) -> None:
    out = forksync(command, "--help")
    assert out.returncode == 0
    usage, _, rest = out.stdout.partition("\n\n")
    description = rest.split("\n\n")[0]
    assert usage.startswith(f"usage: forksync {command}")
    assert len(description.split()) >= 8, out.stdout  # a sentence, not nothing
    assert "exit codes:" in out.stdout


def test_serve_help_lists_every_environment_variable_with_its_default() -> None:
    out = forksync("serve", "--help").stdout
    for var in ENV_VARS:
        head = f"  {var.name} (default: {var.default})" if var.default else \
            f"  {var.name} (no default)"
        assert head in out, var.name
    assert "FORKSYNC_POLL_INTERVAL (default: 900)" in out


def test_every_variable_the_settings_read_is_listed() -> None:
    source = (REPO_ROOT / "bot" / "app" / "settings.py").read_text()
    read = set(re.findall(r'"(FORKSYNC_[A-Z_]+)"', source))
    assert read == {v.name for v in ENV_VARS}
    docs = (REPO_ROOT / "docs" / "APP.md").read_text()
    example = (REPO_ROOT / ".env.example").read_text()
    for var in ENV_VARS:
        assert f"`{var.name}`" in docs, var.name
        assert var.name in example, var.name


# -- code 130: interrupted ---------------------------------------------------------------


def test_ctrl_c_exits_130_with_one_line(tmp_path: Path) -> None:
    """``setup`` waits for the browser; Ctrl-C there is the user's way out."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("FORKSYNC_", "GITHUB_"))}
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "setup", "--webhook-url", "https://bot.example/webhook",
         "--env-file", str(tmp_path / ".env")], cwd=REPO_ROOT, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**base, "PYTHONPATH": str(REPO_ROOT)})
    assert proc.stdout is not None
    wait_for(lambda: "http://127.0.0.1:" in (proc.stdout.readline() if proc.stdout else ""))
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert err.strip() == "forksync: interrupted"
    assert not (tmp_path / ".env").exists()


def wait_for(ready: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline
