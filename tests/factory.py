"""The one git fixture factory: real upstream and fork repositories built with real git.

Every engine test, the demo and the benchmark get their repositories from here, so there
is one notion of what a ``slime``-like upstream and its translated ``vime``-like fork look
like. Commits are written with ``git fast-import``: fully deterministic (explicit authors
and dates), fast enough for a 100,000-file benchmark repository, and able to express every
tree entry git has (symlinks, gitlinks, executable files, non-UTF-8 names and content).

The main entry points:

- :class:`Scenario` — a small upstream/fork pair built step by step::

      s = Scenario(tmp_path)                       # upstream with a slime skeleton (#1..#3)
      s.upstream_pr(4, "Add retries", "alice", files={"slime/retry.py": "..."})
      s.sync_fork()                                # fork = translate(upstream@cutoff)
      s.fork_commit("Fork: tweak", files={"vime/retry.py": "..."})
      s.upstream_pr(5, "Tune retries", "bob", files={"slime/retry.py": "..."})
      plan(s.fork_dir, s.upstream_dir)             # window #5..#5

- :func:`make_large` — a synthetic repository pair for the benchmark.
- :func:`make_demo` — the realistic small pair the README demo runs on.
- :func:`translated_entries` / :func:`write_tree` / :func:`git_merge_oracle` — the
  independent "what would git do" merge used by the oracle tests and the benchmark.
"""

from __future__ import annotations

import hashlib
import random
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from bot.engine.config import EXAMPLE_CONFIG, load_config
from bot.engine.git import clean_env
from bot.engine.translate import Translator

# --------------------------------------------------------------------------- file specs


@dataclass(frozen=True)
class Symlink:
    """A symbolic link (mode 120000) pointing at ``target``."""

    target: str


@dataclass(frozen=True)
class Gitlink:
    """A submodule entry (mode 160000) recording commit ``sha``."""

    sha: str


@dataclass(frozen=True)
class Exec:
    """An executable file (mode 100755)."""

    content: str | bytes


# What a path can be set to in ``files=``: text, raw bytes, one of the above, or None (delete).
FileSpec = str | bytes | Symlink | Gitlink | Exec | None

UPSTREAM_REPO = "THUDM/slime"
CONFIG_PATH = ".github/forksync.yml"
# Files bigger than this are never translated (DESIGN: content translation is bounded).
MAX_TRANSLATED_BYTES = 10 * 1024 * 1024
# 2024-06-01T00:00:00Z; every commit is one hour after the previous one.
BASE_DATE = 1717200000

# The DESIGN.md example config, as the project's own loader ships it (one source of truth).
DEFAULT_CONFIG = "# forksync configuration for the vime fork of THUDM/slime.\n" + EXAMPLE_CONFIG

# The same translation with no policies and no flags: for tests that compare the merged
# tree with plain git, where a policy would (rightly) make the two differ.
PLAIN_CONFIG = DEFAULT_CONFIG.split("policies:")[0]

# A 1x1 PNG: binary content with a NUL byte, excluded from translation by '*.png'.
PNG_1X1 = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4"
    "890000000d4944415478da63f8cfc0f01f0005000201a5e1e3a40000000049454e44ae426082"
)

# ------------------------------------------------------------------------- identities


@dataclass(frozen=True)
class Person:
    name: str
    email: str


def person(who: str | Person) -> Person:
    """``"alice"`` → alice <alice@users.noreply.github.com>; a Person is kept as is."""
    if isinstance(who, Person):
        return who
    return Person(who, f"{who}@users.noreply.github.com")


FORK_MAINTAINER = Person("Vera Vime", "vera@vime.dev")

# ------------------------------------------------------------------------ git plumbing


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """An environment where the user's git config and identity cannot leak into fixtures."""
    return clean_env({
        "GIT_AUTHOR_NAME": "factory", "GIT_AUTHOR_EMAIL": "factory@example.invalid",
        "GIT_COMMITTER_NAME": "factory", "GIT_COMMITTER_EMAIL": "factory@example.invalid",
        "GIT_AUTHOR_DATE": f"{BASE_DATE} +0000", "GIT_COMMITTER_DATE": f"{BASE_DATE} +0000",
        **(extra or {}),
    })


def git(git_dir: str | Path, *args: str, input: bytes | None = None,
        env: Mapping[str, str] | None = None, ok: Iterable[int] = (0,)) -> bytes:
    """Run git on one repository (named by its git dir); raise with git's stderr on failure."""
    proc = subprocess.run(["git", f"--git-dir={git_dir}", *args], input=input,
                          capture_output=True, env=git_env(env), check=False)
    if proc.returncode not in tuple(ok):
        raise RuntimeError(f"git {' '.join(args)} failed ({proc.returncode}): "
                           f"{proc.stderr.decode('utf-8', 'replace').strip()}")
    return proc.stdout


def git_text(git_dir: str | Path, *args: str, **kw: Any) -> str:
    return git(git_dir, *args, **kw).decode("utf-8", "surrogateescape").strip()


def init_repo(path: Path, *, bare: bool = False) -> Path:
    """A fresh repository on branch ``main``; returns its git dir."""
    path.mkdir(parents=True, exist_ok=True)
    args = ["git", "init", "-q", "-b", "main"] + (["--bare"] if bare else []) + [str(path)]
    subprocess.run(args, check=True, env=git_env(), capture_output=True)
    return path if bare else path / ".git"


def _quote(path: str) -> bytes:
    """A C-quoted path for fast-import; accepted everywhere, needed for spaces and quotes."""
    raw = path.encode("utf-8", "surrogateescape")
    return b'"' + raw.replace(b"\\", b"\\\\").replace(b'"', b'\\"').replace(b"\n", b"\\n") + b'"'


def _data(payload: bytes) -> bytes:
    return b"data %d\n" % len(payload) + payload + b"\n"


@dataclass
class Commit:
    """One commit for :class:`FastImport`: who, when, what, and the file operations."""

    ref: str
    message: str
    author: Person
    date: int
    parent: str | None = None  # SHA or ":mark"; None: a root commit
    merges: tuple[str, ...] = ()
    ops: bytes = b""  # fast-import file commands (M/D/R/deleteall)
    committer: Person | None = None


