"""Patience alignment where Breezy's patiencediff gives up (``bot.engine.align``).

The Rust build of patiencediff panics past a fixed recursion depth, and sixteen lines
are enough: this pair was found by a random search after a real merge of valid13
(OpenXcom, xNetHack or Besu) stopped the replay benchmark with the panic. The panic is a
``BaseException``: before ``align.Patience`` it escaped ``share.changed_lines``, which
counts who changed a conflicted file, and stopped the whole plan.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import patiencediff

from bot.engine.align import Patience
from bot.engine.pipeline import plan
from bot.engine.remerge import fine_merge
from bot.engine.share import changed_lines, file_changes
from tests.factory import Scenario

LEFT = [f"line {c}\n" for c in "1339945040561948"]
RIGHT = [f"line {c}\n" for c in "7136395045621948"]


def _panics(a: list[str], b: list[str]) -> bool:
    try:
        patiencediff.PatienceSequenceMatcher(None, a, b).get_opcodes()
    except BaseException as exc:  # the Rust panic is not an Exception
        return type(exc).__name__ == "PanicException"
    return False


def test_the_pair_still_makes_patiencediff_give_up() -> None:
    # Without this the tests below would not reach the fallback at all.
    assert _panics(LEFT, RIGHT)


def test_patience_falls_back_to_difflib_and_aligns_the_pair() -> None:
    ops = Patience(None, LEFT, RIGHT).get_opcodes()
    want = difflib.SequenceMatcher(None, LEFT, RIGHT, autojunk=False).get_opcodes()
    assert ops == want
    # The opcodes rebuild the right side from the left.
    rebuilt = [ln for tag, i1, i2, j1, j2 in ops
               for ln in (LEFT[i1:i2] if tag == "equal" else RIGHT[j1:j2])]
    assert rebuilt == RIGHT


def test_who_changed_a_file_is_counted_where_patience_gives_up() -> None:
    base, ours, theirs = "".join(LEFT), "".join(RIGHT), "".join(LEFT) + "tail\n"
    assert changed_lines(base, ours) == sum(
        (i2 - i1) + (j2 - j1) for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(
            None, LEFT, RIGHT, autojunk=False).get_opcodes() if tag != "equal")
    changed = file_changes(base, ours, theirs)
    assert changed is not None and changed.theirs == 1 and changed.ours > 0


def test_a_region_where_patience_gives_up_is_still_merged_again() -> None:
    res = fine_merge("".join(LEFT), "".join(RIGHT), "".join(LEFT[:-1]) + "line 9\n")
    # Whatever the finer merge makes of it, it answers rather than stopping.
    assert res is None or isinstance(res.text, str)


def test_a_plan_with_such_a_file_in_conflict_completes(tmp_path: Path) -> None:
    s = Scenario(tmp_path / "repos")
    s.upstream_pr(1, "Add the table", "alice", files={"table.txt": "".join(LEFT)})
    s.sync_fork()
    s.fork_commit("Our table", {"table.txt": "".join(RIGHT)})
    s.upstream_pr(2, "Change the table", "alice",
                  files={"table.txt": "line Z\n" + "".join(LEFT[1:])})
    p = plan(str(s.fork_dir), str(s.upstream_dir), workdir=tmp_path / "wd")
    (f,) = [f for f in p.files if f.path == "table.txt"]
    assert f.status == "conflict" and f.review_items and f.changed is not None
    assert all(i.reason for i in f.review_items)
