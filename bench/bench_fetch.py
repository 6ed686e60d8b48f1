#!/usr/bin/env python3
"""Bytes and time to fetch what a sync needs, from the simulator's smart-HTTP git server.

The repositories (``bench/history.py``): an upstream of ``--files`` files with
``--commits`` commits of history and a chain of windows, and a GitHub fork of it.
Every run, from fresh caches:

- **full clone**: the upstream's main branch fetched with its blobs (what every cache
  held before partial clones), and the fork's; *today's first sync* is both;
- **cold first sync**: the fetches of the App's first sync of the fork, in its order
  and with its functions: fork main (commits), its tree and config, upstream main
  (commits), the trees of the window's commits, which blobs the window needs (local),
  those blobs in one fetch per repository; then the engine plans on the caches, to
  show it has all it reads;
- **warm syncs**: the next windows (15, 50, 150 files), each from the caches the
  previous sync left, after the fork merged the previous sync PR.

Bytes are the git server's response bodies (the real protocol, counted by the
simulator); times are wall clock. ``--small N`` repeats the warm syncs on an N-file
repository with a tenth of the history, whose windows are the very same: warm bytes
that follow the window, not the repository, come out the same.

Usage: ``.venv/bin/python bench/bench_fetch.py [--files 100000] [--commits 20000]
[--runs 3] [--small 10000] [--cache DIR]``. Generated repositories are cached outside
the repository (``~/.cache/forksync-bench`` by default), keyed by the parameters and
the generator's source.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import inspect
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import history  # noqa: E402
from history import History, generate  # noqa: E402

from bot.engine.config import CONFIG_PATH, Config, load_config  # noqa: E402
from bot.engine.git import Git  # noqa: E402
from bot.engine.pipeline import needs, plan  # noqa: E402
from bot.engine.window import find_cutoff  # noqa: E402
from bot.github import remote  # noqa: E402
from bot.sync.publish.fetch import window_trees  # noqa: E402
from tests.factory import git  # noqa: E402
from tests.sim.server import Simulator  # noqa: E402

UPSTREAM, FORK = "THUDM/slime", "vime-org/vime"
WINDOWS = [(150, 48), (15, 5), (50, 16), (150, 48)]  # (files, PRs): the cold one, then warm
TARGET_COLD = 0.25  # cold first sync / full clone, in bytes


@dataclass
class Measure:
    """One figure over the runs: bytes (the same every run) and seconds."""

    bytes: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def add(self, nbytes: int, seconds: float) -> None:
        self.bytes.append(nbytes)
        self.seconds.append(seconds)

    @property
    def median_bytes(self) -> float:
        return statistics.median(self.bytes)

    def show(self) -> str:
        b, s = self.bytes, self.seconds
        spread = "" if min(b) == max(b) else f" [{_mb(min(b))}–{_mb(max(b))}]"
        return (f"{_mb(self.median_bytes):>10}{spread:<22} {statistics.median(s):7.2f} s "
                f"[{min(s):.2f}–{max(s):.2f}]")


def _mb(n: float) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


class Served:
    """The two repositories on the simulator, with their branch heads set per measurement."""

    def __init__(self, sim: Simulator, h: History) -> None:
        self.sim, self.h = sim, h
        sim.create_repo(*UPSTREAM.split("/"), from_path=h.upstream)
        sim.create_repo(*FORK.split("/"), from_path=h.fork)
        self.token = sim.issue_token(FORK)
        self.fork_url, self.up_url = sim.git_url(FORK), sim.git_url(UPSTREAM)

    def at_window(self, w: int) -> None:
        window = self.h.windows[w]
        git(self.sim.git_dir(UPSTREAM), "update-ref", "refs/heads/main", window.tip)
        git(self.sim.git_dir(FORK), "update-ref", "refs/heads/main", window.fork_main)

    def counted(self, fn: Callable[[], object]) -> tuple[int, float]:
        """Bytes the git server sent while ``fn`` ran, and its wall time."""
        mark = len(self.sim.requests)
        started = time.perf_counter()
        fn()
        return self.sim.git_bytes(mark), time.perf_counter() - started


@dataclass
class SyncFetch:
    """What one sync fetched, step by step (bytes, seconds), and how many blobs."""

    steps: dict[str, tuple[int, float]]
    blobs: int
    config: Config
    fork_git: str
    upstream_git: str
    tip: str


def sync_fetch(s: Served, cache: Path, workdir: Path) -> SyncFetch:
    """The fetches of one sync, as the App's sync job makes them (publish fetch, prepare)."""
    steps: dict[str, tuple[int, float]] = {}
    fork_git = remote.ensure_mirror(cache, FORK)
    up_git = remote.ensure_mirror(cache, UPSTREAM)
    before = Git(fork_git).rev_parse("refs/heads/main")
    steps["fork main (commits; trees once warm)"] = s.counted(lambda: remote.fetch_branch(
        fork_git, s.fork_url, "main", s.token))
    fork_main = Git(fork_git).rev_parse("refs/heads/main") or ""
    steps["fork main's tree (what is missing), config"] = s.counted(lambda: remote.fetch_files(
        fork_git, s.fork_url, [fork_main], [CONFIG_PATH], s.token, base=before))
    config = load_config(Git(fork_git).text("cat-file", "blob", f"{fork_main}:{CONFIG_PATH}"),
                         CONFIG_PATH)
    steps["upstream main (commits; trees once warm)"] = s.counted(lambda: remote.fetch_branch(
        up_git, s.up_url, "main", s.token))
    tip = Git(up_git).rev_parse("refs/heads/main") or ""
    cutoff = Git(up_git).rev_parse(find_cutoff(Git(fork_git), "refs/heads/main", UPSTREAM,
                                               Git(up_git)) or "") or ""
    steps["the window's trees (what is missing)"] = s.counted(lambda: asyncio.run(window_trees(
        up_git, s.up_url, cutoff, tip, s.token)))
    found: list[int] = []

    def blobs() -> None:
        wanted = needs(fork_git, up_git, from_rev=cutoff, to_rev=tip, config=config,
                       workdir=str(workdir))
        found.append(remote.fetch_blobs(fork_git, s.fork_url, wanted.fork, s.token)
                     + remote.fetch_blobs(up_git, s.up_url, wanted.upstream, s.token))

    steps["the window's blobs (which: local; one fetch each)"] = s.counted(blobs)
    return SyncFetch(steps, found[0], config, fork_git, up_git, tip)


