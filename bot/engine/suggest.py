"""Proposals for one conflict hunk: what to commit, how sure we are, and why. Pure.

The tiers are promises, measured rule by rule on real merges
(``bench/replay_suggestions.py``, see ``bench/README.md``):

- **Settled**: a careful person would commit exactly this text.
- **Confirm**: a proposal that is what people commit at least eight times in ten for
  hunks of its kind; one sentence per side says what each edit did.
- **Decide**: a person must judge. There may be a starting point that keeps both edits
  (or the fork's side), but never upstream's text offered as the one-click default,
  since committing it would silently drop the fork's edit.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import PurePosixPath

from bot.engine.markers import MarkerRegion, split_lines
from bot.engine.model import Tier
from bot.engine.remerge import Resolved, fine_merge

_WS = re.compile(r"\s+")
CONTEXT_LINES = 8  # lines of the merged file on each side of a region that rules may read
LARGE_LINES = 8  # a side longer than this is read whole: its combination is not Confirm
DECIDE_CHOICES = ("ours", "theirs")
STARTING_CHOICES = ("suggested", "ours", "theirs")

# Files of settings and lists, where a word merge of two edits was right nine times in
# ten on real merges (against six in code and five in prose): one entry per line, and
# two edits on one line are two values rather than two halves of one expression.
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
    path: str = ""  # the file's path: some rules are only sure in data files


@dataclass(frozen=True)
class Proposal:
    tier: Tier
    reason: str
    suggestion: str | None  # replacement for the whole marker region
    question: str | None = None
    choices: tuple[str, ...] = ()
    rule: str = ""  # a stable name for the rule that decided, for tests and the benchmark
    side: str | None = None  # a whole-file proposal: the side it keeps ("ours", "theirs")


def hunk_at(lines: list[str], region: MarkerRegion, *, added_both: bool = False,
            path: str = "") -> Hunk:
    """The hunk of ``region`` in a merged file split with ``split_lines``."""
    start, end = region.start_line - 1, region.end_line
    return Hunk(region.ours, region.base or "", region.theirs,
                tuple(lines[max(0, start - CONTEXT_LINES):start]),
                tuple(lines[end:end + CONTEXT_LINES]), added_both, path)


def propose_region(lines: list[str], region: MarkerRegion, *, added_both: bool = False,
                   path: str = "") -> Proposal:
    """The proposal for one marker region of a merged file: what classify and the replay
    benchmark both call."""
    return propose_hunk(hunk_at(lines, region, added_both=added_both, path=path))


def propose(ours: str, base: str, theirs: str, path: str = "") -> Proposal:
    """The proposal for a hunk seen without its surroundings."""
    return propose_hunk(Hunk(ours, base, theirs, path=path))


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


def propose_hunk(h: Hunk) -> Proposal:
    """Pick the first rule that applies, from the surest to a question."""
    if h.added_both and not h.base:
        return _add_add()
    if _rstripped(h.ours) == _rstripped(h.theirs):
        return Proposal(Tier.SETTLED, "both sides made the same change (they differ only in "
                        "trailing whitespace); keeps ours", h.ours, rule="same change")
    if _squash(h.ours) == _squash(h.theirs):
        return _same_change(h)
    if _layout_only(h.base, h.theirs):
        return Proposal(Tier.CONFIRM, "upstream only changed the layout here (whitespace, "
                        "wrapping or blank lines) and the fork changed the content; keeps "
                        "the fork's edit as it is, without upstream's layout change",
                        h.ours, question="Keep the fork's edit, without upstream's layout "
                        "change?", choices=("suggested", "theirs"), rule="upstream layout only")
    if _layout_only(h.base, h.ours):
        return _fork_layout(h)
    return _remerge(h)


def _same_change(h: Hunk) -> Proposal:
    # Measured: where the two layouts differ inside lines, people keep the fork's; where
    # they differ in blank lines only, they follow neither side reliably.
    if _blank_lines_only(h.ours, h.theirs):
        return _decide("both sides made the same change but left different blank lines; "
                       "the starting point keeps the fork's", "same change, other blank lines",
                       h.ours)
    return Proposal(Tier.CONFIRM, "both sides made the same change and differ only in "
                    "layout; keeps the fork's layout (ours)", h.ours,
                    question="Keep the fork's layout of this change?",
                    choices=("suggested", "theirs"), rule="same change, other layout")


def _fork_layout(h: Hunk) -> Proposal:
    if _blank_lines_only(h.base, h.ours):
        # Measured: people often keep the fork's blank-line edit here too, in ways no rule
        # predicts; and upstream's side is never a Decide's default.
        return _decide("the fork only added or removed blank lines here and upstream changed "
                       "the content: take upstream's edit, keeping the fork's blank lines "
                       "where they still fit", "fork blank lines only")
    return Proposal(Tier.CONFIRM, "the fork only changed the layout here (indentation or "
                    "spacing) and upstream changed the content; takes upstream's edit as it "
                    "is, without the fork's layout change", h.theirs,
                    question="Take upstream's edit, without the fork's layout change?",
                    choices=("suggested", "ours"), rule="fork layout only")


def propose_whole_file(deleted_by: str) -> Proposal:
    """The proposal for a conflict on a whole file that one side deleted (modify/delete).

    Measured on real merges: people keep the deletion nine times in ten, whichever side
    made it (a file upstream deletes is usually replaced or moved, and a file the fork
    deletes is one it does not want).
    """
    if deleted_by == "fork":
        return Proposal(Tier.CONFIRM, "Keeps the fork's deletion; upstream's change to the "
                        "file is not applied.", None,
                        question="Keep the fork's deletion of this file?",
                        choices=("ours", "theirs"), rule="modify/delete, fork deleted",
                        side="ours")
    return Proposal(Tier.CONFIRM, "Takes upstream's deletion, which drops the fork's changes "
                    "to the file: move them elsewhere first if the fork still needs them.",
                    None, question="Take upstream's deletion of this file?",
                    choices=("theirs", "ours"), rule="modify/delete, upstream deleted",
                    side="theirs")


def _add_add() -> Proposal:
    return Proposal(
        Tier.DECIDE, "both sides added this file (add/add) and their versions differ here; "
                     "two new files are never glued together",
        None,
        question="Both sides added this file. Keep the fork's version (ours) or take "
                 "upstream's (theirs)?",
        choices=DECIDE_CHOICES, rule="add/add")


def _decide(reason: str, rule: str, suggestion: str | None = None) -> Proposal:
    """A question; ``suggestion`` is a starting point, never upstream's side."""
    if suggestion is None:
        return Proposal(Tier.DECIDE, reason, None,
                        question="Both sides changed these lines. Keep ours, take "
                                 "upstream's (theirs), or combine them by hand?",
                        choices=DECIDE_CHOICES, rule=rule)
    return Proposal(Tier.DECIDE, reason, suggestion,
                    question="Both sides changed these lines. Start from the suggestion, "
                             "keep ours, take upstream's (theirs), or combine them by hand?",
                    choices=STARTING_CHOICES, rule=rule)


