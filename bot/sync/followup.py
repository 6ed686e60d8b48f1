"""Following a sync PR up after each push: which review items people resolved.

An item with a marker region is resolved when no region with its content is left in
the file and no marker line of it stayed behind (people resolve in any way they like;
GitHub's "Commit suggestion" replaces the region with the suggestion, so it counts too).
What a head resolves is decided purely in :mod:`bot.engine.rescan`; this module reads the
files (the plan's, and any other file people changed since commit 1) and the tree
entries of whole-file items from git. The rescan ticks the checklist in the PR body
(only the bot's section) and puts the ``forksync`` check on the new head: failure with
annotations on the remaining markers, marker lines outside any region, open decisions
and translation residue in the lines people changed; success when none remain.

At most 3 write requests per push: one body PATCH, one check-run request, and one review
of follow-up suggestions (:mod:`bot.sync.follow`) when the hunks resolved so far in a file
all took one side (a second try of it after a 422).
"""

from __future__ import annotations

import asyncio
import difflib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from bot.app.context import JobContext
from bot.engine.config import CONFIG_PATH
from bot.engine.gate import Remaining
from bot.engine.git import Git
from bot.engine.markers import split_lines
from bot.engine.model import marker_size_of
from bot.engine.needs import blobs_at
from bot.engine.rescan import (
    ScanResult,
    classify_resolution,
    read_head,
    resolution_text,
    scan,
    tree_entries,
)
from bot.engine.review import one_click_ids
from bot.errors import ForksyncError, MissingObject
from bot.github import remote
from bot.github.checks import report_error, upsert_check_run
from bot.github.pulls import update_body
from bot.sync.follow import post_follow_ups
from bot.sync.publish.pr import render_pr_body, retitle
from bot.sync.state import load_fork_state, load_plan, save_fork_state

log = logging.getLogger(__name__)

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


async def fetch_read_files(git: Git, plan_json: dict[str, Any], sync: dict[str, Any], head: str,
                           url_and_token: Access) -> None:
    """The trees and blobs ``read_head`` reads at commit 1 and the head, where missing."""
    revs = [rev for rev in (sync["commit"], head) if git.rev_parse(rev)]
    try:
        paths: list[str] | None = await asyncio.to_thread(_files_read, git, plan_json,
                                                          sync["commit"], head)
        wanted = await asyncio.to_thread(blobs_at, git, revs, paths or [])
        missing = await asyncio.to_thread(git.missing_objects, list(wanted))
    except MissingObject:  # a tree the branch's fetch left out: the trees come first
        paths, missing = None, ["a tree"]
    if not missing:
        return
    url, token = await url_and_token()
    if paths is None:
        await asyncio.to_thread(remote.fetch_trees, git.git_dir, url, revs, token,
                                base=sync.get("ours"), repo="the fork repository")
        paths = await asyncio.to_thread(_files_read, git, plan_json, sync["commit"], head)
    await asyncio.to_thread(remote.fetch_files, git.git_dir, url, revs, paths, token,
                            base=sync.get("ours"), repo="the fork repository")


def _files_read(git: Git, plan_json: dict[str, Any], commit: str, head: str) -> list[str]:
    """The plan's files, those people changed outside it (as read_head reads), the config."""
    paths = [f["path"] for f in plan_json.get("files", [])]
    planned = set(paths)
    if git.rev_parse(commit) and git.rev_parse(head):
        paths += [p for p in git.text("diff", "--name-only", "-z", "--no-renames", commit, head,
                                      "--").split("\0") if p and p not in planned]
    return [*paths, CONFIG_PATH]


def load_translator(git_dir: str, rev: str) -> Any | None:
    """The translation of the config the sync ran with (None if it cannot be read)."""
    from bot.engine.config import load_config
    from bot.engine.translate import Translator
    from bot.sync.publish.fetch import read_config_text

    text = read_config_text(git_dir, rev)
    if text is None:
        return None
    try:
        return Translator(load_config(text, CONFIG_PATH).translate)
    except ForksyncError:
        return None


Access = Callable[[], Awaitable[tuple[str, str]]]


def fork_access(ctx: JobContext, gh: Any, fork: str, installation_id: int | None) -> Access:
    """The fork's clone URL and a token, asked for once and only when a fetch needs them."""
    settings = ctx.settings
    access: list[tuple[str, str]] = []

    async def url_and_token() -> tuple[str, str]:
        if not access:
            token = await ctx.git_token_for(installation_id)
            if settings.git_url:
                url = settings.clone_url(fork)
            else:
                repo = await gh.getitem(f"/repos/{fork}")
                url = settings.clone_url(fork, repo.get("clone_url"))
            access.append((url, token))
        return access[0]

    return url_and_token


async def have_head(git: Git, sync: dict[str, Any], head_sha: str, url_and_token: Access) -> bool:
    """Whether ``head_sha`` is in the cache, fetched from the sync branch if it was not."""
    if git.rev_parse(head_sha) is None:
        url, token = await url_and_token()
        await asyncio.to_thread(remote.fetch, git.git_dir, url,
                                [f"+refs/heads/{sync['branch']}:refs/forksync/head"], token)
    return git.rev_parse(head_sha) is not None


async def rescan(ctx: JobContext, fork_full_name: str, installation_id: int | None,
                 pr_number: int, head_sha: str) -> ScanResult | None:
    """Job ``"rescan"``: tick the checklist, put the check on ``head_sha``, and suggest the
side a file's resolved hunks all took on its open ones (≤ 3 writes, one more on a 422)."""
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
    url_and_token = fork_access(ctx, gh, fork, installation_id)
    if not await have_head(git, sync, head_sha, url_and_token):
        # The branch moved on after this event; the event for the newer head follows.
        log.info("%s#%d: %s is gone from the branch; skipping", fork, pr_number, head_sha[:12])
        return None
    try:
        plan_json = load_plan(sync, store)
    except ForksyncError as exc:  # the data directory lost it: say so on the head
        await report_error(gh, fork, head_sha, "forksync cannot check this push", str(exc))
        return None
    # The cache is a partial clone: what the scan reads comes first, in one fetch, so
    # that a file read as absent is absent (the check must never pass on a missing blob).
    await fetch_read_files(git, plan_json, sync, head_sha, url_and_token)
    result, commit_files, head_files = await asyncio.to_thread(read_head, fork_git, plan_json,
                                                               sync, head_sha)
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
                                      behind=int(sync.get("behind", 0)),
                                      one_click=one_click_ids(sync), max_batches=1)
    sync.setdefault("check_runs", {})[head_sha] = check_id
    await asyncio.to_thread(save_fork_state, store, fork, state)
    if await post_follow_ups(gh, fork, pr_number, head_sha, plan_json, sync, result, fork_git):
        await asyncio.to_thread(save_fork_state, store, fork, state)
    return result


__all__ = ["ScanResult", "classify_resolution", "read_head", "rescan", "resolution_text", "scan",
           "tree_entries"]
