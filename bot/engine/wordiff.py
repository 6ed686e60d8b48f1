"""Two edits of one text, word by word: the words each replaced, and whether the two
replaced the same ones. Pure; only what review comments say is drawn from it.

Words are compared without the blanks between them, so an edit that also rewrapped a
line is still the words it changed. A run of changes a couple of words apart is one
change (``List[int]`` to ``Tuple[int, ...]`` replaces ``List[int]``, not ``List`` and
``]`` apart).
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import dataclass

_TOKEN = re.compile(r"\w+|[^\w\s]")
_BLANKS = re.compile(r"\s+")
_WORD = re.compile(r"\w")
GAP = 2  # changes at most this many words apart are one change
LIMIT = 60  # the longest text a sentence quotes
_OPEN, _CLOSE = "([{", ")]}"
MAX_TOKENS = 400  # past this many words per text, once the lines they share are cut: a
# rewrite, which no sentence sums up (and a word diff of repetitive text that long takes
# difflib seconds: it is quadratic or worse without its junk heuristic)

# What a Markdown code span in a comment cannot carry as it is: a backtick ends it, and a
# <details> tag, though shown as text there, is counted by the checks that keep a body's
# folds balanced (``report.limits.is_balanced``).
UNQUOTABLE = ("`", "<details", "</details")


def quotable(*texts: str) -> bool:
    """Whether each text can sit in a code span of a comment as it is."""
    return not any(bad in text for text in texts for bad in UNQUOTABLE)

Span = tuple[int, int, int, int]  # base tokens [i1, i2) became side tokens [j1, j2)


@dataclass(frozen=True)
class Clash:
    """The words both sides replaced, each with its own words."""

    base: str  # the words as base has them
    context: str  # base's text from the blank before them to their end (== base if none)
    ours: str  # what the fork put in their place
    theirs: str  # what upstream put in their place
    ours_more: bool  # the fork changed other words of the region too
    theirs_more: bool  # upstream changed other words of the region too


def _tokens(text: str) -> list[re.Match[str]]:
    return list(_TOKEN.finditer(text))


def _cut(*texts: str) -> list[str]:
    """The texts without the lines all of them begin and end with."""
    lines = [t.splitlines(keepends=True) for t in texts]
    head = 0
    while all(head < len(x) for x in lines) and len({x[head] for x in lines}) == 1:
        head += 1
    tail = 0
    while all(tail < len(x) - head for x in lines) and len({x[-1 - tail] for x in lines}) == 1:
        tail += 1
    return ["".join(x[head:len(x) - tail]) for x in lines]


def _too_long(*tokens: list[re.Match[str]]) -> bool:
    return max(len(t) for t in tokens) > MAX_TOKENS


def _ops(a: list[re.Match[str]], b: list[re.Match[str]]) -> list[tuple[str, int, int, int, int]]:
    """The opcodes of base ``a`` to side ``b``, changes ``GAP`` words apart joined."""
    raw = difflib.SequenceMatcher(None, [t.group() for t in a], [t.group() for t in b],
                                  autojunk=False).get_opcodes()
    out: list[tuple[str, int, int, int, int]] = []
    for op in raw:
        tag, _, i2, _, j2 = op
        if (tag != "equal" and len(out) >= 2 and out[-1][0] == "equal"
                and out[-1][2] - out[-1][1] <= GAP and out[-2][0] != "equal"):
            _, pi1, _, pj1, _ = out[-2]
            out[-2:] = [("replace", pi1, i2, pj1, j2)]
        else:
            out.append(op)
    return out


def _changes(ops: list[tuple[str, int, int, int, int]]) -> list[Span]:
    return [(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in ops if tag != "equal"]


def _text(text: str, tokens: list[re.Match[str]], j1: int, j2: int) -> str:
    """Tokens ``[j1, j2)`` as the text has them, blanks folded to one space."""
    if j2 <= j1:
        return ""
    return _BLANKS.sub(" ", text[tokens[j1].start():tokens[j2 - 1].end()])


def _side(ops: list[tuple[str, int, int, int, int]], u0: int, u1: int) -> tuple[int, int]:
    """The side's tokens where base has ``[u0, u1)``; no change straddles either end."""
    start = end = None
    for tag, i1, i2, j1, j2 in ops:
        if start is None and i1 <= u0 < i2:
            start = j1 + (u0 - i1) if tag == "equal" else j1
        if i1 <= u1 - 1 < i2:
            end = j1 + (u1 - i1) if tag == "equal" else j2
    assert start is not None and end is not None
    return start, end


def _depth(tokens: list[re.Match[str]], lo: int, hi: int) -> int:
    words = [t.group() for t in tokens[lo:hi]]
    return sum(w in _OPEN for w in words) - sum(w in _CLOSE for w in words)


def _inside(span: Span, u0: int, u1: int) -> bool:
    i1, i2 = span[0], span[1]
    return (u0 <= i1 and i2 <= u1) if i1 < i2 else u0 < i1 < u1


