"""The 3-way merge of ours, base' and theirs', done by git's own merge-ort.

base' = translate(upstream@cutoff) and theirs' = translate(upstream@tip) are built
as real git trees, then merged against fork main with ``git merge-tree
--write-tree``, so every path ends exactly as git would merge it.

Why the walk is cheap: a subtree whose OID is the same at the cutoff and at the
tip is unchanged by the window. merge-ort resolves a directory where base' and
theirs' agree to ours without looking inside, so such a subtree can be placed
(at its translated location) without listing it, and its content never needs
translating. Only the directories the window touched are read, so the cost
follows the window, not the repository.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from bot.engine.git import (
    MODE_GITLINK,
    MODE_TREE,
    Background,
    CatFile,
    Git,
    TreeEntry,
    TreeWriter,
    iter_z,
    reading,
)
from bot.engine.markers import BASE_LABEL_PREFIX
from bot.engine.mergetree import (
    CONFLICT_STYLE,
    OURS_REF,
    THEIRS_REF,
    MergeMessage,
    merge_trees,
)
from bot.engine.translate import Translator
from bot.engine.trees import Entry, TreeIndex, build_tree, edit_tree
from bot.errors import ForksyncError

UPSTREAM = "the upstream repository"
FORK = "the fork repository"


class TranslationCollision(ForksyncError):
    """Two upstream paths translate to the same fork path: the config must change."""

    exit_code = 2


@dataclass(frozen=True)
class UpstreamChange:
    """One path the window changed upstream (``git diff-tree -M`` between cutoff and tip)."""

    status: str  # A, D, M, T, R
    old_path: str | None
    new_path: str | None
    old: Entry | None
    new: Entry | None


@dataclass
class MergeOutcome:
    merged_tree: str
    base_tree: str
    theirs_tree: str
    ours_tree: str
    conflicts: dict[str, list[tuple[str, str, int]]]  # path -> [(mode, oid, stage)]
    messages: list[MergeMessage]
    changes: list[UpstreamChange]
    path_map: dict[str, str] = field(default_factory=dict)  # upstream path -> fork path
    translated: dict[tuple[str, str], str] = field(default_factory=dict)  # (oid, up path) -> oid
    # The conflict-marker size of each conflicted text file (markers.MARKER_SIZE mostly).
    marker_sizes: dict[str, int] = field(default_factory=dict)


class _Side:
    """One translated tree under construction: fork path -> entry, plus where it came from."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.entries: dict[str, Entry] = {}
        self.origin: dict[str, str] = {}

    def put(self, fork_path: str, entry: Entry, upstream_path: str) -> None:
        prior = self.origin.get(fork_path)
        if prior is not None and prior != upstream_path:
            raise TranslationCollision(
                f"upstream paths {prior!r} and {upstream_path!r} both translate to "
                f"{fork_path!r} (at the {self.label}); change translate.paths or translate.replace"
            )
        self.entries[fork_path] = entry
        self.origin[fork_path] = upstream_path


