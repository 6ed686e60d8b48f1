"""Reading files from the fork cache and writing the commands' commits (run in threads).

Every commit a command writes carries a ``Forksync-Command`` trailer, so a retried job
finds the commit it already made instead of making a second one.
"""

from __future__ import annotations

from collections.abc import Iterable

from bot.engine.git import CatFile, Git, TreeWriter
from bot.errors import ForksyncError

TRAILER = "Forksync-Command"


def read_bytes(git: Git, rev: str, path: str) -> bytes | None:
    proc = git.run_proc("cat-file", "blob", f"{rev}:{path}")
    return proc.stdout if proc.returncode == 0 else None


def decode(data: bytes | None) -> str | None:
    return data.decode("utf-8", "surrogateescape") if data is not None else None


def encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def read_text(git: Git, rev: str, path: str) -> str | None:
    return decode(read_bytes(git, rev, path)) if rev else None


def read_texts(git: Git, revs: list[str], path: str) -> list[str | None]:
    return [read_text(git, rev, path) for rev in revs]


def read_many(git: Git, rev: str, paths: Iterable[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    with CatFile(git) as cat:
        for path in paths:
            try:
                kind, data = cat.read(f"{rev}:{path}")
            except ForksyncError:
                out[path] = None
                continue
            out[path] = decode(data) if kind == "blob" else None
    return out


def commit_with_trailer(git: Git, head: str, tag: str) -> str | None:
    """The commit among the head's last few that carries ``Forksync-Command: tag``."""
    out = git.text("log", "-n", "20", "--format=%H%x00%B%x01", head, "--")
    for record in out.split("\x01"):
        sha, _, message = record.strip().partition("\x00")
        if f"{TRAILER}: {tag}" in message.splitlines():
            return sha
    return None


def commit_files(git: Git, parent: str, files: dict[str, str | None], message: str, *,
                 date: str | None = None, extra_parents: Iterable[str] = ()) -> str:
    """A commit on ``parent`` with some files replaced (None: deleted); modes are kept."""
    from bot.engine.merge import Entry, edit_tree

    names = [p for p, text in files.items() if text is not None]
    oids = dict(zip(names, git.hash_blobs([encode(files[p] or "") for p in names]),
                    strict=True))
    root = git.text("rev-parse", f"{parent}^{{tree}}").strip()
    edits: dict[str, Entry | None] = {}
    for path in files:
        if path not in oids:
            edits[path] = None
            continue
        listing = git.text("ls-tree", parent, "--", path).split()
        mode = listing[0] if listing and listing[0] in ("100644", "100755") else "100644"
        edits[path] = Entry(mode, oids[path])
    with CatFile(git) as cat, TreeWriter(git) as writer:
        tree = edit_tree(cat, writer, root, edits)
    return git.commit_tree(tree, [parent, *extra_parents], message, date=date)


def commit_entry(git: Git, parent: str, path: str, entry: dict[str, str] | None,
                 message: str) -> str | None:
    """A commit on ``parent`` with ``path`` set to ``entry`` (None: deleted); None if no change."""
    from bot.engine.merge import Entry, edit_tree

    root = git.text("rev-parse", f"{parent}^{{tree}}").strip()
    with CatFile(git) as cat, TreeWriter(git) as writer:
        tree = edit_tree(cat, writer, root, {
            path: Entry(entry["mode"], entry["oid"]) if entry is not None else None})
    if tree == root:
        return None
    return git.commit_tree(tree, [parent], message)


def commits_by_people(git: Git, commit: str, head: str, pushed: set[str]) -> list[str]:
    """Commits on the branch since commit 1 that the bot did not write."""
    out = git.text("rev-list", head, "--not", commit, "--").split()
    return [sha for sha in out if sha not in pushed]


__all__ = ["TRAILER", "commit_entry", "commit_files", "commit_with_trailer", "commits_by_people",
           "decode", "encode", "read_bytes", "read_many", "read_text", "read_texts"]
