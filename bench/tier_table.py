"""The tier table: per rule, what its candidates scored on replayed merges and the tier the
criterion of ``bot.engine.tiers`` gives it, beside the tier the code has; then the
criterion itself checked by holding out each repository family in turn."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from bot.engine.model import Tier
from bot.engine.suggest import RULE_TIERS
from bot.engine.tiers import (
    CRITERIA,
    MIN_FAMILIES,
    THRESHOLDS,
    Record,
    cross_validate,
    family,
    measure,
)


def code_tier(rule: str) -> Tier:
    return RULE_TIERS.get(rule, Tier.DECIDE)


def tier_lines(records: list[Record], unmeasured: Iterable[str] = ()) -> list[str]:
    """One line per rule: n, right, precision, the Wilson lower bound pooled and with the
    worst family left out, the families, the earned tier and the code's."""
    floors = ", ".join(f"{t.value} {f:.2f}" for t, f in THRESHOLDS)
    out = [f"tiers by the criterion (bot/engine/tiers.py): Wilson 95% lower bound ≥ {floors}, "
           f"pooled and with any one family left out, in ≥{MIN_FAMILIES} families, at the "
           "effective size (merges as clusters; `neff`)",
           f"  {'rule':<40}{'n':>6}{'right':>6}{'prec':>7}{'lower':>7}  "
           f"{'without the worst family':<27}{'fam':>3}{'neff':>7}  {'earned':<8}{'code':<8}"
           "why not the tier above"]
    table = measure(records)
    for m in sorted(table.values(), key=lambda m: (-m.lower, m.rule)):
        earned, why = m.earned()
        without, worst = m.without_worst()
        mark = "" if earned is code_tier(m.rule) else "  ≠ MISMATCH"
        out.append(f"  {m.rule:<40}{m.n:>6}{m.right:>6}{m.right / m.n:>7.1%}{m.lower:>7.3f}  "
                   f"{without:.3f} {worst.split('/')[-1][:20]:<21}{len(m.by_family):>3}"
                   f"{m.effective_n:>7.0f}  "
                   f"{earned.value:<8}{code_tier(m.rule).value:<8}{why}{mark}")
    missing = Counter(unmeasured)
    for rule, n in sorted(missing.items()):
        out.append(f"  {rule:<40}{n:>6}{'':>20}  {'no candidate: a question only':<32}"
                   f"{'–':<8}{code_tier(rule).value}")
    return out


def cv_lines(records: list[Record]) -> list[str]:
    """Each criterion judged as forksync would be: tiers from all families but one, then
    the precision of the promoted rules on that one."""
    fams = sorted({family(r[1]) for r in records})
    out = ["criteria held out one family at a time: right / candidates of the rules they "
           "promote, on the held-out family",
           f"  {'criterion':<36}{'all':>14}  " + " ".join(f"{f.split('/')[-1][:10]:>10}"
                                                      for f in fams)]
    for name, criterion in CRITERIA.items():
        res = cross_validate(records, criterion)
        right = sum(r for r, _ in res.values())
        n = sum(n for _, n in res.values())
        share = f"{right}/{n} {right / n:.0%}" if n else "0/0"
        out.append(f"  {name:<36}{share:>14}  "
                   + " ".join(f"{f'{res[f][0]}/{res[f][1]}':>10}" for f in fams))
    return out


def forward_lines(by_set: dict[str, list[Record]], order: Sequence[str],
                  first: int = 4) -> list[str]:
    """Each criterion judged the way the sets were used: tiers from every set before one
    (the first ``first`` sets being the original training), then the rules it promotes
    scored on that set, replayed once when it was new. A criterion that promotes nothing
    makes no promise and scores 0/0."""
    sets = [s for s in order if s in by_set]
    out = ["criteria judged forward: tiers from the sets before each, scored on that set "
           "(right / candidates of the promoted rules)",
           f"  {'criterion':<50}{'all':>14}  " + " ".join(f"{s:>12}" for s in sets[first:])]
    for name, criterion in CRITERIA.items():
        cells, right, n = [], 0, 0
        for i in range(first, len(sets)):
            taught = measure(r for s in sets[:i] for r in by_set[s])
            promoted = {rule for rule, m in taught.items() if criterion(m) is not Tier.DECIDE}
            test = [r[2] for r in by_set[sets[i]] if r[0] in promoted]
            right, n = right + sum(test), n + len(test)
            cells.append(f"{sum(test)}/{len(test)}")
        share = f"{right}/{n} {right / n:.0%}" if n else "0/0"
        out.append(f"  {name:<50}{share:>14}  " + " ".join(f"{c:>12}" for c in cells))
    return out
