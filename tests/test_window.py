"""The window: cutoff from trailers, tips by SHA/branch/#N, the PR list, rewritten history."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.engine.git import Git
from bot.engine.window import check_ancestry, find_cutoff, list_window, resolve_rev
from bot.errors import GitError, WindowError
from tests.factory import Scenario


@pytest.fixture
def scenario(tmp_path: Path) -> Scenario:
    s = Scenario(tmp_path)
    s.sync_fork()
    s.upstream_pr(4, "Add retries", "alice", files={"slime/retry.py": "x = 1\n"})
    s.upstream_merge_pr(5, "Stream rollouts", "bob", commits=[{"slime/stream.py": "y = 2\n"}])
    s.upstream_commit("Fix typo", "carol", files={"slime/retry.py": "x = 2\n"})
    s.upstream_pr(6, "Tune retries (v2)", "dana", files={"slime/retry.py": "x = 3\n"})
    return s


def test_cutoff_is_the_newest_trailer_on_first_parent_history(scenario: Scenario) -> None:
    fork = Git(scenario.fork_git)
    assert find_cutoff(fork, "main", "THUDM/slime") == scenario.cutoff
    # A trailer naming another upstream is not ours to follow.
    assert find_cutoff(fork, "main", "someone/else") is None


def test_window_lists_squash_merge_and_plain_commits_oldest_first(scenario: Scenario) -> None:
    up = Git(scenario.upstream_git)
    entries = list_window(up, scenario.cutoff, scenario.tip)
    assert [e.number for e in entries] == [4, 5, None, 6]
    assert entries[0].title == "Add retries" and entries[0].author == "alice"
    assert entries[1].title == "Stream rollouts"  # the merge's body line, not its subject
    assert entries[2].title == "Fix typo" and entries[2].number is None
    assert entries[3].title == "Tune retries (v2)"
    assert entries[3].sha == scenario.tip
    assert all(len(e.sha) == 40 and e.date for e in entries)


def test_tip_can_be_a_pr_number_a_branch_or_a_sha(scenario: Scenario) -> None:
    up = Git(scenario.upstream_git)
    assert resolve_rev(up, "#4", "refs/heads/main", "--to") == scenario.prs[4]
    assert resolve_rev(up, "#5", "refs/heads/main", "--to") == scenario.prs[5]
    assert resolve_rev(up, "main", "refs/heads/main", "--to") == scenario.tip
    assert resolve_rev(up, scenario.tip[:12], "refs/heads/main", "--to") == scenario.tip
    with pytest.raises(GitError, match="#99"):  # a missing revision, like an unknown SHA
        resolve_rev(up, "#99", "refs/heads/main", "--to")
    with pytest.raises(GitError, match="nope"):
        resolve_rev(up, "nope", "refs/heads/main", "--to")


def test_force_push_is_named_with_both_shas(scenario: Scenario) -> None:
    up = Git(scenario.upstream_git)
    cutoff = scenario.prs[5]
    scenario.upstream_force_push(scenario.prs[4])
    scenario.upstream_pr(7, "Different history", "erin", files={"slime/other.py": "z\n"})
    with pytest.raises(WindowError) as err:
        check_ancestry(up, cutoff, scenario.tip)
    assert cutoff[:12] in str(err.value) and scenario.tip[:12] in str(err.value)
    assert "rewritten" in str(err.value)


def test_a_tip_older_than_the_cutoff_is_the_wrong_order_not_a_rewrite(
        scenario: Scenario) -> None:
    up = Git(scenario.upstream_git)
    old, new = scenario.prs[4], scenario.prs[5]
    with pytest.raises(WindowError) as err:
        check_ancestry(up, new, old, cutoff_name="--from", tip_name="--to")
    assert "wrong order" in str(err.value) and "rewritten" not in str(err.value)
    with pytest.raises(WindowError) as err:
        check_ancestry(up, new, old, cutoff_name="the cutoff", tip_name="--to")
    assert "synced past --to" in str(err.value)
    check_ancestry(up, old, new)  # the right order passes


def _merge_into_main(fork_git: Path, side: str, message: str) -> str:
    """Merge ``side`` into fork main with a merge commit, as GitHub's merge button does."""
    from tests.factory import git_text

    main = git_text(fork_git, "rev-parse", "refs/heads/main")
    tree = git_text(fork_git, "rev-parse", f"{side}^{{tree}}")
    merge = git_text(fork_git, "commit-tree", tree, "-p", main, "-p", side, "-m", message)
    git_text(fork_git, "update-ref", "refs/heads/main", merge)
    return merge


