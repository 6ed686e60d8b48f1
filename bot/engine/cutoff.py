"""Inferring the first cutoff of a fork forksync has never synced.

The cutoff is the upstream commit the fork last matched. With no ``Upstream-Sync:``
trailer to say which, it is inferred: among the upstream commits since the fork was
created, the one whose translated tree is closest to the fork's main, measured in
changed lines (``git diff --numstat``: lines added plus lines deleted, a binary file
counting as one).

Measuring every candidate would cost one tree translation each, so ``search``
samples: it measures a dozen commits spread over the range, then narrows the range
around the closest and samples again, until every commit left is measured. That is
about 12 measurements per factor of 5 of history (a few dozen for thousands of
commits), and it assumes the distance falls towards the true cutoff and rises after
it, which holds for a fork that mostly kept up with upstream's files. On a tie the
older commit wins: a window that starts too early shows changes the fork already has,
as conflicts people can see; one that starts too late would silently drop changes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from bot.engine.git import CatFile, Git, TreeWriter, iter_z
from bot.engine.merge import Entry, build_tree
from bot.engine.translate import Translator
from bot.errors import ConfigError

SAMPLES = 12


@dataclass(frozen=True)
class Measure:
    """How far translate(upstream@sha) is from the fork's main."""

    sha: str
    index: int  # position among the candidates, oldest first
    lines: int  # lines added plus lines deleted; a binary file counts as one
    files: int  # paths that differ


@dataclass
class CutoffGuess:
    """The inferred cutoff, and what it was chosen from."""

    best: Measure
    candidates: list[str]  # upstream commits considered, oldest first
    measured: list[Measure] = field(default_factory=list)  # oldest first
    start: str = ""  # why the candidates start where they do

    def runner_up(self) -> Measure | None:
        """The closest measured commit after the best one, for the explanation."""
        rest = [m for m in self.measured if m.sha != self.best.sha]
        return min(rest, key=lambda m: (m.lines, m.index)) if rest else None


def search(candidates: Sequence[str], measure: Callable[[str, int], Measure],
           samples: int = SAMPLES) -> tuple[Measure, list[Measure]]:
    """The closest candidate by sampling and narrowing; every measure taken, oldest first."""
    if not candidates:
        raise ValueError("no candidates")
    taken: dict[int, Measure] = {}

    def at(i: int) -> Measure:
        if i not in taken:
            taken[i] = measure(candidates[i], i)
        return taken[i]

    lo, hi = 0, len(candidates) - 1
    while True:
        if hi - lo + 1 <= samples:
            for i in range(lo, hi + 1):
                at(i)
            break
        step = (hi - lo) / (samples - 1)
        points = sorted({lo + round(k * step) for k in range(samples)})
        best = min((at(i) for i in points), key=lambda m: (m.lines, m.index))
        reach = math.ceil(step)
        lo, hi = max(lo, best.index - reach), min(hi, best.index + reach)
    closest = min(taken.values(), key=lambda m: (m.lines, m.index))
    return closest, [taken[i] for i in sorted(taken)]


def candidates(upstream: Git, branch_ref: str, *, both: Git | None = None,
               fork_ref: str | None = None, since: int | None = None) -> tuple[list[str], str]:
    """The upstream first-parent commits that may be the cutoff, oldest first, and why.

    With shared history (a GitHub fork made with the Fork button) they start at the
    last upstream commit the fork contains; otherwise at the upstream commit that was
    current when the fork began (``since``, a Unix time), or at the very first one.
    ``both`` is a repository that sees the fork's and upstream's objects.
    """
    out = upstream.text("log", "--first-parent", "--reverse", "--format=%H %ct", branch_ref, "--")
    commits = [(sha, int(ts)) for sha, ts in (ln.split() for ln in out.splitlines() if ln)]
    shas = [sha for sha, _ in commits]
    if not shas:
        return [], "the upstream branch has no commits"
    if both is not None and fork_ref is not None:
        base = both.run_proc("merge-base", fork_ref, shas[-1])
        merge_base = base.stdout.decode().strip() if base.returncode == 0 else ""
        if merge_base:
            # Along the first-parent chain, "contains the merge base" turns true once and
            # stays true: bisect for the first commit that does.
            lo, hi = 0, len(shas)
            while lo < hi:
                mid = (lo + hi) // 2
                if upstream.is_ancestor(merge_base, shas[mid]):
                    hi = mid
                else:
                    lo = mid + 1
            start = max(lo - (0 if lo < len(shas) and shas[lo] == merge_base else 1), 0)
            return shas[start:], (f"the last commit the fork's history shares with it "
                                  f"(`{merge_base[:12]}`)")
    if since is not None:
        before = [i for i, (_, ts) in enumerate(commits) if ts <= since]
        if before:
            day = time.strftime("%Y-%m-%d", time.gmtime(since))
            return shas[before[-1]:], f"the fork's history began ({day})"
    return shas, "its first commit"


