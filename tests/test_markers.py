"""Conflict-marker regions, as git writes them."""

from __future__ import annotations

import pytest

from bot.engine.markers import (
    MarkerKind,
    find_marker_regions,
    has_markers,
    marker_kind,
    marker_runs,
    safe_marker_size,
    scan,
)

DIFF3 = """a
<<<<<<< ours
B1
||||||| 8215dae
b
=======
B2
>>>>>>> theirs
c
<<<<<<< ours
=======
added
>>>>>>> theirs
"""


def test_diff3_regions_with_lines_and_sides() -> None:
    regions = find_marker_regions(DIFF3)
    assert [(r.start_line, r.end_line) for r in regions] == [(2, 8), (10, 13)]
    first, second = regions
    assert (first.ours, first.base, first.theirs) == ("B1\n", "b\n", "B2\n")
    assert (second.ours, second.base, second.theirs) == ("", None, "added\n")


def test_crlf_and_unclosed_regions() -> None:
    text = "x\r\n<<<<<<< ours\r\na\r\n=======\r\nb\r\n>>>>>>> theirs\r\n<<<<<<< ours\r\nlost\r\n"
    regions = find_marker_regions(text)
    assert len(regions) == 1
    assert regions[0].eol == "\r\n" and regions[0].ours == "a\r\n"


def test_marker_lookalikes_are_not_regions() -> None:
    assert find_marker_regions("<<<<<<<< eight\n========\n>>>>>>>> x\n") == []
    assert find_marker_regions("no markers here\n") == []


def test_only_newline_ends_a_line_as_for_git() -> None:
    # str.splitlines would also break at form feeds and U+2028, shifting every line number.
    text = "a\x0cb\u2028c\n<<<<<<< ours\nx\n=======\ny\n>>>>>>> theirs\n"
    (region,) = find_marker_regions(text)
    assert (region.start_line, region.end_line) == (2, 6)


# -- git's structure, at git's marker size -------------------------------------------------


SETEXT_REGION = """Title
=======

<<<<<<< ours
Ours
=======
more ours
||||||| upstream@0123456789ab
Base
=======
more base
=======
Theirs
=======
>>>>>>> theirs
"""


def test_a_setext_underline_outside_a_region_is_content() -> None:
    assert find_marker_regions("Title\n=======\n\ntext\n") == []
    assert scan("Title\n=======\n\ntext\n").clean


def test_a_divider_before_the_base_line_of_a_diff3_region_is_ours_content() -> None:
    (region,) = find_marker_regions(SETEXT_REGION)
    # The first "=======" inside is a line of ours (a diff3 region divides after its base).
    assert region.ours == "Ours\n=======\nmore ours\n"
    assert region.base_line == 8 and region.sep_line == 10
    # Past the divider, "=======" lines are theirs' content (git writes one divider).
    assert region.base == "Base\n" and region.theirs == "more base\n=======\nTheirs\n=======\n"
    assert (region.start_line, region.end_line) == (4, 15)


def test_markers_come_in_git_order_or_not_at_all() -> None:
    # ">>>>>>>" before any divider breaks the region; so does a second "<<<<<<<".
    assert find_marker_regions("<<<<<<< ours\na\n>>>>>>> theirs\n") == []
    assert find_marker_regions("<<<<<<< ours\na\n<<<<<<< ours\nb\n=======\n") == []
    # A "|||||||" after a divider: the divider was ours' content, and the real one follows.
    text = "<<<<<<< ours\na\n=======\nb\n||||||| base\nc\n=======\nd\n>>>>>>> theirs\n"
    (region,) = find_marker_regions(text)
    assert (region.ours, region.base, region.theirs) == ("a\n=======\nb\n", "c\n", "d\n")
    # With no divider after it, the region never closes.
    assert find_marker_regions("<<<<<<< ours\na\n=======\n||||||| b\n>>>>>>> theirs\n") == []


