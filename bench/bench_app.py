#!/usr/bin/env python3
"""Write requests the App sends to GitHub per sync PR and per push rescan; sync throughput.

``forksync serve`` runs as its own process against the GitHub simulator, which counts
every non-GET REST call (git traffic and token minting are not API writes). Targets:

* per sync PR: at most 5 + ⌈review items / 50⌉ (one PR, one review, a file-level
  comment for each file the diff shows without lines, the check run with its annotation
  batches, at most one body update);
* per push rescan: at most 3 (the checklist in the body, the check run on the head, and
  one review of follow-up suggestions once a file's resolved hunks all took one side);
* and, for information, per upstream merge while the sync PR is open (its "behind"
  status in the body and the check).

Scenarios: the small e2e pair (3 conflict hunks); ``tests.factory.make_threads``, whose
items need every kind of thread (a one-click region, a region over two hunks, a whole
file, a file-level comment on a binary, and files the PR does not change); and a
synthetic window from ``tests.factory.make_large`` with more than 50 review items, so
annotation batching shows up.

Throughput: syncs per minute with one replica and with two (two workers each), on
SQLite (the replicas share the data directory: one machine) and on PostgreSQL (a
server started for the run, fsync on). ``--forks`` forks of the small pair, each
behind its upstream by one merged PR, get the App installed one after another
(deliveries through a round-robin balancer), and a first sync each (fetch, plan,
push, PR, review, check). The clock runs from the first installation to the last
sync PR's check with the queue empty; runs alternate between configurations, each
``--runs`` times (median and range).

Usage: ``.venv/bin/python bench/bench_app.py [--large-files 2000] [--forks 30] [--runs 3]
[--only writes|throughput]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.engine.markers import find_marker_regions  # noqa: E402
from tests.factory import make_large, make_threads  # noqa: E402
from tests.pgserver import PostgresServer  # noqa: E402
from tests.sim import Simulator  # noqa: E402
from tests.test_e2e import FORK, UPSTREAM, Bot, World, build_scenario  # noqa: E402
from tests.test_replicas import RoundRobin, chaos_scenario  # noqa: E402


def plan_items(world: World) -> int:
    """Review items in the sync's plan, from the bot's own data directory."""
    plans = sorted((world.bot_data / "plans").rglob("*.json"))
    plan = json.loads(plans[-1].read_text())
    return sum(len(f["review_items"]) for f in plan["files"])


class Bench(World):
    bot_data: Path


async def run_scenario(name: str, root: Path, upstream_src: Path, fork_src: Path,
                       *, merge: bool, rescans: int = 2) -> dict[str, Any]:
    sim = Simulator(root=root / "sim").start()
    bot = Bot(sim, root / "bot")
    try:
        sim.create_repo("THUDM", "slime", upstream_src, install=False)
        sim.create_repo("vime-org", "vime", fork_src, install=False)
        await bot.start()
        sim.bot_url = f"{bot.url}/webhook"
        world = Bench(sim, None, bot, root)  # type: ignore[arg-type]
        world.bot_data = root / "bot"
        # Counted from the installation: its first sync opens the large scenario's PR.
        started = time.monotonic()
        before = len(sim.writes(FORK))
        await sim.install("THUDM")
        await sim.install("vime-org")
        await world.idle(timeout=600)
        if merge:
            await world.merge_upstream()
        await world.idle(timeout=600)
        sync_writes = len(sim.writes(FORK)) - before
        seconds = time.monotonic() - started
        pr = world.sync_pr()
        items = plan_items(world)
        threads = sim.review_comments(FORK, pr.number)
        comments = len(threads)
        file_level = sum(1 for c in threads if c.subject_type == "file")
        carried = {q for c in threads for q in re.findall(r"^\*\*(Q\d+) ·", c.body, re.M)}
        annotations = len(world.check(pr.head_sha).annotations)

        rescan_writes = []
        head = pr.head_sha
        for _ in range(rescans):
            path = next(c.path for c in sim.review_comments(FORK, pr.number)
                        if c.subject_type == "line"
                        and find_marker_regions(world.file_at(head, c.path)))
            text = world.file_at(head, path)
            region = find_marker_regions(text)[0]
            lines = text.splitlines(keepends=True)
            lines[region.start_line - 1:region.end_line] = [region.theirs]
            before = len(sim.writes(FORK))
            head = await sim.commit(FORK, pr.head_ref, {path: "".join(lines)},
                                    "Resolve one conflict", user="vera")
            await world.idle(timeout=600)
            rescan_writes.append(len(sim.writes(FORK)) - before)
        # Another upstream merge while the PR is open: its status says "behind".
        before = len(sim.writes(FORK))
        await sim.commit(UPSTREAM, "later", {"slime/later_change.py": "later = 1\n"},
                         "Later change", user="bob")
        later = await sim.open_pr(UPSTREAM, "later", title="Later change", user="bob")
        await sim.merge_pr(UPSTREAM, later.number, method="squash", user="zhuzilin")
        await world.idle(timeout=600)
        behind_writes = len(sim.writes(FORK)) - before
        assert len(world.sync_prs()) == 1
        problems = sim.violations + sim.unimplemented + sim.internal_errors
        return {"scenario": name, "items": items, "comments": comments,
                "file_level": file_level, "threaded": len(carried),
                "annotations": annotations, "sync_writes": sync_writes,
                "budget": 5 + math.ceil(items / 50), "rescan_writes": rescan_writes,
                "behind_writes": behind_writes,
                "seconds": seconds, "problems": problems,
                "writes_by_operation": _by_operation(sim)}
    finally:
        bot.stop()
        sim.stop()


def _by_operation(sim: Simulator) -> dict[str, int]:
    counts: dict[str, int] = {}
    for w in sim.writes(FORK):
        key = f"{w.method} {w.operation}"
        counts[key] = counts.get(key, 0) + 1
    return counts


def bare(path: Path, out: Path) -> Path:
    subprocess.run(["git", "clone", "-q", "--bare", str(path), str(out)], check=True)
    return out


# -- throughput ----------------------------------------------------------------------


async def throughput_run(root: Path, upstream: Path, fork: Path, forks: int, replicas: int,
                         workers: int, database_url: str | None) -> dict[str, Any]:
    """One timed run: install the App on ``forks`` forks, wait until every sync PR is open."""
    sim = Simulator(root=root / "sim", content_limits=None).start()
    bots = [Bot(sim, root / f"replica-{i}", database_url=database_url, lease_seconds=None,
                port=0) for i in range(replicas)]
    balancer = RoundRobin(bots)
    names = [f"org-{i:02d}/vime" for i in range(forks)]
    try:
        sim.create_repo("THUDM", "slime", upstream, install=False)
        for name in names:
            sim.create_repo(*name.split("/"), fork, install=False)
        for bot in bots:
            bot.env["FORKSYNC_WORKERS"] = str(workers)
            if database_url is None:  # SQLite: one machine, one data directory
                bot.env["FORKSYNC_DATA_DIR"] = str(root / "shared")
        if database_url is not None:
            bots[0].upgrade_db()
        await asyncio.gather(*(bot.start() for bot in bots))
        await balancer.start()
        sim.bot_url = balancer.url
        started = time.monotonic()
        for name in names:
            await sim.install(name.split("/")[0])
        while True:
            await sim.wait_deliveries()
            jobs = (await bots[0].health())["jobs"]
            done = sum(1 for name in names if sim.check_runs(name))
            if done == forks and jobs["queued"] == 0 and jobs["running"] == 0:
                break
            if time.monotonic() - started > 900:
                raise RuntimeError(f"not done after 900 s: {done}/{forks}, {jobs}")
            await asyncio.sleep(0.05)
        seconds = time.monotonic() - started
        problems = sim.violations + sim.unimplemented + sim.internal_errors
        if problems or jobs["dead"] or any(len(sim.prs(name)) != 1 for name in names):
            raise RuntimeError(f"a run went wrong: {problems[:3]}, {jobs}")
        return {"seconds": seconds, "per_minute": forks / seconds * 60}
    finally:
        for bot in bots:
            bot.stop()
        sim.stop()
        await balancer.stop()


async def throughput(root: Path, forks: int, runs: int) -> list[str]:
    scenario = chaos_scenario(root / "repos")
    upstream, fork = bare(scenario.upstream_dir, root / "upstream.git"), \
        bare(scenario.fork_dir, root / "fork.git")
    postgres = PostgresServer(durable=True).start()
    lines = [f"throughput: {forks} first syncs of the small pair per run, {runs} runs each; "
             f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"]
    configurations = (("sqlite", 1, 2), ("sqlite", 2, 2), ("postgres", 1, 2),
                      ("postgres", 2, 2), ("postgres", 1, 4))
    figures: dict[tuple[str, int, int], list[dict[str, Any]]] = {c: [] for c in configurations}
    try:
        # Runs alternate between the configurations, so that all meet the same machine load.
        for n in range(runs):
            for backend, replicas, workers in configurations:
                url = postgres.create_database() if backend == "postgres" else None
                try:
                    figures[(backend, replicas, workers)].append(await throughput_run(
                        root / f"{backend}-{replicas}x{workers}-{n}", upstream, fork, forks,
                        replicas, workers, url))
                finally:
                    if url is not None:
                        postgres.drop_database(url)
    finally:
        postgres.stop()
    medians: dict[tuple[str, int, int], float] = {}
    for (backend, replicas, workers), results in figures.items():
        rates = [f["per_minute"] for f in results]
        medians[(backend, replicas, workers)] = statistics.median(rates)
        lines.append(f"  {backend:8s} {replicas} replica{'s' if replicas > 1 else ' '} × "
                     f"{workers} workers: {statistics.median(rates):6.1f} syncs/min  "
                     f"[{min(rates):.1f} – {max(rates):.1f}]  (median "
                     f"{statistics.median(f['seconds'] for f in results):.1f} s a run)")
    for backend in ("sqlite", "postgres"):
        lines.append(f"  {backend}: 2 replicas / 1 replica = "
                     f"{medians[(backend, 2, 2)] / medians[(backend, 1, 2)]:.2f}")
    lines.append(f"  load average at the end: {os.getloadavg()[0]:.1f}")
    return lines


async def writes(root: Path, large_files: int, window_files: int) -> bool:
    results = []
    small = build_scenario(root / "small-repos")
    results.append(await run_scenario("small (e2e pair)", root / "small",
                                      small.upstream_dir, small.fork_dir, merge=True))
    threads = make_threads(root / "threads-repos")
    results.append(await run_scenario("threads (every kind of place)", root / "threads",
                                      threads.upstream_dir, threads.fork_dir,
                                      merge=False, rescans=1))
    large = make_large(root / "large-repos", large_files,
                       window_files=window_files, window_prs=48, fork_share=0.5)
    results.append(await run_scenario(
        f"large ({large_files} files, {window_files}-file window)",
        root / "large", large.upstream, large.fork, merge=False))
    ok = True
    for r in results:
        sync_ok = r["sync_writes"] <= r["budget"]
        rescan_ok = all(n <= 3 for n in r["rescan_writes"])
        ok = ok and sync_ok and rescan_ok and not r["problems"]
        print(f"{r['scenario']}: {r['items']} review items, {r['comments']} threads "
              f"({r['file_level']} file-level) carrying {r['threaded']} items, "
              f"{r['annotations']} annotations")
        print(f"  write requests per sync PR:     {r['sync_writes']:3d}  (target ≤ 5 + "
              f"⌈{r['items']}/50⌉ = {r['budget']})  {'ok' if sync_ok else 'OVER'}"
              f"  [{r['seconds']:.1f}s]")
        print(f"  write requests per push rescan: {', '.join(map(str, r['rescan_writes']))}"
              f"  (target ≤ 3)  {'ok' if rescan_ok else 'OVER'}")
        print(f"  write requests when upstream moves on while the PR is open: "
              f"{r['behind_writes']}  (no second PR)")
        print("  by operation: " + ", ".join(f"{k} ×{v}"
                                             for k, v in r["writes_by_operation"].items()))
        if r["problems"]:
            print("  simulator problems: " + "; ".join(r["problems"][:5]))
    print(f"upstream {UPSTREAM} → fork {FORK}: {'all within budget' if ok else 'OVER BUDGET'}")
    return ok


async def main() -> int:
    # SIGTERM (a timeout, Ctrl-C in a CI) still stops the replicas and the database.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--large-files", type=int, default=2000,
                        help="files in the synthetic repository (default 2000)")
    parser.add_argument("--window-files", type=int, default=400,
                        help="files the synthetic window changes (default 400)")
    parser.add_argument("--forks", type=int, default=30,
                        help="forks synced per throughput run (default 30)")
    parser.add_argument("--runs", type=int, default=3,
                        help="throughput runs per configuration (default 3)")
    parser.add_argument("--only", choices=("writes", "throughput"))
    args = parser.parse_args()
    ok = True
    with tempfile.TemporaryDirectory(prefix="forksync-bench-app-") as tmp:
        root = Path(tmp)
        if args.only != "throughput":
            ok = await writes(root / "writes", args.large_files, args.window_files)
        if args.only != "writes":
            print("\n".join(await throughput(root / "throughput", args.forks, args.runs)))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
