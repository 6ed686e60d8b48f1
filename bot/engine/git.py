"""Running git, carefully: explicit git dir, clean environment, fixed identity.

Every git failure becomes a :class:`GitError` with a one-line message. Secrets
(tokens passed through ``http.extraHeader``) are masked in every message
(``mask_secrets``, from :mod:`bot.engine.process`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import selectors
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, NamedTuple

from bot.engine.process import (
    DEADLINES,
    Watch,
    kill,
    mask_secrets,
    missing_oid,
    no_space,
    spawn,
    subcommand,
)
from bot.errors import DiskFull, GitError, GitTimeout, MissingObject

BOT_NAME = "forksync[bot]"
BOT_EMAIL = "forksync[bot]@users.noreply.github.com"
# Fixed so that synthetic commits are reproducible run to run.
SYNTHETIC_DATE = "1700000000 +0000"

# The time limit of one git process, or of one request to a long-running one. Generous:
# it only has to turn a hang (a stuck disk, a stalled server) into an error.
DEFAULT_TIMEOUT = 600.0

MODE_TREE = "040000"
MODE_GITLINK = "160000"
MODE_SYMLINK = "120000"


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """An environment in which the user's git config cannot change what we compute."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        {
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_AUTHOR_NAME": BOT_NAME,
            "GIT_AUTHOR_EMAIL": BOT_EMAIL,
            "GIT_COMMITTER_NAME": BOT_NAME,
            "GIT_COMMITTER_EMAIL": BOT_EMAIL,
            "LC_ALL": "C",
            "LANG": "C",
        }
    )
    if extra:
        env.update(extra)
    return env


@contextlib.contextmanager
def reading(repo: str | None = None, path: str | None = None,
            kind: str | None = None) -> Iterator[None]:
    """Name the repository (and the path, and the object's kind) in a MissingObject from inside."""
    try:
        yield
    except MissingObject as exc:
        raise exc.at(repo=repo, path=path, kind=kind) from None


class Head(NamedTuple):
    """The first bytes of a git process's output (:meth:`Git.run_head`)."""

    stdout: bytes  # at most the limit
    cut: bool  # the output went on past the limit, and git was stopped there
    stderr: bytes  # at most the limit
    returncode: int | None  # None: stopped at the limit


class TreeEntry(NamedTuple):
    """One entry of a tree object (a NamedTuple: trees are parsed by the thousand)."""

    mode: str  # "100644", "100755", "120000", "160000", "040000"
    oid: str
    name: str

    @property
    def is_tree(self) -> bool:
        return self.mode == MODE_TREE


