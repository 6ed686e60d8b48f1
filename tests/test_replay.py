"""Replaying people's work onto a new merge (issue 11): never a broken region, nothing lost.

:func:`bot.sync.commands.replay.replay_onto` runs on a real bare repository here: the
old commit 1, the head people pushed, and the new commit 1 of ``/sync extend``.
"""

from __future__ import annotations

from pathlib import Path

from bot.engine.git import Git
from bot.engine.markers import scan
from bot.engine.rerere import Hunk, Region, earlier_resolution, parse_regions, record_file
from bot.sync.commands.replay import record_branch, replay_onto

PATH = "vime/a.py"
BASE = "".join(f"line {i}\n" for i in range(1, 21))


def region(ours: str, base: str, theirs: str) -> str:
    return (f"<<<<<<< ours\n{ours}||||||| upstream@0123456789ab\n{base}=======\n{theirs}"
            ">>>>>>> theirs\n")


def file_with(middle: str, *, top: str = "line 1\n") -> str:
    return top + "".join(f"line {i}\n" for i in range(2, 10)) + middle + "".join(
        f"line {i}\n" for i in range(11, 21))


OLD_REGION = region("line 10 fork\n", "line 10\n", "line 10 upstream\n")
NEW_REGION = region("line 10 fork\n", "line 10\n", "line 10 upstream again\n")
OLD_COMMIT1 = file_with(OLD_REGION)
NEW_COMMIT1 = file_with(NEW_REGION)
PLAN = {"files": [{"path": PATH, "status": "conflict", "marker_size": 7, "review_items": [
    {"id": "Q1", "kind": "conflict", "start_line": 10, "end_line": 16}]}]}


class Repo:
    """A bare repository with one file per commit, each commit on the previous one."""

    def __init__(self, root: Path) -> None:
        self.git = Git(root)
        self.git.run("init", "--quiet", "--bare", str(root))

    def commit(self, files: dict[str, str], parents: list[str]) -> str:
        lines = []
        for path, text in sorted(files.items()):
            oid = self.git.hash_blobs([text.encode()])[0]
            directory, _, name = path.rpartition("/")
            assert directory == "vime", "one directory is enough here"
            lines.append(f"100644 blob {oid}\t{name}\n")
        sub = self.git.text("mktree", input="".join(lines).encode()).strip()
        root = self.git.text("mktree", input=f"040000 tree {sub}\tvime\n".encode()).strip()
        return self.git.commit_tree(root, parents, "c")


def extend(tmp_path: Path, head_text: str) -> tuple[str, list[str], list[str], list[str], int]:
    """People push ``head_text``; extend makes the new commit 1. Returns what replay did."""
    repo = Repo(tmp_path / "r.git")
    old = repo.commit({PATH: OLD_COMMIT1}, [])
    head = repo.commit({PATH: head_text}, [old])
    new = repo.commit({PATH: NEW_COMMIT1}, [])
    recorded = record_branch(repo.git, PLAN, old, head)
    out = replay_onto(repo.git, PLAN, new, recorded.resolutions, old_commit=old, old_head=head,
                      hunks=recorded.hunks, old_sizes={PATH: 7})
    text = out.files.get(PATH, NEW_COMMIT1) or ""
    return text, out.carried, out.partly, out.not_carried, out.changed_again.get(PATH, 0)


def test_the_issue_11_resolution_leaves_the_new_region_whole_and_is_shown_beside_it(
        tmp_path: Path) -> None:
    # The person kept ours; upstream changed the region again.
    kept = file_with("line 10 fork\n")
    text, carried, partly, not_carried, again = extend(tmp_path, kept)
    found = scan(text, reference=NEW_COMMIT1)
    assert text == NEW_COMMIT1 and len(found.regions) == 1 and found.orphans == []
    assert (carried, partly, not_carried, again) == ([], [], [], 1)


def test_other_edits_are_carried_next_to_a_region_that_changed_again(tmp_path: Path) -> None:
    kept = file_with("line 10 fork\n", top="line 1 fixed by vera\n")
    text, carried, partly, not_carried, _ = extend(tmp_path, kept)
    assert text == NEW_COMMIT1.replace("line 1\n", "line 1 fixed by vera\n", 1)
    assert (carried, partly, not_carried) == ([PATH], [], [])
    assert scan(text, reference=NEW_COMMIT1).orphans == []


def test_a_half_done_resolution_is_not_recorded_and_never_breaks_the_new_region(
        tmp_path: Path) -> None:
    # Only the <<<<<<< line deleted: no resolution, and the leftovers stay out of the new
    # merge (carried over, they would make the very broken region of the issue).
    half = OLD_COMMIT1.replace("<<<<<<< ours\n", "")
    recording = record_file(OLD_COMMIT1, half, path=PATH)
    assert recording.resolutions == {} and recording.pending == 1
    text, carried, partly, not_carried, _ = extend(tmp_path, half)
    found = scan(text, reference=NEW_COMMIT1)
    assert len(found.regions) == 1 and found.orphans == [], text
    assert PATH in not_carried and PATH not in carried + partly


def test_a_resolution_whose_region_is_unchanged_is_replayed(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r.git")
    old = repo.commit({PATH: OLD_COMMIT1}, [])
    head = repo.commit({PATH: file_with("line 10 both\n")}, [old])
    new = repo.commit({PATH: OLD_COMMIT1.replace("line 20\n", "line 20 upstream\n")}, [])
    recorded = record_branch(repo.git, PLAN, old, head)
    out = replay_onto(repo.git, PLAN, new, recorded.resolutions, old_commit=old, old_head=head,
                      hunks=recorded.hunks, old_sizes={PATH: 7})
    assert out.replayed == 1 and out.changed_again == {}
    assert out.files[PATH] == file_with("line 10 both\n").replace("line 20\n",
                                                                   "line 20 upstream\n")


# -- which earlier resolution is shown beside a region, and whether it still applies -------


def new_region(ours: str, base: str, theirs: str) -> Region:
    (r,) = parse_regions(region(ours, base, theirs))
    return r


def test_an_earlier_resolution_applies_when_the_side_it_kept_did_not_change() -> None:
    kept_ours = Hunk("fork\n", "base\n", "up\n", "fork\n")
    took_theirs = Hunk("fork\n", "base\n", "up\n", "up\n")
    edited = Hunk("fork\n", "base\n", "up\n", "fork and up\n")
    changed_again = new_region("fork\n", "base\n", "up again\n")
    for hunk, how, applies in ((kept_ours, "ours", True), (took_theirs, "theirs", False),
                               (edited, "edited", False)):
        found = earlier_resolution(changed_again, [hunk])
        assert found is not None
        assert (found[1].how, found[1].applies, found[1].text) == (how, applies, hunk.text)
    # The fork changed its side instead (a refresh): taking upstream's still applies.
    fork_moved = new_region("fork v2\n", "base\n", "up\n")
    found = earlier_resolution(fork_moved, [took_theirs])
    assert found is not None and found[1].applies


def test_no_earlier_resolution_for_an_unrelated_region() -> None:
    other = new_region("something else entirely\n", "nothing alike\n", "x\n")
    assert earlier_resolution(other, [Hunk("fork\n", "base\n", "up\n", "fork\n")]) is None
    assert earlier_resolution(other, []) is None
