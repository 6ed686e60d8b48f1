"""The what-ifs of ``bench/what_if.py``: ways of resolving that no rule offers, measured
on replayed hunks before anyone builds them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.what_if import learned_start, main, moved_into, resolutions, shifts_added


def _hunk(merge: str, rule: str = "conflict", *, ours_right: bool = False,
          theirs_right: bool = False, suggested: bool = False, right: bool = False,
          tier: str = "Decide", repo: str = "o/fork", base: str = "a\n", ours: str = "b\n",
          theirs: str = "c\n", committed: str = "b\n") -> dict[str, object]:
    return {"set": "dev", "repo": repo, "merge": merge, "path": "f.c", "rule": rule,
            "tier": tier, "suggested": suggested, "right": right, "ours_right": ours_right,
            "theirs_right": theirs_right, "base": base, "ours": ours, "theirs": theirs,
            "committed": committed}


def test_the_fork_s_added_line_goes_after_the_base_line_above_it_in_upstream_s_version(
        ) -> None:
    base = "def f():\n    x = 1\n    return x\n"
    ours = "def f():\n    x = 1\n    log(x)\n    return x\n"
    theirs = "def f(y):\n    x = y\n    return x\n"
    # "x = 1" is gone from upstream's version: the line below ("return x") places it.
    assert moved_into(base, ours, theirs) == "def f(y):\n    x = y\n    log(x)\n    return x\n"
    # A side that changed a line, not only added, has nothing to move.
    assert moved_into(base, theirs, ours) is None


def test_numbers_both_sides_shifted_get_both_shifts() -> None:
    # Tile 101: the fork inserted 15 tiles before it, upstream 2.
    assert shifts_added("# tile 101 (acid zap)\n", "# tile 116 (acid zap)\n",
                        "# tile 103 (acid zap)\n") == "# tile 118 (acid zap)\n"
    # Only one side moved the number: not a case of two shifts.
    assert shifts_added("# tile 1\n", "# tile 2\n", "# tile 1 x\n") is None
    assert shifts_added("n = 1\n", "n = 2\n", "n = 1\n") is None


def test_resolutions_count_what_people_committed() -> None:
    hunks = [_hunk("m1", base="# tile 101\n", ours="# tile 116\n", theirs="# tile 103\n",
                   committed="# tile 118\n"),
             _hunk("m2", base="# tile 5\n", ours="# tile 6\n", theirs="# tile 7\n",
                   committed="# tile 6\n", ours_right=True)]
    c = resolutions(hunks)
    assert (c["shifts: n"], c["shifts: right"], c["shifts: ours"]) == (2, 1, 1)


def test_a_learned_side_is_taught_by_the_older_half_and_tested_on_the_newer() -> None:
    # Six merges; in the older three, people kept upstream's side at every hunk (two
    # each); in the newer three, at two hunks of three.
    hunks = [_hunk(f"m{i}", theirs_right=True) for i in range(3) for _ in range(2)]
    hunks += [_hunk(f"m{i}", theirs_right=i != 5) for i in range(3, 6)]
    hunks += [_hunk("m3", rule="merge word by word", suggested=True, right=True)]
    order = {("o/fork", f"m{i}"): i for i in range(6)}
    c = learned_start(hunks, order, floor=0.5)
    assert (c["tested"], c["now"], c["after"]) == (4, 1, 3)
    assert (c["offered theirs"], c["right theirs"], c["offered ours"]) == (3, 2, 0)
    # Asked for a bound of 0.9, six of six is not enough: nothing is offered.
    assert learned_start(hunks, order, floor=0.9)["offered theirs"] == 0


def test_main_prints_both_tables_and_rejects_a_file_that_is_not_records(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = tmp_path / "r.json"
    records.write_text(json.dumps({"hunks": [_hunk("m1")]}))
    assert main([str(records)]) == 0
    out = capsys.readouterr().out
    assert "a learned side as a starting point" in out and "training" in out
    (tmp_path / "bad.json").write_text("[]")
    with pytest.raises(SystemExit):
        main([str(tmp_path / "bad.json")])
    assert "not a --json file" in capsys.readouterr().err
