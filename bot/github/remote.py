"""git over HTTP with a token that never touches argv, a URL, a log or the disk.

The token travels as an ``http.extraHeader`` set through ``GIT_CONFIG_COUNT`` /
``GIT_CONFIG_KEY_0`` / ``GIT_CONFIG_VALUE_0`` in the child's environment: other
users on the host cannot read it from ``ps``, and nothing is written into the
repository's config. Every failure becomes a ``GitError`` passed through
``mask_secrets`` (bot.engine.process).

Pushes always go through ``--force-with-lease`` with an explicit expected head: the
bot only ever overwrites a sync-branch head that it wrote itself (DESIGN.md).

The caches are **partial clones**. :func:`fetch_branch` brings a branch's commits
(the history costs no trees and no blobs; later fetches bring new commits with the
trees they changed), :func:`fetch_trees` the trees of the commits a job reads, and
:func:`fetch_blobs` the blobs it reads, each in one request. The promisor remote is
named only on the command line of these fetches, never in a cache's config: every
other git command (the engine's above all) finds a missing object missing, and can
never fetch it lazily, one object at a time, over the network.
"""

from __future__ import annotations

import base64
import fcntl
import logging
import os
import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from bot.engine.git import Git
from bot.engine.needs import blobs_at
from bot.engine.process import mask_secrets, no_space
from bot.errors import DiskFull, GitError, MissingObject
from bot.github import caches

log = logging.getLogger(__name__)

ZERO_SHA = "0" * 40
PROMISOR = "origin"  # the promisor remote's name, on fetches' command lines only
BLOB_FILTER = "blob:none"
TREE_FILTER = "tree:0"  # commits alone
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


class CacheBroken(GitError):
    """A cache repository is corrupt or half written: delete it and fetch again."""

    def __init__(self, git_dir: str | Path, detail: str) -> None:
        self.git_dir = str(git_dir)
        super().__init__(f"the cache {git_dir} is broken ({detail})")


# git's words for a repository it cannot read or update (not for a network failure).
_BROKEN = re.compile(
    r"not a git repository|does not match index|index file .* is too small|is corrupt|"
    r"bad object|object [0-9a-f]{40,64} not found|did not send all necessary objects|"
    r"cannot lock ref|unable to read|inflate|cannot be accessed|object file .* is empty|"
    r"missing (?:blob|tree|commit)|bad tree|invalid object", re.IGNORECASE)


class PushRejected(GitError):
    """The remote branch is not where we expected: someone else pushed to it."""

    def __init__(self, branch: str, expected: str | None, detail: str) -> None:
        self.branch = branch
        self.expected = expected
        was = f"at {expected[:12]}" if expected else "absent"
        super().__init__(mask_secrets(
            f"refusing to overwrite {branch}: it moved since the bot last wrote it "
            f"(expected {was}); {detail}"))


class WorkflowsRefused(GitError):
    """GitHub refused the push: it changes a workflow file, and the App lacks the permission."""

    def __init__(self, branch: str, reason: str) -> None:
        super().__init__(
            f"GitHub refused the push to {branch}: {reason}. Grant the App the Workflows "
            "permission (docs/APP.md), or keep the fork's workflow files with the policy "
            "`{paths: ['.github/workflows/**'], action: skip}`.")


def auth_env(token: str | None) -> dict[str, str]:
    """Environment that makes git send ``Authorization: Basic x-access-token:TOKEN``."""
    if not token:
        return {}
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode("ascii")
    return {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "http.extraHeader",
        "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}",
    }


# protocol v2 fetches only the refs asked for; no credential helper may prompt.
_CONFIG = ("protocol.version=2", "credential.helper=")


def _git(git_dir: str | Path, token: str | None) -> Git:
    return Git(git_dir, config=list(_CONFIG), env=auth_env(token))


def _mask(text: str, token: str | None) -> str:
    text = mask_secrets(text)
    if token and len(token) >= 8:  # a shorter "token" is a test stub, and would shred the text
        for secret in (token, base64.b64encode(f"x-access-token:{token}".encode()).decode()):
            text = text.replace(secret, "***")
    return text


