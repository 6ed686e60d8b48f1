"""git over HTTP with a token that never touches argv, a URL, a log or the disk.

The token travels as an ``http.extraHeader`` set through ``GIT_CONFIG_COUNT`` /
``GIT_CONFIG_KEY_0`` / ``GIT_CONFIG_VALUE_0`` in the child's environment: other
users on the host cannot read it from ``ps``, and nothing is written into the
repository's config. Every failure becomes a ``GitError`` passed through
``mask_secrets``.

Pushes always go through ``--force-with-lease`` with an explicit expected head: the
bot only ever overwrites a sync-branch head that it wrote itself (DESIGN.md).

The caches are **partial clones** (``--filter=blob:none``): a fetch brings commits and
trees, never the history's blobs, and :func:`fetch_blobs` brings the blobs a job reads,
all in one request. The promisor remote is named only on the command line of these
two fetches, never in a cache's config: every other git command (the engine's above
all) finds a missing blob missing, and can never fetch it lazily, one object at a
time, over the network.
"""

from __future__ import annotations

import base64
import fcntl
import os
import re
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from bot.engine.git import Git, mask_secrets
from bot.engine.needs import blobs_at
from bot.engine.process import no_space
from bot.errors import DiskFull, GitError, MissingObject

ZERO_SHA = "0" * 40
PROMISOR = "origin"  # the promisor remote's name, on fetches' command lines only
BLOB_FILTER = "blob:none"
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


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
    text = _mask(f"{what}: " + Git.describe_failure(list(args), proc.returncode, proc.stderr),
                 token)
    # A full disk is not the remote's fault: the job fails, and is tried again later.
    return DiskFull(f"the disk is full, {text}") if no_space(proc.stderr) else GitError(text)


def _run(git: Git, args: Sequence[str], token: str | None, what: str) -> str:
    proc = git.run_proc(*args)
    if proc.returncode != 0:
        raise _failure(proc, args, token, what)
    return proc.stdout.decode("utf-8", "replace")


def _promisor(url: str) -> list[str]:
    # The promisor remote, for one command only (see the module's docstring). Naming the
    # filter too keeps git from writing the remote into the cache's config.
    return [f"remote.{PROMISOR}.url={url}", f"remote.{PROMISOR}.promisor=true",
            f"remote.{PROMISOR}.partialclonefilter={BLOB_FILTER}"]


def fetch(git_dir: str | Path, url: str, refspecs: Sequence[str], token: str | None,
          *, depth: int | None = None, blobs: bool = False) -> None:
    """Fetch ``refspecs`` from ``url`` into the cache at ``git_dir``: commits and trees only.

    ``blobs=True`` fetches the blobs too (a full fetch). A server that does not filter
    sends everything, which is slower but just as correct.
    """
    args = ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--force",
            "--no-filter" if blobs else f"--filter={BLOB_FILTER}"]
    if depth is not None:
        args.append(f"--depth={depth}")
    git = Git(git_dir, config=[*_CONFIG, *_promisor(url)], env=auth_env(token))
    _run(git, [*args, "--", PROMISOR, *refspecs], token, f"fetching from {_mask(url, token)}")


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
    # The wants are all the server needs: no negotiation of what we have (noop), and
    # the filter keeps a wanted commit or tree from bringing its blobs along.
    git = Git(git_dir, config=[*_CONFIG, *_promisor(url), "fetch.negotiationAlgorithm=noop"],
              env=auth_env(token))
    args = ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--recurse-submodules=no",
            f"--filter={BLOB_FILTER}", "--stdin", PROMISOR]
    proc = git.run_proc(*args, input="".join(f"{oid}\n" for oid in wanted).encode())
    # "not our ref": the server has no such object, which the check below names.
    if proc.returncode != 0 and b"not our ref" not in proc.stderr:
        raise _failure(proc, args, token, f"fetching {len(wanted)} blobs from {_mask(url, token)}")
    still = local.missing_objects(wanted)
    if still:
        raise MissingObject(still[0], kind="blob", path=blobs[still[0]],
                            repo=repo or _mask(url, token))
    return len(wanted)


def fetch_files(git_dir: str | Path, url: str, revs: Sequence[str], paths: Sequence[str],
                token: str | None, *, repo: str | None = None) -> int:
    """Bring the blobs of ``paths`` at ``revs`` (commits the cache has) that it lacks."""
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

    Created on first use. Jobs for one fork are serialized by the queue, but an
    upstream may be shared by several forks, so creation takes a file lock.
    """
    cache = Path(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    git_dir = cache / (_SAFE_NAME.sub("_", name.replace("/", "__")).strip("._") + ".git")
    with _locked(cache / ".lock"):
        if not (git_dir / "HEAD").exists():
            tmp = git_dir.with_name(git_dir.name + ".init")
            Git(tmp).run("init", "--quiet", "--bare", str(tmp))
            # Keep objects that only synthetic commits reference; gc is ours to run.
            Git(tmp).run("config", "gc.auto", "0")
            os.replace(tmp, git_dir)
    return str(git_dir)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


__all__ = ["BLOB_FILTER", "PROMISOR", "ZERO_SHA", "PushRejected", "auth_env", "ensure_mirror",
           "fetch", "fetch_blobs", "fetch_files", "ls_remote", "push_with_lease", "remote_head"]
