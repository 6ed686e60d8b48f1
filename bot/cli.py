"""The `forksync` command line.

Exit codes: 0 success (whatever the number of conflicts); 1 a general error;
2 a config error; 3 a git or repository error; 4 a window error (no cutoff, or
upstream history rewritten); 130 interrupted. Every error is one line on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bot import __version__
from bot.errors import ForksyncError

EXIT_INTERRUPTED = 130


class _Progress:
    """Stage lines on stderr, only when a person is watching a terminal."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.start = time.monotonic()

    def __call__(self, message: str) -> None:
        if self.enabled:
            sys.stderr.write(f"\r\033[K[{time.monotonic() - self.start:5.1f}s] {message}…")
            sys.stderr.flush()

    def done(self) -> None:
        if self.enabled:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def _add_plan_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fork", required=True, help="the fork: a local path (bare is fine) or URL")
    p.add_argument("--upstream", required=True, help="the upstream: a local path or URL")
    p.add_argument("--from", dest="from_rev", metavar="REV",
                   help="cutoff (default: the newest Upstream-Sync trailer on the fork)")
    p.add_argument("--to", dest="to_rev", metavar="REV",
                   help="tip: a SHA, a branch, or #N for the merge of upstream PR N "
                        "(default: the upstream branch head)")
    p.add_argument("--config", dest="config_path", metavar="FILE",
                   help="config file (default: .github/forksync.yml on the fork's branch)")
    p.add_argument("--fork-branch", default="main", help="the fork's main branch (default: main)")
    p.add_argument("--json", dest="json_out", metavar="FILE", help="write the JSON report")
    p.add_argument("--markdown", dest="md_out", metavar="FILE",
                   help="write the Markdown report (the draft PR body)")
    p.add_argument("--workdir", metavar="DIR",
                   help="cache for scratch repositories (default: ~/.cache/forksync)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="forksync",
        description="Keep a translated downstream fork in sync with its upstream.",
        epilog="Exit codes: 0 success (whatever the number of conflicts), 1 error, "
               "2 config error, 3 git/repository error, 4 window error.",
    )
    parser.add_argument("--version", action="version", version=f"forksync {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p_plan = sub.add_parser("plan", help="dry run: compute the sync and print a summary")
    _add_plan_args(p_plan)
    p_sync = sub.add_parser("sync", help="write commit 1 onto a new sync branch of the fork")
    _add_plan_args(p_sync)
    p_sync.add_argument("--branch", help="sync branch name (default: forksync/sync-<cutoff>-<tip>)")
    p_sync.add_argument("--publish", action="store_true",
                        help="also push the branch and open the draft PR on GitHub "
                             "(Action mode; needs GITHUB_TOKEN and GITHUB_REPOSITORY)")
    p_check = sub.add_parser("check-config", help="validate a config file")
    p_check.add_argument("file")
    sub.add_parser("serve", help="run the GitHub App (settings come from the environment)")
    return parser


def _write(path: str | None, text: str) -> None:
    if path:
        Path(path).write_text(text, encoding="utf-8")


def _plan_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "from_rev": args.from_rev, "to_rev": args.to_rev, "config_path": args.config_path,
        "fork_branch": args.fork_branch, "workdir": args.workdir,
    }


def run(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "check-config":
        from bot.engine.config import load_config_file

        cfg = load_config_file(args.file)
        print(f"{args.file}: ok (upstream {cfg.upstream_repo}@{cfg.upstream_branch}, "
              f"{len(cfg.translate.replace)} replace rules, {len(cfg.policies)} policies)")
        return 0
    if args.command == "serve":
        import handlers
        from bot.app.server import run_server
        from bot.app.settings import Settings
        from bot.sync.jobs import JOBS

        # The composition root: the App's server gets the webhook handlers and the jobs.
        run_server(Settings.from_env(os.environ), router=handlers.router, jobs=JOBS)
        return 0
    from bot.engine.report import human_summary, render_json, render_markdown

    progress = _Progress(not args.quiet and sys.stderr.isatty())
    try:
        if args.command == "plan":
            from bot.engine.pipeline import plan

            p = plan(args.fork, args.upstream, progress=progress, **_plan_kwargs(args))
            branch = None
        else:
            if args.publish:
                from bot.sync.publish.cli import publish_from_cli

                return publish_from_cli(args)
            from bot.engine.pipeline import sync

            result = sync(args.fork, args.upstream, branch=args.branch, progress=progress,
                          **_plan_kwargs(args))
            p, branch = result.plan, result.branch
    finally:
        progress.done()
    report = p.to_json()
    _write(args.json_out, render_json(report))
    _write(args.md_out, render_markdown(report))
    print(human_summary(report))
    if branch:
        print(branch)
    return 0


def main(argv: Sequence[str] | None = None) -> None:
    try:
        code = run(argv)
    except ForksyncError as exc:
        print(f"forksync: error: {exc}", file=sys.stderr)
        code = exc.exit_code
    except KeyboardInterrupt:
        print("forksync: interrupted", file=sys.stderr)
        code = EXIT_INTERRUPTED
    except BrokenPipeError:
        code = 1
    sys.exit(code)


if __name__ == "__main__":
    main()
