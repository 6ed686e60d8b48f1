"""The `forksync` command line: the composition root of the engine, the App and the jobs.

Every failure a user can cause ends as one line on stderr and an exit code from
``EXIT_CODES`` (the README's table is checked against it), never as a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from bot import __version__
from bot.errors import ForksyncError

EXIT_USAGE = 64  # sysexits.h EX_USAGE: 2 is taken by "config error"
EXIT_INTERRUPTED = 130
# The README's table of exit codes; tests/test_cli_errors.py produces every row.
EXIT_CODES: tuple[tuple[int, str], ...] = (
    (0, "success, whatever the number of conflicts"),
    (1, "a general error: a report file or the work directory cannot be written, the "
        "server's port is taken, the App registration failed"),
    (2, "a config or settings error: `.github/forksync.yml`, `--config`, or an environment "
        "variable"),
    (3, "a git or repository error: not a repository, an unreachable URL, a missing branch "
        "or revision (including `#N` with no merge commit), a missing or corrupt object "
        "(named with the path that needed it), or a git process stopped at its time limit"),
    (4, "a window error: no cutoff, `--from` and `--to` in the wrong order, or upstream "
        "history rewritten"),
    (EXIT_USAGE, "a usage error: an unknown option or a missing argument (`EX_USAGE`)"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"),
)


class OutputError(ForksyncError):
    """A file or directory the user named cannot be written."""


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors on their own exit code (its own 2 means "config error")."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _positive(text: str) -> int:
    """A whole number of at least 1, for argparse (a bad one is a usage error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not 1 or more")
    return value


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


def _exit_codes_epilog() -> str:
    return "exit codes:\n" + "\n".join(f"  {code:>3}  {meaning.replace('`', '')}"
                                       for code, meaning in EXIT_CODES)


def _add_repo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fork", required=True, help="the fork: a local path (bare is fine) or URL")
    p.add_argument("--upstream", required=True, help="the upstream: a local path or URL")
    p.add_argument("--fork-branch", default="main", help="the fork's main branch (default: main)")
    p.add_argument("--workdir", metavar="DIR",
                   help="cache for scratch repositories (default: ~/.cache/forksync)")


def _add_plan_args(p: argparse.ArgumentParser) -> None:
    _add_repo_args(p)
    p.add_argument("--from", dest="from_rev", metavar="REV",
                   help="cutoff (default: the newest Upstream-Sync trailer on the fork)")
    p.add_argument("--to", dest="to_rev", metavar="REV",
                   help="tip: a SHA, a branch, or #N for the merge of upstream PR N "
                        "(default: the upstream branch head)")
    p.add_argument("--config", dest="config_path", metavar="FILE",
                   help="config file (default: .github/forksync.yml on the fork's branch)")
    p.add_argument("--json", dest="json_out", metavar="FILE", help="write the JSON report")
    p.add_argument("--markdown", dest="md_out", metavar="FILE",
                   help="write the Markdown report (the draft PR body)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")


def build_parser() -> argparse.ArgumentParser:
    from bot.app.settings import env_help

    raw = argparse.RawDescriptionHelpFormatter
    parser = _Parser(prog="forksync", formatter_class=raw,
                     description="Keep a translated downstream fork in sync with its upstream.",
                     epilog=_exit_codes_epilog())
    parser.add_argument("--version", action="version", version=f"forksync {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, summary: str, description: str, epilog: str = "") -> Any:
        return sub.add_parser(name, help=summary, description=description,
                              epilog=epilog or _exit_codes_epilog(), formatter_class=raw)

    _add_plan_args(command(
        "plan", "dry run: compute the sync and print a summary",
        "Compute the sync of the upstream into the fork and print a summary. A dry run: it "
        "needs no GitHub and writes nothing to either repository; --json and --markdown "
        "write the reports."))
    p_sync = command(
        "sync", "write commit 1 onto a new sync branch of the fork",
        "Compute the sync like `plan`, then write commit 1 (the merge, with conflict markers "
        "kept and the Upstream-Sync trailer) onto a new branch of the local fork. It only "
        "ever creates that branch. With --publish (Action mode) it also pushes it and opens "
        "the draft PR.")
    _add_plan_args(p_sync)
    p_sync.add_argument("--branch", help="sync branch name (default: forksync/sync-<cutoff>-<tip>)")
    p_sync.add_argument("--preview", metavar="DIR",
                        help="write exactly what the App would post for this sync PR into "
                             "DIR: pr.md, review.json, file-comments.json, check.json and "
                             "preview.html")
    p_sync.add_argument("--publish", action="store_true",
                        help="also push the branch and open the draft PR on GitHub "
                             "(Action mode; needs GITHUB_TOKEN and GITHUB_REPOSITORY)")
    p_init = command(
        "init", "propose a config and the first cutoff for a fork",
        "Propose .github/forksync.yml for a fork that has none: the upstream, translation "
        "rules as a commented template, and the cutoff, inferred as the upstream commit "
        "whose translated tree is closest to the fork's main. Writes one commit, carrying "
        "the first Upstream-Sync trailer, onto a new branch of the local fork (what the "
        "App's onboarding PR holds).")
    _add_repo_args(p_init)
    p_init.add_argument("--upstream-repo", metavar="OWNER/NAME",
                        help="the upstream's GitHub name (default: from --upstream's URL)")
    p_init.add_argument("--upstream-branch", default="main",
                        help="the upstream branch to follow (default: main)")
    p_init.add_argument("--config", dest="config_path", metavar="FILE",
                        help="translation rules to measure with (default: none, names as they "
                             "are)")
    p_init.add_argument("--branch", default="forksync/onboarding",
                        help="the branch to write (default: forksync/onboarding)")
    p_init.add_argument("--dry-run", action="store_true",
                        help="print the proposal; write no branch")
    p_learn = command(
        "learn", "measure which proposals this fork's people commit",
        "Replay the fork's own past merges (two-parent merges whose replay conflicts, newest "
        "first) and its past syncs (commits that kept conflict markers as a review queue, "
        "forksync's or made by hand), compare what forksync would have proposed at each "
        "conflict with what people committed, and write the ways of resolving that earned "
        "a tier in this fork (95% Wilson lower bound of their precision >= 0.80, in >= 3 "
        "merges) as .github/forksync-learned.json. Commit that file to the fork's main "
        "branch: later syncs turn the Decide hunks those ways cover into Confirm items.")
    p_learn.add_argument("--fork", required=True, help="the fork: a local path (bare is fine)")
    p_learn.add_argument("--rev", default="HEAD",
                         help="the history to read (default: HEAD, the fork's checked-out "
                              "branch)")
    p_learn.add_argument("--limit", type=_positive, default=200,
                         help="replay at most this many conflicting merges, and read at "
                              "most this many sync commits (default: 200)")
    p_learn.add_argument("--out", metavar="FILE",
                         help="write the file here (default: standard output)")
    p_learn.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    p_check = command("check-config", "validate a config file",
                      "Validate a .github/forksync.yml file and say what it holds.")
    p_check.add_argument("file")
    p_setup = command(
        "setup", "register the GitHub App from its manifest and write .env",
        "Register the forksync GitHub App with GitHub's manifest flow: serve a page on "
        "localhost whose button posts the App's manifest to GitHub, take the code GitHub "
        "redirects back with, exchange it for the App's ID, private key and webhook secret "
        "(POST /app-manifests/{code}/conversions) and write them to the .env file.")
    p_setup.add_argument("--webhook-url", required=True, metavar="URL",
                         help="where GitHub will deliver webhooks: this deployment's "
                              "https://HOST/webhook")
    p_setup.add_argument("--name", default="forksync", help="the App's name (default: forksync)")
    p_setup.add_argument("--org", metavar="ORG",
                         help="register the App for this organization (default: your account)")
    p_setup.add_argument("--api-url", metavar="URL",
                         help="the REST API (default: $FORKSYNC_API_URL, else "
                              "https://api.github.com; GitHub Enterprise Server: "
                              "https://HOST/api/v3)")
    p_setup.add_argument("--github-url", metavar="URL",
                         help="GitHub's web address (default: derived from the API URL)")
    p_setup.add_argument("--env-file", default=".env", metavar="FILE",
                         help="the file to write (default: .env; never overwritten)")
    p_setup.add_argument("--host", default="127.0.0.1", help="address of the local page")
    p_setup.add_argument("--port", type=int, default=0,
                         help="port of the local page (default: any free port)")
    p_serve = command(
        "serve", "run the GitHub App (settings come from the environment)",
        "Run the GitHub App: receive webhooks, queue the work durably, run syncs, "
        "rescans and /sync commands. Settings come from the environment, read once.",
        epilog=env_help() + "\n\n" + _exit_codes_epilog())
    p_serve.add_argument("--role", choices=("all", "web", "worker"), default="all",
                         help="web: webhook intake only; worker: the job workers and the "
                              "scheduler only; all: both (default). Every role serves "
                              "/healthz and /metrics")
    p_db = command(
        "db", "the database: apply its migrations",
        "The database: FORKSYNC_DATABASE_URL (PostgreSQL), else SQLite in FORKSYNC_DATA_DIR. "
        "Needs no GitHub credentials.")
    db_sub = p_db.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    db_sub.add_parser("upgrade", help="apply the missing schema migrations (safe to run twice)")
    p_jobs = command(
        "jobs", "the job queue: counts by state, dead jobs, retries",
        "The job queue in the database `serve` uses: counts by state; --dead lists the jobs "
        "that gave up, with their last error; `retry ID` queues one again. Needs no GitHub "
        "credentials.")
    p_jobs.add_argument("--dead", action="store_true", help="list the dead jobs")
    jobs_sub = p_jobs.add_subparsers(dest="jobs_command", metavar="ACTION")
    p_retry = jobs_sub.add_parser("retry", help="queue a dead job again, with fresh attempts")
    p_retry.add_argument("job_id", type=int, metavar="ID")
    return parser


# -- checks on the paths a user names, before any work is done --------------------------


def _check_output(path: str | None, what: str) -> None:
    """Refuse an output file that cannot be written, before a long run, not after it."""
    if not path:
        return
    target = Path(path)
    if target.is_dir():
        raise OutputError(f"{what} {path} is a directory; expected a file name")
    parent = target.parent
    if not parent.exists():
        raise OutputError(f"cannot write {what} {path}: the directory {parent} does not exist")
    if not parent.is_dir():
        raise OutputError(f"cannot write {what} {path}: {parent} is not a directory")
    if not os.access(parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise OutputError(f"cannot write {what} {path}: permission denied")


def _check_workdir(workdir: str | None) -> None:
    from bot.engine.pipeline import default_workdir

    path = Path(workdir) if workdir else default_workdir()
    if path.exists() and not path.is_dir():
        raise OutputError(f"--workdir {path} is a file; expected a directory")
    _writable_dir(path, f"cannot create the work directory {path}",
                  f"the work directory {path} is not writable")


def _writable_dir(path: Path, cannot: str, denied: str) -> Path:
    """``path`` made if missing, and writable; else one line saying which it is not."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{cannot}: {exc.strerror or exc}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise OutputError(denied)
    return path


def _write(path: str | None, text: str, what: str) -> None:
    if not path:
        return
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise OutputError(f"cannot write {what} {path}: {exc.strerror or exc}") from None


def _plan_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "from_rev": args.from_rev, "to_rev": args.to_rev, "config_path": args.config_path,
        "fork_branch": args.fork_branch, "workdir": args.workdir,
    }


# -- the commands --------------------------------------------------------------------------


def _check_config(args: argparse.Namespace) -> int:
    from bot.engine.config import check_config_file

    print(check_config_file(args.file))
    return 0


def _learn(args: argparse.Namespace) -> int:
    from bot.engine.learn import RECENT, dumps, held_back, learn
    from bot.engine.pipeline import is_url, open_repo

    if is_url(args.fork):
        raise OutputError(f"`learn` reads a local fork; {args.fork} is a URL (clone it first)")
    _check_output(args.out, "the learned tiers")
    git = open_repo(args.fork, Path(args.fork), "fork")
    progress = _Progress(sys.stderr.isatty() and not args.quiet)
    try:
        learned = learn(git, args.rev, limit=args.limit, progress=progress)
    finally:
        progress.done()
    text = dumps(learned)
    if args.out:
        _write(args.out, text, "the learned tiers")
    else:
        sys.stdout.write(text)
    print(f"replayed {learned.merges} merges, {learned.hunks} conflict hunks; "
          f"{len(learned.ways)} way{'' if len(learned.ways) == 1 else 's'} earned a tier",
          file=sys.stderr)
    for w in learned.ways:
        print(f"  {w.tier.value:8} {w.short()}", file=sys.stderr)
    if learned.lapsed:
        print(f"{len(learned.lapsed)} more would earn one but missed in their newest merges "
              f"(not used until they hold in {RECENT} merges in a row):", file=sys.stderr)
        for w in learned.lapsed:
            print(f"  lapsed   {w.short()}", file=sys.stderr)
    short = held_back(learned)
    if short:
        print(f"{len(short)} rule{'' if len(short) == 1 else 's'} with a global tier fall short "
              "of it in this fork (its items are Decide here):", file=sys.stderr)
        for w in short:
            print(f"  held back {w.short()}", file=sys.stderr)
    return 0


def _serve(args: argparse.Namespace) -> int:
    import handlers
    from bot.app.server import run_server
    from bot.app.settings import Settings
    from bot.sync.jobs import JOBS

    # The composition root: the App's server gets the webhook handlers and the jobs.
    run_server(Settings.from_env(os.environ), router=handlers.router, jobs=JOBS,
               role=args.role)
    return 0


def _setup(args: argparse.Namespace) -> int:
    from bot.app.setup import SetupOptions, run_setup

    options = SetupOptions.from_args(args, os.environ)
    result = run_setup(options, announce=lambda text: print(text, flush=True))
    print(f"Registered the GitHub App {result.slug} (ID {result.app_id}); wrote "
          f"{result.env_file}.\nInstall it on your fork: {result.install_url}")
    return 0


def _init(args: argparse.Namespace) -> int:
    from bot.engine.onboarding import propose, write_branch
    from bot.engine.pipeline import is_url

    if is_url(args.fork) and not args.dry_run:
        raise OutputError(f"`init` writes a branch into a local fork; {args.fork} is a URL "
                          "(clone it, or pass --dry-run to print the proposal only)")
    _check_workdir(args.workdir)
    progress = _Progress(sys.stderr.isatty())
    try:
        proposal = propose(args.fork, args.upstream, upstream_repo=args.upstream_repo,
                           upstream_branch=args.upstream_branch, fork_branch=args.fork_branch,
                           config_path=args.config_path, workdir=args.workdir,
                           progress=progress)
        branch = None if args.dry_run else write_branch(proposal, args.branch)
    finally:
        progress.done()
    print(proposal.explanation())
    if args.dry_run:
        print(proposal.config_text, end="")
    else:
        print(branch)
    return 0


def _plan_or_sync(args: argparse.Namespace) -> int:
    from bot.engine.report import human_summary, render_json, render_markdown

    _check_output(args.json_out, "the JSON report")
    _check_output(args.md_out, "the Markdown report")
    if args.command == "sync" and args.publish:
        from bot.sync.publish.cli import publish_from_cli

        return publish_from_cli(args)
    _check_workdir(args.workdir)
    if args.command == "sync" and args.preview:
        _preview_dir(args.preview)
    progress = _Progress(not args.quiet and sys.stderr.isatty())
    try:
        if args.command == "plan":
            from bot.engine.pipeline import plan

            p = plan(args.fork, args.upstream, progress=progress, **_plan_kwargs(args))
            branch = None
        else:
            from bot.engine.pipeline import sync

            result = sync(args.fork, args.upstream, branch=args.branch, progress=progress,
                          **_plan_kwargs(args))
            p, branch = result.plan, result.branch
    finally:
        progress.done()
    report = p.to_json()
    _write(args.json_out, render_json(report), "the JSON report")
    _write(args.md_out, render_markdown(report), "the Markdown report")
    print(human_summary(report))
    if args.command == "sync" and args.preview:
        print(f"preview: {_write_preview(args, result)}")
    if branch:
        print(branch)
    return 0


def _write_preview(args: argparse.Namespace, result: Any) -> Path:
    """``sync --preview DIR``: the App's own request bodies for this commit 1, and the page."""
    from bot.engine.preview import build_preview
    from bot.engine.review import local_diff
    from bot.sync.publish.pr import pr_title

    plan_json = result.plan.to_json()
    # Commit 1's parent is fork main, so this is the diff GitHub shows for the PR.
    diff = local_diff(result.plan.work_git_dir, result.plan.ours, result.commit)
    # With no GitHub there is no URL for an overflow report: the body names the file.
    preview = build_preview(plan_json, diff, result.commit, title=pr_title(plan_json),
                            branch=result.branch, report_path=result.report_path)
    out = _preview_dir(args.preview)
    for name, text in preview.files().items():
        _write(str(out / name), text, "the preview file")
    return (out / "preview.html").resolve()


def _preview_dir(path: str) -> Path:
    """The preview's directory, made and checked before a long run, not after it."""
    out = Path(path)
    cannot = f"cannot write the preview into {out}"
    return _writable_dir(out, cannot, f"{cannot}: permission denied")


def _admin(args: argparse.Namespace) -> int:
    """``forksync db …`` and ``forksync jobs …``: the store only, no GitHub credentials."""
    from bot.app import admin
    from bot.app.settings import Settings
    from bot.app.store import store_for

    settings = Settings.from_env(os.environ, credentials=False)
    if args.command == "db":
        print(admin.db_upgrade(settings))
        return 0
    store = store_for(settings)
    try:
        if args.jobs_command == "retry":
            print(admin.retry_job(store, args.job_id))
        else:
            print(admin.dead_jobs(store) if args.dead else admin.jobs_summary(store))
    finally:
        store.close()
    return 0


_COMMANDS = {"check-config": _check_config, "serve": _serve, "setup": _setup, "init": _init,
             "learn": _learn,
             "plan": _plan_or_sync, "sync": _plan_or_sync, "db": _admin, "jobs": _admin}


def run(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return _COMMANDS[args.command](args)


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
        # The reader went away (`forksync plan | head`): nothing left to tell anyone, and
        # the interpreter's own flush at exit must not complain about it either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 1
    except OSError as exc:
        # The machine refused (a full disk, a permission): the environment, not a bug.
        where = f": {exc.filename}" if exc.filename else ""
        print(f"forksync: error: {exc.strerror or exc}{where}", file=sys.stderr)
        code = 1
    sys.exit(code)


if __name__ == "__main__":
    main()
