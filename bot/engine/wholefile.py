"""What a whole-file review item asks (modify/delete, binary, mode): each choice in words. Pure.

git cannot merge such a file line by line, and commit 1 holds one side's version (or
none). The question says what each answer means ("ours: the fork deleted this file") and
which version commit 1 holds, because the item closes only when the file is one of its
answers (:mod:`bot.engine.rescan`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.engine.git import MODE_GITLINK, MODE_SYMLINK
from bot.engine.trees import Entry

MOVED_RULE = "file location"  # a new file git moved into a directory the other side renamed
_FILE_LOCATION = re.compile(r"^(?P<was>.+?) added in \S+ inside a directory that was renamed "
                            r"in \S+, suggesting it should perhaps be moved to (?P<to>.+?)\.$")


@dataclass(frozen=True)
class Moved:
    """A file one side added inside a directory the other side renamed: git put it in the
    renamed directory (``CONFLICT (file location)``), with the adder's version."""

    side: str  # "ours" or "theirs": who added it
    was: str  # where the adder put it

    @property
    def who(self) -> str:
        return "the fork" if self.side == "ours" else "upstream"

    def reason(self) -> str:
        other = "upstream" if self.side == "ours" else "the fork"
        return (f"{self.who[0].upper()}{self.who[1:]} added this file as `{self.was}`, inside a "
                f"directory {other} renamed, so git moved it here; commit 1 holds "
                f"{self.who}'s version at this path.")

    def question(self) -> str:
        other = "theirs" if self.side == "ours" else "ours"
        return (f"Keep {self.who}'s new file here (`{self.side}`), or no file here "
                f"(`{other}`)? Or move it by hand and answer `confirm`: the file as it is on "
                "the branch when you answer. The item closes only when the file is what you "
                "chose.")


def moved_file(text: str, stages: set[int]) -> Moved | None:
    """The move of git's ``CONFLICT (file location)`` message ``text``, its adder known by
    the one stage git recorded (2: the fork, 3: upstream); else None."""
    m = _FILE_LOCATION.match(text.removeprefix("CONFLICT (file location): "))
    if m is None or len(stages) != 1 or not stages <= {2, 3}:
        return None
    return Moved("ours" if stages == {2} else "theirs", m["was"])


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


__all__ = ["MOVED_RULE", "Moved", "moved_file", "whole_file_choices", "whole_file_question"]
