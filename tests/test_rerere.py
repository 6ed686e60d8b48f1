"""Recording and replaying conflict resolutions (bot/rerere.py): examples and properties."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.engine.rerere import (
    has_markers,
    hunk_key,
    parse_regions,
    record,
    record_file,
    replay,
    rewrite,
    split_lines,
    take_side,
)

MERGED = """\
import os

def main():
<<<<<<< ours
    run(vllm)
||||||| base
    run(sglang)
=======
    run(sglang, fast=True)
>>>>>>> theirs
    return 0

def other():
<<<<<<< ours
    a = 1
||||||| 0123abc:vime/x.py
    a = 0
=======
    a = 2
>>>>>>> theirs
"""


def region_text(ours: str, base: str, theirs: str, label: str = "base") -> str:
    return f"<<<<<<< ours\n{ours}||||||| {label}\n{base}=======\n{theirs}>>>>>>> theirs\n"


def test_parse_regions_reads_every_side_and_the_line_span() -> None:
    first, second = parse_regions(MERGED)
    assert (first.ours, first.base, first.theirs) == (
        "    run(vllm)\n", "    run(sglang)\n", "    run(sglang, fast=True)\n")
    assert (first.start, first.end) == (3, 10)
    assert second.base == "    a = 0\n"
    assert second.text.startswith("<<<<<<< ours\n") and second.text.endswith(">>>>>>> theirs\n")


def test_merge_style_regions_have_an_empty_base() -> None:
    (region,) = parse_regions("<<<<<<< HEAD\na\n=======\nb\n>>>>>>> feature\n")
    assert (region.ours, region.base, region.theirs) == ("a\n", "", "b\n")


def test_not_markers() -> None:
    text = "<<<<<<<< eight\n<<<<<<<x\n=======\n>>>>>>> theirs\n<<<<<<< ours\nopen\n"
    assert parse_regions(text) == []
    assert not has_markers("a\n======= b\n")
    assert has_markers("<<<<<<< ours\n")


def test_only_newline_ends_a_line() -> None:
    # A form feed is common in old source files; it must not shift line numbers.
    assert split_lines("a\x0cb\nc") == ["a\x0cb\n", "c"]
    assert split_lines("") == []
    assert split_lines("a\n") == ["a\n"]


def test_key_ignores_line_endings_but_not_path_or_sides() -> None:
    key = hunk_key("a.py", "x\n", "y\n", "z\n")
    assert key == hunk_key("a.py", "x\r\n", "y\r\n", "z\r\n")
    assert key != hunk_key("b.py", "x\n", "y\n", "z\n")
    assert key != hunk_key("a.py", "z\n", "y\n", "x\n")
    (region,) = parse_regions(region_text("x\n", "y\n", "z\n").replace("\n", "\r\n"))
    assert region.key("a.py") == key


def test_record_and_replay_example() -> None:
    resolved = MERGED.replace(region_text("    run(vllm)\n", "    run(sglang)\n",
                                          "    run(sglang, fast=True)\n"),
                              "    run(vllm, fast=True)\n")
    resolved = resolved.replace(
        region_text("    a = 1\n", "    a = 0\n", "    a = 2\n", "0123abc:vime/x.py"), "")
    resolutions = record(MERGED, resolved, path="vime/x.py")
    assert sorted(resolutions.values()) == ["", "    run(vllm, fast=True)\n"]
    assert replay(MERGED, resolutions, path="vime/x.py") == (resolved, 2)
    # Keys include the path: the same hunk in another file is not replayed.
    assert replay(MERGED, resolutions, path="vime/y.py") == (MERGED, 0)


def test_a_region_left_alone_is_pending_not_recorded() -> None:
    (first, _second) = parse_regions(MERGED)
    resolved = MERGED.replace(first.text, "    run(vllm, fast=True)\n")
    recording = record_file(MERGED, resolved)
    assert list(recording.resolutions.values()) == ["    run(vllm, fast=True)\n"]
    assert (recording.pending, recording.unplaced) == (1, 0)
    assert replay(MERGED, recording.resolutions) == (resolved, 1)


def test_a_region_edited_inside_but_still_conflicted_is_pending() -> None:
    resolved = MERGED.replace("    run(vllm)\n", "    run(vllm)  # hmm\n")
    recording = record_file(MERGED, resolved)
    assert recording.resolutions == {}
    assert recording.pending == 2


def test_edits_elsewhere_in_the_file_do_not_stop_recording() -> None:
    (first, second) = parse_regions(MERGED)
    resolved = MERGED.replace(first.text, "    run(vllm, fast=True)\n")
    resolved = resolved.replace(second.text, "    a = 3\n")
    resolved = resolved.replace("import os\n", "import os\nimport sys\n")  # context edit
    recording = record_file(MERGED, resolved)
    assert sorted(recording.resolutions.values()) == ["    a = 3\n", "    run(vllm, fast=True)\n"]
    # Replay only touches the regions: the unrelated edit is not part of a resolution.
    text, count = replay(MERGED, recording.resolutions)
    assert count == 2
    assert text == resolved.replace("import sys\n", "")


def test_a_region_whose_neighbours_changed_cannot_be_placed() -> None:
    (first, second) = parse_regions(MERGED)
    resolved = MERGED.replace("def main():\n" + first.text + "    return 0\n",
                              "def main():  # changed\n    run(vllm, fast=True)\n"
                              "    return 1\n")
    resolved = resolved.replace(second.text, "    a = 3\n")
    recording = record_file(MERGED, resolved)
    assert list(recording.resolutions.values()) == ["    a = 3\n"]
    assert recording.unplaced == 1


def test_replay_onto_a_new_merge_with_moved_and_new_hunks() -> None:
    (first, second) = parse_regions(MERGED)
    resolved = MERGED.replace(first.text, "RESOLVED 1\n").replace(second.text, "RESOLVED 2\n")
    resolutions = record(MERGED, resolved)
    new_region = region_text("n\n", "m\n", "o\n")
    new_merged = "header\n" + second.text + "middle\n" + new_region + "x\n" + first.text
    text, count = replay(new_merged, resolutions)
    assert count == 2
    assert text == "header\nRESOLVED 2\nmiddle\n" + new_region + "x\nRESOLVED 1\n"


def test_no_regions() -> None:
    assert record("a\n", "b\n") == {}
    assert replay("a\n", {"k": "v"}) == ("a\n", 0)


def test_take_side_and_rewrite() -> None:
    ours, count = take_side(MERGED, "ours")
    assert count == 2 and not has_markers(ours)
    assert "    run(vllm)\n    return 0\n" in ours and "    a = 1\n" in ours
    theirs, _ = take_side(MERGED, "theirs")
    assert "    run(sglang, fast=True)\n" in theirs and "    a = 2\n" in theirs
    text, count = rewrite(MERGED, lambda r: "X\n" if r.base == "    a = 0\n" else None)
    assert count == 1 and text.endswith("def other():\nX\n") and has_markers(text)


def test_crlf_file_round_trips() -> None:
    merged = MERGED.replace("\n", "\r\n")
    (first, second) = parse_regions(merged)
    resolved = merged.replace(first.text, "one\r\n").replace(second.text, "two\r\n")
    resolutions = record(merged, resolved)
    assert replay(merged, resolutions) == (resolved, 2)
    # Recorded on CRLF, the same hunks are found in an LF checkout.
    assert replay(MERGED, resolutions)[1] == 2


# --- properties --------------------------------------------------------------------------

# A tiny vocabulary on purpose: lines repeat between context and resolutions, which is
# what makes finding the resolutions hard.
VOCAB = ["a\n", "b\n", "}\n", "\n", "    return x\n"]
lines = st.lists(st.sampled_from(VOCAB), max_size=4)
labels = st.sampled_from(["base", "abc1234:vime/x.py", "merged common ancestors"])


@dataclass
class Case:
    merged: str
    resolved: str
    resolved_count: int


@st.composite
def cases(draw: st.DrawFn, *, all_resolved: bool) -> Case:
    count = draw(st.integers(min_value=1, max_value=4))
    contexts = [draw(lines)]
    merged: list[str] = ["".join(contexts[0])]
    resolved: list[str] = ["".join(contexts[0])]
    resolved_count = 0
    for i in range(count):
        # Sides carry a unique line so that no two hunks of one file share a key.
        ours = "".join(draw(lines)) + f"ours {i}\n"
        base = "".join(draw(lines))
        theirs = "".join(draw(lines))
        region = (f"<<<<<<< ours\n{ours}||||||| {draw(labels)}\n{base}"
                  f"=======\n{theirs}>>>>>>> theirs\n")
        merged.append(region)
        if all_resolved or draw(st.booleans()):
            resolved.append("".join(draw(lines)))
            resolved_count += 1
        else:
            resolved.append(region)
        # git never writes two regions back to back: some context always separates them.
        tail = draw(lines if i == count - 1 else st.lists(st.sampled_from(VOCAB), min_size=1,
                                                           max_size=4))
        if i == count - 1 and draw(st.booleans()):
            tail = [*tail, "no newline at end"]
        merged.append("".join(tail))
        resolved.append("".join(tail))
    return Case("".join(merged), "".join(resolved), resolved_count)


@settings(max_examples=400)
@given(cases(all_resolved=True))
def test_record_then_replay_reproduces_the_resolved_file(case: Case) -> None:
    resolutions = record(case.merged, case.resolved, path="p")
    assert replay(case.merged, resolutions, path="p") == (case.resolved, case.resolved_count)


@settings(max_examples=400)
@given(cases(all_resolved=False))
def test_regions_without_a_resolution_stay_as_markers(case: Case) -> None:
    recording = record_file(case.merged, case.resolved)
    assert len(recording.resolutions) == case.resolved_count
    assert recording.pending == len(parse_regions(case.merged)) - case.resolved_count
    text, replayed = replay(case.merged, recording.resolutions)
    assert (text, replayed) == (case.resolved, case.resolved_count)
    assert len(parse_regions(text)) == len(parse_regions(case.merged)) - case.resolved_count


@settings(max_examples=200)
@given(st.data())
def test_replay_onto_a_new_merge(data: st.DataObject) -> None:
    """Distinct context lines: each recorded resolution lands on its own hunk in a new merge."""
    count = data.draw(st.integers(min_value=1, max_value=4))
    regions = [region_text(f"o{i}\n", f"b{i}\n", f"t{i}\n") for i in range(count)]
    answers = [data.draw(st.lists(st.sampled_from(["r\n", "s\n", "\n"]), max_size=3))
               for _ in range(count)]
    merged = "".join(f"ctx {i}\n{r}" for i, r in enumerate(regions)) + "end\n"
    resolved = "".join(f"ctx {i}\n{''.join(a)}" for i, a in enumerate(answers)) + "end\n"
    resolutions = record(merged, resolved)
    # The new merge keeps some hunks, reordered, among new context and a new hunk.
    kept = data.draw(st.permutations(range(count)))
    kept = kept[:data.draw(st.integers(min_value=0, max_value=count))]
    fresh = region_text("new\n", "old\n", "newer\n")
    new_merged = "".join(f"new ctx {i}\n{regions[i]}" for i in kept) + "z\n" + fresh
    expected = "".join(f"new ctx {i}\n{''.join(answers[i])}" for i in kept) + "z\n" + fresh
    assert replay(new_merged, resolutions) == (expected, len(kept))


def test_a_resolution_recorded_at_one_marker_size_replays_at_another() -> None:
    def region8(ours: str, base: str, theirs: str) -> str:
        return (f"<<<<<<<< ours\n{ours}|||||||| upstream@abc\n{base}========\n{theirs}"
                ">>>>>>>> theirs\n")

    merged = "Title\n=======\n" + region8("a\n=======\n", "b\n", "c\n") + "end\n"
    resolved = "Title\n=======\na\n=======\nc\n" + "end\n"
    # At size 8 the setext lines are content, and the resolution is found...
    found = record_file(merged, resolved, path="f.md", size=8)
    assert found.pending == 0 and list(found.resolutions.values()) == ["a\n=======\nc\n"]
    # ...at git's default size, the same file has no region at all.
    assert record_file(merged, resolved, path="f.md").resolutions == {}
    assert has_markers(merged, 8) and not has_markers(merged)
    # A later merge wrote the same hunk at size 9: the key is the same, so it replays.
    nine = "Title\n=======\n" + region8("a\n=======\n", "b\n", "c\n").replace(
        "<<<<<<<<", "<<<<<<<<<").replace("||||||||", "|||||||||").replace(
        "========\n", "=========\n").replace(">>>>>>>>", ">>>>>>>>>") + "end\n"
    assert replay(nine, found.resolutions, path="f.md", size=9) == (resolved, 1)
