"""Proposals for one conflict hunk: a safe resolution with its reason, or a question. Pure."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from bot.engine.model import Tier

_IMPORT = re.compile(r"^\s*(import\s+[\w.]+|from\s+[\w.]+\s+import\s+.+|#include\s+.+|"
                     r"(const|let|var)\s+.*=\s*require\(.+\)|import\s+.+\s+from\s+.+)\s*;?\s*$")
_WS = re.compile(r"\s+")

CHOICES = ["ours", "theirs"]


@dataclass(frozen=True)
class Proposal:
    tier: Tier
    reason: str
    suggestion: str | None  # replacement for the whole marker region
    question: str | None = None
    choices: tuple[str, ...] = ()


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _norm(text: str) -> list[str]:
    return [_WS.sub(" ", ln).strip() for ln in text.splitlines() if ln.strip()]


def _is_subsequence(small: list[str], big: list[str]) -> bool:
    it = iter(big)
    return all(any(x == y for y in it) for x in small)


def _union(ours: str, theirs: str) -> str:
    """Ours, then the lines theirs adds that ours lacks, keeping a final newline."""
    have = Counter(ln.rstrip("\r\n") for ln in _lines(ours))
    extra = []
    for ln in _lines(theirs):
        key = ln.rstrip("\r\n")
        if have[key] > 0:
            have[key] -= 1
        else:
            extra.append(ln)
    out = ours
    if out and not out.endswith("\n") and extra:
        out += "\n"
    return out + "".join(extra)


def _squash(text: str) -> str:
    """The text without whitespace: equal squashes mean a pure reformat (spacing, wrapping)."""
    return _WS.sub("", text)


def propose(ours: str, base: str, theirs: str) -> Proposal:
    """Pick the first safe rule that applies; otherwise ask a person."""
    n_ours, n_base, n_theirs = _norm(ours), _norm(base), _norm(theirs)
    s_ours, s_base, s_theirs = _squash(ours), _squash(base), _squash(theirs)
    if s_ours == s_theirs:
        return Proposal(Tier.SETTLED, "both sides made the same change (they differ only in "
                        "whitespace); keeps ours", ours)
    if s_theirs == s_base:
        return Proposal(Tier.SETTLED, "upstream only reformats these lines; keeps ours", ours)
    if s_ours == s_base:
        return Proposal(Tier.SETTLED, "our side only reformats these lines; takes upstream's "
                        "change", theirs)
    base_lines = Counter(n_base)
    theirs_lines = Counter(n_theirs)
    ours_lines = Counter(n_ours)
    added = theirs_lines - base_lines
    removed = base_lines - theirs_lines
    already = not (added - ours_lines) and all(ours_lines[ln] <= theirs_lines[ln] for ln in removed)
    if (added or removed) and already:
        return Proposal(Tier.SETTLED, "upstream's change is already applied on our side; "
                        "keeps ours", ours)
    both_add = _is_subsequence(n_base, n_ours) and _is_subsequence(n_base, n_theirs)
    if both_add:
        new_lines = list((ours_lines - base_lines).elements()) + list(added.elements())
        if new_lines and all(_IMPORT.match(ln) for ln in new_lines) \
                and all(_IMPORT.match(ln) for ln in n_base):
            return Proposal(Tier.SETTLED, "both sides add distinct import lines; keeps both",
                            _union(ours, theirs))
        return Proposal(
            Tier.CONFIRM, "both sides only add lines; the proposal keeps ours, then upstream's",
            _union(ours, theirs),
            question="Keep both additions (ours first)?",
            choices=("suggested", "ours", "theirs"),
        )
    return Proposal(
        Tier.DECIDE, "both sides changed the same lines differently",
        None,
        question="Both sides changed these lines. Keep ours, take upstream's (theirs), "
                 "or combine them by hand?",
        choices=tuple(CHOICES),
    )
