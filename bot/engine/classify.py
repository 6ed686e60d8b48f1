"""From a merge outcome to statuses and review items: policies, hunks, attribution, flags."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from bot.engine.config import Config
from bot.engine.git import MODE_GITLINK, MODE_SYMLINK, Background, CatFile, Git, TreeWriter
from bot.engine.markers import MARKER_SIZE, find_marker_regions, split_lines
from bot.engine.merge import Entry, MergeOutcome, TreeIndex, edit_tree
from bot.engine.model import FileResult, ItemKind, ReviewItem, Status, Tier, WindowEntry
from bot.engine.suggest import propose
from bot.engine.translate import Translator

_BINARY_SNIFF = 8000


def is_binary(data: bytes) -> bool:
    """git's own rule: a NUL in the first 8000 bytes."""
    return b"\0" in data[:_BINARY_SNIFF]


@dataclass
class Classified:
    files: list[FileResult]
    merged_tree: str  # after path policies


@dataclass
class _Path:
    fork: str
    upstream: str
    change: str  # A D M T R, or "" for a conflict the window did not name
    fork_old: str | None = None
    upstream_old: str | None = None
    items: list[ReviewItem] = field(default_factory=list)


class Classifier:
    def __init__(self, work: Git, cat: CatFile, outcome: MergeOutcome, config: Config,
                 translator: Translator, window: list[WindowEntry], cutoff: str, tip: str) -> None:
        self.work = work
        self.cat = cat
        self.o = outcome
        self.config = config
        self.tr = translator
        self.window = window
        self.cutoff = cutoff
        self.tip = tip
        self.ours = TreeIndex(cat, outcome.ours_tree)
        self.base = TreeIndex(cat, outcome.base_tree)
        self.theirs = TreeIndex(cat, outcome.theirs_tree)
        self.raw = TreeIndex(cat, outcome.merged_tree)

    def fork_path(self, upstream_path: str) -> str:
        return self.o.path_map.get(upstream_path) or self.tr.path(upstream_path)

    def _entry(self, index: TreeIndex, path: str) -> Entry | None:
        e = index.get(path)
        return Entry(e.mode, e.oid) if e is not None and not e.is_tree else None

    def paths(self) -> list[_Path]:
        seen: dict[str, _Path] = {}
        for ch in self.o.changes:
            up = ch.new_path or ch.old_path or ""
            fork = self.fork_path(up)
            p = _Path(fork, up, ch.status[0])
            if ch.status[0] == "R" and ch.old_path:
                p.fork_old = self.fork_path(ch.old_path)
                p.upstream_old = ch.old_path
            seen.setdefault(fork, p)
        for path in self.o.conflicts:
            if path not in seen and not any(p.fork_old == path for p in seen.values()):
                seen[path] = _Path(path, path, "")
        return sorted(seen.values(), key=lambda p: p.fork)

    def classify(self, writer: TreeWriter) -> Classified:
        paths = self.paths()
        # The files that will surely have items: their history is read while we work.
        likely = sorted({p.upstream for p in paths if p.fork in self.o.conflicts
                         or (p.fork_old is not None and p.fork_old in self.o.conflicts)
                         or self._is_manual(p.fork)})
        history = self._start_history(likely)
        wanted = [p.fork for p in paths] + [p.fork_old for p in paths if p.fork_old]
        for index in (self.ours, self.base, self.theirs, self.raw):
            index.prefetch(wanted)
        edits: dict[str, Entry | None] = {}
        results: list[FileResult] = []
        for p in paths:
            policy = self.config.policy_for(p.fork)
            conflicted = p.fork in self.o.conflicts or (
                p.fork_old is not None and p.fork_old in self.o.conflicts)
            if policy is not None:
                results.append(self._apply_policy(p, policy.action, policy.paths, conflicted,
                                                  edits))
                continue
            results.append(self._merged(p, conflicted))
        tree = edit_tree(self.cat, writer, self.o.merged_tree, edits)
        writer.flush()
        final = TreeIndex(self.cat, tree)
        for r in results:
            if r.status is Status.CONFLICT and not r.review_items:
                r.review_items = self._conflict_items(r, final)
        if self.config.flags:
            self._flag_items(results, final)
        self._attribute(results, history, set(likely))
        n = 0
        for r in results:
            for item in r.review_items:
                n += 1
                item.id = f"Q{n}"
        return Classified(results, tree)

    def _apply_policy(self, p: _Path, action: str, globs: Iterable[str], conflicted: bool,
                      edits: dict[str, Entry | None]) -> FileResult:
        rule = f"policy `{action}` ({', '.join(globs)})"
        raw = self._entry(self.raw, p.fork)
        ours = self._entry(self.ours, p.fork)
        want = self._entry(self.theirs, p.fork) if action == "theirs" else ours
        if want != raw or conflicted:
            edits[p.fork] = want
        if p.fork_old and self._entry(self.raw, p.fork_old) != self._entry(self.ours, p.fork_old) \
                and action != "theirs":
            edits[p.fork_old] = self._entry(self.ours, p.fork_old)
        if action == "manual":
            diff = self._translated_diff(p)
            item = ReviewItem(
                id="", kind=ItemKind.MANUAL, path=p.fork, upstream_path=p.upstream,
                tier=Tier.DECIDE,
                reason=f"{rule}: this file was rewritten for the fork, so it is never merged "
                       "textually; port the upstream change below by hand",
                theirs=diff, question="Port upstream's change to this file by hand, then "
                                      "answer `done` (or `skip` to leave it out).",
                choices=["done", "skip"],
            )
            return FileResult(p.fork, p.upstream, Status.CONFLICT, [item], action,
                              "manual policy: port by hand")
        if action == "theirs":
            status = self._status(p, want, ours)
            items = []
            if conflicted or (want != raw):
                items.append(ReviewItem(
                    id="", kind=ItemKind.POLICY, path=p.fork, upstream_path=p.upstream,
                    tier=Tier.SETTLED,
                    reason=f"{rule}: took upstream's version"
                           + (" over a conflict" if conflicted else ""),
                ))
            return FileResult(p.fork, p.upstream, status, items, action, f"{rule}")
        items = []
        if action == "ours" and (conflicted or raw != ours):
            items.append(ReviewItem(
                id="", kind=ItemKind.POLICY, path=p.fork, upstream_path=p.upstream,
                tier=Tier.SETTLED,
                reason=f"{rule}: kept the fork's version; upstream's change is not applied"
                       + (" (it conflicted)" if conflicted else ""),
            ))
        return FileResult(p.fork, p.upstream, Status.SKIPPED, items, action, rule)

    def _status(self, p: _Path, result: Entry | None, ours: Entry | None) -> Status:
        if p.change == "R":
            return Status.UNCHANGED if result == ours and result is not None else Status.RENAMED
        if p.change == "A" and result is not None and ours is None:
            return Status.NEW
        if p.change == "D":
            if ours is None:
                return Status.UNCHANGED
            if result is None:
                return Status.DELETED
        if result == ours:
            return Status.UNCHANGED
        return Status.CLEAN

    def _merged(self, p: _Path, conflicted: bool) -> FileResult:
        if conflicted:
            kinds = self._message_kinds(p)
            return FileResult(p.fork, p.upstream, Status.CONFLICT, [],
                              note="; ".join(kinds) or "CONFLICT")
        result = self._entry(self.raw, p.fork)
        ours = self._entry(self.ours, p.fork)
        status = self._status(p, result, ours)
        note = ""
        if p.change == "R" and p.fork_old:
            note = f"renamed from {p.fork_old}"
        return FileResult(p.fork, p.upstream, status, [], note=note)

    def _message_kinds(self, p: _Path) -> list[str]:
        names = {p.fork, p.fork_old}
        return sorted({m.kind for m in self.o.messages
                       if m.kind.startswith("CONFLICT") and names & set(m.paths)})

    def _messages_for(self, path: str) -> list[str]:
        return [m.text for m in self.o.messages
                if m.kind.startswith("CONFLICT") and path in m.paths]

    def _read_text(self, entry: Entry | None) -> str | None:
        if entry is None or entry.mode in (MODE_GITLINK, MODE_SYMLINK):
            return None
        _, data = self.cat.read(entry.oid)
        return _decode(data)

    def _conflict_items(self, r: FileResult, final: TreeIndex) -> list[ReviewItem]:
        entry = self._entry(final, r.path)
        text = self._read_text(entry)
        r.marker_size = self.o.marker_sizes.get(r.path, MARKER_SIZE)
        regions = find_marker_regions(text, r.marker_size) if text else []
        if not regions:
            r.binary = entry is not None and text is None and entry.mode != MODE_GITLINK
            messages = self._messages_for(r.path) or [r.note or "CONFLICT"]
            return [ReviewItem(
                id="", kind=ItemKind.FILE, path=r.path, upstream_path=r.upstream_path,
                tier=Tier.DECIDE, reason=" ".join(messages),
                question="git could not merge this file line by line. Keep ours, take "
                         "upstream's (theirs), or fix it by hand?",
                choices=["ours", "theirs"],
                sides={"ours": _entry_json(self._entry(self.ours, r.path)),
                       "theirs": _entry_json(self._entry(self.theirs, r.path))},
            )]
        items = []
        for region in regions:
            base = region.base or ""
            prop = propose(region.ours, base, region.theirs)
            items.append(ReviewItem(
                id="", kind=ItemKind.CONFLICT, path=r.path, upstream_path=r.upstream_path,
                tier=prop.tier, reason=prop.reason, ours=region.ours, base=base,
                theirs=region.theirs, start_line=region.start_line, end_line=region.end_line,
                suggestion=prop.suggestion, question=prop.question, choices=list(prop.choices),
            ))
        return items

    def _translated_diff(self, p: _Path) -> str:
        old = self._read_text(self._entry(self.base, p.fork_old or p.fork)) or ""
        new = self._read_text(self._entry(self.theirs, p.fork)) or ""
        return "".join(difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True),
            fromfile=f"a/{p.fork_old or p.fork}", tofile=f"b/{p.fork}"))

    def _flag_items(self, results: list[FileResult], final: TreeIndex) -> None:
        by_path = {r.upstream_path: r for r in results}
        changes = [ch for ch in self.o.changes if ch.new is not None and ch.new_path is not None
                   and ch.new.mode not in (MODE_GITLINK, MODE_SYMLINK)
                   and by_path.get(ch.new_path) is not None
                   and by_path[ch.new_path].status is not Status.SKIPPED]
        oids = sorted({e.oid for ch in changes for e in (ch.old, ch.new)
                       if e is not None and e.mode not in (MODE_GITLINK, MODE_SYMLINK)})
        blobs = {oid: _decode(data) for oid, (_, data) in
                 zip(oids, self.cat.read_many(oids), strict=True)}
        for ch in changes:
            assert ch.new is not None and ch.new_path is not None
            new = blobs.get(ch.new.oid)
            # Most files match no flag at all: one search per flag settles that cheaply.
            if not new or not any(flag.matches(new) for flag in self.config.flags):
                continue
            r = by_path[ch.new_path]
            old = (blobs.get(ch.old.oid) if ch.old is not None else None) or ""
            added = _added_lines(old, new)
            if not added:
                continue
            merged = self._read_text(self._entry(final, r.path)) or ""
            merged_lines = [ln.rstrip("\n") for ln in split_lines(merged)]
            covered = [(i.start_line or 0, i.end_line or 0) for i in r.review_items]
            for line in added:
                for flag in self.config.flags:
                    if not flag.matches(line):
                        continue
                    anchor = _find_line(merged_lines, self.tr.text(line, ch.new_path).strip())
                    if anchor is not None and any(a <= anchor <= b for a, b in covered):
                        anchor = None  # the conflict comment already covers this line
                    r.review_items.append(ReviewItem(
                        id="", kind=ItemKind.FLAG, path=r.path, upstream_path=r.upstream_path,
                        tier=Tier.DECIDE, reason=f"flag `{flag.pattern}`: {flag.say}",
                        theirs=line.rstrip("\n") + "\n", start_line=anchor, end_line=anchor,
                        question=f"Upstream added `{line.strip()}`: {flag.say}. Keep, adapt "
                                 "or drop it?",
                        choices=["keep", "drop"],
                    ))
                    break

    def _translate_lines(self, lines: set[str], upstream_path: str) -> set[str]:
        """Translate many lines in one scan (a newline bounds words like a line's ends do)."""
        ordered = sorted(lines)
        out = self.tr.text("\n".join(ordered), upstream_path).split("\n")
        if len(out) != len(ordered):  # a rule spanned a newline: fall back to line by line
            out = [self.tr.text(line, upstream_path) for line in ordered]
        return {line.strip() for line in out}

    def _is_manual(self, fork_path: str) -> bool:
        policy = self.config.policy_for(fork_path)
        return policy is not None and policy.action == "manual"

    def _start_history(self, upstream_paths: list[str]) -> Background | None:
        if not upstream_paths:
            return None
        return self.work.start("log", "-p", "--first-parent", "--no-renames", "-U0",
                               "--format=%x1e%H", f"{self.cutoff}..{self.tip}", "--",
                               *upstream_paths)

    def _attribute(self, results: list[FileResult], history: Background | None,
                   started: set[str]) -> None:
        """Which window PRs changed the lines of each item: `git log -p` of their files."""
        out = history.output().decode("utf-8", "replace") if history is not None else ""
        wanted = {r.upstream_path: r for r in results if r.review_items}
        if not wanted:
            return
        missing = sorted(set(wanted) - started)  # e.g. flags on files that merged cleanly
        if missing:
            extra = self._start_history(missing)
            assert extra is not None
            out += extra.output().decode("utf-8", "replace")
        numbers = {e.sha: e.number for e in self.window}
        touched: dict[str, list[tuple[int | None, set[str], set[str]]]] = {}
        for record in out.split("\x1e")[1:]:
            sha, _, patch = record.partition("\n")
            for path, added, removed in _parse_patch(patch):
                touched.setdefault(path, []).append((numbers.get(sha.strip()), added, removed))
        for up, r in wanted.items():
            commits = touched.get(up, [])
            translated = [(n, self._translate_lines(added, up), self._translate_lines(removed, up))
                          for n, added, removed in commits]
            for item in r.review_items:
                theirs = {ln.strip() for ln in item.theirs.splitlines() if ln.strip()}
                base = {ln.strip() for ln in item.base.splitlines() if ln.strip()}
                prs: list[int] = []
                for number, added_t, removed_t in translated:
                    if number is None or number in prs:
                        continue
                    hit = (added_t & theirs) or (removed_t & base)
                    if hit or item.kind in (ItemKind.FILE, ItemKind.MANUAL, ItemKind.POLICY):
                        prs.append(number)
                if not prs:  # nothing matched line by line: every PR that touched the file
                    prs = sorted({n for n, _, _ in commits if n is not None})
                item.prs = sorted(prs)


