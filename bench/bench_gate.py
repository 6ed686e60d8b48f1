"""What the gate costs per push: the rescan's read and decision on a real-sized window.

The repositories are ``tests.factory.make_large`` ones (a window of 48 PRs and 150
files; the fork diverges on 30% of them, so about 20 files conflict). ``engine.sync``
makes commit 1; a person then resolves every other region with ours, deletes the
opening line of one more (a broken region, issue 11) and edits a file outside the plan,
in one commit. For that head the script times, with the median, min and max of
``--runs`` runs:

| measurement | what is timed |
|---|---|
| `read_head` | reading commit 1 and the head from git and deciding (what a rescan does) |
| `scan` | the pure decision alone (`bot.engine.rescan.scan`), on texts already read |
| `regions only` | the decision before issue 11: complete regions at each file's size |

and checks that the gate found the broken region. Nothing here is asserted in tests.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.engine.git import Git  # noqa: E402
from bot.engine.markers import find_marker_regions, split_lines  # noqa: E402
from bot.engine.model import marker_size_of  # noqa: E402
from bot.engine.pipeline import sync  # noqa: E402
from bot.engine.rescan import read_blobs, read_head, scan  # noqa: E402
from bot.sync.commands.gitops import commit_files  # noqa: E402
from tests.factory import make_large  # noqa: E402


def timed(fn: Callable[[], object], runs: int) -> tuple[float, float, float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), min(samples), max(samples)


def person_pushes(git: Git, plan_json: dict, commit: str) -> tuple[str, str]:
    """Every other region resolved with ours, one more broken, one other file edited."""
    texts = read_blobs(git.git_dir, commit, [f["path"] for f in plan_json["files"]])
    edits: dict[str, str | None] = {}
    broken = ""
    n = 0
    for f in plan_json["files"]:
        text = texts.get(f["path"])
        if not text or f["status"] != "conflict":
            continue
        lines = split_lines(text)
        for region in reversed(find_marker_regions(text, marker_size_of(f))):
            n += 1
            if n % 2:
                lines[region.start_line - 1:region.end_line] = [region.ours]
            elif not broken:
                del lines[region.start_line - 1]  # only the <<<<<<< line: broken
                broken = f["path"]
        edits[f["path"]] = "".join(lines)
    other = git.text("ls-tree", "-r", "--name-only", commit).split("\n")[0]
    edits[other] = (read_blobs(git.git_dir, commit, [other])[other] or "") + "# edited\n"
    return commit_files(git, commit, edits, "Resolve some\n"), broken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-gate-") as tmp:
        repos = make_large(Path(tmp) / "repos", args.files)
        result = sync(str(repos.fork), str(repos.upstream), branch="forksync/bench",
                      workdir=str(Path(tmp) / "work"))
        plan_json = result.plan.to_json()
        git = Git(str(repos.fork))
        head, broken = person_pushes(git, plan_json, result.commit)
        state = {"commit": result.commit}
        conflicted = sum(1 for f in plan_json["files"] if f["status"] == "conflict")
        print(f"window: {len(plan_json['files'])} paths, {conflicted} conflicted, "
              f"{sum(len(f['review_items']) for f in plan_json['files'])} review items; "
              f"repository: {args.files} files")

        found, commit_texts, head_texts = read_head(git.git_dir, plan_json, state, head)
        stray = [r for r in found.remaining if r.orphan and r.path == broken]
        print(f"gate: {len(found.resolved)} resolved, {len(found.remaining)} remaining; the "
              f"broken region in {broken}: {len(stray)} marker lines named "
              f"({', '.join(f'L{r.start_line}' for r in stray)})")

        def regions_only() -> None:
            for f in plan_json["files"]:
                text = head_texts.get(f["path"])
                if text:
                    find_marker_regions(text, marker_size_of(f))

        rows = [
            ("read_head", lambda: read_head(git.git_dir, plan_json, state, head)),
            ("scan", lambda: scan(plan_json, commit_texts, head_texts, answers={})),
            ("regions only", regions_only),
        ]
        medians = {}
        for name, fn in rows:
            med, lo, hi = timed(fn, args.runs)
            medians[name] = med
            print(f"{name:>13}: median {med * 1000:8.2f} ms  (min {lo * 1000:.2f}, "
                  f"max {hi * 1000:.2f}; {args.runs} runs)")
        print(f"scan / regions only = {medians['scan'] / medians['regions only']:.1f}x; "
              f"scan / read_head = {medians['scan'] / medians['read_head']:.2f}")


if __name__ == "__main__":
    main()