class Git:
    """git commands against one repository, named by its git directory.

    Every git process gets a time limit (``timeout`` seconds, for one process or one
    cat-file request): past it, the process and its children are killed and
    :class:`GitTimeout` says which command it was. No job can hang on git.
    """

    def __init__(self, git_dir: str | Path, *, config: Sequence[str] = (),
                 env: Mapping[str, str] | None = None, timeout: float | None = None) -> None:
        self.git_dir = str(git_dir)
        self._config = list(config)
        self._env = clean_env(env)
        self.timeout = DEFAULT_TIMEOUT if timeout is None else timeout
        self._object_format: str | None = None
        self._object_dir: str | None = None

    def _argv(self, args: Sequence[str]) -> list[str]:
        argv = ["git", f"--git-dir={self.git_dir}"]
        for item in self._config:
            argv += ["-c", item]
        return argv + list(args)

    def run(self, *args: str, input: bytes | None = None, ok_codes: Iterable[int] = (0,),
            env: Mapping[str, str] | None = None, cwd: str | None = None) -> bytes:
        """Run git and return stdout; any exit code outside ``ok_codes`` raises GitError."""
        proc = self.run_proc(*args, input=input, env=env, cwd=cwd)
        if proc.returncode not in tuple(ok_codes):
            raise self.failure(args, proc.returncode, proc.stderr)
        return proc.stdout

    def run_proc(self, *args: str, input: bytes | None = None,
                 env: Mapping[str, str] | None = None,
                 cwd: str | None = None) -> subprocess.CompletedProcess[bytes]:
        full_env = dict(self._env)
        if env:
            full_env.update(env)
        argv = self._argv(args)
        proc = spawn(argv, full_env, cwd, stdin=subprocess.PIPE if input is not None
                      else subprocess.DEVNULL)
        # A blocking communicate() under a watch, rather than communicate(timeout=),
        # whose final wait polls with sleeps: git calls are many and mostly short.
        watch = DEADLINES.watch(proc.pid, self.timeout)
        try:
            out, err = proc.communicate(input)
        except BaseException:
            kill(proc)
            raise
        finally:
            watch.done()
        if watch.expired:
            raise self.timed_out(args)
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)

    def run_head(self, *args: str, limit: int, ok_codes: Iterable[int] = (0,)) -> Head:
        """Run git and keep the first ``limit`` bytes of its output; past them, git is
        stopped (``cut``), so a command whose output has no bound reads a bounded amount.
        stderr is read alongside (a full pipe would block git) and kept up to ``limit``."""
        proc = spawn(self._argv(args), self._env, None, stdin=subprocess.DEVNULL)
        watch = DEADLINES.watch(proc.pid, self.timeout)
        out, err = bytearray(), bytearray()
        cut = False
        try:
            assert proc.stdout is not None and proc.stderr is not None
            with selectors.DefaultSelector() as sel:
                sel.register(proc.stdout, selectors.EVENT_READ, out)
                sel.register(proc.stderr, selectors.EVENT_READ, err)
                while sel.get_map() and not cut:
                    for key, _ in sel.select():
                        chunk = os.read(key.fd, 1 << 16)
                        if not chunk:
                            sel.unregister(key.fileobj)
                            continue
                        buf: bytearray = key.data
                        room = limit - len(buf)
                        buf += chunk[:max(room, 0)]
                        if buf is out and len(chunk) > room:
                            cut = True
                            break
            if cut:
                kill(proc)
            else:
                proc.wait()
                proc.stdout.close()
                proc.stderr.close()
        except BaseException:
            kill(proc)
            raise
        finally:
            watch.done()
        if watch.expired:
            raise self.timed_out(args)
        if not cut and proc.returncode not in tuple(ok_codes):
            raise self.failure(args, proc.returncode, bytes(err))
        return Head(bytes(out), cut, bytes(err), None if cut else proc.returncode)

    def timed_out(self, args: Sequence[str], reading: str = "") -> GitTimeout:
        what = f" reading {reading}" if reading else ""
        return GitTimeout(f"git {subcommand(args)} did not finish{what} within {self.timeout:g} "
                          f"seconds and was stopped (repository {self.git_dir})")

    def failure(self, args: Sequence[str], code: int, stderr: bytes) -> GitError:
        """The error for a failed git command: a MissingObject when git could not read one."""
        full = no_space(stderr)  # before the object check: a failed write names objects too
        if full is not None:
            return DiskFull(mask_secrets(f"the disk is full: git {subcommand(args)} failed in "
                                         f"{self.git_dir}: {full}"))
        oid = missing_oid(stderr)
        if oid is not None:
            return MissingObject(oid)
        return GitError(self.describe_failure(args, code, stderr))

    @staticmethod
    def describe_failure(args: Sequence[str], code: int, stderr: bytes) -> str:
        lines = [ln for ln in stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
        # git's last "fatal:"/"error:" line is the one that says what went wrong.
        detail = next((ln for ln in reversed(lines) if ln.startswith(("fatal:", "error:"))),
                      lines[-1] if lines else f"exit code {code}")
        return mask_secrets(f"git {subcommand(args)} failed: {detail.strip()}")

    def start(self, *args: str) -> Background:
        """Start git in the background; :meth:`Background.output` waits for it."""
        proc = spawn(self._argv(args), self._env, None, stdin=subprocess.DEVNULL)
        return Background(self, proc, args)

    def text(self, *args: str, **kw: object) -> str:
        return self.run(*args, **kw).decode("utf-8", "replace")  # type: ignore[arg-type]

    def rev_parse(self, rev: str) -> str | None:
        """The full OID of ``rev`` as a commit, or None if there is no such commit."""
        proc = self.run_proc("rev-parse", "--verify", "--quiet", "--end-of-options",
                             f"{rev}^{{commit}}")
        return proc.stdout.decode().strip() if proc.returncode == 0 else None

    def missing_commit(self, rev: str) -> str | None:
        """The OID ``rev`` names when that commit's object is missing here (else None)."""
        proc = self.run_proc("rev-parse", "--verify", "--quiet", "--end-of-options", rev)
        oid = proc.stdout.decode().strip()
        if proc.returncode != 0 or not oid:
            return None
        return oid if self.run_proc("cat-file", "-e", oid).returncode != 0 else None

    def is_ancestor(self, older: str, newer: str) -> bool:
        proc = self.run_proc("merge-base", "--is-ancestor", older, newer)
        # A history git cannot walk also answers 1 ("no"): its error says which commit.
        if proc.returncode not in (0, 1) or missing_oid(proc.stderr):
            raise self.failure(["merge-base"], proc.returncode, proc.stderr)
        return proc.returncode == 0

    def missing_objects(self, oids: Sequence[str]) -> list[str]:
        """The OIDs of ``oids`` that this repository does not have, in order (one process)."""
        if not oids:
            return []
        out = self.run("cat-file", "--batch-check=%(objectname)",
                       input="".join(f"{oid}\n" for oid in oids).encode())
        return [line.split()[0] for line in out.decode().splitlines()
                if line.endswith(" missing")]

    def set_object_dir(self, path: str) -> None:
        self._object_dir = os.path.abspath(path)

    def object_dir(self) -> str:
        if self._object_dir is None:
            out = self.text("rev-parse", "--git-path", "objects").strip()
            self._object_dir = out if os.path.isabs(out) else os.path.abspath(out)
        return self._object_dir

    def object_format(self) -> str:
        if self._object_format is None:
            proc = self.run_proc("rev-parse", "--show-object-format")
            self._object_format = proc.stdout.decode().strip() or "sha1"
        return self._object_format

    def hash_blobs(self, blobs: Sequence[bytes]) -> list[str]:
        """Write blobs into the object store with one ``git fast-import``; OIDs in order."""
        if not blobs:
            return []
        stream = bytearray()
        for i, data in enumerate(blobs, 1):
            stream += b"blob\nmark :%d\ndata %d\n" % (i, len(data)) + data + b"\n"
        stream += b"done\n"
        with tempfile.TemporaryDirectory(prefix="forksync-marks-") as tmp:
            marks = os.path.join(tmp, "marks")
            self.run("fast-import", "--quiet", "--done", f"--export-marks={marks}",
                     input=bytes(stream))
            with open(marks) as fh:
                by_mark = dict(line.split() for line in fh if line.strip())
        return [by_mark[f":{i}"] for i in range(1, len(blobs) + 1)]

    def commit_tree(self, tree: str, parents: Sequence[str], message: str, *,
                    date: str | None = None) -> str:
        args = ["commit-tree", tree]
        for parent in parents:
            args += ["-p", parent]
        env = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date} if date else None
        return self.text(*args, input=message.encode(), env=env).strip()


