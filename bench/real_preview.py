#!/usr/bin/env python3
"""``forksync sync --preview`` on a real window: is every thread where GitHub will take it?

Runs the CLI (as a process) on a fork and its upstream, then checks its preview against
an independent reading of the PR diff (``git diff`` hunk headers, parsed here with a
regex, not with the code under test):

* every review comment lies inside ONE hunk of the diff of commit 1 against the fork
  branch (a multi-line one from ``start_line`` to ``line``), on the RIGHT side;
* every file-level comment is on a path the diff has, with no line to take, or is the
  one comment of a file whose regions are answered together (a lockfile, a generated
  file, a file with more than 50 regions: ``bot.engine.generated``);
* such a file has exactly one thread, which carries every one of its conflict regions
  and no suggestion, and every file named like a lockfile is such a file;
* every item with no thread is on a path the diff has no line of (a path it does not
  have at all, or one it shows without lines, whose file-level comment the write budget
  left out), and is in the review body;
* every body and comment is within GitHub's 65,536 characters, fences and
  ``<details>`` closed; and the writes fit 5 + ⌈items/50⌉;
* every one-click suggestion covers exactly one marker region of commit 1 (its first
  line opens it, its last closes it, at the file's marker size) and holds exactly the
  item's proposal: "Commit suggestion" leaves that text and no marker.

It prints the counts and the time ``build_preview`` takes (median of ``--runs``). With
``--simulate`` it also posts the preview's files, as they are, to a PR of commit 1 on the
GitHub simulator (``tests/sim``: GitHub's anchoring rules, every request checked against
the OpenAPI description) and reports what it refused.
Build the fork first, e.g. with ``bench/real_window.py`` (a real upstream window
into a synthetic translated fork diverged like vime)::

    .venv/bin/python bench/real_preview.py --fork /tmp/rw/fork.git \\
        --upstream /path/to/slime.git --to '#2125' --out /tmp/rw-preview
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.engine.gate import annotation_batches, initial_remaining  # noqa: E402
from bot.engine.generated import LOCKFILES, file_levels  # noqa: E402
from bot.engine.preview import build_preview  # noqa: E402
from bot.engine.review import local_diff, write_budget  # noqa: E402

LIMIT = 65_536
# The ids a comment's items are headed with: "**Q7 · Decide**", "**Q3–Q13 · `Cargo.lock`…".
_CARRIED = re.compile(r"^\*\*(Q\d+(?:(?:–|, )Q\d+)*) ·", re.M)
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")
_FILE = re.compile(r"^diff --git a/(.*) b/(.*)$")


def hunks_by_path(diff: str) -> dict[str, list[tuple[int, int]]]:
    """RIGHT-side (first, last) of every hunk, per new path; [] for a path with no line."""
    out: dict[str, list[tuple[int, int]]] = {}
    path = None
    for line in diff.splitlines():
        m = _FILE.match(line)
        if m:
            path = m.group(2)
            out[path] = []
            continue
        h = _HUNK.match(line)
        if h and path is not None:
            start, count = int(h.group(1)), int(h.group(2) if h.group(2) is not None else 1)
            if count:
                out[path].append((start, start + count - 1))
    return out


_SUGGESTION = re.compile(r"^(`{3,})suggestion\n(.*?)^\1$", re.M | re.S)


def suggestion_problems(review: dict, plan: dict, fork_git: str) -> tuple[int, list[str]]:
    """How many one-click suggestions there are, and each that would not replace exactly
    one marker region of commit 1 with exactly its item's proposal."""
    commit = review["commit_id"]
    items = {(i["path"], i.get("start_line"), i.get("end_line")): (i, f)
             for f in plan["files"] for i in f["review_items"]}
    found, problems = 0, []
    for c in review.get("comments", []):
        m = _SUGGESTION.search(c["body"])
        if m is None:
            continue
        found += 1
        start = c.get("start_line", c["line"])
        where = f"{c['path']} L{start}-{c['line']}"
        hit = items.get((c["path"], start, c["line"]))
        if hit is None:
            problems.append(f"the suggestion on {where} is on no item's region")
            continue
        item, f = hit
        size = int(f.get("marker_size") or 7)
        text = subprocess.run(["git", f"--git-dir={fork_git}", "show", f"{commit}:{c['path']}"],
                              capture_output=True, check=True).stdout.decode("utf-8", "replace")
        lines = text.splitlines()[start - 1:c["line"]]
        if not (lines and lines[0].startswith("<" * size + " ")
                and lines[-1].startswith(">" * size + " ")):
            problems.append(f"the suggestion on {where} does not cover one marker region")
        shown = m.group(2)
        proposal = item.get("suggestion") or ""
        if shown not in (proposal, proposal + "\n"):  # a last line without its newline
            problems.append(f"the suggestion on {where} is not {item['id']}'s proposal")
    return found, problems


