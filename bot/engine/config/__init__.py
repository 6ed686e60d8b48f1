"""Load `.github/forksync.yml` into typed, precompiled config, or fail with file, line and key.

The loader walks PyYAML's composed node tree rather than the constructed dicts,
so every key and list item keeps its line for the error message. Everything a
user can get wrong is a `ConfigError`; nothing in here lets a traceback escape.

Regexes are Python `re` syntax. They are validated (and analysed) with the
standard `re` parser, then compiled with the `regex` module (mrab-regex), whose
matching accepts a `timeout=`: a pattern that slips past the static
catastrophic-backtracking check below still cannot hang the process.
"""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import importlib
import json
import re
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol

import regex as _regex  # type: ignore[import-untyped]  # mrab-regex ships no stubs
import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from bot.errors import ConfigError, ForksyncError

CONFIG_PATH = ".github/forksync.yml"

ACTIONS = ("ours", "theirs", "skip", "manual")

# Seconds one flag pattern may spend on one line. Lines are short, so a pattern
# that needs longer than this is backtracking, not working.
FLAG_TIMEOUT = 1.0

# The example from DESIGN.md. Kept here (not only in the docs) so that
# `check-config`, the README and the tests all use the one copy.
EXAMPLE_CONFIG = r"""upstream: {repo: THUDM/slime, branch: main}
translate:
  paths:                       # longest prefix first; regex: true for patterns
    - {from: "slime/backends/sglang_utils/", to: "vime/backends/vllm_utils/"}
  keep:                        # spans copied unchanged
    - 'sglang\.srt(\.\w+)+'
    - 'https?://github\.com/THUDM/slime\S*'
  replace:
    - {from: '--sglang-mem-fraction-static', to: '--vllm-gpu-memory-utilization'}
    - {from: 'SGLang(?=[A-Z_])', to: VLLM, regex: true}
    - {from: SGLang, to: vLLM}
    - {from: sglang, to: vLLM, files: ['*.md']}   # scoped: prose in docs
    - {from: sglang, to: vllm}
    - {from: '(?<![A-Za-z])slime(?![A-Za-z])', to: vime, regex: true}
  exclude: ['*.png', '*.svg', 'README*.md']       # content kept as is, path still translated
policies:                      # first matching glob wins
  - {paths: ['.github/workflows/**'], action: skip}      # fork keeps its own
  - {paths: ['docker/Dockerfile'],    action: ours}
  - {paths: ['docker/version.txt'],   action: theirs}
  - {paths: ['vime/rollout/vllm_rollout.py'], action: manual}  # port by hand
flags:                         # upstream lines that always need a human look
  - {pattern: '--sglang-(enable-metrics|ep-size|speculative-)', say: 'no vLLM equivalent'}
"""


# --------------------------------------------------------------------------- public types


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


class FlagTimeoutError(ForksyncError):
    """A flag pattern took too long on one line: it backtracks, so the config must change."""

    exit_code = 2


@dataclass(frozen=True)
class Flag:
    """`flags[i]`: upstream-added lines matching `pattern` become questions saying `say`."""

    pattern: str
    say: str
    regex: PatternLike = field(compare=False)

    def matches(self, line: str) -> bool:
        """Search `line` under `FLAG_TIMEOUT`; prefer this over `regex.search` for that reason."""
        try:
            return self.regex.search(line, timeout=FLAG_TIMEOUT) is not None  # type: ignore[call-arg]
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

    def policy_for(self, fork_path: str) -> Policy | None:
        """The first policy whose globs match `fork_path`, or None."""
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


# --------------------------------------------------------------------------- globs


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


