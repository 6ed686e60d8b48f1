#!/usr/bin/env python3
"""Benchmark the first-cutoff inference of onboarding: sampling against measuring everything.

An upstream of ``--files`` files gets ``--commits`` first-parent commits (three files
changed in each); a translated fork copies it at commit ``--at`` and then changes
40 files of its own. ``bot.engine.onboarding.propose_from_repos`` infers the cutoff
by sampling; the exhaustive search measures every candidate with the same
``TreeDistance``. Printed: candidates, measurements, the median and range of
``--runs`` timed runs of each, their ratio, and whether both found the true cutoff.

Usage: ``.venv/bin/python bench/bench_cutoff.py [--files 2000] [--commits 300,1500]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.engine.config import load_config  # noqa: E402
from bot.engine.cutoff import TreeDistance, candidates  # noqa: E402
from bot.engine.git import CatFile, Git, TreeWriter  # noqa: E402
from bot.engine.merge import commit_tree_oid  # noqa: E402
from bot.engine.onboarding import propose_from_repos, root_date  # noqa: E402
from bot.engine.pipeline import work_repo  # noqa: E402
from bot.engine.translate import Translator  # noqa: E402
from tests.factory import PLAIN_CONFIG, Commit, FastImport, Person, file_ops, init_repo  # noqa: E402

ALICE = Person("Alice", "alice@example.com")
VERA = Person("Vera", "vera@example.com")


def module(i: int, version: int) -> str:
    return "".join(f"import sglang  # slime module {i}, line {n}, v{version}\n"
                   if n % 10 == 0 else f"value_{n} = {n * version}\n" for n in range(60))


def build(root: Path, files: int, commits: int, at: int) -> tuple[Path, Path, str]:
    """Upstream and fork repositories; the upstream SHA the fork copied."""
    up = init_repo(root / "upstream", bare=True)
    fi = FastImport(up)
    paths = [f"slime/pkg{i % 40}/mod{i}.py" for i in range(files)]
    marks = [fi.add(Commit("refs/heads/main", "Initial import", ALICE, 1_600_000_000, None,
                           ops=file_ops({p: module(i, 0) for i, p in enumerate(paths)})))]
    for n in range(1, commits):
        changed = {paths[(n * 7 + k * 131) % files]: module(n, n + k) for k in range(3)}
        marks.append(fi.add(Commit("refs/heads/main", f"Change {n} (#{n})", ALICE,
                                   1_600_000_000 + 3600 * n, marks[-1], ops=file_ops(changed))))
    shas = fi.run()
    copied = shas[marks[at]]
    # The fork: translate(upstream@copied) at a later date, then 40 files of its own.
    fork = init_repo(root / "fork", bare=True)
    translator = Translator(load_config(PLAIN_CONFIG, "bench").translate)
    listing = Git(up).text("ls-tree", "-r", "--name-only", copied).split()
    with CatFile(Git(up)) as cat:
        blobs = {p: cat.read(Git(up).text("rev-parse", f"{copied}:{p}").strip())[1]
                 for p in listing}
    tree = {translator.path(p): translator.blob(data, p) for p, data in blobs.items()}
    fi = FastImport(fork)
    start = fi.add(Commit("refs/heads/main", "vime from slime", VERA,
                          1_600_000_000 + 3600 * at + 60, None, ops=file_ops(tree)))
    own = {p: data.decode() + "# vime's own\n" for p, data in list(tree.items())[:40]}
    fi.add(Commit("refs/heads/main", "vime: our changes", VERA, 1_600_000_000 + 3600 * at + 120,
                  start, ops=file_ops(own)))
    fi.run()
    return up, fork, copied


def exhaustive(up: Path, fork: Path, work_dir: Path) -> tuple[str, int]:
    upstream, fork_git = Git(up), Git(fork)
    work = work_repo(work_dir, fork_git, upstream)
    main = fork_git.rev_parse("refs/heads/main") or ""
    shas, _ = candidates(upstream, "refs/heads/main", both=work, fork_ref=main,
                         since=root_date(fork_git, main))
    with CatFile(work) as cat, TreeWriter(work, cache=cat.tree_cache) as writer:
        distance = TreeDistance(work, cat, writer, Translator(
            load_config(PLAIN_CONFIG, "bench").translate), commit_tree_oid(cat, main))
        best = min((distance(sha, i) for i, sha in enumerate(shas)),
                   key=lambda m: (m.lines, m.index))
    return best.sha, len(shas)


def run_case(files: int, commits: int, runs: int) -> None:
    config = load_config(PLAIN_CONFIG, "bench")
    with tempfile.TemporaryDirectory(prefix="bench-cutoff-") as tmp:
        root = Path(tmp)
        at = commits * 2 // 3
        up, fork, copied = build(root, files, commits, at)
        times: list[float] = []
        for _ in range(runs):
            started = time.perf_counter()
            proposal = propose_from_repos(
                Git(fork), "refs/heads/main", Git(up), "refs/heads/main",
                upstream_repo="THUDM/slime", upstream_branch="main", fork_branch="main",
                workdir=root / "work", config=config, config_text=PLAIN_CONFIG)
            times.append(time.perf_counter() - started)
        started = time.perf_counter()
        best, n = exhaustive(up, fork, root / "work2")
        everything = time.perf_counter() - started
        sampled = statistics.median(times)
        print(f"{files} files, {commits} upstream commits, fork copied at #{at}: "
              f"{n} candidates")
        print(f"  sampling:   {len(proposal.guess.measured)} measured, median {sampled:.2f} s "
              f"(min {min(times):.2f}, max {max(times):.2f}, {runs} runs), found the copy: "
              f"{proposal.cutoff == copied}")
        print(f"  exhaustive: {n} measured, {everything:.2f} s (1 run), found the copy: "
              f"{best == copied}")
        print(f"  exhaustive / sampling = {everything / sampled:.1f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--commits", default="300,1500")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    for commits in (int(c) for c in args.commits.split(",")):
        run_case(args.files, commits, args.runs)


if __name__ == "__main__":
    main()
