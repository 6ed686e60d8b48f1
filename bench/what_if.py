"""What-ifs on replayed hunks: ways of resolving that no rule offers, measured before
anyone builds them.

Reads the records ``bench/replay_suggestions.py --json FILE`` writes (every replayed
conflict hunk: its three sides, what forksync proposed and what people committed) and
asks, per group of sets (the training sets, then each validation set):

- **a learned side as a starting point.** Each repository's older half of merges (by
  the list's order) teaches, per rule, which side people kept; on its newer half, a
  Decide hunk without a suggestion gets that side as its one-click starting point where
  the older half's count clears ``--floor`` (the Wilson lower bound of the side's
  share; 0 asks for a plain majority), over at least ``MIN_HUNKS`` hunks in
  ``MIN_MERGES`` merges. It prints the newer halves' one-click share without and with
  it, and how often the offered side was right.
- **one side's added lines moved into the other's version.** At a hunk where no finer
  merge helped (rules ``conflict``), where one side only added lines to the base: the
  other side's version with those lines inserted after the base line above them (or
  before the one below), wherever that line still is.
- **numbers both sides shifted.** Where the three sides differ only in numbers and
  both changed the same number: base + both shifts (tile or enum numbering that each
  side moved by the entries it inserted).

    .venv/bin/python bench/what_if.py FILE.json [--floor 0.5]

A what-if is a measurement, not a rule: bench/README.md says which were tried and why
none is offered.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.replay_suggestions import MERGES, TRAINING, read_merges  # noqa: E402
from bot.engine.markers import split_lines  # noqa: E402
from bot.engine.replay import same_text  # noqa: E402
from bot.engine.tiers import wilson_lower  # noqa: E402

Hunk = dict[str, Any]
MIN_HUNKS = 5
MIN_MERGES = 3
CLASH = ("conflict", "conflict, the fork's file")  # no finer merge resolved these
_NUMBER = re.compile(r"(\d+)")


def groups(hunks: Iterable[Hunk]) -> dict[str, list[Hunk]]:
    """The training sets together, then each other set on its own."""
    out: dict[str, list[Hunk]] = defaultdict(list)
    for h in hunks:
        out["training" if h["set"] in TRAINING else h["set"]].append(h)
    return dict(sorted(out.items(), key=lambda kv: (kv[0] != "training", kv[0])))


# ------------------------------------------------------------ a learned side, as a start


def learned_start(hunks: Sequence[Hunk], order: dict[tuple[str, str], int],
                  floor: float) -> Counter[str]:
    """Per repository, the older half teaches a side per rule; the newer half tests it on
    its Decide hunks without a suggestion. Counts: tested, right now, right with it,
    offered and right when offered (per side)."""
    out: Counter[str] = Counter()
    by_repo: dict[str, list[Hunk]] = defaultdict(list)
    for h in hunks:
        by_repo[h["repo"]].append(h)
    for repo, mine in by_repo.items():
        merges = sorted({h["merge"] for h in mine}, key=lambda m: order.get((repo, m), 0))
        older = set(merges[:len(merges) // 2])
        taught: dict[str, Counter[str]] = defaultdict(Counter)
        seen: dict[str, set[str]] = defaultdict(set)
        for h in mine:
            if h["merge"] in older:
                taught[h["rule"]].update(n=1, ours=h["ours_right"], theirs=h["theirs_right"])
                seen[h["rule"]].add(h["merge"])
        for h in mine:
            if h["merge"] in older:
                continue
            out.update(tested=1, now=h["right"])
            right = h["right"]
            side = _side(taught.get(h["rule"]), len(seen[h["rule"]]), floor)
            if side and h["tier"] == "Decide" and not h["suggested"]:
                right = h[f"{side}_right"]
                out.update({f"offered {side}": 1, f"right {side}": right})
            out.update(after=right)
    return out


def _side(count: Counter[str] | None, merges: int, floor: float) -> str | None:
    """The side people kept most at a rule's hunks, if it clears ``floor``."""
    if count is None or count["n"] < MIN_HUNKS or merges < MIN_MERGES:
        return None
    side = max(("ours", "theirs"), key=lambda s: count[s])
    if floor > 0:
        return side if wilson_lower(count[side], count["n"]) >= floor else None
    return side if 2 * count[side] > count["n"] else None


# ------------------------------------------------- one side's added lines, in the other's


def inserted(base: str, side: str) -> list[tuple[int, list[str]]] | None:
    """Where ``side`` added lines to ``base`` (base index, lines), if it only added."""
    b, s = split_lines(base), split_lines(side)
    ops = difflib.SequenceMatcher(None, b, s, autojunk=False).get_opcodes()
    if any(tag not in ("equal", "insert") for tag, *_ in ops):
        return None
    return [(i1, s[j1:j2]) for tag, i1, _i2, j1, j2 in ops if tag == "insert"] or None


