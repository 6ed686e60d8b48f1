"""Proposals for one conflict hunk: what to commit, how sure we are, and why. Pure.

Each rule reads the hunk and drafts a **candidate**, the text it would commit, with one
sentence per side. The tier is not the rule's to choose: it is the promise the rule has
earned on real merges (``RULE_TIERS``, derived by ``bench/replay_suggestions.py --tiers``):

- **Settled**: a careful person would commit exactly this text.
- **Confirm**: people commit this proposal at least eight times in ten, in any project.
- **Decide** (every rule that has not earned more): a person must judge. The candidate
  is offered as a starting point, except where it is upstream's side, which is never a
  Decide's one-click default since committing it would silently drop the fork's edit.
  The one exception is a clean finer merge whose result happens to be upstream's text
  (``MERGED_INTO_THEIRS``): that is both edits, not upstream's side over the fork's.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import PurePosixPath

from bot.engine.markers import MarkerRegion, split_lines
from bot.engine.model import Changed, Tier
from bot.engine.remerge import Resolved, both_changed_a_line, fine_merge
from bot.engine.share import changed_lines
from bot.engine.wordiff import dropped_words, quotable

_WS = re.compile(r"\s+")
CONTEXT_LINES = 8  # lines of the merged file on each side of a region that rules may read
LARGE_LINES = 8  # a side longer than this is read whole: its combination is its own rule
DECIDE_CHOICES = ("ours", "theirs")
STARTING_CHOICES = ("suggested", "ours", "theirs")

# A rule whose candidate is upstream's side, in a file that is upstream's: the fork made
# less than this part of the lines changed in it since the two split. The rule's name
# gains UPSTREAM_FILE, and the variant earns its own tier: people take upstream's side far
# more often where the fork's edit is a small touch on upstream's file (round 11: "upstream
# deleted, fork changed" is right in 89% of such hunks and 70% over all).
UPSTREAM_FILE = ", upstream's file"
UPSTREAM_FILE_SHARE = 0.3


# The tier each rule has earned, and no rule is trusted further than this table says.
# The criterion (bench/README.md, "How the tiers are set"): a rule is Confirm only if the
# 95% Wilson lower bound of its precision on the training merges (pooled) is at least
# 0.80, and still is with any one repository family left out, in at least three
# families; Settled likewise with 0.97. The bound keeps a rule measured on a few dozen
# hunks out; leaving a family out keeps out a rule that one project carries (the word
# merge in data files: right in glitch-soc's hunks, not elsewhere).
# `bench/replay_suggestions.py --tiers` prints the table this copies. Round 8 (training:
# every set replayed so far, 4,342 merges in 27 families; the bound counts merges and
# families as clusters, `bot.engine.tiers`): no rule earns a tier. Round 7's one Confirm,
# keeping the fork's deletion of a file upstream changed, was right in 65 of 105 files of
# valid6 and 125 of 211 of valid7; over everything, 1,650 of 1,883 files (88%), but under
# 80% in 6 of the 20 projects with five or more. A fork's own habits can raise its items
# (`forksync learn`), deletions included. Round 9 (valid8 joined: 4,738 merges in 30
# families): "same change" earns Confirm, right in 43 of 43 hunks of 14 families (bound
# 0.839 at an effective size of 20). Round 10 (valid9 and valid10 joined: 5,267 merges in
# 36 families): the same, 44 of 44 in 15 families (bound 0.845); the nearest below it is
# "already in ours", 495 of 574 (bound 0.797).
# Round 11 (the same thirteen sets): a rule whose candidate is upstream's side splits by
# whether the file is upstream's (``UPSTREAM_FILE``), and three such variants earn Confirm;
# each family held out in turn, tiers from the others were right in 430 of 487 of the
# held-out family's hunks (88.3%).
RULE_TIERS: dict[str, Tier] = {
    "same change": Tier.CONFIRM,
    "already in theirs, by words" + UPSTREAM_FILE: Tier.CONFIRM,
    "upstream deleted, fork changed" + UPSTREAM_FILE: Tier.CONFIRM,
    "already in theirs" + UPSTREAM_FILE: Tier.CONFIRM,
}
# What each rule above Decide was measured at, said in its items' reasons.
TIER_FIGURES: dict[str, str] = {
    "same change": "People kept this in 44 of 44 such hunks of 15 projects' merges.",
    "already in theirs, by words" + UPSTREAM_FILE: "People committed upstream's version in "
    "117 of 125 such hunks (94%) of 29 projects' merges.",
    "upstream deleted, fork changed" + UPSTREAM_FILE: "People took upstream's deletion in "
    "245 of 274 such hunks (89%) of 34 projects' merges, and in 59% where the file is "
    "not upstream's.",
    "already in theirs" + UPSTREAM_FILE: "People committed upstream's version in 79 of 86 "
    "such hunks (92%) of 25 projects' merges.",
}

# The rules of a whole file one side deleted (modify/delete): a fork learns them per file
# conflict, not per hunk (``bot.engine.learn``).
FORK_DELETED, UPSTREAM_DELETED = "modify/delete, fork deleted", "modify/delete, upstream deleted"
WHOLE_FILE_RULES = (FORK_DELETED, UPSTREAM_DELETED)

def base_rule(rule: str) -> str:
    """The rule without its file qualifier (``UPSTREAM_FILE``)."""
    return rule.removesuffix(UPSTREAM_FILE)


def _both(*rules: str) -> frozenset[str]:
    """Rules with candidate theirs, each with its upstream's-file variant."""
    return frozenset(rules) | {r + UPSTREAM_FILE for r in rules}


