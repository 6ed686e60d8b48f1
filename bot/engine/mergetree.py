"""git's own merge of ours, base' and theirs' (``git merge-tree --write-tree``), and its markers.

Synthetic commits make base' the merge base; merge-tree does the rest, exactly as
merge-ort does for developers. Two things are added on top, so the result's conflict
markers can be read back without guessing:

- **A marker size per path.** A conflicted file whose inputs hold a line git could
  take for a marker (a Markdown setext underline ``=======``, a documented
  ``<<<<<<< HEAD``) is merged again with a ``conflict-marker-size`` that no line of
  its inputs has (git's per-path attribute, given in an attributes file). The size is
  returned per path, and the plan records it, so every later reader uses the same one.
- **A base label that names something.** merge-tree labels the base section with the
  synthetic base commit, which is in neither repository; the label is rewritten to
  ``upstream@<cutoff>``.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from bot.engine.git import MODE_GITLINK, MODE_SYMLINK, SYNTHETIC_DATE, CatFile, Git, TreeWriter
from bot.engine.markers import (
    MARKER_SIZE,
    OURS_LABEL,
    THEIRS_LABEL,
    count_marker_lines,
    find_marker_regions_in_lines,
    marker_runs,
    safe_marker_size,
    split_lines,
)
from bot.engine.trees import Entry, TreeIndex, edit_tree
from bot.errors import MissingObject

OURS_REF = OURS_LABEL  # the branch names are the labels of the ours and theirs sections
THEIRS_REF = THEIRS_LABEL
CONFLICT_STYLE = "diff3"
_BINARY_SNIFF = 8000

Stages = dict[str, list[tuple[str, str, int]]]  # path -> [(mode, oid, stage)]


@dataclass(frozen=True)
class MergeMessage:
    paths: tuple[str, ...]
    kind: str  # e.g. "CONFLICT (content)", "Auto-merging", "CONFLICT (modify/delete)"
    text: str


@dataclass
class TreeMerge:
    """What merge-tree made of the three trees."""

    tree: str
    conflicts: Stages
    messages: list[MergeMessage]
    marker_sizes: dict[str, int]  # every text file merge-tree may have put markers in


def merge_trees(work: Git, cat: CatFile, writer: TreeWriter, ours_tree: str, base_tree: str,
                theirs_tree: str, *, base_label: str, date: str = SYNTHETIC_DATE) -> TreeMerge:
    """Merge with git, at marker sizes the inputs cannot be mistaken for, base labelled."""
    base = work.commit_tree(base_tree, [], "forksync: base' = translate(upstream@cutoff)",
                            date=date)
    ours = work.commit_tree(ours_tree, [base], "forksync: ours = fork main", date=date)
    theirs = work.commit_tree(theirs_tree, [base], "forksync: theirs' = translate(upstream@tip)",
                              date=date)
    work.run("update-ref", "--stdin",
             input=f"update refs/heads/{OURS_REF} {ours}\nupdate refs/heads/{THEIRS_REF} {theirs}\n"
             .encode())
    trees = {"the fork repository": ours_tree, "the upstream repository": theirs_tree,
             "the upstream repository (cutoff)": base_tree}
    tree, conflicts, messages = _merge_tree(work, None, trees)
    merged = _read_merged(cat, tree, conflicts)
    sizes = dict.fromkeys(merged, MARKER_SIZE)
    # Reading the inputs is needed only where the result has a marker line git did not
    # write (a cheap count, see _only_gits_markers); most conflicted files have none.
    doubtful = {path: conflicts[path] for path, (_, data) in merged.items()
                if not _only_gits_markers(data, base)}
    if doubtful and any(_pattern(path) != b"/" + _literal(path) for path in merged):
        # A pattern that spells whitespace as "?" may reach another path: sizes are then
        # chosen for all together (rare: a path with whitespace or a glob character).
        doubtful = {path: conflicts[path] for path in merged}
    if doubtful:
        sizes.update(marker_sizes(cat, doubtful))
        if any(size != MARKER_SIZE for size in sizes.values()):
            with _attributes_file(sizes) as attributes:
                tree, conflicts, messages = _merge_tree(work, attributes, trees)
            merged = _read_merged(cat, tree, conflicts)
    tree, sizes = _relabel(work, cat, writer, tree, merged, sizes, base, base_label)
    return TreeMerge(tree, conflicts, messages, sizes)


def _merge_tree(work: Git, attributes: str | None, trees: Mapping[str, str]
                ) -> tuple[str, Stages, list[MergeMessage]]:
    args = ["-c", f"merge.conflictStyle={CONFLICT_STYLE}"]
    if attributes is not None:
        # Read in a bare repository too, where there is no work tree .gitattributes.
        args += ["-c", f"core.attributesFile={attributes}"]
    args += ["merge-tree", "--write-tree", "-z", "--messages", OURS_REF, THEIRS_REF]
    try:
        out = work.run(*args, ok_codes=(0, 1))
    except MissingObject as exc:
        raise _located(work, exc, trees) from None
    return parse_merge_tree(out)


def parse_merge_tree(out: bytes) -> tuple[str, Stages, list[MergeMessage]]:
    """The tree, the conflicted paths with their stages, and the messages of ``-z`` output."""
    head, _, info = out.partition(b"\0\0")
    parts = head.split(b"\0")
    tree = parts[0].decode()
    conflicts: Stages = {}
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


# -- marker sizes ----------------------------------------------------------------------


def _text_conflicts(conflicts: Stages) -> dict[str, list[str]]:
    """The conflicted paths git may have written markers into, with their stages' OIDs."""
    out: dict[str, list[str]] = {}
    for path, entries in conflicts.items():
        by_stage = {stage: (mode, oid) for mode, oid, stage in entries}
        if 2 not in by_stage or 3 not in by_stage:
            continue  # one side has no version (modify/delete): git writes no markers
        if any(mode in (MODE_GITLINK, MODE_SYMLINK) for mode, _ in by_stage.values()):
            continue
        out[path] = [oid for _, oid in by_stage.values()]
    return out


