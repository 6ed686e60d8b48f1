"""A real upstream window into a synthetic translated fork: attribution accuracy and the body.

Takes a local clone of the real upstream (for example THUDM/slime) and a window
(``--from '#2013' --to '#2125'``), builds a fork that is translate(upstream@cutoff) with
the DESIGN example config plus work of its own, diverged like vime (edits on lines the
window changes and elsewhere, files the fork deleted or moved), and runs ``plan`` on it.

Then it checks every conflict item's PRs against git itself: ``git log -L`` over the
region's lines at the tip and ``git blame --reverse`` over its base lines, each run per
item, with the region placed by an independent alignment (difflib) rather than by the
engine's own. It prints the agreement, the plan's time, and the sizes of what would be
posted. With ``--compare PYTHON`` (another checkout's interpreter) it does the same for
that checkout's plan, for a before/after.

    .venv/bin/python bench/real_window.py --upstream /path/to/slime.git --out /tmp/rw
"""

from __future__ import annotations

import argparse
import difflib
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.engine.config import EXAMPLE_CONFIG, load_config
from bot.engine.markers import find_marker_regions, split_lines
from bot.engine.pipeline import plan
from bot.engine.translate import Translator
from tests.factory import (
    FORK_MAINTAINER,
    Commit,
    FastImport,
    _data,
    _quote,
    add_alternates,
    git,
    git_text,
    init_repo,
    translated_entries,
)

CONFIG_PATH = ".github/forksync.yml"


def build_fork(upstream: Path, cutoff: str, tip: str, out: Path, seed: int) -> Path:
    """translate(upstream@cutoff) + the fork's own work, diverged like vime."""
    fork = out / "fork.git"
    if fork.exists():
        return fork
    translator = Translator(load_config(EXAMPLE_CONFIG, CONFIG_PATH).translate)
    fork = init_repo(fork, bare=True)
    add_alternates(fork, upstream)
    entries = translated_entries(upstream, cutoff, translator)
    entries.append((CONFIG_PATH, "100644", EXAMPLE_CONFIG.encode()))
    content = {p: c for p, _m, c in entries if isinstance(c, bytes)}
    fi = FastImport(fork)
    ops = b"deleteall\n" + b"".join(
        b"M " + mode.encode() + (b" inline " + _quote(p) + b"\n" + _data(c)
                                 if isinstance(c, bytes) else
                                 b" " + c.encode() + b" " + _quote(p) + b"\n")
        for p, mode, c in entries)
    msg = f"Sync with upstream THUDM/slime\n\nUpstream-Sync: THUDM/slime@{cutoff}\n"
    head = fi.add(Commit("refs/heads/main", msg, FORK_MAINTAINER, 1_700_000_000, ops=ops))

    rng = random.Random(seed)
    changed = git_text(upstream, "diff", "--name-status", "--no-renames", cutoff, tip)
    modified = sorted(line.split("\t")[1] for line in changed.splitlines()
                      if line.startswith("M\t"))
    work = bytearray()
    texts = [p for p in modified if not p.startswith(".github/")
             and translator.path(p) in content and b"\0" not in content[translator.path(p)]]
    rng.shuffle(texts)
    # 45 files the fork also worked on: two in three on lines the window changes (up to
    # three places each), all elsewhere too; the last one the fork also moved, so git's
    # rename detection has to find it.
    moved = texts[0]
    for k, p in enumerate(texts[:45]):
        fp = translator.path(p)
        lines = content[fp].decode("utf-8", "replace").splitlines(keepends=True)
        changed_lines = _changed_lines(upstream, cutoff, tip, p)
        at = rng.sample(changed_lines, min(3, len(changed_lines))) if k % 3 != 2 else []
        at.append(rng.randrange(len(lines)) if lines else 0)
        for i in at:
            if i < len(lines):
                lines[i] = lines[i].rstrip("\n") + ("  # vime" if fp.endswith(".py")
                                                    else " (vime)") + "\n"
        if p == moved:
            work += b"R " + _quote(fp) + b" " + _quote("vime_extra/" + fp) + b"\n"
            fp = "vime_extra/" + fp
        work += b"M 100644 inline " + _quote(fp) + b"\n" + _data("".join(lines).encode())
    # Files the fork deleted: upstream's changes to them are modify/delete conflicts.
    for p in texts[45:49]:
        work += b"D " + _quote(translator.path(p)) + b"\n"
    fi.add(Commit("refs/heads/main", "vime: the fork's own work\n", FORK_MAINTAINER,
                  1_700_000_100, head, ops=bytes(work)))
    fi.run()
    return fork


