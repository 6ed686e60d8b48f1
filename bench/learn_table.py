"""Tiers learned per fork, tested on that fork's later merges (``--learn``).

For each repository, its replayed merges in the list's order (oldest first) are split in
two: the older half teaches (``bot.engine.learn.earn``, the criterion ``forksync learn``
applies), the newer half tests. A tested hunk that a learned way covers takes that way's
tier and text, exactly as ``Learned.apply`` gives it to a sync; every other hunk keeps
its proposal. The table is the forks' later merges as a sync with a committed
``.github/forksync-learned.json`` would have seen them: nothing tested was taught.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from bot.engine.follow import FOLLOW_MIN, file_follow, follow_ups
from bot.engine.learn import Learned, Outcome, earn
from bot.engine.model import Tier


def outcome(c: Any) -> Outcome:
    return Outcome(c.merge, c.path, c.rule, c.candidate_right, c.ours_right, c.theirs_right)


def split(cases: Sequence[Any], order: dict[tuple[str, str], int],
          share: float = 0.5) -> tuple[list[Any], list[Any], int]:
    """The older ``share`` of one repository's merges (by ``order``) and the rest."""
    merges = sorted({c.merge for c in cases}, key=lambda m: order[(cases[0].repo, m)])
    taught = set(merges[:int(len(merges) * share)])
    return ([c for c in cases if c.merge in taught], [c for c in cases if c.merge not in taught],
            len(taught))


def applied(c: Any, learned: Learned) -> Any:
    """The tested case as a sync with ``learned`` would have proposed it."""
    way = learned.choose(c.rule, c.path, c.candidate_right is not None)
    if way is None or c.tier != Tier.DECIDE.value:
        return c
    right = {"suggested": bool(c.candidate_right), "ours": c.ours_right,
             "theirs": c.theirs_right}[way.action]
    return replace(c, tier=way.tier.value, suggested=True, right=right,
                   rule=f"{c.rule} [learned {way.kind} {way.action}]")


def learn_lines(cases: Sequence[Any], order: dict[tuple[str, str], int],
                table: Callable[[str, list[Any], int, int, int], list[str]],
                rule_table: Callable[[list[Any]], list[str]]) -> list[str]:
    out = ["== learned per fork: each repository's older half of merges teaches "
           "(forksync learn's criterion), its newer half tests",
           f"  {'repository':30}{'taught':>16}{'ways':>6}{'tested':>8}{'Confirm':>12}"
           f"{'Settled':>12}{'Decide':>9}"]
    tested_all: list[Any] = []
    merges_tested = 0
    for repo in sorted({c.repo for c in cases}):
        mine = [c for c in cases if c.repo == repo]
        teach, test, n_taught = split(mine, order)
        learned = earn([outcome(c) for c in teach], merges=n_taught)
        tested = [applied(c, learned) for c in test]
        tested_all += tested
        merges_tested += len({c.merge for c in test})
        cells = []
        for tier in (Tier.CONFIRM, Tier.SETTLED):
            group = [c for c in tested if c.tier == tier.value]
            cells.append(f"{sum(c.right for c in group)}/{len(group)}")
        decide = sum(c.tier == Tier.DECIDE.value for c in tested)
        out.append(f"  {repo:30}{f'{n_taught} m, {len(teach)} h':>16}{len(learned.ways):>6}"
                   f"{len(tested):>8}{cells[0]:>12}{cells[1]:>12}"
                   f"{decide / max(1, len(tested)):>9.1%}")
        for w in learned.ways:
            out.append(f"      {w.tier.value:8} {w.kind} {w.key}: {w.action} "
                       f"({w.right}/{w.n}, {len(w.merges)} merges)")
    out += ["", *table("the newer halves, with the tiers each fork learned from its older "
                       "half", tested_all, merges_tested, 0, 0),
            *rule_table([c for c in tested_all if "[learned" in c.rule])]
    return out


def follow_lines(cases: Sequence[Any]) -> list[str]:
    """The follow-ups, replayed: in each merge, within each file in line order (a person
    working down the file, pushing as they go), a hunk whose earlier hunks (two or more)
    all took one side. The checklist's hint names that side at every such hunk; the App's
    review suggests it (``bot.engine.follow.follow_ups``: not where the hunk's own
    suggestion is that side's text already). A hunk with a follow-up counts as right in one
    click when the follow-up is, whatever its first suggestion was."""
    by_file: dict[tuple[str, str], list[Any]] = {}
    for c in cases:
        by_file.setdefault((c.merge, c.path), []).append(c)
    counts = {"ours": [0, 0], "theirs": [0, 0]}
    offered = offered_right = gained = lost = 0
    for hunks in by_file.values():
        hunks.sort(key=lambda c: c.line)
        items = [{"id": f"Q{k + 1}", "kind": "conflict", "path": c.path, "ours": c.ours,
                  "theirs": c.theirs, "suggestion": c.suggestion} for k, c in enumerate(hunks)]
        said = {i["id"]: "ours" if c.ours_right else "theirs" if c.theirs_right else "edited"
                for i, c in zip(items, hunks, strict=True)}
        for k in range(FOLLOW_MIN, len(hunks)):
            done = {i["id"] for i in items[:k]}
            follow = file_follow(items[:k + 1], done, said)
            if follow is None:
                continue
            c = hunks[k]
            right = bool(c.ours_right if follow.side == "ours" else c.theirs_right)
            counts[follow.side][0] += right
            counts[follow.side][1] += 1
            if not follow_ups({"files": [{"review_items": items[:k + 1]}]}, done, said):
                continue  # its own suggestion is that side already
            offered += 1
            offered_right += right
            gained += right and not c.right
            lost += c.right and not right
    right = sum(r for r, _ in counts.values())
    n = sum(n for _, n in counts.values())
    first = sum(c.right for c in cases)
    after = first + gained - lost
    return [f"the checklist's hint (two or more earlier hunks of a file took one side: "
            f"the next one too?): right in {right} of {n} ({100 * right / max(1, n):.1f}%; "
            f"ours {counts['ours'][0]}/{counts['ours'][1]}, theirs "
            f"{counts['theirs'][0]}/{counts['theirs'][1]}) of {len(cases)} hunks",
            f"follow-up suggestions (the review, after each push): {offered} hunks, right in "
            f"{offered_right} ({100 * offered_right / max(1, offered):.1f}%)",
            f"right in one click, follow-ups counted: {after} of {len(cases)} "
            f"({100 * after / max(1, len(cases)):.1f}%; at the first review "
            f"{100 * first / max(1, len(cases)):.1f}%: {gained} gained, {lost} lost)"]
