"""The learned-tier replay of ``bench/replay_suggestions.py --learn``: a tested hunk takes
the tier a sync with the fork's learned ways would have given it."""

from __future__ import annotations

from bench.learn_table import applied, as_the_app_learns
from bench.replay_suggestions import Case
from bot.engine.learn import Outcome, earn
from bot.engine.model import Tier

RULE = "upstream deleted, fork changed, upstream's file"


def _case(merge: str, taken: bool, tier: str = "Confirm") -> Case:
    """A hunk where upstream deleted lines the fork changed: ``taken`` if people took the
    deletion (the rule's proposal), else they kept the fork's lines."""
    return Case("s", "o/fork", merge, "src/a.py", 1, tier, RULE, "", True, taken,
                not taken, taken, ours="x = f(a, v)\n", base="x = f(a)\n", theirs="",
                suggestion="", candidate_right=taken)


def test_a_global_confirm_is_held_back_where_the_forks_record_falls_short() -> None:
    keeps = earn([Outcome(f"m{i}", "src/a.py", RULE, i < 3, i >= 3, i < 3) for i in range(12)],
                 merges=12)
    held = applied(_case("t1", taken=False), keeps)
    # As a Decide, upstream's side is no one-click default: nothing offered, nothing right.
    assert (held.tier, held.suggested, held.right) == ("Decide", False, False)
    assert held.rule == f"{RULE} [held back]"
    takes = earn([Outcome(f"m{i}", "src/a.py", RULE, True, False, True) for i in range(12)],
                 merges=12)
    assert applied(_case("t1", taken=True), takes) == _case("t1", taken=True)


def test_as_the_app_learns_holds_back_from_the_merges_before_each() -> None:
    # Twelve merges where people kept the fork's lines, then one more: by then the fork's
    # record (0 of 12) holds the global Confirm back; the first merges keep it.
    cases = [_case(f"m{i:02}", taken=False) for i in range(13)]
    order = {("o/fork", c.merge): i for i, c in enumerate(cases)}
    out, files = as_the_app_learns(cases, order, {"m00", "m12"})
    assert [c.tier for c in out] == ["Confirm", "Decide"] and files == []
    assert Tier(out[1].tier) is Tier.DECIDE