# --------------------------------------------------------------------------- regexes


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

    Refused: syntax errors; matches of the empty string (an empty keep or
    replace match would shadow every rule after it at that position);
    backreferences (rules are combined into one alternation, which renumbers
    groups); global flags other than leading i/m/s/x; and the shapes that
    backtrack catastrophically (see `redos_reason`).
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
            parsed = _PARSER.parse(pattern)
            re.compile(pattern)
    except re.error as e:
        raise RegexProblem(f"expected a valid Python regex: {e.msg} at position {e.pos}") from None
    except FutureWarning as w:
        raise RegexProblem(
            f"expected an unambiguous character set ({w}); escape the [ or -"
        ) from None
    if _OTHER_GLOBAL_FLAGS.search(pattern):
        raise RegexProblem("expected no (?a)/(?L)/(?u) global flags; use a scoped group")
    if _uses_backreference(parsed):
        raise RegexProblem(
            "expected a regex without backreferences (\\1, (?P=name), (?(1)...)): "
            "rules are combined into one scan"
        )
    if not allow_empty and parsed.getwidth()[0] == 0:
        raise RegexProblem("expected a regex that matches at least one character")
    reason = redos_reason(pattern)
    if reason:
        raise RegexProblem(f"expected a regex that cannot backtrack catastrophically: {reason}")
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


# The standard library's regex parser is private but stable across 3.11+, and
# typeshed has no stubs for it, hence the untyped import.
_PARSER: Any = importlib.import_module("re._parser")
_C: Any = importlib.import_module("re._constants")

# A repeat bounded this high behaves like an unbounded one for backtracking.
_BIG_REPEAT = 10

# Character sets are approximated by the characters of a sample universe they
# contain: ASCII, a few non-ASCII letters, digits and spaces, plus every
# literal the pattern mentions. Enough to tell `\.` from `\w`.
_SAMPLE = frozenset(chr(i) for i in range(128)) | frozenset("éßΩж中٣\u00a0\u2028")
_CATEGORIES = {
    "CATEGORY_DIGIT": r"\d",
    "CATEGORY_NOT_DIGIT": r"\D",
    "CATEGORY_SPACE": r"\s",
    "CATEGORY_NOT_SPACE": r"\S",
    "CATEGORY_WORD": r"\w",
    "CATEGORY_NOT_WORD": r"\W",
    "CATEGORY_LINEBREAK": r"\n",
    "CATEGORY_NOT_LINEBREAK": r"[^\n]",
}

Chars = frozenset[str]


def _op(item: tuple[Any, Any]) -> str:
    return str(item[0])


def _uses_backreference(seq: Any) -> bool:
    return any(_op(item) in ("GROUPREF", "GROUPREF_EXISTS") for item in _walk(seq))


def _walk(seq: Any) -> Iterator[tuple[Any, Any]]:
    """Every (op, av) item in a parsed pattern, depth first."""
    for item in seq:
        yield item
        for sub in _children(item):
            yield from _walk(sub)


def _children(item: tuple[Any, Any]) -> list[Any]:
    op, av = _op(item), item[1]
    if op in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
        return [av[2]]
    if op == "SUBPATTERN":
        return [av[3]]
    if op == "ATOMIC_GROUP":
        return [av]
    if op in ("ASSERT", "ASSERT_NOT"):
        return [av[1]]
    if op == "BRANCH":
        return list(av[1])
    if op == "GROUPREF_EXISTS":
        return [s for s in av[1:] if s is not None]
    return []