class TreeTranslator:
    """Builds base' and theirs' from the upstream trees at cutoff and tip."""

    def __init__(self, git: Git, cat: CatFile, translator: Translator, ours: TreeIndex) -> None:
        self.git = git
        self.cat = cat
        self.tr = translator
        self.ours = ours
        self.base = _Side("cutoff")
        self.theirs = _Side("tip")
        self.pending: dict[tuple[str, str], None] = {}  # (blob oid, upstream path) to translate
        self.path_map: dict[str, str] = {}
        self._dir_paths: dict[str, str] = {}
        # Every file of a directory the window changed: (upstream path, at cutoff, at tip).
        self.visited: list[tuple[str, TreeEntry | None, TreeEntry | None]] = []
        self.removed_dirs: list[str] = []  # gone at the tip: maybe renamed (merge-ort moves
        # the fork's own files in them along)

    def fork_path(self, upstream_path: str) -> str:
        fp = self.path_map.get(upstream_path)
        if fp is None:
            fp = self.tr.path(upstream_path)
            self.path_map[upstream_path] = fp
        return fp

    def fork_dir(self, upstream_dir: str) -> str:
        fp = self._dir_paths.get(upstream_dir)
        if fp is None:
            fp = self.tr.path(upstream_dir + "/").rstrip("/")
            self._dir_paths[upstream_dir] = fp
        return fp

    def walk(self, cut_root: str, tip_root: str) -> None:
        """Visit the directories the window changed, breadth first, one git round trip a level."""
        level: list[tuple[str, str | None, str | None]] = [("", cut_root, tip_root)]
        while level:
            changed = []
            for up_dir, cut, tip in level:
                if cut is not None and cut == tip:
                    # Unchanged by the window: the same on both sides, so its inside is
                    # irrelevant to the merge and is never listed.
                    entry = Entry(MODE_TREE, cut)
                    fork = self.fork_dir(up_dir) if up_dir else ""
                    self.base.put(fork, entry, up_dir + "/")
                    self.theirs.put(fork, entry, up_dir + "/")
                else:
                    changed.append((up_dir, cut, tip))
                    if tip is None:
                        self.removed_dirs.append(up_dir)
            where = {oid: f"directory {d or '/'} at the {side}" for d, c, t in changed
                     for oid, side in ((t, "tip"), (c, "cutoff")) if oid is not None}
            oids = sorted(where)
            with reading(UPSTREAM):
                found = self.cat.trees(oids, paths=[where[oid] for oid in oids])
            listings = dict(zip(oids, found, strict=True))
            next_level: list[tuple[str, str | None, str | None]] = []
            files: list[tuple[str, TreeEntry | None, TreeEntry | None]] = []
            for up_dir, cut, tip in changed:
                cut_entries = {e.name: e for e in listings[cut]} if cut else {}
                tip_entries = {e.name: e for e in listings[tip]} if tip else {}
                for name in sorted(cut_entries.keys() | tip_entries.keys()):
                    c = cut_entries.get(name)
                    t = tip_entries.get(name)
                    path = f"{up_dir}/{name}" if up_dir else name
                    c_tree = c.oid if c is not None and c.is_tree else None
                    t_tree = t.oid if t is not None and t.is_tree else None
                    if c_tree or t_tree:
                        next_level.append((path, c_tree, t_tree))
                    c_file = c if c is not None and not c.is_tree else None
                    t_file = t if t is not None and not t.is_tree else None
                    if c_file is not None or t_file is not None:
                        files.append((path, c_file, t_file))
            self.ours.prefetch(self.fork_path(path) for path, c, t in files
                               if c is not None and t is not None and c == t)
            for path, c_file, t_file in files:
                self._file(path, c_file, t_file)
            self.visited += files
            level = next_level

    def _file(self, path: str, c: TreeEntry | None, t: TreeEntry | None) -> None:
        fork = self.fork_path(path)
        unchanged = c is not None and t is not None and c.oid == t.oid and c.mode == t.mode
        if unchanged:
            assert c is not None
            # Translating an unchanged file only matters where the fork no longer has it
            # (renamed or deleted there): then rename detection compares its content.
            ours = self.ours.get(fork)
            translate = ours is None or ours.is_tree
            entry = self._entry(c, path, translate)
            self.base.put(fork, entry, path)
            self.theirs.put(fork, entry, path)
            return
        if c is not None:
            self.base.put(fork, self._entry(c, path, True), path)
        if t is not None:
            self.theirs.put(fork, self._entry(t, path, True), path)

    def _entry(self, e: TreeEntry, path: str, translate: bool) -> Entry:
        if not translate or e.mode == MODE_GITLINK or self.tr.is_excluded(path):
            return Entry(e.mode, e.oid)
        self.pending[(e.oid, path)] = None
        return Entry(e.mode, f"pending:{e.oid}:{path}")

    def resolve_pending(self) -> dict[tuple[str, str], str]:
        """Translate every pending blob: one read pass, then one write for those that changed."""
        result: dict[tuple[str, str], str] = {}
        to_write: list[tuple[tuple[str, str], bytes]] = []
        keys = list(self.pending)
        with reading(UPSTREAM, kind="blob"):
            blobs = self.cat.read_many([oid for oid, _ in keys],
                                       paths=[path for _, path in keys])
        for key, (_, data) in zip(keys, blobs, strict=True):
            oid, path = key
            # A symlink's target is its blob, translated like any other content.
            out = self.tr.blob(data, path)
            if out == data:
                result[key] = oid  # nothing to translate: keep the upstream object
            else:
                to_write.append((key, out))
        oids = self.git.hash_blobs([data for _, data in to_write])
        for (key, _), new_oid in zip(to_write, oids, strict=True):
            result[key] = new_oid
        return result