def carried_ids(body: str) -> list[str]:
    """Every id a comment carries, its ranges (``Q3–Q13``) spelled out."""
    out = []
    for m in _CARRIED.finditer(body):
        for part in m.group(1).split(", "):
            low, _, high = part.partition("–")
            out += [f"Q{n}" for n in range(int(low[1:]), int((high or low)[1:]) + 1)]
    return out


def one_comment_problems(plan: dict, review: dict, files: list) -> list[str]:
    """A file answered together has ONE thread, with all its regions and no suggestion;
    every conflicted file named like a lockfile is one."""
    levels = file_levels(plan)
    problems = []
    comments = [*review.get("comments", []), *files]
    for path, level in levels.items():
        on = [c for c in comments if c["path"] == path
              and set(carried_ids(c["body"])) & set(level.ids)]
        if len(on) != 1:
            problems.append(f"{path}: {len(on)} threads carry its regions, not one")
            continue
        if not set(level.ids) <= set(carried_ids(on[0]["body"])):
            problems.append(f"{path}: its one comment leaves out some of its regions")
        if _SUGGESTION.search(on[0]["body"]):
            problems.append(f"{path}: its one comment carries a suggestion")
    for f in plan["files"]:
        if (f["path"].rsplit("/", 1)[-1] in LOCKFILES and f["path"] not in levels
                and any(i["kind"] == "conflict" for i in f["review_items"])):
            problems.append(f"{f['path']}: a lockfile with a thread per region")
    return problems


def balanced(text: str) -> bool:
    fence: str | None = None
    for line in text.split("\n"):
        m = re.match(r"^(`{3,})", line.strip())
        if fence is None and m:
            fence = m.group(1)
        elif fence is not None and line.strip() and set(line.strip()) == {"`"} \
                and len(line.strip()) >= len(fence):
            fence = None
    return fence is None and text.count("<details>") == text.count("</details>")


