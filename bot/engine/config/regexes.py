"""Which user regexes the config accepts, and compiling them for time-limited matching.

Regexes are Python `re` syntax. They are validated (and analysed) with the
standard `re` parser, then compiled with the `regex` module (mrab-regex), whose
matching accepts a `timeout=`: a pattern that slips past the static
catastrophic-backtracking check (`redos`) still cannot hang the process.
"""

from __future__ import annotations

import re
import warnings

import regex as _regex  # type: ignore[import-untyped]  # mrab-regex ships no stubs

from bot.engine.config.redos import parse, redos_reason, uses_backreference
from bot.engine.config.types import PatternLike


class RegexProblem(ValueError):
    """Why a user regex is refused; the loader turns it into a ConfigError with the key."""


# Leading global inline flags, e.g. `(?i)`. Rules are combined into one
# alternation, where a global flag mid-pattern is an error (re) or leaks into
# every other rule (regex), so they are rewritten into a scoped `(?i:...)` group.
_LEADING_FLAGS = re.compile(r"\(\?([imsx]+)\)")
_OTHER_GLOBAL_FLAGS = re.compile(r"\(\?[aLu]+\)")


def scoped_source(pattern: str) -> str:
    """`pattern` with leading `(?i)`-style flags made scoped, safe to embed in an alternation."""
    flags = ""
    rest = pattern
    while m := _LEADING_FLAGS.match(rest):
        flags += m.group(1)
        rest = rest[m.end() :]
    if not flags:
        return pattern
    # A verbose-mode comment would swallow the closing paren; end it with a newline.
    tail = "\n" if "x" in flags else ""
    return f"(?{''.join(sorted(set(flags)))}:{rest}{tail})"


def check_regex(pattern: str, *, allow_empty: bool = False) -> None:
    """Raise RegexProblem unless `pattern` is a safe, combinable Python regex.

    Refused: syntax errors; backreferences (rules are combined into one
    alternation, which renumbers groups); global flags other than leading
    i/m/s/x; the shapes that backtrack catastrophically (see `redos_reason`);
    and matches of the empty string (an empty keep or replace match would
    shadow every rule after it at that position).
    """
    try:
        _check_regex(pattern, allow_empty)
    except RecursionError:
        # The stdlib parser recurses once per nested group.
        raise RegexProblem("expected a regex with fewer nested groups") from None


def _check_regex(pattern: str, allow_empty: bool) -> None:
    if not pattern:
        raise RegexProblem("expected a non-empty regex")
    try:
        with warnings.catch_warnings():
            # `re` warns where a future version (and the `regex` module that
            # runs the match today) reads a set differently, e.g. `[[:alpha:]]`
            # or `[a--b]`: refuse the ambiguity rather than guess.
            warnings.simplefilter("error", FutureWarning)
            parsed = parse(pattern)
            re.compile(pattern)
    except re.error as e:
        raise RegexProblem(f"expected a valid Python regex: {e.msg} at position {e.pos}") from None
    except FutureWarning as w:
        raise RegexProblem(
            f"expected an unambiguous character set ({w}); escape the [ or -"
        ) from None
    if _OTHER_GLOBAL_FLAGS.search(pattern):
        raise RegexProblem("expected no (?a)/(?L)/(?u) global flags; use a scoped group")
    if uses_backreference(parsed):
        raise RegexProblem(
            "expected a regex without backreferences (\\1, (?P=name), (?(1)...)): "
            "rules are combined into one scan"
        )
    # Catastrophic backtracking first: it is the graver problem, and a pattern with both
    # (`^(\d+)*$`) fixed only for the empty match (`^(\d+)+$`) would still hang.
    reason = redos_reason(pattern)
    if reason:
        raise RegexProblem(f"expected a regex that cannot backtrack catastrophically: {reason}")
    if not allow_empty and parsed.getwidth()[0] == 0:
        raise RegexProblem(
            "expected a regex that cannot match empty text (this one can, e.g. on an empty "
            "line); use + instead of * or ? where at least one character must match")
    try:
        _regex.compile(scoped_source(pattern))
    except _regex.error as e:
        raise RegexProblem(f"expected a regex the matcher accepts: {e}") from None


def check_template(pattern: str, template: str) -> None:
    """Raise RegexProblem unless `template` is a valid replacement for `pattern` (\\1, \\g<n>)."""
    try:
        # sub() parses the template before scanning, even on an empty string.
        re.compile(pattern).sub(template, "")
    except re.error as e:
        raise RegexProblem(
            f"expected a valid replacement ({e.msg}); write \\\\ for a literal backslash"
        ) from None


def compile_pattern(pattern: str) -> PatternLike:
    """Check and compile a user regex for time-limited matching (`regex` module)."""
    check_regex(pattern)
    compiled: PatternLike = _regex.compile(scoped_source(pattern))
    return compiled

