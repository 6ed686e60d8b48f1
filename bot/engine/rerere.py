"""Record the conflict resolutions people made and replay them on a new merge, like git rerere.

A conflict hunk is known by its path and its ours/base/theirs texts (line endings
normalised), hashed into a key. :func:`record` compares a file of commit 1 (with
its marker regions) against the version a person resolved and returns, for each
region that is gone, the text that replaced it. :func:`replay` puts those texts
back into a new merge result wherever the same hunk appears again. Extending the
window or refreshing onto a newer fork main therefore loses no human work.

Pure: text in, text out.
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from bot.engine.markers import (
    MARKER_SIZE,
    Verdict,
    find_marker_regions_in_lines,
    has_markers,
    split_lines,
)
from bot.engine.markers import scan as scan_markers

_KEY_VERSION = b"forksync-rerere-v1"


@dataclass(frozen=True)
class Region:
    """One diff3 marker region: ``<<<<<<<`` ours ``|||||||`` base ``=======`` theirs ``>>>>>>>``.

    ``start``/``end`` are 0-based line indexes (end exclusive) in the text it was
    parsed from; ``text`` is the whole region, marker lines included.
    """

    start: int
    end: int
    ours: str
    base: str
    theirs: str
    text: str

    def key(self, path: str = "") -> str:
        return hunk_key(path, self.ours, self.base, self.theirs)

    def side(self, name: str) -> str:
        """The text of ``ours``, ``base`` or ``theirs``."""
        if name == "ours":
            return self.ours
        if name == "theirs":
            return self.theirs
        if name == "base":
            return self.base
        raise ValueError(f"no side {name!r}")


@dataclass
class Recording:
    """What :func:`record_file` found in one file."""

    resolutions: dict[str, str] = field(default_factory=dict)  # key -> replacement text
    # key -> the region of commit 1 it resolved, so a resolution that no longer replays
    # can still be shown beside the region that replaced it
    regions: dict[str, Region] = field(default_factory=dict)
    pending: int = 0  # regions still conflicted (markers left) in the resolved file
    unplaced: int = 0  # regions gone, but the lines around them changed too much to tell how


def hunk_key(path: str, ours: str, base: str, theirs: str) -> str:
    """The identity of a conflict hunk; the same on any platform's line endings."""
    digest = hashlib.sha256(_KEY_VERSION)
    for part in (path, ours, base, theirs):
        digest.update(b"\0")
        digest.update(_normalise(part).encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def _normalise(text: str) -> str:
    return text.replace("\r\n", "\n")


def parse_regions(text: str, size: int = MARKER_SIZE) -> list[Region]:
    """Every complete marker region at ``size``, in order. Unterminated ones are plain text."""
    return _parse(split_lines(text), size)


def _parse(lines: list[str], size: int) -> list[Region]:
    # One parser for the whole project: bot.engine.markers; here only the shape changes.
    return [
        Region(start=m.start_line - 1, end=m.end_line, ours=m.ours, base=m.base or "",
               theirs=m.theirs, text="".join(lines[m.start_line - 1:m.end_line]))
        for m in find_marker_regions_in_lines(lines, size)
    ]


def rewrite(text: str, choose: Callable[[Region], str | None], *,
            size: int = MARKER_SIZE) -> tuple[str, int]:
    """Replace each region for which ``choose`` returns text; return (new text, count)."""
    lines = split_lines(text)
    out: list[str] = []
    pos = 0
    count = 0
    for region in _parse(lines, size):
        out.extend(lines[pos:region.start])
        replacement = choose(region)
        if replacement is None:
            out.extend(lines[region.start:region.end])
        else:
            out.append(replacement)
            count += 1
        pos = region.end
    out.extend(lines[pos:])
    return "".join(out), count


def take_side(text: str, side: str, *, size: int = MARKER_SIZE) -> tuple[str, int]:
    """Resolve every region of a file to its ``ours`` or ``theirs`` side."""
    return rewrite(text, lambda region: region.side(side), size=size)


def replay(new_merged_text: str, resolutions: Mapping[str, str], *,
           path: str = "", size: int = MARKER_SIZE) -> tuple[str, int]:
    """Replace every region of a new merge whose hunk has a recorded resolution.

    ``size`` is the new merge's marker size for the file; keys do not depend on it, so
    a resolution recorded at one size replays at another.
    """
    return rewrite(new_merged_text, lambda region: resolutions.get(region.key(path)),
                   size=size)


@dataclass(frozen=True)
class Hunk:
    """A region of an earlier commit 1 that people resolved, and how."""

    ours: str
    base: str
    theirs: str
    text: str  # what they replaced it with


@dataclass(frozen=True)
class Earlier:
    """People's resolution of an earlier region that a new merge changed again."""

    text: str
    how: str  # "ours", "theirs" or "edited", judged against the earlier region
    applies: bool  # the side it kept is the same in the new region: offer it again


def earlier_resolution(region: Region, hunks: Iterable[Hunk]) -> tuple[Hunk, Earlier] | None:
    """The earlier resolution of the same spot as ``region`` (same path), if one is recorded.

    The spot is recognised by the side that did not change (upstream changed it again:
    ours and base are the same; the fork changed it: theirs and base are), else by the
    closest ours and base. It *applies* again when it kept a side that is unchanged.
    """
    def score(h: Hunk) -> float:
        if h.ours == region.ours and h.base == region.base:
            return 3.0
        if h.theirs == region.theirs and h.base == region.base:
            return 2.5
        if h.ours == region.ours:
            return 2.0
        ratio = difflib.SequenceMatcher(None, h.ours + h.base, region.ours + region.base,
                                        autojunk=False).ratio()
        return ratio if ratio >= 0.6 else 0.0

    ranked = sorted(((score(h), n, h) for n, h in enumerate(hunks)), key=lambda t: (-t[0], t[1]))
    if not ranked or ranked[0][0] == 0.0:
        return None
    hunk = ranked[0][2]
    norm = _normalise
    how = ("ours" if norm(hunk.text) == norm(hunk.ours)
           else "theirs" if norm(hunk.text) == norm(hunk.theirs) else "edited")
    applies = ((how == "ours" and norm(region.ours) == norm(hunk.ours))
               or (how == "theirs" and norm(region.theirs) == norm(hunk.theirs)))
    return hunk, Earlier(hunk.text, how, applies)


def record(merged_text_with_markers: str, resolved_text: str, *,
           path: str = "", size: int = MARKER_SIZE) -> dict[str, str]:
    """The resolution of every region of commit 1's file that is gone from the resolved file."""
    return record_file(merged_text_with_markers, resolved_text, path=path,
                       size=size).resolutions


def record_file(merged_text_with_markers: str, resolved_text: str, *,
                path: str = "", size: int = MARKER_SIZE) -> Recording:
    """Like :func:`record`, and also count the regions that are pending or could not be placed.

    ``size`` is the marker size commit 1's file was merged with (the plan records it).
    """
    merged = split_lines(merged_text_with_markers)
    resolved = split_lines(resolved_text)
    regions = _parse(merged, size)
    recording = Recording()
    if not regions:
        return recording

    # A region whose exact hunk is still in the resolved file is not resolved yet.
    # Folding it into the context around it gives the alignment a strong anchor.
    still = _still_conflicted(regions, _parse(resolved, size), path)
    recording.pending = len(still)
    contexts: list[list[str]] = [[]]
    open_regions: list[Region] = []
    pos = 0
    for index, region in enumerate(regions):
        contexts[-1].extend(merged[pos:region.start])
        if index in still:
            contexts[-1].extend(merged[region.start:region.end])
        else:
            open_regions.append(region)
            contexts.append([])
        pos = region.end
    contexts[-1].extend(merged[pos:])
    if not open_regions:
        return recording

    spans = _split_by_context(contexts, resolved)
    if spans is None:
        spans = _split_by_diff(contexts, resolved)
    for region, span in zip(open_regions, spans, strict=True):
        if span is None:
            recording.unplaced += 1
            continue
        replacement = "".join(resolved[span[0]:span[1]])
        if _left_markers(replacement, size, merged_text_with_markers):
            # A half-done resolution (a marker line of the merge left in it) is no answer:
            # replayed, it would put a broken region into the next merge (issue 11).
            recording.pending += 1
            continue
        recording.resolutions[region.key(path)] = replacement
        recording.regions[region.key(path)] = region
    return recording


def _left_markers(replacement: str, size: int, merged: str) -> bool:
    """Whether ``replacement`` still holds a region, or a marker line of the merge."""
    found = scan_markers(replacement, size, reference=merged)
    return bool(found.regions) or any(o.verdict is Verdict.MARKER for o in found.orphans)


def _still_conflicted(regions: list[Region], resolved_regions: list[Region],
                      path: str) -> set[int]:
    """Indexes of ``regions`` whose hunk appears, in order, among the resolved file's regions."""
    still: set[int] = set()
    j = 0
    resolved_keys = [r.key(path) for r in resolved_regions]
    for index, region in enumerate(regions):
        key = region.key(path)
        try:
            found = resolved_keys.index(key, j)
        except ValueError:
            continue
        still.add(index)
        j = found + 1
    return still


Span = tuple[int, int] | None


def _line_key(line: str) -> str:
    return line.rstrip("\n").removesuffix("\r")


def _split_by_context(contexts: list[list[str]], resolved: list[str]) -> list[Span] | None:
    """If every context line is intact, the text between context segments is the resolutions.

    The common case: people click a suggestion or edit only inside the regions. The
    first and last segments are anchored to the ends of the file; each middle one is
    taken at its first occurrence. Returns None if the context was edited.
    """
    keys = [_line_key(line) for line in resolved]
    ctx = [[_line_key(line) for line in segment] for segment in contexts]
    first, last = ctx[0], ctx[-1]
    if len(first) + len(last) > len(keys):
        return None
    if keys[:len(first)] != first:
        return None
    limit = len(keys) - len(last)
    if keys[limit:] != last:
        return None
    spans: list[Span] = []
    pos = len(first)
    for segment in ctx[1:-1]:
        found = _find(keys, segment, pos, limit)
        if found is None:
            return None
        spans.append((pos, found))
        pos = found + len(segment)
    spans.append((pos, limit))
    # Two regions with no context between them cannot be told apart.
    for index, segment in enumerate(ctx[1:-1]):
        if not segment:
            spans[index] = spans[index + 1] = None
    return spans


def _find(keys: list[str], segment: list[str], start: int, limit: int) -> int | None:
    size = len(segment)
    if size == 0:
        return start if start <= limit else None
    for i in range(start, limit - size + 1):
        if keys[i] == segment[0] and keys[i:i + size] == segment:
            return i
    return None


def _split_by_diff(contexts: list[list[str]], resolved: list[str]) -> list[Span]:
    """When context lines changed too: place each region between its matched neighbours.

    A region is placed only if the context line just before it and just after it
    (or the start/end of the file) both survive unchanged in the resolved file.
    """
    tokens: list[object] = []
    region_at: list[int] = []  # token index of each region's sentinel
    for index, segment in enumerate(contexts):
        if index:
            region_at.append(len(tokens))
            tokens.append(("\0region", index))  # never equal to a line
        tokens.extend(_line_key(line) for line in segment)
    keys = [_line_key(line) for line in resolved]
    matcher = difflib.SequenceMatcher(None, tokens, keys, autojunk=False)
    mapped: dict[int, int] = {}
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            mapped[block.a + k] = block.b + k
    spans: list[Span] = []
    for at in region_at:
        before = -1 if at == 0 else mapped.get(at - 1)
        after = len(keys) if at == len(tokens) - 1 else mapped.get(at + 1)
        if before is None or after is None or before + 1 > after:
            spans.append(None)
        else:
            spans.append((before + 1, after))
    return spans


__all__ = ["Earlier", "Hunk", "Recording", "Region", "earlier_resolution", "has_markers",
           "hunk_key", "parse_regions", "record", "record_file", "replay", "rewrite",
           "split_lines", "take_side"]
