"""The README demo: generate a slime-like upstream and a translated, diverged vime-like fork,
run `forksync plan` and `forksync sync` on them, and show the draft PR that would be opened."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.factory import make_demo  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=str(ROOT / "demo-out"),
                        help="where to generate the repositories and reports (default: demo-out/)")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    print(f"== generating an upstream (slime) and a translated, diverged fork (vime) in {out}")
    scenario = make_demo(out / "repos")
    forksync = [str(ROOT / ".venv" / "bin" / "forksync")]
    if not Path(forksync[0]).exists():
        forksync = [sys.executable, "-m", "bot.cli"]
    common = ["--fork", str(scenario.fork_dir), "--upstream", str(scenario.upstream_dir),
              "--workdir", str(out / "cache")]
    print("\n== forksync plan (dry run)")
    subprocess.run([*forksync, "plan", *common, "--json", str(out / "report.json"),
                    "--markdown", str(out / "pr-body.md")], check=True)
    print("\n== forksync sync --preview (commit 1 onto a new branch of the fork, and exactly "
          "what the App would post)")
    preview = out / "preview"
    done = subprocess.run([*forksync, "sync", *common, "--preview", str(preview)], check=True,
                          capture_output=True, text=True)
    print(done.stdout, end="")
    branch = done.stdout.strip().splitlines()[-1]
    log = subprocess.run(["git", "-C", str(scenario.fork_dir), "log", "-1", "--format=%B",
                          branch], check=True, capture_output=True, text=True).stdout
    print(f"\n== commit 1 on {branch}\n{log}")
    print("== the draft PR body forksync would open (preview/pr.md)\n")
    print((preview / "pr.md").read_text())
    review = json.loads((preview / "review.json").read_text())
    files = json.loads((preview / "file-comments.json").read_text())
    print(f"\n== the review: {len(review.get('comments', []))} comments on the diff, "
          f"{len(files)} file-level comments (preview/review.json, file-comments.json)\n")
    for c in review.get("comments", []):
        where = (f"L{c['start_line']}–{c['line']}" if "start_line" in c else f"L{c['line']}")
        print(f"  {c['path']} {where}: {c['body'].splitlines()[0]}")
    for c in files:
        print(f"  {c['path']} (file): {c['body'].splitlines()[0]}")
    print(f"\nReports: {out / 'report.json'} and {out / 'pr-body.md'}")
    print(f"Open the preview of the whole PR in a browser: {(preview / 'preview.html').as_uri()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
