"""The criterion that turns measured precision into a tier: a bound, not a point
estimate, and no single repository family may carry a rule."""

from __future__ import annotations

import pytest

from bot.engine.model import Tier
from bot.engine.tiers import (
    Measured,
    cross_validate,
    earned_tier,
    family,
    measure,
    point_estimate,
    wilson_lower,
)


def records(rule: str, per_repo: dict[str, tuple[int, int]]) -> list[tuple[str, str, bool]]:
    """``right`` of ``n`` candidates of ``rule`` in each repository."""
    return [(rule, repo, i < right) for repo, (right, n) in per_repo.items() for i in range(n)]


def test_wilson_lower_bound_matches_known_values() -> None:
    assert wilson_lower(9, 10) == pytest.approx(0.5958, abs=1e-4)
    assert wilson_lower(16, 16) == pytest.approx(0.8064, abs=1e-4)
    assert wilson_lower(0, 0) == 0.0
    assert wilson_lower(50, 100) < 0.5 < wilson_lower(500, 520)


def test_a_small_perfect_rule_earns_nothing() -> None:
    # Round 2 promoted rules like this one on 5 to 38 hunks; they did not hold.
    m = measure(records("r", {"a/x": (5, 5), "b/y": (5, 5), "c/z": (5, 5)}))["r"]
    assert point_estimate(m) is Tier.CONFIRM
    assert m.earned() == (Tier.DECIDE, f"bound {m.lower:.3f} < 0.80")


def test_a_rule_one_family_carries_earns_nothing() -> None:
    # The word merge in data files: almost always right in one project, a coin elsewhere.
    m = measure(records("r", {"a/x": (223, 234), "b/y": (20, 36), "c/z": (11, 14),
                              "d/w": (10, 23)}))["r"]
    # Counted by merges alone (round 7), the pooled bound passes and only leaving a/x out
    # catches it; with families as clusters the pooled bound already fails.
    assert m.merge_lower >= 0.80 > m.lower
    assert m.effective_n < 20 < m.n / 10
    tier, why = m.earned()
    assert tier is Tier.DECIDE and why == f"bound {m.lower:.3f} < 0.80"


def test_forks_of_one_project_are_one_family() -> None:
    assert family("ROCm/vllm") == family("HabanaAI/vllm-fork") == "vllm"
    m = measure(records("r", {"ROCm/vllm": (60, 60), "HabanaAI/vllm-fork": (60, 60),
                              "c/z": (60, 60)}))["r"]
    assert len(m.by_family) == 2
    assert m.earned() == (Tier.DECIDE, "2 families < 3")


def test_a_rule_that_holds_everywhere_earns_confirm_then_settled() -> None:
    spread = {"a/x": (95, 100), "b/y": (92, 100), "c/z": (96, 100), "d/w": (94, 100)}
    m = measure(records("r", spread))["r"]
    assert m.earned() == (Tier.CONFIRM, f"bound {m.lower:.3f} < 0.97")
    sure = measure(records("r", {k: (200, 200) for k in spread}))["r"]
    assert sure.earned() == (Tier.SETTLED, "")


def test_cross_validation_scores_what_each_fold_promotes() -> None:
    data = (records("good", {"a/x": (40, 40), "b/y": (40, 40), "c/z": (40, 40),
                             "d/w": (40, 40)})
            + records("weak", {"a/x": (9, 10), "b/y": (9, 10), "c/z": (9, 10), "d/w": (2, 10)}))
    folds = cross_validate(data)
    # "good" is promoted in every fold and right in each; "weak" never reaches the bound.
    assert folds == {"a/x": (40, 40), "b/y": (40, 40), "c/z": (40, 40), "d/w": (40, 40)}
    loose = cross_validate(data, point_estimate)
    assert loose["d/w"] == (42, 50)  # a point estimate promotes "weak" where it fails


def test_measured_counts_per_family() -> None:
    m = Measured("r")
    for repo, ok in (("a/x", True), ("a/x", False), ("b/y", True)):
        m.add(family(repo), ok)
    assert (m.right, m.n, m.by_family) == (2, 3, {"a/x": [1, 2], "b/y": [1, 1]})
    assert earned_tier(m) is Tier.DECIDE


def _merges(rule: str, repos: list[str], merges: int, size: int,
            wrong: list[int]) -> list[tuple[str, str, bool, str]]:
    """``merges`` merges of ``size`` candidates per repository; merge k has ``wrong[k]``
    wrong ones (missing entries: none)."""
    return [(rule, repo, i >= (wrong[k] if k < len(wrong) else 0), f"{repo}@{k}")
            for repo in repos for k in range(merges) for i in range(size)]


def test_misses_that_come_together_in_a_merge_count_for_less_than_spread_ones() -> None:
    repos = ["a/x", "b/y", "c/z", "d/w"]
    # 90 of 100 right in each family either way; only how the misses fall differs.
    spread = measure(_merges("r", repos, 5, 20, [2, 2, 2, 2, 2]))["r"]
    together = measure(_merges("r", repos, 5, 20, [10]))["r"]
    assert spread.right == together.right == 360 and spread.n == 400
    assert spread.hunk_lower == together.hunk_lower >= 0.80
    # Two misses in every merge: the merges agree, the sample is as good as 400 hunks.
    assert spread.effective_n == 400
    assert spread.earned() == (Tier.CONFIRM, f"bound {spread.lower:.3f} < 0.97")
    # Half of one merge wrong in each family: one merge's decision carried ten hunks.
    assert 40 <= together.effective_n < 50
    tier, why = together.earned()
    assert tier is Tier.DECIDE and why == f"bound {together.lower:.3f} < 0.80"
    # A record without its merge is a merge of its own: the hunk count, as before.
    plain = measure([r[:3] for r in _merges("r", repos, 5, 20, [10])])["r"]
    assert len(plain.by_merge) == plain.n == 400 and plain.lower == plain.hunk_lower


def test_a_rule_good_in_big_projects_and_poor_in_others_earns_nothing() -> None:
    # Keeping the fork's deletion of a file, as replayed up to valid7: 95% of one big
    # project's files, 46% to 75% in some others. Each file its own merge here, so only
    # the families can shrink the sample.
    per = {"s/chat": (919, 965), "u/flip": (121, 122), "f/zk": (75, 75), "v/qmk": (68, 81),
           "e/ltc": (71, 155), "p/spark": (43, 76), "o/geth": (22, 32), "j/dact": (21, 28),
           "m/vim": (47, 48), "c/blk": (33, 33)}
    m = measure(records("r", per))["r"]
    assert m.right / m.n > 0.85 and m.merge_lower > 0.85  # round 7 would say Confirm
    assert m.effective_n < 60 and m.earned()[0] is Tier.DECIDE
    # The same precision spread evenly over the projects keeps its size and its tier.
    even = measure(records("r", {k: (round(n * m.right / m.n), n) for k, (_, n) in
                                 per.items()}))["r"]
    assert even.effective_n > 1000 and even.earned()[0] is Tier.CONFIRM


def test_a_rule_right_everywhere_counts_each_merge_once() -> None:
    # No miss, so no spread to read the clustering from: 13 merges are 13 draws, not 35.
    m = measure([("r", f"{r}/x", True, f"{r}@{k}") for r, merges in
                 (("a", 5), ("b", 4), ("c", 4)) for k in range(merges) for _ in range(3)])["r"]
    assert m.n == 39 and m.effective_n == 13
    assert m.lower == pytest.approx(wilson_lower(13, 13)) and m.earned()[0] is Tier.DECIDE
