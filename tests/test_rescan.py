"""The gate's rescan (issue 11): broken regions, orphan marker lines, whole-file answers.

Each test builds commit 1 and a head by hand and asks :func:`bot.engine.rescan.scan`
what keeps the ``forksync`` check failing, then renders the check from that.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from bot.engine.gate import Remaining, check_annotations, check_output
from bot.engine.markers import find_marker_regions, split_lines
from bot.engine.rescan import CONFIRM, TreeEntry, scan
from tests.test_markers import COMMIT_1  # one region, as the bot commits it

UPSTREAM = {"repo": "THUDM/slime", "branch": "main"}


def conflict_item(text: str, path: str = "vime/a.py", item_id: str = "Q1",
                  size: int = 7) -> dict[str, Any]:
    (region,) = find_marker_regions(text, size)
    return {"id": item_id, "kind": "conflict", "path": path, "tier": "Decide",
            "reason": "both changed", "question": "which?", "start_line": region.start_line,
            "end_line": region.end_line, "ours": region.ours, "base": region.base,
            "theirs": region.theirs, "suggestion": None, "prs": [7]}


def plan(*files: tuple[str, list[dict[str, Any]], int]) -> dict[str, Any]:
    return {"upstream": UPSTREAM, "window_label": "#1..#7", "files": [
        {"path": path, "upstream_path": path, "status": "conflict" if items else "clean",
         "note": "", "marker_size": size, "review_items": items}
        for path, items, size in files]}


def without_line(text: str, number: int) -> str:
    lines = split_lines(text)
    del lines[number - 1]
    return "".join(lines)


def left(remaining: list[Remaining]) -> list[tuple[int | None, str | None, bool, bool]]:
    return [(r.start_line, r.item_id, r.marker, r.orphan) for r in remaining]


# -- every marker kind, left without the rest of its region ---------------------------------


@pytest.mark.parametrize(("dropped", "expected"), [
    # The opener deleted (the issue's case): base line, divider and closer are left.
    (2, [(3, "Q1", True, True), (5, "Q1", True, True), (7, "Q1", True, True)]),
    # The divider deleted: opener, base line and closer are left.
    (6, [(2, "Q1", True, True), (4, "Q1", True, True), (7, "Q1", True, True)]),
    # The closer deleted: opener, base line and divider are left.
    (8, [(2, "Q1", True, True), (4, "Q1", True, True), (6, "Q1", True, True)]),
    # The base line deleted: a complete region again, but not the one the merge wrote
    # (its base is now ours' content), so it fails as markers the plan does not know.
    (4, [(2, "Q1", True, False)]),
], ids=["opener", "divider", "closer", "base"])
def test_each_marker_kind_left_behind_keeps_the_item_open_and_fails_at_its_line(
        dropped: int, expected: list[tuple[int, str, bool, bool]]) -> None:
    item = conflict_item(COMMIT_1)
    head = without_line(COMMIT_1, dropped)
    result = scan(plan(("vime/a.py", [item], 7)), {"vime/a.py": COMMIT_1},
                  {"vime/a.py": head}, answers={})
    assert result.resolved == []  # broken is not resolved: the checklist does not tick
    assert left(result.remaining) == expected
    conclusion, title, summary = check_output(plan(("vime/a.py", [item], 7)), result.remaining)
    assert conclusion == "failure"
    notes = check_annotations(result.remaining)
    assert [(n["path"], n["start_line"], n["annotation_level"]) for n in notes] == [
        ("vime/a.py", line, "failure") for line, *_ in expected]
    if dropped != 4:
        assert title == "3 conflict marker lines outside any region"
        assert all(f"`vime/a.py` L{line}" in summary for line, *_ in expected)


def test_the_issue_11_file_fails_and_names_each_leftover_line() -> None:
    # What `/sync extend` left: the person's line, then the rest of the new region.
    item = conflict_item(COMMIT_1)
    head = ("intro\nmy line\n||||||| upstream@0123456789ab\nbase line\n=======\n"
            + "".join(f"upstream {i}\n" for i in range(910)) + ">>>>>>> theirs\noutro\n")
    result = scan(plan(("vime/a.py", [item], 7)), {"vime/a.py": COMMIT_1},
                  {"vime/a.py": head}, answers={})
    assert result.resolved == []
    assert [r.start_line for r in result.remaining] == [3, 5, 916]
    assert all("outside any complete region" in r.message for r in result.remaining)


def test_a_clean_resolution_still_resolves_and_a_later_paste_is_caught() -> None:
    item = conflict_item(COMMIT_1)
    resolved = "intro\nours line\noutro\n"
    done = scan(plan(("vime/a.py", [item], 7)), {"vime/a.py": COMMIT_1},
                {"vime/a.py": resolved}, answers={})
    assert done.resolved == ["Q1"] and done.remaining == []
    assert done.resolutions == {"Q1": "ours"}
    assert done.texts == {"Q1": "ours line\n"}  # what a twin's follow-up would offer
    edited = scan(plan(("vime/a.py", [item], 7)), {"vime/a.py": COMMIT_1},
                  {"vime/a.py": "intro\nboth lines\nmore\noutro\n"}, answers={})
    assert (edited.resolutions, edited.texts) == ({"Q1": "edited"},
                                                  {"Q1": "both lines\nmore\n"})
    # A `>>>>>>> theirs` pasted back far from the region: the bot's own label, so sure.
    pasted = resolved + "".join(f"x{i}\n" for i in range(20)) + ">>>>>>> theirs\n"
    again = scan(plan(("vime/a.py", [item], 7)), {"vime/a.py": COMMIT_1},
                 {"vime/a.py": pasted}, answers={})
    assert again.resolved == ["Q1"]  # the region itself is resolved ...
    assert left(again.remaining) == [(24, None, True, True)]  # ... the stray line fails


# -- a marker-like line in a Markdown code block -------------------------------------------


README = """# Resolving conflicts