class FastImport:
    """Write many commits into one repository with a single ``git fast-import`` process."""

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = git_dir
        self._buf = bytearray()
        self._marks = 0

    def add(self, c: Commit) -> str:
        """Queue a commit; returns its mark (``:N``), usable as a parent before :meth:`run`."""
        self._marks += 1
        mark = f":{self._marks}"
        who, by = c.author, c.committer or c.author
        self._buf += f"commit {c.ref}\nmark {mark}\n".encode()
        self._buf += f"author {who.name} <{who.email}> {c.date} +0000\n".encode()
        self._buf += f"committer {by.name} <{by.email}> {c.date} +0000\n".encode()
        self._buf += _data(c.message.encode())
        if c.parent:
            self._buf += f"from {c.parent}\n".encode()
        for m in c.merges:
            self._buf += f"merge {m}\n".encode()
        self._buf += c.ops + b"\n"
        return mark

    def blob(self, data: bytes) -> str:
        """Queue a blob; returns its mark."""
        self._marks += 1
        mark = f":{self._marks}"
        self._buf += f"blob\nmark {mark}\n".encode() + _data(data)
        return mark

    def run(self) -> dict[str, str]:
        """Import everything queued; returns mark → SHA."""
        marks_file = self.git_dir / "factory-marks"
        git(self.git_dir, "fast-import", "--quiet", "--force", "--done",
            f"--export-marks={marks_file}", input=bytes(self._buf) + b"done\n")
        marks = dict(line.split() for line in marks_file.read_text().splitlines())
        marks_file.unlink()
        self._buf.clear()
        return marks


def file_ops(files: Mapping[str, FileSpec] | None = None,
             renames: Mapping[str, str] | None = None) -> bytes:
    """fast-import commands for ``renames`` (applied first) and then ``files``."""
    out = bytearray()
    for old, new in (renames or {}).items():
        out += b"R " + _quote(old) + b" " + _quote(new) + b"\n"
    for path, spec in (files or {}).items():
        q = _quote(path)
        if spec is None:
            out += b"D " + q + b"\n"
        elif isinstance(spec, Gitlink):
            out += f"M 160000 {spec.sha} ".encode() + q + b"\n"
        else:
            mode, payload = _mode_and_bytes(spec)
            out += f"M {mode} inline ".encode() + q + b"\n" + _data(payload)
    return bytes(out)


def _mode_and_bytes(spec: str | bytes | Symlink | Exec) -> tuple[str, bytes]:
    if isinstance(spec, Symlink):
        return "120000", spec.target.encode("utf-8", "surrogateescape")
    if isinstance(spec, Exec):
        return "100755", _as_bytes(spec.content)
    return "100644", _as_bytes(spec)


def _as_bytes(content: str | bytes) -> bytes:
    return content if isinstance(content, bytes) else content.encode("utf-8")


@dataclass(frozen=True)
class Entry:
    """One tree entry, recursively listed: mode, object id, path."""

    mode: str
    oid: str
    path: str


def ls_tree(git_dir: str | Path, rev: str) -> list[Entry]:
    """Every non-tree entry of ``rev``'s tree (blobs, symlinks, gitlinks)."""
    out = git(git_dir, "ls-tree", "-r", "-z", "--full-tree", rev)
    entries = []
    for rec in out.split(b"\0"):
        if not rec:
            continue
        meta, path = rec.split(b"\t", 1)
        mode, _kind, oid = meta.decode().split()
        entries.append(Entry(mode, oid, path.decode("utf-8", "surrogateescape")))
    return entries


def read_blobs(git_dir: str | Path, oids: Iterable[str]) -> dict[str, bytes]:
    """Contents of many blobs with one ``cat-file --batch``."""
    wanted = list(dict.fromkeys(oids))
    if not wanted:
        return {}
    out = git(git_dir, "cat-file", "--batch", input="\n".join(wanted).encode() + b"\n")
    blobs: dict[str, bytes] = {}
    pos = 0
    for oid in wanted:
        nl = out.index(b"\n", pos)
        header = out[pos:nl].split()
        if len(header) != 3:
            raise RuntimeError(f"object {oid} is missing from {git_dir}")
        size = int(header[2])
        blobs[oid] = out[nl + 1:nl + 1 + size]
        pos = nl + 1 + size + 1
    return blobs


def write_tree(git_dir: Path, entries: Iterable[tuple[str, str, bytes | str]]) -> str:
    """Write a tree of ``(path, mode, content bytes | existing OID)`` and return its OID.

    A ``str`` content is an object that already exists (or a gitlink's commit SHA).
    """
    fi = FastImport(git_dir)
    ops = bytearray()
    for path, mode, content in entries:
        ref = content if isinstance(content, str) else None
        if ref is None:
            ops += f"M {mode} inline ".encode() + _quote(path) + b"\n"
            ops += _data(content)  # type: ignore[arg-type]
        else:
            ops += f"M {mode} {ref} ".encode() + _quote(path) + b"\n"
    mark = fi.add(Commit("refs/factory/scratch", "scratch tree", Person("f", "f@x"), BASE_DATE,
                         ops=b"deleteall\n" + bytes(ops)))
    sha = fi.run()[mark]
    tree = git_text(git_dir, "rev-parse", f"{sha}^{{tree}}")
    git(git_dir, "update-ref", "-d", "refs/factory/scratch")
    return tree


def commit_tree(git_dir: Path, tree: str, parents: Iterable[str], message: str) -> str:
    args = ["commit-tree", tree]
    for p in parents:
        args += ["-p", p]
    return git_text(git_dir, *args, input=message.encode())


def add_alternates(git_dir: Path, *others: str | Path) -> None:
    """Let ``git_dir`` read the objects of other repositories without copying them."""
    info = git_dir / "objects" / "info"
    info.mkdir(parents=True, exist_ok=True)
    dirs = []
    for other in others:
        # --git-path answers relative to our cwd, which is where git ran.
        dirs.append(str(Path(git_text(other, "rev-parse", "--git-path", "objects")).resolve()))
    existing = (info / "alternates").read_text().split() if (info / "alternates").exists() else []
    (info / "alternates").write_text("\n".join(dict.fromkeys(existing + dirs)) + "\n")


