"""Flagged lines as review items: one question per flag and file, not one per line. Pure.

A ``flags`` entry says that upstream lines matching it always need a person. The lines
one upstream change adds for one flag (five speculative-decoding options in one script)
get one answer: keep, adapt or drop them. So a file gets one question per flag, listing
its lines. A flagged line inside a conflict region is that region's decision: the
conflict item says so, and can no longer be confirmed in one click.

Each question gives the lines' numbers in the merged file. Where a flagged line names a
command-line option, the fork's files were searched for it, case and ``-``/``_`` aside
(``bot.engine.spelling``; fork main's versions of the files upstream changed): a flag
saying "no vLLM equivalent" is moot where the fork already passes the option, and a
prose rule's ``--vLLM-ep-size`` is the fork's ``--vllm-ep-size`` misspelled. The
question then says how the fork writes it, with a count and an example, and proposes
that spelling (``keep`` when the lines already have it, ``adapt`` when not).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from bot.engine.config import Flag
from bot.engine.model import ItemKind, ReviewItem, Tier
from bot.engine.spelling import Uses, option_key
from bot.engine.text import number_runs

SHOWN = 3  # flagged lines (or options) a sentence quotes; the item's ``theirs`` has them all
FLAG_CHOICES = ("keep", "adapt", "drop")  # the answers a flag question offers


@dataclass(frozen=True)
class ForkUse:
    """How fork main writes a flagged line's option: the spelling the most files use."""

    text: str
    files: int
    path: str  # one file that writes it: the one nearest the flagged file
    line: int
    others: tuple[tuple[str, int], ...] = ()  # the fork's other spellings, with their files

    def to_json(self) -> dict[str, Any]:
        return {"spelling": self.text, "files": self.files, "path": self.path,
                "line": self.line, "others": [list(o) for o in self.others]}


def fork_use(uses: list[Uses], written: str, near: str) -> ForkUse | None:
    """The fork's spelling of an option written ``written`` in the file ``near``: the one
    the most files use (as written, on a tie), with the example closest to ``near``."""
    if not uses:
        return None
    best = max(uses, key=lambda u: (u.files, u.text == written))
    folder, _, name = near.rpartition("/")

    def closeness(place: tuple[str, int]) -> tuple[int, float]:
        """Folders in common with ``near``, then how alike the two names are."""
        where, _, called = place[0].rpartition("/")
        shared = 0
        for a, b in zip(where.split("/"), folder.split("/"), strict=False):
            if a != b:
                break
            shared += 1
        return shared, difflib.SequenceMatcher(None, called, name).ratio()
    path, line = max(best.places, key=closeness)
    return ForkUse(best.text, best.files, path, line,
                   tuple((u.text, u.files) for u in uses if u is not best))


@dataclass(frozen=True)
class Hit:
    """One upstream-added line that matched a flag, and where it sits in the merged file."""

    flag: Flag
    line: str  # as upstream wrote it (the flag matched this text)
    merged: str  # as the fork's file holds it (translated), without its line end
    anchor: int | None  # 1-based line in the merged file, None where it was not found
    option: str | None = None  # the command-line option it names, as ``merged`` writes it
    fork: ForkUse | None = None  # how fork main writes that option, if it does

    @property
    def proposed(self) -> str | None:
        """The line with the fork's spelling of its option, where that differs."""
        if self.option is None or self.fork is None or self.fork.text == self.option:
            return None
        return self.merged.replace(self.option, self.fork.text, 1)


