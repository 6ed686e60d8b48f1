"""Real git for the simulator: bare repositories, smart HTTP via ``git http-backend``, diffs.

Everything runs the git CLI in a clean environment so that the developer's own
git configuration cannot change what the simulator answers.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from bot.engine.git import clean_env

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
ZERO_SHA = "0" * 40
SIM_NAME = "GitHub"
SIM_EMAIL = "noreply@github.com"


class GitFailedError(RuntimeError):
    """A git command the simulator ran exited with an unexpected code."""


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The bot's clean git environment (no user config), with the simulator's identity."""
    return clean_env({
        "GIT_AUTHOR_NAME": SIM_NAME, "GIT_AUTHOR_EMAIL": SIM_EMAIL,
        "GIT_COMMITTER_NAME": SIM_NAME, "GIT_COMMITTER_EMAIL": SIM_EMAIL,
        **(extra or {}),
    })


def run_sync(git_dir: Path, *args: str, input: bytes | None = None,
             ok: Sequence[int] = (0,), env: Mapping[str, str] | None = None) -> bytes:
    proc = subprocess.run(["git", f"--git-dir={git_dir}", *args], input=input,
                          capture_output=True, env=git_env(env), check=False)
    if proc.returncode not in ok:
        detail = proc.stderr.decode(errors="replace").strip()
        raise GitFailedError(f"git {' '.join(args)}: {detail}")
    return proc.stdout


async def run(git_dir: Path, *args: str, input: bytes | None = None,
              ok: Sequence[int] = (0,), env: Mapping[str, str] | None = None) -> tuple[int, bytes]:
    proc = await asyncio.create_subprocess_exec(
        "git", f"--git-dir={git_dir}", *args, env=git_env(env),
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = await proc.communicate(input)
    except BaseException:
        # Never leave a child behind (its transport would outlive the simulator's loop).
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
        raise
    code = proc.returncode if proc.returncode is not None else -1
    if code not in ok:
        raise GitFailedError(f"git {' '.join(args)}: {err.decode(errors='replace').strip()}")
    return code, out


def init_bare(git_dir: Path, *, default_branch: str, from_path: Path | None,
              config: Sequence[tuple[str, str]] = ()) -> None:
    """Create a bare repository, optionally with every branch and tag of ``from_path``."""
    git_dir.parent.mkdir(parents=True, exist_ok=True)
    if from_path is None:
        subprocess.run(["git", "init", "--quiet", "--bare", f"--initial-branch={default_branch}",
                        str(git_dir)], check=True, env=git_env(), capture_output=True)
    else:
        subprocess.run(["git", "clone", "--quiet", "--bare", "--no-local", str(from_path),
                        str(git_dir)], check=True, env=git_env(), capture_output=True)
        run_sync(git_dir, "symbolic-ref", "HEAD", f"refs/heads/{default_branch}")
        # A bare clone keeps a remote pointing at the test's working copy: drop it.
        run_sync(git_dir, "remote", "remove", "origin", ok=(0, 2))
    run_sync(git_dir, "config", "http.receivepack", "true")
    run_sync(git_dir, "config", "uploadpack.allowAnySHA1InWant", "true")
    # Partial clones, as GitHub serves them: --filter=blob:none, and blobs wanted by OID.
    run_sync(git_dir, "config", "uploadpack.allowFilter", "true")
    for key, value in config:
        run_sync(git_dir, "config", key, value)


async def refs(git_dir: Path) -> dict[str, str]:
    _, out = await run(git_dir, "for-each-ref", "--format=%(objectname) %(refname)")
    result: dict[str, str] = {}
    for line in out.decode().splitlines():
        sha, name = line.split(" ", 1)
        result[name] = sha
    return result


def refs_sync(git_dir: Path) -> dict[str, str]:
    out = run_sync(git_dir, "for-each-ref", "--format=%(objectname) %(refname)")
    pairs = (line.split(" ", 1) for line in out.decode().splitlines())
    return {name: sha for sha, name in pairs}


async def rev_parse(git_dir: Path, rev: str) -> str | None:
    code, out = await run(git_dir, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}",
                          ok=(0, 1, 128))
    return out.decode().strip() if code == 0 else None


async def resolve_ref(git_dir: Path, ref: str) -> str | None:
    """A sha, branch, tag or full ref name, resolved the way GitHub's ``{ref}`` parameters are."""
    for candidate in (f"refs/heads/{ref}", f"refs/tags/{ref}", f"refs/{ref}", ref):
        sha = await rev_parse(git_dir, candidate)
        if sha:
            return sha
    return None


