"""The typed, precompiled config that the loader returns and the engine reads."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.engine.config.globs import glob_matcher
from bot.errors import ForksyncError

CONFIG_PATH = ".github/forksync.yml"

ACTIONS = ("ours", "theirs", "skip", "manual")

# Seconds one flag pattern may spend on one line. Lines are short, so a pattern
# that needs longer than this is backtracking, not working.
FLAG_TIMEOUT = 1.0


class MatchLike(Protocol):
    """What callers may use of a match, whether it came from `re` or `regex`."""

    def group(self, group: int | str = ..., /) -> str | Any: ...
    def start(self, group: int | str = ..., /) -> int: ...
    def end(self, group: int | str = ..., /) -> int: ...
    def span(self, group: int | str = ..., /) -> tuple[int, int]: ...


class PatternLike(Protocol):
    """A compiled pattern; `Flag.regex` is one of these (a `regex`-module pattern)."""

    @property
    def pattern(self) -> str: ...
    def search(self, string: str, pos: int = ..., endpos: int = ...) -> MatchLike | None: ...


@dataclass(frozen=True)
class PathRule:
    """`translate.paths[i]`: rewrite a path prefix (`regex: true`: a regex matched at the start)."""

    from_: str
    to: str
    regex: bool = False


@dataclass(frozen=True)
class Rule:
    """`translate.replace[i]`: one replace rule, optionally scoped to some upstream paths."""

    from_: str
    to: str
    regex: bool = False
    word: bool = False
    files: tuple[str, ...] = ()
    # Where the rule is written in the config file (1-based), for warnings; None if unknown.
    line: int | None = field(default=None, compare=False)
    _files_match: Callable[[str], bool] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_files_match", glob_matcher(self.files))

    def applies_to(self, upstream_path: str) -> bool:
        """True when this rule is in force for a file at `upstream_path` (no `files:` = all)."""
        return not self.files or self._files_match(upstream_path)


@dataclass(frozen=True)
class TranslateConfig:
    """The `translate:` section: how upstream paths and content become the fork's."""

    paths: tuple[PathRule, ...] = ()
    keep: tuple[str, ...] = ()
    replace: tuple[Rule, ...] = ()
    exclude: tuple[str, ...] = ()
    _exclude_match: Callable[[str], bool] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_exclude_match", glob_matcher(self.exclude))

    @property
    def renames(self) -> bool:
        """Whether the translation changes anything: with no path or replace rule it is
        the identity, and base and theirs are upstream's own trees."""
        return bool(self.paths or self.replace)

    def is_excluded(self, upstream_path: str) -> bool:
        """True when the file's content is kept as is (its path is still translated)."""
        return self._exclude_match(upstream_path)


@dataclass(frozen=True)
class Policy:
    """`policies[i]`: what to do with fork paths matching `paths` (ours|theirs|skip|manual)."""

    paths: tuple[str, ...]
    action: str
    _paths_match: Callable[[str], bool] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_paths_match", glob_matcher(self.paths))

    def matches(self, fork_path: str) -> bool:
        """True when `fork_path` matches one of this policy's globs."""
        return self._paths_match(fork_path)


# The fork's config is its own: an upstream may have one too (its `downstream:` list,
# or its own upstream's config), and merging that into the fork's would be wrong.
OWN_CONFIG_POLICY = Policy((CONFIG_PATH,), "skip")


class FlagTimeoutError(ForksyncError):
    """A flag pattern took too long on one line: it backtracks, so the config must change."""

    exit_code = 2


@dataclass(frozen=True)
class Flag:
    """`flags[i]`: upstream-added lines matching `pattern` become questions saying `say`."""

    pattern: str
    say: str
    regex: PatternLike = field(compare=False)
    line: int | None = field(default=None, compare=False)  # in the config file, for warnings

    def matches(self, line: str) -> bool:
        """Search `line` under `FLAG_TIMEOUT`; prefer this over `regex.search` for that reason."""
        return self.span(line) is not None

    def span(self, line: str) -> tuple[int, int] | None:
        """Where the pattern first matches in `line` (under `FLAG_TIMEOUT`), or None."""
        try:
            m = self.regex.search(line, timeout=FLAG_TIMEOUT)  # type: ignore[call-arg]
            return m.span() if m is not None else None
        except TimeoutError:
            raise FlagTimeoutError(
                f"flag pattern {self.pattern!r} took over {FLAG_TIMEOUT}s on one line; "
                "simplify it in the flags: section of the config"
            ) from None


@dataclass(frozen=True)
class Config:
    """The whole `.github/forksync.yml`; `source` is where it was read from (for messages)."""

    upstream_repo: str
    upstream_branch: str
    translate: TranslateConfig
    policies: tuple[Policy, ...] = ()
    flags: tuple[Flag, ...] = ()
    source: str = CONFIG_PATH
    # Where upstream merges are announced when the App cannot be installed on the
    # upstream itself: a push there starts a sync. Named, never guessed from a name.
    upstream_mirror: str | None = None
    # Forks in other accounts that may read this repository (it is their upstream).
    downstream: tuple[str, ...] = ()

    def policy_for(self, fork_path: str) -> Policy | None:
        """The first policy whose globs match `fork_path`, or None (the fork's config: skip)."""
        if fork_path == CONFIG_PATH:
            return OWN_CONFIG_POLICY
        for policy in self.policies:
            if policy.matches(fork_path):
                return policy
        return None

    def fingerprint(self) -> str:
        """A stable sha256 of everything that affects a sync (not `source`): a cache key."""
        t = self.translate
        effective = {
            # Bump the salt when the meaning of an unchanged config changes.
            "v": "forksync-config-1",
            "upstream": [self.upstream_repo, self.upstream_branch],
            "paths": [[p.from_, p.to, p.regex] for p in t.paths],
            "keep": list(t.keep),
            "replace": [[r.from_, r.to, r.regex, r.word, list(r.files)] for r in t.replace],
            "exclude": list(t.exclude),
            "policies": [[list(p.paths), p.action] for p in self.policies],
            "flags": [[f.pattern, f.say] for f in self.flags],
        }
        blob = json.dumps(effective, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(blob.encode("ascii")).hexdigest()