# Rules whose candidate is upstream's side because the hunk itself shows the fork's edit
# is already in it (or is layout only): taking theirs loses nothing the fork meant, so a
# person may be told to answer `theirs`, though it is never a Decide's one-click default.
THEIRS_HOLDS_FORK = _both("already in theirs", "already in theirs, by words",
                          "already in theirs, by lines", "both deleted, upstream more",
                          "fork layout only")

# Rules whose candidate is the finer merge of both edits, clean, landing on upstream's text
# as it is: the fork's edit is in it, found by the merge itself rather than by counting
# lines. Offering it drops nothing, so it is a starting point like any other clean finer
# merge (the "when the finer merge is clean, propose it"). Replayed: right in
# 32/39 and 65/81 hunks of the training merges (by words), 21/25 and 74/101 of valid2's,
# 27/27 and 12/15 of valid3's; "already in ours" beside it: 70/88 and 72/103.
MERGED_INTO_THEIRS = _both("already in theirs", "already in theirs, by words")

# A conflict no finer merge resolves, in a file the fork owns: the fork made at least this
# part of the file's changed lines since base, and at least FORK_REGION_SHARE of the
# hunk's. Its candidate is ours; people kept it in FORK_FILE_FIGURE's share of such hunks.
FORK_FILE = "conflict, the fork's file"
FORK_FILE_SHARE = 0.7
FORK_REGION_SHARE = 0.4
FORK_FILE_FIGURE = ("people kept the fork's version in 67% of such hunks of 37 projects' "
                    "merges (6,901 of 10,310; half or more in 19 of the 36 projects with ten "
                    "or more), took upstream's in 10% and combined the two by hand in the "
                    "rest.")

# A figure in short, for a later item of a file whose first item says it in full: a
# review repeats none of them per hunk (``bot.engine.report.figures``). Keep each beside
# its figure's numbers.
FIGURE_GISTS: dict[str, str] = {
    FORK_FILE_FIGURE: "people kept the fork's version in 67% of such hunks",
    TIER_FIGURES["same change"]: "People kept this in 44 of 44 such hunks",
    TIER_FIGURES["already in theirs, by words" + UPSTREAM_FILE]: "People committed upstream's "
    "version in 94% of such hunks",
    TIER_FIGURES["upstream deleted, fork changed" + UPSTREAM_FILE]: "People took upstream's "
    "deletion in 89% of such hunks",
    TIER_FIGURES["already in theirs" + UPSTREAM_FILE]: "People committed upstream's version "
    "in 92% of such hunks",
}
# The figures of the whole-file proposals (modify/delete): the same for every such file of
# a sync, so a review says them in full once and points to that item after (figures.py).
FORK_DELETED_FIGURE = ("people kept it in 1,650 of 1,883 such files of 25 projects' merges "
                       "(88%), but in fewer than 8 in 10 in 6 of them (in one, 71 of 155)")
UPSTREAM_DELETED_FIGURE = ("People took upstream's deletion in 528 of 675 such files of 25 "
                           "projects' merges (78%)")
SYNC_FIGURE_GISTS: dict[str, str] = {
    FORK_DELETED_FIGURE: "people kept it in 88% of such files",
    UPSTREAM_DELETED_FIGURE: "People took upstream's deletion in 78% of such files",
}
# The counts of a file's changed lines that reasons in files that are one side's give
# (``_in_upstreams_file``, ``_contained``): the same for every hunk of the file.
FILE_COUNTS = re.compile(r": of the [\d,]+ lines changed in it since the two split, "
                         r"(?:the fork changed [\d,]+ and upstream|upstream changed [\d,]+ "
                         r"and the fork) [\d,]+\.")

# Files of settings and lists: one entry per line, and two edits on one line are two
# values rather than two halves of one expression; their word merges are a rule apart.
DATA_SUFFIXES = frozenset({".json", ".yml", ".yaml", ".toml", ".lock", ".ini", ".cfg",
                           ".properties", ".csv", ".sum", ".mod"})
DATA_NAMES = frozenset({"requirements.txt", "Gemfile.lock", "go.sum", "go.mod"})


def is_data_file(path: str) -> bool:
    """A file of settings or a list (JSON, YAML, TOML, a lock file...), not code or prose."""
    p = PurePosixPath(path)
    return p.suffix.lower() in DATA_SUFFIXES or p.name in DATA_NAMES or (
        p.name.startswith("requirements") and p.suffix == ".txt")


