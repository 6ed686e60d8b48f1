"""Tiers learned per fork, tested on that fork's later merges (``--learn``).

For each repository, its replayed merges in the list's order (oldest first) are split in
two: the older half teaches (``bot.engine.learn.earn``, the criterion ``forksync learn``
applies), the newer half tests. A tested hunk that a learned way covers takes that way's
tier and text, exactly as ``Learned.apply`` gives it to a sync; every other hunk keeps
its proposal. The table is the forks' later merges as a sync with a committed
``.github/forksync-learned.json`` would have seen them: nothing tested was taught.

Its last line replays the same newer merges as the App learns instead: each taught by all
the fork's merges before it (``as_the_app_learns``), so a habit people drop is noticed at
their next merge; files one side deleted count there in the merges that have conflict
hunks too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from bot.engine.follow import FOLLOW_MIN, file_follow, follow_ups
from bot.engine.learn import MAX_SOURCES, Learned, Outcome, earn
from bot.engine.model import Tier
from bot.engine.replay import same_text
from bot.engine.suggest import Proposal, as_decide

Json = dict[str, Any]


def outcome(c: Any) -> Outcome:
    return Outcome(c.merge, c.path, c.rule, c.candidate_right, c.ours_right, c.theirs_right)


def whole_outcome(w: Any) -> Outcome:
    """A replayed file one side deleted (``WholeFile``), as ``forksync learn`` counts it."""
    deleted = w.kept == "deleted"
    ours = deleted if w.deleted_by == "fork" else w.kept == "ours"
    theirs = deleted if w.deleted_by == "upstream" else w.kept == "theirs"
    return Outcome(w.merge, w.path, w.rule, deleted, ours, theirs)


def split(cases: Sequence[Any], order: dict[tuple[str, str], int],
          share: float = 0.5) -> tuple[list[Any], list[Any], int]:
    """The older ``share`` of one repository's merges (by ``order``) and the rest, each
    oldest merge first (``earn`` reads a way's newest merges last)."""
    merges = sorted({c.merge for c in cases}, key=lambda m: order[(cases[0].repo, m)])
    taught = set(merges[:int(len(merges) * share)])
    ordered = sorted(cases, key=lambda c: order[(c.repo, c.merge)])
    return ([c for c in ordered if c.merge in taught],
            [c for c in ordered if c.merge not in taught], len(taught))


def as_the_app_learns(mine: Sequence[Any], order: dict[tuple[str, str], int],
                      tested: set[str], gone: Sequence[Any] = (),
                      committed: Learned | None = None
                      ) -> tuple[list[Any], list[tuple[Tier, bool]]]:
    """One repository's ``tested`` merges as the App would have proposed them: each merge
    with the tiers earned from the outcomes of the ``MAX_SOURCES`` merges before it (the
    App remembers every merged sync PR and earns its tiers afresh at each sync). With
    ``committed`` (a learned file made from the older merges), the App plans with that file
    instead, checked by its memory of the tested merges before each one
    (``Learned.checked_by``). The hunks, and the tier and rightness of each of their files
    one side deleted that a learned way raised."""
    repo = mine[0].repo
    merges = sorted({c.merge for c in mine}, key=lambda m: order[(repo, m)])
    hunks: dict[str, list[Any]] = {m: [] for m in merges}
    deleted: dict[str, list[Any]] = {m: [] for m in merges}  # files one side deleted
    for c in mine:
        hunks[c.merge].append(c)
    for w in gone:
        if w.merge in deleted:
            deleted[w.merge].append(w)
    taught = {m: [*map(outcome, hunks[m]), *map(whole_outcome, deleted[m])] for m in merges}
    out: list[Any] = []
    files: list[tuple[Tier, bool]] = []
    for i, m in enumerate(merges):
        if m not in tested:
            continue
        past = merges[max(0, i - MAX_SOURCES):i]
        if committed is not None:
            past = [p for p in past if p in tested]  # the memory starts with the file
        learned = earn([o for p in past for o in taught[p]], merges=len(past))
        if committed is not None:
            learned = committed.checked_by(learned)
        out += [applied(c, learned) for c in hunks[m]]
        for w in deleted[m]:
            tier = learned.apply_file(Proposal(Tier.DECIDE, "", None, rule=w.rule,
                                               side=w.suggested)).tier
            if tier is not Tier.DECIDE:
                files.append((tier, whole_outcome(w).candidate_right is True))
    return out, files


def applied(c: Any, learned: Learned) -> Any:
    """The tested case as a sync with ``learned`` would have proposed it: raised by a way
    it earned, or a rule's global tier held back where the fork's record falls short."""
    if c.tier != Tier.DECIDE.value:
        if learned.short_of(c.rule, Tier(c.tier)) is None:
            return c
        held = as_decide(c.rule, "", c.suggestion, c.ours, c.theirs)
        return replace(c, tier=Tier.DECIDE.value, suggested=held.suggestion is not None,
                       right=held.suggestion is not None and c.right,
                       rule=f"{c.rule} [held back]")
    way = learned.choose(c.rule, c.path, c.candidate_right is not None)
    if way is None:
        return c
    right = {"suggested": bool(c.candidate_right), "ours": c.ours_right,
             "theirs": c.theirs_right}[way.action]
    return replace(c, tier=way.tier.value, suggested=True, right=right,
                   rule=f"{c.rule} [learned {way.kind} {way.action}]")


def learn_lines(cases: Sequence[Any], order: dict[tuple[str, str], int],
                table: Callable[[str, list[Any], int, int, int], list[str]],
                rule_table: Callable[[list[Any]], list[str]],
                whole: Sequence[Any] = ()) -> list[str]:
    """The per-fork table. ``whole`` are the replayed files one side deleted
    (``WholeFile``): a file is taught when its merge is no newer than the newest taught
    merge with hunks, and tested otherwise, where ``Learned.apply_file`` gives a learned
    rule's tier to the deletion the sync proposes."""
    out = ["== learned per fork: each repository's older half of merges teaches "
           "(forksync learn's criterion), its newer half tests",
           f"  {'repository':30}{'taught':>16}{'ways':>6}{'tested':>8}{'Confirm':>12}"
           f"{'Settled':>12}{'Decide':>9}{'files raised':>15}"]
    tested_all: list[Any] = []
    online: list[Any] = []  # the same tested hunks, as the App learns
    online_files: list[tuple[Tier, bool]] = []  # and their files one side deleted
    checked: list[Any] = []  # the same, planned with the older half's file and the memory
    checked_files: list[tuple[Tier, bool]] = []
    merges_tested = 0
    files = [0, 0, 0, 0]  # tested files one side deleted; raised by a learned way; right;
    # of the raised, Settled
    for repo in sorted({c.repo for c in cases}):
        mine = [c for c in cases if c.repo == repo]
        teach, test, n_taught = split(mine, order)
        last = max((order[(repo, c.merge)] for c in teach), default=-1)
        gone = [w for w in whole if w.repo == repo and w.suggested is not None]
        learned = earn([outcome(c) for c in teach] +
                       [whole_outcome(w) for w in gone if order[(repo, w.merge)] <= last],
                       merges=n_taught)
        tested = [applied(c, learned) for c in test]
        tested_all += tested
        hunks, raised = as_the_app_learns(mine, order, {c.merge for c in test}, gone)
        online += hunks
        online_files += raised
        hunks, raised = as_the_app_learns(mine, order, {c.merge for c in test}, gone,
                                          committed=learned)
        checked += hunks
        checked_files += raised
        merges_tested += len({c.merge for c in test})
        cells = []
        for tier in (Tier.CONFIRM, Tier.SETTLED):
            group = [c for c in tested if c.tier == tier.value]
            cells.append(f"{sum(c.right for c in group)}/{len(group)}")
        decide = sum(c.tier == Tier.DECIDE.value for c in tested)
        later = [w for w in gone if order[(repo, w.merge)] > last]
        tiers = {id(w): learned.apply_file(Proposal(Tier.DECIDE, "", None, rule=w.rule,
                                                    side=w.suggested)).tier for w in later}
        promoted = [w for w in later if tiers[id(w)] is not Tier.DECIDE]
        right = sum(whole_outcome(w).candidate_right is True for w in promoted)
        files = [files[0] + len(later), files[1] + len(promoted), files[2] + right,
                 files[3] + sum(tiers[id(w)] is Tier.SETTLED for w in promoted)]
        out.append(f"  {repo:30}{f'{n_taught} m, {len(teach)} h':>16}{len(learned.ways):>6}"
                   f"{len(tested):>8}{cells[0]:>12}{cells[1]:>12}"
                   f"{decide / max(1, len(tested)):>9.1%}{f'{right}/{len(promoted)}':>15}")
        for w in learned.ways:
            out.append(f"      {w.tier.value:8} {w.kind} {w.key}: {w.action} "
                       f"({w.right}/{w.n}, {len(w.merges)} merges)")
    if whole:
        out.append(f"  files one side deleted in the newer halves: {files[0]}; raised by a "
                   f"learned way at {files[1]} ({files[1] - files[3]} Confirm, {files[3]} "
                   f"Settled), right at {files[2]}")
    out += ["", *table("the newer halves, with the tiers each fork learned from its older "
                       "half", tested_all, merges_tested, 0, 0),
            *rule_table([c for c in tested_all if "[learned" in c.rule])]
    for what, hunks, raised_files in (
            (f"as the App learns (each newer merge taught by the {MAX_SOURCES} merges before "
             "it)", online, online_files),
            ("with the older half's file, checked by the App's memory of the newer merges",
             checked, checked_files)):
        cells = []
        for tier in (Tier.CONFIRM, Tier.SETTLED):
            group = [c for c in hunks if c.tier == tier.value and "[learned" in c.rule]
            cells.append(f"{tier.value} {sum(c.right for c in group)}/{len(group)}")
        for tier in (Tier.CONFIRM, Tier.SETTLED):
            rights = [right for t, right in raised_files if t is tier]
            cells.append(f"files {tier.value} {sum(rights)}/{len(rights)}")
        decide = sum(c.tier == Tier.DECIDE.value for c in hunks) / max(1, len(hunks))
        out.append(f"  {what}: learned {', '.join(cells)}; Decide {decide:.1%}")
    return out


@dataclass
class FollowStats:
    """The follow-ups of a set of replayed hunks (see ``follow_lines``)."""

    hint: dict[str, list[int]]  # side: [right, n] where the checklist's hint names it
    offered: int = 0
    offered_right: int = 0
    gained: int = 0
    lost: int = 0
    first: int = 0  # right in one click at the first review
    n: int = 0
    twin: list[int] = field(default_factory=lambda: [0, 0])  # [right, n]: every twin case
    twin_offered: list[int] = field(default_factory=lambda: [0, 0])  # [right, n] posted

    @property
    def after(self) -> int:
        """Right in one click once the follow-ups are posted."""
        return self.first + self.gained - self.lost


def follow_stats(cases: Sequence[Any]) -> FollowStats:
    """The follow-ups, replayed: in each merge, file by file and within each file in line
    order (a person working down the files, pushing as they go).

    - Twins: a hunk whose three versions are exactly those of earlier hunks of the merge
      that were all committed alike; the App's review offers that text
      (``bot.engine.follow.twin_follow_ups``: not where the hunk's own suggestion is it).
    - Otherwise, a hunk whose earlier hunks of its file (two or more) all took one side.
      The checklist's hint names that side at every such hunk; the App's review suggests
      it (``bot.engine.follow.follow_ups``: not where the hunk's own suggestion is that
      side's text already).

    A hunk with a follow-up counts as right in one click when the follow-up is, whatever
    its first suggestion was."""
    by_merge: dict[tuple[str, str], list[Any]] = {}
    for c in cases:
        by_merge.setdefault((c.repo, c.merge), []).append(c)
    st = FollowStats({"ours": [0, 0], "theirs": [0, 0]}, first=sum(c.right for c in cases),
                     n=len(cases))

    def offer(c: Any, right: bool) -> None:
        st.offered += 1
        st.offered_right += right
        st.gained += right and not c.right
        st.lost += c.right and not right

    for hunks in by_merge.values():
        hunks.sort(key=lambda c: (c.path, c.line))
        seen: dict[tuple[str, str | None, str], tuple[str, bool]] = {}
        files: dict[str, tuple[list[Json], dict[str, str]]] = {}  # items so far, said
        for c in hunks:
            # The twins so far: the text the first got, and whether all got it (None: no
            # twin yet). Kept as it goes, so a lock file's thousand copies stay linear.
            key = (c.ours, c.base, c.theirs)
            first = seen.get(key)
            text = first[0] if first is not None and first[1] else None
            seen[key] = (c.committed, True) if first is None else \
                (first[0], first[1] and same_text(c.committed, first[0]))
            items, said = files.setdefault(c.path, ([], {}))
            qid = f"Q{len(items) + 1}"
            items.append({"id": qid, "kind": "conflict", "path": c.path, "ours": c.ours,
                          "theirs": c.theirs, "suggestion": c.suggestion})
            twin = False
            if text is not None:
                right = same_text(c.committed, text)
                st.twin[0] += right
                st.twin[1] += 1
                if c.suggestion is None or not same_text(c.suggestion, text):
                    st.twin_offered[0] += right
                    st.twin_offered[1] += 1
                    offer(c, right)
                    twin = True  # the review offers the twin's text, not the side
            if len(items) > FOLLOW_MIN:  # the checklist's hint stands either way
                _side_follow(st, c, items, said, None if twin else offer)
            said[qid] = _said(c)
    return st


def _said(c: Any) -> str:
    """What a replayed hunk's people did, as the App records an answer or a push."""
    return "ours" if c.ours_right else "theirs" if c.theirs_right else "edited"


def _side_follow(st: FollowStats, c: Any, items: list[Json], said: dict[str, str],
                 offer: Callable[[Any, bool], None] | None) -> None:
    """The file's side follow-up at hunk ``c``, the last of ``items``: the hint, and (with
    ``offer``) the review's suggestion unless its own suggestion is that side already."""
    done = {i["id"] for i in items[:-1]}
    follow = file_follow(items, done, said)
    if follow is None:
        return
    right = bool(c.ours_right if follow.side == "ours" else c.theirs_right)
    st.hint[follow.side][0] += right
    st.hint[follow.side][1] += 1
    if offer is not None and follow_ups({"files": [{"review_items": items}]}, done, said):
        offer(c, right)


def _pct(a: int, b: int) -> str:
    return f"{100 * a / max(1, b):.1f}%"


def follow_lines(cases: Sequence[Any]) -> list[str]:
    """The checklist's hint, the follow-up suggestions, and one click counting them."""
    st = follow_stats(cases)
    right = sum(r for r, _ in st.hint.values())
    n = sum(n for _, n in st.hint.values())
    return [f"the checklist's hint (two or more earlier hunks of a file took one side: "
            f"the next one too?): right in {right} of {n} ({_pct(right, n)}; "
            f"ours {st.hint['ours'][0]}/{st.hint['ours'][1]}, theirs "
            f"{st.hint['theirs'][0]}/{st.hint['theirs'][1]}) of {st.n} hunks",
            f"twins (identical to hunks of the merge resolved before, all alike): resolved "
            f"alike in {st.twin[0]} of {st.twin[1]} ({_pct(*st.twin)}); offered as "
            f"follow-ups at {st.twin_offered[1]}, right at {st.twin_offered[0]}",
            f"follow-up suggestions (the review, after each push): {st.offered} hunks, right in "
            f"{st.offered_right} ({_pct(st.offered_right, st.offered)})",
            f"right in one click, follow-ups counted: {st.after} of {st.n} "
            f"({_pct(st.after, st.n)}; at the first review {_pct(st.first, st.n)}: "
            f"{st.gained} gained, {st.lost} lost)"]
