"""Flagged lines as review items: one question per flag and file, not one per line. Pure.

A ``flags`` entry says that upstream lines matching it always need a person. The lines
one upstream change adds for one flag (five speculative-decoding options in one script)
get one answer: keep, adapt or drop them. So a file gets one question per flag, listing
its lines. A flagged line inside a conflict region is that region's decision: the
conflict item says so, and can no longer be confirmed in one click.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.engine.config import Flag
from bot.engine.model import ItemKind, ReviewItem, Tier

SHOWN = 3  # flagged lines quoted in a question; the item's ``theirs`` lists them all
FLAG_CHOICES = ("keep", "adapt", "drop")  # the answers a flag question offers


@dataclass(frozen=True)
class Hit:
    """One upstream-added line that matched a flag, and where it sits in the merged file."""

    flag: Flag
    line: str  # as upstream wrote it (the flag matched this text)
    merged: str  # as the fork's file holds it (translated), without its line end
    anchor: int | None  # 1-based line in the merged file, None where it was not found


def add_flag_items(items: list[ReviewItem], path: str, upstream_path: str,
                   hits: list[Hit]) -> None:
    """Fold hits inside conflict regions into those items; one flag item per flag for the rest."""
    inside: dict[tuple[int, str], tuple[ReviewItem, list[Hit]]] = {}
    rest: dict[str, list[Hit]] = {}
    for hit in hits:
        region = _region_at(items, hit.anchor)
        if region is None:
            rest.setdefault(hit.flag.pattern, []).append(hit)
        else:
            inside.setdefault((id(region), hit.flag.pattern), (region, []))[1].append(hit)
    for region, group in inside.values():
        _fold(region, group)
    for group in rest.values():
        flag, n = group[0].flag, len(group)
        anchor = next((h.anchor for h in group if h.anchor is not None), None)
        them = "it as it is, adapt it, or drop it" if n == 1 else \
            f"these {n} lines as they are, adapt them, or drop them"
        items.append(ReviewItem(
            id="", kind=ItemKind.FLAG, path=path, upstream_path=upstream_path,
            tier=Tier.DECIDE, reason=f"flag `{flag.pattern}`: {flag.say}",
            theirs="".join(h.merged + "\n" for h in group),
            start_line=anchor, end_line=anchor,
            question=f"Upstream added {_quoted(group)}: {flag.say}. Keep {them}?",
            choices=list(FLAG_CHOICES),
        ))


def _quoted(group: list[Hit]) -> str:
    """The lines as the fork holds them, and upstream's where the translation changed it."""
    def one(h: Hit) -> str:
        original = "" if h.merged.strip() == h.line.strip() else \
            f" (upstream wrote `{h.line.strip()}`)"
        return f"`{h.merged.strip()}`{original}"
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


def _fold(item: ReviewItem, group: list[Hit]) -> None:
    """The conflict item carries the flag: its reason names the lines, and it is a Decide."""
    flag = group[0].flag
    said = item.reason.rstrip()
    said += "" if not said or said.endswith((".", "!", "?")) else "."
    item.reason = (f"{said} Upstream's side adds {_quoted(group)}, flagged "
                   f"`{flag.pattern}`: {flag.say}.")
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