def _remerge(h: Hunk) -> Proposal:
    """Merge the region again, finer; propose the result if nothing conflicts."""
    res = fine_merge(h.base, h.ours, h.theirs, h.before, h.after)
    if res is None or (res.words and _duplicates(res.text, h)):
        return _contained(h)
    sides = _sentences(h)
    if res.text in (h.ours, h.theirs):
        return _already_in(h, res)
    if res.beside:
        # Measured: people keep the fork's lines and upstream's deletion about half the
        # time; as often they drop both, or keep the deleted lines.
        return _decide("upstream deleted lines here and the fork added lines among them; "
                       "the starting point keeps the fork's added lines and upstream's "
                       f"deletion (check they still make sense without it). {sides}",
                       "fork's lines beside upstream's deletion", res.text)
    large = max(len(split_lines(h.ours)), len(split_lines(h.theirs))) > LARGE_LINES
    if res.both_added and not large:
        # Measured: with the order read from the surroundings people keep both as proposed
        # about as often as other Confirm items; with the order guessed, far less often.
        if res.both_added_sure and not res.words:
            return Proposal(Tier.CONFIRM, f"both sides added lines here; keeps both, "
                            f"{res.both_added}. {sides}", res.text,
                            question="Keep both additions, in this order?",
                            choices=STARTING_CHOICES, rule="keep both")
        return _decide(f"both sides added lines here; the starting point keeps both, "
                       f"{res.both_added} (the order is a guess; often only one side is "
                       f"kept). {sides}", "keep both, order unsure", res.text)
    how = "word by word" if res.words else "line by line"
    if large:
        return _decide(f"the two edits merge {how}, but the hunk is long: read the "
                       f"combination whole. {sides}", "merge, long hunk", res.text)
    if res.words and not is_data_file(h.path):
        # Measured: in code and prose, people commit the word merge of two edits six times
        # in ten; often one edit was made obsolete by the other, which no merge can see.
        return _decide(f"the two edits merge {how}; the starting point combines them, but "
                       f"check one does not make the other obsolete. {sides}",
                       "merge word by word", res.text)
    kind = ", data file" if res.words else ""
    return Proposal(Tier.CONFIRM, f"the two edits merge {how}. {sides}", res.text,
                    question="Commit both edits combined?",
                    choices=STARTING_CHOICES, rule=f"merge {how}{kind}")