def test_regions_at_a_larger_marker_size_leave_seven_character_lines_alone() -> None:
    text = ("<<<<<<<<<< ours\n<<<<<<< HEAD (documented)\n||||||||||"
            " upstream@abc\n=======\n==========\n>>>>>>> feature\n>>>>>>>>>> theirs\n")
    (region,) = find_marker_regions(text, 10)
    assert region.ours == "<<<<<<< HEAD (documented)\n" and region.base == "=======\n"
    assert region.theirs == ">>>>>>> feature\n"
    # Read at git's default size, the documented lines would be taken for a region.
    (wrong,) = find_marker_regions(text)
    assert (wrong.start_line, wrong.end_line) == (2, 6)


def test_marker_kind_is_exactly_size_characters_then_a_space_or_the_end() -> None:
    assert marker_kind("<<<<<<< ours\n") is MarkerKind.OURS
    assert marker_kind("|||||||\r\n") is MarkerKind.BASE
    assert marker_kind("=======  \n") is MarkerKind.SEP
    assert marker_kind(">>>>>>> theirs") is MarkerKind.THEIRS
    for content in ("<<<<<<<HEAD\n", " <<<<<<< x\n", "<<<<<<<< x\n", "======= x\n",
                    "======\n", "\t>>>>>>> x\n", ""):
        assert marker_kind(content) is None, content
    assert marker_kind("<<<<<<<< ours\n", 8) is MarkerKind.OURS
    assert marker_kind("<<<<<<< ours\n", 8) is None


def test_safe_marker_size_steps_over_every_run_in_the_inputs() -> None:
    assert safe_marker_size(marker_runs(b"plain\ntext\n")) == 7
    assert safe_marker_size(marker_runs(b"Title\n=======\n")) == 8
    assert safe_marker_size(marker_runs(b"=======\n>>>>>>>> x\n<<<<<<<<< y\n")) == 10
    # Not marker-like: indented, glued to a label, or inside a line.
    assert safe_marker_size(marker_runs(b"  =======\n<<<<<<<HEAD\nx =======\n")) == 7


# -- the scanner: orphan markers ------------------------------------------------------------


COMMIT_1 = """intro
<<<<<<< ours
ours line
||||||| upstream@0123456789ab
base line
=======
theirs line
>>>>>>> theirs
outro
"""


def orphans(text: str, size: int = 7,
            reference: str | None = COMMIT_1) -> list[tuple[int, str, str]]:
    return [(o.line, o.kind.value, o.verdict.value)
            for o in scan(text, size, reference=reference).orphans]


def test_a_complete_region_is_a_region_not_an_orphan() -> None:
    result = scan(COMMIT_1, reference=COMMIT_1)
    assert [(r.start_line, r.end_line) for r in result.regions] == [(2, 8)]
    assert result.orphans == [] and not result.clean


@pytest.mark.parametrize("dropped, expected", [
    # The opener deleted: what is left of the region is three orphans (issue 11).
    (2, [(3, "|", "marker"), (5, "=", "marker"), (7, ">", "marker")]),
    # The base line deleted: the region still parses, merge-style (no orphans).
    (4, []),
    # The divider deleted: no region; opener, base and closer are orphans.
    (6, [(2, "<", "marker"), (4, "|", "marker"), (7, ">", "marker")]),
    # The closer deleted: opener, base and divider are orphans.
    (8, [(2, "<", "marker"), (4, "|", "marker"), (6, "=", "marker")]),
])
def test_every_marker_kind_left_alone_is_an_orphan(dropped: int,
                                                   expected: list[tuple[int, str, str]]) -> None:
    lines = COMMIT_1.splitlines(keepends=True)
    del lines[dropped - 1]
    assert orphans("".join(lines)) == expected


def test_the_issue_11_leftover_is_caught_without_a_reference_too() -> None:
    # A person kept ours and deleted the opener; extend's merge left the rest.
    text = "person's line\n||||||| upstream@0123456789ab\n=======\nupstream\n>>>>>>> theirs\n"
    assert orphans(text, reference=None) == [(2, "|", "marker"), (3, "=", "marker"),
                                             (5, ">", "marker")]
    assert find_marker_regions(text) == []  # which is why the old check passed