async def simulate(fork_git: str, branch: str, preview: Path, root: Path) -> list[str]:
    """Post review.json and file-comments.json, verbatim, to a PR of the branch."""
    import aiohttp

    from bot.github.client import GitHubClient
    from tests.sim import Simulator

    shutil.rmtree(root, ignore_errors=True)  # a simulator of an earlier run: start afresh
    # The PR needs commit 1 and fork main, its parent, not the fork's history (a real
    # fork's clone may lack objects deep in its past, which a full clone would trip on).
    slim = root.with_name(root.name + "-fork.git")
    shutil.rmtree(slim, ignore_errors=True)
    cloned = subprocess.run(["git", "clone", "--quiet", "--bare", "--depth", "2", "--branch",
                             branch, f"file://{fork_git}", str(slim)], capture_output=True)
    if cloned.returncode != 0:  # a clone fetched without its largest blobs, say
        print("simulator: not run: the fork lacks objects of commit 1's tree "
              f"({cloned.stderr.decode(errors='replace').strip().splitlines()[-1]})")
        return []
    subprocess.run(["git", f"--git-dir={slim}", "update-ref", "refs/heads/main",
                    f"{branch}^"], check=True)
    fork_git = str(slim)
    sim = Simulator(root=root).start()
    problems = []
    try:
        sim.create_repo("vime-org", "vime", fork_git)
        pr = await sim.open_pr("vime-org/vime", branch, title="preview", user="vera")
        token = sim.issue_token("vime-org/vime")

        async def provider() -> str:
            return token

        url = f"/repos/vime-org/vime/pulls/{pr.number}"
        async with aiohttp.ClientSession() as session:
            gh = GitHubClient(session, base_url=sim.base_url, token_provider=provider)
            posts = [("reviews", json.loads((preview / "review.json").read_text()))]
            posts += [("comments", c)
                      for c in json.loads((preview / "file-comments.json").read_text())]
            for where, body in posts:
                try:
                    await gh.post(f"{url}/{where}", data=body)
                except Exception as exc:  # reported below, not raised
                    problems.append(f"the simulator refused POST {where}: {exc}")
        threads = sim.review_comments("vime-org/vime", pr.number)
        print(f"simulator: {len(threads)} threads made, "
              f"{sum(1 for t in threads if t.subject_type == 'file')} file-level; "
              f"{len(sim.violations)} OpenAPI violations")
        problems += [f"OpenAPI: {v}" for v in sim.violations + sim.unimplemented]
    finally:
        sim.stop()
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fork", required=True)
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--from", dest="from_rev")
    ap.add_argument("--to", dest="to_rev")
    ap.add_argument("--config", help="the config file (default: the fork's own)")
    ap.add_argument("--out", default="/tmp/forksync-real-preview")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--simulate", action="store_true",
                    help="post the preview's request bodies through the GitHub simulator")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    branch = f"forksync/preview-check-{int(time.time())}"
    cmd = [sys.executable, "-m", "bot.cli", "sync", "--fork", args.fork, "--upstream",
           args.upstream, "--workdir", str(out / "work"), "--json", str(out / "plan.json"),
           "--preview", str(out / "preview"), "--branch", branch, "--quiet"]
    cmd += ["--from", args.from_rev] if args.from_rev else []
    cmd += ["--to", args.to_rev] if args.to_rev else []
    cmd += ["--config", args.config] if args.config else []
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    cli_seconds = time.perf_counter() - started
    if done.returncode != 0:
        print(done.stderr, end="")
        return done.returncode
    preview = out / "preview"
    plan = json.loads((out / "plan.json").read_text())
    review = json.loads((preview / "review.json").read_text())
    files = json.loads((preview / "file-comments.json").read_text())
    check = json.loads((preview / "check.json").read_text())
    commit = review["commit_id"]
    fork_git = subprocess.run(["git", "-C", args.fork, "rev-parse", "--absolute-git-dir"],
                              capture_output=True, text=True, check=True).stdout.strip()
    diff = subprocess.run(["git", f"--git-dir={fork_git}", "diff", "-M", f"{commit}^",
                           commit], capture_output=True, check=True).stdout.decode(
                               "utf-8", "replace")  # a file's bytes need not be UTF-8
    hunks = hunks_by_path(diff)

    problems: list[str] = []
    carried: dict[str, str] = {}
    levels = file_levels(plan)
    for c in review.get("comments", []):
        start = c.get("start_line", c["line"])
        if c["side"] != "RIGHT" or not any(a <= start and c["line"] <= b
                                           for a, b in hunks.get(c["path"], [])):
            problems.append(f"comment on {c['path']} L{start}-{c['line']} is not in one hunk")
        kind = "region" if "start_line" in c else "line"
        carried.update(dict.fromkeys(carried_ids(c["body"]), kind))
    for c in files:
        if c["path"] not in hunks or (hunks[c["path"]] and c["path"] not in levels):
            problems.append(f"file-level comment on {c['path']}: not a path without lines")
        carried.update(dict.fromkeys(carried_ids(c["body"]), "file"))
    problems += one_comment_problems(plan, review, files)
    items = [i for f in plan["files"] for i in f["review_items"]]
    orphans = [i for i in items if i["id"] not in carried]
    for i in orphans:
        # A path the diff shows without lines takes only a file-level comment, which the
        # write budget may leave out (the review body then says so); one with lines never.
        if hunks.get(i["path"]):
            problems.append(f"{i['id']} ({i['path']}) has no thread, yet its path has lines "
                            "in the diff")
        if f"{i['id']}" not in review["body"]:
            problems.append(f"{i['id']} has no thread and is not in the review body")
    bodies = [review["body"], *(c["body"] for c in review.get("comments", [])),
              *(c["body"] for c in files), (preview / "pr.md").read_text()]
    for text in bodies:
        if len(text) > LIMIT or not balanced(text):
            problems.append(f"a body of {len(text)} characters breaks the limits")
    clicks, wrong = suggestion_problems(review, plan, fork_git)
    problems += wrong
    notes = [a for b in annotation_batches(plan, initial_remaining(plan, {})) for a in b]
    assert check["output"]["annotations"] == notes[:50]
    # The PR, the review, each file comment, the body update, the check's requests.
    writes = 3 + len(files) + max(1, math.ceil(len(notes) / 50))

    diff_text = local_diff(fork_git, f"{commit}^", commit)
    times = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        build_preview(plan, diff_text, commit, title="t", branch=branch).files()
        times.append(time.perf_counter() - t0)
    if args.simulate:
        problems += asyncio.run(simulate(fork_git, branch, preview, out / "sim"))
    subprocess.run(["git", f"--git-dir={fork_git}", "update-ref", "-d", f"refs/heads/{branch}"],
                   check=True)

    by: dict[str, int] = {}
    for kind in carried.values():
        by[kind] = by.get(kind, 0) + 1
    s = plan["summary"]
    print(f"window {plan['window_label']}: {s['prs']} PRs, {s['files']} paths, "
          f"{len(items)} review items; PR diff: {len(hunks)} files, "
          f"{sum(len(h) for h in hunks.values())} hunks")
    print(f"threads: {len(carried)} of {len(items)} items carried — {by.get('region', 0)} on a "
          f"whole region ({clicks} with a one-click suggestion), {by.get('line', 0)} on one "
          f"line, {by.get('file', 0)} file-level; {len(review.get('comments', []))} review "
          f"comments, {len(files)} file comments: "
          f"{len(review.get('comments', [])) + len(files)} threads"
          + (f"; one comment each for {len(levels)} file(s) answered together ("
             + ", ".join(f"{p}: {lv.kind}, {lv.regions} regions" for p, lv in levels.items())
             + ")" if levels else ""))
    for i in orphans:
        print(f"  no thread: {i['id']} {i['kind']} {i['path']} (not in the PR diff)")
    print(f"longest body: {max(len(t) for t in bodies):,} characters (limit {LIMIT:,})")
    print(f"write requests: {writes}: PR, review, {len(files)} file comment(s), body update, "
          f"{max(1, math.ceil(len(notes) / 50))} check request(s) for {len(notes)} "
          f"annotations (budget 5 + ⌈{len(items)}/50⌉ = "
          f"{write_budget(len(items))})")
    print(f"build_preview: median {statistics.median(times) * 1000:.0f} ms "
          f"(min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f}, {args.runs} runs); "
          f"the whole CLI run {cli_seconds:.2f} s; preview.html "
          f"{(preview / 'preview.html').stat().st_size / 1024:.0f} KiB")
    for p in problems:
        print(f"PROBLEM: {p}")
    print("all threads anchored inside one hunk, every body within limits" if not problems
          else f"{len(problems)} problem(s)")
    return 1 if problems or writes > write_budget(len(items)) else 0


if __name__ == "__main__":
    raise SystemExit(main())
