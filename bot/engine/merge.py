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

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from bot.engine.git import (
    MODE_GITLINK,
    MODE_TREE,
    SYNTHETIC_DATE,
    Background,
    CatFile,
    Git,
    TreeEntry,
    TreeWriter,
    iter_z,
)
from bot.engine.translate import Translator
from bot.errors import ForksyncError

OURS_REF = "ours"
THEIRS_REF = "theirs"
CONFLICT_STYLE = "diff3"


class TranslationCollision(ForksyncError):
    """Two upstream paths translate to the same fork path: the config must change."""

    exit_code = 2


@dataclass(frozen=True)
class Entry:
    mode: str
    oid: str


@dataclass(frozen=True)
class UpstreamChange:
    """One path the window changed upstream (``git diff-tree -M`` between cutoff and tip)."""

    status: str  # A, D, M, T, R
    old_path: str | None
    new_path: str | None
    old: Entry | None
    new: Entry | None


@dataclass(frozen=True)
class MergeMessage:
    paths: tuple[str, ...]
    kind: str  # e.g. "CONFLICT (content)", "Auto-merging", "CONFLICT (modify/delete)"
    text: str


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


class TreeIndex:
    """Path lookups in one tree, reading only the directories on the way."""

    def __init__(self, cat: CatFile, root: str) -> None:
        self._cat = cat
        self._dirs: dict[str, dict[str, TreeEntry]] = {}
        self._root = root

    def dir(self, path: str) -> dict[str, TreeEntry] | None:
        if path in self._dirs:
            return self._dirs[path]
        if not path:
            oid = self._root
        else:
            parent, _, name = path.rpartition("/")
            entries = self.dir(parent)
            entry = entries.get(name) if entries else None
            if entry is None or not entry.is_tree:
                return None
            oid = entry.oid
        listing = {e.name: e for e in self._cat.tree(oid)}
        self._dirs[path] = listing
        return listing

    def prefetch(self, paths: Iterable[str]) -> None:
        """Load the directories of many paths, one round trip per depth."""
        wanted: set[str] = set()
        for path in paths:
            parent = path.rpartition("/")[0]
            while parent not in wanted and parent not in self._dirs:
                wanted.add(parent)
                if not parent:
                    break
                parent = parent.rpartition("/")[0]
        by_depth = sorted(wanted, key=lambda d: d.count("/") + (1 if d else 0))
        depth_groups: dict[int, list[str]] = {}
        for d in by_depth:
            depth_groups.setdefault(d.count("/") + (1 if d else 0), []).append(d)
        for depth in sorted(depth_groups):
            todo: list[tuple[str, str]] = []
            for d in depth_groups[depth]:
                if not d:
                    todo.append((d, self._root))
                    continue
                parent, _, name = d.rpartition("/")
                listing = self._dirs.get(parent)
                entry = listing.get(name) if listing else None
                if entry is None or not entry.is_tree:
                    self._dirs[d] = {}
                    continue
                todo.append((d, entry.oid))
            for (d, _), entries in zip(todo, self._cat.trees([oid for _, oid in todo]),
                                       strict=True):
                self._dirs[d] = {e.name: e for e in entries}

    def get(self, path: str) -> TreeEntry | None:
        parent, _, name = path.rpartition("/")
        entries = self.dir(parent)
        return entries.get(name) if entries else None


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
            oids = sorted({oid for _, c, t in changed for oid in (c, t) if oid is not None})
            listings = dict(zip(oids, self.cat.trees(oids), strict=True))
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
        blobs = self.cat.read_many([oid for oid, _ in keys])
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


def build_tree(cat: CatFile, writer: TreeWriter, entries: dict[str, Entry]) -> str:
    """Write a nested tree from ``fork path -> entry`` (entries may be whole subtrees)."""
    root: dict[str, object] = {}
    for path, entry in entries.items():
        if not path:  # an unchanged root: nothing else can be listed
            return entry.oid
        parts = path.split("/")
        node = root
        for part in parts[:-1]:
            child = node.get(part)
            if isinstance(child, Entry):
                child = _expand(cat, child) if child.mode == MODE_TREE else {}
                node[part] = child
            elif child is None:
                child = {}
                node[part] = child
            assert isinstance(child, dict)
            node = child
        leaf = parts[-1]
        existing = node.get(leaf)
        if isinstance(existing, dict) and entry.mode == MODE_TREE:
            for name, sub in _expand(cat, entry).items():
                existing.setdefault(name, sub)
        else:
            node[leaf] = entry
    return _write(writer, root)


def _expand(cat: CatFile, entry: Entry) -> dict[str, object]:
    return {e.name: Entry(e.mode, e.oid) for e in cat.tree(entry.oid)}


def _write(writer: TreeWriter, node: dict[str, object]) -> str:
    out: list[TreeEntry] = []
    for name, child in node.items():
        if isinstance(child, dict):
            out.append(TreeEntry(MODE_TREE, _write(writer, child), name))
        else:
            assert isinstance(child, Entry)
            out.append(TreeEntry(child.mode, child.oid, name))
    return writer.write(out)