def _entry_json(entry: Entry | None) -> dict[str, str] | None:
    return {"mode": entry.mode, "oid": entry.oid} if entry is not None else None


def _decode(data: bytes) -> str | None:
    if is_binary(data):
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _added_lines(old: str, new: str) -> list[str]:
    new_lines = new.splitlines(keepends=True)
    sm = difflib.SequenceMatcher(a=old.splitlines(keepends=True), b=new_lines, autojunk=False)
    out: list[str] = []
    for tag, _i1, _i2, j1, j2 in sm.get_opcodes():
        if tag in ("insert", "replace"):
            out.extend(new_lines[j1:j2])
    return out


def _find_line(lines: list[str], needle: str) -> int | None:
    if not needle:
        return None
    for i, line in enumerate(lines):
        if line.strip() == needle:
            return i + 1
    return None


_DIFF_FILE = re.compile(r"^diff --git a/(.*) b/(.*)$")


def _parse_patch(patch: str) -> list[tuple[str, set[str], set[str]]]:
    files: list[tuple[str, set[str], set[str]]] = []
    current: tuple[str, set[str], set[str]] | None = None
    for line in patch.splitlines():
        m = _DIFF_FILE.match(line)
        if m:
            current = (m.group(2), set(), set())
            files.append(current)
            continue
        if current is None or line.startswith(("+++", "---")):
            continue
        if line.startswith("+"):
            current[1].add(line[1:])
        elif line.startswith("-"):
            current[2].add(line[1:])
    return files
