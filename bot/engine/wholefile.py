"""What a whole-file review item asks (modify/delete, binary, mode): each choice in words. Pure.

git cannot merge such a file line by line, and commit 1 holds one side's version (or
none). The question says what each answer means ("ours: the fork deleted this file") and
which version commit 1 holds, because the item closes only when the file is one of its
answers (:mod:`bot.engine.rescan`).
"""

from __future__ import annotations

from bot.engine.git import MODE_GITLINK, MODE_SYMLINK
from bot.engine.trees import Entry


def whole_file_choices(sides: dict[str, Entry | None], merged: Entry | None) -> str:
    """What each choice of a whole-file item means, and what commit 1 holds."""
    def meaning(side: str, entry: Entry | None) -> str:
        who = "the fork" if side == "ours" else "upstream"
        if entry is None:
            return f"{who} deleted this file"
        if entry.mode == MODE_SYMLINK:
            return f"{who}'s symlink"
        if entry.mode == MODE_GITLINK:
            return f"{who}'s submodule commit"
        return f"{who}'s version" if side == "theirs" else "the fork's version"

    held = next((meaning(side, e) for side, e in sides.items() if e == merged), None)
    holds = "no file" if merged is None else held or "a version of neither side"
    # The choices as the command takes them (code, so they never read as git's ref names).
    choices = "; ".join(f"`{side}`: {meaning(side, e)}" for side, e in sides.items())
    return (f"Commit 1 holds {holds}. Choose {choices}; or `confirm`: the file as it is on "
            "the branch when you answer. The item closes only when the file is what you "
            "chose.")


def whole_file_question(sides: dict[str, Entry | None], merged: Entry | None) -> str:
    """What a whole-file item with no proposal asks."""
    return f"git could not merge this file line by line. {whole_file_choices(sides, merged)}"


__all__ = ["whole_file_choices", "whole_file_question"]
