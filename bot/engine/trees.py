"""Reading and writing nested git trees through one cat-file and one mktree process."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from bot.engine.git import MODE_TREE, CatFile, TreeEntry, TreeWriter, reading


@dataclass(frozen=True)
class Entry:
    mode: str
    oid: str


class TreeIndex:
    """Path lookups in one tree, reading only the directories on the way."""

    def __init__(self, cat: CatFile, root: str, *, repo: str | None = None,
                 at: str = "") -> None:
        self._cat = cat
        self._dirs: dict[str, dict[str, TreeEntry]] = {}
        self._root = root
        self._repo = repo  # for the message if a tree is missing: "the fork repository"
        self._at = at  # and where in history: " on fork main"

    def _name(self, directory: str) -> str:
        return f"directory {directory or '/'}{self._at}"

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
        with reading(self._repo):
            listing = {e.name: e for e in self._cat.tree(oid, path=self._name(path))}
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
            with reading(self._repo):
                found = self._cat.trees([oid for _, oid in todo],
                                        paths=[self._name(d) for d, _ in todo])
            for (d, _), entries in zip(todo, found, strict=True):
                self._dirs[d] = {e.name: e for e in entries}

    def get(self, path: str) -> TreeEntry | None:
        parent, _, name = path.rpartition("/")
        entries = self.dir(parent)
        return entries.get(name) if entries else None


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
