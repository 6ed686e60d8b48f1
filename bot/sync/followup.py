"""Following a sync PR up after each push: which review items people resolved.

An item with a marker region is resolved when no region with its content is left in
the file (people resolve in any way they like; GitHub's "Commit suggestion" replaces
the region with the suggestion, so it counts too). The rescan ticks the checklist in
the PR body (only the bot's section) and puts the ``forksync`` check on the new head:
failure with annotations on the remaining markers, open decisions and translation
residue in the lines people changed; success when none remain.

At most 2 write requests per push: one body PATCH, one check-run request.
"""

from __future__ import annotations

import asyncio
import difflib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bot.app.context import JobContext
from bot.engine.gate import Remaining, item_message
from bot.engine.git import CatFile, Git
from bot.engine.markers import MarkerRegion, find_marker_regions, split_lines
from bot.engine.model import marker_size_of
from bot.errors import ForksyncError, GitError
from bot.github import remote
from bot.github.checks import report_error, upsert_check_run
from bot.github.pulls import update_body
from bot.sync.publish.pr import render_pr_body, retitle
from bot.sync.state import load_fork_state, load_plan, save_fork_state

log = logging.getLogger(__name__)

RegionKey = tuple[str, str, str]


def region_key(region: MarkerRegion) -> RegionKey:
    return (region.ours, region.base or "", region.theirs)


@dataclass
class ScanResult:
    """What a rescan found at one head of the sync branch."""

    resolved: list[str] = field(default_factory=list)  # item ids, plan order
    remaining: list[Remaining] = field(default_factory=list)
    # item id -> how: ours | theirs | suggested | edited | deleted
    resolutions: dict[str, str] = field(default_factory=dict)


def resolution_text(old: str, new: str, start_line: int, end_line: int) -> str | None:
    """What now stands where lines ``start_line..end_line`` of ``old`` stood, or None if unsure."""
    old_lines, new_lines = split_lines(old), split_lines(new)
    s, e = start_line - 1, end_line  # half-open, 0-based
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    new_start = new_end = None
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if new_start is None and (i1 <= s < i2 or i1 == i2 == s):
            new_start = j1 + (s - i1) if tag == "equal" else j1
        if i1 < e <= i2:
            new_end = j1 + (e - i1) if tag == "equal" else j2
            break
    if new_start is None or new_end is None or new_end < new_start:
        return None
    return "".join(new_lines[new_start:new_end])


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


def scan(plan_json: dict[str, Any], commit_files: dict[str, str | None],
         head_files: dict[str, str | None], *, answers: dict[str, str]) -> ScanResult:
    """Decide, per review item, whether it is resolved at the head (pure).

    ``commit_files``/``head_files`` map each plan path to its text at commit 1 and at
    the head (None: absent). Conflict items are matched to the regions left at the
    head by content, not line number, because edits above a region move it.
    """
    result = ScanResult()
    for f in plan_json.get("files", []):
        path = f["path"]
        size = marker_size_of(f)  # the size the merge wrote this file's markers with
        before, after = commit_files.get(path), head_files.get(path)
        at_commit = {r.start_line: r
                     for r in (find_marker_regions(before, size) if before else [])}
        left: dict[RegionKey, list[MarkerRegion]] = {}
        for r in find_marker_regions(after, size) if after else []:
            left.setdefault(region_key(r), []).append(r)
        for item in f.get("review_items", []):
            item_id = item["id"]
            is_region = item.get("kind") == "conflict" and item.get("start_line") is not None
            if item.get("kind") == "policy" or (item.get("tier") == "Settled" and not is_region):
                continue
            if is_region:
                region = at_commit.get(item["start_line"])
                key = region_key(region) if region is not None else (
                    item.get("ours", ""), item.get("base") or "", item.get("theirs", ""))
                if left.get(key):
                    now = left[key].pop(0)
                    result.remaining.append(Remaining(path, item_id, now.start_line,
                                                      now.end_line, item_message(item)))
                    continue
                result.resolved.append(item_id)
                if before is not None and after is not None and region is not None:
                    text = resolution_text(before, after, region.start_line, region.end_line)
                    result.resolutions[item_id] = classify_resolution(item, text)
                else:
                    result.resolutions[item_id] = "deleted" if after is None else "edited"
            elif item_id in answers or (item.get("kind") == "file" and before != after):
                # A whole-file conflict counts as handled once someone changed the file.
                result.resolved.append(item_id)
            else:
                line = item.get("start_line")
                result.remaining.append(Remaining(path, item_id, line, line, item_message(item),
                                                  marker=False))
        # Markers the plan does not know (pasted, or a half-done resolution) fail too.
        for regions in left.values():
            for r in regions:
                result.remaining.append(Remaining(path, None, r.start_line, r.end_line,
                                                  "conflict markers left in the file"))
    return result


def changed_lines(before: str | None, after: str) -> set[int]:
    """1-based numbers of the lines of ``after`` that are new or changed since ``before``."""
    new_lines = split_lines(after)
    if before is None:
        return set(range(1, len(new_lines) + 1))
    matcher = difflib.SequenceMatcher(None, split_lines(before), new_lines, autojunk=False)
    return {j + 1 for tag, _i1, _i2, j1, j2 in matcher.get_opcodes() if tag != "equal"
            for j in range(j1, j2)}


