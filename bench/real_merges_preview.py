#!/usr/bin/env python3
"""The review forksync would post, checked on real merges of real forks.

For merges listed in ``bench/replay_merges.txt`` (a few per repository, picked with
``--seed``), it makes the fork as it was (its main at the merge's first parent) and the
upstream as it was (its main at the second parent), with no translation, and runs
``bench/real_preview.py`` on the window from their merge base: every thread inside one
hunk of the PR diff, every body within GitHub's limits, every one-click suggestion
covering exactly one marker region with exactly its item's proposal, and, with
``--simulate``, every request taken by the GitHub simulator with no OpenAPI violation.

    .venv/bin/python bench/real_merges_preview.py --clones /work/.mirror \\
        [--set valid13 ...] [--per-repo 2] [--seed 1] [--simulate] [--out DIR]

The repositories are bare, with the clone's objects as their alternates: nothing is
copied. It prints one line per merge and the totals; it exits 1 if any check failed.
"""

from __future__ import annotations

import argparse
import random
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.replay_suggestions import MERGES, find_clone, read_merges  # noqa: E402

CONFIG = "upstream: {repo: upstream/project, branch: main}\n"
_THREADS = re.compile(r"^threads: (\d+) of (\d+) items carried .*?\((\d+) with a one-click"
                      r".*?: (\d+) threads", re.M)


def git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True,
                          check=True).stdout.strip()


def as_it_was(clone: Path, merge: str, work: Path) -> tuple[Path, Path, str, str]:
    """The fork and the upstream at the merge's parents (bare, borrowing the clone's
    objects), their merge base and the upstream's head."""
    ours, theirs = git("-C", str(clone), "rev-parse", f"{merge}^1", f"{merge}^2").split()
    base = git("-C", str(clone), "merge-base", ours, theirs)
    objects = git("-C", str(clone), "rev-parse", "--path-format=absolute", "--git-path",
                  "objects")
    repos = []
    for name, head in (("fork", ours), ("upstream", theirs)):
        repo = work / f"{name}.git"
        git("init", "-q", "--bare", str(repo))
        (repo / "objects" / "info" / "alternates").write_text(objects + "\n")
        git("--git-dir", str(repo), "update-ref", "refs/heads/main", head)
        repos.append(repo)
    return repos[0], repos[1], base, theirs


def pick(merges: list[tuple[str, str, str]], per_repo: int, seed: int
         ) -> list[tuple[str, str, str]]:
    """``per_repo`` merges of each repository, the same ones for the same seed."""
    rng = random.Random(seed)
    by_repo: dict[str, list[tuple[str, str, str]]] = {}
    for m in merges:
        by_repo.setdefault(m[1], []).append(m)
    return [m for repo in sorted(by_repo)
            for m in rng.sample(by_repo[repo], min(per_repo, len(by_repo[repo])))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clones", type=Path, required=True, help="the directory of clones")
    ap.add_argument("--set", action="append", help="only these sets (default: every set)")
    ap.add_argument("--per-repo", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--simulate", action="store_true",
                    help="also post each preview through the GitHub simulator")
    ap.add_argument("--out", type=Path, default=Path("/tmp/forksync-real-merges"))
    args = ap.parse_args(argv)
    chosen = pick(read_merges(MERGES, set(args.set) if args.set else None), args.per_repo,
                  args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "config.yml").write_text(CONFIG)
    failed, totals, started = [], [0, 0, 0, 0], time.perf_counter()
    unsimulated = 0  # merges whose clone lacks objects of commit 1's tree
    unchecked = 0  # merges whose clone lacks an object the window needs
    for n, (set_name, repo, merge) in enumerate(chosen, 1):
        work = args.out / f"{n:03d}"
        subprocess.run(["rm", "-rf", str(work)], check=True)
        work.mkdir()
        try:
            fork, upstream, base, tip = as_it_was(find_clone(args.clones, repo), merge, work)
        except (subprocess.CalledProcessError, OSError, SystemExit) as exc:
            print(f"{set_name:8} {repo:38} {merge[:10]}  no clone or no such merge: {exc}")
            continue
        cmd = [sys.executable, str(ROOT / "bench" / "real_preview.py"), "--fork", str(fork),
               "--upstream", str(upstream), "--from", base, "--to", tip, "--config",
               str(args.out / "config.yml"), "--out", str(work / "preview"), "--runs", "1"]
        done = subprocess.run(cmd + (["--simulate"] if args.simulate else []), cwd=ROOT,
                              capture_output=True, text=True)
        found = _THREADS.search(done.stdout)
        carried, items, clicks, threads = (int(x) for x in found.groups()) if found \
            else (0, 0, 0, 0)
        totals = [totals[0] + items, totals[1] + carried, totals[2] + clicks,
                  totals[3] + threads]
        problems = [ln for ln in done.stdout.splitlines() if ln.startswith("PROBLEM")]
        unsimulated += "simulator: not run" in done.stdout
        said = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]
        # The CLI's own exit 3 for an object the clone lacks (a fetch that left out the
        # largest blobs) says nothing of forksync: the merge is not checked.
        lacking = done.returncode == 3 and any("is missing" in ln for ln in said)
        verdict = "ok" if done.returncode == 0 else "not checked: the clone lacks an object" \
            if lacking else f"{len(problems)} problem(s)" if problems else \
            f"exit {done.returncode}"
        print(f"{set_name:8} {repo:38} {merge[:10]}  items {items:3}, carried {carried:3}, "
              f"threads {threads:3}, one-click {clicks:3}  {verdict}", flush=True)
        for line in problems or (said[-1:] if done.returncode else []):
            print(f"    {line[-500:]}")
        if lacking:
            unchecked += 1
        elif done.returncode:
            failed.append((repo, merge))
    print(f"{len(chosen)} merges, {totals[0]} review items, {totals[1]} carried on "
          f"{totals[3]} threads, {totals[2]} one-click suggestions checked; "
          f"{len(failed)} merge(s) with a problem, "
          f"{unchecked} not checked (the clone lacks an object); "
          f"{time.perf_counter() - started:.0f} s"
          + (f"; not simulated: {unsimulated} (their clones lack objects of commit 1's tree)"
             if args.simulate else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