def start_upstream_changes(git: Git, cutoff: str, tip: str) -> Background:
    """What the window changed upstream, with git's rename detection (in the background)."""
    return git.start("diff-tree", "-r", "-z", "-M", "--no-commit-id", cutoff, tip)


def parse_upstream_changes(out: bytes) -> list[UpstreamChange]:
    fields = list(iter_z(out))
    changes: list[UpstreamChange] = []
    i = 0
    while i < len(fields):
        meta = fields[i].lstrip(":").split()
        old_mode, new_mode, old_oid, new_oid, status = meta[0], meta[1], meta[2], meta[3], meta[4]
        kind = status[0]
        if kind in "RC":
            old_path, new_path = fields[i + 1], fields[i + 2]
            i += 3
        else:
            old_path = new_path = fields[i + 1]
            i += 2
        old = None if kind == "A" else Entry(old_mode, old_oid)
        new = None if kind == "D" else Entry(new_mode, new_oid)
        changes.append(UpstreamChange(
            kind, None if kind == "A" else old_path, None if kind == "D" else new_path, old, new))
    return changes


def commit_tree_oid(cat: CatFile, commit: str, *, repo: str | None = None,
                    what: str | None = None) -> str:
    """The tree of a commit, read through the running cat-file (no extra process)."""
    with reading(repo, what, kind="commit"):
        kind, data = cat.read(commit)
    if kind != "commit" or not data.startswith(b"tree "):
        raise ForksyncError(f"{commit[:12]} is not a commit")
    return data[5:data.index(b"\n")].decode()


def merge(work: Git, cat: CatFile, writer: TreeWriter, ours_tree: str, cutoff: str, tip: str,
          translator: Translator, progress: Callable[[str], None] | None = None) -> MergeOutcome:
    """Translate the window's trees and merge them into ours, exactly as merge-ort does."""
    say = progress or (lambda _msg: None)
    changes_job = start_upstream_changes(work, cutoff, tip)
    try:
        cutoff_tree = commit_tree_oid(cat, cutoff, repo=UPSTREAM, what="the cutoff")
        tip_tree = commit_tree_oid(cat, tip, repo=UPSTREAM, what="the tip")
        say("translating the window's trees")
        ours = TreeIndex(cat, ours_tree, repo=FORK, at=" on fork main")
        tt = TreeTranslator(work, cat, translator, ours)
        tt.walk(cutoff_tree, tip_tree)
        translated = tt.resolve_pending()

        def finish(side: _Side) -> str:
            entries = {
                path: Entry(e.mode, translated[_pending_key(e.oid)])
                if e.oid.startswith("pending:") else e
                for path, e in side.entries.items()
            }
            return build_tree(cat, writer, entries)

        base_tree = finish(tt.base)
        theirs_tree = finish(tt.theirs)
        writer.flush()
        say("merging with git merge-tree")
        result = merge_trees(work, cat, writer, ours_tree, base_tree, theirs_tree,
                             base_label=f"{BASE_LABEL_PREFIX}{cutoff[:12]}")
        with reading(UPSTREAM, f"the history from {cutoff[:12]} to {tip[:12]}"):
            changes = parse_upstream_changes(changes_job.output())
    finally:
        changes_job.stop()
    return MergeOutcome(result.tree, base_tree, theirs_tree, ours_tree, result.conflicts,
                        result.messages, changes, tt.path_map, translated, result.marker_sizes)


def _pending_key(marker: str) -> tuple[str, str]:
    _, oid, path = marker.split(":", 2)
    return oid, path


__all__ = [
    "CONFLICT_STYLE",
    "OURS_REF",
    "THEIRS_REF",
    "Entry",
    "MergeMessage",
    "MergeOutcome",
    "TranslationCollision",
    "TreeIndex",
    "build_tree",
    "commit_tree_oid",
    "edit_tree",
    "merge",
]
