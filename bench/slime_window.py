#!/usr/bin/env python3
"""A real slime window merged into a synthetic translated fork that diverged like vime.

The upstream is a clone of THUDM/slime. The fork is translate(slime at the cutoff) with
the DESIGN example config, plus one commit of the fork's own work, generated from a seed:

- the fork edits a share of the files the window modifies, at one to three places each,
  most of them close to a line upstream changes (the hot spots a real fork touches too):
  a changed line, one to three added lines, or a deleted line;
- it deleted a few files the window modifies (modify/delete);
- it added its own short version of a few files the window adds (add/add), the way vime
  has a one-line ``vllm.patch`` stub where slime adds a 910-line patch.

``forksync plan`` then merges the window, and the script prints how many review items
land in each tier and by which rule. The default window is the issue's: #2013..#2125
(48 PRs, 153 files).

Usage: ``.venv/bin/python bench/slime_window.py --upstream PATH [--seed 1] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import difflib
import json
import random
import re
import shutil
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.engine.config import CONFIG_PATH, EXAMPLE_CONFIG  # noqa: E402
from bot.engine.pipeline import plan  # noqa: E402
from bot.engine.report.needs import workload  # noqa: E402
from tests.factory import (  # noqa: E402
    FORK_MAINTAINER,
    Commit,
    FastImport,
    _data,
    _quote,
    git_text,
    init_repo,
    make_translator,
    translated_entries,
)

CUTOFF_PR, TIP_PR = 2013, 2125
NEAR = 6  # lines around an upstream change that count as "close to it"


@dataclass(frozen=True)
class Divergence:
    """How the fork diverged; the defaults are the assumption the figures rest on."""

    seed: int = 1
    touch: float = 0.5  # share of the window's modified text files the fork edited
    near: float = 0.7  # share of its edits within NEAR lines of an upstream change
    deleted: int = 3  # window-modified files the fork deleted
    added: int = 3  # window-added files the fork added its own short version of


def find_pr(upstream: Path, number: int) -> str:
    """The first-parent commit of upstream main that merged PR ``number``."""
    try:
        log = git_text(upstream, "log", "--first-parent", "--format=%H %s", "HEAD")
    except RuntimeError as exc:
        raise SystemExit(f"slime_window: --upstream {upstream} is not a readable git "
                         f"repository (a clone of THUDM/slime): {exc}") from None
    for line in log.splitlines():
        sha, _, subject = line.partition(" ")
        if re.search(rf"\(#{number}\)$", subject) or subject.startswith(
                f"Merge pull request #{number} "):
            return sha
    raise SystemExit(f"slime_window: no commit for #{number} on the upstream's main")


def _edit_line(line: str, rng: random.Random) -> str:
    """A small content edit of one line, of the kinds a fork makes."""
    body, eol = line.rstrip("\n"), "\n" if line.endswith("\n") else ""
    number = re.search(r"(?<![\w.])\d+(?![\w.])", body)
    if number and rng.random() < 0.5:
        return body[:number.start()] + str(int(number.group()) + 1) + body[number.end():] + eol
    string = re.search(r"([\"'])([^\"']*)\1", body)
    if string:
        return body[:string.start(2)] + "vime " + body[string.start(2):] + eol
    call = re.search(r"\w\(", body)
    if call:
        at = call.end()
        return body[:at] + "backend=\"vllm\", " + body[at:] + eol
    return body + "  # vime" + eol


def _added_lines(anchor: str, path: str, rng: random.Random) -> list[str]:
    indent = anchor[: len(anchor) - len(anchor.lstrip())]
    if path.endswith((".md", ".rst")):
        return ["> vime: this step is different with vLLM.\n"]
    lines = [f"{indent}# vime: vLLM needs this too.\n"]
    for _ in range(rng.randint(0, 2)):
        lines.append(f"{indent}logger.debug(\"vime: %s\", {rng.choice(['args', 'engine'])})\n"
                     if path.endswith(".py") else f"{indent}# vime: see the vLLM docs.\n")
    return lines


def diverge(base: str, tip: str, path: str, rng: random.Random, near: float) -> str:
    """The fork's version of one file: one to three edits, most near upstream's changes."""
    lines = base.splitlines(keepends=True)
    if not lines:
        return base
    changed = [(i1, i2) for tag, i1, i2, _j1, _j2 in difflib.SequenceMatcher(
        None, lines, tip.splitlines(keepends=True), autojunk=False).get_opcodes()
        if tag != "equal"]
    sites: set[int] = set()
    for _ in range(rng.randint(1, 3)):
        if changed and rng.random() < near:
            i1, i2 = rng.choice(changed)
            at = rng.randint(max(0, i1 - NEAR), min(len(lines) - 1, max(i1, i2 - 1) + NEAR))
        else:
            at = rng.randrange(len(lines))
        sites.add(at)
    for at in sorted(sites, reverse=True):  # bottom up: indices above stay valid
        line = lines[at]
        kind = rng.random()
        if not line.strip() or kind < 0.5:
            if line.strip():
                lines[at] = _edit_line(line, rng)
            else:
                lines[at:at] = _added_lines(lines[at - 1] if at else "", path, rng)
        elif kind < 0.8:
            lines[at + 1:at + 1] = _added_lines(line, path, rng)
        elif not re.match(r"\s*(def|class|async def)\b", line):
            del lines[at]
    return "".join(lines)


def build_fork(upstream: Path, cutoff: str, tip: str, work: Path, d: Divergence) -> Path:
    """A bare fork: translate(cutoff) with the trailer, then one commit of its own work."""
    translator = make_translator(EXAMPLE_CONFIG)
    base = {p: c for p, _m, c in translated_entries(upstream, cutoff, translator)}
    modes = {p: m for p, m, _c in translated_entries(upstream, cutoff, translator)}
    theirs = {p: c for p, _m, c in translated_entries(upstream, tip, translator)}
    fork = init_repo(work / "fork.git", bare=True)
    fi = FastImport(fork)
    ops = bytearray(b"deleteall\n")
    for path, content in sorted(base.items()):
        if isinstance(content, bytes):
            ops += f"M {modes[path]} inline ".encode() + _quote(path) + b"\n" + _data(content)
        else:
            ops += f"M {modes[path]} {content} ".encode() + _quote(path) + b"\n"
    ops += b"M 100644 inline " + _quote(CONFIG_PATH) + b"\n" + _data(EXAMPLE_CONFIG.encode())
    sync = fi.add(Commit("refs/heads/main", f"Sync with upstream THUDM/slime #{CUTOFF_PR}\n\n"
                         f"Upstream-Sync: THUDM/slime@{cutoff}\nUpstream-Window: "
                         f"#{CUTOFF_PR}..#{CUTOFF_PR}\n", FORK_MAINTAINER, 1_700_000_000,
                         ops=bytes(ops)))
    rng = random.Random(d.seed)
    text = {p: c.decode() for p, c in base.items() if isinstance(c, bytes) and _is_text(c)}
    modified = sorted(p for p in text if p in theirs and theirs[p] != base[p]
                      and isinstance(theirs[p], bytes))
    added = sorted(p for p, c in theirs.items() if p not in base and isinstance(c, bytes)
                   and _is_text(c))
    gone = set(rng.sample(modified, min(d.deleted, len(modified))))
    own = bytearray()
    for path in modified:
        if path in gone:
            own += b"D " + _quote(path) + b"\n"
        elif rng.random() < d.touch:
            tip_text = theirs[path]
            assert isinstance(tip_text, bytes)
            new = diverge(text[path], tip_text.decode(), path, rng, d.near)
            own += b"M 100644 inline " + _quote(path) + b"\n" + _data(new.encode())
    for path in rng.sample(added, min(d.added, len(added))):
        own += (b"M 100644 inline " + _quote(path) + b"\n"
                + _data(b"# vime: not needed with vLLM; kept as a stub.\n"))
    fi.add(Commit("refs/heads/main", "vime: the fork's own work\n", FORK_MAINTAINER,
                  1_700_000_600, sync, ops=bytes(own)))
    fi.run()
    return fork


def _decide_kind(kind: str, rule: str, suggested: bool) -> str:
    """What a Decide item is, for the summary: a hunk with a starting point or without."""
    if kind != "conflict":
        return f"{kind}:"
    if rule == "add/add":
        return "add/add file:"
    return "hunk with a starting point:" if suggested else "hunk, question only:"


def _is_text(data: bytes) -> bool:
    if b"\0" in data[:8000]:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--upstream", type=Path, required=True, help="a clone of THUDM/slime")
    ap.add_argument("--from", dest="from_pr", type=int, default=CUTOFF_PR)
    ap.add_argument("--to", dest="to_pr", type=int, default=TIP_PR)
    ap.add_argument("--seed", type=int, default=Divergence.seed)
    ap.add_argument("--touch", type=float, default=Divergence.touch)
    ap.add_argument("--near", type=float, default=Divergence.near)
    ap.add_argument("--work", type=Path, default=ROOT / "bench" / ".cache" / "slime-window")
    ap.add_argument("--json", type=Path, help="write the plan's JSON report here")
    args = ap.parse_args(argv)
    d = Divergence(seed=args.seed, touch=args.touch, near=args.near)
    cutoff, tip = find_pr(args.upstream, args.from_pr), find_pr(args.upstream, args.to_pr)
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    fork = build_fork(args.upstream, cutoff, tip, args.work, d)
    started = time.perf_counter()
    p = plan(str(fork), str(args.upstream), to_rev=tip, workdir=str(args.work / "engine"))
    took = time.perf_counter() - started
    report = p.to_json()
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    items = p.items
    tiers = Counter(i.tier.value for i in items)
    s = report["summary"]
    print(f"window {p.window_label}: {s['prs']} PRs, {s['files']} paths "
          f"({', '.join(f'{v} {k}' for k, v in s['status'].items() if v)}); "
          f"divergence seed {d.seed}, touch {d.touch}, near {d.near}; plan {took:.2f} s")
    print(f"review items: {len(items)} — " + ", ".join(
        f"{tiers[t]} {t} ({100 * tiers[t] / max(1, len(items)):.0f}%)"
        for t in ("Decide", "Confirm", "Settled")))
    kinds = Counter((i.tier.value, i.kind.value, i.rule or "-") for i in items)
    for (tier, kind, rule), n in sorted(kinds.items()):
        print(f"  {tier:<8} {kind:<9} {rule:<26} {n}")
    hunks = [i for i in items if i.kind.value == "conflict"]
    offered = sum(1 for i in hunks if i.suggestion is not None)
    print(f"conflict hunks: {len(hunks)}, with a suggestion: {offered}")
    decide = [i for i in items if i.tier.value == "Decide"]
    by_kind = Counter(_decide_kind(i.kind.value, i.rule, i.suggestion is not None)
                      for i in decide)
    print("Decide items: " + ", ".join(f"{k} {n}" for k, n in sorted(by_kind.items())))
    every = [i for f in report["files"] for i in f["review_items"]]
    print(f"what the items need (the PR body's line): {workload(every)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
