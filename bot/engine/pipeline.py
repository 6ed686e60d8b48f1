"""One sync, from two repositories to a Plan (and, for `sync`, commit 1 on a new branch).

A reader can follow the whole engine from here: open repositories → config →
window → translated merge → classification → reports. Nothing in it talks to
GitHub; the only I/O is git on local repositories (and fetching a URL into a
local cache when one is given).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bot.engine.classify import Classifier
from bot.engine.config import CONFIG_PATH, Config, load_config, load_config_file
from bot.engine.git import CatFile, Git, TreeWriter, reading
from bot.engine.learn import LEARNED_PATH, Learned
from bot.engine.learn import load_from as load_learned
from bot.engine.merge import FORK, UPSTREAM, Entry, TreeIndex, commit_tree_oid, edit_tree, merge
from bot.engine.model import Plan, conflicts_label, inputs_label
from bot.engine.needs import Needs, raw_blobs, window_blobs
from bot.engine.report import needs_overflow, render_markdown
from bot.engine.translate import Translator
from bot.engine.window import (
    TRAILER_SYNC,
    TRAILER_WINDOW,
    check_ancestry,
    find_cutoff,
    list_window,
    resolve_rev,
)
from bot.errors import ConfigError, GitError, MissingObject, WindowError

Progress = Callable[[str], None]
_URL = re.compile(r"^(https?|ssh|git|file)://|^[\w.-]+@[\w.-]+:")


@dataclass(frozen=True)
class SyncResult:
    branch: str
    commit: str
    plan: Plan
    report_path: str | None = None


def is_url(location: str) -> bool:
    """A repository given by URL (fetched into a cache), not a local path."""
    return bool(_URL.match(location))


def default_workdir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "forksync"


def open_repo(location: str, workdir: Path, what: str, *, timeout: float | None = None) -> Git:
    """A local git repository for ``location``: itself, or a cached fetch of a URL."""
    if _URL.match(location):
        key = hashlib.sha256(location.encode()).hexdigest()[:16]
        cache = workdir / "remotes" / f"{key}.git"
        git = Git(cache, timeout=timeout)
        if not cache.exists():
            cache.parent.mkdir(parents=True, exist_ok=True)
            git.run("init", "--bare", "-q", str(cache))
        proc = git.run_proc("fetch", "--quiet", "--prune", "--no-tags", location,
                            "+refs/heads/*:refs/remotes/origin/*")
        if proc.returncode != 0:
            raise GitError(f"cannot fetch the {what} repository {location}: "
                           + git.describe_failure(["fetch"], proc.returncode, proc.stderr)
                           .removeprefix("git fetch failed: "))
        return git
    path = Path(location)
    if not path.exists():
        raise GitError(f"the {what} repository {location} does not exist")
    probe = Git(path / ".git" if (path / ".git").exists() else path, timeout=timeout)
    proc = probe.run_proc("rev-parse", "--absolute-git-dir", "--git-path", "objects")
    if proc.returncode != 0:
        raise GitError(f"the {what} path {location} is not a git repository")
    git_dir, objects = proc.stdout.decode().splitlines()[:2]
    repo = Git(git_dir, timeout=timeout)
    repo.set_object_dir(objects)  # relative to our cwd, which git shares
    return repo


def _branch_commit(git: Git, branch: str, what: str) -> str:
    refs = (f"refs/heads/{branch}", f"refs/remotes/origin/{branch}", branch)
    for ref in refs:
        sha = git.rev_parse(ref)
        if sha:
            return sha
    for ref in refs:  # a branch whose commit is gone is a broken repository, not a typo
        oid = git.missing_commit(ref)
        if oid:
            raise MissingObject(oid, kind="commit", path=f"the head of branch {branch}",
                                repo=f"the {what} repository")
    raise GitError(f"the {what} repository has no branch or revision {branch!r}")


def _branch_ref(git: Git, branch: str) -> str:
    for ref in (f"refs/remotes/origin/{branch}", f"refs/heads/{branch}"):
        if git.rev_parse(ref):
            return ref
    return branch


def work_repo(workdir: Path, fork: Git, upstream: Git) -> Git:
    """A scratch repository that sees both object stores and receives our new objects."""
    key = hashlib.sha256(f"{fork.git_dir}\0{upstream.git_dir}".encode()).hexdigest()[:16]
    path = workdir / "work" / f"{key}.git"
    git = Git(path, timeout=fork.timeout)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        git.run("init", "--bare", "-q", str(path))
    alternates = path / "objects" / "info" / "alternates"
    alternates.write_text(f"{fork.object_dir()}\n{upstream.object_dir()}\n")
    return git


def load_plan_config(fork: Git, fork_commit: str, config: Config | None,
                     config_path: str | None) -> Config:
    if config is not None:
        return config
    if config_path:
        return load_config_file(config_path)
    proc = fork.run_proc("cat-file", "blob", f"{fork_commit}:{CONFIG_PATH}")
    if proc.returncode != 0:
        _config_object_missing(fork, fork_commit)
        raise ConfigError(CONFIG_PATH, None, "(file)",
                          "the fork's main branch has no config; add one or pass --config")
    try:
        text = proc.stdout.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(CONFIG_PATH, None, "(file)", f"UTF-8 text (byte {exc.start} is not)") \
            from None
    return load_config(text, CONFIG_PATH)


def _config_object_missing(fork: Git, fork_commit: str) -> None:
    """Raise MissingObject if the config cannot be read because an object is gone.

    git says "path does not exist" for a path under a missing tree too, so the path is
    walked object by object (only after a failed read).
    """
    with CatFile(fork) as cat, reading(FORK, f"reading {CONFIG_PATH}"):
        index = TreeIndex(cat, commit_tree_oid(cat, fork_commit, what="the fork's main"),
                          at=" on fork main")
        entry = index.get(CONFIG_PATH)
        if entry is not None:
            cat.read(entry.oid, path=CONFIG_PATH)


def plan(fork: str, upstream: str, *, from_rev: str | None = None, to_rev: str | None = None,
         config: Config | None = None, config_path: str | None = None,
         fork_branch: str = "main", workdir: str | Path | None = None,
         progress: Progress | None = None, git_timeout: float | None = None,
         workflows: bool = True, learned: Learned | None = None) -> Plan:
    """Compute the sync of ``upstream`` into ``fork``: a dry run that writes nothing to either.

    ``git_timeout`` limits each git process (default ``bot.engine.git.DEFAULT_TIMEOUT``).
    ``workflows=False`` keeps every workflow file as the fork has it and lists upstream's
    changes to them as items to port by hand (for a pusher GitHub would refuse them from).
    ``learned`` is the tiers the fork earned where it has no ``.github/forksync-learned.json``
    (the App's own record of its merged sync PRs); the committed file wins, less the ways
    that record saw missed in its newest merged sync PRs (``Learned.checked_by``).
    """
    return _plan(fork, upstream, from_rev=from_rev, to_rev=to_rev, config=config,
                 config_path=config_path, fork_branch=fork_branch, workdir=workdir,
                 progress=progress, git_timeout=git_timeout, workflows=workflows,
                 learned=learned)[0]


@dataclass(frozen=True)
class _Opened:
    """The repositories and the window's ends, before anything is merged."""

    fork: Git
    upstream: Git
    ours: str
    config: Config
    translator: Translator
    cutoff: str
    tip: str
    workdir: Path
    at_head: bool  # the window ends at the upstream branch's head


def _ends(cfg: Config, from_rev: str | None, to_rev: str | None) -> dict[str, str]:
    """How a window error names the cutoff and the tip: as the user gave them."""
    return {"cutoff_name": "--from" if from_rev else "the cutoff (from the trailer)",
            "tip_name": "--to" if to_rev else f"the upstream {cfg.upstream_branch} head"}


def _open(fork: str, upstream: str, *, from_rev: str | None, to_rev: str | None,
          config: Config | None, config_path: str | None, fork_branch: str,
          workdir: str | Path | None, say: Progress, git_timeout: float | None) -> _Opened:
    """Open both repositories, read the config, find the cutoff and the tip (commits only)."""
    wd = Path(workdir) if workdir else default_workdir()
    say("opening repositories")
    fork_git = open_repo(fork, wd, "fork", timeout=git_timeout)
    up_git = open_repo(upstream, wd, "upstream", timeout=git_timeout)
    ours = _branch_commit(fork_git, fork_branch, "fork")
    cfg = load_plan_config(fork_git, ours, config, config_path)
    up_branch_ref = _branch_ref(up_git, cfg.upstream_branch)

    say("finding the window")
    if from_rev:
        cutoff = resolve_rev(up_git, from_rev, up_branch_ref, "--from")
    else:
        with reading(FORK, f"the history of {fork_branch}", kind="commit"):
            found = find_cutoff(fork_git, ours, cfg.upstream_repo, up_git)
        if found is None:
            raise WindowError(
                f"no cutoff: no `{TRAILER_SYNC}: {cfg.upstream_repo}@<sha>` trailer on the "
                f"fork's {fork_branch} branch; pass --from with the upstream commit of the last "
                "sync (`forksync init` proposes one)")
        cutoff_sha = up_git.rev_parse(found)
        if cutoff_sha is None and (gone := up_git.missing_commit(found)):
            raise MissingObject(gone, kind="commit", repo=UPSTREAM,
                                path=f"the cutoff named by the {TRAILER_SYNC} trailer")
        if cutoff_sha is None:
            raise GitError(f"the cutoff {found[:12]} from the {TRAILER_SYNC} trailer is not in "
                           "the upstream repository (was upstream force-pushed?)")
        cutoff = cutoff_sha
    tip = resolve_rev(up_git, to_rev, up_branch_ref, "--to") if to_rev else \
        _branch_commit(up_git, cfg.upstream_branch, "upstream")
    # A tip asked for that is the branch head (the App always names its tip by SHA) ends
    # the window at the head, and the body says so, as a preview of the same sync does.
    at_head = not to_rev or up_git.rev_parse(up_branch_ref) == tip
    return _Opened(fork_git, up_git, ours, cfg, Translator(cfg.translate), cutoff, tip, wd,
                   at_head)


def needs(fork: str, upstream: str, *, from_rev: str | None = None, to_rev: str | None = None,
          config: Config | None = None, config_path: str | None = None,
          fork_branch: str = "main", workdir: str | Path | None = None,
          git_timeout: float | None = None, workflows: bool = True) -> Needs:
    """The blobs ``plan`` and ``sync`` with the same arguments read, per repository.

    Reads commits and trees only, so a partial clone can answer it before it has any
    blob; fetch the answer (``bot.github.remote.fetch_blobs``), then plan. The answer
    covers either value of ``workflows`` (kept workflow files read the same blobs).
    """
    del workflows
    o = _open(fork, upstream, from_rev=from_rev, to_rev=to_rev, config=config,
              config_path=config_path, fork_branch=fork_branch, workdir=workdir,
              say=lambda _msg: None, git_timeout=git_timeout)
    with reading(UPSTREAM, f"the history from {o.cutoff[:12]} to {o.tip[:12]}", kind="commit"):
        check_ancestry(o.upstream, o.cutoff, o.tip, **_ends(o.config, from_rev, to_rev))
    work = work_repo(o.workdir, o.fork, o.upstream)
    return window_blobs(work, o.ours, o.cutoff, o.tip, o.translator)


def _plan(fork: str, upstream: str, *, from_rev: str | None, to_rev: str | None,
          config: Config | None, config_path: str | None, fork_branch: str,
          workdir: str | Path | None, progress: Progress | None,
          git_timeout: float | None, workflows: bool = True,
          learned: Learned | None = None) -> tuple[Plan, Git]:
    """The plan, and the fork repository it read (``sync`` writes its branch there)."""
    say = progress or (lambda _msg: None)
    o = _open(fork, upstream, from_rev=from_rev, to_rev=to_rev, config=config,
              config_path=config_path, fork_branch=fork_branch, workdir=workdir, say=say,
              git_timeout=git_timeout)
    fork_git, up_git, ours, cfg, translator = o.fork, o.upstream, o.ours, o.config, o.translator
    cutoff, tip, wd, at_head = o.cutoff, o.tip, o.workdir, o.at_head
    with reading(UPSTREAM, f"the history from {cutoff[:12]} to {tip[:12]}", kind="commit"):
        check_ancestry(up_git, cutoff, tip, **_ends(cfg, from_rev, to_rev))
        window = list_window(up_git, cutoff, tip)

    work = work_repo(wd, fork_git, up_git)
    # One object reader and one tree writer for the whole plan: trees read or written
    # while merging are not read again while classifying.
    with CatFile(work) as cat, TreeWriter(work, cache=cat.tree_cache) as writer:
        ours_tree = commit_tree_oid(cat, ours, repo=FORK, what=f"the head of {fork_branch}")
        outcome = merge(work, cat, writer, ours_tree, cutoff, tip, translator, progress=say)
        say("classifying conflicts")
        from_file = load_learned(fork_git, ours)
        stale = []
        if from_file is not None and from_file.warning:  # an older file: said, not used
            stale = [{"kind": "learned-file", "path": LEARNED_PATH, "key": "learned",
                      "message": from_file.warning}]
            from_file = None
        classified = Classifier(work, cat, outcome, cfg, translator, window, cutoff,
                                tip, workflows=workflows,
                                learned=from_file.checked_by(learned) if from_file else learned
                                ).classify(writer)
    p = Plan(
        upstream_repo=cfg.upstream_repo, upstream_branch=cfg.upstream_branch, cutoff=cutoff,
        tip=tip, ours=ours, window=window, files=classified.files,
        merged_tree=classified.merged_tree, work_git_dir=work.git_dir, fork_branch=fork_branch,
        messages=[m.text for m in outcome.messages if m.kind.startswith("CONFLICT")],
        tip_source="head" if at_head or not to_rev else to_rev.strip(),
        warnings=classified.rule_warnings + classified.warnings + stale,
        translated=cfg.translate.renames,
    )
    return p, fork_git


def commit_message(p: Plan) -> str:
    counts = p.counts()
    prs = sum(1 for e in p.window if e.number is not None)
    conflicted = counts["conflict"]
    lines = [
        f"sync({p.upstream_repo} {p.window_label}): 3-way merge"
        + (f" [{conflicts_label(conflicted)}]" if conflicted else ""),
        "",
        inputs_label(f"fork {p.fork_branch} @ {p.ours[:12]}", p.cutoff[:12], p.tip[:12],
                     p.translated),
        f"{prs} upstream PR{'s' if prs != 1 else ''}, {len(p.files)} path"
        f"{'s' if len(p.files) != 1 else ''}: "
        + ", ".join(f"{v} {k}" for k, v in counts.items() if v),
        "",
        "Conflict markers are kept on purpose: they are the review queue. Later commits",
        "resolve them.",
        "",
        f"{TRAILER_SYNC}: {p.upstream_repo}@{p.tip}",
        f"{TRAILER_WINDOW}: {p.window_label}",
    ]
    return "\n".join(lines) + "\n"


def report_file_path(p: Plan) -> str:
    return f".forksync/reports/{p.cutoff[:10]}..{p.tip[:10]}.md"


def sync(fork: str, upstream: str, *, branch: str | None = None, from_rev: str | None = None,
         to_rev: str | None = None, config: Config | None = None, config_path: str | None = None,
         fork_branch: str = "main", workdir: str | Path | None = None,
         progress: Progress | None = None, git_timeout: float | None = None,
         workflows: bool = True, learned: Learned | None = None) -> SyncResult:
    """Plan, then write commit 1 onto a new branch of the local fork. Moves no other ref.

    ``workflows`` and ``learned`` as for :func:`plan`.
    """
    fork_path = Path(fork)
    if _URL.match(fork) or not fork_path.exists():
        raise GitError(f"`sync` writes a branch into a local fork repository; {fork} is not one")
    p, fork_git = _plan(fork, upstream, from_rev=from_rev, to_rev=to_rev, config=config,
                        config_path=config_path, fork_branch=fork_branch, workdir=workdir,
                        progress=progress, git_timeout=git_timeout, workflows=workflows,
                        learned=learned)
    work = Git(p.work_git_dir, timeout=git_timeout)
    branch = branch or f"forksync/sync-{p.cutoff[:10]}-{p.tip[:10]}"
    tree = p.merged_tree
    report_path = None
    plan_json = p.to_json()
    if needs_overflow(plan_json):
        report_path = report_file_path(p)
        oid = work.hash_blobs([render_markdown(plan_json).encode()])[0]
        with CatFile(work) as cat, TreeWriter(work) as writer:
            tree = edit_tree(cat, writer, tree, {report_path: Entry("100644", oid)})
    # Dated from its inputs, so the same sync run twice makes the same commit.
    date = work.text("log", "-1", "--format=%ct +0000", p.tip).strip()
    ours_date = work.text("log", "-1", "--format=%ct", p.ours).strip()
    date = max(date.split()[0], ours_date, key=int) + " +0000"
    commit = work.commit_tree(tree, [p.ours], commit_message(p), date=date)
    existing = fork_git.rev_parse(f"refs/heads/{branch}")
    if existing == commit:
        return SyncResult(branch, commit, p, report_path)
    if existing is not None:
        raise GitError(f"branch {branch} already exists in the fork at {existing[:12]}; "
                       "delete it or pass --branch")
    progress and progress(f"writing {branch}")
    # A lease on "no such branch" means we can only ever create it, never move it.
    work.run("push", "--quiet", f"--force-with-lease=refs/heads/{branch}:", fork_git.git_dir,
             f"{commit}:refs/heads/{branch}")
    _complete(work, fork_git, p.ours, commit)
    return SyncResult(branch, commit, p, report_path)


def _complete(work: Git, fork: Git, ours: str, commit: str) -> None:
    """Give the fork every blob of the diff from ``ours`` to commit 1 (the PR's diff).

    A push sends only what the fork's refs do not reach, and in a partial clone a blob
    that fork main reaches (an empty file, a file also added upstream) may be absent.
    """
    oids = sorted({oid for oid, _ in raw_blobs(work.run("diff-tree", "-r", "-z", "--no-renames",
                                                        ours, commit))})
    missing = fork.missing_objects(oids)
    if missing:
        with CatFile(work) as cat, reading(None, "commit 1"):
            fork.hash_blobs([data for _, data in cat.read_many(missing)])
