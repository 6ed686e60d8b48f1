"""Conflict-marker regions, as git writes them."""

from __future__ import annotations

from bot.engine.markers import find_marker_regions

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
