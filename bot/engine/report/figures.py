"""Counts and figures a review says once per file. Pure.

A reason in a file that is mostly one side's gives the file's changed lines and how often
people kept the proposal in such hunks (``suggest.FILE_COUNTS``, ``suggest.FIGURE_GISTS``);
a whole-file proposal (modify/delete) gives how often people kept the deletion
(``suggest.SYNC_FIGURE_GISTS``), the same for every such file of the sync, said in full
on its first one.
Both are the same for every hunk of the file, and a file can hold dozens of hunks: its
first item that shows its reason says them in full, and each later one says its gist and
where the rest is ("… (counts: see Q5)"), so every comment still reads on its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from bot.engine.suggest import FIGURE_GISTS, FILE_COUNTS, SYNC_FIGURE_GISTS

Json = dict[str, Any]


def _shows_reason(item: Json) -> bool:
    """Whether the item's comment shows its reason: a copy of a twin shows its first's id
    instead (``comments._copy_of``), so it never gives the figures in full."""
    twins = item.get("twins")
    return not (isinstance(twins, dict) and twins.get("group") and item.get("tier") != "Settled"
                and str(twins["group"]) != str(item["id"]))


def brief_reasons(plan: Json, paths: Iterable[str] | None = None) -> dict[str, str]:
    """The reason of each item that repeats what an earlier item says in full (of its
    file, or of the whole sync for a whole-file proposal's figures), shortened to a
    back-reference; the items of ``paths`` only, if given."""
    only = set(paths) if paths is not None else None
    out: dict[str, str] = {}
    said_sync: dict[str, str] = {}  # the same for every file of the sync
    for f in plan.get("files", []):
        items = f.get("review_items") or []
        said: dict[str, str] = {}  # a text said in full -> the id that says it
        for item in items:
            reason = str(item.get("reason") or "")
            short = reason
            counts = FILE_COUNTS.search(reason)
            counts_at = said.get(counts.group()) if counts else None
            figures = [full for full in FIGURE_GISTS if full in reason and full in said]
            # One back-reference where the counts and the figures are said by one item.
            both = counts_at is not None and any(said[full] == counts_at for full in figures)
            if counts and counts_at is not None:
                short = short.replace(counts.group(), f" (counts{' and figures' if both else ''}"
                                      f": see {counts_at}).")
            for full in figures:
                at = "" if said[full] == counts_at else f" (figures: see {said[full]})"
                short = short.replace(full, f"{FIGURE_GISTS[full]}{at}.")
            for full, gist in SYNC_FIGURE_GISTS.items():
                if full in reason and full in said_sync:
                    short = short.replace(full, f"{gist} (figures: see {said_sync[full]})")
            if short != reason and (only is None or item.get("path") in only):
                out[str(item["id"])] = short
            if _shows_reason(item):
                for text in ([counts.group()] if counts else []) + [
                        full for full in FIGURE_GISTS if full in reason]:
                    said.setdefault(text, str(item["id"]))
                for full in SYNC_FIGURE_GISTS:
                    if full in reason:
                        said_sync.setdefault(full, str(item["id"]))
    return out


__all__ = ["brief_reasons"]