class Background:
    """A git command running alongside the engine's Python work (2 cores: use both)."""

    def __init__(self, git: Git, proc: subprocess.Popen[bytes], args: Sequence[str]) -> None:
        self._git = git
        self._proc = proc
        self._args = args
        self._watch = DEADLINES.watch(proc.pid, git.timeout)

    def output(self) -> bytes:
        try:
            out, err = self._proc.communicate()
        except BaseException:
            kill(self._proc)
            raise
        finally:
            self._watch.done()
        if self._watch.expired:
            raise self._git.timed_out(self._args)
        if self._proc.returncode != 0:
            raise self._git.failure(self._args, self._proc.returncode, err)
        return out

    def stop(self) -> None:
        """Stop it if it is still running (its output is not needed any more)."""
        if self._proc.returncode is None:
            kill(self._proc)
        self._watch.done()


class CatFile:
    """A long-running ``git cat-file --batch``: many reads, one process.

    Every answer is read, even after a ``missing`` one, so the stream never falls out
    of step; a missing or unreadable object raises :class:`MissingObject` naming it
    (and the path the caller was reading, when it says). Each request has the
    repository's time limit.
    """

    def __init__(self, git: Git) -> None:
        self._git = git
        # Lives as long as the process: git writes why it stopped there.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115
        try:
            self._proc = subprocess.Popen(
                git._argv(["cat-file", "--batch"]), stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=self._stderr, env=git._env, process_group=0,
            )
        except BaseException:
            self._stderr.close()
            raise
        self._watch: Watch | None = None  # the time limit of the request under way
        self._lock = threading.Lock()
        self._trees: dict[str, list[TreeEntry]] = {}
        self.tree_cache = self._trees

    def read(self, oid: str, *, path: str | None = None) -> tuple[str, bytes]:
        """Return (type, content) of an object; raises MissingObject if it is missing."""
        return self.read_many([oid], paths=[path] if path is not None else None)[0]

    def read_many(self, oids: Sequence[str], *,
                  paths: Sequence[str | None] | None = None) -> list[tuple[str, bytes]]:
        """Read many objects with one round trip per chunk instead of one per object.

        ``paths`` (one per OID) say where each object was found, for the error message.
        """
        assert self._proc.stdin is not None and self._proc.stdout is not None
        out: list[tuple[str, bytes]] = []
        # A chunk's requests must fit in the pipe buffer (64 KiB), or git and we could
        # each block writing to the other.
        chunk = 1000
        with self._lock:
            for start in range(0, len(oids), chunk):
                part = oids[start:start + chunk]
                problem: MissingObject | None = None
                k = 0
                self._watch = DEADLINES.watch(self._proc.pid, self._git.timeout)
                try:
                    self._proc.stdin.write("".join(f"{oid}\n" for oid in part).encode())
                    self._proc.stdin.flush()
                    for k, oid in enumerate(part):
                        answer = self._answer()
                        if isinstance(answer, tuple):
                            out.append(answer)
                        elif problem is None:
                            where = paths[start + k] if paths is not None else None
                            problem = MissingObject(oid, path=where)
                except (OSError, ValueError):
                    where = paths[start + k] if paths is not None else None
                    raise self._stopped(part[k], where) from None
                finally:
                    self._watch.done()
                if problem is not None:
                    raise problem
        return out

    def _answer(self) -> tuple[str, bytes] | None:
        """The next answer: (type, content), or None for "missing" (or "ambiguous")."""
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line.endswith(b"\n"):
            raise OSError("git cat-file stopped answering")
        header = line.split()
        if len(header) != 3:
            return None  # "<oid> missing", "<name> ambiguous": no content follows
        data = _read_exact(self._proc.stdout, int(header[2]))
        if self._proc.stdout.read(1) != b"\n":  # the LF after the content
            raise OSError("git cat-file stopped answering")
        return header[1].decode(), data

    def _stopped(self, oid: str, path: str | None) -> GitError:
        """Why cat-file stopped answering: our time limit, or git gave up on an object."""
        if self._watch is not None and self._watch.expired:
            return self._git.timed_out(["cat-file"], f"{oid} ({path})" if path else oid)
        if self._proc.poll() is None:  # still there, but no longer answering: stop it
            kill(self._proc)
        self._proc.wait()
        self._stderr.seek(0)
        stderr = self._stderr.read()
        bad = missing_oid(stderr)
        if bad is not None:
            return MissingObject(bad, path=path if bad == oid else None)
        return GitError(Git.describe_failure(["cat-file"], self._proc.returncode or 0, stderr))

    def trees(self, oids: Sequence[str], *,
              paths: Sequence[str | None] | None = None) -> list[list[TreeEntry]]:
        """Parsed trees; each OID is read and parsed once per CatFile (trees are immutable)."""
        where = dict(zip(oids, paths, strict=True)) if paths is not None else {}
        missing = sorted({oid for oid in oids if oid not in self._trees})
        with reading(kind="tree"):
            read = self.read_many(missing, paths=[where.get(oid) for oid in missing])
        for oid, (kind, data) in zip(missing, read, strict=True):
            if kind != "tree":
                raise GitError(f"git cat-file: {oid} is a {kind}, not a tree")
            self._trees[oid] = parse_tree(data, oid_bytes=len(oid) // 2)
        return [self._trees[oid] for oid in oids]

    def tree(self, oid: str, *, path: str | None = None) -> list[TreeEntry]:
        return self.trees([oid], paths=[path] if path is not None else None)[0]

    def close(self) -> None:
        # git exits at the end of its input; the time limit stops it if it does not (a
        # plain wait, not Popen.wait(timeout), which polls with sleeps).
        watch = DEADLINES.watch(self._proc.pid, self._git.timeout)
        try:
            with contextlib.suppress(OSError, ValueError):
                if self._proc.stdin:
                    self._proc.stdin.close()
            self._proc.wait()
        finally:
            watch.done()
            if self._proc.stdout:
                self._proc.stdout.close()
            self._stderr.close()

    def __enter__(self) -> CatFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_exact(stream: IO[bytes], size: int) -> bytes:
    chunks = []
    while size:
        chunk = stream.read(size)
        if not chunk:
            raise OSError("git cat-file ended early")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


_TREE_ENTRY = re.compile(rb"(\d+) ([^\0]*)\0(.{20})", re.S)
_TREE_ENTRY_256 = re.compile(rb"(\d+) ([^\0]*)\0(.{32})", re.S)


def parse_tree(data: bytes, *, oid_bytes: int = 20) -> list[TreeEntry]:
    """Parse a raw tree object (``mode SP name NUL oid``, repeated)."""
    pattern = _TREE_ENTRY if oid_bytes == 20 else _TREE_ENTRY_256
    return [
        TreeEntry(MODE_TREE if mode == b"40000" else mode.decode(), oid.hex(),
                  name.decode("utf-8", "surrogateescape"))
        for mode, name, oid in pattern.findall(data)
    ]


class TreeWriter:
    """Writes many trees with one ``git mktree --batch`` run.

    Tree OIDs are computed here, as git defines them, so a parent can name its
    children before anything is written; at :meth:`flush` git writes every tree
    and the OIDs it reports are checked against ours. That turns hundreds of
    round trips into one process.
    """

    def __init__(self, git: Git, *, cache: dict[str, list[TreeEntry]] | None = None) -> None:
        self._git = git
        self._pending: dict[str, bytes] = {}  # oid -> mktree input for that tree
        # Trees we write are trees we know: a reader sharing this cache never parses them.
        self._cache = cache
        self._hash = hashlib.sha256 if git.object_format() == "sha256" else hashlib.sha1

    def write(self, entries: Iterable[TreeEntry]) -> str:
        items = sorted(entries, key=_tree_sort_key)
        raw = bytearray()
        text = bytearray()
        for e in items:
            name = e.name.encode("utf-8", "surrogateescape")
            raw += (e.mode.lstrip("0") if e.mode == MODE_TREE else e.mode).encode()
            raw += b" " + name + b"\0" + bytes.fromhex(e.oid)
            kind = "tree" if e.mode == MODE_TREE else "commit" if e.mode == MODE_GITLINK else "blob"
            text += f"{e.mode} {kind} {e.oid}\t".encode() + name + b"\0"
        oid = self._hash(b"tree %d\0" % len(raw) + bytes(raw)).hexdigest()
        self._pending.setdefault(oid, bytes(text) + b"\0")
        if self._cache is not None:
            self._cache.setdefault(oid, items)
        return oid

    def flush(self) -> None:
        if not self._pending:
            return
        expected = list(self._pending)
        out = self._git.run("mktree", "--missing", "--batch", "-z",
                            input=b"".join(self._pending.values()))
        got = out.decode().split()
        if got != expected:
            raise GitError("git mktree wrote trees with unexpected OIDs (object format mismatch)")
        self._pending.clear()

    def close(self) -> None:
        self.flush()

    def __enter__(self) -> TreeWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.close()


def _tree_sort_key(e: TreeEntry) -> bytes:
    # git orders tree entries by name, comparing a subtree's name as if it ended in "/".
    name = e.name.encode("utf-8", "surrogateescape")
    return name + b"/" if e.mode == MODE_TREE else name


def iter_z(data: bytes) -> Iterator[str]:
    """Split NUL-terminated git output into str fields."""
    for field in data.split(b"\0"):
        if field:
            yield field.decode("utf-8", "surrogateescape")
