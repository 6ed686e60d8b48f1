"""git child processes: started in their own process group, stopped at a time limit.

Pure plumbing for :mod:`bot.engine.git`: a stopped git takes its children with it
(a remote helper, upload-pack), so none is left holding our pipes, and git's own
words for an unreadable object are turned into the object's name.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence

from bot.errors import GitError


def spawn(argv: list[str], env: Mapping[str, str], cwd: str | None,
           stdin: int) -> subprocess.Popen[bytes]:
    # Its own process group, so that a time limit stops git's children too (a remote
    # helper, upload-pack) and none of them is left holding our pipes.
    try:
        return subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=dict(env), cwd=cwd,
                                process_group=0)
    except FileNotFoundError as exc:  # pragma: no cover - git missing entirely
        raise GitError("git is not installed or not on PATH") from exc


def kill(proc: subprocess.Popen[bytes]) -> None:
    """Stop a git process and everything it started, and reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired, ValueError, OSError):
        proc.communicate(timeout=5)


OID = re.compile(rb"\b([0-9a-f]{64}|[0-9a-f]{40})\b")
_UNREADABLE = re.compile(
    rb"could not read|unable to read|bad object|is corrupt|missing (?:blob|tree|commit)|"
    rb"inflate|unable to unpack|unable to parse|object file .* is empty|hash mismatch",
    re.IGNORECASE)


def missing_oid(stderr: bytes) -> str | None:
    """The object git says it could not read (missing or corrupt), if that is why it failed."""
    for line in stderr.splitlines():
        if _UNREADABLE.search(line):
            m = OID.search(line)
            if m:
                return m.group(1).decode()
    return None


def subcommand(args: Sequence[str]) -> str:
    """The git subcommand in ``args``, past any ``-c name=value`` options."""
    i = 0
    while i < len(args) and args[i] == "-c":
        i += 2
    return args[i] if i < len(args) else ""


class Watchdog:
    """Kills a long-running git process when one request to it outlasts the time limit."""

    def __init__(self, proc: subprocess.Popen[bytes], limit: float) -> None:
        self._proc = proc
        self._limit = limit
        self._cond = threading.Condition()
        self._deadline: float | None = None
        self._closed = False
        self._thread: threading.Thread | None = None
        self.expired = False

    def arm(self) -> None:
        with self._cond:
            self._deadline = time.monotonic() + self._limit
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="forksync-git-watchdog")
                self._thread.start()
            self._cond.notify()

    def disarm(self) -> None:
        with self._cond:
            self._deadline = None

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while not self._closed:
                if self._deadline is None:
                    self._cond.wait()
                    continue
                left = self._deadline - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                self.expired = True
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self._proc.pid, signal.SIGKILL)
                return
