"""From a merge outcome to statuses and review items: policies, hunks, attribution, flags."""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from bot.engine import configwarn, spelling
from bot.engine.config import CONFIG_PATH, Config, Flag
from bot.engine.flags import Hit, add_flag_items, fork_use
from bot.engine.generated import MANY_REGIONS, detect, regenerate_item
from bot.engine.git import MODE_GITLINK, MODE_SYMLINK, CatFile, Git, TreeWriter
from bot.engine.itemprs import ItemPRs
from bot.engine.learn import LEARNED_PATH, Learned
from bot.engine.manual import MANUAL_NOTE, UNCHANGED_NOTE, manual_item
from bot.engine.markers import MARKER_SIZE, find_marker_regions_in_lines, split_lines
from bot.engine.merge import (
    Entry,
    MergeOutcome,
    TreeIndex,
    UpstreamChange,
    edit_tree,
)
from bot.engine.mergetalk import describe
from bot.engine.model import FileResult, ItemKind, ReviewItem, Status, Tier, WindowEntry
from bot.engine.parsecheck import check_parses
from bot.engine.refs import Refs, deletion_note, find_refs, stub_note, stub_side
from bot.engine.share import file_changes
from bot.engine.spelling import option_at
from bot.engine.suggest import propose_region, propose_whole_file
from bot.engine.text import decode
from bot.engine.translate import Translator
from bot.engine.wholefile import MOVED_RULE, moved_file, whole_file_choices, whole_file_question
from bot.engine.workflows import WORKFLOW_NOTE, WORKFLOWS_POLICY, is_workflow, workflow_item


@dataclass
class Classified:
    files: list[FileResult]
    merged_tree: str  # after path policies
    warnings: list[dict[str, object]] = field(default_factory=list)  # configwarn.py
    rule_warnings: list[dict[str, object]] = field(default_factory=list)  # the config's rules


@dataclass
class _Path:
    fork: str
    upstream: str
    change: str  # A D M T R, or "" for a conflict the window did not name
    fork_old: str | None = None
    upstream_old: str | None = None
    items: list[ReviewItem] = field(default_factory=list)
    renamed_by_merge: bool = False  # the fork has it elsewhere; rename detection found it


TWINS_SHOWN = 3  # the twins an item names; a lock file's hunk can recur hundreds of times


def mark_twins(items: list[ReviewItem]) -> None:
    """Give each conflict item that has twins (items with exactly its ours, base and
    theirs) their group, their count and a few of them, the ones in other files first.
    Linear in the items: a group is never listed whole on each of its members."""
    groups: dict[tuple[str, str, str], list[ReviewItem]] = {}
    for item in items:
        if item.kind is ItemKind.CONFLICT:
            groups.setdefault((item.ours, item.base, item.theirs), []).append(item)
    for same in groups.values():
        if len(same) < 2:
            continue
        head = same[:2 * TWINS_SHOWN + 1]
        for item in same:
            near = [o for o in head if o is not item]
            near.sort(key=lambda o: o.path == item.path)  # other files first (stable)
            item.twins = {"group": same[0].id, "count": len(same) - 1,
                          "some": [{"id": o.id, "path": o.path} for o in near[:TWINS_SHOWN]]}