def object_count(git_dir: str | Path) -> int:
    """Loose plus packed objects: used to prove that a command wrote nothing."""
    out = git_text(git_dir, "count-objects", "-v")
    fields = dict(line.split(": ") for line in out.splitlines())
    return int(fields["count"]) + int(fields["in-pack"])


def refs_snapshot(git_dir: str | Path) -> str:
    return git_text(git_dir, "for-each-ref", "--format=%(refname) %(objectname)")


# ------------------------------------------------------------------------- translation


class TranslatorLike(Protocol):
    def path(self, upstream_path: str) -> str: ...
    def blob(self, data: bytes, upstream_path: str) -> bytes: ...


def make_translator(config_text: str = DEFAULT_CONFIG) -> TranslatorLike:
    """The project's Translator for ``config_text``."""
    return Translator(load_config(config_text, CONFIG_PATH).translate)


def translate_blob(translator: TranslatorLike, data: bytes, upstream_path: str) -> bytes:
    """Translate one blob's content, except files too large to be translated at all."""
    if len(data) > MAX_TRANSLATED_BYTES:
        return data
    return translator.blob(data, upstream_path)


def translated_entries(upstream_git: str | Path, rev: str,
                       translator: TranslatorLike) -> list[tuple[str, str, bytes | str]]:
    """The FULL upstream tree at ``rev``, every path and every blob translated.

    Gitlinks are kept as they are. Symlink targets are blobs, so they go through
    ``translate_blob`` like any other blob.
    """
    entries = ls_tree(upstream_git, rev)
    blobs = read_blobs(upstream_git, [e.oid for e in entries if e.mode != "160000"])
    out: list[tuple[str, str, bytes | str]] = []
    for e in entries:
        if e.mode == "160000":
            out.append((translator.path(e.path), e.mode, e.oid))
        else:
            out.append((translator.path(e.path), e.mode,
                        translate_blob(translator, blobs[e.oid], e.path)))
    return out


@dataclass(frozen=True)
class OracleMerge:
    """What plain git makes of ours + translate(cutoff) + translate(tip)."""

    git_dir: Path  # scratch repository; reads fork and upstream objects via alternates
    base: str  # commit B: tree base', no parent
    ours: str  # commit O: fork main's tree, parent B
    theirs: str  # commit T: tree theirs', parent B
    tree: str  # the merged tree
    clean: bool
    output: str  # merge-tree's stdout after the tree line (conflicted paths, messages)


def git_merge_oracle(scratch: Path, fork_git: str | Path, fork_rev: str,
                     upstream_git: str | Path, cutoff: str, tip: str,
                     translator: TranslatorLike) -> OracleMerge:
    """Merge ``fork_rev`` with the translated upstream change cutoff→tip using only git."""
    git_dir = init_repo(scratch, bare=True)
    add_alternates(git_dir, fork_git, upstream_git)
    base_tree = write_tree(git_dir, translated_entries(upstream_git, cutoff, translator))
    theirs_tree = write_tree(git_dir, translated_entries(upstream_git, tip, translator))
    ours_tree = git_text(fork_git, "rev-parse", f"{fork_rev}^{{tree}}")
    b = commit_tree(git_dir, base_tree, [], "base'")
    o = commit_tree(git_dir, ours_tree, [b], "ours")
    t = commit_tree(git_dir, theirs_tree, [b], "theirs")
    git(git_dir, "update-ref", "refs/heads/ours", o)
    git(git_dir, "update-ref", "refs/heads/theirs", t)
    proc = subprocess.run(["git", f"--git-dir={git_dir}", "-c", "merge.conflictStyle=diff3",
                           "merge-tree", "--write-tree", "ours", "theirs"],
                          capture_output=True, env=git_env(), check=False)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"git merge-tree failed: {proc.stderr.decode().strip()}")
    tree, _, rest = proc.stdout.decode("utf-8", "surrogateescape").partition("\n")
    return OracleMerge(git_dir, b, o, t, tree.strip(), proc.returncode == 0, rest)


# --------------------------------------------------------------------------- the skeleton

_ENGINE_PY = '''\
"""SGLang engine wrapper used by slime rollouts."""

from sglang.srt.server_args import ServerArgs

from slime.utils.arguments import parse_args


class SGLangEngine:
    """Runs one SGLang server for slime."""

    def __init__(self, args, rank: int):
        self.args = args
        self.rank = rank
        self.server_args = ServerArgs(mem_fraction_static=args.sglang_mem_fraction_static)

    def init(self):
        # see https://github.com/THUDM/slime/issues/12
        return self.server_args

    def generate(self, prompts):
        return [self.rank for _ in prompts]

    def shutdown(self):
        self.server_args = None
'''

_ARGS_PY = '''\
"""Command-line arguments for slime."""

import argparse


def add_sglang_arguments(parser: argparse.ArgumentParser):
    parser.add_argument("--sglang-mem-fraction-static", type=float, default=0.8)
    parser.add_argument("--sglang-tp-size", type=int, default=1)
    return parser


def parse_args(argv=None):
    parser = argparse.ArgumentParser("slime")
    add_sglang_arguments(parser)
    parser.add_argument("--rollout-batch-size", type=int, default=32)
    parser.add_argument("--num-epochs", type=int, default=1)
    return parser.parse_args(argv)
'''

_ROLLOUT_PY = '''\
"""Rollout with SGLang: the fork rewrote this for vLLM."""

from slime.backends.sglang_utils.sglang_engine import SGLangEngine


def generate_rollout(args, prompts):
    engine = SGLangEngine(args, rank=0)
    return engine.generate(prompts)
'''

_RAY_PY = '''\
"""Ray actors for slime."""

import ray


@ray.remote
class RolloutActor:
    def __init__(self, args):
        self.args = args

    def run(self, prompts):
        return len(prompts)
'''