class TreeDistance:
    """Measures translate(upstream@commit) against one fork tree, reusing translated blobs."""

    def __init__(self, work: Git, cat: CatFile, writer: TreeWriter, translator: Translator,
                 fork_tree: str) -> None:
        self.work = work
        self.cat = cat
        self.writer = writer
        self.tr = translator
        self.fork_tree = fork_tree
        self._paths: dict[str, str] = {}
        self._blobs: dict[tuple[str, str], str] = {}  # (upstream oid, upstream path) -> oid

    def __call__(self, commit: str, index: int) -> Measure:
        tree = self.translated_tree(commit)
        out = self.work.run("diff-tree", "-r", "-z", "--numstat", "--no-renames", tree,
                            self.fork_tree)
        lines = files = 0
        fields = list(iter_z(out))
        for record in fields:
            added, deleted, _ = record.split("\t", 2)
            files += 1
            lines += 1 if added == "-" else int(added) + int(deleted)
        return Measure(commit, index, lines, files)

    def translated_tree(self, commit: str) -> str:
        """translate(upstream@commit) as a tree in the work repository."""
        listing = self.work.run("ls-tree", "-r", "-z", "--full-tree", commit)
        entries: dict[str, Entry] = {}
        origin: dict[str, str] = {}
        pending: list[tuple[str, str, tuple[str, str]]] = []  # fork path, mode, (oid, path)
        for record in iter_z(listing):
            meta, _, path = record.partition("\t")
            mode, kind, oid = meta.split()
            fork_path = self._paths.get(path)
            if fork_path is None:
                fork_path = self._paths.setdefault(path, self.tr.path(path))
            if origin.setdefault(fork_path, path) != path:
                raise ConfigError("translate", None, "paths", f"upstream paths "
                                  f"{origin[fork_path]!r} and {path!r} both translate to "
                                  f"{fork_path!r}")
            if kind == "blob" and not self.tr.is_excluded(path):
                pending.append((fork_path, mode, (oid, path)))
            else:
                entries[fork_path] = Entry(mode, oid)
        self._translate([key for _, _, key in pending])
        for fork_path, mode, key in pending:
            entries[fork_path] = Entry(mode, self._blobs[key])
        tree = build_tree(self.cat, self.writer, entries) if entries else self.writer.write([])
        self.writer.flush()
        return tree

    def _translate(self, keys: list[tuple[str, str]]) -> None:
        """Translate the blobs not seen before; write only those the translation changes."""
        todo = sorted(set(keys) - self._blobs.keys())
        if not todo:
            return
        blobs = self.cat.read_many([oid for oid, _ in todo])
        changed: list[tuple[tuple[str, str], bytes]] = []
        for (oid, path), (_, data) in zip(todo, blobs, strict=True):
            out = self.tr.blob(data, path)
            if out == data:
                self._blobs[(oid, path)] = oid
            else:
                changed.append(((oid, path), out))
        written = self.work.hash_blobs([data for _, data in changed])
        for (key, _), oid in zip(changed, written, strict=True):
            self._blobs[key] = oid


__all__ = ["SAMPLES", "CutoffGuess", "Measure", "TreeDistance", "candidates", "search"]