def _overlap(a: Span, b: Span) -> bool:
    return a[0] < a[1] and b[0] < b[1] and max(a[0], b[0]) < min(a[1], b[1])


def clash(base: str, ours: str, theirs: str) -> Clash | None:
    """The words both sides replaced, each with words of its own; None when the two edits
    replaced different words (or one only deleted or added), or the texts are too long
    to quote in a sentence."""
    base, ours, theirs = _cut(base, ours, theirs)
    b, o, t = _tokens(base), _tokens(ours), _tokens(theirs)
    if _too_long(b, o, t):
        return None
    ops_o, ops_t = _ops(b, o), _ops(b, t)
    ours_c, theirs_c = _changes(ops_o), _changes(ops_t)
    pairs = [(x, y) for x in ours_c for y in theirs_c if _overlap(x, y)]
    if len(pairs) != 1 or any(j1 == j2 for *_, j1, j2 in pairs[0]):
        return None
    x, y = pairs[0]
    u0, u1 = min(x[0], y[0]), max(x[1], y[1])
    grown = True
    while grown:  # take in whole every change the words reach into
        grown = False
        for s in ours_c + theirs_c:
            if s[0] < u1 and s[1] > u0 and (s[0] < u0 or s[1] > u1):
                u0, u1, grown = min(u0, s[0]), max(u1, s[1]), True
    spans = [[u0, u1], list(_side(ops_o, u0, u1)), list(_side(ops_t, u0, u1))]
    texts = (b, o, t)
    # Words all three have at either end are context, not the clash...
    while all(lo < hi for lo, hi in spans) and len({texts[k][lo].group() for k, (lo, _)
                                                      in enumerate(spans)}) == 1:
        for span in spans:
            span[0] += 1
    while all(lo < hi for lo, hi in spans) and len({texts[k][hi - 1].group() for k, (_, hi)
                                                      in enumerate(spans)}) == 1:
        for span in spans:
            span[1] -= 1
    # ...but a bracket opened inside is closed inside: `List[int]`, not `List[int`.
    for _ in range(LIMIT):
        depths = [_depth(texts[k], lo, hi) for k, (lo, hi) in enumerate(spans)]
        step = 1 if max(depths) > 0 else -1 if min(depths) < 0 else 0
        ends = [hi if step > 0 else lo - 1 for lo, hi in spans]
        if not step or not all(0 <= e < len(texts[k]) for k, e in enumerate(ends)) or len(
                {texts[k][e].group() for k, e in enumerate(ends)}) != 1:
            break
        for span in spans:
            span[1 if step > 0 else 0] += step
    (b0, b1), (o0, o1), (t0, t1) = spans
    said, mine, yours = _text(base, b, b0, b1), _text(ours, o, o0, o1), _text(theirs, t, t0, t1)
    if (not (said and mine and yours) or max(len(said), len(mine), len(yours)) > LIMIT
            or not quotable(said, mine, yours)):
        return None
    start = b[b0].start()
    line_start = base.rfind("\n", 0, start) + 1
    blank = max(base.rfind(" ", line_start, start), base.rfind("\t", line_start, start))
    end = b[b1 - 1].end()
    for quote in "\"'":  # `"4.17.20"`, not `"4.17.20`
        if base.count(quote, max(blank + 1, line_start), end) % 2:
            close = base.find(quote, end, base.find("\n", end) % (len(base) + 1))
            end = close + 1 if close >= 0 else end
    context = _BLANKS.sub(" ", base[max(blank + 1, line_start):end])
    return Clash(said, context if len(context) <= LIMIT else said, mine, yours,
                 any(not _inside(s, u0, u1) for s in ours_c),
                 any(not _inside(s, u0, u1) for s in theirs_c))


def dropped_words(old: str, new: str, most: int = 3) -> str:
    """```ModuleFusedSDPA```, or ```a`, `b`, `c` and 4 more words``: the words of ``old``
    that ``new`` does not have where ``old`` had them; "" when none (punctuation and
    blanks are not words; nor when the texts are too long to tell)."""
    old, new = _cut(old, new)
    a, b = _tokens(old), _tokens(new)
    if _too_long(a, b):
        return ""
    gone: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(
            None, [x.group() for x in a], [x.group() for x in b], autojunk=False).get_opcodes():
        if tag in ("delete", "replace"):
            kept = Counter(x.group() for x in b[j1:j2])  # a word moved within the change
            for x in a[i1:i2]:
                w = x.group()
                if kept[w]:
                    kept[w] -= 1
                elif _WORD.match(w):
                    gone.append(w)
    gone = list(dict.fromkeys(gone))  # a word lost twice is named once
    if not gone:
        return ""
    shown = [f"`{w}`" for w in gone[:most]]
    more = len(gone) - most
    if more > 0:
        return ", ".join(shown) + f" and {more} more word{'s' if more != 1 else ''}"
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


__all__ = ["Clash", "clash", "dropped_words"]