def _changed_lines(upstream: Path, cutoff: str, tip: str, path: str) -> list[int]:
    """0-based cutoff lines of ``path`` the window deleted or changed."""
    out = git_text(upstream, "diff", "-U0", cutoff, tip, "--", path)
    lines: list[int] = []
    for line in out.splitlines():
        if line.startswith("@@ "):
            old = line.split()[1][1:].split(",")
            start, count = int(old[0]), int(old[1]) if len(old) > 1 else 1
            lines.extend(range(start - 1, start - 1 + count))
    return lines



def oracle_prs(upstream: Path, report: dict[str, Any], merged_text: dict[str, str],
               translator: Translator, renames: dict[str, str]) -> dict[tuple[str, int], set[int]]:
    """Per conflict item (path, start line): the PRs git log -L + blame --reverse name."""
    numbers = {e["sha"]: e["number"] for e in report["window"]}
    child = {report["window"][i]["sha"]: report["window"][i + 1]["sha"]
             for i in range(len(report["window"]) - 1)}
    cutoff, tip = report["cutoff"], report["tip"]
    out: dict[tuple[str, int], set[int]] = {}
    for f in report["files"]:
        items = [i for i in f["review_items"] if i["kind"] == "conflict"]
        if not items or f["path"] not in merged_text:
            continue
        tip_path = f["upstream_path"]
        cut_path = renames.get(tip_path, tip_path)
        theirs = translator.text(git_text(upstream, "show", f"{tip}:{tip_path}"), tip_path)
        base = translator.text(git_text(upstream, "show", f"{cutoff}:{cut_path}"), cut_path)
        merged = merged_text[f["path"]]
        for side, text, rev, path in (("theirs", theirs, tip, tip_path),
                                      ("base", base, cutoff, cut_path)):
            spans = _align(merged, side, text)
            for item in items:
                key = (f["path"], item["start_line"])
                got = out.setdefault(key, set())
                span = spans.get(item["start_line"])
                if span is None or span[0] >= span[1]:
                    continue
                if side == "theirs":
                    shas = git_text(upstream, "log", "--first-parent", "-L",
                                    f"{span[0] + 1},{span[1]}:{path}", "-s", "--format=%H",
                                    f"{cutoff}..{rev}").split()
                else:
                    porcelain = git_text(upstream, "blame", "--reverse", "--porcelain",
                                         "-L", f"{span[0] + 1},{span[1]}",
                                         f"{cutoff}..{tip}", "--", path)
                    shas = [child[p[0]] for line in porcelain.splitlines()
                            if len(p := line.split()) >= 3 and len(p[0]) == 40
                            and p[1].isdigit() and p[0] != tip and p[0] in child]
                got.update(numbers[s] for s in shas if numbers.get(s) is not None)
    return out


def _align(merged: str, side: str, side_file: str) -> dict[int, tuple[int, int]]:
    """Region start line -> [start, end) of its ``side`` section in ``side_file``, by difflib."""
    lines = split_lines(merged)
    resolved: list[str] = []
    spans: dict[int, tuple[int, int]] = {}
    pos = 0
    for r in find_marker_regions(merged):
        resolved.extend(lines[pos:r.start_line - 1])
        start = len(resolved)
        resolved.extend(split_lines(r.theirs if side == "theirs" else (r.base or "")))
        spans[r.start_line] = (start, len(resolved))
        pos = r.end_line
    resolved.extend(lines[pos:])
    target = split_lines(side_file)
    sm = difflib.SequenceMatcher(None, resolved, target, autojunk=False)
    where: dict[int, int] = {}
    for a, b, size in sm.get_matching_blocks():
        for k in range(size):
            where[a + k] = b + k
    out: dict[int, tuple[int, int]] = {}
    for start_line, (s, e) in spans.items():
        if s < e and s in where and e - 1 in where:
            out[start_line] = (where[s], where[e - 1] + 1)
    return out