@dataclass(frozen=True)
class Hunk:
    """One conflict region and the lines around it in the merged file."""

    ours: str
    base: str
    theirs: str
    before: tuple[str, ...] = ()  # up to CONTEXT_LINES lines above the region, in order
    after: tuple[str, ...] = ()  # up to CONTEXT_LINES lines below it
    added_both: bool = False  # the file is new on both sides (add/add): base is empty
    path: str = ""  # the file's path: some rules are told apart by the kind of file
    changed: Changed | None = None  # what each side changed in the whole file, if known


@dataclass(frozen=True)
class Proposal:
    tier: Tier
    reason: str
    suggestion: str | None  # what one click commits: replaces the whole marker region
    question: str | None = None
    choices: tuple[str, ...] = ()
    rule: str = ""  # a stable name for the rule that decided, for tests and the benchmark
    side: str | None = None  # a whole-file proposal: the side it keeps ("ours", "theirs")
    candidate: str | None = None  # the rule's text, offered or not: what the replay measures
    learned: str = ""  # the fork's own habit that earned the tier (bot.engine.learn), if any


@dataclass(frozen=True)
class _Draft:
    """What a rule found: its name, why, and the text it would commit (None: nothing)."""

    rule: str
    reason: str
    candidate: str | None = None


def hunk_at(lines: list[str], region: MarkerRegion, *, added_both: bool = False,
            path: str = "", changed: Changed | None = None) -> Hunk:
    """The hunk of ``region`` in a merged file split with ``split_lines``."""
    start, end = region.start_line - 1, region.end_line
    return Hunk(region.ours, region.base or "", region.theirs,
                tuple(lines[max(0, start - CONTEXT_LINES):start]),
                tuple(lines[end:end + CONTEXT_LINES]), added_both, path, changed)


def propose_region(lines: list[str], region: MarkerRegion, *, added_both: bool = False,
                   path: str = "", changed: Changed | None = None) -> Proposal:
    """The proposal for one marker region of a merged file: what classify and the replay
    benchmark both call. ``changed`` is what each side changed in the whole file
    (``bot.engine.share.file_changes``), where the caller has its three versions."""
    return propose_hunk(hunk_at(lines, region, added_both=added_both, path=path,
                                changed=changed))


def propose(ours: str, base: str, theirs: str, path: str = "") -> Proposal:
    """The proposal for a hunk seen without its surroundings."""
    return propose_hunk(Hunk(ours, base, theirs, path=path))


def propose_hunk(h: Hunk) -> Proposal:
    """The first rule that applies, from the surest to a question, at its earned tier."""
    return _tiered(h, _in_upstreams_file(h, _draft(h)))


def _in_upstreams_file(h: Hunk, d: _Draft) -> _Draft:
    """The draft as its upstream's-file variant, where its candidate is upstream's side
    (and not also the fork's) and the fork made little of the file's changes."""
    c = h.changed
    if (d.candidate is None or d.candidate != h.theirs or d.candidate == h.ours or c is None
            or not c.total or c.fork_share >= UPSTREAM_FILE_SHARE):
        return d
    said = d.reason.rstrip().removesuffix(".")
    return _Draft(d.rule + UPSTREAM_FILE, f"{said}. This file is upstream's: of "
                  f"the {c.total:,} lines changed in it since the two split, upstream changed "
                  f"{c.theirs:,} and the fork {c.ours:,}.", d.candidate)


def _draft(h: Hunk) -> _Draft:
    if h.added_both and not h.base:
        return _Draft("add/add", "both sides added this file (add/add) and their versions "
                      "differ here; two new files are never glued together")
    if _rstripped(h.ours) == _rstripped(h.theirs):
        return _Draft("same change", "both sides made the same change (they differ only in "
                      "trailing whitespace); the proposal keeps ours", h.ours)
    if _squash(h.ours) == _squash(h.theirs):
        if _blank_lines_only(h.ours, h.theirs):
            return _Draft("same change, other blank lines", "both sides made the same change "
                          "but left different blank lines; the proposal keeps the fork's",
                          h.ours)
        return _Draft("same change, other layout", "both sides made the same change and "
                      "differ only in layout; the proposal keeps the fork's layout", h.ours)
    if _layout_only(h.base, h.theirs):
        return _Draft("upstream layout only", "upstream only changed the layout here "
                      "(whitespace, wrapping or blank lines) and the fork changed the content; "
                      "the proposal keeps the fork's edit as it is, without upstream's layout",
                      h.ours)
    if _layout_only(h.base, h.ours):
        if _blank_lines_only(h.base, h.ours):
            return _Draft("fork blank lines only", "the fork only added or removed blank lines "
                          "here and upstream changed the content: take upstream's edit, "
                          "keeping the fork's blank lines where they still fit", h.theirs)
        return _Draft("fork layout only", "the fork only changed the layout here (indentation "
                      "or spacing) and upstream changed the content: upstream's edit (theirs) "
                      "holds everything but the fork's layout", h.theirs)
    return _remerge(h)