async def merge_base(git_dir: Path, a: str, b: str) -> str | None:
    code, out = await run(git_dir, "merge-base", a, b, ok=(0, 1))
    return out.decode().strip() if code == 0 else None


async def is_ancestor(git_dir: Path, older: str, newer: str) -> bool:
    code, _ = await run(git_dir, "merge-base", "--is-ancestor", older, newer, ok=(0, 1))
    return code == 0


async def diff(git_dir: Path, old: str, new: str) -> str:
    """The unified diff GitHub shows for ``old...new``: rename detection, full index lines."""
    _, out = await run(git_dir, "diff", "--no-color", "--no-ext-diff", "-M", "--full-index",
                       old, new)
    return out.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    tree: str
    parents: list[str]
    author_name: str
    author_email: str
    author_date: str
    committer_name: str
    committer_email: str
    committer_date: str
    message: str


async def commit_info(git_dir: Path, sha: str) -> CommitInfo:
    fmt = "%H%x00%T%x00%P%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%B"
    _, out = await run(git_dir, "show", "-s", f"--format={fmt}", sha)
    parts = out.decode("utf-8", errors="replace").split("\x00", 9)
    return CommitInfo(parts[0], parts[1], parts[2].split(), parts[3], parts[4], parts[5],
                      parts[6], parts[7], parts[8], parts[9].rstrip("\n"))


async def rev_list(git_dir: Path, new: str, exclude: Sequence[str] = ()) -> list[str]:
    """Commits reachable from ``new`` but not from ``exclude``, oldest first."""
    args = ["rev-list", "--reverse", new, *(f"^{e}" for e in exclude)]
    _, out = await run(git_dir, *args)
    return out.decode().split()


async def changed_paths(git_dir: Path, sha: str) -> tuple[list[str], list[str], list[str]]:
    """(added, removed, modified) paths of a commit against its first parent."""
    _, out = await run(git_dir, "diff-tree", "-r", "--root", "--no-commit-id", "--name-status",
                       "-z", "--no-renames", sha)
    fields = out.decode("utf-8", errors="replace").split("\x00")
    added: list[str] = []
    removed: list[str] = []
    modified: list[str] = []
    for status, path in zip(fields[0::2], fields[1::2], strict=False):
        {"A": added, "D": removed}.get(status[:1], modified).append(path)
    return added, removed, modified


async def read_path(git_dir: Path, sha: str, path: str) -> tuple[str, str, bytes] | None:
    """(type, object id, content) of ``path`` at commit ``sha``; a tree's content is ls-tree."""
    code, out = await run(git_dir, "rev-parse", "--verify", "--quiet", f"{sha}:{path}",
                          ok=(0, 1, 128))
    if code != 0:
        return None
    oid = out.decode().strip()
    _, kind = await run(git_dir, "cat-file", "-t", oid)
    object_type = kind.decode().strip()
    if object_type == "tree":
        _, listing = await run(git_dir, "ls-tree", "-l", "-z", oid)
        return "tree", oid, listing
    _, data = await run(git_dir, "cat-file", object_type, oid)
    return object_type, oid, data


async def blob_ids(git_dir: Path, sha: str, paths: Sequence[str]) -> dict[str, str]:
    """Object ids of some paths at a commit, in one ``ls-tree`` (PR file lists can be long)."""
    if not paths:
        return {}
    _, out = await run(git_dir, "ls-tree", "-z", "--full-tree", sha, "--", *paths)
    result: dict[str, str] = {}
    for entry in out.decode("utf-8", errors="replace").split("\x00"):
        if entry:
            meta, path = entry.split("\t", 1)
            result[path] = meta.split()[2]
    return result


async def merge_conflicts(git_dir: Path, base: str, head: str) -> bool:
    code, _ = await run(git_dir, "merge-tree", "--write-tree", "--name-only", base, head, ok=(0, 1))
    return code == 1