class _Analysis:
    """Just enough of a regex's structure to spot catastrophic backtracking."""

    def __init__(self, parsed: Any) -> None:
        extra = set()
        for op, av in _walk(parsed):
            name = str(op)
            if name in ("LITERAL", "NOT_LITERAL"):
                extra.add(chr(av))
            elif name == "IN":
                for iop, iav in av:
                    if str(iop) == "LITERAL":
                        extra.add(chr(iav))
                    elif str(iop) == "RANGE":
                        extra.update((chr(iav[0]), chr(iav[1])))
        self.universe: Chars = _SAMPLE | frozenset(extra)
        self.icase = bool(parsed.state.flags & _C.SRE_FLAG_IGNORECASE)
        self._cats = {
            k: frozenset(c for c in self.universe if re.fullmatch(v, c))
            for k, v in _CATEGORIES.items()
        }

    def _fold(self, chars: Chars) -> Chars:
        if not self.icase:
            return chars
        return chars | frozenset(c.swapcase() for c in chars)

    def single(self, item: tuple[Any, Any]) -> Chars | None:
        """Characters a one-character item can consume, or None if it is not one."""
        op, av = _op(item), item[1]
        if op == "LITERAL":
            return self._fold(frozenset(chr(av)))
        if op == "NOT_LITERAL":
            return self.universe - self._fold(frozenset(chr(av)))
        if op == "ANY":
            return self.universe
        if op == "IN":
            chars: set[str] = set()
            negate = False
            for iop, iav in av:
                name = str(iop)
                if name == "NEGATE":
                    negate = True
                elif name == "LITERAL":
                    chars.add(chr(iav))
                elif name == "RANGE":
                    lo, hi = iav
                    chars.update(c for c in self.universe if lo <= ord(c) <= hi)
                elif name == "CATEGORY":
                    chars.update(self._cats.get(str(iav), self.universe))
                else:  # unknown member: assume it can be anything
                    chars.update(self.universe)
            folded = self._fold(frozenset(chars))
            return self.universe - folded if negate else folded
        return None

    def nullable(self, seq: Any) -> bool:
        return all(self._item_nullable(item) for item in seq)

    def _item_nullable(self, item: tuple[Any, Any]) -> bool:
        op, av = _op(item), item[1]
        if self.single(item) is not None:
            return False
        if op in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            return bool(av[0] == 0 or self.nullable(av[2]))
        if op == "SUBPATTERN":
            return self.nullable(av[3])
        if op == "ATOMIC_GROUP":
            return self.nullable(av)
        if op == "BRANCH":
            return any(self.nullable(b) for b in av[1])
        return True  # anchors, lookarounds, backreferences: zero width (or unknown)

    def first(self, seq: Any) -> Chars:
        """Characters a match of `seq` can start with."""
        out: Chars = frozenset()
        for item in seq:
            out |= self._item_first(item)
            if not self._item_nullable(item):
                break
        return out

    def _item_first(self, item: tuple[Any, Any]) -> Chars:
        op, av = _op(item), item[1]
        single = self.single(item)
        if single is not None:
            return single
        if op in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            return self.first(av[2])
        if op == "SUBPATTERN":
            return self.first(av[3])
        if op == "ATOMIC_GROUP":
            return self.first(av)
        if op == "BRANCH":
            return frozenset().union(*(self.first(b) for b in av[1]))
        if op in ("GROUPREF", "GROUPREF_EXISTS"):
            return self.universe
        return frozenset()

    def consumable(self, seq: Any) -> Chars:
        """Every character any part of `seq` can consume (lookarounds excluded)."""
        out: set[str] = set()
        for item in seq:
            single = self.single(item)
            if single is not None:
                out |= single
            elif _op(item) not in ("ASSERT", "ASSERT_NOT"):
                for sub in _children(item):
                    out |= self.consumable(sub)
        return frozenset(out)

    def tails(self, seq: Any) -> Chars:
        """Characters an unbounded repeat at the very end of `seq` can keep consuming."""
        out: Chars = frozenset()
        for item in reversed(seq):
            out |= self._item_tails(item)
            if not self._item_nullable(item):
                break
        return out

    def _item_tails(self, item: tuple[Any, Any]) -> Chars:
        op, av = _op(item), item[1]
        if op in ("MAX_REPEAT", "MIN_REPEAT"):
            if _big(av[1]):
                return self.consumable(av[2])
            return self.tails(av[2])
        if op == "SUBPATTERN":
            return self.tails(av[3])
        if op == "BRANCH":
            return frozenset().union(*(self.tails(b) for b in av[1]))
        return frozenset()

    def signature(self, seq: Any) -> tuple[list[Chars], bool]:
        """The fixed leading character sets of `seq`, and whether more (unknown) may follow."""
        sig: list[Chars] = []
        for item in seq:
            single = self.single(item)
            if single is not None:
                sig.append(single)
            elif _op(item) == "SUBPATTERN":
                inner, open_ = self.signature(item[1][3])
                sig.extend(inner)
                if open_:
                    return sig, True
            else:
                return sig, True
        return sig, False


def _big(max_repeat: int) -> bool:
    return bool(max_repeat == _C.MAXREPEAT or max_repeat >= _BIG_REPEAT)


def _overlap(a: tuple[list[Chars], bool], b: tuple[list[Chars], bool]) -> bool:
    """Could two alternatives match the same text, or one a prefix of the other's?"""
    return all(x & y for x, y in zip(a[0], b[0], strict=False))


