"""``/sync resolve <path> ours|theirs|suggested``: resolve every conflict in one file.

The marker regions of the file are rewritten at the head just read and committed on top
of it with a ``Forksync-Command`` trailer (a retry finds that commit and stops). A
whole-file conflict (modify/delete, binary) has no markers: the chosen side's file is
put back instead, as it is for a ``manual`` file the fork never changed. ``/sync answer``
on one region uses the same steps.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from bot.engine import markers, rerere
from bot.engine.git import Git
from bot.engine.manual import applies_as_is
from bot.engine.markers import MARKER_SIZE
from bot.engine.model import marker_sizes
from bot.errors import ForksyncError
from bot.github import remote
from bot.sync.access import upstream_access
from bot.sync.commands import gitops
from bot.sync.commands.gitops import TRAILER
from bot.sync.commands.parse import Resolve
from bot.sync.commands.request import CommandFailed, join_and
from bot.sync.commands.runner import Branch, Runner
from bot.sync.state import load_plan


async def resolve(run: Runner, command: Resolve) -> str:
    """The reply to ``/sync resolve``, after its commit is pushed."""
    plan_json = load_plan(run.sync, run.ctx.store)
    files = {f["path"]: f for f in plan_json.get("files", [])}
    conflicted = [p for p, f in files.items() if f.get("status") == "conflict"]
    if command.path not in files or files[command.path].get("status") != "conflict":
        listed = ", ".join(f"`{p}`" for p in conflicted[:20]) or "none"
        raise CommandFailed(f"`{command.path}` is not a conflicted file of this sync. "
                            f"Conflicted files: {listed}.")
    text = await resolve_regions(run, command.path, command.side)
    return text.strip()


async def resolve_regions(run: Runner, path: str, side: str,
                          only: set[str] | None = None) -> str:
    """Rewrite the marker regions of ``path`` (all, or the items ``only``) on the branch."""
    sync = run.sync
    plan_json = load_plan(sync, run.ctx.store)
    branch = await run.read_branch()
    tag = f"{run.req.comment_id}:{path}:{side}"
    done = await asyncio.to_thread(gitops.commit_with_trailer, branch.git, branch.head, tag)
    if done:
        return f"\n\nDone already in {done[:12]}."
    files = await asyncio.to_thread(gitops.read_texts, branch.git,
                                    [sync["commit"], branch.head], path)
    at_commit, at_head = files
    if at_head is None:
        raise CommandFailed(f"`{path}` no longer exists on the sync branch "
                            f"(head `{branch.head[:12]}`).")
    items = [i for f in plan_json["files"] if f["path"] == path for i in f["review_items"]]
    size = marker_sizes(plan_json).get(path, MARKER_SIZE)  # as the merge wrote this file
    by_key = _items_by_region(items, at_commit or "", path, size)
    regions = rerere.parse_regions(at_head, size)
    targets = [r for r in regions if only is None or by_key.get(r.key(path), {}).get("id")
               in only]
    whole_file = [i for i in items if takes_a_side(i)]
    if not targets and whole_file and only is None:
        item = whole_file[0]
        extra = await take_whole_file(run, branch, path, side, item, tag)
        await run.record_answer(plan_json, item["id"], side,
                                check=run.sync.get("head") == branch.head)
        return extra
    # A region missing one of its lines cannot be given a side: say where it is.
    strays = [o.line for o in markers.scan(at_head, size, reference=at_commit).orphans
              if o.verdict is markers.Verdict.MARKER]
    broken = (f"conflict marker lines outside any complete region at `{branch.head[:12]}` "
              f"({', '.join(f'L{n}' for n in strays[:10])}): a region lost one of its lines. "
              "Fix it by hand: remove those lines, or restore the whole region.")
    if not targets:
        if strays:
            raise CommandFailed(f"`{path}` has {broken}")
        what = f" for {', '.join(sorted(only))}" if only else ""
        return (f"\n\n`{path}` has no conflict markers left{what} at "
                f"`{branch.head[:12]}`; nothing to change.")
    if side == "suggested":
        _require_suggestions(path, targets, by_key)
    wanted = {r.start for r in targets}

    def choose(region: rerere.Region) -> str | None:
        if region.start not in wanted:
            return None
        if side == "suggested":
            suggestion: str = by_key[region.key(path)]["suggestion"]
            return suggestion
        return region.side(side)

    new_text, count = rerere.rewrite(at_head, choose, size=size)
    ids = [by_key[r.key(path)]["id"] for r in targets if r.key(path) in by_key]
    message = (f"forksync: resolve {path} with {side}\n\n"
               f"Requested by @{run.req.author} in #{run.req.pr}"
               + (f" ({', '.join(ids)})" if ids else "") + f".\n\n{TRAILER}: {tag}\n")
    commit = await asyncio.to_thread(gitops.commit_files, branch.git, branch.head,
                                     {path: new_text}, message)
    await run.push(branch, commit)
    regions_word = "region" if count == 1 else "regions"
    return (f"\n\nResolved {count} conflict {regions_word} in `{path}` with **{side}**"
            + (f" ({', '.join(ids)})" if ids else "")
            + f" in {commit[:12]}. The checklist and the check update after the rescan."
            + (f" `{path}` also has {broken}" if strays else ""))


async def resolve_items(run: Runner, by_path: dict[str, set[str]], side: str,
                        texts: dict[str, str] | None = None,
                        branch: Branch | None = None) -> str:
    """Rewrite the regions of these items (ids by path) to ``side``: one commit, one push.
    With ``texts`` (item id → text), each region gets its item's text instead, and
    ``side`` only names it (``twin``). ``branch``: the head the texts were read at, if
    the caller has read it already (the push then replaces exactly that head)."""
    sync = run.sync
    plan_json = load_plan(sync, run.ctx.store)
    sizes = marker_sizes(plan_json)
    branch = branch or await run.read_branch()
    tag = f"{run.req.comment_id}:{','.join(sorted(by_path))}:{side}"
    done = await asyncio.to_thread(gitops.commit_with_trailer, branch.git, branch.head, tag)
    if done:
        return f"\n\nDone already in {done[:12]}."
    changed: dict[str, str | None] = {}
    ids: list[str] = []
    count = 0
    for path, only in sorted(by_path.items()):
        at_commit, at_head = await asyncio.to_thread(
            gitops.read_texts, branch.git, [sync["commit"], branch.head], path)
        if at_head is None:
            continue
        size = sizes.get(path, MARKER_SIZE)  # as the merge wrote this file
        items = [i for f in plan_json["files"] if f["path"] == path for i in f["review_items"]]
        by_key = _items_by_region(items, at_commit or "", path, size)
        targets = [r for r in rerere.parse_regions(at_head, size)
                   if by_key.get(r.key(path), {}).get("id") in only]
        if not targets:
            continue
        if side == "suggested" and texts is None:
            _require_suggestions(path, targets, by_key)
        wanted = {r.start for r in targets}

        def choose(region: rerere.Region, path: str = path, wanted: set[int] = wanted,
                   by_key: dict[str, dict[str, Any]] = by_key) -> str | None:
            if region.start not in wanted:
                return None
            if texts is not None:
                return texts[by_key[region.key(path)]["id"]]
            if side == "suggested":
                suggestion: str = by_key[region.key(path)]["suggestion"]
                return suggestion
            return region.side(side)

        changed[path], n = rerere.rewrite(at_head, choose, size=size)
        count += n
        ids += [by_key[r.key(path)]["id"] for r in targets]
    if not changed:
        return f"\n\nNo conflict markers of these items are left at `{branch.head[:12]}`."
    message = (f"forksync: resolve {len(ids)} regions with {side}\n\n"
               f"Requested by @{run.req.author} in #{run.req.pr} ({', '.join(ids)}).\n\n"
               f"{TRAILER}: {tag}\n")
    commit = await asyncio.to_thread(gitops.commit_files, branch.git, branch.head, changed,
                                     message)
    await run.push(branch, commit)
    return (f"\n\nResolved {count} conflict region{'s' if count != 1 else ''} in "
            f"{len(changed)} file{'s' if len(changed) != 1 else ''} with **{side}** in "
            f"{commit[:12]}. The checklist and the check update after the rescan.")


def _require_suggestions(path: str, targets: list[rerere.Region],
                         by_key: dict[str, dict[str, Any]]) -> None:
    """CommandFailed unless every target region is an item of this sync with a suggestion."""
    unknown = [r for r in targets if r.key(path) not in by_key]
    lacking = [by_key[r.key(path)]["id"] for r in targets
               if r.key(path) in by_key and by_key[r.key(path)].get("suggestion") is None]
    if unknown:
        lines = ", ".join(f"L{r.start + 1}" for r in unknown)
        raise CommandFailed(f"`{path}` has conflict regions this sync did not write "
                            f"({lines}), so there is no suggestion for them. Resolve "
                            "them by hand, or with `ours` or `theirs`.")
    if lacking:
        raise CommandFailed(f"{join_and(lacking)} in `{path}` "
                            f"{'has' if len(lacking) == 1 else 'have'} no suggestion. "
                            "Resolve with `ours` or `theirs`, or by hand.")


def _items_by_region(items: list[dict[str, Any]], commit_text: str, path: str,
                     size: int = MARKER_SIZE) -> dict[str, dict[str, Any]]:
    """Review items keyed by the hunk key of their marker region in commit 1."""
    by_start = {r.start + 1: r for r in rerere.parse_regions(commit_text, size)}
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        region = by_start.get(item.get("start_line") or -1)
        key = (region.key(path) if region is not None
               else rerere.hunk_key(path, item.get("ours", ""), item.get("base") or "",
                                    item.get("theirs", "")))
        out.setdefault(key, item)
    return out


def takes_a_side(item: dict[str, Any]) -> bool:
    """An item answered with one side's whole file: a whole-file conflict, or a ``manual``
    item whose file the fork never changed (upstream's version applies as it is)."""
    return item.get("kind") == "file" or applies_as_is(item)


async def take_whole_file(run: Runner, branch: Branch, path: str, side: str,
                          item: dict[str, Any], tag: str) -> str:
    """Put one side's version of a whole-file conflict (modify/delete, binary), or of a
    ``manual`` item the fork never changed, back."""
    sides = item.get("sides") or {}
    how = (f"Push the version you want (or delete the file), then record the decision "
           f"with `/sync answer {item['id']} ours` or `/sync answer {item['id']} theirs`.")
    if side not in ("ours", "theirs") or side not in sides:
        raise CommandFailed(
            f"`{path}` has a whole-file conflict ({item.get('reason', 'CONFLICT')}), not "
            f"conflict markers, so only `ours` or `theirs` can resolve it. {how}")
    done = await asyncio.to_thread(gitops.commit_with_trailer, branch.git, branch.head, tag)
    if done:
        return f"\n\nDone already in {done[:12]}."
    entry = sides[side]
    if entry is not None and not await _fetch_object(run, branch, entry):
        raise CommandFailed(f"{side}'s version of `{path}` is no longer in my caches. "
                            f"{how}")
    message = (f"forksync: resolve {path} with {side}\n\nRequested by @{run.req.author} "
               f"in #{run.req.pr} ({item['id']}).\n\n{TRAILER}: {tag}\n")
    commit = await asyncio.to_thread(gitops.commit_entry, branch.git, branch.head, path,
                                     entry, message)
    if commit is None:
        return (f"\n\n`{path}` is already {side}'s version at `{branch.head[:12]}`; "
                "nothing to change.")
    await run.push(branch, commit)
    what = "deleted" if entry is None else f"set to {side}'s version"
    return (f"\n\n`{path}` is {what} in {commit[:12]} ({item['id']}). The checklist "
            "and the check update after the rescan.")


async def _fetch_object(run: Runner, branch: Branch, entry: dict[str, str]) -> bool:
    """The side's object in the fork cache: from a local cache, else from the fork or upstream.

    The caches are partial clones, so fork main's version may be only on the server,
    and an upstream version only in the upstream repository.
    """
    if await asyncio.to_thread(_bring_object, run, branch.git, entry):
        return True
    wanted = {entry["oid"]: "a whole-file side"}
    with contextlib.suppress(ForksyncError):  # not the fork's: maybe the upstream's
        await asyncio.to_thread(remote.fetch_blobs, branch.git.git_dir, branch.url, wanted,
                                branch.token)
        return True
    upstream = run.state.get("upstream")
    if upstream:
        cache = await asyncio.to_thread(remote.ensure_mirror, run.ctx.cache_dir, upstream)
        with contextlib.suppress(ForksyncError):  # UpstreamRefused too: no upstream side
            access = await upstream_access(run.ctx, run.req.fork, run.req.installation_id,
                                           upstream)
            await asyncio.to_thread(remote.fetch_blobs, cache, access.url, wanted,
                                    access.token)
    return await asyncio.to_thread(_bring_object, run, branch.git, entry)


def _bring_object(run: Runner, git: Git, entry: dict[str, str]) -> bool:
    """Make the side's object readable in the fork cache (it may only be upstream's)."""
    if entry["mode"] == "160000" or git.run_proc("cat-file", "-e", entry["oid"]).returncode \
            == 0:
        return True
    upstream = run.state.get("upstream")
    # The engine's scratch repositories (pipeline.work_repo) hold translated blobs.
    candidates = _own_scratch(run.ctx.settings.work_dir / "work", git)
    if upstream:
        candidates.insert(0, remote.ensure_mirror(run.ctx.cache_dir, upstream))
    for repo in candidates:
        proc = Git(repo).run_proc("cat-file", "blob", entry["oid"])
        if proc.returncode == 0:
            return git.hash_blobs([proc.stdout]) == [entry["oid"]]
    return False


def _own_scratch(work: Path, fork: Git) -> list[str]:
    """The scratch repositories made for this fork: their alternates name its objects.

    Never another fork's, even though an object id from our own plan could only match
    content this fork's sync already read.
    """
    mine = Path(fork.object_dir()).resolve()
    out = []
    for repo in sorted(work.glob("*.git")):
        with contextlib.suppress(OSError):
            lines = (repo / "objects" / "info" / "alternates").read_text().splitlines()
            if any(Path(line).resolve() == mine for line in lines if line.strip()):
                out.append(str(repo))
    return out


__all__ = ["resolve", "resolve_items", "resolve_regions", "take_whole_file", "takes_a_side"]
