"""A sync branch's head, as data: what people resolved there, and what keeps the gate failing.

:func:`scan` is pure: the texts (and tree entries) of the plan's paths at commit 1 and at
the head go in, a :class:`ScanResult` comes out; :func:`read_head` reads those from a
local repository. The check on commit 1, the follow-up after each push and ``/sync
extend``/``refresh`` on their new head all decide here, so they cannot disagree.

- **Conflict items.** An item is resolved when no complete region with its content is
  left (matched by content, not line, because edits above a region move it) *and* no
  marker line of it stayed behind: a region whose ``<<<<<<<`` line was deleted is broken,
  not resolved (issue 11).
- **Orphan marker lines.** Every line that looks like a marker and belongs to no
  complete region (:func:`bot.engine.markers.scan`, with commit 1's text as the
  reference) keeps the check failing at its file and line, whoever put it there. Where
  the text cannot tell a marker from content, the line becomes a question ``M<n>``: a
  person answers ``content`` (it stays, and is never asked again), or removes it.
- **Whole-file items** (modify/delete, binary) are resolved only when the file is one of
  their answers: one side's version, changed from commit 1 or chosen with
  ``/sync answer``, or a version someone confirmed with ``/sync answer Qn confirm``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bot.engine.gate import Remaining, item_message
from bot.engine.git import CatFile, Git
from bot.engine.markers import (
    MARKER_SIZE,
    MarkerKind,
    MarkerRegion,
    Orphan,
    Verdict,
    bot_marker,
    find_marker_regions,
    marker_kind,
    marker_runs,
    region_marker_lines,
    split_lines,
)
from bot.engine.markers import (
    scan as scan_markers,
)
from bot.engine.model import marker_size_of
from bot.errors import GitError

RegionKey = tuple[str, str, str]
# A path's tree entry: {"mode": ..., "oid": ...}, or None where the path is absent.
TreeEntry = dict[str, str] | None
CONFIRM = "confirm"  # the answer that accepts a whole file as it is on the branch


def region_key(region: MarkerRegion) -> RegionKey:
    return (region.ours, region.base or "", region.theirs)


@dataclass
class ScanResult:
    """What a rescan found at one head of the sync branch."""

    resolved: list[str] = field(default_factory=list)  # item ids, plan order
    remaining: list[Remaining] = field(default_factory=list)
    # item id -> how: ours | theirs | suggested | edited | deleted | confirmed
    resolutions: dict[str, str] = field(default_factory=dict)
    # item id -> the text its region was resolved to at the head (conflict hunks)
    texts: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Said:
    """What people said outside the files: answers, confirmed files, lines that are content."""

    answers: Mapping[str, str]
    confirmed: Mapping[str, TreeEntry]  # item id -> the entry confirmed with `confirm`
    content: Mapping[str, Iterable[str]]  # path -> marker-like lines answered `content`


def new_span(old: str, new: str, start_line: int, end_line: int) -> tuple[int, int] | None:
    """Where lines ``start_line..end_line`` of ``old`` went in ``new`` (0-based, half-open)."""
    old_lines, new_lines = split_lines(old), split_lines(new)
    s, e = start_line - 1, end_line  # half-open, 0-based
    # Marker-like lines never anchor the alignment: a divider pasted elsewhere must not
    # be taken for the place where this region's divider stood.
    matcher = difflib.SequenceMatcher(_markerish, old_lines, new_lines, autojunk=False)
    new_start = new_end = None
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if new_start is None and (i1 <= s < i2 or i1 == i2 == s):
            new_start = j1 + (s - i1) if tag == "equal" else j1
        if i1 < e <= i2:
            new_end = j1 + (e - i1) if tag == "equal" else j2
            break
    if new_start is None or new_end is None or new_end < new_start:
        return None
    return new_start, new_end


def _markerish(line: str) -> bool:
    return bool(line) and line[0] in "<|=>" and line.lstrip(line[0])[:1] in ("", " ", "\t",
                                                                             "\r", "\n")


def resolution_text(old: str, new: str, start_line: int, end_line: int) -> str | None:
    """What now stands where lines ``start_line..end_line`` of ``old`` stood, or None if unsure."""
    span = new_span(old, new, start_line, end_line)
    if span is None:
        return None
    return "".join(split_lines(new)[span[0]:span[1]])


def classify_resolution(item: dict[str, Any], text: str | None) -> str:
    if text is None:
        return "edited"
    for name, candidate in (("suggested", item.get("suggestion")), ("theirs", item.get("theirs")),
                            ("ours", item.get("ours"))):
        if candidate is not None and _same(text, candidate):
            return name
    return "edited"


def _same(a: str, b: str) -> bool:
    return a.rstrip("\r\n") == b.rstrip("\r\n")


def scan(plan_json: dict[str, Any], commit_files: Mapping[str, str | None],
         head_files: Mapping[str, str | None], *, answers: Mapping[str, str],
         confirmed: Mapping[str, TreeEntry] | None = None,
         content: Mapping[str, Iterable[str]] | None = None,
         entries: Mapping[str, tuple[TreeEntry, TreeEntry]] | None = None,
         other_paths: Iterable[str] = ()) -> ScanResult:
    """Decide, per review item, whether it is resolved at the head, and what keeps the gate failing.

    ``commit_files``/``head_files`` map each path to its text at commit 1 and at the head
    (None: absent or not text). ``confirmed`` holds the entries confirmed with
    ``/sync answer Qn confirm``; ``content`` the marker-like lines answered ``content``,
    per path. ``entries`` maps the paths of whole-file items to their tree entries
    (commit 1, head). ``other_paths`` are files outside the plan that people changed since
    commit 1: markers there fail the check too.
    """
    said = _Said(answers, confirmed or {}, content or {})
    result = ScanResult()
    questions = _Questions()
    for f in plan_json.get("files", []):
        _scan_file(f["path"], marker_size_of(f), f.get("review_items", []), commit_files,
                   head_files, said, entries or {}, questions, result)
    planned = {f["path"] for f in plan_json.get("files", [])}
    sizes = {marker_size_of(f) for f in plan_json.get("files", [])} - {MARKER_SIZE}
    for path in sorted(set(other_paths) - planned):
        # A file people moved or copied from a conflicted one keeps that file's larger
        # markers: read it at the largest such size its lines use (7 is read too).
        text = head_files.get(path) or ""
        used = marker_runs(text.encode("utf-8", "surrogateescape")) & sizes
        _scan_file(path, max(used, default=MARKER_SIZE), [], commit_files, head_files, said,
                   {}, questions, result)
    return result


class _Questions:
    """Numbers the marker-like lines the scan cannot judge: M1, M2, ... in file order."""

    def __init__(self) -> None:
        self.count = 0

    def next(self) -> str:
        self.count += 1
        return f"M{self.count}"


def _scan_file(path: str, size: int, items: list[dict[str, Any]],
               commit_files: Mapping[str, str | None], head_files: Mapping[str, str | None],
               said: _Said, entries: Mapping[str, tuple[TreeEntry, TreeEntry]],
               questions: _Questions, result: ScanResult) -> None:
    before, after = commit_files.get(path), head_files.get(path)
    at_commit = {r.start_line: r for r in (find_marker_regions(before, size) if before else [])}
    # Regions of commit 1 that no item tracks were not written by the merge: content (a
    # documented example in a clean file), and so are their marker lines.
    tracked = {i.get("start_line") for i in items if i.get("kind") == "conflict"}
    documented = [r for start, r in at_commit.items() if start not in tracked]
    answered = set(said.content.get(path, ()))
    known = answered | {_text(before or "", n) for r in documented
                        for n in region_marker_lines(r)}
    found = (scan_markers(after, size, reference=before, content=known)
             if after and "\0" not in after else None)
    left: dict[RegionKey, list[MarkerRegion]] = {}
    for r in found.regions if found is not None else []:
        left.setdefault(region_key(r), []).append(r)
    for r in documented:  # unchanged documentation is no leftover
        if left.get(region_key(r)):
            left[region_key(r)].pop(0)
    orphans = [o for o in (found.orphans if found is not None else [])
               if not (o.verdict is Verdict.UNSURE and o.text in answered)]
    # 1. Items whose region is still whole at the head (matched by content, in order).
    gone: list[tuple[dict[str, Any], MarkerRegion | None]] = []
    resolved: list[str] = []
    for item in items:
        is_region = item.get("kind") == "conflict" and item.get("start_line") is not None
        # A Settled hunk still has its markers until someone commits its fix.
        if item.get("kind") == "policy" or (item.get("tier") == "Settled" and not is_region):
            continue
        if is_region:
            region = at_commit.get(item["start_line"])
            key = region_key(region) if region is not None else (
                item.get("ours", ""), item.get("base") or "", item.get("theirs", ""))
            if left.get(key):
                now = left[key].pop(0)
                result.remaining.append(Remaining(path, item["id"], now.start_line,
                                                  now.end_line, item_message(item)))
            else:
                gone.append((item, region))
        elif item.get("kind") == "file":
            _whole_file(item, entries.get(path), said, resolved, result)
        elif item["id"] in said.answers:
            resolved.append(item["id"])
        else:
            line = item.get("start_line")
            result.remaining.append(Remaining(path, item["id"], line, line, item_message(item),
                                              marker=False))
    # 2. Items whose region is gone: resolved, unless marker lines of it stayed behind
    #    (an orphan, or a region the plan does not know, where it stood): then broken.
    unknown = [r for regions in left.values() for r in regions]
    in_regions = {n for r in (found.regions if found is not None else [])
                  for n in range(r.start_line, r.end_line + 1)}
    owner: dict[int, str] = {}  # line of a leftover -> the item whose region it was part of
    for item, region in gone:
        span = (new_span(before, after, region.start_line, region.end_line)
                if before is not None and after is not None and region is not None else None)
        if span is None:
            if after is not None and (orphans or unknown):
                continue  # cannot tell which region they belong to: none of them ticks
            resolved.append(item["id"])
            result.resolutions[item["id"]] = "deleted" if after is None else "edited"
            continue
        # A lone divider is no orphan to the scanner (it could be a setext underline), but
        # where this region stood it is a leftover: the merge chose a marker size that no
        # line of its inputs has, so no line of that shape can be a side's content.
        orphans += _lone_dividers(after or "", span, size, orphans, in_regions)
        inside = [o.line for o in orphans if span[0] < o.line <= span[1]] + [
            r.start_line for r in unknown if span[0] < r.end_line and r.start_line <= span[1]]
        if inside:
            owner.update(dict.fromkeys(inside, item["id"]))
            continue
        resolved.append(item["id"])
        text = "".join(split_lines(after or "")[span[0]:span[1]])
        result.resolutions[item["id"]] = classify_resolution(item, text)
        result.texts[item["id"]] = text
    order = {item["id"]: n for n, item in enumerate(items)}
    result.resolved += sorted(resolved, key=order.__getitem__)
    # Markers the plan does not know (pasted, or a half-done resolution) fail too.
    for r in unknown:
        texts = tuple(_text(after or "", n) for n in region_marker_lines(r))
        if set(texts) <= answered:
            continue  # a person said these lines are content
        result.remaining.append(_region_remaining(path, r, texts, size, owner.get(r.start_line),
                                                  questions))
    for o in sorted(orphans, key=lambda o: o.line):
        result.remaining.append(_orphan_remaining(path, o, owner.get(o.line), questions))


def _lone_dividers(text: str, span: tuple[int, int], size: int, known: list[Orphan],
                   in_regions: set[int]) -> list[Orphan]:
    """``=======`` lines at ``size`` inside ``span`` (0-based, half-open) that are neither
    reported yet nor part of a complete region."""
    seen = {o.line for o in known} | in_regions
    lines = split_lines(text)
    return [Orphan(n + 1, MarkerKind.SEP, lines[n].rstrip("\r\n"), size, Verdict.MARKER,
                   "the divider of a conflict region, left where the region stood")
            for n in range(span[0], min(span[1], len(lines)))
            if n + 1 not in seen and marker_kind(lines[n], size) is MarkerKind.SEP]


def _text(text: str, line: int) -> str:
    return split_lines(text)[line - 1].rstrip("\r\n")


def _region_remaining(path: str, region: MarkerRegion, texts: tuple[str, ...], size: int,
                      owner: str | None, questions: _Questions) -> Remaining:
    """A complete region the merge did not write: surely a leftover if it has the bot's labels
    (or was part of an item's region); otherwise someone's own merge, or documentation: ask."""
    where = f"L{region.start_line}–{region.end_line}"
    if owner is not None or (bot_marker(MarkerKind.OURS, texts[0], size)
                             and bot_marker(MarkerKind.THEIRS, texts[-1], size)):
        return Remaining(path, owner, region.start_line, region.end_line,
                         "conflict markers left in the file", texts=texts)
    ask = questions.next()
    return Remaining(path, ask, region.start_line, region.end_line,
                     f"{ask}: a complete conflict region this sync did not write ({where}, "
                     f"`{texts[0]}`): a leftover of someone's merge, or content? Remove it, or "
                     f"answer `/sync answer {ask} content`.", marker=False, orphan=True,
                     texts=texts)


def _orphan_remaining(path: str, orphan: Orphan, owner: str | None,
                      questions: _Questions) -> Remaining:
    """A marker line outside any complete region: a failure, or a question where unsure."""
    shown = orphan.text if len(orphan.text) <= 80 else orphan.text[:77] + "…"
    of = f" (left from {owner}'s region)" if owner else ""
    if orphan.verdict is Verdict.MARKER:
        return Remaining(path, owner, orphan.line, orphan.line,
                         f"`{shown}` is a conflict marker line outside any complete region"
                         f"{of}: {orphan.reason}. Remove it, or restore its whole region.",
                         orphan=True, texts=(orphan.text,))
    ask = questions.next()
    return Remaining(path, ask, orphan.line, orphan.line,
                     f"{ask}: `{shown}` looks like a conflict marker{of}: {orphan.reason}. "
                     f"If it is a leftover, remove it; if it is content, answer "
                     f"`/sync answer {ask} content`.", marker=False, orphan=True,
                     texts=(orphan.text,))


def _whole_file(item: dict[str, Any], entries: tuple[TreeEntry, TreeEntry] | None,
                said: _Said, resolved: list[str], result: ScanResult) -> None:
    """Resolved only when the file is one of the item's answers (see the module docstring)."""
    item_id = item["id"]
    path = item["path"]
    answer = said.answers.get(item_id)
    sides: dict[str, TreeEntry] = item.get("sides") or {}
    how = f"`/sync answer {item_id} ours|theirs|{CONFIRM}`"
    why: str
    if entries is None:
        # No tree entries to compare (a caller that cannot read them): an answer decides.
        if answer is not None:
            resolved.append(item_id)
            result.resolutions[item_id] = answer
            return
        why = f"waiting for a decision: {how}"
    else:
        at_commit, at_head = entries
        if answer in sides:
            if same_entry(at_head, sides[answer]):
                resolved.append(item_id)
                result.resolutions[item_id] = str(answer)
                return
            now = ("deleted" if sides[answer] is None
                   else "the fork's version" if answer == "ours" else "upstream's version")
            why = (f"answered `{answer}`, but `{path}` is not {now} any more; put it back, "
                   f"or answer again ({how})")
        elif answer == CONFIRM and item_id in said.confirmed:
            if same_entry(at_head, said.confirmed[item_id]):
                resolved.append(item_id)
                result.resolutions[item_id] = "confirmed"
                return
            why = (f"`{path}` changed after it was confirmed; confirm it again or choose a "
                   f"side ({how})")
        elif not same_entry(at_head, at_commit) and any(
                same_entry(at_head, entry) for entry in sides.values()):
            side = next(name for name, entry in sides.items() if same_entry(at_head, entry))
            resolved.append(item_id)
            result.resolutions[item_id] = side
            return
        elif same_entry(at_head, at_commit):
            why = ""  # as at commit 1: the item's own question says what to choose
        else:
            why = (f"`{path}` is neither side's version; if that is the answer, confirm it "
                   f"with `/sync answer {item_id} {CONFIRM}`")
    result.remaining.append(Remaining(path, item_id, None, None,
                                      f"{item_message(item)} ({why})" if why
                                      else item_message(item), marker=False))


def same_entry(a: TreeEntry, b: TreeEntry) -> bool:
    """The same file (mode and object), or both absent."""
    if a is None or b is None:
        return a is None and b is None
    return a.get("oid") == b.get("oid") and a.get("mode") == b.get("mode")


# -- reading a head from a local repository ------------------------------------------------


Texts = dict[str, str | None]


def read_head(git_dir: str, plan_json: dict[str, Any], sync: dict[str, Any],
              head: str) -> tuple[ScanResult, Texts, Texts]:
    """Read commit 1 and ``head`` from git and decide what the head resolves (in a thread).

    Returns the result and the texts read at commit 1 and at the head.
    """
    git = Git(git_dir)
    paths = [f["path"] for f in plan_json.get("files", [])]
    planned = set(paths)
    # Files outside the plan that people changed: a marker pasted there fails the check too.
    others = [p for p in git.text("diff", "--name-only", "-z", "--no-renames", sync["commit"],
                                  head, "--").split("\0") if p and p not in planned]
    commit_files = read_blobs(git_dir, sync["commit"], [*paths, *others])
    head_files = read_blobs(git_dir, head, [*paths, *others])
    whole = sorted({i["path"] for f in plan_json.get("files", [])
                    for i in f.get("review_items", []) if i.get("kind") == "file"})
    at_commit, at_head = tree_entries(git, sync["commit"], whole), tree_entries(git, head, whole)
    result = scan(plan_json, commit_files, head_files, answers=dict(sync.get("answers", {})),
                  confirmed=dict(sync.get("confirmed", {})),
                  content=dict(sync.get("content_lines", {})),
                  entries={p: (at_commit[p], at_head[p]) for p in whole}, other_paths=others)
    return result, commit_files, head_files


def tree_entries(git: Git, rev: str, paths: list[str]) -> dict[str, TreeEntry]:
    """Each path's ``{"mode", "oid"}`` at ``rev``; None where absent (or a directory)."""
    out: dict[str, TreeEntry] = dict.fromkeys(paths)
    if not paths:
        return out
    listing = git.text("ls-tree", "-z", "--full-tree", rev, "--", *paths)
    for record in listing.split("\0"):
        meta, _, path = record.partition("\t")
        mode, kind, oid = [*meta.split(), "", "", ""][:3]
        if path in out and kind in ("blob", "commit"):
            out[path] = {"mode": mode, "oid": oid}
    return out


def read_blobs(git_dir: str, rev: str, paths: Iterable[str]) -> dict[str, str | None]:
    """Text of each path at ``rev``; None where the path is absent or not a file."""
    out: dict[str, str | None] = {}
    with CatFile(Git(git_dir)) as cat:
        for path in paths:
            try:
                kind, data = cat.read(f"{rev}:{path}")
            except GitError:
                out[path] = None
                continue
            out[path] = data.decode("utf-8", "replace") if kind == "blob" else None
    return out



__all__ = ["CONFIRM", "RegionKey", "ScanResult", "TreeEntry", "classify_resolution",
           "new_span", "read_blobs", "read_head", "region_key", "resolution_text", "same_entry",
           "scan", "tree_entries"]