def add_flag_items(items: list[ReviewItem], path: str, upstream_path: str,
                   hits: list[Hit], *, searched: int = 0) -> None:
    """Fold hits inside conflict regions into those items; one flag item per flag for the rest.

    ``searched``: how many fork files were searched for the hits' options (their ``fork``
    says what was found; 0: no search, nothing is said of the fork).
    """
    inside: dict[tuple[int, str], tuple[ReviewItem, list[Hit]]] = {}
    rest: dict[str, list[Hit]] = {}
    for hit in hits:
        region = _region_at(items, hit.anchor)
        if region is None:
            rest.setdefault(hit.flag.pattern, []).append(hit)
        else:
            inside.setdefault((id(region), hit.flag.pattern), (region, []))[1].append(hit)
    for region, group in inside.values():
        _fold(region, group, searched)
    for group in rest.values():
        flag = group[0].flag
        anchor = next((h.anchor for h in group if h.anchor is not None), None)
        items.append(ReviewItem(
            id="", kind=ItemKind.FLAG, path=path, upstream_path=upstream_path,
            tier=Tier.DECIDE, reason=f"flag `{flag.pattern}`: {flag.say}",
            theirs="".join(h.merged + "\n" for h in group),
            start_line=anchor, end_line=anchor,
            question=_question(group, searched),
            choices=list(FLAG_CHOICES),
            flagged=_flagged(group, searched),
        ))


def line_list(numbers: list[int]) -> str:
    """``L154 and L167–170``: line numbers as runs."""
    return _and([f"L{a}" if a == b else f"L{a}–{b}" for a, b in number_runs(numbers)])


def _code(text: str) -> str:
    """A Markdown code span for ``text``, whatever backticks it holds."""
    return f"`{text}`" if "`" not in text else f"`` {text} ``"


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _where(group: list[Hit]) -> str:
    """Where the lines are in the merged file: ``at L154 and L167–170``."""
    found = [h.anchor for h in group if h.anchor is not None]
    lost = len(group) - len(found)
    where = f"at {line_list(found)}" if found else ""
    if lost:
        where += (", " if where else "") + \
            f"{lost} of {'it' if len(group) == 1 else 'them'} not found in the merged file"
    return where


def _question(group: list[Hit], searched: int) -> str:
    flag, n = group[0].flag, len(group)
    said = flag.say.rstrip().rstrip(".")
    first = _quoted(group[:1])
    lead = (f"Upstream added {first} {_where(group)}: {said}." if n == 1 else
            f"Upstream added {n} flagged lines {_where(group)}, e.g. {first}: {said}.")
    facts, verdict = _fork_facts(group, searched)
    if verdict == "keep":
        ask = "Keep it as it is?" if n == 1 else f"Keep these {n} lines as they are?"
    elif verdict == "adapt":
        ask = "Change it to the fork's spelling?" if n == 1 else \
            "Change them to the fork's spelling?"
    else:
        ask = "Keep it as it is, adapt it, or drop it?" if n == 1 else \
            f"Keep these {n} lines as they are, adapt them, or drop them?"
    return " ".join(p for p in (lead, facts, ask) if p)


# The files searched: fork main's versions of those upstream changed in the window.
SEARCHED = "the files upstream changed"


def where_used(fork: dict[str, Any]) -> str:
    """``12 of the files upstream changed, e.g. `run.sh` L116``: a fork use, as JSON."""
    return f"{fork['files']} of {SEARCHED}, e.g. {_code(str(fork['path']))} L{fork['line']}"


def _use(fork: ForkUse) -> str:
    return f"`{fork.text}` ({where_used(fork.to_json())})"


def _options(group: list[Hit]) -> dict[str, Hit]:
    """The group's options, each with its first hit, in line order."""
    out: dict[str, Hit] = {}
    for h in group:
        if h.option is not None:
            out.setdefault(option_key(h.option), h)
    return out


