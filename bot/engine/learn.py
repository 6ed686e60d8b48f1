"""Tiers a fork has earned: what this fork's people committed at past conflicts.

Few rules are right often enough across projects to be promised everywhere
(``suggest.RULE_TIERS``), but people in one project resolve alike: glitch-soc took the word
merge of a data file in 223 of 234 hunks, koboldcpp kept its own README at every conflict.
``forksync learn`` replays the fork's own past merges (:mod:`bot.engine.replay`), counts
how often each way of resolving was what people committed, and writes the counts to
``.github/forksync-learned.json``; once that file is committed, a Decide hunk that one of
the ways covers becomes a Confirm (or Settled) item whose reason gives the count.

A way is either a rule's proposal (``rule``), or one side kept for a file or a folder
(``file``, ``dir``: ``ours`` or ``theirs``). It earns a tier by the criterion of
:mod:`bot.engine.tiers` applied to this fork alone: the 95% Wilson lower bound of its
precision is at least 0.80 (Confirm) or 0.97 (Settled), over at least ``MIN_MERGES``
merges, and the way was right at every conflict it covered in that share of those merges
too (a merge's conflicts are resolved together: 2,325 right of 2,738 hunks of one lock
file in 22 merges was a habit of some merges, not of the file). A Wilson bound on merges
would ask for 16 merges without a miss, more than most forks' histories hold. And it held in
each of the newest ``RECENT`` merges it covered: a habit people have dropped stops being
proposed at once, and earns its tier back once it holds again.

Replayed with each fork's older merges teaching and its newer ones testing
(``bench/replay_suggestions.py --learn``): counting hunks only (round 5), the ways were
right in 145 of 150 later hunks of the training forks, 44 of 49 of valid2's and 22 of 22
of valid3's, but 1,206 of 1,896 of valid4's (the lock file above). Counting merges too:
145/150, 7/7, 22/22 and 155/205 (valid4's Foundry fork kept its own side less often in
its newer merges than in its older ones).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Any

from bot.engine.git import CatFile, Git
from bot.engine.markers import (
    MARKER_SIZE,
    find_marker_regions_in_lines,
    has_markers,
    split_lines,
)
from bot.engine.model import Tier, changed_of
from bot.engine.replay import (
    FileReplay,
    Remerged,
    conflicting_merges,
    replay_file,
    same_text,
    stage_changes,
    text_of,
)
from bot.engine.suggest import (
    FORK_DELETED,
    RULE_TIERS,
    THEIRS_HOLDS_FORK,
    UPSTREAM_DELETED,
    WHOLE_FILE_RULES,
    Proposal,
    as_decide,
)
from bot.engine.tiers import THRESHOLDS, wilson_lower
from bot.engine.window import TRAILER_SYNC
from bot.errors import ConfigError, GitError

LEARNED_PATH = ".github/forksync-learned.json"
VERSION = 3  # 2: each way also counts the merges it was right at every conflict of;
# 3: and how many of its newest RECENT merges (``last_right``)
OLDER = {1: "merges", 2: "whether each way held in its newest merges"}
MIN_MERGES = 3  # a way seen in fewer past merges is one decision, not a habit
# A way missed at a conflict in either of the newest two merges it covered is a Decide again
# until it holds in two merges in a row: people change habits (the Vue docs' translators took
# the fork's wording at 66 of 67 hunks in 10 merges, then at 19 of 41 later). Replayed as the
# App learns, each merge taught by every earlier one, learned Confirms were right in 583 of 668
# later hunks of the eleven training sets and 26 of 35 of valid9's without this check, and in
# 517 of 587 and 19 of 22 with it (replayed from round 9's records). On valid10, replayed once
# after it was frozen: 53 of 53 (``bench/replay_suggestions.py --learn``, its last line).
RECENT = 2
# A Decide's reason gives this fork's own figure for its rule from this many hunks on.
FIGURE_MIN = 10
KINDS = ("rule", "file", "dir")
ACTIONS = {"rule": ("suggested",), "file": ("ours", "theirs"), "dir": ("ours", "theirs")}


@dataclass(frozen=True)
class Outcome:
    """One past conflict hunk, or one past file one side deleted (a rule of
    ``WHOLE_FILE_RULES``): which ways would have been right."""

    merge: str
    path: str
    rule: str
    candidate_right: bool | None  # None: the rule had no text to propose
    ours_right: bool
    theirs_right: bool


@dataclass
class Way:
    """One way of resolving, and how often it was what people committed."""

    kind: str  # "rule", "file" or "dir"
    key: str  # the rule's name, or the path
    action: str  # "suggested", "ours" or "theirs"
    right: int = 0
    n: int = 0
    merges: set[str] = field(default_factory=set)
    missed: set[str] = field(default_factory=set)  # merges where it was wrong at least once
    # The merges in the order they were seen, oldest first (``tally`` reads its outcomes in
    # that order). A way built by hand without it takes its merges' sorted names.
    order: list[str] = field(default_factory=list)
    source: str = ""  # where its counts come from, if not from the Learned that holds it

    def __post_init__(self) -> None:
        if not self.order:
            self.order = sorted(self.merges)

    @property
    def lower(self) -> float:
        return wilson_lower(self.right, self.n)

    @property
    def merges_right(self) -> int:
        """The merges where this way was right at every conflict it covered."""
        return len(self.merges - self.missed)

    @property
    def last_right(self) -> int:
        """Of the newest ``RECENT`` merges this way covered, those it was right throughout."""
        return len(set(self.order[-RECENT:]) - self.missed)

    @property
    def held_lately(self) -> bool:
        """Right at every conflict of the newest ``RECENT`` merges it covered."""
        return self.last_right == len(self.order[-RECENT:])

    @property
    def tier(self) -> Tier:
        return self._earned(lately=True)

    @property
    def lapsed(self) -> bool:
        """It would earn a tier on its counts, but missed in one of its newest merges."""
        return not self.held_lately and self._earned(lately=False) is not Tier.DECIDE

    def _earned(self, *, lately: bool) -> Tier:
        if len(self.merges) < MIN_MERGES or (lately and not self.held_lately):
            return Tier.DECIDE
        share = self.merges_right / len(self.merges)
        return next((tier for tier, floor in THRESHOLDS
                     if self.lower >= floor and share >= floor), Tier.DECIDE)

    def short(self) -> str:
        """The way and its count, in one line (the item's ``learned`` field)."""
        return (f"{self.kind} {self.key}: {self.action}, right {self.right} of {self.n} in "
                f"{len(self.merges)} merges ({self.merges_right} right throughout)")

    def _what(self) -> str:
        return {"suggested": f"the proposal of this rule ({self.key})",
                "ours": "the fork's side (ours)", "theirs": "upstream's side (theirs)"
                }[self.action]

    def _where(self) -> str:
        return {"rule": "", "file": f" in `{self.key}`", "dir": f" under `{self.key}/`"
                }[self.kind]

    def lapse_says(self, source: str = f"`{LEARNED_PATH}`") -> str:
        """Why a habit no longer raises this item, for its reason."""
        if self.key in WHOLE_FILE_RULES:
            who = "the fork" if self.key == FORK_DELETED else "upstream"
            did = f"kept the deletion at {self.right} of {self.n} files {who} deleted"
        else:
            did = (f"committed {self._what()} at {self.right} of {self.n} conflict hunks"
                   f"{self._where()}")
        return (f"This fork's people {did} in past merges, but not at every one of them in "
                f"the newest {RECENT} of those merges ({source}): not proposed until it holds "
                f"in {RECENT} merges in a row.")

    def figure_says(self, source: str) -> str:
        """How often this rule's proposal was right in this fork: one more figure for a
        Decide, which its own counts did not raise."""
        what = "kept the deletion" if self.key in WHOLE_FILE_RULES else \
            "committed this rule's proposal"
        unit = "files" if self.key in WHOLE_FILE_RULES else "conflict hunks"
        return (f"In this fork's past merges, people {what} at {self.right} of {self.n} "
                f"{unit} of this kind, in {len(self.merges)} merges ({source}).")

    def says(self, source: str = f"`{LEARNED_PATH}`") -> str:
        """The habit in words, for an item's reason."""
        if self.key in WHOLE_FILE_RULES:
            who = "the fork" if self.key == FORK_DELETED else "upstream"
            return (f"In this fork's past merges, people kept the deletion at {self.right} of "
                    f"{self.n} files {who} deleted and the other side changed, and at every "
                    f"one of them in {self.merges_right} of {len(self.merges)} merges, the "
                    f"newest {RECENT} included ({source}).")
        return (f"In this fork's past merges, people committed {self._what()} at "
                f"{self.right} of {self.n} conflict hunks{self._where()}, and at every one "
                f"of them in {self.merges_right} of {len(self.merges)} merges, the newest "
                f"{RECENT} included ({source}).")


def _dirs(path: str) -> Iterator[str]:
    """The folders of ``path``, deepest first."""
    for parent in PurePosixPath(path).parents:
        if str(parent) != ".":
            yield str(parent)


def tally(outcomes: Iterable[Outcome]) -> list[Way]:
    """Every way seen in ``outcomes`` (oldest merge first), with its count."""
    ways: dict[tuple[str, str, str], Way] = {}

    def add(kind: str, key: str, action: str, right: bool, merge: str) -> None:
        way = ways.setdefault((kind, key, action), Way(kind, key, action))
        way.right += int(right)
        way.n += 1
        if merge not in way.merges:
            way.merges.add(merge)
            way.order.append(merge)
        if not right:
            way.missed.add(merge)

    for o in outcomes:
        if o.candidate_right is not None:
            add("rule", o.rule, "suggested", o.candidate_right, o.merge)
        if o.rule in WHOLE_FILE_RULES:
            continue  # a whole file's decision says nothing about its folder's hunks
        for kind, key in [("file", o.path), *(("dir", d) for d in _dirs(o.path))]:
            add(kind, key, "ours", o.ours_right, o.merge)
            add(kind, key, "theirs", o.theirs_right, o.merge)
    return sorted(ways.values(), key=lambda w: (-w.lower, w.kind, w.key, w.action))


@dataclass
class Learned:
    """The ways this fork has earned a tier with (the others are not kept)."""

    ways: list[Way] = field(default_factory=list)
    merges: int = 0  # how many past merges and sync commits had a conflict to learn from
    hunks: int = 0
    made: str = ""  # when, ISO 8601
    source: str = f"`{LEARNED_PATH}`"  # where the counts come from, as an item's reason says
    warning: str = ""  # why a file's ways are not used (written by an older forksync)
    # Ways that would earn a tier on their counts but missed in one of their newest merges:
    # not used; an item they cover says so.
    lapsed: list[Way] = field(default_factory=list)
    seen: list[Way] = field(default_factory=list)  # every way its outcomes held (earn)

    def checked_by(self, memory: Learned | None) -> Learned:
        """These ways (a committed file's) less those that the App's memory of merged sync
        PRs, newer than the file, saw missed in the newest ``RECENT`` merges they covered
        there: those lapse, with the memory's counts in the reason. The memory's counts
        also give a Decide its rule's figure in this fork (the file keeps none)."""
        if memory is None or not memory.seen:
            return self
        newer = {(w.kind, w.key, w.action): w for w in memory.seen}
        keep, lapsed = [], list(self.lapsed)
        for w in self.ways:
            seen = newer.get((w.kind, w.key, w.action))
            if seen is not None and not seen.held_lately:
                lapsed.append(replace(seen, source=memory.source))
            else:
                keep.append(w)
        # The memory's record of a rule, where it has one; else the file's (``held_back``).
        fresh = [replace(w, source=memory.source) for w in memory.seen]
        return replace(self, ways=keep, lapsed=lapsed,
                       seen=fresh + [w for w in self.seen
                                     if (w.kind, w.key, w.action) not in newer])

    def choose(self, rule: str, path: str, has_candidate: bool) -> Way | None:
        """The surest earned way that covers a Decide hunk of ``rule`` in ``path`` (never
        an add/add: two new files are never glued together, nor one picked by habit)."""
        return _surest([w for w in self.ways if w.tier is not Tier.DECIDE], rule, path,
                       has_candidate)

    def _explain(self, prop: Proposal, rule: str, path: str, has_candidate: bool) -> Proposal:
        """``prop``, its reason saying which habit of this fork no longer covers it, or
        else how often its rule's proposal was right in this fork (``FIGURE_MIN`` hunks)."""
        way = _surest(self.lapsed, rule, path, has_candidate)
        if way is not None:
            return replace(prop, reason=f"{prop.reason} "
                                        f"{way.lapse_says(way.source or self.source)}")
        own = self.record(rule)
        if not has_candidate or own is None or own.n < FIGURE_MIN:
            return prop
        return replace(prop, reason=f"{prop.reason} {own.figure_says(own.source or self.source)}")

    def record(self, rule: str) -> Way | None:
        """How often this fork's people committed ``rule``'s proposal, if it was seen."""
        return next((w for w in self.seen if (w.kind, w.key) == ("rule", rule)), None)

    def short_of(self, rule: str, tier: Tier) -> Way | None:
        """This fork's own record of ``rule``'s proposal, if it falls short of ``tier``'s
        share on ``FIGURE_MIN`` hunks or more; else None."""
        own = self.record(rule)
        floor = dict(THRESHOLDS).get(tier)
        if own is None or floor is None or own.n < FIGURE_MIN or own.right >= floor * own.n:
            return None
        return own

    def _hold_back(self, prop: Proposal, ours: str, theirs: str) -> Proposal:
        """A rule's global tier (``suggest.RULE_TIERS``) as a Decide where this fork's
        people committed its proposal at fewer than the tier's share of its hunks
        (``FIGURE_MIN`` hunks or more): the tier is a promise measured across projects,
        and this fork's own record is the better witness for this fork."""
        own = self.short_of(prop.rule, prop.tier)
        if own is None:
            return prop
        reason = (f"{prop.reason} In this fork's past merges, though, people committed this "
                  f"rule's proposal at only {own.right} of {own.n} conflict hunks of this "
                  f"kind, in {len(own.merges)} merges ({own.source or self.source}): here it "
                  f"is a Decide.")
        return as_decide(prop.rule, reason, prop.candidate, ours, theirs)

    def apply_file(self, prop: Proposal) -> Proposal:
        """A whole-file proposal (modify/delete) at the tier this fork has earned for its
        rule, if that is above Decide: the deletion, kept as this fork's people kept it."""
        if prop.tier is not Tier.DECIDE or prop.rule not in WHOLE_FILE_RULES:
            return prop
        way = next((w for w in self.ways if (w.kind, w.key) == ("rule", prop.rule)
                    and w.tier is not Tier.DECIDE), None)
        if way is None:
            return self._explain(prop, prop.rule, "", True)
        return Proposal(way.tier, f"{way.says(self.source)} {prop.reason}", None,
                        question=prop.question, choices=prop.choices, rule=prop.rule,
                        side=prop.side, learned=way.short())

    def apply(self, prop: Proposal, ours: str, theirs: str, path: str) -> Proposal:
        """``prop`` at the tier this fork has earned for it, if that is above Decide; a
        rule's global tier held back where this fork's own merges fall short of it."""
        if prop.side is not None:
            return prop
        if prop.tier is not Tier.DECIDE:
            return self._hold_back(prop, ours, theirs)
        way = self.choose(prop.rule, path, prop.candidate is not None)
        if way is None:
            return self._explain(prop, prop.rule, path, prop.candidate is not None)
        text = {"suggested": prop.candidate, "ours": ours, "theirs": theirs}[way.action]
        assert text is not None
        reason = f"{way.says(self.source)} {prop.reason[:1].upper()}{prop.reason[1:]}"
        if way.action == "theirs" or (text == theirs and prop.rule not in THEIRS_HOLDS_FORK):
            reason += " Committing it drops the fork's edit here, as people did before."
        learned = way.short()
        if way.tier is Tier.SETTLED:
            return Proposal(Tier.SETTLED, reason, text, rule=prop.rule, candidate=text,
                            learned=learned)
        others = tuple(s for s, t in (("ours", ours), ("theirs", theirs)) if t != text)
        return Proposal(Tier.CONFIRM, reason, text, question="Commit this proposal?",
                        choices=("suggested", *others), rule=prop.rule, candidate=text,
                        learned=learned)


def _surest(ways: list[Way], rule: str, path: str, has_candidate: bool) -> Way | None:
    """Of ``ways``, the surest that covers a hunk of ``rule`` in ``path`` (a file's
    deletion when ``path`` is empty); never an add/add."""
    if rule == "add/add":
        return None
    keys = {("file", path), *(("dir", d) for d in _dirs(path))} if path else set()
    if has_candidate:
        keys.add(("rule", rule))
    fits = [w for w in ways if (w.kind, w.key) in keys]
    # The surest; between equally sure ways, the narrowest (a file before its folders).
    return max(fits, key=lambda w: (w.lower, w.kind == "file", w.key.count("/")),
               default=None)


def earn(outcomes: list[Outcome], *, merges: int, now: datetime | None = None) -> Learned:
    """The ways ``outcomes`` (oldest merge first) earn a tier with, and those that lapsed."""
    ways = tally(outcomes)
    made = (now or datetime.now(UTC)).replace(microsecond=0).isoformat()
    return Learned([w for w in ways if w.tier is not Tier.DECIDE], merges, len(outcomes),
                   made, lapsed=[w for w in ways if w.lapsed], seen=ways)


# ------------------------------------------------------------------------ the fork's past


def merge_outcomes(cat: CatFile, merge: Remerged) -> list[Outcome]:
    """Every conflict hunk of one past two-parent merge, replayed, and every file one side
    deleted and the other changed (modify/delete): was the deletion kept?"""
    out: list[Outcome] = []
    for path in sorted(merge.stages):
        st = merge.stages[path]
        if 1 in st and len(st.keys() & {2, 3}) == 1:
            # A submodule, or a blob this clone lacks: nothing to learn.
            with contextlib.suppress(GitError):
                out.append(_deletion_outcome(cat, merge.sha, path, st))
            continue
        if not {2, 3} <= st.keys():
            continue
        merged, resolved = _text_at(cat, merge.tree, path), _text_at(cat, merge.sha, path)
        if merged is None or resolved is None:
            continue
        out += _outcomes(merge.sha, path, replay_file(
            path, merged, resolved, added_both=1 not in st, changed=stage_changes(cat, st)))
    return out


# A region is resolved within this many later versions of its file, or it is not a review
# queue (a document that shows conflict markers as an example keeps them for years).
RESOLVED_WITHIN = 10


def sync_outcomes(git: Git, cat: CatFile, commit: str, rev: str) -> list[Outcome]:
    """Every conflict region one sync commit put into a file (forksync's commit 1, or a
    sync made by hand with its markers kept as the review queue) against the text people
    left at the same place: the file at the first later commit on the way to ``rev`` that
    has no marker left in it.

    A file that already had markers before the commit is skipped (the commit did not make
    them: it resolved some, or touched a file that shows markers as an example). Regions
    without a base section (``merge`` style, as a hand sync may write them) teach which
    side people kept, but not a rule: no rule can be read without the base.
    """
    parents = git.text("rev-list", "--parents", "-n", "1", commit).split()[1:]
    if not parents:
        return []
    changed = git.run("diff-tree", "-r", "--name-only", "-z", "--no-renames", parents[0],
                      commit).decode("utf-8", "surrogateescape").split("\0")
    out: list[Outcome] = []
    for path in filter(None, changed):
        marked = _text_at(cat, commit, path)
        if marked is None or not find_marker_regions_in_lines(split_lines(marked)):
            continue
        before = _text_at(cat, parents[0], path)
        if before is not None and has_markers(before):
            continue
        later = git.text("log", "--format=%H", "--reverse", "--ancestry-path",
                         f"{commit}..{rev}", "--", path).split()
        resolved = None
        for sha in later[:RESOLVED_WITHIN]:
            text = _text_at(cat, sha, path)
            if text is None:
                break  # deleted, or no longer text: nothing to compare with
            if not has_markers(text):
                resolved = text
                break
        if resolved is None:
            continue
        out += _outcomes(commit, path, replay_file(path, marked, resolved, added_both=False))
    return out


def _deletion_outcome(cat: CatFile, sha: str, path: str, st: dict[int, str]) -> Outcome:
    """One file one side deleted: the deletion kept, or the changed side's version kept."""
    try:
        committed: bytes | None = cat.read(f"{sha}:{path}")[1]
    except GitError:
        committed = None
    changed = cat.read(st[2] if 2 in st else st[3])[1]  # the side that kept the file
    # Stage 2 is the fork's: if it is there, upstream deleted the file.
    return _deletion(sha, path, UPSTREAM_DELETED if 2 in st else FORK_DELETED,
                     deleted=committed is None, changed_kept=committed == changed)


def _deletion(source: str, path: str, rule: str, *, deleted: bool,
              changed_kept: bool) -> Outcome:
    """The outcome of a file one side deleted: the deletion kept, or the changed side."""
    if rule == FORK_DELETED:
        return Outcome(source, path, rule, deleted, deleted, changed_kept)
    return Outcome(source, path, rule, deleted, changed_kept, deleted)


def _deletion_kept(git: Git, commit: str, head: str, item: dict[str, Any]) -> Outcome:
    """A file one side deleted, as the merged head left it: deleted, or one side's blob."""
    proc = git.run_proc("rev-parse", "--verify", "--quiet", "--end-of-options",
                        f"{head}:{item['path']}")
    oid = proc.stdout.decode().strip() if proc.returncode == 0 else None
    changed = (item.get("sides") or {}).get("theirs" if item["rule"] == FORK_DELETED
                                            else "ours")
    return _deletion(commit, item["path"], item["rule"], deleted=oid is None,
                     changed_kept=isinstance(changed, dict) and oid is not None
                     and changed.get("oid") == oid)


def _text_at(cat: CatFile, rev: str, path: str) -> str | None:
    try:
        return text_of(cat.read(f"{rev}:{path}")[1])
    except GitError:
        return None


def _outcomes(source: str, path: str, replayed: FileReplay) -> list[Outcome]:
    out = []
    for r in replayed.regions:
        # Without a base section the rules misread the hunk: only its sides are counted.
        cand = r.proposal.candidate if r.region.base is not None else None
        out.append(Outcome(source, path, r.proposal.rule,
                           None if cand is None else same_text(cand, r.committed),
                           same_text(r.region.ours, r.committed),
                           same_text(r.region.theirs, r.committed)))
    return out


def sync_pr_outcomes(git: Git, files: list[dict[str, Any]], commit: str,
                     head: str) -> list[Outcome]:
    """The conflict regions of one sync PR's commit 1 against the PR's head as merged:
    ``files`` are the plan's (its JSON), whose conflicted ones are read at both commits;
    and its files one side deleted, by what the head has at their path."""
    out: list[Outcome] = []
    with CatFile(git) as cat:
        for f in files:
            if f.get("status") != "conflict":
                continue
            gone = [i for i in f.get("review_items", []) if i.get("rule") in WHOLE_FILE_RULES]
            if gone:
                out += [_deletion_kept(git, commit, head, i) for i in gone[:1]]
                continue
            marked, resolved = _text_at(cat, commit, f["path"]), _text_at(cat, head, f["path"])
            if marked is None or resolved is None:
                continue
            added_both = any(i.get("rule") == "add/add" for i in f.get("review_items", []))
            out += _outcomes(commit, f["path"], replay_file(
                f["path"], marked, resolved, added_both=added_both,
                size=int(f.get("marker_size") or MARKER_SIZE), changed=changed_of(f)))
    return out


# What the App keeps per fork (its state's "learned"): the outcomes of the newest merged
# sync PRs, by commit 1; the tiers are earned from them afresh at each sync.
MAX_SOURCES = 100


def remember(state: dict[str, Any], source: str, outcomes: list[Outcome]) -> bool:
    """Add one merged sync PR's outcomes to ``state`` (False: it was there already)."""
    sources: dict[str, list[list[Any]]] = state.setdefault("sources", {})
    if source in sources:
        return False
    sources[source] = [[o.path, o.rule, o.candidate_right, o.ours_right, o.theirs_right]
                       for o in outcomes]
    for old in list(sources)[:-MAX_SOURCES]:
        del sources[old]
    return True


def from_state(state: dict[str, Any] | None) -> Learned | None:
    """The tiers the remembered outcomes earn (None if nothing is remembered)."""
    sources = (state or {}).get("sources") or {}
    outcomes = [Outcome(sha, path, rule, cand, ours, theirs)
                for sha, rows in sources.items() for path, rule, cand, ours, theirs in rows]
    if not outcomes:
        return None
    learned = earn(outcomes, merges=sum(1 for rows in sources.values() if rows))
    learned.source = "the fork's merged sync PRs, as forksync saw them"
    return learned


def sync_commits(git: Git, rev: str, limit: int) -> list[str]:
    """The newest commits under ``rev`` that carry an ``Upstream-Sync:`` trailer."""
    return git.text("log", "--format=%H", f"--max-count={limit}", "-E",
                    f"--grep=^{TRAILER_SYNC}:", rev).split()


def marked_commits(git: Git, rev: str, limit: int) -> list[str]:
    """The newest commits under ``rev`` whose diff adds or removes a ``<<<<<<<`` line: the
    syncs made by hand with their markers kept as the review queue (the way vime's people
    sync), among others. :func:`sync_outcomes` keeps only the files a commit put markers
    into and people resolved soon after."""
    return git.text("log", "--format=%H", f"--max-count={limit}", "-G",
                    f"^{'<' * MARKER_SIZE} ", rev).split()


def learn(git: Git, rev: str = "HEAD", *, limit: int = 200,
          progress: Any = None) -> Learned:
    """Replay up to ``limit`` of the newest conflicting merges under ``rev``, and read up
    to ``limit`` of its sync commits (forksync's commit 1) and ``limit`` commits that added
    or removed conflict markers (syncs made by hand, markers kept as the review queue)."""
    if git.rev_parse(rev) is None:
        raise GitError(f"the fork has no revision {rev}")
    say = progress or (lambda _msg: None)
    say("finding conflicting merges and sync commits")
    merges = list(conflicting_merges(git, rev, limit))
    syncs = sync_commits(git, rev, limit)
    try:
        syncs = list(dict.fromkeys(syncs + marked_commits(git, rev, limit)))
    except GitError as exc:  # a partial clone without the blobs: the trailers still count
        say(f"could not look for syncs made by hand (commits with conflict markers): {exc}")
    found: dict[str, list[Outcome]] = {}
    with CatFile(git) as cat:
        for i, merge in enumerate(merges, 1):
            found[merge.sha] = merge_outcomes(cat, merge)
            say(f"replayed {i}/{len(merges)} merges ({sum(map(len, found.values()))} hunks)")
        for i, sha in enumerate(syncs, 1):
            # A hand sync committed as a merge is one source, read as a merge if it can be.
            found[sha] = found.get(sha) or sync_outcomes(git, cat, sha, rev)
            say(f"read {i}/{len(syncs)} sync commits ({sum(map(len, found.values()))} hunks)")
    sources = [sha for sha in oldest_first(git, list(found)) if found[sha]]
    return earn([o for sha in sources for o in found[sha]], merges=len(sources))


def oldest_first(git: Git, commits: list[str]) -> list[str]:
    """``commits`` by commit date, oldest first: a way's newest merges are its last."""
    if not commits:
        return []
    return git.text("log", "--no-walk", "--format=%H", *commits).split()[::-1]


# ------------------------------------------------------------------------ the file


def dumps(learned: Learned) -> str:
    """The file ``forksync learn`` writes: only earned ways, sorted, one per entry."""
    return json.dumps({
        "version": VERSION,
        "made": learned.made,
        "replayed": {"merges": learned.merges, "hunks": learned.hunks},
        "criterion": "95% Wilson lower bound of the hunks >= 0.80 (Confirm) or 0.97 "
                     "(Settled), the same share of its merges right at every hunk, in >= "
                     f"{MIN_MERGES} merges, the newest {RECENT} of them included",
        "ways": [{"kind": w.kind, "key": w.key, "action": w.action, "right": w.right,
                  "n": w.n, "merges": len(w.merges), "merges_right": w.merges_right,
                  "last_right": w.last_right, "tier": w.tier.value}
                 for w in learned.ways],
        # Rules whose global tier this fork's record falls short of: held back to Decide.
        "held_back": [{"rule": w.key, "right": w.right, "n": w.n, "merges": len(w.merges)}
                      for w in held_back(learned)],
    }, indent=2) + "\n"


def held_back(learned: Learned) -> list[Way]:
    """The rule ways ``learned`` saw that fall short of their rule's global tier."""
    return sorted((w for w in learned.seen if w.kind == "rule" and w.action == "suggested"
                   and w.key in RULE_TIERS and learned.short_of(w.key, RULE_TIERS[w.key])),
                  key=lambda w: w.key)


def loads(text: str, path: str = LEARNED_PATH) -> Learned:
    """The file, checked: a wrong field names itself; nothing is trusted beyond its counts
    (the tier is computed again, so an edited ``tier`` promises nothing)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(path, exc.lineno, "(file)", f"JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise ConfigError(path, None, "(file)", "a JSON object")
    if data.get("version") in OLDER:
        # Version 1 counted hunks only, which let one merge's many hunks carry a way;
        # version 2 did not say whether a way held in its newest merges. Their ways are not
        # used, and the plan says why rather than stopping.
        return Learned(warning=f"`{path}` was written by an older `forksync learn`, which did "
                       f"not count {OLDER[data['version']]}; its ways are not used until you "
                       "run `forksync learn` again and commit the new file")
    if data.get("version") != VERSION:
        raise ConfigError(path, None, "version", f"{VERSION} (run `forksync learn` again)")
    ways = data.get("ways")
    if not isinstance(ways, list):
        raise ConfigError(path, None, "ways", "a list")
    replayed = data.get("replayed", {"merges": 0, "hunks": 0})  # optional: informative only
    out = Learned(merges=_int(replayed, "merges", path), hunks=_int(replayed, "hunks", path),
                  made=str(data.get("made", "")))
    for i, w in enumerate(ways):
        where = f"ways[{i}]"
        if not isinstance(w, dict):
            raise ConfigError(path, None, where, "an object")
        kind, key, action = w.get("kind"), w.get("key"), w.get("action")
        if kind not in KINDS:
            raise ConfigError(path, None, f"{where}.kind", f"one of {', '.join(KINDS)}")
        if not isinstance(key, str) or not key:
            raise ConfigError(path, None, f"{where}.key", "a rule name or a path")
        if action not in ACTIONS[kind]:
            raise ConfigError(path, None, f"{where}.action", f"one of {', '.join(ACTIONS[kind])}")
        right, n, merges, merges_right, last_right = (_int(w, name, path, where) for name in (
            "right", "n", "merges", "merges_right", "last_right"))
        if right > n:
            raise ConfigError(path, None, f"{where}.right", f"at most n ({n})")
        if merges_right > merges:
            raise ConfigError(path, None, f"{where}.merges_right", f"at most merges ({merges})")
        newest = min(RECENT, merges)
        low, high = max(0, newest - merges + merges_right), min(newest, merges_right)
        if not low <= last_right <= high:
            raise ConfigError(path, None, f"{where}.last_right",
                              f"between {low} and {high} (of its newest {newest} merges, those "
                              "right at every conflict)")
        # Merges are counted, not named: stand-ins keep the counts for the criterion, the
        # newest last, with the misses the newest merges had among them.
        missed_newest = newest - last_right
        names = [str(m) for m in range(merges)]
        missed = set(names[merges - newest:][:missed_newest])
        missed |= set(names[:merges - newest][:merges - merges_right - missed_newest])
        out.ways.append(Way(kind, key, action, right, n, set(names), missed, names))
    out.seen = _held_back_ways(data.get("held_back", []), path)  # optional: from round 11
    return out


def _held_back_ways(entries: Any, path: str) -> list[Way]:
    """The file's ``held_back`` entries as the rule ways they count."""
    if not isinstance(entries, list):
        raise ConfigError(path, None, "held_back", "a list")
    out = []
    for i, h in enumerate(entries):
        where = f"held_back[{i}]"
        if not isinstance(h, dict) or not isinstance(h.get("rule"), str) or not h["rule"]:
            raise ConfigError(path, None, f"{where}.rule", "a rule name")
        right, n, merges = (_int(h, name, path, where) for name in ("right", "n", "merges"))
        if right > n:
            raise ConfigError(path, None, f"{where}.right", f"at most n ({n})")
        if not min(1, n) <= merges <= n:
            raise ConfigError(path, None, f"{where}.merges", f"between 1 and n ({n})")
        names = [str(m) for m in range(merges)]
        out.append(Way("rule", h["rule"], "suggested", right, n, set(names), order=names))
    return out


def _int(d: Any, name: str, path: str, where: str = "replayed") -> int:
    value = d.get(name) if isinstance(d, dict) else None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(path, None, f"{where}.{name}", "a whole number, 0 or more")
    return value


def load_from(git: Git, commit: str) -> Learned | None:
    """The learned file on ``commit``, or None if the fork has none."""
    proc = git.run_proc("cat-file", "blob", f"{commit}:{LEARNED_PATH}")
    if proc.returncode != 0:
        return None
    try:
        text = proc.stdout.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(LEARNED_PATH, None, "(file)", f"UTF-8 text (byte {exc.start} is not)") \
            from None
    return loads(text)
