"""Spotting regexes that can backtrack catastrophically (ReDoS), on the stdlib parser's tree.

A heuristic by design (see `redos_reason`): it may refuse a harmless pattern and
cannot prove one safe, which is why user patterns also match under a time limit.
"""

from __future__ import annotations

import importlib
import re
import warnings
from collections.abc import Iterator
from typing import Any

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


def parse(pattern: str) -> Any:
    """The stdlib parser's tree of `pattern`; raises `re.error` (and may warn) as `re` would."""
    return _PARSER.parse(pattern)


def _op(item: tuple[Any, Any]) -> str:
    return str(item[0])


def uses_backreference(seq: Any) -> bool:
    """Does the parsed pattern refer back to a group: `\\1`, `(?P=name)`, `(?(1)...)`?"""
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


    def follows(self, seq: Any, after: Chars) -> Iterator[tuple[tuple[Any, Any], Chars]]:
        """Every item in `seq` (depth first) with the characters that can come right after it.

        `after` is what can follow `seq` itself. Atomic groups, possessive repeats and
        lookarounds are not entered: nothing backtracks into them.
        """
        for i, item in enumerate(seq):
            rest = seq[i + 1 :]
            follow = self.first(rest) | (after if self.nullable(rest) else frozenset())
            yield item, follow
            op, av = _op(item), item[1]
            if op == "SUBPATTERN":
                yield from self.follows(av[3], follow)
            elif op == "BRANCH":
                for branch in av[1]:
                    yield from self.follows(branch, follow)
            elif op in ("MAX_REPEAT", "MIN_REPEAT"):
                again = self.first(av[2]) if av[1] > 1 else frozenset()
                yield from self.follows(av[2], follow | again)


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
    - a repeat anywhere inside it that can also consume what follows it,
      there or in the next repetition: `(.*a){12}`, `(.*,)+`, `(\\w+_)+`.
      Each repetition can then end at many places, and a failing match tries
      every way of cutting the text (polynomial with a high power, or worse).
      `([^,]*,){12}` is fine: `[^,]` never eats the `,` that ends it.

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
        for inner, follow in analysis.follows(body, analysis.first(body)):
            if str(inner[0]) in ("MAX_REPEAT", "MIN_REPEAT") and _big(inner[1][1]) \
                    and analysis.consumable(inner[1][2]) & follow:
                return ("a repeated group holds a repeat that can also consume what follows "
                        "it, so the text can be split between repetitions in many ways")
        for bop, bav in _walk(body):
            if str(bop) != "BRANCH":
                continue
            sigs = [analysis.signature(b) for b in bav[1]]
            for i, a in enumerate(sigs):
                if any(_overlap(a, b) for b in sigs[i + 1 :]):
                    return "a repeated group holds alternatives that can match the same text"
    return None