def _read_merged(cat: CatFile, tree: str, conflicts: Stages) -> dict[str, tuple[Entry, bytes]]:
    """The merge result of each conflicted text file: its entry and content."""
    index = TreeIndex(cat, tree)
    paths = sorted(_text_conflicts(conflicts))
    index.prefetch(paths)
    entries = {path: Entry(e.mode, e.oid) for path in paths
               if (e := index.get(path)) is not None
               and e.mode not in (MODE_GITLINK, MODE_SYMLINK) and not e.is_tree}
    blobs = cat.read_many([e.oid for e in entries.values()], paths=list(entries))
    return {path: (entry, data) for (path, entry), (_, data)
            in zip(entries.items(), blobs, strict=True)
            if b"\0" not in data[:_BINARY_SNIFF]}


_BASE_LINE = re.compile(rb"^\|{7} ([0-9a-f]{4,64})\r?$", re.MULTILINE)


def _only_gits_markers(data: bytes, base_commit: str) -> bool:
    """Every 7-character marker line of a merge result is one git wrote: no guessing needed.

    git writes four marker lines per region, and one of them names the synthetic base
    commit, which no content can (it exists only here). So the count of marker lines
    is four times the count of those base lines exactly when no content line is one.
    """
    based = sum(1 for m in _BASE_LINE.finditer(data) if base_commit.startswith(m[1].decode()))
    return count_marker_lines(data) == 4 * based


def marker_sizes(cat: CatFile, conflicts: Stages) -> dict[str, int]:
    """Per conflicted text file: the smallest marker size no line of its three inputs has."""
    stages = _text_conflicts(conflicts)
    oids = sorted({oid for found in stages.values() for oid in found})
    where = {oid: f"a version of {path}" for path, found in stages.items() for oid in found}
    blobs = {oid: data for oid, (_, data) in
             zip(oids, cat.read_many(oids, paths=[where[oid] for oid in oids]), strict=True)}
    runs = {path: {n for oid in found for n in marker_runs(blobs[oid])}
            for path, found in stages.items()
            if not any(b"\0" in blobs[oid][:_BINARY_SNIFF] for oid in found)}
    return shared_sizes(runs)


def shared_sizes(runs: Mapping[str, set[int]]) -> dict[str, int]:
    """A marker size per path, the smallest that none of the path's marker-like lines has.

    An attributes file cannot spell whitespace in a path, so a space is written as
    ``?``, which matches any character; paths that such a pattern can reach share the
    size that suits them all, so git applies to each path the size recorded for it.
    """
    paths = sorted(runs)
    group = {path: path for path in paths}

    def root(path: str) -> str:
        while group[path] != path:
            path = group[path]
        return path

    spelled = [path for path in paths if _pattern(path) != b"/" + _literal(path)]
    for loose in spelled:
        for other in paths:
            if other != loose and _reaches(loose, other):
                group[root(other)] = root(loose)
    taken: dict[str, set[int]] = {}
    for path in paths:
        taken.setdefault(root(path), set()).update(runs[path])
    return {path: safe_marker_size(taken[root(path)]) for path in paths}


