"""How the fork already writes a command-line option, case and ``-``/``_`` aside. Pure.

A flagged upstream line (``bot.engine.flags``) names an option such as
``--sglang-ep-size``; the translation writes it as the fork's file holds it
(``--vLLM-ep-size`` where a prose rule applied). Whether the fork already has that
option, and how it spells it, is one search of the fork's files for all the options of
a sync: ``--vllm-ep-size``, ``--vLLM-ep-size`` and ``--vllm_ep_size`` are one option,
each spelling counted in the files that write it.

The files searched are fork main's versions of the files upstream changed in the
window: a plan reads them anyway, so the App's partial clones hold them and a plan made
there says exactly what one made on full clones says (``tests/partial.py``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

# A long option as a command line writes it; never the middle of a longer word.
OPTION = re.compile(r"(?<![\w-])--[A-Za-z0-9][A-Za-z0-9_-]*[A-Za-z0-9]")
_EDGE = r"A-Za-z0-9_-"  # what may not stand next to an option in a file


def option_at(line: str, start: int, end: int) -> str | None:
    """The option that the text ``line[start:end]`` is part of, or None."""
    for m in OPTION.finditer(line):
        if m.start() < end and start < m.end():
            return m.group()
    return None


def option_key(option: str) -> str:
    """One key for every spelling of an option: lower case, ``_`` as ``-``."""
    return option.lower().replace("_", "-")


@dataclass(frozen=True)
class Uses:
    """Where the fork writes an option in one spelling: ``(path, first line)`` per file."""

    text: str
    places: tuple[tuple[str, int], ...]

    @property
    def files(self) -> int:
        return len(self.places)


@dataclass(frozen=True)
class Search:
    """Every spelling the searched files have of each option; ``files``: how many were
    searched."""

    found: dict[str, list[Uses]] = field(default_factory=dict)
    files: int = 0

    def uses(self, option: str) -> list[Uses]:
        """The spellings of ``option``, the most written first."""
        return self.found.get(option_key(option), [])


def search(texts: Iterable[tuple[str, str]], options: Iterable[str]) -> Search:
    """Where the files ``texts`` (``(path, text)``) write ``options``, in any case and
    with ``-`` or ``_``: one regex for all of them, one pass over each file."""
    keys = sorted({option_key(o) for o in options if OPTION.fullmatch(o)})
    files = list(texts)
    if not keys:
        return Search(files=len(files))
    spellings = "|".join("[-_]".join(map(re.escape, k[2:].split("-"))) for k in keys)
    pattern = re.compile(f"(?<![{_EDGE}])--(?:{spellings})(?![{_EDGE}])", re.IGNORECASE)
    places: dict[str, dict[str, dict[str, int]]] = {}
    for path, text in files:
        for m in pattern.finditer(text):
            written = places.setdefault(option_key(m.group()), {}).setdefault(m.group(), {})
            if path not in written:
                written[path] = text.count("\n", 0, m.start()) + 1
    found = {key: sorted((Uses(text, tuple(sorted(where.items())))
                          for text, where in spelled.items()),
                         key=lambda u: (-u.files, u.text))
             for key, spelled in places.items()}
    return Search(found, len(files))


__all__ = ["OPTION", "Search", "Uses", "option_at", "option_key", "search"]