def redos_reason(pattern: str) -> str | None:
    """Why `pattern` may backtrack catastrophically, or None if no known shape is found.

    Looks at every repeat that is unbounded (or bounded at 10 or more) and
    not possessive, and refuses two shapes inside it:

    - a nested repeat that can end one iteration with characters the next
      iteration can start with: `(a+)+`, `(a*)*`, `(.*)*`, `(\\w+\\s?)*`.
      `(\\.\\w+)+` is fine: every iteration starts with a `.` that `\\w` never eats.
    - an alternation whose alternatives can match the same text, or one a
      prefix of another: `(a|a)*`, `(a|ab)+`, `(\\d+|\\w+)*`.

    This is a heuristic: it may refuse a harmless pattern and cannot prove a
    pattern safe, which is why matching also runs under a time limit.
    """
    try:
        return _redos_reason(pattern)
    except RecursionError:
        return "nested too deeply to check"


def _redos_reason(pattern: str) -> str | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # check_regex reports those
            parsed = _PARSER.parse(pattern)
    except re.error:
        return None
    analysis = _Analysis(parsed)
    for op, av in _walk(parsed):
        if str(op) not in ("MAX_REPEAT", "MIN_REPEAT") or not _big(av[1]):
            continue
        body = av[2]
        if analysis.tails(body) & analysis.first(body):
            return "a repeated group ends with a repeat that can also start the next repetition"
        for bop, bav in _walk(body):
            if str(bop) != "BRANCH":
                continue
            sigs = [analysis.signature(b) for b in bav[1]]
            for i, a in enumerate(sigs):
                if any(_overlap(a, b) for b in sigs[i + 1 :]):
                    return "a repeated group holds alternatives that can match the same text"
    return None


# --------------------------------------------------------------------------- the loader