def _tiered(h: Hunk, d: _Draft) -> Proposal:
    """The draft as a proposal at the tier its rule has earned (``RULE_TIERS``)."""
    tier = RULE_TIERS.get(d.rule, Tier.DECIDE)
    if d.candidate is not None and tier is not Tier.DECIDE:
        figure = TIER_FIGURES.get(d.rule)
        d = _Draft(d.rule, f"{d.reason} {figure}" if figure else d.reason, d.candidate)
        if tier is Tier.SETTLED:
            return Proposal(tier, d.reason, d.candidate, rule=d.rule, candidate=d.candidate)
        others = tuple(s for s, text in (("ours", h.ours), ("theirs", h.theirs))
                       if text != d.candidate)
        return Proposal(tier, d.reason, d.candidate, question="Commit this proposal?",
                        choices=("suggested", *others), rule=d.rule, candidate=d.candidate)
    return as_decide(d.rule, d.reason, d.candidate, h.ours, h.theirs)


def as_decide(rule: str, reason: str, candidate: str | None, ours: str,
              theirs: str) -> Proposal:
    """A rule's draft as a Decide: its candidate a starting point, unless it is upstream's
    side over the fork's (then a question that names it). ``_tiered`` makes every rule
    below its earned tier one; a fork's own history can make a rule above it one too
    (``bot.engine.learn``)."""
    if rule == "add/add":
        return Proposal(Tier.DECIDE, reason, None, question="Both sides added this file. "
                        "Keep the fork's version (ours) or take upstream's (theirs)?",
                        choices=DECIDE_CHOICES, rule=rule)
    if rule == NEAR_TWINS_RULE:  # the combination repeats them: measured, never offered
        return Proposal(Tier.DECIDE, reason, None, question="Both sides added nearly the "
                        "same lines. Keep the fork's (ours) or take upstream's (theirs)?",
                        choices=DECIDE_CHOICES, rule=rule, candidate=candidate)
    offered = candidate if candidate is not None and (
        candidate != theirs or candidate == ours or rule in MERGED_INTO_THEIRS) else None
    if offered is None:
        return Proposal(Tier.DECIDE, reason, None, question="Both sides changed these "
                        "lines. Keep ours, take upstream's (theirs), or combine them by hand?",
                        choices=DECIDE_CHOICES, rule=rule, candidate=candidate)
    return Proposal(Tier.DECIDE, reason, offered, question="Both sides changed these lines. "
                    "Start from the suggestion, keep ours, take upstream's (theirs), or "
                    "combine them by hand?", choices=STARTING_CHOICES, rule=rule,
                    candidate=candidate)


def propose_whole_file(deleted_by: str) -> Proposal:
    """The proposal for a conflict on a whole file that one side deleted (modify/delete).

    The candidate keeps the deletion. People kept the fork's in 1,650 of 1,883 files of
    the replayed merges and took upstream's in 528 of 675, but neither holds in every
    project (``RULE_TIERS``): both are Decide unless the fork's own history says more.
    """
    if deleted_by == "fork":
        rule, side = FORK_DELETED, "ours"
        reason = (f"The proposal keeps the fork's deletion: {FORK_DELETED_FIGURE}. Take "
                  "upstream's version instead if the fork only moved the file or still needs "
                  "upstream's change.")
        question = "Keep the fork's deletion (ours), or take upstream's version (theirs)?"
    else:
        rule, side = UPSTREAM_DELETED, "theirs"
        reason = (f"{UPSTREAM_DELETED_FIGURE}, too few in some projects for a promise: it "
                  "drops the fork's changes to the file, so move them elsewhere first if the "
                  "fork still needs them.")
        question = "Take upstream's deletion (theirs), or keep the fork's version (ours)?"
    tier = RULE_TIERS.get(rule, Tier.DECIDE)
    return Proposal(tier, reason, None, question=question,
                    choices=(side, "theirs" if side == "ours" else "ours"), rule=rule, side=side)


def _remerge(h: Hunk) -> _Draft:
    """Merge the region again, finer; propose the result if nothing conflicts."""
    res = fine_merge(h.base, h.ours, h.theirs, h.before, h.after)
    if res is None or (res.words and _duplicates(res.text, h)):
        return _contained(h)
    sides = _sentences(h)
    if res.text in (h.ours, h.theirs):
        return _already_in(h, res)
    twins = _near_twins(h, res.text)
    if twins is not None:
        return _Draft(NEAR_TWINS_RULE, f"both sides added nearly the same {twins}; keeping "
                      "both would repeat them, so there is no proposal: keep one side. "
                      f"{sides}", res.text)
    if res.beside:
        return _Draft("fork's lines beside upstream's deletion", "upstream deleted lines here "
                      "and the fork added lines among them; the proposal keeps the fork's "
                      "added lines and upstream's deletion (check they still make sense "
                      f"without it). {sides}", res.text)
    large = max(len(split_lines(h.ours)), len(split_lines(h.theirs))) > LARGE_LINES
    if res.both_added and not large:
        if res.both_added_sure and not res.words:
            return _Draft("keep both", f"both sides added lines here; the proposal keeps "
                          f"both, {res.both_added}. {sides}", res.text)
        return _Draft("keep both, order unsure", f"both sides added lines here; the proposal "
                      f"keeps both, {res.both_added} (the order is a guess; often only one "
                      f"side is kept). {sides}", res.text)
    how = "word by word" if res.words else "line by line"  # the rule's name: measured so
    said = _merged_how(h, res)
    if large:
        return _Draft("merge, long hunk", f"the two edits merge {said}, but the hunk is "
                      f"long: read the combination whole. {sides}", res.text)
    kind = ", data file" if res.words and is_data_file(h.path) else ""
    check = "" if kind else " (check one does not make the other obsolete)"
    return _Draft(f"merge {how}{kind}", f"the two edits merge {said}; the proposal combines "
                  f"them{check}. {sides}", res.text)


