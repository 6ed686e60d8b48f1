"""Proposals for one conflict hunk: what to commit, how sure we are, and why. Pure.

The tiers are promises, measured on real merges (``bench/replay_suggestions.py``):

- **Settled**: a careful person would commit exactly this text.
- **Confirm**: a proposal that keeps both sides' edits and is usually what people
  commit; one sentence per side says what each edit did.
- **Decide**: a person must judge. There may be a starting point that keeps both edits,
  but never one side's text offered as the one-click default, since committing it
  would silently drop the other side's edit.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from bot.engine.keepboth import keep_both
from bot.engine.markers import MarkerRegion, split_lines
from bot.engine.model import Tier
from bot.engine.remerge import Chunk, merge_lines, merge_words

_WS = re.compile(r"\s+")
CONTEXT_LINES = 8  # lines of the merged file on each side of a region that rules may read
LARGE_LINES = 8  # a side longer than this is read whole: its combination is not Confirm
DECIDE_CHOICES = ("ours", "theirs")


@dataclass(frozen=True)
class Hunk:
    """One conflict region and the lines around it in the merged file."""

    ours: str
    base: str
    theirs: str
    before: tuple[str, ...] = ()  # up to CONTEXT_LINES lines above the region, in order
    after: tuple[str, ...] = ()  # up to CONTEXT_LINES lines below it
    added_both: bool = False  # the file is new on both sides (add/add): base is empty


@dataclass(frozen=True)
class Proposal:
    tier: Tier
    reason: str
    suggestion: str | None  # replacement for the whole marker region
    question: str | None = None
    choices: tuple[str, ...] = ()
    rule: str = ""  # a stable name for the rule that decided, for tests and the benchmark


def hunk_at(lines: list[str], region: MarkerRegion, *, added_both: bool = False) -> Hunk:
    """The hunk of ``region`` in a merged file split with ``split_lines``."""
    start, end = region.start_line - 1, region.end_line
    return Hunk(region.ours, region.base or "", region.theirs,
                tuple(lines[max(0, start - CONTEXT_LINES):start]),
                tuple(lines[end:end + CONTEXT_LINES]), added_both)


def propose_region(lines: list[str], region: MarkerRegion, *,
                   added_both: bool = False) -> Proposal:
    """The proposal for one marker region of a merged file: what classify and the replay
    benchmark both call."""
    return propose_hunk(hunk_at(lines, region, added_both=added_both))


def propose(ours: str, base: str, theirs: str) -> Proposal:
    """The proposal for a hunk seen without its surroundings."""
    return propose_hunk(Hunk(ours, base, theirs))


def _squash(text: str) -> str:
    return _WS.sub("", text)


def _rstripped(text: str) -> list[str]:
    return [ln.rstrip() for ln in split_lines(text)]


def _layout_only(base: str, side: str) -> bool:
    """The side changed only whitespace: indentation, spacing, wrapping or blank lines."""
    return _squash(base) == _squash(side) and base != side


def propose_hunk(h: Hunk) -> Proposal:
    """Pick the first rule that applies, from the surest to a question."""
    if h.added_both and not h.base:
        return _add_add()
    if _rstripped(h.ours) == _rstripped(h.theirs):
        return Proposal(Tier.SETTLED, "both sides made the same change (they differ only in "
                        "trailing whitespace); keeps ours", h.ours, rule="same change")
    if _squash(h.ours) == _squash(h.theirs):
        return Proposal(Tier.CONFIRM, "both sides made the same change and differ only in "
                        "layout; keeps the fork's layout (ours)", h.ours,
                        question="Keep the fork's layout of this change?",
                        choices=("suggested", "theirs"), rule="same change, other layout")
    if _layout_only(h.base, h.theirs):
        return Proposal(Tier.CONFIRM, "upstream only changed the layout here (whitespace, "
                        "wrapping or blank lines) and the fork changed the content; keeps "
                        "the fork's edit as it is, without upstream's layout change",
                        h.ours, question="Keep the fork's edit, without upstream's layout "
                        "change?", choices=("suggested", "theirs"), rule="upstream layout only")
    if _layout_only(h.base, h.ours):
        return Proposal(Tier.CONFIRM, "the fork only changed the layout here (whitespace, "
                        "wrapping or blank lines) and upstream changed the content; takes "
                        "upstream's edit as it is, without the fork's layout change",
                        h.theirs, question="Take upstream's edit, without the fork's layout "
                        "change?", choices=("suggested", "ours"), rule="fork layout only")
    return _remerge(h)


def _add_add() -> Proposal:
    return Proposal(
        Tier.DECIDE, "both sides added this file (add/add) and their versions differ here; "
                     "two new files are never glued together",
        None,
        question="Both sides added this file. Keep the fork's version (ours) or take "
                 "upstream's (theirs)?",
        choices=DECIDE_CHOICES, rule="add/add")


def _decide(reason: str, rule: str, suggestion: str | None = None) -> Proposal:
    return Proposal(Tier.DECIDE, reason, suggestion,
                    question="Both sides changed these lines. Keep ours, take upstream's "
                             "(theirs), or combine them by hand?",
                    choices=DECIDE_CHOICES, rule=rule)


@dataclass
class _Resolved:
    text: str
    words: bool = False  # some chunk needed the word-level merge
    both_added: str = ""  # how a keep-both was ordered, if one was needed
    both_added_sure: bool = True


def _remerge(h: Hunk) -> Proposal:
    """Merge the region again, finer; propose the result if nothing conflicts."""
    res = _fine_merge(h)
    if res is None or (res.words and _duplicates(res.text, h)):
        # No finer merge; one side's edit may still be part of the other's.
        if _sub_change(h.base, h.theirs, h.ours):
            res = _Resolved(h.ours)
        elif _sub_change(h.base, h.ours, h.theirs):
            res = _Resolved(h.theirs)
        else:
            return _decide("both sides changed the same lines differently", "conflict")
    if res.text == h.ours:
        return Proposal(Tier.CONFIRM, "upstream's change is already in the fork's version; "
                        "keeps ours", h.ours, question="Keep the fork's version?",
                        choices=("suggested", "theirs"), rule="already in ours")
    if res.text == h.theirs:
        return Proposal(Tier.CONFIRM, "the fork's change is already in upstream's version; "
                        "takes theirs", h.theirs, question="Take upstream's version?",
                        choices=("suggested", "ours"), rule="already in theirs")
    sides = _sentences(h)
    large = max(len(split_lines(h.ours)), len(split_lines(h.theirs))) > LARGE_LINES
    if res.both_added and not large:
        # Measured: with the order read from the surroundings people keep both as proposed
        # about as often as other Confirm items; with the order guessed, far less often.
        sure = res.both_added_sure and not res.words
        return Proposal(Tier.CONFIRM if sure else Tier.DECIDE,
                        f"both sides added lines here; keeps both, {res.both_added}"
                        + ("" if sure else " (the order is a guess; often only one side "
                           "is kept)") + f". {sides}", res.text,
                        question="Keep both additions, in this order?" if sure else
                        "Both sides added lines here. Keep both (the suggestion), only ours, "
                        "only upstream's, or combine them by hand?",
                        choices=("suggested", "ours", "theirs"),
                        rule="keep both" if sure else "keep both, order unsure")
    how = "word by word" if res.words else "line by line"
    if large:
        return _decide(f"the two edits merge {how}, but the hunk is long: read the "
                       f"combination whole. {sides}", "merge, long hunk", res.text)
    return Proposal(Tier.CONFIRM, f"the two edits merge {how}. {sides}", res.text,
                    question="Commit both edits combined?",
                    choices=("suggested", "ours", "theirs"), rule=f"merge {how}")


def _fine_merge(h: Hunk) -> _Resolved | None:
    res = _Resolved("")
    chunks = merge_lines(h.base, h.ours, h.theirs)
    for i, chunk in enumerate(chunks):
        if not chunk.conflict:
            res.text += chunk.text
            continue
        after_text = "".join(c.text if not c.conflict else c.ours for c in chunks[i + 1:])
        if not _resolve(chunk, res, list(h.before) + split_lines(res.text),
                        split_lines(after_text) + list(h.after)):
            return None
    return res


def _lines_of(text: str) -> Counter[str]:
    return Counter(ln.rstrip() for ln in split_lines(text) if ln.strip())


def _duplicates(text: str, h: Hunk) -> bool:
    """The merge holds a line more often than either side does: both sides added it, and
    the merge put it in twice."""
    ours, theirs = _lines_of(h.ours), _lines_of(h.theirs)
    return any(n > max(ours[ln], theirs[ln]) for ln, n in _lines_of(text).items()
               if ours[ln] or theirs[ln])


def _sub_change(base: str, small: str, big: str) -> bool:
    """Every line ``small`` added to base, ``big`` added too, and every line it removed,
    ``big`` removed too: ``small``'s edit is already part of ``big``'s."""
    b, s, g = _lines_of(base), _lines_of(small), _lines_of(big)
    return not ((s - b) - (g - b)) and not ((b - s) - (b - g)) and s != b


def _resolve(chunk: Chunk, res: _Resolved, before: list[str], after: list[str]) -> bool:
    """Resolve one chunk that still conflicts line by line; False if it cannot be."""
    if not chunk.base.strip() and chunk.ours.strip() and chunk.theirs.strip():
        both = keep_both(chunk.ours, chunk.theirs, before, after)
        if both is None:
            return False
        res.text += both.text
        res.both_added = both.how
        res.both_added_sure = res.both_added_sure and both.sure
        return True
    words = merge_words(chunk.base, chunk.ours, chunk.theirs)
    if words is None:
        return False
    res.text += words
    res.words = True
    return True


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