def _already_in(h: Hunk, res: Resolved) -> Proposal:
    """The finer merge is one side as it is: the other side's edit is part of it."""
    # Measured: sure when one side's added block holds the other's (kept whole by keep
    # both); a word merge that lands on one side is only as reliable as other word merges.
    if res.text == h.ours:
        if not res.words:
            return Proposal(Tier.CONFIRM, "upstream's change is already in the fork's "
                            "version; keeps ours", h.ours, question="Keep the fork's version?",
                            choices=("suggested", "theirs"), rule="already in ours")
        return _decide("upstream's change looks already made in the fork's version; the "
                       "starting point keeps ours", "already in ours, by words", h.ours)
    if not res.words:
        return Proposal(Tier.CONFIRM, "the fork's change is already in upstream's version; "
                        "takes theirs", h.theirs, question="Take upstream's version?",
                        choices=("suggested", "ours"), rule="already in theirs")
    return _decide("the fork's change looks already made in upstream's version: check it "
                   "is, then take theirs", "already in theirs, by words")


def _contained(h: Hunk) -> Proposal:
    """No finer merge: one side's lines may still hold the other's edit, or one side
    deleted the lines the other changed."""
    if _only_deletes(h.base, h.ours) and _only_deletes(h.base, h.theirs):
        # Both only deleted lines, one side more: its deletion holds the other's.
        if _sub_change(h.base, h.theirs, h.ours):
            return Proposal(Tier.CONFIRM, "both sides only deleted lines here and the fork "
                            "deleted more; keeps the fork's deletion", h.ours,
                            question="Keep the fork's larger deletion?",
                            choices=("suggested", "theirs"), rule="both deleted, one more")
        if _sub_change(h.base, h.ours, h.theirs):
            return Proposal(Tier.CONFIRM, "both sides only deleted lines here and upstream "
                            "deleted more; takes upstream's deletion", h.theirs,
                            question="Take upstream's larger deletion?",
                            choices=("suggested", "ours"), rule="both deleted, one more")
    if _sub_change(h.base, h.theirs, h.ours):
        return _decide("every line upstream added or removed here, the fork added or removed "
                       "too: upstream's change looks already made in the fork's version; the "
                       "starting point keeps ours", "already in ours, by lines", h.ours)
    if _sub_change(h.base, h.ours, h.theirs):
        return _decide("every line the fork added or removed here, upstream added or removed "
                       "too: the fork's change looks already made in upstream's version; "
                       "check it is, then take theirs", "already in theirs, by lines")
    if not h.ours.strip() and h.base.strip():
        # Measured: people keep the fork's deletion about half the time.
        return _decide("the fork deleted these lines and upstream changed them; the starting "
                       "point keeps the fork's deletion (upstream's change is not applied)",
                       "fork deleted, upstream changed", h.ours)
    return _decide("both sides changed the same lines differently", "conflict")


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


def _what(base: str, side: str) -> str:
    b = [ln for ln in split_lines(base) if ln.strip()]
    s = [ln for ln in split_lines(side) if ln.strip()]
    added = [ln for ln in s if ln not in b]
    removed = [ln for ln in b if ln not in s]
    if _layout_only(base, side):
        return "changed only the layout"
    if added and not removed:
        return f"added {_n(len(added), 'line')}"
    if removed and not added:
        return f"deleted {_n(len(removed), 'line')}"
    if len(added) == len(removed) == 1:
        return f"changed `{_short(removed[0])}` to `{_short(added[0])}`"
    return f"changed {_n(max(len(added), len(removed)), 'line')}"


def _n(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def _short(line: str, limit: int = 60) -> str:
    text = line.strip().replace("`", "'")
    return text if len(text) <= limit else text[: limit - 1] + "…"