_QUICK_START_MD = """\
# Quick start

slime trains models with Megatron and serves rollouts with SGLang.

1. Install sglang: `pip install sglang`.
2. Run `bash scripts/run_qwen3_4b.sh`.

Use `--sglang-mem-fraction-static 0.7` when memory is tight.
"""

_README_MD = """\
# slime

slime is an LLM post-training framework for RL scaling, built on Megatron and SGLang.
See https://github.com/THUDM/slime for the code. sglang is the default rollout engine.
"""

_CI_YML = """\
name: CI
on: [push, pull_request]
jobs:
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: pip install -e . && pytest tests/test_sglang_engine.py
"""

_RUN_SH = """\
#!/bin/bash
set -euo pipefail
python train.py --sglang-mem-fraction-static 0.7 --rollout-batch-size 32
"""

SKELETON: dict[str, FileSpec] = {
    "README.md": _README_MD,
    "setup.py": 'from setuptools import setup\n\nsetup(name="slime", packages=["slime"])\n',
    "requirements.txt": "ray\nsglang\ntorch\n",
    "slime/__init__.py": '"""slime."""\n__version__ = "0.1.0"\n',
    "slime/backends/__init__.py": "",
    "slime/backends/sglang_utils/__init__.py": "",
    "slime/backends/sglang_utils/sglang_engine.py": _ENGINE_PY,
    "slime/utils/__init__.py": "",
    "slime/utils/arguments.py": _ARGS_PY,
    "slime/rollout/__init__.py": "",
    "slime/rollout/sglang_rollout.py": _ROLLOUT_PY,
    "slime/ray/__init__.py": "",
    "slime/ray/rollout.py": _RAY_PY,
    "docs/en/quick_start.md": _QUICK_START_MD,
    "docker/Dockerfile": "FROM lmsysorg/sglang:v0.4.6\nRUN pip install slime\n",
    "docker/version.txt": "0.4.6\n",
    ".github/workflows/ci.yml": _CI_YML,
    "imgs/arch.png": PNG_1X1,
    "scripts/run_qwen3_4b.sh": Exec(_RUN_SH),
    "tests/test_sglang_engine.py": "from slime.backends.sglang_utils.sglang_engine import"
                                   " SGLangEngine\n\n\ndef test_engine():\n"
                                   "    assert SGLangEngine\n",
}

# ------------------------------------------------------------------------------ scenario


