#!/usr/bin/env python3
"""Benchmark ``forksync plan`` against ``git merge-tree`` on the same window.

(a) a window of ~150 changed files (48 squash PRs) in a repository of ~5,000 files:
    ``plan`` in-process and through the CLI, against ``git merge-tree --write-tree`` on
    the same trees already translated in full (only the merge-tree command is timed).
(b) the same window in a repository of ~100,000 files: time(b) / time(a).
Plus the peak RSS of a CLI run.

Usage: ``.venv/bin/python bench/bench_plan.py [--runs 5] [--small 5000] [--large 100000]``.
Generated repositories are cached in ``bench/.cache/`` (``--cache`` to move it), keyed
by the generator's parameters and source, so reruns skip generation.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests import factory  # noqa: E402
from tests.factory import (  # noqa: E402
    DEFAULT_CONFIG,
    LargeRepos,
    git_merge_oracle,
    make_large,
    make_translator,
    stable_digest,
)

TARGET_RATIO = 1.5  # plan / merge-tree at ~5,000 files
TARGET_SCALING = 1.3  # time(100,000 files) / time(5,000 files)
TARGET_RSS_MB = 300.0


@dataclass
class Prepared:
    """A cached repository pair plus the scratch repository with fully translated trees."""

    repos: LargeRepos
    oracle_git: Path
    generated_in: float | None  # seconds, or None when it came from the cache
    workdir: Path


def generator_source() -> str:
    """What the generated repositories depend on: a change to any of it regenerates them."""
    parts = [inspect.getsource(fn) for fn in (
        factory.make_large, factory._synthetic_dirs, factory._file_name,
        factory._synthetic_text, factory._edit_lines, factory.translated_entries,
        factory.translate_blob, factory.FastImport)]
    # The fork is a translation, so the translator's code is part of it too.
    parts += [(ROOT / "bot" / name).read_text() for name in ("translate.py", "config.py")
              if (ROOT / "bot" / name).exists()]
    return "\n".join(parts)


def prepare(cache: Path, n_files: int, say: Callable[[str], None]) -> Prepared:
    """Generate (or reuse) a repository pair and its pre-translated merge inputs."""
    key = stable_digest(n_files, DEFAULT_CONFIG, generator_source())
    where = cache / f"repos-{n_files}-{key}"
    meta = where / "meta.json"
    workdir = where / "work"
    shutil.rmtree(workdir, ignore_errors=True)  # every run starts with a cold plan cache
    if meta.exists():
        data = json.loads(meta.read_text())
        repos = LargeRepos(Path(data["upstream"]), Path(data["fork"]), data["cutoff"],
                           data["tip"], data["n_files"], data["window_files"],
                           data["window_prs"], data["forked_files"])
        return Prepared(repos, where / "oracle", None, workdir)
    for stale in cache.glob(f"repos-{n_files}-*"):  # made by an older generator
        shutil.rmtree(stale, ignore_errors=True)
    start = time.monotonic()
    say(f"generating a {n_files:,}-file repository pair in {where} ...")
    repos = make_large(where, n_files, progress=lambda m: say(f"  {m}"))
    say("  translating the full trees for git merge-tree")
    git_merge_oracle(where / "oracle", repos.fork, "main", repos.upstream, repos.cutoff,
                     repos.tip, make_translator())
    elapsed = time.monotonic() - start
    meta.write_text(json.dumps({k: str(v) if isinstance(v, Path) else v
                                for k, v in repos.__dict__.items()}))
    return Prepared(repos, where / "oracle", elapsed, workdir)


@dataclass
class Timing:
    runs: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    def show(self) -> str:
        return (f"median {self.median:7.3f} s  [min {min(self.runs):.3f}, "
                f"max {max(self.runs):.3f}, n={len(self.runs)}]")


def time_runs(fn: Callable[[], object], runs: int) -> Timing:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return Timing(times)


def merge_tree(oracle_git: Path) -> None:
    subprocess.run(["git", f"--git-dir={oracle_git}", "-c", "merge.conflictStyle=diff3",
                    "merge-tree", "--write-tree", "ours", "theirs"],
                   capture_output=True, check=False, env=factory.git_env())


def cli_argv(p: Prepared) -> list[str]:
    script = Path(sys.executable).parent / "forksync"
    base = [str(script)] if script.exists() else [sys.executable, "-m", "bot.cli"]
    return [*base, "plan", "--fork", str(p.repos.fork), "--upstream", str(p.repos.upstream),
            "--workdir", str(p.workdir), "--quiet", "--json", os.devnull]


# A small launcher between us and the CLI. A child's ru_maxrss starts from its parent's
# RSS at fork time (Linux counts the pre-exec image), and this script holds whole
# repositories in memory; forking the CLI from a fresh, small interpreter keeps the
# figure about the CLI alone.
_LAUNCHER = """
import resource, subprocess, sys, time
start = time.perf_counter()
proc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
wall = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(proc.returncode, wall, peak, proc.stderr.decode(errors="replace").strip()[:300])
"""


def run_cli(p: Prepared) -> tuple[float, float]:
    """One CLI run: (wall seconds, peak RSS in MB of the largest process in its tree)."""
    out = subprocess.run([sys.executable, "-c", _LAUNCHER, *cli_argv(p)], capture_output=True,
                         text=True, check=True).stdout
    code, wall, peak_kb, err = [*out.split(" ", 3), ""][:4]
    if int(code) != 0:
        raise SystemExit(f"forksync plan failed: {err.strip()}")
    return float(wall), int(peak_kb) / 1024.0


@dataclass
class Result:
    prepared: Prepared
    plan: Timing
    first_plan: float
    cli: Timing
    rss_mb: float
    merge_tree: Timing
    summary: dict[str, int]


def bench_one(p: Prepared, runs: int, say: Callable[[str], None]) -> Result:
    from bot.engine.pipeline import plan

    def run_plan() -> object:
        return plan(str(p.repos.fork), str(p.repos.upstream), workdir=str(p.workdir))

    say(f"  timing plan ({runs} runs + 1 cold) ...")
    start = time.perf_counter()
    result = run_plan()
    first = time.perf_counter() - start
    plan_t = time_runs(run_plan, runs)
    say("  timing the CLI ...")
    cli_runs = [run_cli(p) for _ in range(runs)]
    say("  timing git merge-tree ...")
    merge_tree(p.oracle_git)  # warm the page cache, as the plan's first run did
    mt = time_runs(lambda: merge_tree(p.oracle_git), runs)
    return Result(p, plan_t, first, Timing([w for w, _ in cli_runs]),
                  max(r for _, r in cli_runs), mt,
                  result.counts())  # type: ignore[attr-defined]


def verdict(value: float, target: float) -> str:
    return f"(target <= {target:g}: {'ok' if value <= target else 'MISSED'})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="timed runs per measurement (>= 5)")
    ap.add_argument("--small", type=int, default=5000, help="files in repository (a)")
    ap.add_argument("--large", type=int, default=100000,
                    help="files in repository (b); 0 to skip (b)")
    ap.add_argument("--cache", type=Path, default=ROOT / "bench" / ".cache",
                    help="where generated repositories are kept (default: bench/.cache)")
    args = ap.parse_args(argv)

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    git_version = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout
    print(f"forksync plan benchmark: {git_version.strip()}, {os.cpu_count()} CPUs, "
          f"{args.runs} runs per measurement; repositories cached in {args.cache}")
    load = os.getloadavg()[0]
    if load > (os.cpu_count() or 1):
        print(f"note: load average {load:.1f} on {os.cpu_count()} CPUs; timings will be noisy "
              "(the 'fastest runs' figures are the steadier ones; try --runs 9)")
    results: dict[str, Result] = {}
    for label, n in (("a", args.small), ("b", args.large)):
        if n <= 0:
            continue
        prepared = prepare(args.cache, n, say)
        gen = (f"generated in {prepared.generated_in:.1f} s" if prepared.generated_in is not None
               else "from the cache")
        r = prepared.repos
        print(f"\n({label}) {r.n_files:,} files at the cutoff; window {r.window_prs} PRs, "
              f"{r.window_files} files; the fork diverges in {r.forked_files} of them "
              f"[repositories {gen}]")
        say(f"({label}) benchmarking ...")
        res = bench_one(prepared, args.runs, say)
        results[label] = res
        print("  statuses: " + ", ".join(f"{v} {k}" for k, v in res.summary.items() if v))
        print(f"  forksync plan, in-process    {res.plan.show()}  (cold first run "
              f"{res.first_plan:.3f} s)")
        print(f"  forksync plan, CLI           {res.cli.show()}")
        print(f"  git merge-tree --write-tree  {res.merge_tree.show()}  (trees pre-translated)")
        ratio = res.plan.median / res.merge_tree.median
        print(f"  ratio plan / merge-tree      {ratio:7.2f}  "
              + (verdict(ratio, TARGET_RATIO) if label == "a" else "")
              + f"  (of the fastest runs: {min(res.plan.runs) / min(res.merge_tree.runs):.2f})")
        print(f"  ratio CLI / merge-tree       {res.cli.median / res.merge_tree.median:7.2f}")
        print(f"  peak RSS of a CLI run        {res.rss_mb:7.1f} MB  "
              f"{verdict(res.rss_mb, TARGET_RSS_MB)}")
    if "a" in results and "b" in results:
        scaling = results["b"].plan.median / results["a"].plan.median
        cli_scaling = results["b"].cli.median / results["a"].cli.median
        fastest = min(results["b"].plan.runs) / min(results["a"].plan.runs)
        print(f"\nscaling time(b) / time(a), plan {scaling:7.2f}  "
              f"{verdict(scaling, TARGET_SCALING)}  (of the fastest runs: {fastest:.2f})")
        print(f"scaling time(b) / time(a), CLI  {cli_scaling:7.2f}")
        mt_scaling = results["b"].merge_tree.median / results["a"].merge_tree.median
        print(f"(git merge-tree alone scales by {mt_scaling:.2f} on fully translated trees)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