_GLOB = b"\\*?["
_SPACE = b" \t\n\r\v\f"


def _literal(path: str) -> bytes:
    return path.encode("utf-8", "surrogateescape")


def _pattern(path: str) -> bytes:
    """``path`` as a gitattributes pattern that matches it (and, for whitespace, maybe more)."""
    out = bytearray(b"/")
    for byte in _literal(path):
        if byte in _SPACE:
            out += b"?"
        elif byte in _GLOB:
            out += b"\\" + bytes([byte])
        else:
            out.append(byte)
    return bytes(out)


def _reaches(loose: str, other: str) -> bool:
    """Does the pattern of ``loose`` (with ``?`` for its whitespace) match ``other`` too?"""
    a, b = _literal(loose), _literal(other)
    return len(a) == len(b) and all(
        (x in _SPACE and y != ord("/")) or x == y for x, y in zip(a, b, strict=True))


def attributes(sizes: Mapping[str, int]) -> bytes:
    """The gitattributes lines that give each path its marker size (git's default left out)."""
    return b"".join(_pattern(path) + b" conflict-marker-size=%d\n" % size
                    for path, size in sorted(sizes.items()) if size != MARKER_SIZE)


@contextlib.contextmanager
def _attributes_file(sizes: Mapping[str, int]) -> Iterator[str]:
    # A file of our own per merge (core.attributesFile), never the shared scratch
    # repository's info/attributes: two merges there cannot disturb each other.
    fd, name = tempfile.mkstemp(prefix="forksync-attributes-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(attributes(sizes))
        yield name
    finally:
        os.unlink(name)


# -- the base label --------------------------------------------------------------------


def _relabel(work: Git, cat: CatFile, writer: TreeWriter, tree: str,
             merged: Mapping[str, tuple[Entry, bytes]], sizes: dict[str, int],
             base_commit: str, base_label: str) -> tuple[str, dict[str, int]]:
    """Label each base section ``base_label``; the sizes, as git actually wrote each file."""
    actual = dict(sizes)
    changed: dict[str, bytes] = {}
    for path, (_, data) in merged.items():
        lines = split_lines(data.decode("utf-8", "surrogateescape"))
        size = sizes.get(path, MARKER_SIZE)
        regions = find_marker_regions_in_lines(lines, size)
        if not regions and size != MARKER_SIZE:
            size = MARKER_SIZE  # git did not apply the attribute: read what it wrote
            regions = find_marker_regions_in_lines(lines, size)
            actual[path] = size
        for region in regions:
            if region.base_line is None:
                continue
            line = lines[region.base_line - 1]
            body = line.rstrip("\r\n")
            label = body[size:].strip()
            if len(label) >= 4 and base_commit.startswith(label):
                lines[region.base_line - 1] = "|" * size + " " + base_label + line[len(body):]
                changed[path] = "".join(lines).encode("utf-8", "surrogateescape")
    if not changed:
        return tree, actual
    oids = work.hash_blobs(list(changed.values()))
    edits = {path: Entry(merged[path][0].mode, oid)
             for path, oid in zip(changed, oids, strict=True)}
    return edit_tree(cat, writer, tree, dict(edits)), actual


# -- a missing object --------------------------------------------------------------------


def _located(work: Git, exc: MissingObject, trees: Mapping[str, str]) -> MissingObject:
    """The object merge-tree could not read, with the repository and path that hold it."""
    want = exc.oid.encode()
    for repo, tree in trees.items():
        # Output up to a missing tree still lists that tree's own entry (``-t``).
        proc = work.run_proc("ls-tree", "-r", "-t", "-z", tree)
        for record in proc.stdout.split(b"\0"):
            meta, _, path = record.partition(b"\t")
            fields = meta.split()
            if len(fields) == 3 and fields[2] == want:
                return exc.at(repo=repo, kind=fields[1].decode(),
                              path=path.decode("utf-8", "surrogateescape"))
    return exc


__all__ = ["CONFLICT_STYLE", "OURS_REF", "THEIRS_REF", "MergeMessage", "TreeMerge",
           "attributes", "marker_sizes", "merge_trees", "parse_merge_tree", "shared_sizes"]