class Scenario:
    """An upstream (``slime``-like) and its translated fork (``vime``-like), built in steps.

    Both are non-bare repositories on ``main`` with the work tree checked out after each
    commit; :attr:`fork_bare` is a bare clone of the fork. The fork starts to exist at the
    first :meth:`sync_fork`; every upstream commit after the latest sync is in the window.

    ``skeleton=True`` starts the upstream with a realistic slime layout in an initial
    PR-less commit followed by PRs #1..#3; ``skeleton=False`` starts it empty.
    """

    def __init__(self, root: str | Path, *, config: str = DEFAULT_CONFIG,
                 skeleton: bool = True, upstream_repo: str = UPSTREAM_REPO) -> None:
        self.root = Path(root)
        self.config_text = config
        self.upstream_repo = upstream_repo
        self.upstream_dir = self.root / "upstream"
        self.fork_dir = self.root / "fork"
        self.upstream_git = init_repo(self.upstream_dir)
        self.fork_git = self.fork_dir / ".git"
        self._tick = 0
        self._oracles = 0
        self._cutoff: str | None = None
        self._translator: TranslatorLike | None = None
        self._bare: Path | None = None
        self.prs: dict[int, str] = {}  # PR number → upstream SHA that merged it
        if skeleton:
            self.upstream_commit("Initial import of slime", "zhuzilin", files=SKELETON)
            self.upstream_pr(1, "Add rollout batch size docs", "alice", files={
                "docs/en/quick_start.md": _QUICK_START_MD
                + "\nSet `--rollout-batch-size` to the number of prompts per step.\n"})
            self.upstream_pr(2, "Support SGLang tensor parallel size", "bob", files={
                "slime/utils/arguments.py": _ARGS_PY.replace(
                    'default=1)\n    return', 'default=1)\n'
                    '    parser.add_argument("--sglang-dp-size", type=int, default=1)\n'
                    '    return')})
            self.upstream_pr(3, "Bump sglang to 0.4.6.post1", "carol", files={
                "docker/version.txt": "0.4.6.post1\n",
                "requirements.txt": "ray\nsglang>=0.4.6.post1\ntorch\n"})

    # ----------------------------------------------------------------- properties

    @property
    def translator(self) -> TranslatorLike:
        """The translation of this scenario's config (the project's Translator if present)."""
        if self._translator is None:
            self._translator = make_translator(self.config_text)
        return self._translator

    @property
    def tip(self) -> str:
        """The upstream ``main`` head."""
        return git_text(self.upstream_git, "rev-parse", "refs/heads/main")

    @property
    def cutoff(self) -> str:
        """The upstream SHA of the latest :meth:`sync_fork`."""
        if self._cutoff is None:
            raise RuntimeError("the fork has not been synced yet: call sync_fork() first")
        return self._cutoff

    @property
    def fork_head(self) -> str:
        return git_text(self.fork_git, "rev-parse", "refs/heads/main")

    @property
    def fork_bare(self) -> Path:
        """A bare clone of the fork, brought up to date with every access."""
        if self._bare is None:
            self._bare = self.root / "fork.git"
            subprocess.run(["git", "clone", "-q", "--bare", str(self.fork_dir), str(self._bare)],
                           check=True, env=git_env(), capture_output=True)
        else:
            git(self._bare, "fetch", "-q", "--prune", "origin", "+refs/heads/*:refs/heads/*")
        return self._bare

    def upstream_file(self, path: str, rev: str = "refs/heads/main") -> bytes:
        return git(self.upstream_git, "cat-file", "blob", f"{rev}:{path}")

    def fork_file(self, path: str, rev: str = "refs/heads/main") -> bytes:
        return git(self.fork_git, "cat-file", "blob", f"{rev}:{path}")

    def translate_path(self, upstream_path: str) -> str:
        return self.translator.path(upstream_path)

    def translate_text(self, content: str | bytes, upstream_path: str) -> bytes:
        """``content`` as the fork would hold it: what a fork commit uses to 'already apply'."""
        return translate_blob(self.translator, _as_bytes(content), upstream_path)

    # ----------------------------------------------------------------- upstream

    def _next_date(self) -> int:
        self._tick += 1
        return BASE_DATE + 3600 * self._tick

    def _commit(self, git_dir: Path, message: str, who: str | Person, ops: bytes,
                *, merges: tuple[str, ...] = (), ref: str = "refs/heads/main",
                parent: str | None = None) -> str:
        fi = FastImport(git_dir)
        if parent is None:
            parent = git_text(git_dir, "rev-parse", "--verify", "-q", ref, ok=(0, 1)) or None
        mark = fi.add(Commit(ref, message, person(who), self._next_date(), parent, merges, ops))
        sha = fi.run()[mark]
        if ref == "refs/heads/main":
            # Keep the work tree showing main, so people can look at the repositories.
            subprocess.run(["git", "read-tree", "-u", "--reset", "HEAD"], cwd=git_dir.parent,
                           check=True, env=git_env(), capture_output=True)
        return sha

    def upstream_pr(self, n: int, title: str, author: str | Person = "alice", *,
                    files: Mapping[str, FileSpec] | None = None,
                    renames: Mapping[str, str] | None = None, body: str = "") -> str:
        """A squash-merged PR: one commit ``Title (#n)`` on upstream main. Returns its SHA."""
        message = f"{title} (#{n})\n" + (f"\n{body}\n" if body else "")
        sha = self._commit(self.upstream_git, message, author, file_ops(files, renames))
        self.prs[n] = sha
        return sha

    def upstream_merge_pr(self, n: int, title: str, author: str | Person = "alice", *,
                          branch: str = "feature",
                          commits: Iterable[Mapping[str, FileSpec]] = ()) -> str:
        """A PR merged with a merge commit ``Merge pull request #n from author/branch``.

        Each mapping in ``commits`` is one commit on the feature side (branched from main).
        The merge result is main plus the feature's changes, so they must not overlap.
        """
        who = person(author)
        base = self.tip
        side = base
        ops = bytearray()
        for i, files in enumerate(commits):
            side = self._commit(self.upstream_git, f"{title}: part {i + 1}", who,
                                file_ops(files), ref=f"refs/heads/{branch}", parent=side)
            ops += file_ops(files)
        message = f"Merge pull request #{n} from {who.name}/{branch}\n\n{title}\n"
        sha = self._commit(self.upstream_git, message, who, bytes(ops), merges=(side,),
                           parent=base)
        git(self.upstream_git, "update-ref", "-d", f"refs/heads/{branch}")
        self.prs[n] = sha
        return sha

    def upstream_commit(self, message: str, author: str | Person = "alice", *,
                        files: Mapping[str, FileSpec] | None = None,
                        renames: Mapping[str, str] | None = None) -> str:
        """A commit with no PR number (a direct push)."""
        return self._commit(self.upstream_git, message + "\n", author, file_ops(files, renames))

    def upstream_force_push(self, to: str) -> None:
        """Move upstream main to ``to`` (any commit): rewrites history, as a force-push does."""
        git(self.upstream_git, "update-ref", "refs/heads/main", to)
        subprocess.run(["git", "read-tree", "-u", "--reset", "HEAD"], cwd=self.upstream_dir,
                       check=True, env=git_env(), capture_output=True)

    # --------------------------------------------------------------------- fork

    def _window_label(self, old: str | None, new: str) -> str:
        rng = f"{old}..{new}" if old else new
        log = git_text(self.upstream_git, "log", "--first-parent", "--format=%s", rng)
        numbers = []
        for subject in log.splitlines():
            m = re.search(r"\(#(\d+)\)$", subject) or re.match(r"Merge pull request #(\d+)",
                                                                  subject)
            if m:
                numbers.append(int(m[1]))
        return f"#{min(numbers)}..#{max(numbers)}" if numbers else f"{(old or '')[:12]}..{new[:12]}"

    def sync_fork(self, *, message: str | None = None, trailer: bool = True,
                  config: bool = True) -> str:
        """Bring the fork to upstream main, as a maintainer's sync commit with the trailers.

        The first call creates the fork: translate(upstream main) plus ``.github/forksync.yml``.
        Later calls merge the translated upstream change since the last sync into fork main
        (with git's own merge, like the engine would) and require that merge to be clean.
        ``trailer=False`` and ``config=False`` make a fork forksync has never seen: no
        ``Upstream-Sync:`` trailer, no config file (what onboarding starts from).
        """
        tip = self.tip
        label = self._window_label(self._cutoff, tip)
        text = (message or f"Sync with upstream {self.upstream_repo} {label}") + (
            f"\n\nUpstream-Sync: {self.upstream_repo}@{tip}\nUpstream-Window: {label}\n"
            if trailer else "\n")
        if self._cutoff is None:
            self.fork_git = init_repo(self.fork_dir)
            entries = translated_entries(self.upstream_git, tip, self.translator)
            if config:
                entries.append((CONFIG_PATH, "100644", self.config_text.encode()))
            ops = b"deleteall\n" + b"".join(
                f"M {mode} inline ".encode() + _quote(p) + b"\n" + _data(c)
                if isinstance(c, bytes) else f"M {mode} {c} ".encode() + _quote(p) + b"\n"
                for p, mode, c in entries)
            sha = self._commit(self.fork_git, text, FORK_MAINTAINER, ops)
        else:
            oracle = git_merge_oracle(self.root / f"sync-{self._tick}", self.fork_git, "main",
                                      self.upstream_git, self._cutoff, tip, self.translator)
            if not oracle.clean:
                raise RuntimeError(f"sync_fork: the merge is not clean:\n{oracle.output}")
            objects = git(oracle.git_dir, "rev-list", "--objects", "--no-object-names",
                          oracle.tree, "--not", oracle.ours)
            # Copy the merge result's new objects into the fork, then commit it there.
            pack = git(oracle.git_dir, "pack-objects", "--stdout", input=objects)
            git(self.fork_git, "index-pack", "--stdin", "--fix-thin", input=pack)
            sha = commit_tree(self.fork_git, oracle.tree, [self.fork_head], text)
            git(self.fork_git, "update-ref", "refs/heads/main", sha)
            subprocess.run(["git", "read-tree", "-u", "--reset", "HEAD"], cwd=self.fork_dir,
                           check=True, env=git_env(), capture_output=True)
            shutil.rmtree(oracle.git_dir, ignore_errors=True)
        self._cutoff = tip
        return sha

    def fork_commit(self, message: str, files: Mapping[str, FileSpec] | None = None, *,
                    renames: Mapping[str, str] | None = None,
                    author: str | Person = FORK_MAINTAINER) -> str:
        """A commit of the fork's own work on fork main (``files`` use fork paths)."""
        if self._cutoff is None:
            raise RuntimeError("the fork does not exist yet: call sync_fork() first")
        return self._commit(self.fork_git, message + "\n", author, file_ops(files, renames))

    def oracle(self, scratch: str | Path | None = None, *, fork_rev: str = "main",
               cutoff: str | None = None, tip: str | None = None) -> OracleMerge:
        """git's own merge of fork main with translate(cutoff)→translate(tip)."""
        self._oracles += 1
        where = Path(scratch) if scratch else self.root / f"oracle-{self._oracles}"
        return git_merge_oracle(where, self.fork_git, fork_rev, self.upstream_git,
                                cutoff or self.cutoff, tip or self.tip, self.translator)


