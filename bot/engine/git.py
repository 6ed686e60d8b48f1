"""Running git, carefully: explicit git dir, clean environment, fixed identity.

Every git failure becomes a :class:`GitError` with a one-line message. Secrets
(tokens passed through ``http.extraHeader``) are masked in every message.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, NamedTuple

from bot.errors import GitError

BOT_NAME = "forksync[bot]"
BOT_EMAIL = "forksync[bot]@users.noreply.github.com"
# Fixed so that synthetic commits are reproducible run to run.
SYNTHETIC_DATE = "1700000000 +0000"

_SECRET_PATTERNS = [
    re.compile(r"(Authorization:\s*(?:Basic|Bearer|token)\s+)\S+", re.IGNORECASE),
    re.compile(r"(https?://)[^/@\s]+@"),
    re.compile(r"\b(gh[pousr]_)[A-Za-z0-9]{10,}"),
    re.compile(r"\b(v1\.)[0-9a-f]{20,}"),
]

MODE_TREE = "040000"
MODE_GITLINK = "160000"
MODE_SYMLINK = "120000"


def mask_secrets(text: str) -> str:
    """Hide anything that looks like a credential before it reaches a log or a user."""
    def hide(m: re.Match[str]) -> str:
        return m.group(1) + "***" + ("@" if m.group(0).endswith("@") else "")

    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(hide, text)
    return text


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


class TreeEntry(NamedTuple):
    """One entry of a tree object (a NamedTuple: trees are parsed by the thousand)."""

    mode: str  # "100644", "100755", "120000", "160000", "040000"
    oid: str
    name: str

    @property
    def is_tree(self) -> bool:
        return self.mode == MODE_TREE


class Git:
    """git commands against one repository, named by its git directory."""

    def __init__(self, git_dir: str | Path, *, config: Sequence[str] = (),
                 env: Mapping[str, str] | None = None) -> None:
        self.git_dir = str(git_dir)
        self._config = list(config)
        self._env = clean_env(env)
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
            raise GitError(self.describe_failure(args, proc.returncode, proc.stderr))
        return proc.stdout

    def run_proc(self, *args: str, input: bytes | None = None,
                 env: Mapping[str, str] | None = None,
                 cwd: str | None = None) -> subprocess.CompletedProcess[bytes]:
        full_env = dict(self._env)
        if env:
            full_env.update(env)
        try:
            return subprocess.run(self._argv(args), input=input, capture_output=True,
                                  env=full_env, cwd=cwd, check=False)
        except FileNotFoundError as exc:  # pragma: no cover - git missing entirely
            raise GitError("git is not installed or not on PATH") from exc

    @staticmethod
    def describe_failure(args: Sequence[str], code: int, stderr: bytes) -> str:
        lines = [ln for ln in stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
        # git's last "fatal:"/"error:" line is the one that says what went wrong.
        detail = next((ln for ln in reversed(lines) if ln.startswith(("fatal:", "error:"))),
                      lines[-1] if lines else f"exit code {code}")
        return mask_secrets(f"git {args[0] if args else ''} failed: {detail.strip()}")

    def start(self, *args: str) -> Background:
        """Start git in the background; :meth:`Background.output` waits for it."""
        proc = subprocess.Popen(self._argv(args), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=self._env)
        return Background(proc, args)

    def text(self, *args: str, **kw: object) -> str:
        return self.run(*args, **kw).decode("utf-8", "replace")  # type: ignore[arg-type]

    def rev_parse(self, rev: str) -> str | None:
        """The full OID of ``rev`` as a commit, or None if there is no such commit."""
        proc = self.run_proc("rev-parse", "--verify", "--quiet", "--end-of-options",
                             f"{rev}^{{commit}}")
        return proc.stdout.decode().strip() if proc.returncode == 0 else None

    def is_ancestor(self, older: str, newer: str) -> bool:
        proc = self.run_proc("merge-base", "--is-ancestor", older, newer)
        if proc.returncode not in (0, 1):
            raise GitError(self.describe_failure(["merge-base"], proc.returncode, proc.stderr))
        return proc.returncode == 0

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
        import tempfile

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

    def __init__(self, proc: subprocess.Popen[bytes], args: Sequence[str]) -> None:
        self._proc = proc
        self._args = args

    def output(self) -> bytes:
        out, err = self._proc.communicate()
        if self._proc.returncode != 0:
            raise GitError(Git.describe_failure(self._args, self._proc.returncode, err))
        return out


class CatFile:
    """A long-running ``git cat-file --batch``: many reads, one process."""

    def __init__(self, git: Git) -> None:
        self._proc = subprocess.Popen(
            git._argv(["cat-file", "--batch"]), stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=git._env,
        )
        self._lock = threading.Lock()
        self._trees: dict[str, list[TreeEntry]] = {}
        self.tree_cache = self._trees

    def read(self, oid: str) -> tuple[str, bytes]:
        """Return (type, content) of an object; raises GitError if it is missing."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        with self._lock:
            self._proc.stdin.write(oid.encode() + b"\n")
            self._proc.stdin.flush()
            header = self._proc.stdout.readline().decode().split()
            if len(header) != 3:
                raise GitError(f"git cat-file: object {oid} is missing")
            size = int(header[2])
            data = _read_exact(self._proc.stdout, size)
            self._proc.stdout.read(1)  # the LF after the content
        return header[1], data

    def read_many(self, oids: Sequence[str]) -> list[tuple[str, bytes]]:
        """Read many objects with one round trip per chunk instead of one per object."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        out: list[tuple[str, bytes]] = []
        # A chunk's requests must fit in the pipe buffer (64 KiB), or git and we could
        # each block writing to the other.
        chunk = 1000
        with self._lock:
            for start in range(0, len(oids), chunk):
                part = oids[start:start + chunk]
                self._proc.stdin.write("".join(f"{oid}\n" for oid in part).encode())
                self._proc.stdin.flush()
                for oid in part:
                    header = self._proc.stdout.readline().decode().split()
                    if len(header) != 3:
                        raise GitError(f"git cat-file: object {oid} is missing")
                    data = _read_exact(self._proc.stdout, int(header[2]))
                    self._proc.stdout.read(1)
                    out.append((header[1], data))
        return out

    def trees(self, oids: Sequence[str]) -> list[list[TreeEntry]]:
        """Parsed trees; each OID is read and parsed once per CatFile (trees are immutable)."""
        missing = sorted({oid for oid in oids if oid not in self._trees})
        for oid, (kind, data) in zip(missing, self.read_many(missing), strict=True):
            if kind != "tree":
                raise GitError(f"git cat-file: {oid} is a {kind}, not a tree")
            self._trees[oid] = parse_tree(data, oid_bytes=len(oid) // 2)
        return [self._trees[oid] for oid in oids]

    def tree(self, oid: str) -> list[TreeEntry]:
        return self.trees([oid])[0]

    def close(self) -> None:
        if self._proc.stdin:
            self._proc.stdin.close()
        self._proc.wait()

    def __enter__(self) -> CatFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_exact(stream: IO[bytes], size: int) -> bytes:
    chunks = []
    while size:
        chunk = stream.read(size)
        if not chunk:
            raise GitError("git cat-file ended early")
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
