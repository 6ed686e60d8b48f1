"""GitHub's guard on workflow files, as a ``proc-receive`` hook of the simulator's git server.

GitHub refuses a push by a GitHub App that creates or changes anything under
``.github/workflows/`` unless the App's installation has the *Workflows* permission
(``workflows: write``), and names the file in the refusal:

    ! [remote rejected] main -> main (refusing to allow a GitHub App to create or update
    workflow `.github/workflows/ci.yml` without `workflows` permission)

The simulator's git server is ``git http-backend``, so the guard is git's own
``proc-receive`` hook (``receive.procReceiveRefs``): it sees every ref update of a push
after the objects arrived and before any ref moves, refuses an update with GitHub's
words (``ng <ref> <reason>``) or lets ``receive-pack`` do it (``option fall-through``).

Which commits count: every commit the push brings that no ref of the repository had
yet, compared with its first parent (a root commit with nothing). A merge commit whose
first parent lacks another parent's workflow change therefore counts too, as GitHub's
refusals of "merge main into next" pushes show. People's tokens are not modelled with
scopes, so only pushes with an installation token are checked.

Run as a program, this module is the hook itself (pkt-line protocol version 1).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import BinaryIO

WORKFLOWS_DIR = ".github/workflows/"
ENV_PERMISSION = "FORKSYNC_SIM_WORKFLOWS"  # "write": the pusher may change workflow files
ZERO = "0" * 40
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


def refusal(path: str) -> str:
    """GitHub's reason for refusing an App's push that touches ``path``."""
    return (f"refusing to allow a GitHub App to create or update workflow `{path}` "
            "without `workflows` permission")


def install_hook(hooks_dir: Path) -> Path:
    """Write the ``proc-receive`` hook that runs this module; returns the hooks directory."""
    hooks_dir.mkdir(parents=True, exist_ok=True)
    hook = hooks_dir / "proc-receive"
    hook.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} "
                    f"{shlex.quote(str(Path(__file__).resolve()))}\n")
    hook.chmod(0o755)
    return hooks_dir


def guard_config(hooks_dir: Path) -> list[tuple[str, str]]:
    """The config that sends every branch and tag update of a repository through the hook."""
    return [("core.hooksPath", str(hooks_dir)), ("receive.procReceiveRefs", "refs/")]


# -- the hook --------------------------------------------------------------------------------


def _read(stream: BinaryIO) -> bytes | None:
    """One pkt-line; None for a flush packet."""
    head = stream.read(4)
    if len(head) < 4:
        raise EOFError("receive-pack hung up")
    size = int(head, 16)
    return None if size == 0 else stream.read(size - 4)


def _write(stream: BinaryIO, text: str) -> None:
    data = text.encode()
    stream.write(b"%04x" % (len(data) + 4) + data)


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True,
                          check=True).stdout


def touched_workflow(new: str) -> str | None:
    """The first workflow file that a commit up to ``new`` which no ref had yet touches."""
    for commit in _git("rev-list", "--reverse", new, "--not", "--all").split():
        parents = _git("rev-list", "--parents", "-n", "1", commit).split()[1:]
        first = parents[0] if parents else EMPTY_TREE
        changed = _git("diff-tree", "-r", "--no-renames", "--name-only", "--no-commit-id",
                       first, commit, "--", WORKFLOWS_DIR).split("\n")
        files = [p for p in changed if p]
        if files:
            return files[0]
    return None


def main(stdin: BinaryIO, stdout: BinaryIO) -> int:
    while _read(stdin) is not None:  # receive-pack's version and features
        pass
    _write(stdout, "version=1\n")
    stdout.write(b"0000")
    stdout.flush()
    commands = []
    while (line := _read(stdin)) is not None:
        _old, new, ref = line.decode().strip().split(" ", 2)
        commands.append((new, ref))
    allowed = os.environ.get(ENV_PERMISSION) == "write"
    for new, ref in commands:
        path = None if allowed or new == ZERO else touched_workflow(new)
        if path is not None:
            _write(stdout, f"ng {ref} {refusal(path)}\n")
        else:
            _write(stdout, f"ok {ref}\n")
            _write(stdout, "option fall-through\n")
    stdout.write(b"0000")
    stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.stdin.buffer, sys.stdout.buffer))
