"""Path globs for `files:`, `exclude:` and `policies[].paths`: the whole path, `*` crosses `/`."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable
from functools import lru_cache


@lru_cache(maxsize=4096)
def compile_glob(glob: str) -> re.Pattern[str]:
    """A regex for `glob` matching the WHOLE path: `*` (and `**`) span `/`, `?` is one char.

    `fnmatch.translate` has exactly these semantics; `re.compile` (not
    `fnmatch.fnmatch`) keeps matching case-sensitive on every platform.
    """
    return re.compile(fnmatch.translate(glob))


class GlobSet:
    """A precompiled test for "matches any of these globs" (never true for none).

    A class rather than a closure so that configs stay picklable.
    """

    __slots__ = ("_match", "globs")

    def __init__(self, globs: Iterable[str]) -> None:
        self.globs = tuple(dict.fromkeys(globs))
        if not self.globs:
            self._match = None
        elif len(self.globs) == 1:
            self._match = compile_glob(self.globs[0]).match
        else:
            parts = "|".join(f"(?:{compile_glob(g).pattern})" for g in self.globs)
            self._match = re.compile(parts).match

    def __call__(self, path: str) -> bool:
        return self._match is not None and self._match(path) is not None

    def __reduce__(self) -> tuple[type[GlobSet], tuple[tuple[str, ...]]]:
        return (GlobSet, (self.globs,))


def glob_matcher(globs: Iterable[str]) -> Callable[[str], bool]:
    """One precompiled test for "matches any of `globs`" (never true for no globs)."""
    return GlobSet(globs)