git marks a conflict like this:

```
<<<<<<< HEAD
mine
=======
theirs
>>>>>>> feature
```
"""


def test_documented_markers_in_a_markdown_code_block_never_fire() -> None:
    # The merge result held them as content (commit 1): the rule drops them.
    result = scan(plan(("README.md", [], 7)), {"README.md": README}, {"README.md": README},
                  answers={})
    assert result.remaining == [] and result.resolved == []
    # How a line is told apart from a marker, as git writes markers: seven characters at
    # the start of the line, then a space or the end of the line. None of these is one.
    near_misses = README + "```\n  <<<<<<< HEAD\n<<<<<<<HEAD\n<<<<<<<< HEAD\n======= x\n```\n"
    result = scan(plan(("README.md", [], 7)), {"README.md": README},
                  {"README.md": near_misses}, answers={})
    assert result.remaining == []


def test_a_new_documented_marker_is_asked_about_not_passed_and_an_answer_settles_it() -> None:
    # Someone documents a diff3 conflict in the same file. `<<<<<<< HEAD` is the text the
    # file already held as content, so it is content again; `||||||| base` has git's
    # shape, was in no commit-1 line and carries a label forksync never writes: the text
    # cannot tell, so the gate asks instead of passing.
    head = README + "\nAnd with a base:\n\n```\n<<<<<<< HEAD\nmine\n||||||| base\nold\n```\n"
    result = scan(plan(("README.md", [], 7)), {"README.md": README}, {"README.md": head},
                  answers={})
    assert left(result.remaining) == [(18, "M1", False, True)]
    assert "/sync answer M1 content" in result.remaining[0].message
    conclusion, title, _ = check_output(plan(("README.md", [], 7)), result.remaining)
    assert conclusion == "failure" and title == "1 marker-like line to confirm"
    assert [n["annotation_level"] for n in check_annotations(result.remaining)] == ["failure"]
    # Answered "content", the line passes from then on, at any line number.
    moved = "Intro.\n\n" + head
    settled = scan(plan(("README.md", [], 7)), {"README.md": README}, {"README.md": moved},
                   answers={}, content={"README.md": ["||||||| base"]})
    assert settled.remaining == []
    # Editing inside the documented example makes it a region commit 1 did not hold:
    # the gate asks about it as a whole, and "content" settles it too.
    edited = README.replace("mine\n", "my side\n")
    asked = scan(plan(("README.md", [], 7)), {"README.md": README}, {"README.md": edited},
                 answers={})
    assert [(r.start_line, r.end_line, r.item_id) for r in asked.remaining] == [(6, 10, "M1")]
    assert check_output(plan(("README.md", [], 7)), asked.remaining)[1] == (
        "1 marker-like region to confirm")
    assert scan(plan(("README.md", [], 7)), {"README.md": README}, {"README.md": edited},
                answers={}, content={"README.md": asked.remaining[0].texts}).remaining == []


def test_a_markdown_file_merged_at_a_larger_size_tells_content_from_leftovers() -> None:
    # Its inputs had a setext underline and a documented marker, so the merge wrote
    # 8-character markers around the conflict and left the 7-character lines as content.
    commit_1 = ("Title\n=======\n\n```\n<<<<<<< HEAD\n```\n<<<<<<<< ours\nours\n"
                "|||||||| upstream@0123456789ab\nbase\n========\ntheirs\n>>>>>>>> theirs\n")
    item = conflict_item(commit_1, path="docs/a.md", size=8)
    files = plan(("docs/a.md", [item], 8))
    done = "Title\n=======\n\n```\n<<<<<<< HEAD\n```\nours\n"
    ok = scan(files, {"docs/a.md": commit_1}, {"docs/a.md": done}, answers={})
    assert ok.resolved == ["Q1"] and ok.remaining == []
    broken = commit_1.replace("<<<<<<<< ours\nours\n", "ours\n")
    bad = scan(files, {"docs/a.md": commit_1}, {"docs/a.md": broken}, answers={})
    assert bad.resolved == [] and left(bad.remaining) == [
        (8, "Q1", True, True), (10, "Q1", True, True), (12, "Q1", True, True)]


# -- files outside the plan ----------------------------------------------------------------


def test_markers_pushed_into_a_file_outside_the_plan_fail_too() -> None:
    before = "a = 1\n"
    leftover = "a = 1\n<<<<<<< ours\nb = 2\n"
    result = scan(plan(), {"vime/other.py": before}, {"vime/other.py": leftover}, answers={},
                  other_paths=["vime/other.py"])
    assert left(result.remaining) == [(2, None, True, True)]
    # A whole region with the bot's labels is surely left from the merge: it fails.
    ours = "a = 1\n<<<<<<< ours\nb\n=======\nc\n>>>>>>> theirs\n"
    result = scan(plan(), {"vime/other.py": before}, {"vime/other.py": ours}, answers={},
                  other_paths=["vime/other.py"])
    assert [(r.start_line, r.end_line, r.item_id, r.marker) for r in result.remaining] == [
        (2, 6, None, True)]
    # One from someone's own merge (or a documented one) is asked about, never passed.
    theirs = "a = 1\n<<<<<<< HEAD\nb\n=======\nc\n>>>>>>> main\n"
    result = scan(plan(), {"vime/other.py": before}, {"vime/other.py": theirs}, answers={},
                  other_paths=["vime/other.py"])
    assert [(r.start_line, r.end_line, r.item_id, r.marker) for r in result.remaining] == [
        (2, 6, "M1", False)]
    assert check_output(plan(), result.remaining)[0] == "failure"


def test_a_conflicted_file_moved_out_of_the_plan_keeps_its_larger_markers_visible() -> None:
    # The plan merged docs/a.md with 8-character markers; someone `git mv`s it unresolved.
    commit_1 = ("Title\n=======\n<<<<<<<< ours\nours\n|||||||| upstream@0123456789ab\n"
                "base\n========\ntheirs\n>>>>>>>> theirs\n")
    item = conflict_item(commit_1, path="docs/a.md", size=8)
    result = scan(plan(("docs/a.md", [item], 8)), {"docs/a.md": commit_1},
                  {"docs/a.md": None, "docs/b.md": commit_1}, answers={},
                  other_paths=["docs/b.md"])
    assert [(r.path, r.start_line, r.end_line, r.marker) for r in result.remaining] == [
        ("docs/b.md", 3, 9, True)]
    # Its setext underline at git's default size is no marker at all.
    moved_resolved = "Title\n=======\nours\n"
    assert scan(plan(("docs/a.md", [item], 8)), {"docs/a.md": commit_1},
                {"docs/a.md": None, "docs/b.md": moved_resolved}, answers={},
                other_paths=["docs/b.md"]).remaining == []


# -- whole-file items tick only on one of their answers ------------------------------------


THEIRS: TreeEntry = {"mode": "100644", "oid": "1" * 40}
MINE: TreeEntry = {"mode": "100644", "oid": "2" * 40}
FORK_PNG: TreeEntry = {"mode": "100644", "oid": "3" * 40}
UP_PNG: TreeEntry = {"mode": "100644", "oid": "4" * 40}


def whole(item_id: str, path: str, ours: TreeEntry, theirs: TreeEntry) -> dict[str, Any]:
    return {"id": item_id, "kind": "file", "path": path, "tier": "Decide",
            "reason": "CONFLICT (modify/delete)", "question": "?", "start_line": None,
            "end_line": None, "choices": ["ours", "theirs", CONFIRM], "prs": [],
            "sides": {"ours": ours, "theirs": theirs}}


# The fork deleted gone.py, upstream changed it (commit 1 holds upstream's); both
# changed arch.png (commit 1 holds the fork's).
GONE = whole("Q1", "vime/gone.py", None, THEIRS)
PNG = whole("Q2", "imgs/arch.png", FORK_PNG, UP_PNG)
WHOLE_PLAN = plan(("vime/gone.py", [GONE], 7), ("imgs/arch.png", [PNG], 7))


def whole_scan(gone: TreeEntry, png: TreeEntry, answers: dict[str, str] | None = None,
               confirmed: dict[str, TreeEntry] | None = None) -> tuple[list[str], list[str]]:
    result = scan(WHOLE_PLAN, {}, {}, answers=answers or {}, confirmed=confirmed,
                  entries={"vime/gone.py": (THEIRS, gone), "imgs/arch.png": (FORK_PNG, png)})
    return result.resolved, [r.message for r in result.remaining]


def test_whole_file_items_are_open_at_commit_1_although_it_holds_one_side() -> None:
    resolved, messages = whole_scan(THEIRS, FORK_PNG)
    assert resolved == []
    # As at commit 1, the message is the item's own (the same as the first check's).
    assert messages == ["Q1 (Decide): ?", "Q2 (Decide): ?"]


def test_an_edit_that_is_no_answer_ticks_nothing() -> None:
    resolved, messages = whole_scan(MINE, {"mode": "100644", "oid": "5" * 40})
    assert resolved == []
    assert all("neither side's version" in m and "confirm" in m for m in messages)
    # The executable bit alone is a different file, too.
    resolved, _ = whole_scan({"mode": "100755", "oid": THEIRS["oid"] if THEIRS else ""},
                             FORK_PNG)
    assert resolved == []


def test_the_other_side_or_a_deletion_ticks_and_an_answer_must_hold() -> None:
    resolved, _ = whole_scan(None, UP_PNG)  # deleted (ours) and upstream's image (theirs)
    assert resolved == ["Q1", "Q2"]
    # Keeping what commit 1 holds needs an explicit answer ...
    resolved, _ = whole_scan(THEIRS, FORK_PNG, answers={"Q1": "theirs", "Q2": "ours"})
    assert resolved == ["Q1", "Q2"]
    # ... and an answer the file does not match keeps the item open, saying so.
    resolved, messages = whole_scan(MINE, FORK_PNG, answers={"Q1": "theirs", "Q2": "theirs"})
    assert resolved == []
    assert "answered `theirs`, but `vime/gone.py` is not upstream's version any more" in \
        messages[0]


def test_a_new_blob_ticks_only_once_confirmed_and_only_while_it_stays() -> None:
    new_png: TreeEntry = {"mode": "100644", "oid": "6" * 40}
    resolved, _ = whole_scan(None, new_png, answers={"Q2": CONFIRM},
                             confirmed={"Q2": new_png})
    assert resolved == ["Q1", "Q2"]
    changed: TreeEntry = {"mode": "100644", "oid": "7" * 40}
    resolved, messages = whole_scan(None, changed, answers={"Q2": CONFIRM},
                                    confirmed={"Q2": new_png})
    assert resolved == ["Q1"] and "changed after it was confirmed" in messages[0]


def test_whole_file_messages_reach_the_check_summary() -> None:
    result = scan(WHOLE_PLAN, {}, {}, answers={},
                  entries={"vime/gone.py": (THEIRS, MINE), "imgs/arch.png": (FORK_PNG, FORK_PNG)})
    conclusion, title, summary = check_output(WHOLE_PLAN, result.remaining)
    assert conclusion == "failure" and title == "2 open decisions (Q1–Q2)"
    assert "**Q1** `vime/gone.py`: " in summary and "neither side's version" in summary


# -- the check's title -----------------------------------------------------------------------


def test_the_title_says_behind_upstream_whether_the_check_passes_or_not() -> None:
    files = plan(("vime/a.py", [conflict_item(COMMIT_1)], 7))
    assert check_output(files, [], behind=3)[:2] == (
        "success", "All conflicts resolved · behind upstream by 3 PRs")
    conclusion, title, summary = check_output(
        files, [Remaining("vime/a.py", "Q1", 2, 8, "Q1")], behind=1)
    assert conclusion == "failure" and title.endswith("· behind upstream by 1 PR")
    assert summary.startswith("**Behind upstream by 1 PR**")


def test_the_title_counts_one_residue_line_in_the_singular() -> None:
    files = plan(("vime/a.py", [], 7))
    one = [Remaining("vime/a.py", None, 3, 3, "sglang", residue=True)]
    assert check_output(files, one)[1] == "Translation residue on 1 line"
    two = [*one, Remaining("vime/a.py", None, 5, 5, "sglang", residue=True)]
    assert check_output(files, two)[1] == "Translation residue on 2 lines"


# -- every way to leave a region half-deleted ------------------------------------------------


@pytest.mark.parametrize("eol", ["\n", "\r\n"], ids=["lf", "crlf"])
@pytest.mark.parametrize("size", [7, 8])
def test_no_subset_of_a_regions_marker_lines_left_behind_passes(eol: str, size: int) -> None:
    # Delete any subset of the four marker lines (with or without edits of the sides and
    # lines added above): the check passes only when all four are gone. The last hole
    # found this way: a lone `=======` where the region stood (the scanner alone cannot
    # tell it from a setext underline; the region's place can).
    def marker(char: str, label: str = "") -> str:
        return char * size + (f" {label}" if label else "")

    lines = ["intro", marker("<", "ours"), "ours line", marker("|", "upstream@0123456789ab"),
             "base line", marker("="), "theirs line", marker(">", "theirs"), "outro"]
    commit_1 = eol.join(lines) + eol
    files = plan(("a.md", [conflict_item(commit_1, "a.md", size=size)], size))
    for k in range(5):
        for dropped in itertools.combinations((1, 3, 5, 7), k):
            for edited, above in itertools.product((False, True), repeat=2):
                kept = [("changed " + line if edited and line.endswith(" line") else line)
                        for i, line in enumerate(lines) if i not in dropped]
                head = eol.join((["added"] if above else []) + kept) + eol
                result = scan(files, {"a.md": commit_1}, {"a.md": head}, answers={})
                done = k == 4
                assert (result.resolved == ["Q1"]) is done, (dropped, edited, above)
                assert (result.remaining == []) is done, (dropped, edited, above)
