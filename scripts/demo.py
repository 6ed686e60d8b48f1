"""The README demo: generate a slime-like upstream and a translated, diverged vime-like fork,
run `forksync plan` and `forksync sync` on them, and show the draft PR that would be opened."""

from __future__ import annotations

import argparse
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
    print("\n== forksync sync (writes commit 1 onto a new branch of the fork)")
    done = subprocess.run([*forksync, "sync", *common], check=True, capture_output=True,
                          text=True)
    print(done.stdout, end="")
    branch = done.stdout.strip().splitlines()[-1]
    log = subprocess.run(["git", "-C", str(scenario.fork_dir), "log", "-1", "--format=%B",
                          branch], check=True, capture_output=True, text=True).stdout
    print(f"\n== commit 1 on {branch}\n{log}")
    print("== PR preview (the draft PR body forksync would open)\n")
    print((out / "pr-body.md").read_text())
    print(f"\nReports: {out / 'report.json'} and {out / 'pr-body.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
