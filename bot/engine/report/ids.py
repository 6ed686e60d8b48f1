"""Review item ids as people read them and as commands take them. Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from bot.engine.text import number_runs


def id_number(item_id: str) -> int:
    m = re.search(r"\d+", item_id)
    return int(m.group()) if m else 0


def id_list(ids: Iterable[str]) -> str:
    """``Q1, Q3–Q5``: the ids as a reader sees them (``id_ranges`` is what commands take)."""
    return id_ranges(ids).replace(",", ", ").replace("-", "–")


def shown_ids(ids: Sequence[str], most: int = 3) -> str:
    """``Q1, Q4, Q9 and 40 more``: a few ids for a sentence, however many there are."""
    head = list(ids[:most])
    return id_list(head) + (f" and {len(ids) - most} more" if len(ids) > most else "")


def id_ranges(ids: Iterable[str]) -> str:
    """``Q1,Q3-Q5``: the ids as runs of consecutive numbers, which the command parser takes."""
    return ",".join(f"Q{a}" if a == b else f"Q{a}-Q{b}"
                    for a, b in number_runs(id_number(i) for i in ids))


__all__ = ["id_list", "id_number", "id_ranges", "shown_ids"]