def load_config_file(path: str) -> Config:
    """Read and load a config file; a missing or unreadable file is a ConfigError too."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise ConfigError(
            path, None, "file", "expected a config file, but it does not exist"
        ) from None
    except UnicodeDecodeError:
        raise ConfigError(path, None, "file", "expected UTF-8 text") from None
    except OSError as e:
        raise ConfigError(path, None, "file", f"expected a readable file: {e.strerror}") from None
    return load_config(text, path)


def load_config(text: str, source: str) -> Config:
    """Parse and validate config `text`; `source` names it in every error."""
    return _Loader(source).load(text)


_TOP_KEYS = ("upstream", "translate", "policies", "flags")
_UPSTREAM_KEYS = ("repo", "branch")
_TRANSLATE_KEYS = ("paths", "keep", "replace", "exclude")
_PATH_KEYS = ("from", "to", "regex")
_RULE_KEYS = ("from", "to", "regex", "word", "files")
_POLICY_KEYS = ("paths", "action")
_FLAG_KEYS = ("pattern", "say")

# GitHub's rules: owner is alphanumeric or single hyphens, up to 39 chars; the
# repository name is letters, digits, `.`, `_` and `-`, up to 100 chars.
_REPO = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}/[A-Za-z0-9._-]{1,100}")
# The parts of `git check-ref-format` a typo can trip over.
_BAD_BRANCH = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|^[-/.]|[/.]$|\.lock$|//")

_TAGS = {
    "tag:yaml.org,2002:str": "a string",
    "tag:yaml.org,2002:int": "a number",
    "tag:yaml.org,2002:float": "a number",
    "tag:yaml.org,2002:bool": "true/false",
    "tag:yaml.org,2002:null": "nothing",
}


def _line(node: Node) -> int | None:
    mark = node.start_mark
    return mark.line + 1 if mark is not None else None


def _describe(node: Node) -> str:
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    return _TAGS.get(node.tag, f"a {node.tag} value")


class _Loader:
    """Walks the composed YAML tree; every error carries `source`, a line and a key path."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, node: Node | None, key: str, expected: str) -> ConfigError:
        return ConfigError(self.source, _line(node) if node is not None else None, key, expected)

    def load(self, text: str) -> Config:
        try:
            root = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.MarkedYAMLError as e:
            mark = e.problem_mark or e.context_mark
            line = mark.line + 1 if mark is not None else None
            problem = e.problem or e.context or "invalid YAML"
            raise ConfigError(
                self.source, line, "yaml", f"expected valid YAML: {problem}"
            ) from None
        except yaml.YAMLError as e:
            raise ConfigError(self.source, None, "yaml", f"expected valid YAML: {e}") from None
        except RecursionError:
            # PyYAML composes recursively; no real config nests this deep.
            raise ConfigError(
                self.source, None, "yaml", "expected YAML nested less deeply"
            ) from None
        if root is None:
            raise ConfigError(self.source, 1, "upstream", "expected a config with `upstream:`")
        top = self.mapping(root, "", _TOP_KEYS, required=("upstream",))
        upstream = self.mapping(top["upstream"], "upstream", _UPSTREAM_KEYS, required=("repo",))
        repo = self.string(upstream["repo"], "upstream.repo")
        if not _REPO.fullmatch(repo):
            raise self.fail(upstream["repo"], "upstream.repo", f"expected owner/repo, got {repo!r}")
        branch = "main"
        if "branch" in upstream:
            branch = self.string(upstream["branch"], "upstream.branch")
            if _BAD_BRANCH.search(branch):
                raise self.fail(
                    upstream["branch"], "upstream.branch", f"expected a branch name, got {branch!r}"
                )
        translate = TranslateConfig()
        if _given(top, "translate"):
            translate = self.translate(top["translate"])
        policies: tuple[Policy, ...] = ()
        if _given(top, "policies"):
            policies = tuple(
                self.policy(n, f"policies[{i}]") for i, n in self.items(top["policies"], "policies")
            )
        flags: tuple[Flag, ...] = ()
        if _given(top, "flags"):
            flags = tuple(self.flag(n, f"flags[{i}]") for i, n in self.items(top["flags"], "flags"))
        return Config(repo, branch, translate, policies, flags, self.source)

    # --- sections

    def translate(self, node: Node) -> TranslateConfig:
        m = self.mapping(node, "translate", _TRANSLATE_KEYS)
        paths: list[PathRule] = []
        keep: list[str] = []
        replace: list[Rule] = []
        exclude: tuple[str, ...] = ()
        if _given(m, "paths"):
            for i, n in self.items(m["paths"], "translate.paths"):
                paths.append(self.path_rule(n, f"translate.paths[{i}]"))
        if _given(m, "keep"):
            for i, n in self.items(m["keep"], "translate.keep"):
                key = f"translate.keep[{i}]"
                keep.append(self.regex(n, key, self.string(n, key)))
        if _given(m, "replace"):
            for i, n in self.items(m["replace"], "translate.replace"):
                replace.append(self.rule(n, f"translate.replace[{i}]"))
        if _given(m, "exclude"):
            exclude = self.globs(m["exclude"], "translate.exclude")
        return TranslateConfig(tuple(paths), tuple(keep), tuple(replace), exclude)

    def path_rule(self, node: Node, key: str) -> PathRule:
        m = self.mapping(node, key, _PATH_KEYS, required=("from", "to"))
        is_regex = self.boolean(m["regex"], f"{key}.regex") if "regex" in m else False
        from_ = self.string(m["from"], f"{key}.from", nonempty=True)
        to = self.string(m["to"], f"{key}.to")
        if is_regex:
            self.regex(m["from"], f"{key}.from", from_)
            self.template(m["to"], f"{key}.to", from_, to)
        return PathRule(from_, to, is_regex)

    def rule(self, node: Node, key: str) -> Rule:
        m = self.mapping(node, key, _RULE_KEYS, required=("from", "to"))
        is_regex = self.boolean(m["regex"], f"{key}.regex") if "regex" in m else False
        word = self.boolean(m["word"], f"{key}.word") if "word" in m else False
        from_ = self.string(m["from"], f"{key}.from", nonempty=True)
        to = self.string(m["to"], f"{key}.to")
        if is_regex:
            self.regex(m["from"], f"{key}.from", from_)
            self.template(m["to"], f"{key}.to", from_, to)
        files = self.globs(m["files"], f"{key}.files", nonempty=True) if "files" in m else ()
        return Rule(from_, to, is_regex, word, files)

    def policy(self, node: Node, key: str) -> Policy:
        m = self.mapping(node, key, _POLICY_KEYS, required=("paths", "action"))
        paths = self.globs(m["paths"], f"{key}.paths", nonempty=True)
        action = self.string(m["action"], f"{key}.action")
        if action not in ACTIONS:
            raise self.fail(
                m["action"],
                f"{key}.action",
                f"expected one of {', '.join(ACTIONS)}{_did_you_mean(action, ACTIONS)}",
            )
        return Policy(paths, action)

    def flag(self, node: Node, key: str) -> Flag:
        m = self.mapping(node, key, _FLAG_KEYS, required=("pattern", "say"))
        pattern = self.regex(
            m["pattern"], f"{key}.pattern", self.string(m["pattern"], f"{key}.pattern")
        )
        say = self.string(m["say"], f"{key}.say", nonempty=True)
        return Flag(pattern, say, _regex.compile(scoped_source(pattern)))

    # --- shapes

    def mapping(
        self, node: Node, key: str, allowed: tuple[str, ...], required: tuple[str, ...] = ()
    ) -> dict[str, Node]:
        """The mapping's values by key; unknown, duplicate and missing keys are errors."""
        if not isinstance(node, MappingNode):
            raise self.fail(
                node, key or "(top level)", f"expected a mapping, got {_describe(node)}"
            )
        out: dict[str, Node] = {}
        for knode, vnode in node.value:
            name = str(knode.value) if isinstance(knode, ScalarNode) else ""
            # An empty or non-scalar key still needs a readable key path.
            shown = name if name else "(empty key)" if isinstance(knode, ScalarNode) else "(?)"
            path = f"{key}.{shown}" if key else shown
            if name not in allowed:
                raise self.fail(
                    knode,
                    path,
                    f"unknown key{_did_you_mean(name, allowed)}; "
                    f"expected one of: {', '.join(allowed)}",
                )
            if name in out:
                raise self.fail(knode, path, "expected each key once, but it is repeated")
            out[name] = vnode
        for name in required:
            if name not in out:
                raise self.fail(
                    node, f"{key}.{name}" if key else name, "expected this key, but it is missing"
                )
        return out

    def items(self, node: Node, key: str) -> Iterator[tuple[int, Node]]:
        if not isinstance(node, SequenceNode):
            raise self.fail(node, key, f"expected a list, got {_describe(node)}")
        return enumerate(node.value)

    def string(self, node: Node, key: str, *, nonempty: bool = False) -> str:
        # Only real YAML strings: `to: yes` is a boolean and `to: 1.0` a number,
        # and silently stringifying them would not be what the user wrote.
        if not isinstance(node, ScalarNode) or node.tag != "tag:yaml.org,2002:str":
            hint = (
                "; quote it"
                if isinstance(node, ScalarNode) and node.tag != "tag:yaml.org,2002:null"
                else ""
            )
            raise self.fail(node, key, f"expected a string, got {_describe(node)}{hint}")
        value = str(node.value)
        if nonempty and not value:
            raise self.fail(node, key, "expected a non-empty string")
        return value

    def boolean(self, node: Node, key: str) -> bool:
        if not isinstance(node, ScalarNode) or node.tag != "tag:yaml.org,2002:bool":
            raise self.fail(node, key, f"expected true or false, got {_describe(node)}")
        # PyYAML resolves yes/no/on/off/true/false (any case) to bool, as YAML 1.1 says.
        return str(node.value).lower() in ("yes", "true", "on")

    def globs(self, node: Node, key: str, *, nonempty: bool = False) -> tuple[str, ...]:
        out = tuple(self.string(n, f"{key}[{i}]", nonempty=True) for i, n in self.items(node, key))
        if nonempty and not out:
            raise self.fail(node, key, "expected at least one glob")
        return out

    def regex(self, node: Node, key: str, pattern: str) -> str:
        try:
            check_regex(pattern)
        except RegexProblem as e:
            raise self.fail(node, key, str(e)) from None
        return pattern

    def template(self, node: Node, key: str, pattern: str, template: str) -> None:
        try:
            check_template(pattern, template)
        except RegexProblem as e:
            raise self.fail(node, key, str(e)) from None


def _given(section: dict[str, Node], key: str) -> bool:
    """Is an optional section there? `policies:` with every item commented out is empty."""
    node = section.get(key)
    return node is not None and node.tag != "tag:yaml.org,2002:null"


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean `{close[0]}`?)" if close else ""