def _fork_facts(group: list[Hit], searched: int) -> tuple[str, str | None]:
    """What fork main says of the group's options, and the answer it points to: ``keep``
    (the fork writes them all as here), ``adapt`` (it has them all, some spelled
    otherwise), or None (some it lacks, or it was not searched)."""
    options = _options(group)
    if not searched or not options:
        return "", None
    found = [h for h in options.values() if h.fork is not None]
    other = [h for h in found if h.proposed is not None]
    lacks = [h for h in options.values() if h.fork is None]
    named = len(options) == 1
    if not found:
        return (f"None of {SEARCHED} ({searched} on fork main) writes "
                f"{'it' if named else 'any of these options'} either."), None
    example = other[0] if other else found[0]
    assert example.fork is not None
    use = _use(example.fork)
    plain = all(h.option is not None for h in group)
    if not lacks and not other:
        said = (f"But the fork already uses it as written: {use}." if named else
                f"But the fork already uses all {len(options)} options as written, "
                f"e.g. {use}.")
        return said, "keep" if plain else None
    if not lacks:
        if named:
            said = f"But the fork spells it {use}."
        else:
            how = "spelled otherwise" if len(other) == len(options) else \
                f"{len(other)} of them spelled otherwise"
            said = (f"But the fork has all {len(options)} options, {how}: for "
                    f"`{example.option}` it writes {use}.")
        return said, "adapt" if plain else None
    missing = [f"`{h.option}`" for h in lacks]
    shown = _and(missing[:SHOWN]) if len(missing) <= SHOWN else \
        ", ".join(missing[:SHOWN]) + f" and {len(missing) - SHOWN} more"
    spelled = f", {len(other)} spelled otherwise" if other else ""
    return (f"The fork has {len(found)} of these {len(options)} options{spelled}, e.g. {use}; "
            f"{shown} {'is' if len(lacks) == 1 else 'are'} in none of them."), None


def _flagged(group: list[Hit], searched: int) -> dict[str, Any]:
    """The item's lines for the report (``flagged`` in the JSON): each with its line, its
    text, upstream's, its option and how the fork writes it, and what is proposed; the
    fork files searched, and the answer the fork's spellings point to."""
    return {"searched": searched, "answer": _fork_facts(group, searched)[1],
            "lines": [{"line": h.anchor, "text": h.merged, "upstream": h.line.rstrip("\r\n"),
                       "option": h.option,
                       "fork": h.fork.to_json() if h.fork is not None else None,
                       "proposed": h.proposed} for h in group]}


def _quoted(group: list[Hit]) -> str:
    """The lines as upstream wrote them, and as the fork's file holds them where the
    translation changed them."""
    def one(h: Hit) -> str:
        here = "" if h.merged.strip() == h.line.strip() else f" (here {_code(h.merged.strip())})"
        return f"{_code(h.line.strip())}{here}"
    shown = ", ".join(one(h) for h in group[:SHOWN])
    return shown + (f" and {len(group) - SHOWN} more" if len(group) > SHOWN else "")


def _region_at(items: list[ReviewItem], anchor: int | None) -> ReviewItem | None:
    if anchor is None:
        return None
    for item in items:
        if item.kind is ItemKind.CONFLICT and item.start_line is not None \
                and item.end_line is not None and item.start_line <= anchor <= item.end_line:
            return item
    return None


def _fold(item: ReviewItem, group: list[Hit], searched: int) -> None:
    """The conflict item carries the flag: its reason names the lines, and it is a Decide."""
    flag = group[0].flag
    said = item.reason.rstrip()
    said += "" if not said or said.endswith((".", "!", "?")) else "."
    facts = _fork_facts(group, searched)[0]
    item.reason = (f"{said} Upstream's side adds {_quoted(group)}, flagged "
                   f"`{flag.pattern}`: {flag.say.rstrip().rstrip('.')}."
                   + (f" {facts}" if facts else ""))
    if item.tier is Tier.DECIDE:
        return
    item.tier = Tier.DECIDE
    item.rule = f"{item.rule}, flagged" if item.rule else "flagged"
    # A Decide never offers upstream's side as its one-click default.
    if item.suggestion is not None and item.suggestion == item.theirs:
        item.suggestion = None
    item.question = ("A flagged upstream line is part of this hunk. Keep ours, take "
                     "upstream's (theirs), or combine them by hand?")
    item.choices = ["suggested", "ours", "theirs"] if item.suggestion is not None \
        else ["ours", "theirs"]