def full_clone(s: Served, cache: Path, repo: str, url: str) -> tuple[int, float]:
    """A cache filled as before partial clones: the main branch with every blob."""
    git_dir = remote.ensure_mirror(cache, repo)
    return s.counted(lambda: remote.fetch(git_dir, url, ["+refs/heads/main:refs/heads/main"],
                                          s.token, blobs=True))


@dataclass
class Results:
    full_upstream: Measure = field(default_factory=Measure)
    full_fork: Measure = field(default_factory=Measure)
    cold: Measure = field(default_factory=Measure)
    cold_steps: dict[str, Measure] = field(default_factory=dict)
    cold_blobs: int = 0
    plan_seconds: list[float] = field(default_factory=list)
    warm: dict[int, Measure] = field(default_factory=dict)  # window files -> measure
    warm_blobs: dict[int, int] = field(default_factory=dict)


def run_once(s: Served, scratch: Path, res: Results, warm_only: bool) -> None:
    """One run: full clones, the cold first sync, then the warm chain."""
    shutil.rmtree(scratch, ignore_errors=True)
    s.at_window(0)
    if not warm_only:
        res.full_upstream.add(*full_clone(s, scratch / "full", UPSTREAM, s.up_url))
        res.full_fork.add(*full_clone(s, scratch / "full", FORK, s.fork_url))
    cache, work = scratch / "cache", scratch / "work"
    cold = sync_fetch(s, cache, work)
    res.cold.add(sum(b for b, _ in cold.steps.values()), sum(t for _, t in cold.steps.values()))
    for name, (b, t) in cold.steps.items():
        res.cold_steps.setdefault(name, Measure()).add(b, t)
    res.cold_blobs = cold.blobs
    if not warm_only:
        started = time.perf_counter()
        p = plan(cold.fork_git, cold.upstream_git, to_rev=cold.tip, config=cold.config,
                 workdir=str(work))
        res.plan_seconds.append(time.perf_counter() - started)
        assert len(p.files) == s.h.windows[0].files, (len(p.files), s.h.windows[0].files)
    for w in range(1, len(s.h.windows)):
        s.at_window(w)
        warm = sync_fetch(s, cache, work)
        n = s.h.windows[w].files
        res.warm.setdefault(n, Measure()).add(sum(b for b, _ in warm.steps.values()),
                                              sum(t for _, t in warm.steps.values()))
        res.warm_blobs[n] = warm.blobs