NEAR_TWINS_RULE = "both added nearly the same lines"
NEAR_TWINS = 0.8  # the two sides' added lines this alike (difflib's ratio) are one addition
NEAR_TWINS_CHARS = 20_000  # longer additions are not compared (the ratio is quadratic)


def _near_twins(h: Hunk, text: str) -> str | None:
    """What both sides added, where they added nearly the same lines (two or more each,
    alike at ``NEAR_TWINS`` but not equal) and ``text`` keeps both in full; else None.

    Replayed (round 14, with this rule): the combination was what people committed at 23
    of 233 such hunks of the thirteen training sets and 1 of 82 of valid11-14's; they
    kept one side (the fork's at 92 and 25, upstream's at 85 and 32).
    Two near copies of a block (the same ``RUN git clone`` of two URLs, one condition
    tested twice) break code, so they get no button."""
    ours, _ = _added_removed(h.base, h.ours)
    theirs, _ = _added_removed(h.base, h.theirs)
    if len(ours) < 2 or len(theirs) < 2 or ours == theirs:
        return None
    a, b = "".join(ours), "".join(theirs)
    if len(a) + len(b) > NEAR_TWINS_CHARS:
        return None
    alike = difflib.SequenceMatcher(None, a, b, autojunk=False)
    if alike.quick_ratio() < NEAR_TWINS or alike.ratio() < NEAR_TWINS:
        return None
    kept = _lines_of(text)
    if any(kept[ln] < n for ln, n in (_lines_of(a) + _lines_of(b)).items()):
        return None
    first = next(((x, y) for x, y in zip(ours, theirs, strict=False) if x != y), None)
    differ = ""
    if first is not None:
        mine, yours = changed_span(first[0], first[1])
        if quotable(mine, yours):
            differ = f" (the fork's has `{mine}` where upstream's has `{yours}`)"
    return f"{_n(max(len(ours), len(theirs)), 'line')}{differ}"


def _already_in(h: Hunk, res: Resolved) -> _Draft:
    """The finer merge is one side as it is: the other side's edit is part of it, or the
    other side did not change these lines at all (git put them in the conflict because
    they touch an edit)."""
    by = ", by words" if res.words else ""
    how = _merged_how(h, res)
    if res.text == h.ours:
        if h.theirs == h.base:
            return _Draft(f"already in ours{by}", "upstream did not change these lines; git "
                          "put them in the conflict next to upstream's edit. The proposal "
                          f"keeps the fork's version (ours): the fork {_what(h.base, h.ours)}.",
                          h.ours)
        return _Draft(f"already in ours{by}", "the fork's version already holds upstream's "
                      f"edit (the two edits merge {how} into it as it is), so the proposal "
                      f"keeps ours: {_holds(h.theirs, h.ours, 'upstream', 'the fork')} "
                      f"{_sentences(h)}", h.ours)
    if h.ours == h.base:
        return _Draft(f"already in theirs{by}", "the fork did not change these lines; git put "
                      "them in the conflict next to the fork's edit. The proposal takes "
                      f"upstream's version (theirs): upstream {_what(h.base, h.theirs)}.",
                      h.theirs)
    return _Draft(f"already in theirs{by}", "upstream's version already holds the fork's "
                  f"edit (the two edits merge {how} into it as it is), so the proposal is "
                  f"upstream's version: {_holds(h.ours, h.theirs, 'the fork', 'upstream')} "
                  f"{_sentences(h)}", h.theirs)


def _holds(held: str, holder: str, whose: str, other: str) -> str:
    """What a proposal that is one side as it is keeps, and the words it drops from the
    other side's lines (that side's edit did that)."""
    gone = dropped_words(held, holder)
    return (f"it holds {whose}'s edit and {other}'s"
            + (f"; {other}'s edit also removes {gone}, which {whose}'s version still has."
               if gone else "."))


def _merged_how(h: Hunk, res: Resolved) -> str:
    """How the two edits combine, as a reason says it: word by word only where both
    changed one line (a word merge of edits on lines apart is a merge line by line that
    git's alignment made conflict)."""
    return "word by word" if res.words and both_changed_a_line(h.base, h.ours, h.theirs) \
        else "line by line"


