"""The criterion that turns a rule's measured precision into the tier it has earned. Pure.

A tier is a promise about merges nobody has replayed yet, so a rule earns one only where
the measurement says the promise holds beyond the sample and beyond any one project:

1. the 95% Wilson score lower bound of its precision, pooled over every training hunk,
   is at least the tier's threshold (0.97 Settled, 0.80 Confirm): a rule right in 9 of
   10 hunks has a bound of 0.60, and is not trusted on that;
2. with any one repository family left out, the bound of the rest is still at least the
   threshold: no single project carries the rule (a family is a project and its forks,
   such as two forks of vLLM);
3. it was measured in at least three families;
4. counted by merge, the bound still reaches the threshold: a merge counts as right when
   the rule was right at every one of its hunks or files. One merge's conflicts are
   decided together (upstream deleted 16 files the fork kept, in one cherrypick merge),
   so counting them as independent claims more certainty than the sample holds. Round 5
   added this after the only rule that had earned Confirm by 1-3 (taking upstream's
   deletion of a file: 248 of 281 files, in 84 of 105 merges, a bound of 0.714 by merge)
   was right in 78.1% of valid2's files and 57.4% of valid3's.

Why this and not a point estimate, or a bound on the pooled hunks alone: replayed with
each family held out in turn (``cross_validate``), rules chosen by either were right
in about two thirds of the held-out family's hunks, far from the promise (bench/README.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from bot.engine.model import Tier

Z95 = 1.959964  # the normal quantile of a two-sided 95% interval
THRESHOLDS = ((Tier.SETTLED, 0.97), (Tier.CONFIRM, 0.80))
MIN_FAMILIES = 3

# Repositories of one project and its forks count as one family.
FAMILIES = {"HabanaAI/vllm-fork": "vllm", "ROCm/vllm": "vllm",
            "glitch-soc/mastodon": "mastodon"}


def family(repo: str) -> str:
    return FAMILIES.get(repo, repo)


def wilson_lower(right: int, n: int, z: float = Z95) -> float:
    """The lower end of the Wilson score interval of ``right`` successes in ``n``."""
    if n <= 0:
        return 0.0
    p = right / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - spread) / (1 + z * z / n)


# (rule, repository, right) or (rule, repository, right, merge): without its merge, a
# record counts as a merge of its own.
Record = tuple[str, str, bool] | tuple[str, str, bool, str]


@dataclass
class Measured:
    """One rule's replayed candidates: right and all, per family and per merge."""

    rule: str
    by_family: dict[str, list[int]] = field(default_factory=dict)  # family: [right, n]
    by_merge: dict[str, list[int]] = field(default_factory=dict)  # merge: [right, n]

    def add(self, fam: str, right: bool, merge: str | None = None) -> None:
        for table, key in ((self.by_family, fam),
                           (self.by_merge, merge if merge is not None else f"#{self.n}")):
            counts = table.setdefault(key, [0, 0])
            counts[0] += int(right)
            counts[1] += 1

    @property
    def merges_right(self) -> int:
        """Merges where the rule was right at every one of its candidates."""
        return sum(1 for r, n in self.by_merge.values() if r == n)

    @property
    def merge_lower(self) -> float:
        return wilson_lower(self.merges_right, len(self.by_merge))

    @property
    def right(self) -> int:
        return sum(r for r, _ in self.by_family.values())

    @property
    def n(self) -> int:
        return sum(n for _, n in self.by_family.values())

    @property
    def lower(self) -> float:
        return wilson_lower(self.right, self.n)

    def without_worst(self) -> tuple[float, str]:
        """The smallest lower bound with one family left out, and that family."""
        if len(self.by_family) < 2:
            return 0.0, next(iter(self.by_family), "")
        return min((wilson_lower(self.right - r, self.n - n), fam)
                   for fam, (r, n) in self.by_family.items())

    def fails(self, floor: float) -> str:
        """Why the rule does not reach ``floor`` ("" if it does)."""
        fams = len(self.by_family)
        if self.lower < floor:
            return f"bound {self.lower:.3f} < {floor:.2f}"
        if fams < MIN_FAMILIES:
            return f"{fams} famil{'y' if fams == 1 else 'ies'} < {MIN_FAMILIES}"
        without, worst = self.without_worst()
        if without < floor:
            return f"without {worst}: {without:.3f} < {floor:.2f}"
        if self.merge_lower < floor:
            return (f"by merge: {self.merges_right} of {len(self.by_merge)}, "
                    f"{self.merge_lower:.3f} < {floor:.2f}")
        return ""

    def earned(self) -> tuple[Tier, str]:
        """The tier the criterion gives, and why the rule misses the tier above it."""
        above = ""
        for tier, floor in THRESHOLDS:
            fail = self.fails(floor)
            if not fail:
                return tier, above
            above = fail
        return Tier.DECIDE, above


def measure(records: Iterable[Record]) -> dict[str, Measured]:
    """Records (see ``Record``) as one ``Measured`` per rule."""
    out: dict[str, Measured] = {}
    for rule, repo, right, *merge in records:
        out.setdefault(rule, Measured(rule)).add(family(repo), right,
                                                 merge[0] if merge else None)
    return out


Criterion = Callable[[Measured], Tier]


def earned_tier(m: Measured) -> Tier:
    return m.earned()[0]


def cross_validate(records: list[Record],
                   criterion: Criterion = earned_tier) -> dict[str, tuple[int, int]]:
    """Each family held out in turn: tiers from the other families, then the held-out
    family's candidates of the rules promoted past Decide, as (right, n) per family."""
    out: dict[str, tuple[int, int]] = {}
    for held in sorted({family(r[1]) for r in records}):
        rest = measure(r for r in records if family(r[1]) != held)
        promoted = {rule for rule, m in rest.items() if criterion(m) is not Tier.DECIDE}
        test = [r[2] for r in records if family(r[1]) == held and r[0] in promoted]
        out[held] = (sum(test), len(test))
    return out


def point_estimate(m: Measured) -> Tier:
    """Round 2's way, for comparison: 80% over the sample, on at least five hunks."""
    return Tier.CONFIRM if m.n >= 5 and m.right / m.n >= 0.80 else Tier.DECIDE


def pooled_bound(m: Measured) -> Tier:
    """The Wilson bound on the pooled hunks alone, for comparison."""
    return Tier.CONFIRM if m.lower >= 0.80 else Tier.DECIDE


def three_families(m: Measured) -> Tier:
    """The pooled bound, and a point estimate of 80% in at least three families."""
    held = sum(1 for r, n in m.by_family.values() if r / n >= 0.80)
    return Tier.CONFIRM if m.lower >= 0.80 and held >= MIN_FAMILIES else Tier.DECIDE


CRITERIA: dict[str, Criterion] = {
    "point estimate ≥ 0.80 (round 2)": point_estimate,
    "pooled Wilson bound ≥ 0.80": pooled_bound,
    "pooled bound, 80% in 3 families": three_families,
    "the criterion (family left out)": earned_tier,
}
