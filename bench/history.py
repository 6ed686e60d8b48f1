"""A large upstream with a long history, its fork, and a chain of windows (for bench_fetch).

The upstream has ``files`` files and ``commits`` commits of history before the cutoff
(each commit edits two files outside the windows, as day-to-day work does), then a
chain of windows: window 0 (the first sync) and the windows of later syncs. The fork
is what a GitHub fork of it is: the upstream's history up to the cutoff, then one
commit that translates the tree (slime -> vime) with the ``Upstream-Sync:`` trailer,
then work of its own on some of window 0's files. For each later window the fork
gets the commit that merging the previous sync PR made: the window's files,
translated, with the trailer naming the previous tip.

The windows' files live in their own directories, drawn by their own random
generator, so they are the same whatever ``files`` and ``commits`` are: only the
rest of the repository grows. Everything is written with ``git fast-import``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from tests.factory import (
    BASE_DATE,
    CONFIG_PATH,
    DEFAULT_CONFIG,
    FORK_MAINTAINER,
    UPSTREAM_REPO,
    WINDOW_DIRS,
    Commit,
    FastImport,
    _data,
    _edit_lines,
    _file_name,
    _quote,
    _synthetic_dirs,
    _synthetic_text,
    git,
    init_repo,
    make_translator,
    person,
    translate_blob,
    translated_entries,
)

FILES_PER_DIR = 20
POOL = 900  # files the windows draw from (the same in every repository)


@dataclass(frozen=True)
class Window:
    """One window: the upstream commits from ``cutoff`` to ``tip`` and what they change."""

    cutoff: str
    tip: str
    files: int
    prs: int
    fork_main: str  # the fork's main branch when this window is synced


@dataclass(frozen=True)
class History:
    upstream: str  # bare repositories
    fork: str
    files: int
    commits: int  # upstream commits up to the tip of the last window
    windows: list[Window]

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self)))

    @classmethod
    def load(cls, path: Path) -> History:
        data = json.loads(path.read_text())
        data["windows"] = [Window(**w) for w in data["windows"]]
        return cls(**data)


@dataclass
class _Change:
    """What one window does to the upstream, kept to replay it translated on the fork."""

    set: dict[str, str]  # path -> new content
    deleted: list[str]


def generate(root: Path, files: int, commits: int, windows: list[tuple[int, int]],
             seed: int = 11, say: Callable[[str], None] = print) -> History:
    """Write the upstream and the fork under ``root``; ``windows`` is [(files, PRs), ...]."""
    rng = random.Random(seed)
    wrng = random.Random(seed + 1)  # the windows' own: the same in every repository
    dirs = _synthetic_dirs(random.Random(seed), max(WINDOW_DIRS, files // FILES_PER_DIR))
    pool = [_file_name(wrng.choice(dirs[:WINDOW_DIRS]), f"w{wrng.choice(_words())}_{k}")
            for k in range(POOL)]
    others = [_file_name(rng.choice(dirs), f"b{rng.choice(_words())}_{k}")
              for k in range(max(0, files - POOL))]
    in_pool = set(pool)
    contents = {p: _synthetic_text(wrng if p in in_pool else rng, p)
                for p in sorted(in_pool | set(others))}
    upstream = init_repo(root / "upstream.git", bare=True)
    fi = FastImport(upstream)
    say(f"upstream: {len(contents)} files, {commits} commits of history")
    ops = bytearray(b"deleteall\n")
    for p, text in contents.items():
        ops += b"M 100644 inline " + _quote(p) + b"\n" + _data(text.encode())
    who = [person(n) for n in ("alice", "bob", "carol", "dana", "erin", "frank")]
    parent = fi.add(Commit("refs/heads/main", "Import slime (#1)\n", who[0], BASE_DATE,
                           ops=bytes(ops)))
    for i in range(commits - 1):
        edit = bytearray()
        for p in rng.sample(others, 2):
            contents[p] = _edit_lines(contents[p], rng, rng.randrange(4, 30), "work")
            edit += b"M 100644 inline " + _quote(p) + b"\n" + _data(contents[p].encode())
        parent = fi.add(Commit("refs/heads/main", f"Day-to-day work {i} (#{i + 2})\n",
                               who[i % len(who)], BASE_DATE + 60 * (i + 1), parent,
                               ops=bytes(edit)))
    date = BASE_DATE + 60 * commits
    marks = [parent]
    changes: list[_Change] = []
    live = list(pool)
    for w, (n_files, n_prs) in enumerate(windows):
        change, prs = _window(contents, live, wrng, n_files, n_prs, tag=f"w{w}")
        changes.append(change)
        for k, pr_ops in enumerate(prs):
            date += 3600
            title = f"Window {w} change {k} (#{50_000 + w * 1000 + k})\n"
            parent = fi.add(Commit("refs/heads/main", title, who[k % len(who)], date, parent,
                                   ops=pr_ops))
        marks.append(parent)
    shas = fi.run()
    points = [shas[m] for m in marks]
    say("fork: the upstream's history, then its translation")
    fork_mains = _fork(root, upstream, points, changes, wrng, windows)
    found = [Window(points[w], points[w + 1], n, p, fork_mains[w])
             for w, (n, p) in enumerate(windows)]
    total = commits + sum(p for _, p in windows)
    return History(str(upstream), str(root / "fork.git"), len(contents), total, found)


def _words() -> tuple[str, ...]:
    from tests.factory import _WORDS
    return _WORDS


def _window(contents: dict[str, str], live: list[str], rng: random.Random, n_files: int,
            n_prs: int, tag: str) -> tuple[_Change, list[bytes]]:
    """A window of ``n_files`` files over ``n_prs`` PRs: 70% modified, 20% new, 5% deleted,
    5% renamed, like real windows."""
    n_mod, n_new, n_del = int(n_files * 0.7), int(n_files * 0.2), int(n_files * 0.05)
    n_ren = n_files - n_mod - n_new - n_del
    picked = rng.sample(live, n_mod + n_del + n_ren)
    modified, deleted, renamed = (picked[:n_mod], picked[n_mod:n_mod + n_del],
                                  picked[n_mod + n_del:])
    change = _Change({}, [])
    prs: list[bytearray] = [bytearray() for _ in range(n_prs)]
    ops: list[bytes] = []
    for p in modified:
        contents[p] = _edit_lines(contents[p], rng, rng.randrange(4, 30), f"upstream {tag}")
        change.set[p] = contents[p]
        ops.append(b"M 100644 inline " + _quote(p) + b"\n" + _data(contents[p].encode()))
    for k in range(n_new):
        p = _file_name(rng.choice(sorted({x.rsplit("/", 1)[0] for x in live})),
                       f"new_{tag}_{k}")
        contents[p] = _synthetic_text(rng, p)
        change.set[p] = contents[p]
        live.append(p)
        ops.append(b"M 100644 inline " + _quote(p) + b"\n" + _data(contents[p].encode()))
    for p in deleted:
        del contents[p]
        change.deleted.append(p)
        live.remove(p)
        ops.append(b"D " + _quote(p) + b"\n")
    for p in renamed:
        target = p.rsplit("/", 1)[0] + f"/moved_{tag}_" + p.rsplit("/", 1)[1]
        contents[target] = contents.pop(p)
        change.set[target] = contents[target]
        change.deleted.append(p)
        live.remove(p)
        live.append(target)
        ops.append(b"R " + _quote(p) + b" " + _quote(target) + b"\n")
    for j, op in enumerate(ops):
        prs[j % n_prs] += op
    return change, [bytes(pr) for pr in prs]


def _fork(root: Path, upstream: Path, points: list[str], changes: list[_Change],
          rng: random.Random, windows: list[tuple[int, int]]) -> list[str]:
    """The fork: upstream's history to the cutoff, its translation, then one merged sync per
    later window. Returns the fork's main branch for each window's sync."""
    translator = make_translator(DEFAULT_CONFIG)
    fork = init_repo(root / "fork.git", bare=True)
    git(fork, "fetch", "-q", str(upstream), f"{points[0]}:refs/heads/main")
    entries = translated_entries(upstream, points[0], translator)
    entries.append((CONFIG_PATH, "100644", DEFAULT_CONFIG.encode()))
    ffi = FastImport(fork)
    sync_ops = b"deleteall\n" + b"".join(
        b"M " + mode.encode() + b" inline " + _quote(p) + b"\n" + _data(c)  # type: ignore[arg-type]
        for p, mode, c in entries)
    date = BASE_DATE + 10_000_000
    head = ffi.add(Commit("refs/heads/main", _sync_message(points[0]), FORK_MAINTAINER, date,
                          points[0], ops=sync_ops))
    # The fork's own work: a third of window 0's modified files, edited.
    translated = {p: c for p, _m, c in entries}
    own = bytearray()
    for p in sorted(changes[0].set)[: max(1, windows[0][0] // 3)]:
        fp = translator.path(p)
        if fp in translated:
            text = translated[fp]
            assert isinstance(text, bytes)
            own += b"M 100644 inline " + _quote(fp) + b"\n" + _data(
                _edit_lines(text.decode(), rng, 20, "fork").encode())
    heads = [ffi.add(Commit("refs/heads/main", "vime: the fork's own work\n", FORK_MAINTAINER,
                            date + 60, head, ops=bytes(own)))]
    for w in range(1, len(windows)):
        merged = bytearray()
        for p in changes[w - 1].deleted:
            merged += b"D " + _quote(translator.path(p)) + b"\n"
        for p, text in changes[w - 1].set.items():
            merged += b"M 100644 inline " + _quote(translator.path(p)) + b"\n" + _data(
                translate_blob(translator, text.encode(), p))
        heads.append(ffi.add(Commit("refs/heads/main", _sync_message(points[w]),
                                    FORK_MAINTAINER, date + 3600 * w, heads[-1],
                                    ops=bytes(merged))))
    marks = ffi.run()
    return [marks[h] for h in heads]


def _sync_message(upstream_sha: str) -> str:
    return (f"Sync with upstream {UPSTREAM_REPO}\n\nUpstream-Sync: {UPSTREAM_REPO}@"
            f"{upstream_sha}\n")


__all__ = ["History", "Window", "generate"]