def _contained(h: Hunk) -> _Draft:
    """No finer merge: one side's lines may still hold the other's edit, or one side
    deleted the lines the other changed."""
    if _only_deletes(h.base, h.ours) and _only_deletes(h.base, h.theirs):
        # Both only deleted lines, one side more: its deletion holds the other's.
        if _sub_change(h.base, h.theirs, h.ours):
            return _Draft("both deleted, the fork more", "both sides only deleted lines here "
                          "and the fork deleted more; the proposal keeps the fork's deletion",
                          h.ours)
        if _sub_change(h.base, h.ours, h.theirs):
            return _Draft("both deleted, upstream more", "both sides only deleted lines here "
                          "and upstream deleted more: upstream's deletion (theirs) holds the "
                          "fork's", h.theirs)
    if _sub_change(h.base, h.theirs, h.ours):
        return _Draft("already in ours, by lines", "every line upstream added or removed here, "
                      "the fork added or removed too (counted line by line, not merged): the "
                      "fork's version may already hold upstream's change; the proposal keeps "
                      f"ours. {_sentences(h)}", h.ours)
    if _sub_change(h.base, h.ours, h.theirs):
        return _Draft("already in theirs, by lines", "every line the fork added or removed "
                      "here, upstream added or removed too (counted line by line, not merged): "
                      "upstream's version may already hold the fork's change; check it does, "
                      f"then take theirs. {_sentences(h)}", h.theirs)
    if not h.ours.strip() and h.base.strip():
        return _Draft("fork deleted, upstream changed", "the fork deleted these lines and "
                      "upstream changed them; the proposal keeps the fork's deletion "
                      "(upstream's change is not applied)", h.ours)
    if not h.theirs.strip() and h.base.strip():
        # The mirror case. Its candidate is upstream's side, so as a Decide it is never
        # offered as a one-click default; people took the deletion in 522 of 747 such hunks
        # of the thirteen sets (70%), and the recommendation says so. In upstream's files
        # (``UPSTREAM_FILE``) it is a Confirm: 245 of 274 (89%).
        added, removed = _added_removed(h.base, h.ours)
        if added and not removed:  # the fork kept the lines and added its own next to them
            return _Draft("upstream deleted, fork changed", "upstream deleted these lines "
                          f"and the fork added lines next to them. {_sentences(h)} Taking "
                          "upstream's deletion drops the fork's added lines too: keep them "
                          "only if the fork still needs them.", h.theirs)
        return _Draft("upstream deleted, fork changed", "upstream deleted these lines and "
                      f"the fork changed them. {_sentences(h)} Taking upstream's deletion "
                      "drops the fork's edit: keep it only if the fork still needs these "
                      "lines.", h.theirs)
    owned = _forks_file(h)
    if owned is not None:
        return _Draft(FORK_FILE, f"both sides changed these lines differently, in a file "
                      f"that is mostly the fork's: of the {owned.total:,} lines changed in "
                      f"it since the two split, the fork changed {owned.ours:,} and "
                      f"upstream {owned.theirs:,}. {_sentences(h)} The proposal keeps the "
                      f"fork's version, so upstream's change here is not applied: "
                      f"{FORK_FILE_FIGURE}", h.ours)
    if _rewrote(h.base, h.ours, h.theirs):
        fork, upstream = _what(h.base, h.ours), _what(h.base, h.theirs)
        return _Draft(UPSTREAM_REWROTE, "upstream rewrote the lines the fork edited: the "
                      f"fork's edit ({fork}) has no line to go on in upstream's version "
                      f"(upstream {upstream}). Take upstream's version and re-apply the fork's "
                      "edit to the new code if it still matters.", h.theirs)
    if _rewrote(h.base, h.theirs, h.ours):
        fork, upstream = _what(h.base, h.ours), _what(h.base, h.theirs)
        return _Draft(FORK_REWROTE, "the fork rewrote the lines upstream edited: upstream's "
                      f"edit ({upstream}) has no line to go on in the fork's version (the fork "
                      f"{fork}). The proposal keeps the fork's version; re-apply upstream's "
                      "edit to the fork's code if the fork needs it.", h.ours)
    return _Draft("conflict", f"both sides changed the same lines differently. {_sentences(h)}")


# One side rewrote the lines the other edited (``_rewrote``): the edit has no line left to
# go on. The candidate is the side that rewrote; both rules are Decide. Replayed (round 15,
# `--tiers`, the thirteen training sets), "upstream rewrote" took 660 of the 8,910 hunks
# that were "conflict": people committed upstream's version at 503 (76.2%; in upstream's
# files 371 of 446, 83.2%, bound 0.787, short of Confirm; elsewhere 132 of 214, 61.7%),
# the fork's at 45 (6.8%) and combined the two by hand at 112; upstream's at half or more
# in 21 of the 24 families with ten or more. So the PR body recommends `theirs`, by command
# (``report.groups.recommend``), never one click. The mirror: the fork's version at 95 of
# 140 (67.9%), upstream's at 15; a starting point. "conflict" keeps 8,110 hunks: upstream's
# side right at 31.2%, the fork's at 30.3% (34.2% and 29.1% before). valid11-14, replayed
# once after: upstream's version at 229 of 265 (86.4%; 92 of 99 in upstream's files), the
# fork's at 4; the mirror 37 of 55 (67.3%).
UPSTREAM_REWROTE, FORK_REWROTE = "upstream rewrote, fork changed", "fork rewrote, upstream changed"
REWROTE_SHARE = 0.5  # the edit changed at most this part of the lines the rewrite changed
REWROTE_ALIKE = 0.6  # a line this alike (difflib's ratio; get_close_matches's cutoff) is one
REWROTE_PAIRS = 2_000  # more pairs of lines than this are not compared: the rule stays out