def moved_into(base: str, adder: str, other: str) -> str | None:
    """``other`` with the lines ``adder`` added, each after the base line above it (or
    before the one below) where ``other`` still has it; None if one has no place."""
    added = inserted(base, adder)
    if added is None:
        return None
    b, o = split_lines(base), split_lines(other)
    where = {blk.a + k: blk.b + k
             for blk in difflib.SequenceMatcher(None, b, o, autojunk=False)
             .get_matching_blocks() for k in range(blk.size)}
    placed = []
    for at, lines in added:
        if at - 1 in where:
            placed.append((where[at - 1] + 1, lines))
        elif at in where:
            placed.append((where[at], lines))
        elif at in (0, len(b)):
            placed.append((0 if at == 0 else len(o), lines))
        else:
            return None
    out = list(o)
    for pos, lines in sorted(placed, key=lambda p: -p[0]):
        out[pos:pos] = lines
    return "".join(out)


# --------------------------------------------------------------- numbers, shifts added


def shifts_added(base: str, ours: str, theirs: str) -> str | None:
    """``base`` with every number both sides changed moved by both shifts, and every
    number one side changed taken from it; None unless the sides differ only in numbers
    and both changed one number at least."""
    b, o, t = (_NUMBER.split(x) for x in (base, ours, theirs))
    if not len(b) == len(o) == len(t):
        return None
    out, both = [], False
    for i, (x, y, z) in enumerate(zip(b, o, t, strict=True)):
        if i % 2 == 0:  # the text between numbers
            if not x == y == z:
                return None
            out.append(x)
        elif y != x and z != x:
            both = True
            out.append(str(int(y) + int(z) - int(x)))
        else:
            out.append(y if y != x else z)
    return "".join(out) if both else None


def resolutions(hunks: Iterable[Hunk]) -> Counter[str]:
    """How often each what-if that applies was what people committed."""
    out: Counter[str] = Counter()
    for h in hunks:
        if h["rule"] in CLASH:
            for who, adder, other in (("fork", h["ours"], h["theirs"]),
                                      ("upstream", h["theirs"], h["ours"])):
                moved = moved_into(h["base"], adder, other)
                if moved is not None:
                    out.update({f"{who} added: n": 1,
                                f"{who} added: right": same_text(moved, h["committed"]),
                                f"{who} added: ours": h["ours_right"],
                                f"{who} added: theirs": h["theirs_right"]})
        summed = shifts_added(h["base"], h["ours"], h["theirs"])
        if summed is not None:
            out.update({"shifts: n": 1, "shifts: right": same_text(summed, h["committed"]),
                        "shifts: ours": h["ours_right"], "shifts: theirs": h["theirs_right"],
                        "shifts: now": h["right"]})
    return out


# ------------------------------------------------------------------------------ report


def _pct(n: int, d: int) -> str:
    return f"{100 * n / d:.1f}%" if d else "–"


def report(hunks: Sequence[Hunk], order: dict[tuple[str, str], int], floor: float) -> str:
    what = f"Wilson lower bound ≥ {floor}" if floor > 0 else "a plain majority"
    lines = [f"== a learned side as a starting point ({what}, ≥ {MIN_HUNKS} hunks in "
             f"≥ {MIN_MERGES} merges of the older half); the newer halves",
             f"  {'sets':10}{'hunks':>8}{'one click now':>15}{'with it':>9}"
             f"{'ours: right/offered':>22}{'theirs: right/offered':>24}"]
    parts = groups(hunks)
    for name, mine in parts.items():
        c = learned_start(mine, order, floor)
        ours = f"{c['right ours']}/{c['offered ours']}"
        theirs = f"{c['right theirs']}/{c['offered theirs']}"
        lines.append(f"  {name:10}{c['tested']:>8}{_pct(c['now'], c['tested']):>15}"
                     f"{_pct(c['after'], c['tested']):>9}{ours:>22}{theirs:>24}")
    lines += ["", "== what people committed, where each what-if applies "
              "(right / applies; ours and theirs for comparison)"]
    for name, mine in parts.items():
        c = resolutions(mine)
        cells = []
        for key in ("fork added", "upstream added", "shifts"):
            n, right = c[f"{key}: n"], c[f"{key}: right"]
            ours, theirs = c[f"{key}: ours"], c[f"{key}: theirs"]
            cells.append(f"{key} {right}/{n} ({_pct(right, n)}; ours {_pct(ours, n)}, "
                         f"theirs {_pct(theirs, n)})")
        lines.append(f"  {name}: " + " · ".join(cells))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("records", type=Path, help="a --json file of replay_suggestions.py")
    ap.add_argument("--floor", type=float, default=0.5,
                    help="the Wilson lower bound a learned side needs (0: a majority)")
    ap.add_argument("--merges", type=Path, default=MERGES)
    args = ap.parse_args(argv)
    try:
        hunks = json.loads(args.records.read_text())["hunks"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        ap.error(f"{args.records}: not a --json file of replay_suggestions.py ({exc})")
    order = {(repo, sha): i for i, (_s, repo, sha) in enumerate(read_merges(args.merges, None))}
    print(report(hunks, order, args.floor))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