# ---------------------------------------------------------------------------- the demo


def make_demo(directory: str | Path) -> Scenario:
    """A realistic small slime/vime pair: the README demo's input.

    The window (#11..#20) has clean merges, conflicts, new files, a deletion, a rename, a
    file under a ``manual`` policy, a flagged ``--sglang-enable-metrics`` line, a binary
    file changed on both sides, a skipped workflow and a merge-commit PR.
    """
    s = Scenario(directory)
    s.upstream_pr(4, "Add weight update docs", "dana", files={
        "docs/en/weight_update.md": "# Weight update\n\nslime pushes weights to SGLang after "
                                    "each step.\n"})
    s.sync_fork()

    # The fork's own work since the last sync.
    engine = s.translate_path("slime/backends/sglang_utils/sglang_engine.py")
    s.fork_commit("Use vLLM's AsyncLLMEngine", {
        engine: s.fork_file(engine).decode().replace(
            "    def generate(self, prompts):\n        return [self.rank for _ in prompts]\n",
            "    def generate(self, prompts):\n"
            "        # vLLM batches requests itself.\n"
            "        return self.llm.generate(prompts)\n")})
    s.fork_commit("Fork: vLLM rollout rewritten", {
        "vime/rollout/vllm_rollout.py": '"""Rollout with vLLM (rewritten for the fork)."""\n\n'
        "from vllm import LLM\n\n\ndef generate_rollout(args, prompts):\n"
        "    return LLM(args.model).generate(prompts)\n"})
    s.fork_commit("Fork branding", {"imgs/arch.png": PNG_1X1 + b"vime"})
    args = s.translate_path("slime/utils/arguments.py")
    s.fork_commit("Fork: default epochs 2", {
        args: s.fork_file(args).decode().replace('"--num-epochs", type=int, default=1',
                                                 '"--num-epochs", type=int, default=2')})
    s.fork_commit("Fork: vLLM's name for the data parallel size", {
        args: s.fork_file(args).decode().replace(
            '"--vllm-dp-size", type=int, default=1)',
            '"--vllm-data-parallel-size", type=int, default=1)')})

    # The window.
    up_engine = "slime/backends/sglang_utils/sglang_engine.py"
    up_args = "slime/utils/arguments.py"
    s.upstream_pr(11, "Return token ids from generate", "alice", files={
        up_engine: s.upstream_file(up_engine).decode().replace(
            "        return [self.rank for _ in prompts]\n",
            "        return [[self.rank] * len(p) for p in prompts]\n")})
    s.upstream_pr(12, "Add metrics flag", "bob", files={
        up_args: s.upstream_file(up_args).decode().replace(
            '    return parser\n',
            '    parser.add_argument("--sglang-enable-metrics", action="store_true")\n'
            '    return parser\n', 1)})
    s.upstream_pr(13, "Add reward models", "carol", files={
        "slime/rollout/rm/__init__.py": "",
        "slime/rollout/rm/math_rm.py": '"""Math reward for slime."""\n\n\n'
                                       "def reward(answer, label):\n"
                                       "    return float(answer.strip() == label.strip())\n"})
    s.upstream_pr(14, "Remove the old Ray actor", "alice", files={"slime/ray/rollout.py": None})
    s.upstream_pr(15, "Move quick start under get_started", "dana",
                  renames={"docs/en/quick_start.md": "docs/en/get_started/quick_start.md"})
    s.upstream_pr(16, "Stream rollouts", "erin", files={
        "slime/rollout/sglang_rollout.py": s.upstream_file(
            "slime/rollout/sglang_rollout.py").decode() + "\n\ndef stream_rollout(args, prompts):\n"
        "    yield from generate_rollout(args, prompts)\n"})
    s.upstream_pr(17, "New architecture diagram", "bob",
                  files={"imgs/arch.png": PNG_1X1 + b"\x00v2"})
    s.upstream_pr(18, "CI: test on two GPUs", "carol",
                  files={".github/workflows/ci.yml": _CI_YML + "      - run: nvidia-smi\n"})
    s.upstream_merge_pr(19, "Add evaluation script", "frank", branch="eval", commits=[
        {"scripts/eval.sh": Exec("#!/bin/bash\npython -m slime.eval \"$@\"\n")},
        {"slime/eval.py": '"""Evaluate a slime checkpoint with SGLang."""\n'},
    ])
    s.upstream_pr(20, "Bump sglang to 0.4.7", "alice", files={
        "docker/version.txt": "0.4.7\n",
        "docker/Dockerfile": "FROM lmsysorg/sglang:v0.4.7\nRUN pip install slime\n",
        up_args: s.upstream_file(up_args).decode().replace(
            '"--num-epochs", type=int, default=1', '"--num-epochs", type=int, default=3')})
    s.upstream_commit("Fix typo in README", "zhuzilin", files={
        "README.md": _README_MD.replace("framework for RL scaling", "framework for RL Scaling")})
    return s