def _rewrote(base: str, edit: str, rewrite: str) -> bool:
    """``rewrite`` replaced every line ``edit`` changed or deleted: none of those lines is
    in it, nor any line ``edit`` added, and none of the lines it added is like one of them
    (so the edit has nothing to go on there); it added lines of its own (it is not a
    deletion) and ``edit`` is small beside it (``REWROTE_SHARE``)."""
    if not rewrite.strip():
        return False
    b, e, r = _lines_of(base), _lines_of(edit), _lines_of(rewrite)
    gone, added, new = b - e, e - b, [ln.strip() for ln in r - b]
    if not gone or not new or any(r[ln] for ln in (*gone, *added)):
        return False
    if lines_changed(base, edit) > REWROTE_SHARE * lines_changed(base, rewrite):
        return False
    if len(gone) * len(new) > REWROTE_PAIRS:
        return False
    return not any(difflib.get_close_matches(ln.strip(), new, n=1, cutoff=REWROTE_ALIKE)
                   for ln in gone)


def _forks_file(h: Hunk) -> Changed | None:
    """The file's counts, if it is the fork's (it made most of the file's changes) and so
    is this edit (not a small touch beside a larger one of upstream's); else None."""
    if h.changed is None or h.changed.fork_share < FORK_FILE_SHARE:
        return None
    ours, theirs = changed_lines(h.base, h.ours), changed_lines(h.base, h.theirs)
    return h.changed if ours + theirs and ours / (ours + theirs) >= FORK_REGION_SHARE else None


def _squash(text: str) -> str:
    return _WS.sub("", text)


def _rstripped(text: str) -> list[str]:
    return [ln.rstrip() for ln in split_lines(text)]


def _layout_only(base: str, side: str) -> bool:
    """The side changed only whitespace: indentation, spacing, wrapping or blank lines."""
    return _squash(base) == _squash(side) and base != side


def _blank_lines_only(a: str, b: str) -> bool:
    """The two texts differ only in blank lines (lines that are kept are kept as they are)."""
    return [ln for ln in split_lines(a) if ln.strip()] == [ln for ln in split_lines(b)
                                                           if ln.strip()]


def _lines_of(text: str) -> Counter[str]:
    return Counter(ln.rstrip() for ln in split_lines(text) if ln.strip())


def _duplicates(text: str, h: Hunk) -> bool:
    """The merge holds a line more often than either side does: both sides added it, and
    the merge put it in twice."""
    ours, theirs = _lines_of(h.ours), _lines_of(h.theirs)
    return any(n > max(ours[ln], theirs[ln]) for ln, n in _lines_of(text).items()
               if ours[ln] or theirs[ln])


def _only_deletes(base: str, side: str) -> bool:
    """``side`` is ``base`` with some lines deleted and none added or changed."""
    b, s = _lines_of(base), _lines_of(side)
    return not (s - b) and s != b


def _sub_change(base: str, small: str, big: str) -> bool:
    """Every line ``small`` added to base, ``big`` added too, and every line it removed,
    ``big`` removed too: ``small``'s edit is already part of ``big``'s."""
    b, s, g = _lines_of(base), _lines_of(small), _lines_of(big)
    return not ((s - b) - (g - b)) and not ((b - s) - (b - g)) and s != b


def _sentences(h: Hunk) -> str:
    """One sentence per side: what its edit did to base."""
    return f"Upstream {_what(h.base, h.theirs)}; the fork {_what(h.base, h.ours)}."


def _added_removed(base: str, side: str) -> tuple[list[str], list[str]]:
    """The non-blank lines ``side`` has that ``base`` lacks, and those it lost."""
    b = [ln for ln in split_lines(base) if ln.strip()]
    s = [ln for ln in split_lines(side) if ln.strip()]
    return [ln for ln in s if ln not in b], [ln for ln in b if ln not in s]


def _diff(base: str, side: str) -> tuple[list[str], list[str]]:
    """The lines one side's diff from base inserts and deletes, blank ones included: the
    diff the review comment shows beside the sentence (``comments.change_diff``)."""
    old, new = split_lines(base), split_lines(side)
    inserted: list[str] = []
    deleted: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new).get_opcodes():
        if op != "equal":
            deleted += old[i1:i2]
            inserted += new[j1:j2]
    return inserted, deleted


