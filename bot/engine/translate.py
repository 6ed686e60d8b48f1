"""Translate upstream paths and content into the fork's names (DESIGN.md, "How translation works").

`keep` and `replace` entries compile into one alternation, keep entries first,
each in a named group in priority order. Python's alternation tries its
branches in order at each position while the search itself finds the leftmost
position, which is exactly the contract: scanning left to right, at each
position the first entry that matches wins. Only the original text is ever
searched, so a rule's output is never seen by another rule (no chaining), and
lookarounds look at the original text around a match.

Matching runs in the `regex` module under a time limit per text (see
`time_limit_for`): a pattern that backtracks catastrophically despite the
static check in `bot.engine.config` ends as a `RuleTimeoutError` naming the rule and
the file, never as a hung worker.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import regex as _regex  # type: ignore[import-untyped]  # mrab-regex ships no stubs

from bot.engine.config import (
    CONFIG_PATH,
    PathRule,
    RegexProblem,
    Rule,
    TranslateConfig,
    check_regex,
    check_template,
    scoped_source,
)
from bot.errors import ConfigError, ForksyncError

# Content of files larger than this is kept as is: translating it would cost
# more than it is worth, and such files are data, not code or prose.
MAX_TEXT_BYTES = 10 * 1024 * 1024
# git's own heuristic: a NUL byte in the first 8000 bytes means binary.
BINARY_SNIFF_BYTES = 8000
# Seconds one text (a file's content or a path) may spend in matching, plus a
# share per megabyte so that a big, legitimate file is not cut off.
TIME_LIMIT = 2.0
TIME_PER_MB = 2.0
# How long each rule alone gets when finding the culprit after a timeout.
_BLAME_LIMIT = 0.5


class RuleTimeoutError(ForksyncError):
    """A rule backtracked past the time limit on one file: the config must change."""

    exit_code = 2

    def __init__(self, rule: str, upstream_path: str, limit: float) -> None:
        self.rule = rule
        self.upstream_path = upstream_path
        self.limit = limit
        super().__init__(
            f"{CONFIG_PATH}: {rule}: matching took over {limit:.1f}s on {upstream_path}; "
            "the pattern backtracks too much, simplify it"
        )


def time_limit_for(length: int, base: float = TIME_LIMIT) -> float:
    """Seconds of matching allowed for a text of `length` characters."""
    return base + TIME_PER_MB * length / 1_000_000


@dataclass(frozen=True)
class _Entry:
    """One keep or replace entry of the scan, in priority order."""

    key: str  # where it is in the config, e.g. translate.replace[2]
    source: str  # regex source, safe to embed in the alternation
    to: str | None  # None for a keep entry: the span is copied unchanged
    template: bool  # `to` holds group references, so it is expanded per match
    rule: Rule | None  # the replace rule, when it is scoped with `files:`


@dataclass(frozen=True)
class _PathEntry:
    """One `paths` rule: a literal prefix, or a regex matched at the start of the path."""

    key: str
    prefix: str  # the literal prefix (or the regex source)
    pattern: Any  # compiled regex, None for a literal prefix
    to: str
    template: bool

    def match(self, path: str, limit: float) -> Any:
        try:
            return self.pattern.match(path, timeout=limit)
        except TimeoutError:
            raise RuleTimeoutError(self.key, path, limit) from None


def _rule_source(rule: Rule) -> str:
    source = scoped_source(rule.from_) if rule.regex else _regex.escape(rule.from_)
    if rule.word:
        # "No letter, digit or underscore touches the match on either side."
        source = rf"(?<!\w)(?:{source})(?!\w)"
    return str(source)


def _has_template(to: str) -> bool:
    return "\\" in to


def _fail(key: str, problem: str) -> ConfigError:
    # A TranslateConfig built in code has no file or lines; name the key.
    return ConfigError(CONFIG_PATH, None, key, problem)


class _Scanner:
    """The compiled scan for one set of active entries (files scoping picks the set)."""

    def __init__(self, entries: tuple[_Entry, ...]) -> None:
        self.entries = entries
        alternation = "|".join(f"(?P<_fs{i}>{e.source})" for i, e in enumerate(entries))
        self.combined: Any = _regex.compile(alternation) if entries else None
        self._singles: dict[int, Any] = {}

    def single(self, i: int) -> Any:
        """Entry `i` compiled alone: it matches exactly what its branch matches."""
        if i not in self._singles:
            self._singles[i] = _regex.compile(self.entries[i].source)
        return self._singles[i]

    def scan(self, text: str, pos: int, where: str, limit: float) -> str | None:
        """`text[pos:]` translated, or None when nothing in it changes."""
        if self.combined is None:
            return None
        deadline = time.monotonic() + limit
        search = self.combined.search
        m = self._timed(search, text, pos, deadline, where, limit)
        if m is None:
            return None  # the common case: one search, no allocation
        out: list[str] = []
        copied = pos  # text[pos:copied] is already in `out`
        changed = False
        end = len(text)
        while m is not None:
            start, stop = m.span()
            i = int(m.lastgroup[3:])
            entry = self.entries[i]
            if entry.to is not None:
                if entry.template:
                    single = self._timed(self.single(i).match, text, start, deadline, where, limit)
                    replacement = str(single.expand(entry.to))
                else:
                    replacement = entry.to
                if replacement != text[start:stop]:
                    out.append(text[copied:start])
                    out.append(replacement)
                    copied = stop
                    changed = True
            # An empty match must still move the scan on, or it would loop.
            nxt = stop if stop > start else stop + 1
            if nxt > end:
                break
            m = self._timed(search, text, nxt, deadline, where, limit)
        if not changed:
            return None
        out.append(text[copied:])
        return "".join(out)

    def _timed(
        self,
        method: Callable[..., Any],
        text: str,
        pos: int,
        deadline: float,
        where: str,
        limit: float,
    ) -> Any:
        remaining = deadline - time.monotonic()
        try:
            if remaining <= 0:
                raise TimeoutError
            return method(text, pos, timeout=remaining)
        except TimeoutError:
            raise RuleTimeoutError(self._blame(text, pos), where, limit) from None

    def _blame(self, text: str, pos: int) -> str:
        """The key of the entry that backtracks, found by timing each alone."""
        for i, entry in enumerate(self.entries):
            try:
                self.single(i).search(text, pos, timeout=_BLAME_LIMIT)
            except TimeoutError:
                return entry.key
        return "translate (keep and replace together)"


class Translator:
    """Translates upstream paths and content with one `TranslateConfig`; build once, reuse.

    Patterns are checked when the translator is built: a bad one raises
    ConfigError naming its key, even for a config built in code.
    """

    def __init__(self, config: TranslateConfig, *, time_limit: float = TIME_LIMIT) -> None:
        self.config = config
        self.time_limit = time_limit
        entries: list[_Entry] = []
        for i, keep in enumerate(config.keep):
            key = f"translate.keep[{i}]"
            self._check(key, keep)
            entries.append(_Entry(key, scoped_source(keep), None, False, None))
        for i, rule in enumerate(config.replace):
            key = f"translate.replace[{i}]"
            if not rule.from_:
                raise _fail(f"{key}.from", "expected a non-empty string")
            if rule.regex:
                self._check(f"{key}.from", rule.from_)
                self._check_template(f"{key}.to", rule.from_, rule.to)
            template = rule.regex and _has_template(rule.to)
            scope = rule if rule.files else None
            entries.append(_Entry(key, _rule_source(rule), rule.to, template, scope))
        self._entries = tuple(entries)
        # Entries with `files:` are the only reason two files get different scans.
        self._scoped = tuple((i, e.rule) for i, e in enumerate(entries) if e.rule is not None)
        self._scanners: dict[tuple[int, ...], _Scanner] = {}
        self._default = self._scanner(())

        self._path_rules = tuple(
            self._path_rule(f"translate.paths[{i}]", pr) for i, pr in enumerate(config.paths)
        )

        replace_sources = [e.source for e in entries if e.to is not None]
        self._any_replace: Any = (
            _regex.compile("|".join(f"(?:{s})" for s in replace_sources))
            if replace_sources
            else None
        )

    @staticmethod
    def _check(key: str, pattern: str) -> None:
        try:
            check_regex(pattern)
        except RegexProblem as e:
            raise _fail(key, str(e)) from None

    @staticmethod
    def _check_template(key: str, pattern: str, to: str) -> None:
        try:
            check_template(pattern, to)
        except RegexProblem as e:
            raise _fail(key, str(e)) from None

    def _path_rule(self, key: str, pr: PathRule) -> _PathEntry:
        if not pr.from_:
            raise _fail(f"{key}.from", "expected a non-empty string")
        if not pr.regex:
            return _PathEntry(key, pr.from_, None, pr.to, False)
        self._check(f"{key}.from", pr.from_)
        self._check_template(f"{key}.to", pr.from_, pr.to)
        compiled = _regex.compile(scoped_source(pr.from_))
        return _PathEntry(key, pr.from_, compiled, pr.to, _has_template(pr.to))

    def _scanner(self, active_scoped: tuple[int, ...]) -> _Scanner:
        scanner = self._scanners.get(active_scoped)
        if scanner is None:
            wanted = set(active_scoped)
            entries = tuple(e for i, e in enumerate(self._entries) if e.rule is None or i in wanted)
            scanner = self._scanners[active_scoped] = _Scanner(entries)
        return scanner

    def _scanner_for(self, upstream_path: str) -> _Scanner:
        if not self._scoped:
            return self._default
        active = tuple(i for i, rule in self._scoped if rule.applies_to(upstream_path))
        return self._scanner(active)

    # --- public API

    def is_excluded(self, upstream_path: str) -> bool:
        """True when the file's content is kept as is (`exclude`); its path is still translated."""
        return self.config.is_excluded(upstream_path)

    def path(self, upstream_path: str) -> str:
        """The fork path for `upstream_path`: longest `paths` prefix, then the scan.

        The scan covers the part of the path after the rewritten prefix (the
        whole path when no prefix rule matches), with lookarounds seeing the
        upstream path; the prefix's replacement is output and, like all
        output, is not rescanned. `files:`-scoped rules apply to content only, never to
        paths: a prose rule for `*.md` must not rename the files it applies to.
        """
        limit = time_limit_for(len(upstream_path), self.time_limit)
        best = -1
        prefix = ""
        for rule in self._path_rules:
            if rule.pattern is None:
                # Longest prefix wins; on a tie the rule listed first stays.
                if len(rule.prefix) > best and upstream_path.startswith(rule.prefix):
                    best, prefix = len(rule.prefix), rule.to
                continue
            m = rule.match(upstream_path, limit)
            if m is not None and m.end() > best:
                best, prefix = m.end(), str(m.expand(rule.to)) if rule.template else rule.to
        start = max(best, 0)
        rest = self._default.scan(upstream_path, start, upstream_path, limit)
        if best < 0:
            return upstream_path if rest is None else rest
        return prefix + (upstream_path[start:] if rest is None else rest)

    def text(self, text: str, upstream_path: str) -> str:
        """`text` (content of the file at `upstream_path`) translated; the same object if unchanged.

        Files matching `exclude` come back untouched.
        """
        if self.is_excluded(upstream_path):
            return text
        limit = time_limit_for(len(text), self.time_limit)
        out = self._scanner_for(upstream_path).scan(text, 0, upstream_path, limit)
        return text if out is None else out

    def blob(self, data: bytes, upstream_path: str) -> bytes:
        """File content translated; the same bytes object when it is not translatable text.

        Kept as is: `exclude` matches, binary content (NUL in the first 8000
        bytes, as git decides), content that is not UTF-8, and content over 10 MB.
        Line endings and a BOM survive because decoding does not touch them.
        """
        if (
            len(data) > MAX_TEXT_BYTES
            or b"\0" in data[:BINARY_SNIFF_BYTES]
            or self.is_excluded(upstream_path)
        ):
            return data
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return data
        out = self.text(text, upstream_path)
        return data if out is text else out.encode("utf-8")

    def needs_path_translation(self, name: str) -> bool:
        """Could translating the path `name` change it? False guarantees `path(name) == name`.

        A cheap superset test for skipping work: one precompiled search over
        all replace rules (ignoring `files:` scoping and `keep`), plus the
        `paths` prefixes.
        """
        for rule in self._path_rules:
            if rule.pattern is None:
                if name.startswith(rule.prefix):
                    return True
            elif rule.match(name, time_limit_for(len(name), self.time_limit)) is not None:
                return True
        if self._any_replace is None:
            return False
        limit = time_limit_for(len(name), self.time_limit)
        try:
            return self._any_replace.search(name, timeout=limit) is not None
        except TimeoutError:
            raise RuleTimeoutError("translate.replace", name, limit) from None