def edit_tree(cat: CatFile, writer: TreeWriter, root: str,
              edits: dict[str, Entry | None]) -> str:
    """``root`` with some paths replaced (or removed, for None); reads only their directories."""
    if not edits:
        return root
    by_dir: dict[str, dict[str, Entry | None]] = {}
    for path, entry in edits.items():
        parent, _, name = path.rpartition("/")
        by_dir.setdefault(parent, {})[name] = entry

    def rewrite(dir_path: str, oid: str | None) -> str | None:
        listing = {e.name: Entry(e.mode, e.oid) for e in cat.tree(oid)} if oid else {}
        for name, entry in by_dir.get(dir_path, {}).items():
            if entry is None:
                listing.pop(name, None)
            else:
                listing[name] = entry
        prefix = dir_path + "/" if dir_path else ""
        subdirs = {d[len(prefix):].split("/", 1)[0] for d in by_dir
                   if d.startswith(prefix) and d != dir_path}
        for sub in subdirs:
            current = listing.get(sub)
            new = rewrite(prefix + sub, current.oid if current and current.mode == MODE_TREE
                          else None)
            if new is None:
                listing.pop(sub, None)
            else:
                listing[sub] = Entry(MODE_TREE, new)
        if not listing and dir_path:
            return None
        return writer.write(TreeEntry(e.mode, e.oid, n) for n, e in listing.items())

    result = rewrite("", root)
    assert result is not None
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


def run_merge(work: Git, ours_tree: str, base_tree: str, theirs_tree: str, *,
              date: str = SYNTHETIC_DATE) -> tuple[str, dict[str, list[tuple[str, str, int]]],
                                                      list[MergeMessage]]:
    """Synthetic commits whose merge base is base', then ``git merge-tree --write-tree``."""
    base = work.commit_tree(base_tree, [], "forksync: base' = translate(upstream@cutoff)",
                            date=date)
    ours = work.commit_tree(ours_tree, [base], "forksync: ours = fork main", date=date)
    theirs = work.commit_tree(theirs_tree, [base], "forksync: theirs' = translate(upstream@tip)",
                              date=date)
    work.run("update-ref", "--stdin",
             input=f"update refs/heads/{OURS_REF} {ours}\nupdate refs/heads/{THEIRS_REF} {theirs}\n"
             .encode())
    out = work.run("-c", f"merge.conflictStyle={CONFLICT_STYLE}", "merge-tree", "--write-tree",
                   "-z", "--messages", OURS_REF, THEIRS_REF, ok_codes=(0, 1))
    head, _, info = out.partition(b"\0\0")
    parts = head.split(b"\0")
    tree = parts[0].decode()
    conflicts: dict[str, list[tuple[str, str, int]]] = {}
    for rec in parts[1:]:
        if not rec:
            continue
        meta, _, path_b = rec.partition(b"\t")
        mode, oid, stage = meta.decode().split()
        conflicts.setdefault(path_b.decode("utf-8", "surrogateescape"), []).append(
            (mode, oid, int(stage)))
    messages: list[MergeMessage] = []
    fields = info.split(b"\0")
    i = 0
    while i < len(fields):
        if not fields[i]:
            i += 1
            continue
        try:
            count = int(fields[i])
        except ValueError:
            break
        paths = tuple(f.decode("utf-8", "surrogateescape") for f in fields[i + 1:i + 1 + count])
        kind = fields[i + 1 + count].decode("utf-8", "replace")
        text = fields[i + 2 + count].decode("utf-8", "replace").strip()
        messages.append(MergeMessage(paths, kind, text))
        i += 3 + count
    return tree, conflicts, messages


def commit_tree_oid(cat: CatFile, commit: str) -> str:
    """The tree of a commit, read through the running cat-file (no extra process)."""
    kind, data = cat.read(commit)
    if kind != "commit" or not data.startswith(b"tree "):
        raise ForksyncError(f"{commit[:12]} is not a commit")
    return data[5:data.index(b"\n")].decode()


def merge(work: Git, cat: CatFile, writer: TreeWriter, ours_tree: str, cutoff: str, tip: str,
          translator: Translator, progress: Callable[[str], None] | None = None) -> MergeOutcome:
    """Translate the window's trees and merge them into ours, exactly as merge-ort does."""
    say = progress or (lambda _msg: None)
    changes_job = start_upstream_changes(work, cutoff, tip)
    cutoff_tree = commit_tree_oid(cat, cutoff)
    tip_tree = commit_tree_oid(cat, tip)
    say("translating the window's trees")
    tt = TreeTranslator(work, cat, translator, TreeIndex(cat, ours_tree))
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
    tree, conflicts, messages = run_merge(work, ours_tree, base_tree, theirs_tree)
    changes = parse_upstream_changes(changes_job.output())
    return MergeOutcome(tree, base_tree, theirs_tree, ours_tree, conflicts, messages, changes,
                        tt.path_map, translated)


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
    "run_merge",
]