def _counted(base: str, side: str) -> tuple[list[str], list[str], int, int]:
    """One side's diff as its sentence counts it: the non-blank lines it inserts and
    deletes (what kind of edit it is), and the counts the diff shows. A side that only
    adds lines apart from blank ones deleted is said to add: its count is its inserted
    lines, blank ones included, as the diff beside it shows them (and the mirror)."""
    inserted, deleted = _diff(base, side)
    ins = [ln for ln in inserted if ln.strip()]
    dels = [ln for ln in deleted if ln.strip()]
    return ins, dels, len(inserted), len(deleted)


def lines_changed(base: str, side: str) -> int:
    """How many lines one side's edit changed, as its sentence counts them: the count a
    recommendation repeats."""
    ins, dels, n_ins, n_del = _counted(base, side)
    if not dels:
        return n_ins
    return n_del if not ins else max(n_ins, n_del)


def _what(base: str, side: str) -> str:
    """What one side's edit did to base, counted as the diff beside it shows it."""
    if _layout_only(base, side):
        return "changed only the layout"
    ins, dels, n_ins, n_del = _counted(base, side)
    if ins and not dels:
        return f"added {_n(n_ins, 'line')}"
    if dels and not ins:
        return f"deleted {_n(n_del, 'line')}"
    if len(ins) == len(dels) == 1 and n_ins == n_del:
        was, now = dels[0].rstrip(), ins[0].rstrip()
        if _extends(was, now):  # a comment or an argument added at the end
            return f"added `{_short(now[len(was):])}` at the end of `{_end_of(was)}`"
        if _extends(now, was):
            return f"cut `{_short(was[len(now):])}` from the end of `{_end_of(now)}`"
        was, now = changed_span(dels[0], ins[0])
        return f"changed `{was}` to `{now}`"
    if n_ins == n_del:
        return f"changed {_n(n_ins, 'line')}"
    return f"replaced {_n(n_del, 'line')} with {n_ins}"


def _n(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def _short(line: str, limit: int = 60) -> str:
    text = line.strip().replace("`", "'")
    return text if len(text) <= limit else text[: limit - 1] + "…"


_WORD = re.compile(r"\w")


def _extends(line: str, longer: str) -> bool:
    """``longer`` is ``line`` with text added at its end, not inside its last word
    (``x = 10`` to ``x = 1000`` is a change of the number, not an addition)."""
    return (bool(line.strip()) and len(longer) > len(line) and longer.startswith(line)
            and not (_WORD.match(line[-1]) and _WORD.match(longer[len(line)])))


def _end_of(line: str, limit: int = 40) -> str:
    """The end of a line, which an edit at its end is found by: whole words, "…" before."""
    text = line.strip().replace("`", "'")
    if len(text) <= limit:
        return text
    cut = text[-limit:]
    space = cut.find(" ")
    return "…" + (cut[space + 1:] if 0 <= space < limit // 2 else cut)


_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")
SPAN_CONTEXT = 20  # characters of unchanged text kept on each side of a long line's change


def changed_span(old: str, new: str, limit: int = 60) -> tuple[str, str]:
    """One line's change as two short texts that show what differs.

    A line that fits is shown whole. A longer one keeps the words that changed, with a
    little of the unchanged text around them and "…" where text is left out, so that
    `f(a, b, c, d…` never reads as changed to the same `f(a, b, c, d…`.
    """
    a, b = old.strip(), new.strip()
    if len(a) <= limit and len(b) <= limit:
        return _short(a, limit), _short(b, limit)
    ta, tb = _TOKEN.findall(a), _TOKEN.findall(b)
    p = 0
    while p < min(len(ta), len(tb)) and ta[p] == tb[p]:
        p += 1
    q = 0
    while q < min(len(ta), len(tb)) - p and ta[-1 - q] == tb[-1 - q]:
        q += 1
    head, tail = ta[:p], ta[len(ta) - q:]
    # Whole words of context on each side: SPAN_CONTEXT characters, more where the change
    # itself is short (an inserted word needs its surroundings to be found).
    changed = max(len("".join(ta[p:len(ta) - q])), len("".join(tb[p:len(tb) - q])))
    room = max(SPAN_CONTEXT, (limit - changed) // 2)
    # At least one whole token on each side, however long: a change next to a long name
    # would otherwise read as changed from `…` to `…x`.
    i = len(head)
    while i > 0 and (len("".join(head[i - 1:])) <= room or not "".join(head[i:]).strip()):
        i -= 1
    j = 0
    while j < len(tail) and (len("".join(tail[:j + 1])) <= room or not "".join(tail[:j]).strip()):
        j += 1
    before, after = "".join(head[i:]).lstrip(), "".join(tail[:j]).rstrip()
    lead = "…" if i or len(before) > room else ""
    trail = "…" if j < len(tail) or len(after) > room else ""
    before, after = before[-room:], after[:room]
    middle = max(8, limit - len(before) - len(after) - 2)

    def show(tokens: list[str]) -> str:
        mid = "".join(tokens[p:len(tokens) - q])
        mid = mid if len(mid) <= middle else mid[: middle - 1] + "…"
        return (lead + before + mid + after + trail).replace("`", "'")

    return show(ta), show(tb)