class Classifier:
    def __init__(self, work: Git, cat: CatFile, outcome: MergeOutcome, config: Config,
                 translator: Translator, window: list[WindowEntry], cutoff: str, tip: str,
                 *, workflows: bool = True, learned: Learned | None = None) -> None:
        self.work = work
        # The tiers this fork's own past merges earned (`forksync learn`), if any.
        self.learned = learned
        # Whether the sync may change workflow files (the App's Workflows permission).
        self.workflows = workflows
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
        self.item_prs = ItemPRs(work, cat, outcome, window, cutoff, tip)
        self.raw = self.item_prs.raw  # one index of git's merged tree, read once
        # What commit 1 still refers to, of the paths whose items ask it (``_ref_targets``).
        self.refs: dict[str, Refs] = {}
        self._stubs: dict[str, tuple[str, str]] = {}  # add/add with a stub: its two versions
        self._gitattributes: str | bool | None = False  # False: not read yet

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
                seen[path] = self._found_by_rename(path, seen)
        return sorted(seen.values(), key=lambda p: p.fork)

    def _found_by_rename(self, path: str, seen: dict[str, _Path]) -> _Path:
        """A conflict at a path the window did not name: git matched it by rename detection.

        Its stage blobs are translated upstream blobs, which name the upstream file; the
        entry at the translated path (empty in both ours and the merge) is folded into it.
        """
        by_oid: dict[str, UpstreamChange] = {}
        for ch in self.o.changes:
            for e, up in ((ch.new, ch.new_path), (ch.old, ch.old_path)):
                if e is not None and up is not None:
                    by_oid.setdefault(self.o.translated.get((e.oid, up), e.oid), ch)
        for _mode, oid, stage in sorted(self.o.conflicts[path], key=lambda c: -c[2]):
            found = by_oid.get(oid) if stage in (1, 3) else None
            if found is None:
                continue
            ch = found
            upstream = ch.new_path or ch.old_path or path
            translated = self.fork_path(upstream)
            if translated in seen and translated not in self.o.conflicts \
                    and self.raw.get(translated) is None:
                del seen[translated]
            return _Path(path, upstream, ch.status[0],
                         upstream_old=ch.old_path if ch.status[0] == "R" else None,
                         renamed_by_merge=True)
        return _Path(path, path, "")

    def classify(self, writer: TreeWriter) -> Classified:
        paths = self.paths()
        # The files that will surely have items: their history is read while we work.
        likely = [p for p in paths if p.fork in self.o.conflicts
                  or (p.fork_old is not None and p.fork_old in self.o.conflicts)
                  or self._is_manual(p.fork)]
        history = self.item_prs.start((p.upstream, p.upstream_old) for p in likely)
        wanted = [p.fork for p in paths] + [p.fork_old for p in paths if p.fork_old]
        for index in (self.ours, self.base, self.theirs, self.raw):
            index.prefetch(wanted)
        edits: dict[str, Entry | None] = {}
        results: list[FileResult] = []
        for p in paths:
            policy = self.config.policy_for(p.fork)
            conflicted = p.fork in self.o.conflicts or (
                p.fork_old is not None and p.fork_old in self.o.conflicts)
            if not self.workflows and (is_workflow(p.fork) or is_workflow(p.fork_old)) \
                    and (policy is None or policy.action == "theirs"):
                results.append(self._keep_workflow(p, conflicted, edits))
                continue
            if policy is not None:
                results.append(self._apply_policy(p, policy.action, policy.paths, conflicted,
                                                  edits))
                continue
            results.append(self._merged(p, conflicted))
        tree = edit_tree(self.cat, writer, self.o.merged_tree, edits)
        writer.flush()
        final = TreeIndex(self.cat, tree)
        searched, deleted = self._ref_targets(results)
        waiting = set(searched)
        # git greps commit 1's tree in a thread while the other files' items are made;
        # the files it searches for get theirs once it is done.
        with ThreadPoolExecutor(max_workers=1) as pool:
            found = pool.submit(find_refs, self.work, tree, searched, skip=deleted) \
                if searched else None
            for r in results:
                if r.status is Status.CONFLICT and not r.review_items \
                        and r.path not in waiting:
                    r.review_items = self._conflict_items(r, final)
            self.refs = found.result() if found is not None else {}
        for r in results:
            if r.status is Status.CONFLICT and not r.review_items:
                r.review_items = self._conflict_items(r, final)
        if self.config.flags:
            self._flag_items(paths, results, final)
        self.item_prs.attach(results, history, {p.upstream for p in likely},
                             {p.fork: (p.upstream, p.upstream_old) for p in paths})
        n = 0
        for r in results:
            for item in r.review_items:
                n += 1
                item.id = f"Q{n}"
        # A file with one comment has no thread per region to point a twin at.
        one = {r.path for r in results if r.generated or sum(
            1 for i in r.review_items if i.kind is ItemKind.CONFLICT) > MANY_REGIONS}
        mark_twins([i for r in results if r.path not in one for i in r.review_items])
        return Classified(results, tree, self._warnings(paths, results),
                          self._rule_warnings(results, final))

    def _rule_warnings(self, results: list[FileResult],
                       final: TreeIndex) -> list[dict[str, object]]:
        """The config's rules: prose rules that rewrote code in the lines upstream added to
        the files commit 1 takes from upstream (``configwarn.prose_rewrites``; the tip's
        lines beyond the cutoff's, no diff needed), and flags."""
        rules = [r for r in self.config.translate.replace if r.files and not r.regex]
        by_path = {r.upstream_path: r for r in results
                   if r.status is not Status.SKIPPED and r.policy in (None, "theirs")}
        changes = [ch for ch in self.o.changes if ch.new is not None and ch.new_path is not None
                   and ch.new.mode not in (MODE_GITLINK, MODE_SYMLINK)
                   and ch.new_path in by_path and any(r.applies_to(ch.new_path) for r in rules)]
        oids = sorted({e.oid for ch in changes for e in (ch.old, ch.new)
                       if e is not None and e.mode not in (MODE_GITLINK, MODE_SYMLINK)})
        blobs = {oid: decode(data) for oid, (_, data) in
                 zip(oids, self.cat.read_many(oids), strict=True)}
        rewrites: list[configwarn.Rewrite] = []
        for ch in changes:
            assert ch.new is not None and ch.new_path is not None
            new = blobs.get(ch.new.oid)
            if not new:
                continue
            old = (blobs.get(ch.old.oid) if ch.old is not None else None) or ""
            rewrites += configwarn.prose_rewrites(self.config, self.tr, ch.new_path,
                                                  by_path[ch.new_path].path,
                                                  _new_lines(old, new))

        def locate(rw: configwarn.Rewrite) -> int | None:
            merged = self._read_text(self._entry(final, rw.path)) or ""
            return _find_line([ln.rstrip("\n") for ln in split_lines(merged)], rw.line.strip())

        return configwarn.rule_warnings(self.config, self.tr, rewrites, locate)

    def _ref_targets(self, results: list[FileResult]) -> tuple[list[str], list[str]]:
        """The paths whose items say which files of commit 1 still refer to them: those one
        side deleted and the other changed (modify/delete), and the add/add files whose one
        version is a stub; and the deleted ones, which never count as referring (their
        proposals delete them). ``bot.engine.refs`` searches them all with one git grep."""
        deleted: list[str] = []
        stubs: list[str] = []
        for r in results:
            if r.status is not Status.CONFLICT or r.review_items:
                continue
            stages = {stage for _mode, _oid, stage in self.o.conflicts.get(r.path, [])}
            if 1 in stages and len(stages & {2, 3}) == 1:
                deleted.append(r.path)
            elif stages and 1 not in stages and {2, 3} <= stages:
                ours, theirs = (self._read_text(self._entry(index, r.path))
                                for index in (self.ours, self.theirs))
                if ours is not None and theirs is not None and stub_side(ours, theirs):
                    stubs.append(r.path)
                    self._stubs[r.path] = (ours, theirs)
        return stubs + deleted, deleted

    def _warnings(self, paths: list[_Path], results: list[FileResult]) -> list[dict[str, object]]:
        """Paths the config translates to names the fork lacks; patch files translated."""
        out: list[dict[str, object]] = []
        by_fork = {r.path: r for r in results}
        changes = {ch.new_path: ch for ch in self.o.changes if ch.new_path}
        for p in paths:
            translated = self.fork_path(p.upstream)
            r = by_fork.get(p.fork)
            if p.renamed_by_merge:
                out.append(configwarn.path_warning("rename-detection", p.fork, p.upstream,
                                                   translated, p.fork))
            elif r is not None and r.policy is None and p.change in ("M", "D") \
                    and self.ours.get(p.fork) is None:
                parent, _, name = p.fork.rpartition("/")
                entries = self.ours.dir(parent) or {}
                other = next((n for n in entries if n.lower() == name.lower() and n != name),
                             None)
                if other is not None:
                    found = f"{parent}/{other}" if parent else other
                    out.append(configwarn.path_warning("path-case", p.fork, p.upstream,
                                                       translated, found))
            ch = changes.get(p.upstream)
            if configwarn.is_patch(p.upstream) and ch is not None and ch.new is not None \
                    and self.o.translated.get((ch.new.oid, p.upstream), ch.new.oid) != ch.new.oid:
                out.append(configwarn.patch_warning(p.fork, p.upstream))
        return out

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
            # The fork's file as the translated base has it: upstream's change applies as
            # it is (bot.engine.manual), and its version is offered.
            theirs = self._entry(self.theirs, p.fork)
            unchanged = p.fork_old is None and ours is not None \
                and ours == self._entry(self.base, p.fork)
            sides = {"ours": _entry_json(ours), "theirs": _entry_json(theirs)} \
                if unchanged else None
            item = manual_item(p.fork, p.upstream, rule, self._translated_diff(p), sides)
            return FileResult(p.fork, p.upstream, Status.CONFLICT, [item], action,
                              UNCHANGED_NOTE if unchanged else MANUAL_NOTE)
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

    def _keep_workflow(self, p: _Path, conflicted: bool,
                       edits: dict[str, Entry | None]) -> FileResult:
        """Without the Workflows permission: the fork's workflow file stays, and upstream's
        change becomes an item to port by hand (a push that changed it would be refused)."""
        changed = conflicted
        for path in filter(None, (p.fork, p.fork_old)):
            ours = self._entry(self.ours, path)
            if self._entry(self.raw, path) != ours or conflicted:
                edits[path] = ours
                changed = True
        if not changed:
            return FileResult(p.fork, p.upstream, Status.UNCHANGED, [], WORKFLOWS_POLICY,
                              WORKFLOW_NOTE)
        item = workflow_item(p.fork, p.upstream, self._translated_diff(p))
        return FileResult(p.fork, p.upstream, Status.SKIPPED, [item], WORKFLOWS_POLICY,
                          WORKFLOW_NOTE)

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
            labels = [label for label, _ in self._described({p.fork, p.fork_old})]
            note = "; ".join(labels) or "conflict"
            if p.renamed_by_merge:
                note += (f"; found by rename detection: upstream `{p.upstream}` translates to "
                         f"`{self.fork_path(p.upstream)}`, which the fork does not have")
            return FileResult(p.fork, p.upstream, Status.CONFLICT, [], note=note)
        result = self._entry(self.raw, p.fork)
        ours = self._entry(self.ours, p.fork)
        status = self._status(p, result, ours)
        note = ""
        if p.change == "R" and p.fork_old:
            note = f"renamed from {p.fork_old}"
        return FileResult(p.fork, p.upstream, status, [], note=note)

    def _moved(self, r: FileResult) -> ReviewItem | None:
        """The item of a new file git moved into a directory the other side renamed: its
        sides are the adder's version (the stage git recorded) and no file."""
        path = r.path
        stages = {(mode, oid, stage) for mode, oid, stage in self.o.conflicts.get(path, [])}
        for m in self.o.messages:
            # git's kind is "CONFLICT (directory rename suggested)"; its text says more.
            moved = (moved_file(m.text, {s for _, _, s in stages})
                     if path in m.paths else None)
            if moved is None:
                continue
            mode, oid, _ = next(iter(stages))
            sides = {"ours": None, "theirs": None, moved.side: {"mode": mode, "oid": oid}}
            return ReviewItem(
                id="", kind=ItemKind.FILE, path=path, upstream_path=r.upstream_path,
                tier=Tier.DECIDE,
                reason=moved.reason(), question=moved.question(),
                choices=["ours", "theirs", "confirm"], sides=sides, rule=MOVED_RULE)
        return None

    def _described(self, names: set[str | None]) -> list[tuple[str, str]]:
        """Why git says these paths conflicted, in forksync's words (label, sentence)."""
        found = [(m.kind, m.text) for m in self.o.messages
                 if m.kind.startswith("CONFLICT") and names & set(m.paths)]
        if any(kind == "CONFLICT (binary)" for kind, _ in found):
            # git adds a generic content conflict for the same binary file: say it once.
            found = [(k, t) for k, t in found if k != "CONFLICT (contents)"]
        out: list[tuple[str, str]] = []
        for kind, text in found:
            described = describe(kind, text)
            if described not in out:
                out.append(described)
        return out

    def _read_text(self, entry: Entry | None) -> str | None:
        if entry is None or entry.mode in (MODE_GITLINK, MODE_SYMLINK):
            return None
        _, data = self.cat.read(entry.oid)
        return decode(data)

    def _conflict_items(self, r: FileResult, final: TreeIndex) -> list[ReviewItem]:
        entry = self._entry(final, r.path)
        text = self._read_text(entry)
        r.marker_size = self.o.marker_sizes.get(r.path, MARKER_SIZE)
        lines = split_lines(text) if text else []
        regions = find_marker_regions_in_lines(lines, r.marker_size)
        if not regions:
            r.binary = entry is not None and text is None and entry.mode != MODE_GITLINK
            sentences = [sentence for _, sentence in self._described({r.path})]
            entries = {"ours": self._entry(self.ours, r.path),
                       "theirs": self._entry(self.theirs, r.path)}
            moved = self._moved(r)
            if moved is not None:
                return [moved]
            sides = {side: _entry_json(e) for side, e in entries.items()}
            deleted = [side for side, entry_ in sides.items() if entry_ is None]
            kinds = {m.kind for m in self.o.messages if r.path in m.paths}
            if len(deleted) == 1 and any("delete" in kind for kind in kinds):
                by = "fork" if deleted == ["ours"] else "upstream"
                prop = propose_whole_file(by)
                if self.learned is not None:
                    prop = self.learned.apply_file(prop)
                # Files on the branch that still refer to it: said, and a deletion this
                # fork's habit settled waits for a person's confirmation.
                refs = self.refs.get(r.path)
                if refs is not None and prop.tier is Tier.SETTLED:
                    prop = replace(prop, tier=Tier.CONFIRM)
                # What each choice means goes where the item is read: a Decide's question,
                # a proposal's reason.
                choices = whole_file_choices(entries, entry)
                asks = prop.tier is Tier.DECIDE
                return [ReviewItem(
                    id="", kind=ItemKind.FILE, path=r.path, upstream_path=r.upstream_path,
                    tier=prop.tier,
                    reason=" ".join([*sentences, prop.reason,
                                     *([deletion_note(refs, by)] if refs else []),
                                     *([] if asks else [choices])]),
                    question=f"{prop.question} {choices}" if asks else prop.question,
                    choices=[*prop.choices, "confirm"], sides=sides, rule=prop.rule,
                    learned=prop.learned, refs=refs.to_json() if refs else None)]
            return [ReviewItem(
                id="", kind=ItemKind.FILE, path=r.path, upstream_path=r.upstream_path,
                tier=Tier.DECIDE, reason=" ".join(sentences) or "git could not merge this file.",
                question=whole_file_question(entries, entry),
                choices=["ours", "theirs", "confirm"], sides=sides,
            )]
        items = []
        # No stage 1 in git's index entries: neither side had the file at base (add/add).
        stages = {stage for _mode, _oid, stage in self.o.conflicts.get(r.path, [])}
        added_both = bool(stages) and 1 not in stages
        base_text, ours_text, theirs_text = (self._read_text(self._entry(tree, r.path))
                                             for tree in (self.base, self.ours, self.theirs))
        r.changed = None if added_both else file_changes(base_text, ours_text, theirs_text)
        r.generated = detect(r.path, (ours_text, theirs_text), self._attributes(final))
        if r.generated is not None:  # a tool writes it: one comment, no proposal per region
            return [regenerate_item(r.path, r.upstream_path, r.generated, region)
                    for region in regions]
        stub = self._stub_note(r.path) if added_both else None
        props = []
        for region in regions:
            prop = propose_region(lines, region, added_both=added_both, path=r.path,
                                  changed=r.changed)
            if self.learned is not None:
                prop = self.learned.apply(prop, region.ours, region.theirs, r.path)
            props.append(prop)
        # No button commits Python that does not parse where a plain side would.
        props = check_parses(r.path, lines, regions, props)
        for region, prop in zip(regions, props, strict=True):
            base = region.base or ""
            reason, noted = prop.reason, None
            if stub is not None and prop.rule == "add/add":
                reason, noted = f"{reason.rstrip('.')}. {stub[0]}", stub[1]
            items.append(ReviewItem(
                id="", kind=ItemKind.CONFLICT, path=r.path, upstream_path=r.upstream_path,
                tier=prop.tier, reason=reason, ours=region.ours, base=base,
                theirs=region.theirs, start_line=region.start_line, end_line=region.end_line,
                suggestion=prop.suggestion, question=prop.question, choices=list(prop.choices),
                rule=prop.rule, learned=prop.learned, refs=noted,
            ))
        return items

    def _stub_note(self, path: str) -> tuple[str, dict[str, Any]] | None:
        """For an add/add whose one version is a stub that files on the branch refer to:
        the sentence its items' reasons end with, and what they record (``refs``)."""
        refs, sides = self.refs.get(path), self._stubs.get(path)
        if refs is None or sides is None:
            return None
        found = stub_note(refs, *sides)
        if found is None:
            return None
        said, keep = found
        return said, refs.to_json(keep=keep)

    def _attributes(self, final: TreeIndex) -> str | None:
        """The merged tree's root ``.gitattributes`` (read once), for ``linguist-generated``."""
        if self._gitattributes is False:
            self._gitattributes = self._read_text(self._entry(final, ".gitattributes"))
        return self._gitattributes if isinstance(self._gitattributes, str) else None

    def _translated_diff(self, p: _Path) -> str:
        old = self._read_text(self._entry(self.base, p.fork_old or p.fork)) or ""
        new = self._read_text(self._entry(self.theirs, p.fork)) or ""
        return "".join(difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True),
            fromfile=f"a/{p.fork_old or p.fork}", tofile=f"b/{p.fork}"))

    def _flag_items(self, paths: list[_Path], results: list[FileResult],
                    final: TreeIndex) -> None:
        by_path = {r.upstream_path: r for r in results}
        changes = [ch for ch in self.o.changes if ch.new is not None and ch.new_path is not None
                   and ch.new.mode not in (MODE_GITLINK, MODE_SYMLINK)
                   and by_path.get(ch.new_path) is not None
                   and by_path[ch.new_path].status is not Status.SKIPPED]
        oids = sorted({e.oid for ch in changes for e in (ch.old, ch.new)
                       if e is not None and e.mode not in (MODE_GITLINK, MODE_SYMLINK)})
        blobs = {oid: decode(data) for oid, (_, data) in
                 zip(oids, self.cat.read_many(oids), strict=True)}
        found: list[tuple[FileResult, list[Hit]]] = []
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
            hits = []
            for line in added:
                flag = next((f for f in self.config.flags if f.matches(line)), None)
                if flag is not None:
                    # The file holds the translated line: find and quote that.
                    translated = self.tr.text(line, ch.new_path).rstrip("\n")
                    hits.append(Hit(flag, line, translated,
                                    _find_line(merged_lines, translated.strip()),
                                    self._option(flag, line, translated, ch.new_path)))
            found.append((r, hits))
        # How the fork writes the options the flagged lines name: one search of fork
        # main's versions of the window's files (a plan reads them anyway).
        options = {h.option for _, hits in found for h in hits if h.option is not None}
        search = spelling.search(self._fork_texts(paths), options) if options else None
        for r, hits in found:
            if search is not None:
                hits = [replace(h, fork=fork_use(search.uses(h.option), h.option, r.path))
                        if h.option is not None else h for h in hits]
            add_flag_items(r.review_items, r.path, r.upstream_path, hits,
                           searched=search.files if search is not None else 0)

    def _fork_texts(self, paths: list[_Path]) -> list[tuple[str, str]]:
        """Fork main's text files at the window's paths (not the fork's own config)."""
        wanted = sorted({q for p in paths for q in (p.fork, p.fork_old)
                         if q is not None and q not in (CONFIG_PATH, LEARNED_PATH)})
        entries = [(q, e) for q in wanted if (e := self.ours.get(q)) is not None
                   and not e.is_tree and e.mode not in (MODE_GITLINK, MODE_SYMLINK)]
        oids = sorted({e.oid for _, e in entries})
        texts = {oid: decode(d) for oid, (_, d) in
                 zip(oids, self.cat.read_many(oids), strict=True)}
        return [(q, t) for q, e in entries if (t := texts[e.oid]) is not None]

    def _option(self, flag: Flag, line: str, translated: str, upstream_path: str) -> str | None:
        """The command-line option of a flagged line, as the fork's file writes it: the
        option the flag matched in upstream's line, translated, found in ``translated``."""
        span = flag.span(line)
        upstream = option_at(line, *span) if span is not None else None
        if upstream is None:
            return None
        ours = self.tr.text(upstream, upstream_path)
        at = translated.lower().find(ours.lower())
        written = translated[at:at + len(ours)] if at >= 0 else None
        return written if written is not None and spelling.OPTION.fullmatch(written) else None

    def _is_manual(self, fork_path: str) -> bool:
        policy = self.config.policy_for(fork_path)
        return policy is not None and policy.action == "manual"


def _entry_json(entry: Entry | None) -> dict[str, str] | None:
    return {"mode": entry.mode, "oid": entry.oid} if entry is not None else None



def _added_lines(old: str, new: str) -> list[str]:
    new_lines = new.splitlines(keepends=True)
    sm = difflib.SequenceMatcher(a=old.splitlines(keepends=True), b=new_lines, autojunk=False)
    out: list[str] = []
    for tag, _i1, _i2, j1, j2 in sm.get_opcodes():
        if tag in ("insert", "replace"):
            out.extend(new_lines[j1:j2])
    return out


def _new_lines(old: str, new: str) -> list[str]:
    """The lines of ``new`` beyond those of ``old``, counted as a multiset (a line ``old``
    has once and ``new`` twice is new once): what upstream added, without a diff."""
    have = Counter(old.splitlines())
    out = []
    for line in new.splitlines():
        if have[line] > 0:
            have[line] -= 1
        else:
            out.append(line)
    return out


def _find_line(lines: list[str], needle: str) -> int | None:
    if not needle:
        return None
    for i, line in enumerate(lines):
        if line.strip() == needle:
            return i + 1
    return None