def residue_remaining(translator: Any, plan_json: dict[str, Any],
                      commit_files: dict[str, str | None],
                      head_files: dict[str, str | None]) -> list[Remaining]:
    """Upstream names in lines people wrote after commit 1 (pasting ``sglang`` back, say).

    Only changed lines count: the fork's own text and commit 1 were judged already.
    """
    from bot.engine.residue import MAX_PER_FILE, find_residue

    out: list[Remaining] = []
    for f in plan_json.get("files", []):
        before, after = commit_files.get(f["path"]), head_files.get(f["path"])
        if after is None or after == before:
            continue
        changed = changed_lines(before, after)
        found = [r for r in find_residue(translator, f["path"], f["upstream_path"], after,
                                         limit=10_000, marker_size=marker_size_of(f))
                 if r.line in changed]
        out += [Remaining(r.path, None, r.line, r.line,
                          f"`{r.text.strip()}` still has upstream names; the fork's "
                          f"translation makes it `{r.expected.strip()}`",
                          marker=False, residue=True) for r in found[:MAX_PER_FILE]]
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


def load_translator(git_dir: str, rev: str) -> Any | None:
    """The translation of the config the sync ran with (None if it cannot be read)."""
    from bot.engine.config import CONFIG_PATH, load_config
    from bot.engine.translate import Translator
    from bot.sync.publish.fetch import read_config_text

    text = read_config_text(git_dir, rev)
    if text is None:
        return None
    try:
        return Translator(load_config(text, CONFIG_PATH).translate)
    except ForksyncError:
        return None


async def rescan(ctx: JobContext, fork_full_name: str, installation_id: int | None,
                 pr_number: int, head_sha: str) -> ScanResult | None:
    """Job ``"rescan"``: tick the checklist and put the check on ``head_sha`` (≤ 2 writes)."""
    fork = fork_full_name
    store, settings = ctx.store, ctx.settings
    state = await asyncio.to_thread(load_fork_state, store, fork)
    sync = state.get("sync") or {}
    if sync.get("pr") != pr_number or not sync.get("commit"):
        log.info("%s#%d is not the open sync PR of this fork; nothing to rescan", fork, pr_number)
        return None
    gh = await ctx.gh_for(installation_id)
    fork_git = await asyncio.to_thread(remote.ensure_mirror, settings.cache_dir, fork)
    git = Git(fork_git)
    if git.rev_parse(head_sha) is None:
        token = await ctx.git_token_for(installation_id)
        if settings.git_url:
            url = settings.clone_url(fork)
        else:
            repo = await gh.getitem(f"/repos/{fork}")
            url = settings.clone_url(fork, repo.get("clone_url"))
        await asyncio.to_thread(remote.fetch, fork_git, url,
                                [f"+refs/heads/{sync['branch']}:refs/forksync/head"], token)
        if git.rev_parse(head_sha) is None:
            # The branch moved on after this event; the event for the newer head follows.
            log.info("%s#%d: %s is gone from the branch; skipping", fork, pr_number,
                     head_sha[:12])
            return None
    try:
        plan_json = load_plan(sync)
    except ForksyncError as exc:  # the data directory lost it: say so on the head
        await report_error(gh, fork, head_sha, "forksync cannot check this push", str(exc))
        return None
    paths = [f["path"] for f in plan_json.get("files", [])]
    commit_files = await asyncio.to_thread(read_blobs, fork_git, sync["commit"], paths)
    head_files = await asyncio.to_thread(read_blobs, fork_git, head_sha, paths)
    result = scan(plan_json, commit_files, head_files, answers=dict(sync.get("answers", {})))
    translator = await asyncio.to_thread(load_translator, fork_git, sync["commit"])
    if translator is not None:
        result.remaining += await asyncio.to_thread(residue_remaining, translator, plan_json,
                                                    commit_files, head_files)

    sync["resolved"] = result.resolved
    sync["remaining"] = [r.to_json() for r in result.remaining]
    sync.setdefault("resolutions", {}).update(result.resolutions)
    sync["head"] = head_sha
    await asyncio.to_thread(save_fork_state, store, fork, state)

    pull = await gh.getitem(f"/repos/{fork}/pulls/{pr_number}")
    conflicted = {f["path"] for f in plan_json.get("files", []) if f.get("status") == "conflict"}
    open_files = len({r.path for r in result.remaining if r.path in conflicted and not r.residue})
    await update_body(gh, fork, pr_number, pull.get("body") or "",
                      render_pr_body(plan_json, sync),
                      title=retitle(plan_json, pull.get("title") or "", open_files))
    check_id = await upsert_check_run(gh, fork, head_sha, plan_json, result.remaining,
                                      behind=int(sync.get("behind", 0)), max_batches=1)
    sync.setdefault("check_runs", {})[head_sha] = check_id
    await asyncio.to_thread(save_fork_state, store, fork, state)
    return result


__all__ = ["ScanResult", "classify_resolution", "rescan", "resolution_text", "scan"]