def test_a_marker_like_line_in_a_markdown_code_block_does_not_fire() -> None:
    # How each line is told apart from a marker:
    doc = ("# Resolving conflicts\n\n```\n"
           "<<<<<<< HEAD\n"          # 1. git's shape, but content of the merge's result
           "  <<<<<<< HEAD\n"        # 2. indented: not at the start of the line
           "<<<<<<<HEAD\n"           # 3. no space after the seven characters
           "<<<<<<<< HEAD\n"         # 4. eight characters, not seven
           "=======\n"               # 5. git's shape, content of the merge's result (as 1)
           "```\n")
    assert orphans(doc, reference=doc) == []
    # Without the reference only (1) and the divider next to it remain, and the scan
    # cannot tell them from a leftover of someone's own merge: it asks.
    assert orphans(doc, reference=None) == [(4, "<", "unsure"), (8, "=", "unsure")]


def test_the_bots_marker_size_tells_content_at_gits_default_size_apart() -> None:
    # The inputs held "=======" and "<<<<<<< HEAD", so the merge used size 8.
    commit_1 = ("Title\n=======\n\n```\n<<<<<<< HEAD\n```\n<<<<<<<< ours\nours\n"
                "|||||||| upstream@0123456789ab\nbase\n========\ntheirs\n>>>>>>>> theirs\n")
    resolved = commit_1.replace("<<<<<<<< ours\nours\n", "ours\n")
    # The 8-character leftovers fire; the 7-character content does not (it is what the
    # merge stepped around).
    assert orphans(resolved, 8, commit_1) == [(8, "|", "marker"), (10, "=", "marker"),
                                              (12, ">", "marker")]
    done = "Title\n=======\n\n```\n<<<<<<< HEAD\n```\nours\n"
    assert scan(done, 8, reference=commit_1).clean
    # New 7-character markers on a path merged with 8 are a question, not a pass (the
    # divider is the same text as the setext underline, so that one line says nothing).
    pasted = done + "<<<<<<< mine\nmine\n=======\nyours\n>>>>>>> feature\n"
    assert orphans(pasted, 8, commit_1) == [(8, "<", "unsure"), (12, ">", "unsure")]


def test_where_a_line_is_both_a_marker_and_content_the_scan_asks() -> None:
    # A plan recorded before marker sizes: merged at 7 with a setext heading inside.
    commit_1 = ("Title\n=======\n<<<<<<< ours\na\n||||||| upstream@0123456789ab\nb\n=======\n"
                "c\n>>>>>>> theirs\n")
    text = commit_1.replace("<<<<<<< ours\n", "")
    found = scan(text, reference=commit_1).orphans
    assert [(o.line, o.kind.value, o.verdict.value) for o in found] == [
        (2, "=", "unsure"), (4, "|", "marker"), (6, "=", "unsure"), (8, ">", "marker")]
    assert "both as a marker and as content" in found[0].reason


def test_another_tools_markers_are_unsure_and_the_bots_are_sure() -> None:
    text = "<<<<<<< HEAD\nmine\n"
    assert orphans(text, reference=None) == [(1, "<", "unsure")]
    assert orphans("<<<<<<< ours\nmine\n", reference=None) == [(1, "<", "marker")]
    assert orphans("x\n>>>>>>> theirs\n", reference=None) == [(2, ">", "marker")]
    assert orphans("|||||||| upstream@ab12\n", size=8, reference=None) == [(1, "|", "marker")]
    # A complete region from another tool is a region (the gate fails on it as unknown).
    other = scan("<<<<<<< HEAD\na\n=======\nb\n>>>>>>> feature\n")
    assert len(other.regions) == 1 and other.orphans == []


def test_a_clean_file_stays_clean_with_its_documented_markers() -> None:
    readme = "Conflicts look like this:\n\n    <<<<<<< HEAD\n    =======\n    >>>>>>> b\n"
    assert scan(readme, reference=readme).clean
    assert scan(readme).clean  # indented: no marker at all
    assert has_markers("x\n<<<<<<< ours\n") and not has_markers("x\n<<<<<<< ours\n", 8)