def make_threads(directory: str | Path) -> Scenario:
    """A window whose review items need every place a thread can have on the PR diff.

    - a conflict region inside one hunk with a proposal (a one-click suggestion), and one
      whose long ours side splits it over two hunks (a comment on its first line);
    - a text file the fork deleted and upstream changed (modify/delete: the whole file is
      new in the diff, so its comment sits on line 1);
    - a PNG the fork deleted and upstream changed (in the diff with no line: a file-level
      comment);
    - a PNG both changed, and a Dockerfile under an ``ours`` policy (commit 1 keeps the
      fork's file, so the PR diff does not have it: no thread);
    - a flagged line, and ``docker/version.txt`` under a ``theirs`` policy.
    """
    s = Scenario(directory)
    table = "".join(f"row_{i} = {i}\n" for i in range(1, 61))
    s.upstream_pr(4, "Add the table and assets", "dana", files={
        "slime/utils/table.py": table, "slime/utils/legacy.py": "old = 1\nolder = 2\n",
        "imgs/logo.png": PNG_1X1 + b"\x00v1"})
    s.sync_fork()
    lines = table.splitlines(keepends=True)
    fork_table = [ln.replace("\n", "  # vime\n") if 10 <= k <= 30 or k == 50 else ln
                  for k, ln in enumerate(lines, 1)]
    s.fork_commit("vime: own table, no legacy module, no logo", {
        "vime/utils/table.py": "".join(fork_table), "vime/utils/legacy.py": None,
        "imgs/logo.png": None, "imgs/arch.png": PNG_1X1 + b"\x00vime"})
    # Lines 10 and 30 clash with the fork's block; line 51 sits next to its edit of 50,
    # which the engine proposes to keep both of (a one-click suggestion).
    up_table = [ln.replace("\n", "  # upstream\n") if k in (10, 30, 51) else ln
                for k, ln in enumerate(lines, 1)]
    s.upstream_pr(5, "Tune the table", "alice", files={"slime/utils/table.py": "".join(up_table)})
    s.upstream_pr(6, "Legacy: one more value", "bob", files={
        "slime/utils/legacy.py": "old = 1\nolder = 2\noldest = 3\n"})
    s.upstream_pr(7, "New logo and diagram", "carol", files={
        "imgs/logo.png": PNG_1X1 + b"\x00v2", "imgs/arch.png": PNG_1X1 + b"\x00v2"})
    up_args = "slime/utils/arguments.py"
    s.upstream_pr(8, "Metrics and a new base image", "erin", files={
        up_args: s.upstream_file(up_args).decode().replace(
            "    return parser\n",
            '    parser.add_argument("--sglang-enable-metrics", action="store_true")\n'
            "    return parser\n", 1),
        "docker/version.txt": "0.4.7\n",
        "docker/Dockerfile": "FROM lmsysorg/sglang:v0.4.7\nRUN pip install slime\n"})
    return s


# ------------------------------------------------------------------------ large repos


@dataclass(frozen=True)
class LargeRepos:
    """The benchmark's repository pair (bare repos) and its window."""

    upstream: Path
    fork: Path
    cutoff: str
    tip: str
    n_files: int
    window_files: int
    window_prs: int
    forked_files: int


_WORDS = ("rollout", "reward", "buffer", "actor", "critic", "loader", "sampler", "router",
          "model", "data", "ckpt", "kernel", "dist", "utils", "metrics", "eval", "config")


def _synthetic_text(rng: random.Random, path: str, lines: int = 24) -> str:
    """A small Python-ish file with a few words the translation rewrites."""
    out = [f'"""{path}: part of slime, talks to SGLang."""', "", "import sglang", ""]
    for i in range(lines):
        w = rng.choice(_WORDS)
        if i % 7 == 3:
            out.append(f"# slime {w} {i}: see --sglang-mem-fraction-static")
        else:
            out.append(f"def {w}_{i}(x):  # {rng.getrandbits(32):08x}")
            out.append(f"    return x + {rng.randint(0, 999)}")
    return "\n".join(out) + "\n"


_TOPS = ("slime", "slime/backends/sglang_utils", "docs/en", "tests", "tools", "examples")
FILES_PER_DIR = 20  # about what real repositories average
WINDOW_DIRS = 60  # the window's files live in the first WINDOW_DIRS directories


def _synthetic_dirs(rng: random.Random, count: int) -> list[str]:
    """``count`` nested directories; the first K are the same whatever ``count`` is."""
    dirs = list(_TOPS)
    while len(dirs) < count:
        parent = rng.choice(dirs)
        dirs.append(f"{parent}/{rng.choice(_WORDS)}{len(dirs)}")
    return dirs


def _file_name(directory: str, stem: str) -> str:
    return f"{directory}/{stem}{'.md' if directory.startswith('docs/') else '.py'}"


def _edit_lines(text: str, rng: random.Random, at: int, tag: str) -> str:
    lines = text.splitlines(keepends=True)
    at = min(at, len(lines) - 1)
    lines[at] = f"    return x  # {tag} {rng.getrandbits(24):06x}\n"
    return "".join(lines)


