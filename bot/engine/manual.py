"""Files under a ``manual`` policy: never merged textually, upstream's change ported by hand.

The merge keeps the fork's file and the item carries the window's translated upstream
diff. The policy says the fork rewrote the file; when the fork's file is in fact still
the translated base byte for byte (same mode, same blob: the fork has not changed it
since the two split), upstream's change applies exactly, and upstream's version is the
fork's file with that diff applied. Then the item proposes it (a Confirm): ``theirs``
puts upstream's version on the sync branch (``/sync answer Qn theirs``, or
``/sync resolve <path> theirs``), as it does for a whole-file item; ``done`` and
``skip`` stay.

A fork change of whitespace only is a change: upstream's version would drop it, and in
Python, YAML or a Makefile whitespace is meaning. So is a fork file upstream renamed (the
item names one path, and a rename moves two). Both keep the port by hand. Pure.
"""

from __future__ import annotations

from bot.engine.model import ItemKind, ReviewItem, Tier

MANUAL_NOTE = "manual policy: port by hand"
UNCHANGED_NOTE = "manual policy, but the fork never changed it: upstream's version applies"


def manual_item(path: str, upstream_path: str, rule: str, diff: str,
                sides: dict[str, dict[str, str] | None] | None = None) -> ReviewItem:
    """The item of a ``manual`` policy. ``sides`` ({"ours", "theirs"} tree entries) only
    when the fork's file is the translated base as it is: then upstream's version is
    proposed, and ``theirs`` takes it."""
    if sides is None:
        return ReviewItem(
            id="", kind=ItemKind.MANUAL, path=path, upstream_path=upstream_path,
            tier=Tier.DECIDE,
            reason=f"{rule}: the fork rewrote this file, so it is never merged textually",
            theirs=diff,
            question="Port upstream's change to the fork's version by hand, then answer "
                     "`done` (or `skip` to leave it out).",
            choices=["done", "skip"])
    return ReviewItem(
        id="", kind=ItemKind.MANUAL, path=path, upstream_path=upstream_path,
        tier=Tier.CONFIRM,
        reason=f"{rule}: the fork has not changed this file since the split (it is the "
               "translated base byte for byte), so upstream's change applies as it is",
        theirs=diff,
        question="Take upstream's version (`theirs`)? Or port by hand and answer `done`, or "
                 "`skip` to leave it out.",
        choices=["theirs", "done", "skip"], sides=sides)


def applies_as_is(item: dict[str, object]) -> bool:
    """A ``manual`` item whose file the fork never changed: ``theirs`` takes upstream's
    version (the item records its side). A workflow file's item never has one."""
    sides = item.get("sides")
    return item.get("kind") == ItemKind.MANUAL.value and isinstance(sides, dict) \
        and "theirs" in sides


__all__ = ["MANUAL_NOTE", "UNCHANGED_NOTE", "applies_as_is", "manual_item"]
