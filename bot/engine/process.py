"""git child processes: started in their own process group, stopped at a time limit.

Pure plumbing for :mod:`bot.engine.git`: a stopped git takes its children with it
(a remote helper, upload-pack), so none is left holding our pipes, and git's own
words for an unreadable object are turned into the object's name.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence

from bot.errors import GitError

_SECRET_PATTERNS = [
    re.compile(r"(Authorization:\s*(?:Basic|Bearer|token)\s+)\S+", re.IGNORECASE),
    re.compile(r"(https?://)[^/@\s]+@"),
    re.compile(r"\b(gh[pousr]_)[A-Za-z0-9]{10,}"),
    re.compile(r"\b(v1\.)[0-9a-f]{20,}"),
]

def mask_secrets(text: str) -> str:
    """Hide anything that looks like a credential before it reaches a log or a user."""
    def hide(m: re.Match[str]) -> str:
        return m.group(1) + "***" + ("@" if m.group(0).endswith("@") else "")

    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(hide, text)
    return text



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


_NO_SPACE = re.compile(rb"No space left on device|Out of diskspace|Disk quota exceeded")


def no_space(stderr: bytes) -> str | None:
    """git's line saying the disk (or the user's quota) is full, if that is why it failed."""
    for line in stderr.splitlines():
        if _NO_SPACE.search(line):
            return line.decode("utf-8", "replace").strip()
    return None


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


class Watch:
    """One git process under a time limit; :meth:`done` once it no longer needs one."""

    def __init__(self, pid: int, deadline: float) -> None:
        self.pid = pid
        self.deadline = deadline
        self.expired = False
        self._finished = False
        self._lock = threading.Lock()

    def done(self) -> None:
        with self._lock:
            self._finished = True

    @property
    def finished(self) -> bool:
        return self._finished

    def expire(self) -> None:
        """Stop the process and everything it started, unless it has finished meanwhile."""
        with self._lock:
            if self._finished:
                return
            self.expired = True
            self._finished = True
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)


class Deadlines:
    """One thread that stops every git process which outlives its time limit.

    It sleeps until the earliest deadline, and is woken only when a new one comes
    earlier; a process that ends in time costs a heap entry, no wake-up and no thread.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Watch]] = []
        self._seq = 0
        self._thread: threading.Thread | None = None

    def watch(self, pid: int, limit: float) -> Watch:
        entry = Watch(pid, time.monotonic() + limit)
        with self._cond:
            if len(self._heap) > 256 and sum(1 for *_, w in self._heap if not w.finished) \
                    < len(self._heap) // 4:
                # Most entries are of processes long finished: drop them.
                self._heap = [item for item in self._heap if not item[2].finished]
                heapq.heapify(self._heap)
            wake = not self._heap or entry.deadline < self._heap[0][0]
            self._seq += 1
            heapq.heappush(self._heap, (entry.deadline, self._seq, entry))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="forksync-git-deadlines")
                self._thread.start()
            elif wake:
                self._cond.notify()
        return entry

    def _run(self) -> None:
        with self._cond:
            while True:
                while self._heap and self._heap[0][2].finished:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                left = self._heap[0][0] - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                heapq.heappop(self._heap)[2].expire()


DEADLINES = Deadlines()