def accuracy(report: dict[str, Any], oracle: dict[tuple[str, int], set[int]]) -> tuple[int, int]:
    same = total = 0
    for f in report["files"]:
        for item in f["review_items"]:
            key = (f["path"], item["start_line"])
            if item["kind"] != "conflict" or key not in oracle or not oracle[key]:
                continue
            total += 1
            same += set(item["prs"]) == oracle[key]
    return same, total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--from", dest="from_rev", default="#2013")
    ap.add_argument("--to", dest="to_rev", default="#2125")
    ap.add_argument("--out", default="/tmp/forksync-real-window")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=8)
    ap.add_argument("--compare", help="python of another checkout, for a before/after")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    upstream = Path(args.upstream)
    branch = git_text(upstream, "symbolic-ref", "--short", "HEAD").strip()
    from bot.engine.git import Git
    from bot.engine.window import resolve_rev
    up = Git(upstream)
    cutoff = resolve_rev(up, args.from_rev, branch, "--from")
    tip = resolve_rev(up, args.to_rev, branch, "--to")
    fork = build_fork(upstream, cutoff, tip, out, args.seed)
    times = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        p = plan(str(fork), str(upstream), to_rev=tip, workdir=str(out / "work"))
        times.append(time.perf_counter() - t0)
    report = p.to_json()
    (out / "report.json").write_text(json.dumps(report, indent=1))
    work = Git(p.work_git_dir)
    merged = {f["path"]: work.text("cat-file", "blob", f"{p.merged_tree}:{f['path']}")
              for f in report["files"] if f["status"] == "conflict"
              and any(i["kind"] == "conflict" for i in f["review_items"])}
    translator = Translator(load_config(EXAMPLE_CONFIG, CONFIG_PATH).translate)
    renames = {}
    for line in git_text(upstream, "diff", "--name-status", "-M", cutoff, tip).splitlines():
        parts = line.split("\t")
        if parts[0].startswith("R"):
            renames[parts[2]] = parts[1]
    oracle = oracle_prs(upstream, report, merged, translator, renames)
    same, total = accuracy(report, oracle)
    s = report["summary"]
    print(f"window {report['window_label']}: {s['prs']} PRs, {s['files']} paths, "
          f"status {s['status']}, {s['review_items']} items {s['tiers']}")
    print(f"plan: median {statistics.median(times):.3f} s (min {min(times):.3f}, "
          f"max {max(times):.3f}, {len(times)} runs)")
    print(f"attribution: {same}/{total} conflict items match git log -L + blame --reverse "
          f"({100 * same / max(total, 1):.1f}%)")
    for f in report["files"]:
        for item in f["review_items"]:
            key = (f["path"], item["start_line"])
            if item["kind"] == "conflict" and oracle.get(key) and set(item["prs"]) != oracle[key]:
                print(f"  differs {item['id']} {f['path']} L{item['start_line']}: "
                      f"ours {item['prs']} git {sorted(oracle[key])}")
    if args.compare:
        code = (f"import json,sys; from bot.engine.pipeline import plan; "
                f"p=plan({str(fork)!r},{str(upstream)!r},to_rev={tip!r},"
                f"workdir={str(out / 'work-before')!r}); print(json.dumps(p.to_json()))")
        cwd = Path(args.compare).resolve().parent.parent.parent
        before = json.loads(subprocess.run([args.compare, "-c", code], cwd=cwd, check=True,
                                           capture_output=True, text=True).stdout)
        (out / "report-before.json").write_text(json.dumps(before, indent=1))
        b_same, b_total = accuracy(before, oracle)
        print(f"before: {b_same}/{b_total} conflict items match "
              f"({100 * b_same / max(b_total, 1):.1f}%)")
    git(fork, "count-objects")


if __name__ == "__main__":
    main()