def make_large(directory: str | Path, n_files: int, *, window_files: int = 150,
               window_prs: int = 48, fork_share: float = 0.3, seed: int = 7,
               config: str = DEFAULT_CONFIG,
               progress: Callable[[str], None] | None = None) -> LargeRepos:
    """A benchmark pair: an upstream of ``n_files`` files and a fork synced at the cutoff.

    The window is ``window_prs`` squash PRs touching ``window_files`` files (about 70%
    modified, 20% new, 5% deleted, 5% renamed). The fork diverges on ``fork_share`` of the
    window's modified files: half of its edits overlap upstream's (conflicts), half do not.
    The same seed gives the same window whatever ``n_files`` is, so runs are comparable.
    Repositories are bare and written with ``git fast-import``.
    """
    say = progress or (lambda _msg: None)
    root = Path(directory)
    translator = make_translator(config)
    # Directories: a random tree, ~FILES_PER_DIR files each, like real repositories.
    dirs = _synthetic_dirs(random.Random(seed), max(WINDOW_DIRS, n_files // FILES_PER_DIR))
    # The window's paths and contents come from their own generator and directories, so
    # they are the same whatever n_files is; only the rest of the repository grows.
    wrng = random.Random(seed + 1)
    window_paths = [_file_name(wrng.choice(dirs[:WINDOW_DIRS]), f"{wrng.choice(_WORDS)}_{k}")
                    for k in range(window_files)]
    rng = random.Random(seed + 2)
    other = [_file_name(rng.choice(dirs), f"b{rng.choice(_WORDS)}_{k}")
             for k in range(max(0, n_files - window_files))]
    n_mod = int(window_files * 0.70)
    n_new = int(window_files * 0.20)
    n_del = int(window_files * 0.05)
    modified = window_paths[:n_mod]
    new = window_paths[n_mod:n_mod + n_new]
    deleted = window_paths[n_mod + n_new:n_mod + n_new + n_del]
    renamed = window_paths[n_mod + n_new + n_del:]
    base_paths = sorted(set(other) | set(modified) | set(deleted) | set(renamed))

    upstream = init_repo(root / "upstream.git", bare=True)
    say(f"upstream: {len(base_paths)} files")
    fi = FastImport(upstream)
    contents: dict[str, str] = {}
    window_set = set(window_paths)
    ops = bytearray(b"deleteall\n")
    for p in base_paths:
        text = _synthetic_text(wrng if p in window_set else rng, p)
        contents[p] = text
        ops += b"M 100644 inline " + _quote(p) + b"\n" + _data(text.encode())
    who = [person(n) for n in ("alice", "bob", "carol", "dana", "erin", "frank")]
    cutoff_mark = fi.add(Commit("refs/heads/main", "Import slime (#1000)\n", who[0],
                                BASE_DATE, ops=bytes(ops)))
    # The window: distribute its files over the PRs round-robin.
    changes: list[list[bytes]] = [[] for _ in range(window_prs)]
    j = 0
    for p in modified:
        contents[p] = _edit_lines(contents[p], wrng, 6, "upstream")
        changes[j % window_prs].append(b"M 100644 inline " + _quote(p) + b"\n"
                                       + _data(contents[p].encode()))
        j += 1
    for p in new:
        changes[j % window_prs].append(b"M 100644 inline " + _quote(p) + b"\n"
                                       + _data(_synthetic_text(wrng, p).encode()))
        j += 1
    for p in deleted:
        changes[j % window_prs].append(b"D " + _quote(p) + b"\n")
        j += 1
    for p in renamed:
        target = p.rsplit("/", 1)[0] + "/moved_" + p.rsplit("/", 1)[1]
        changes[j % window_prs].append(b"R " + _quote(p) + b" " + _quote(target) + b"\n")
        j += 1
    parent = cutoff_mark
    for i, ch in enumerate(changes):
        parent = fi.add(Commit("refs/heads/main", f"Window change {i + 1} (#{1001 + i})\n",
                               who[i % len(who)], BASE_DATE + 3600 * (i + 1), parent,
                               ops=b"".join(ch)))
    marks = fi.run()
    cutoff, tip = marks[cutoff_mark], marks[parent]

    say("fork: translating the cutoff")
    fork = init_repo(root / "fork.git", bare=True)
    add_alternates(fork, upstream)
    entries = translated_entries(upstream, cutoff, translator)
    entries.append((CONFIG_PATH, "100644", config.encode()))
    (fork / "objects" / "info" / "alternates").unlink()
    translated = {p: c for p, _m, c in entries}
    ffi = FastImport(fork)
    sync_ops = b"deleteall\n" + b"".join(
        b"M " + mode.encode() + b" inline " + _quote(p) + b"\n" + _data(c)  # type: ignore[arg-type]
        for p, mode, c in entries)
    msg = (f"Sync with upstream {UPSTREAM_REPO} #1000\n\nUpstream-Sync: {UPSTREAM_REPO}@{cutoff}\n"
           "Upstream-Window: #1000..#1000\n")
    head = ffi.add(Commit("refs/heads/main", msg, FORK_MAINTAINER, BASE_DATE + 60, ops=sync_ops))
    # Fork divergence: a share of the modified window files, half on upstream's line.
    forked = modified[: max(1, int(window_files * fork_share))]
    fork_ops = bytearray()
    for k, p in enumerate(forked):
        fp = translator.path(p)
        fork_ops += b"M 100644 inline " + _quote(fp) + b"\n"
        old = translated[fp]
        assert isinstance(old, bytes)
        fork_ops += _data(_edit_lines(old.decode(), wrng, 6 if k % 2 == 0 else 16,
                                      "fork").encode())
    ffi.add(Commit("refs/heads/main", "vime: the fork's own work\n", FORK_MAINTAINER,
                   BASE_DATE + 120, head, ops=bytes(fork_ops)))
    ffi.run()
    say("done")
    return LargeRepos(upstream, fork, cutoff, tip, len(base_paths), window_files, window_prs,
                      len(forked))


def stable_digest(*parts: object) -> str:
    """A short digest used to name cache directories by their generation parameters."""
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:12]


__all__ = [
    "CONFIG_PATH", "DEFAULT_CONFIG", "PLAIN_CONFIG", "PNG_1X1", "SKELETON", "UPSTREAM_REPO",
    "Exec", "FastImport", "FileSpec", "Gitlink", "LargeRepos",
    "OracleMerge", "Person", "Scenario", "Symlink", "add_alternates", "commit_tree", "git",
    "git_merge_oracle", "git_text", "init_repo", "ls_tree", "make_demo", "make_large",
    "make_translator", "object_count", "read_blobs", "refs_snapshot", "translate_blob",
    "translated_entries", "write_tree",
]
