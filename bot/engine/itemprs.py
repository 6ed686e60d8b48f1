"""Which window PRs each review item's lines came from: the line history of attribute.py
placed on the items of a classified merge. Local git only."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from bot.engine import attribute
from bot.engine.generated import MANY_REGIONS
from bot.engine.git import MODE_GITLINK, MODE_SYMLINK, Background, CatFile, Git
from bot.engine.markers import split_lines
from bot.engine.merge import Entry, MergeOutcome, TreeIndex, commit_tree_oid
from bot.engine.model import FileResult, ItemKind, ReviewItem, WindowEntry
from bot.engine.text import decode

_History = list[attribute.CommitDiff]
History = tuple[Background, Background] | None
# A file's upstream path at the tip, and its path at the cutoff when upstream renamed it.
UpstreamPaths = tuple[str, str | None]


class ItemPRs:
    """Starts the history reads early (they run while the merge is classified), then names
    each item's PRs: ``git log -L`` over a region's theirs' lines and ``git blame --reverse``
    over its base' lines; a whole file's PRs where a region cannot be placed."""

    def __init__(self, work: Git, cat: CatFile, outcome: MergeOutcome,
                 window: list[WindowEntry], cutoff: str, tip: str) -> None:
        self.work = work
        self.cat = cat
        self.o = outcome
        self.window = window
        self.cutoff = cutoff
        self.tip = tip
        self.raw = TreeIndex(cat, outcome.merged_tree)
        self._tip_tree_oid: str | None = None

    def start(self, paths: Iterable[UpstreamPaths]) -> History:
        """The window's line history of these files, for ``log -L`` and for ``blame``."""
        wanted = [q for p in paths for q in p if q]
        log = attribute.start_history(self.work, self.cutoff, self.tip, wanted)
        blame = attribute.start_history(self.work, self.cutoff, self.tip, wanted, for_blame=True)
        return (log, blame) if log is not None and blame is not None else None

    @staticmethod
    def _read(jobs: History) -> tuple[str, str]:
        if jobs is None:
            return "", ""
        return jobs[0].output().decode("utf-8", "replace"), \
            jobs[1].output().decode("utf-8", "replace")

    def attach(self, results: list[FileResult], history: History, started: set[str],
               by_fork: Mapping[str, UpstreamPaths]) -> None:
        """Set ``prs`` on every item of ``results``; ``started`` names the upstream paths
        whose history ``history`` reads (the rest are read now, e.g. flags on clean files)."""
        log, blame = self._read(history)
        wanted = [r for r in results if r.review_items]
        missing = [by_fork[r.path] for r in wanted
                   if r.path in by_fork and by_fork[r.path][0] not in started]
        if missing:
            more_log, more_blame = self._read(self.start(missing))
            log, blame = log + more_log, blame + more_blame
        commits = attribute.parse_history(log)
        blamed = attribute.parse_history(blame)
        numbers = {e.sha: e.number for e in self.window}

        def prs(shas: Iterable[str]) -> list[int]:
            return sorted({n for sha in shas if (n := numbers.get(sha)) is not None})

        for r in wanted:
            paths = by_fork.get(r.path)
            tip_path = r.upstream_path
            cut_path = paths[1] if paths is not None and paths[1] else r.upstream_path
            whole = prs(attribute.touched_file(commits, tip_path)
                        + attribute.deleted_file(blamed, cut_path))
            # A file answered as a whole (bot.engine.generated) has no thread per region
            # to name PRs on: its regions get the file's PRs, and thousands of regions of a
            # generated parser are not each traced through the history.
            together = r.generated is not None or sum(
                1 for i in r.review_items if i.kind is ItemKind.CONFLICT) > MANY_REGIONS
            sides = None if together else self._side_texts(r)
            theirs_end = base_end = 0
            for item in r.review_items:
                if item.kind is ItemKind.CONFLICT and sides is not None:
                    found = self._region_commits(item, sides, (commits, blamed), tip_path,
                                                 cut_path, theirs_end, base_end)
                    if found is not None:
                        shas, theirs_end, base_end = found
                        item.prs = prs(shas) or whole
                        continue
                if item.kind is ItemKind.FLAG:
                    item.prs = self._flag_commits(item, commits, tip_path, prs) or whole
                    continue
                item.prs = whole  # whole-file, manual and policy items; or a region not found

    def _text(self, index: TreeIndex, path: str) -> str | None:
        e = index.get(path)
        if e is None or e.is_tree or e.mode in (MODE_GITLINK, MODE_SYMLINK):
            return None
        return decode(self.cat.read(Entry(e.mode, e.oid).oid)[1])

    def _side_texts(self, r: FileResult) -> tuple[str, str, list[str]] | None:
        """base' and theirs' of a conflicted file, and its merged lines; None if unusable."""
        stages = {stage: oid for _m, oid, stage in self.o.conflicts.get(r.path, [])}
        merged = self._text(self.raw, r.path)
        if merged is None:
            return None
        texts = {}
        for stage in (1, 3):
            oid = stages.get(stage)
            _, data = self.cat.read(oid) if oid else ("blob", b"")
            text = decode(data)
            if text is None:
                return None
            texts[stage] = text
        return texts[1], texts[3], split_lines(merged)

    def _region_commits(self, item: ReviewItem, sides: tuple[str, str, list[str]],
                        histories: tuple[_History, _History], tip_path: str, cut_path: str,
                        theirs_from: int, base_from: int) -> tuple[list[str], int, int] | None:
        """``git log -L`` over the region's theirs' lines plus ``git blame --reverse`` over
        its base' lines; ``None`` when the region cannot be placed in those files."""
        base_text, theirs_text, merged = sides
        if item.start_line is None or item.end_line is None:
            return None
        before = merged[item.start_line - 2] if item.start_line > 1 else None
        after = merged[item.end_line] if item.end_line < len(merged) else None
        at_tip = attribute.locate(theirs_text, item.theirs, before, after, theirs_from)
        at_cut = attribute.locate(base_text, item.base, before, after, base_from)
        if at_tip is None or at_cut is None:
            return None
        shas = attribute.log_l(histories[0], tip_path, *at_tip)
        shas += attribute.blame_reverse(histories[1], cut_path, range(*at_cut))
        return shas, at_tip[1], at_cut[1]

    def _flag_commits(self, item: ReviewItem, commits: list[attribute.CommitDiff],
                      tip_path: str, prs: Callable[[Iterable[str]], list[int]]) -> list[int]:
        """The PRs that touched the flagged lines at the tip (each at its first occurrence)."""
        if self._tip_tree_oid is None:
            self._tip_tree_oid = commit_tree_oid(self.cat, self.tip)
        upstream = self._text(TreeIndex(self.cat, self._tip_tree_oid), tip_path)
        wanted = {ln.rstrip("\r\n") for ln in split_lines(item.theirs)}
        found: set[int] = set()
        for pos, text in enumerate(split_lines(upstream or "")):
            if text.rstrip("\r\n") in wanted:
                wanted.discard(text.rstrip("\r\n"))
                found.update(prs(attribute.log_l(commits, tip_path, pos, pos + 1)))
        return sorted(found)
