"""Which blobs a plan reads, worked out from commits and trees alone.

The App's caches are partial clones: they hold every commit and tree, and only the
blobs fetched for earlier windows. This step runs first; the network side
(``bot.github.remote.fetch_blobs``) fetches its answer in one request per repository,
and only then is the window merged, so the engine never waits on one object at a
time and never touches the network. What a plan reads:

- upstream: every file the window changed, at the cutoff and at the tip (the
  translated base' and theirs' are made from them); the unchanged files of a changed
  directory that the fork no longer has at their path (rename detection compares their
  content); and every version the window's commits made of a file (the line history
  of review items and ``diff-tree -M`` read them);
- the fork: its version of each file the window changed, and its config. Where the
  fork lacks a file of a changed directory (it renamed or deleted it), merge-ort looks
  for the fork's renames, whose targets are the fork's files that base' does not have:
  those are read too.

The answer is a superset: reading a blob that was not needed costs bytes, but a blob
left out would fail the plan with a ``MissingObject``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from bot.engine.config import CONFIG_PATH
from bot.engine.git import MODE_GITLINK, CatFile, Git, TreeWriter, reading
from bot.engine.learn import LEARNED_PATH
from bot.engine.merge import FORK, UPSTREAM, TreeTranslator, commit_tree_oid
from bot.engine.translate import Translator
from bot.engine.trees import Entry, TreeIndex, build_tree


@dataclass
class Needs:
    """Blobs to have before planning, per repository: OID -> a path that holds it."""

    fork: dict[str, str] = field(default_factory=dict)
    upstream: dict[str, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.fork) + len(self.upstream)


def window_blobs(work: Git, ours: str, cutoff: str, tip: str, translator: Translator) -> Needs:
    """The blobs a plan of ``cutoff..tip`` onto fork commit ``ours`` reads (reads no blob)."""
    needs = Needs()
    history = work.start("log", "--first-parent", "--diff-merges=first-parent", "-r", "--raw",
                         "--no-renames", "--no-abbrev", "-z", "--format=", f"{cutoff}..{tip}",
                         "--")
    try:
        with CatFile(work) as cat, TreeWriter(work, cache=cat.tree_cache) as writer:
            ours_tree = commit_tree_oid(cat, ours, repo=FORK, what="the fork's head")
            cut_tree = commit_tree_oid(cat, cutoff, repo=UPSTREAM, what="the cutoff")
            tip_tree = commit_tree_oid(cat, tip, repo=UPSTREAM, what="the tip")
            mine = TreeIndex(cat, ours_tree, repo=FORK, at=" on fork main")
            tt = TreeTranslator(work, cat, translator, mine)
            tt.walk(cut_tree, tip_tree)
            fork_paths = {path: tt.fork_path(path) for path, _c, _t in tt.visited}
            mine.prefetch([*fork_paths.values(), CONFIG_PATH, LEARNED_PATH])
            for own in (CONFIG_PATH, LEARNED_PATH):
                found_own = mine.get(own)
                if found_own is not None and not found_own.is_tree:
                    needs.fork[found_own.oid] = f"{own} on fork main"
            renamed_in_fork = False
            for path, c, t in tt.visited:
                fork_path = fork_paths[path]
                found = mine.get(fork_path)
                has = found is not None and not found.is_tree
                if c is not None and not has:
                    renamed_in_fork = True  # a rename source for merge-ort on the fork's side
                if c is not None and c == t and has:
                    continue  # unchanged by the window, and the fork has it: never read
                for side, e in (("cutoff", c), ("tip", t)):
                    if e is not None and e.mode != MODE_GITLINK:
                        needs.upstream.setdefault(e.oid, f"{path} at the {side}")
                if has and found is not None and found.mode != MODE_GITLINK:
                    needs.fork.setdefault(found.oid, f"{fork_path} on fork main")
            if renamed_in_fork or tt.removed_dirs:
                # All of them are rename targets; otherwise only those in a directory that
                # upstream removed, which merge-ort may move to where it went.
                within = None if renamed_in_fork else [tt.fork_dir(d) for d in tt.removed_dirs]
                for oid, path in _added_by_fork(work, cat, writer, tt, ours_tree, within):
                    needs.fork.setdefault(oid, f"{path} on fork main")
        with reading(UPSTREAM, f"the history from {cutoff[:12]} to {tip[:12]}"):
            listing = history.output()
    finally:
        history.stop()
    for oid, path in raw_blobs(listing):
        needs.upstream.setdefault(oid, f"{path} in the window's history")
    return needs


def blobs_at(git: Git, revs: Iterable[str], paths: Iterable[str]) -> dict[str, str]:
    """The blobs of ``paths`` at each of ``revs``, from trees only: OID -> ``path at rev``.

    For readers of a branch (the rescan, the commands) and of the config; a path that
    is absent or not a file at a revision is left out.
    """
    wanted = sorted(set(paths))
    found: dict[str, str] = {}
    with CatFile(git) as cat:
        for rev in revs:
            index = TreeIndex(cat, commit_tree_oid(cat, rev, what=f"commit {rev[:12]}"))
            index.prefetch(wanted)
            for path in wanted:
                entry = index.get(path)
                if entry is not None and not entry.is_tree and entry.mode != MODE_GITLINK:
                    found.setdefault(entry.oid, f"{path} at {rev[:12]}")
    return found


def _added_by_fork(work: Git, cat: CatFile, writer: TreeWriter, tt: TreeTranslator,
                   ours_tree: str, within: list[str] | None) -> Iterable[tuple[str, str]]:
    """The fork's files at paths base' does not have (under the directories ``within``).

    base' is shaped here with upstream's own blobs (its paths are what matter), so no
    blob is read to build it.
    """
    entries = {path: Entry(e.mode, e.oid.split(":")[1]) if e.oid.startswith("pending:") else e
               for path, e in tt.base.entries.items()}
    shape = build_tree(cat, writer, entries)
    writer.flush()
    out = work.run("diff-tree", "-r", "-z", "--no-renames", "--diff-filter=A", shape, ours_tree,
                   "--", *(within or []), env={"GIT_LITERAL_PATHSPECS": "1"})
    return raw_blobs(out)


def raw_blobs(out: bytes) -> Iterable[tuple[str, str]]:
    """(OID, path) of every blob on either side of ``--raw -z`` output (no gitlinks)."""
    fields = out.split(b"\0")
    zero = {"0" * 40, "0" * 64}
    i = 0
    while i + 1 < len(fields):
        meta = fields[i].lstrip(b"\n")  # a commit's (empty) format line ends in a newline
        if not meta.startswith(b":"):
            i += 1
            continue
        old_mode, new_mode, old_oid, new_oid = meta[1:].decode().split()[:4]
        path = fields[i + 1].decode("utf-8", "surrogateescape")
        i += 2  # the path, whatever it starts with, is never read as a record
        for mode, oid in ((old_mode, old_oid), (new_mode, new_oid)):
            if oid not in zero and mode != MODE_GITLINK:
                yield oid, path


__all__ = ["Needs", "blobs_at", "raw_blobs", "window_blobs"]