def test_cutoff_from_a_sync_pr_merged_with_a_merge_commit(scenario: Scenario) -> None:
    from tests.factory import git_text

    fork, up = Git(scenario.fork_git), Git(scenario.upstream_git)
    main = git_text(scenario.fork_git, "rev-parse", "refs/heads/main")
    tree = git_text(scenario.fork_git, "rev-parse", "main^{tree}")
    commit1 = git_text(scenario.fork_git, "commit-tree", tree, "-p", main, "-m",
                       f"sync\n\nUpstream-Sync: THUDM/slime@{scenario.prs[5]}\n")
    _merge_into_main(scenario.fork_git, commit1, "Merge pull request #7 from vime/forksync")
    # The trailer sits on the second parent only; it still counts, and is newer.
    assert find_cutoff(fork, "main", "THUDM/slime", up) == scenario.prs[5]


def test_cutoff_from_a_squashed_sync_pr_body(scenario: Scenario) -> None:
    from tests.factory import git_text

    main = git_text(scenario.fork_git, "rev-parse", "refs/heads/main")
    tree = git_text(scenario.fork_git, "rev-parse", "main^{tree}")
    body = (f"sync(THUDM/slime #4..#6) (#12)\n\n* sync: 3-way merge\n\n"
            f"Upstream-Sync: THUDM/slime@{scenario.prs[6]}\nUpstream-Window: #4..#6\n\n"
            "* resolve conflicts\n")
    squash = git_text(scenario.fork_git, "commit-tree", tree, "-p", main, "-m", body)
    git_text(scenario.fork_git, "update-ref", "refs/heads/main", squash)
    found = find_cutoff(Git(scenario.fork_git), "main", "THUDM/slime",
                        Git(scenario.upstream_git))
    assert found == scenario.prs[6]


def test_an_old_trailer_merged_late_does_not_move_the_cutoff_back(scenario: Scenario) -> None:
    from tests.factory import git_text

    main = git_text(scenario.fork_git, "rev-parse", "refs/heads/main")
    tree = git_text(scenario.fork_git, "rev-parse", "main^{tree}")
    newer = git_text(scenario.fork_git, "commit-tree", tree, "-p", main, "-m",
                     f"sync\n\nUpstream-Sync: THUDM/slime@{scenario.prs[6]}\n")
    git_text(scenario.fork_git, "update-ref", "refs/heads/main", newer)
    old_branch = git_text(scenario.fork_git, "commit-tree", tree, "-p", main, "-m",
                          f"old\n\nUpstream-Sync: THUDM/slime@{scenario.prs[4]}\n")
    _merge_into_main(scenario.fork_git, old_branch, "Merge an old branch")
    assert find_cutoff(Git(scenario.fork_git), "main", "THUDM/slime",
                       Git(scenario.upstream_git)) == scenario.prs[6]


def test_the_window_knows_a_login_only_where_the_commit_tells_it(tmp_path: Path) -> None:
    from bot.engine.report.groups import by_author
    from tests.factory import Person

    s = Scenario(tmp_path)
    s.sync_fork()
    s.upstream_pr(4, "Squashed by a named author", Person("Jee Jee Li", "jee@example.com"),
                  files={"slime/a.py": "a = 1\n"})
    s.upstream_pr(5, "Squashed with a noreply address",
                  Person("Zilin Zhu", "1234+zhuzilin@users.noreply.github.com"),
                  files={"slime/b.py": "b = 1\n"})
    s.upstream_merge_pr(6, "Merged", Person("Robert B", "rb@example.com"), branch="stream",
                        commits=[{"slime/c.py": "c = 1\n"}])
    s.upstream_pr(7, "A name that is all mention", Person("@admins", "x@example.com"),
                  files={"slime/d.py": "d = 1\n"})
    entries = list_window(Git(s.upstream_git), s.cutoff, s.tip)
    assert [(e.author, e.login) for e in entries] == [
        ("Jee Jee Li", ""), ("Zilin Zhu", "zhuzilin"),
        (entries[2].author, entries[2].login), ("@admins", "")]
    assert entries[2].login == entries[2].author  # "Merge pull request #6 from <login>/stream"
    shown = [by_author(e.to_json()) for e in entries]
    assert shown[:2] == ["by Jee Jee Li", "@zhuzilin"]
    assert shown[2] == f"@{entries[2].login}"
    assert shown[3] == "by &#64;admins"  # renders as @admins and notifies nobody
    # A plan saved before logins were kept: a login-shaped author was a login.
    assert by_author({"author": "alice"}) == "@alice"
    assert by_author({"author": "Jee Jee Li"}) == "by Jee Jee Li"


def test_a_summary_is_a_line_that_says_something() -> None:
    from bot.engine.window import _summary

    # Linuxbrew/brew@b381137cef: the body's first line is a bare fence.
    body = "```\nFast-forward\n Library/Formula/ant.rb | 8 ++++----\n```\n"
    assert _summary(body, "pull: don't try to publish nonexistent bottles") == "Fast-forward"
    assert _summary("---\n***\n", "t") == ""
