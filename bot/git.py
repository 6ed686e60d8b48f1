"""Running git, carefully: explicit git dir, clean environment, fixed identity.

Every git failure becomes a :class:`GitError` with a one-line message. Secrets
(tokens passed through ``http.extraHeader``) are masked in every message.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from .errors import GitError

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


@dataclass(frozen=True)
class TreeEntry:
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

    def object_dir(self) -> str:
        out = self.text("rev-parse", "--git-path", "objects").strip()
        return out if os.path.isabs(out) else os.path.abspath(out)

    def hash_blobs(self, blobs: Sequence[bytes]) -> list[str]:
        """Write blobs into the object store in one git process; return their OIDs in order."""
        if not blobs:
            return []
        proc = subprocess.Popen(
            self._argv(["hash-object", "-w", "--no-filters", "--stdin-paths"]),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=self._env,
        )
        import tempfile

        with tempfile.TemporaryDirectory(prefix="forksync-blobs-") as tmp:
            names = []
            for i, data in enumerate(blobs):
                name = os.path.join(tmp, str(i))
                with open(name, "wb") as fh:
                    fh.write(data)
                names.append(name)
            out, err = proc.communicate("\n".join(names).encode() + b"\n")
        if proc.returncode != 0:
            raise GitError(self.describe_failure(["hash-object"], proc.returncode, err))
        return out.decode().split()

    def commit_tree(self, tree: str, parents: Sequence[str], message: str, *,
                    date: str | None = None) -> str:
        args = ["commit-tree", tree]
        for parent in parents:
            args += ["-p", parent]
        env = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date} if date else None
        return self.text(*args, input=message.encode(), env=env).strip()


class CatFile:
    """A long-running ``git cat-file --batch``: many reads, one process."""

    def __init__(self, git: Git) -> None:
        self._proc = subprocess.Popen(
            git._argv(["cat-file", "--batch"]), stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=git._env,
        )
        self._lock = threading.Lock()

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

    def tree(self, oid: str) -> list[TreeEntry]:
        kind, data = self.read(oid)
        if kind != "tree":
            raise GitError(f"git cat-file: {oid} is a {kind}, not a tree")
        return parse_tree(data)

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


def parse_tree(data: bytes) -> list[TreeEntry]:
    """Parse a raw tree object (``mode SP name NUL oid20``, repeated)."""
    entries = []
    pos = 0
    n = len(data)
    while pos < n:
        sp = data.index(b" ", pos)
        nul = data.index(b"\0", sp)
        mode = data[pos:sp].decode()
        if len(mode) == 5:
            mode = "0" + mode
        name = data[sp + 1:nul].decode("utf-8", "surrogateescape")
        oid = data[nul + 1:nul + 21].hex()
        entries.append(TreeEntry(mode, oid, name))
        pos = nul + 21
    return entries


class TreeWriter:
    """A long-running ``git mktree --batch``: write many trees, bottom-up, in one process."""

    def __init__(self, git: Git) -> None:
        self._proc = subprocess.Popen(
            git._argv(["mktree", "--missing", "--batch", "-z"]), stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=git._env,
        )

    def write(self, entries: Iterable[TreeEntry]) -> str:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        buf = bytearray()
        for e in entries:
            kind = "tree" if e.mode == MODE_TREE else "commit" if e.mode == MODE_GITLINK else "blob"
            buf += f"{e.mode} {kind} {e.oid}\t".encode() + e.name.encode("utf-8", "surrogateescape")
            buf += b"\0"
        buf += b"\0"
        self._proc.stdin.write(bytes(buf))
        self._proc.stdin.flush()
        line = self._proc.stdout.readline().decode().strip()
        if not line:
            err = self._proc.stderr.read().decode("utf-8", "replace") if self._proc.stderr else ""
            raise GitError(f"git mktree failed: {err.strip() or 'no output'}")
        return line

    def close(self) -> None:
        if self._proc.stdin:
            self._proc.stdin.close()
        self._proc.wait()

    def __enter__(self) -> TreeWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def iter_z(data: bytes) -> Iterator[str]:
    """Split NUL-terminated git output into str fields."""
    for field in data.split(b"\0"):
        if field:
            yield field.decode("utf-8", "surrogateescape")