def prepare(cache: Path, files: int, commits: int, say: Callable[[str], None]) -> History:
    source = inspect.getsource(history) + inspect.getsource(sys.modules["tests.factory"])
    key = hashlib.sha1(repr((files, commits, WINDOWS, source)).encode()).hexdigest()[:12]
    where = cache / f"fetch-{files}-{commits}-{key}"
    meta = where / "history.json"
    if meta.exists():
        return History.load(meta)
    for stale in cache.glob(f"fetch-{files}-{commits}-*"):
        shutil.rmtree(stale)
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    started = time.perf_counter()
    h = generate(where, files, commits, WINDOWS, say=say)
    say(f"generated in {time.perf_counter() - started:.0f} s")
    h.save(meta)
    return h


def report(h: History, res: Results, label: str) -> float:
    print(f"\n## {label}: {h.files:,} files, {h.commits:,} upstream commits; windows of "
          f"{', '.join(str(w.files) for w in h.windows)} files\n")
    ratio = float("nan")
    if res.full_upstream.bytes:
        today = Measure([a + b for a, b in zip(res.full_upstream.bytes, res.full_fork.bytes,
                                                strict=True)],
                        [a + b for a, b in zip(res.full_upstream.seconds, res.full_fork.seconds,
                                                strict=True)])
        print(f"{'full clone of the upstream':<46}{res.full_upstream.show()}")
        print(f"{'full clone of the fork':<46}{res.full_fork.show()}")
        print(f"{'first sync with full clones (both)':<46}{today.show()}")
        print(f"{'cold first sync, partial clones':<46}{res.cold.show()}")
        for name, m in res.cold_steps.items():
            print(f"  {name:<44}{m.show()}")
        print(f"  ({res.cold_blobs} blobs fetched; then the plan on the caches: "
              f"median {statistics.median(res.plan_seconds):.2f} s)")
        ratio = res.cold.median_bytes / res.full_upstream.median_bytes
        mark = "ok" if ratio <= TARGET_COLD else "MISSED"
        print(f"\ncold first sync / full clone of the upstream: {ratio:6.1%}  "
              f"(target <= {TARGET_COLD:.0%}: {mark})")
        print(f"cold first sync / first sync with full clones: "
              f"{res.cold.median_bytes / today.median_bytes:6.1%}")
    print()
    for n, m in sorted(res.warm.items()):
        blobs = res.warm_blobs[n]
        print(f"{f'warm sync, window of {n} files ({blobs} blobs)':<46}{m.show()}  "
              f"{m.median_bytes / n / 1e3:.1f} kB per file")
    return ratio


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--commits", type=int, default=20_000)
    ap.add_argument("--small", type=int, default=10_000,
                    help="files of the repository the warm syncs are repeated on (0: none)")
    ap.add_argument("--runs", type=int, default=3)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    ap.add_argument("--cache", type=Path, default=Path(base) / "forksync-bench")
    args = ap.parse_args(argv)

    def say(msg: str) -> None:
        print(f"  .. {msg}", file=sys.stderr, flush=True)

    load = os.getloadavg()[0]
    print(f"# bench_fetch: {args.runs} runs; repositories cached in {args.cache}"
          + (f"; load average {load:.1f} on {os.cpu_count()} CPUs: times are noisy"
             if load > (os.cpu_count() or 1) else ""))
    sizes = [(args.files, args.commits, False)]
    if args.small:
        sizes.append((args.small, max(len(WINDOWS), args.commits // 10), True))
    warm_by_size: list[dict[int, Measure]] = []
    ratio = float("nan")
    for files, commits, warm_only in sizes:
        h = prepare(args.cache, files, commits, say)
        res = Results()
        with Simulator() as sim, tempfile.TemporaryDirectory(prefix="bench-fetch-") as tmp:
            served = Served(sim, h)
            for r in range(args.runs):
                say(f"{files} files: run {r + 1} of {args.runs}")
                run_once(served, Path(tmp) / "run", res, warm_only)
        got = report(h, res, "warm syncs only" if warm_only else "the repository")
        ratio = ratio if warm_only else got
        warm_by_size.append(res.warm)
    if len(warm_by_size) == 2:
        print(f"\nwarm bytes, {args.files:,} files / {args.small:,} files, same windows: "
              + ", ".join(f"{n} files {warm_by_size[0][n].median_bytes / m.median_bytes:.2f}"
                          for n, m in sorted(warm_by_size[1].items())))
    return 0 if ratio <= TARGET_COLD else 1


if __name__ == "__main__":
    raise SystemExit(main())