def _failure(proc: subprocess.CompletedProcess[bytes], args: Sequence[str], token: str | None,
             what: str) -> GitError:
    full = no_space(proc.stderr)
    if full is not None:  # not the remote's fault: the job fails, and is tried again later
        return DiskFull(_mask(f"the disk is full: {what}: {full}", token))
    return GitError(_mask(f"{what}: " + Git.describe_failure(list(args), proc.returncode,
                                                              proc.stderr), token))


def _run(git: Git, args: Sequence[str], token: str | None, what: str) -> str:
    proc = git.run_proc(*args)
    if proc.returncode != 0:
        raise _failure(proc, args, token, what)
    return proc.stdout.decode("utf-8", "replace")


def _into_cache(git: Git, args: Sequence[str], token: str | None, what: str,
                input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run a fetch into a cache; a cache git cannot use is :class:`CacheBroken`."""
    proc = git.run_proc(*args, input=input)
    if proc.returncode != 0 and not no_space(proc.stderr):
        found = _BROKEN.search(proc.stderr.decode("utf-8", "replace"))
        if found:
            raise CacheBroken(git.git_dir, _mask(found.group(0), token))
    return proc


def _promisor(url: str) -> list[str]:
    # The promisor remote, for one command only (see the module's docstring). Naming the
    # filter too keeps git from writing the remote into the cache's config.
    return [f"remote.{PROMISOR}.url={url}", f"remote.{PROMISOR}.promisor=true",
            f"remote.{PROMISOR}.partialclonefilter={BLOB_FILTER}"]


def fetch(git_dir: str | Path, url: str, refspecs: Sequence[str], token: str | None,
          *, depth: int | None = None, blobs: bool = False, trees: bool = True) -> None:
    """Fetch ``refspecs`` from ``url`` into the cache at ``git_dir``: commits and trees.

    ``trees=False`` fetches commits alone (a treeless fetch: the history costs no
    trees; :func:`fetch_trees` brings those of the commits a job reads). ``blobs=True``
    fetches everything. A server that does not filter sends everything, which is slower
    but just as correct.
    """
    spec = "--no-filter" if blobs else f"--filter={BLOB_FILTER if trees else TREE_FILTER}"
    args = ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--force", spec]
    if depth is not None:
        args.append(f"--depth={depth}")
    git = Git(git_dir, config=[*_CONFIG, *_promisor(url)], env=auth_env(token))
    what = f"fetching from {_mask(url, token)}"
    proc = _into_cache(git, [*args, "--", PROMISOR, *refspecs], token, what)
    if proc.returncode != 0:
        raise _failure(proc, args, token, what)


def fetch_branch(git_dir: str | Path, url: str, branch: str, token: str | None, *,
                 ref: str | None = None) -> str | None:
    """Fetch ``branch`` into ``ref`` (default ``refs/heads/<branch>``); its new head.

    The first time, commits alone: the history's trees are never read, and
    :func:`fetch_trees` brings those of the commits a job reads. Later, the new commits
    come with their trees, less what the tree of the head the cache had holds: the
    server leaves out what it knows the cache has, so only what changed comes.
    """
    local = ref or f"refs/heads/{branch}"
    git = Git(git_dir)
    before = git.rev_parse(local)
    warm = before is not None and not git.missing_objects(_roots(git, [before]))
    fetch(git_dir, url, [f"+refs/heads/{branch}:{local}"], token, trees=warm)
    return git.rev_parse(local)


def fetch_trees(git_dir: str | Path, url: str, commits: Sequence[str], token: str | None,
                *, base: str | None = None, repo: str | None = None) -> int:
    """Give every commit of ``commits`` its whole tree (no blobs); returns the trees fetched.

    A root tree the cache lacks comes whole, with one request for all of them (the
    union of a window's roots is about one tree of the repository, plus what the
    window changed). What a fetch of new commits left out, believing the cache has it
    (a directory as an older commit had it), is then fetched too: the trees under the
    roots are checked, below what ``base``'s tree (one the cache has whole) holds. A
    tree the server does not have is :class:`MissingObject`.
    """
    local = Git(git_dir)
    roots = _roots(local, commits)
    base_roots = _roots(local, [base]) if base else []
    negative = [] if local.missing_objects(base_roots) else base_roots
    missing = local.missing_objects(roots)
    fetched = 0
    for _ in range(4):
        if missing:
            _want(local, url, missing, token, "trees")
            fetched += len(missing)
            gone = local.missing_objects(missing)
            if gone:
                raise MissingObject(gone[0], kind="tree", repo=repo or _mask(url, token),
                                    path="a directory of a commit")
        missing = _holes(local, roots, negative)
        if not missing:
            return fetched
    raise MissingObject(missing[0], kind="tree", repo=repo or _mask(url, token),
                        path="a directory the server did not send")


def _want(local: Git, url: str, oids: Sequence[str], token: str | None, what: str) -> None:
    """One fetch of these objects by OID (no negotiation; blobs only if wanted)."""
    git = Git(local.git_dir, config=[*_CONFIG, *_promisor(url), "fetch.negotiationAlgorithm=noop"],
              env=auth_env(token))
    args = ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--recurse-submodules=no",
            f"--filter={BLOB_FILTER}", "--stdin", PROMISOR]
    doing = f"fetching {len(oids)} {what} from {_mask(url, token)}"
    proc = _into_cache(git, args, token, doing, input="".join(f"{o}\n" for o in oids).encode())
    # "not our ref": the server has no such object, which the caller names.
    if proc.returncode != 0 and b"not our ref" not in proc.stderr:
        raise _failure(proc, args, token, doing)


def _roots(git: Git, commits: Sequence[str]) -> list[str]:
    """The root tree of each commit (read from the commits alone)."""
    if not commits:
        return []
    out = git.text("log", "--no-walk=unsorted", "--format=%T", "--stdin",
                   input="".join(f"{c}\n" for c in commits).encode())
    return sorted(set(out.split()))


def _holes(git: Git, roots: Sequence[str], negative: Sequence[str]) -> list[str]:
    """Trees under ``roots`` the cache lacks (below ``negative`` roots nothing is looked at)."""
    out = git.text("rev-list", "--objects", f"--filter={BLOB_FILTER}", "--missing=print",
                   "--no-object-names", "--stdin",
                   input="".join(f"{x}\n" for x in [*roots, *(f"^{n}" for n in negative)])
                   .encode())
    return sorted({line[1:] for line in out.split() if line.startswith("?")})


def fetch_blobs(git_dir: str | Path, url: str, blobs: Mapping[str, str], token: str | None,
                *, repo: str | None = None) -> int:
    """Bring the ``blobs`` (OID -> a path holding it) missing from the cache, in one fetch.

    Returns how many were fetched. One that the server does not send either is a
    :class:`MissingObject` naming it, its path and ``repo``.
    """
    local = Git(git_dir)
    wanted = local.missing_objects(list(blobs))
    if not wanted:
        return 0
    _want(local, url, wanted, token, "blobs")
    still = local.missing_objects(wanted)
    if still:
        raise MissingObject(still[0], kind="blob", path=blobs[still[0]],
                            repo=repo or _mask(url, token))
    return len(wanted)


def fetch_files(git_dir: str | Path, url: str, revs: Sequence[str], paths: Sequence[str],
                token: str | None, *, base: str | None = None, repo: str | None = None) -> int:
    """Bring the trees of ``revs`` and the blobs of ``paths`` at them, where the cache lacks
    them (``base``: see :func:`fetch_trees`); returns how many blobs were fetched."""
    fetch_trees(git_dir, url, revs, token, base=base, repo=repo)
    return fetch_blobs(git_dir, url, blobs_at(Git(git_dir), revs, paths), token, repo=repo)


def push_with_lease(git_dir: str | Path, url: str, local_sha: str, branch: str,
                    expected_remote_sha: str | None, token: str | None) -> None:
    """Point ``refs/heads/<branch>`` at ``local_sha``, only if it is at ``expected_remote_sha``.

    ``expected_remote_sha=None`` means the branch must not exist yet. Raises
    ``PushRejected`` if the remote head is anywhere else (someone pushed), and
    ``GitError`` for every other failure.
    """
    ref = branch if branch.startswith("refs/") else f"refs/heads/{branch}"
    lease = f"--force-with-lease={ref}:{expected_remote_sha or ''}"
    git = _git(git_dir, token)
    args = ["push", "--porcelain", lease, "--", url, f"{local_sha}:{ref}"]
    proc = git.run_proc(*args)
    out = proc.stdout.decode("utf-8", "replace")
    err = proc.stderr.decode("utf-8", "replace")
    if proc.returncode == 0:
        return
    if "stale info" in out or "stale info" in err or "(fetch first)" in out:
        line = next((ln for ln in out.splitlines() if ln.startswith("!")), "rejected")
        raise PushRejected(branch, expected_remote_sha, _mask(line.strip(), token))
    # The server's reason is on the porcelain "!" line: "[remote rejected] (reason)".
    reason = next((m.group(1) for ln in out.splitlines() if ln.startswith("!")
                   and (m := re.search(r"\((.+)\)\s*$", ln))), None)
    if reason is not None and "`workflows` permission" in reason:
        raise WorkflowsRefused(branch, _mask(reason, token))
    full = no_space(proc.stderr)
    if full is not None:  # not the remote's fault: the job fails, and is tried again later
        raise DiskFull(_mask(f"the disk is full: pushing {branch} to {url}: {full}", token))
    raise GitError(_mask(f"pushing {branch} to {url}: " + (f"{reason}; " if reason else "")
                         + Git.describe_failure(["push"], proc.returncode, proc.stderr), token))


def ls_remote(url: str, token: str | None, *patterns: str) -> dict[str, str]:
    """The remote's refs as ``{refname: sha}`` (``HEAD`` included unless patterns filter it)."""
    out = _run(_git(os.devnull, token), ["ls-remote", "--", url, *patterns], token,
               f"listing {_mask(url, token)}")
    refs: dict[str, str] = {}
    for line in out.splitlines():
        sha, _, name = line.partition("\t")
        if name:
            refs[name] = sha
    return refs


def remote_head(url: str, branch: str, token: str | None) -> str | None:
    """The SHA a remote branch points at, or None if it does not exist."""
    ref = branch if branch.startswith("refs/") else f"refs/heads/{branch}"
    return ls_remote(url, token, ref).get(ref)


def ensure_mirror(cache_dir: str | Path, name: str) -> str:
    """A bare cache repository for ``name`` (e.g. ``owner/repo``) under ``cache_dir``.

    Created on first use, and made afresh when what is there is not a repository (a
    creation or a deletion a killed process left half done). An upstream may be shared
    by several forks, so creation takes a file lock. Inside a job
    (:func:`bot.github.caches.job_scope`) the cache stays in use until the job ends.
    """
    cache = Path(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    git_dir = mirror_path(cache, name)
    with _locked(cache / ".lock"):
        if git_dir.exists() and not _is_repository(git_dir) and caches.rebuild(git_dir):
            log.warning("the cache %s was not a repository: made afresh", git_dir)
        if not (git_dir / "HEAD").exists():
            tmp = git_dir.with_name(git_dir.name + ".init")
            shutil.rmtree(tmp, ignore_errors=True)
            # No template: a cache needs no sample hooks (they would only take room).
            Git(tmp).run("init", "--quiet", "--bare", "--template=", str(tmp))
            # Keep objects that only synthetic commits reference; gc is ours to run.
            Git(tmp).run("config", "gc.auto", "0")
            os.replace(tmp, git_dir)
    caches.use(git_dir)
    return str(git_dir)


def mirror_path(cache_dir: str | Path, name: str) -> Path:
    """Where the cache of ``name`` (``owner/repo``) is, or would be."""
    return Path(cache_dir) / (_SAFE_NAME.sub("_", name.replace("/", "__")).strip("._") + ".git")


def _is_repository(git_dir: Path) -> bool:
    if not all((git_dir / part).exists() for part in ("HEAD", "objects", "refs", "config")):
        return False
    return Git(git_dir).run_proc("rev-parse", "--git-dir").returncode == 0


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


__all__ = ["BLOB_FILTER", "PROMISOR", "TREE_FILTER", "ZERO_SHA", "CacheBroken", "PushRejected",
           "auth_env", "ensure_mirror", "fetch", "fetch_blobs", "fetch_branch", "fetch_files",
           "fetch_trees", "ls_remote", "mirror_path", "push_with_lease", "remote_head"]
