"""Onboarding: the first cutoff inferred from the trees, the proposed config, `forksync init`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.engine.config import load_config
from bot.engine.cutoff import Measure, search
from bot.engine.onboarding import config_template, propose, upstream_name, write_branch
from tests.factory import PLAIN_CONFIG, Scenario, git, git_text

REPO_ROOT = Path(__file__).resolve().parents[1]


# -- the search: few measurements, the true minimum, the older commit on a tie ------------


def v_shaped(bottom: int, calls: list[int]) -> object:
    def measure(sha: str, i: int) -> Measure:
        calls.append(i)
        return Measure(sha, i, abs(i - bottom) * 7 + 40, 3)
    return measure


@pytest.mark.parametrize(("n", "bottom"), [(1, 0), (5, 4), (12, 11), (13, 0), (300, 117),
                                           (2000, 1999), (2000, 1234)])
def test_search_finds_the_closest_commit_with_few_measurements(n: int, bottom: int) -> None:
    calls: list[int] = []
    shas = [f"c{i}" for i in range(n)]
    best, measured = search(shas, v_shaped(bottom, calls))  # type: ignore[arg-type]
    assert best.sha == f"c{bottom}"
    assert len(calls) == len(set(calls)) == len(measured)  # nothing measured twice
    assert [m.index for m in measured] == sorted(m.index for m in measured)
    if n > 12:
        assert len(calls) <= 12 * 5  # a few rounds of 12, not n
    else:
        assert len(calls) == n


def test_on_a_tie_the_older_commit_wins() -> None:
    flat = [50, 40, 30, 30, 30, 45, 60]

    def measure(sha: str, i: int) -> Measure:
        return Measure(sha, i, flat[i], 1)

    best, _ = search([f"c{i}" for i in range(len(flat))], measure)
    assert best.sha == "c2"


# -- the inferred cutoff on real repositories -----------------------------------------------


def unsynced_fork(root: Path, *, at: int, after: int = 12, shared: bool = False) -> Scenario:
    """A fork that copied upstream at PR ``at``, did work of its own, and never recorded it."""
    s = Scenario(root, config=PLAIN_CONFIG)
    for n in range(4, at + 1):
        s.upstream_pr(n, f"PR {n}", "alice", files={f"slime/m{n % 5}.py": f"v = {n}\n" * n})
    if shared:
        # The Fork button: the fork's history is upstream's, then its own commits.
        subprocess.run(["git", "clone", "-q", str(s.upstream_dir), str(s.fork_dir)], check=True)
        s.fork_git = s.fork_dir / ".git"
        s._cutoff = s.tip  # lets fork_commit run on a fork with no trailer
    else:
        s.sync_fork(trailer=False, config=False)
    s.fork_commit("Fork: our own module", {"vime/ours.py" if not shared else "slime/ours.py":
                                           "mine = True\n"})
    for n in range(at + 1, at + 1 + after):
        s.upstream_pr(n, f"PR {n}", "bob", files={f"slime/m{n % 5}.py": f"w = {n}\n" * n})
    return s


@pytest.mark.parametrize("rules", [True, False], ids=["with-rules", "names-as-they-are"])
def test_the_cutoff_is_the_upstream_commit_the_fork_copied(tmp_path: Path, rules: bool) -> None:
    s = unsynced_fork(tmp_path / "repos", at=9)
    config = tmp_path / "forksync.yml"
    config.write_text(s.config_text)
    p = propose(str(s.fork_dir), str(s.upstream_dir), upstream_repo="THUDM/slime",
                config_path=str(config) if rules else None, workdir=tmp_path / "w")
    assert p.cutoff == s.prs[9]
    assert [e.number for e in p.window] == list(range(10, 22))
    assert 0 < len(p.guess.measured) <= len(p.guess.candidates)
    if rules:  # translated, the copy is exact: only the fork's own file differs
        assert (p.guess.best.lines, p.guess.best.files) == (1, 1)
    text = p.explanation()
    assert f"`{s.prs[9][:12]}`" in text and "#10..#21" in text
    assert text.endswith(f"Upstream-Sync: THUDM/slime@{s.prs[9]}")


def test_a_fork_sharing_history_starts_at_the_merge_base(tmp_path: Path) -> None:
    s = unsynced_fork(tmp_path / "repos", at=6, shared=True)
    p = propose(str(s.fork_dir), str(s.upstream_dir), upstream_repo="THUDM/slime",
                workdir=tmp_path / "w")
    assert p.guess.candidates[0] == s.prs[6] and p.cutoff == s.prs[6]
    assert "shares with it" in p.guess.start


def test_the_template_is_a_valid_config_that_translates_nothing_yet() -> None:
    text = config_template("THUDM/slime", "main", "vime")
    config = load_config(text, ".github/forksync.yml")
    assert (config.upstream_repo, config.upstream_branch) == ("THUDM/slime", "main")
    assert config.translate.replace == () and config.translate.paths == ()
    assert [p.action for p in config.policies] == ["skip"]
    assert "#     - {from: slime, to: vime, word: true}" in text
    assert upstream_name("https://github.com/THUDM/slime.git") == "THUDM/slime"
    assert upstream_name("git@github.com:THUDM/slime.git") == "THUDM/slime"
    assert upstream_name("/srv/mirrors/THUDM/slime") == "THUDM/slime"


def test_the_onboarding_commit_adds_the_config_and_the_first_trailer(tmp_path: Path) -> None:
    s = unsynced_fork(tmp_path / "repos", at=5, after=3)
    p = propose(str(s.fork_dir), str(s.upstream_dir), upstream_repo="THUDM/slime",
                workdir=tmp_path / "w")
    main_before = s.fork_head
    branch = write_branch(p)
    assert git_text(s.fork_git, "rev-parse", "refs/heads/main") == main_before
    assert git_text(s.fork_git, "rev-parse", f"{branch}^") == main_before
    changed = git_text(s.fork_git, "diff", "--name-only", "main", branch)
    assert changed == ".github/forksync.yml"
    message = git_text(s.fork_git, "log", "-1", "--format=%B", branch)
    assert message.startswith("Configure forksync")
    assert f"Upstream-Sync: THUDM/slime@{s.prs[5]}" in message
    assert write_branch(p) == branch  # the same proposal again is the same commit


# -- `forksync init` as a user runs it, then the first plan ----------------------------------


def forksync(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FORKSYNC_")}
    return subprocess.run([sys.executable, "-m", "bot.cli", *args], capture_output=True,
                          text=True, cwd=REPO_ROOT, env={**env, "PYTHONPATH": str(REPO_ROOT)})


def test_init_then_merge_then_plan_starts_at_the_inferred_cutoff(tmp_path: Path) -> None:
    s = unsynced_fork(tmp_path / "repos", at=7, after=4)
    work = str(tmp_path / "w")
    # Before init: no trailer, so plan cannot say where the window starts.
    before = forksync("plan", "--fork", str(s.fork_dir), "--upstream", str(s.upstream_dir),
                      "--workdir", work, "--config", str(_config(tmp_path, s)))
    assert before.returncode == 4 and "no cutoff" in before.stderr

    out = forksync("init", "--fork", str(s.fork_dir), "--upstream", str(s.upstream_dir),
                   "--upstream-repo", "THUDM/slime", "--workdir", work)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "forksync/onboarding"
    assert f"### The cutoff: `{s.prs[7][:12]}`" in out.stdout
    git(s.fork_git, "update-ref", "refs/heads/main", "refs/heads/forksync/onboarding")

    after = forksync("plan", "--fork", str(s.fork_dir), "--upstream", str(s.upstream_dir),
                     "--workdir", work)
    assert after.returncode == 0, after.stderr
    assert f"window #8..#11: 4 PRs, 4 commits, cutoff {s.prs[7][:10]}" in after.stdout


def _config(tmp: Path, s: Scenario) -> Path:
    path = tmp / "cfg.yml"
    path.write_text(s.config_text)
    return path


def test_init_dry_run_prints_the_config_and_writes_nothing(tmp_path: Path) -> None:
    s = unsynced_fork(tmp_path / "repos", at=4, after=2)
    refs = git_text(s.fork_git, "for-each-ref")
    out = forksync("init", "--fork", str(s.fork_dir), "--upstream", str(s.upstream_dir),
                   "--upstream-repo", "THUDM/slime", "--workdir", str(tmp_path / "w"),
                   "--dry-run")
    assert out.returncode == 0, out.stderr
    assert "upstream: {repo: THUDM/slime, branch: main}" in out.stdout
    assert git_text(s.fork_git, "for-each-ref") == refs


def test_init_needs_the_upstream_name_when_the_path_does_not_say(tmp_path: Path) -> None:
    s = unsynced_fork(tmp_path / "repos", at=4, after=1)
    odd = tmp_path / "x"
    s.upstream_dir.rename(odd)
    out = forksync("init", "--fork", str(s.fork_dir), "--upstream", str(odd), "--workdir",
                   str(tmp_path / "w"))
    assert out.returncode == 3
    assert out.stderr.strip() == (f"forksync: error: cannot tell the upstream's GitHub name "
                                  f"from {odd}; pass --upstream-repo OWNER/NAME")