async def commit_files(git_dir: Path, parent: str | None, files: Mapping[str, bytes | None],
                       message: str, *, author: str, email: str, parents: Sequence[str] = ()
                       ) -> str:
    """Write a commit on top of ``parent`` that sets (bytes) or deletes (None) some paths."""
    with tempfile.TemporaryDirectory(prefix="sim-index-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index"),
               "GIT_AUTHOR_NAME": author, "GIT_AUTHOR_EMAIL": email,
               "GIT_COMMITTER_NAME": author, "GIT_COMMITTER_EMAIL": email}
        if parent:
            await run(git_dir, "read-tree", parent, env=env)
        for path, data in files.items():
            if data is None:
                # Mode 0 removes the entry (--force-remove needs a work tree; this is bare).
                await run(git_dir, "update-index", "--index-info",
                          input=f"0 {ZERO_SHA}\t{path}\n".encode(), env=env)
                continue
            _, oid = await run(git_dir, "hash-object", "-w", "--stdin", input=data, env=env)
            await run(git_dir, "update-index", "--add", "--cacheinfo",
                      f"100644,{oid.decode().strip()},{path}", env=env)
        _, tree = await run(git_dir, "write-tree", env=env)
        all_parents = [p for p in ([parent] if parent else [])] + list(parents)
        args = ["commit-tree", tree.decode().strip()]
        for p in all_parents:
            args += ["-p", p]
        _, sha = await run(git_dir, *args, input=message.encode(), env=env)
        return sha.decode().strip()


async def update_ref(git_dir: Path, ref: str, new: str, old: str | None = None) -> None:
    await run(git_dir, "update-ref", ref, new, *([old] if old else []))


# --- smart HTTP ----------------------------------------------------------------------------

_HTTP_BACKEND_ENV_HEADERS = {"Git-Protocol": "GIT_PROTOCOL"}


async def http_backend(request: web.Request, project_root: Path, path_info: str,
                       remote_user: str | None, extra_env: Mapping[str, str] | None = None,
                       sent: list[int] | None = None) -> web.StreamResponse:
    """Run ``git http-backend`` as a CGI for one request, streaming both bodies.

    ``extra_env`` reaches receive-pack's hooks (what the pusher may do); ``sent`` gets
    the size of the response body (what the client fetched) appended.
    """
    env = git_env({
        **(extra_env or {}),
        "GIT_PROJECT_ROOT": str(project_root),
        "GIT_HTTP_EXPORT_ALL": "1",
        "PATH_INFO": path_info,
        "REQUEST_METHOD": request.method,
        "QUERY_STRING": request.query_string,
        "CONTENT_TYPE": request.headers.get("Content-Type", ""),
        "REMOTE_ADDR": request.remote or "127.0.0.1",
        "SERVER_PROTOCOL": f"HTTP/{request.version.major}.{request.version.minor}",
        "GATEWAY_INTERFACE": "CGI/1.1",
    })
    if remote_user:
        env["REMOTE_USER"] = remote_user
    # aiohttp inflates a gzip body (git sends big requests, e.g. many wants, gzipped), so
    # http-backend gets the plain body, read to its end: the header's length is the
    # compressed one.
    if request.content_length is not None and "Content-Encoding" not in request.headers:
        env["CONTENT_LENGTH"] = str(request.content_length)
    for header, var in _HTTP_BACKEND_ENV_HEADERS.items():
        if header in request.headers:
            env[var] = request.headers[header]
    git = shutil.which("git") or "git"
    proc = await asyncio.create_subprocess_exec(
        git, "http-backend", env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None

    async def feed() -> None:
        assert proc.stdin is not None
        try:
            async for chunk in request.content.iter_chunked(64 * 1024):
                proc.stdin.write(chunk)
                await proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            proc.stdin.close()

    feeder = asyncio.create_task(feed())
    stderr_task = asyncio.create_task(proc.stderr.read())
    try:
        status, headers = await _read_cgi_headers(proc.stdout)
        response = web.StreamResponse(status=status, headers=headers)
        await response.prepare(request)
        size = 0
        while chunk := await proc.stdout.read(64 * 1024):
            await response.write(chunk)
            size += len(chunk)
        await response.write_eof()
        if sent is not None:
            sent.append(size)
        return response
    except BaseException:
        # The client hung up (or we are shutting down): stop git rather than wait for it.
        if proc.returncode is None:
            proc.kill()
        raise
    finally:
        await asyncio.gather(feeder, return_exceptions=True)
        await proc.wait()
        await asyncio.gather(stderr_task, return_exceptions=True)


async def _read_cgi_headers(stream: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    status = 200
    headers: dict[str, str] = {}
    while True:
        line = (await stream.readline()).decode("latin-1").rstrip("\r\n")
        if not line:
            return status, headers
        name, _, value = line.partition(":")
        if name.lower() == "status":
            status = int(value.strip().split(" ", 1)[0])
        else:
            headers[name.strip()] = value.strip()
