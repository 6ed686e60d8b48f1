"""``/sync extend [#N|sha]`` and ``/sync refresh``: redo the merge, and lose no human work.

Extend moves the window's tip; refresh moves the fork main the merge starts from. Both
run the same steps:

1. record every resolution people made on the branch (``bot.sync.commands.replay``);
2. make a new commit 1 with the engine;
3. replay the resolutions onto it in a second commit, and carry people's other edits over
   with a 3-way file merge. If people pushed commits, that second commit also has the old
   head as a parent: the push is then a fast-forward and their commits stay in the
   history (DESIGN: never force-push over commits people pushed). Only a branch that
   holds nothing but the bot's own commits is replaced;
4. remember the new heads in ``sync["pending"]``, push with a lease on the head read,
   then :func:`finish_rebuild` points the state, the PR body, the review and the check
   at the new commit 1. A retry that finds its push done only runs that last step.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bot.engine.anchor import PrDiff
from bot.engine.config import CONFIG_PATH
from bot.engine.git import Git
from bot.engine.model import marker_sizes
from bot.engine.rerere import Earlier, hunk_key
from bot.engine.review import build_delivery, local_diff, one_click_ids, plan_items
from bot.github import remote
from bot.github.checks import upsert_check_run
from bot.github.pulls import post_delivery
from bot.sync.access import UpstreamRefused, upstream_access
from bot.sync.commands import gitops
from bot.sync.commands.parse import Extend, Refresh
from bot.sync.commands.replay import Recorded, Replayed, record_branch, replay_onto
from bot.sync.commands.request import CommandFailed, join_and
from bot.sync.commands.runner import Branch, Runner
from bot.sync.publish.fetch import window_trees
from bot.sync.publish.pr import pr_title, render_pr_body
from bot.sync.publish.review import record
from bot.sync.state import load_plan, remember_pushed, save_plan

if TYPE_CHECKING:
    from bot.engine.config import Config
    from bot.engine.pipeline import SyncResult

MAX_RESOLUTIONS = 20_000  # recorded hunks kept per sync; far beyond any real window
_LOCAL_WORK_BRANCH = "forksync/command-work"


@dataclass
class _Inputs:
    """The fork main and the upstream mirror a new merge starts from, both just fetched."""

    fork_branch: str
    fork_main: str
    config: Config
    upstream_git: str
    workflows: bool  # the push may change workflow files (the App's Workflows permission)
    upstream_url: str
    upstream_token: str | None  # what reads the upstream (bot.sync.access); None: anonymous


async def rebuild(run: Runner, command: Extend | Refresh) -> str:
    """Redo the merge (new tip or newer fork main) and replay every resolution made."""
    sync = run.sync
    old_plan = load_plan(sync, run.ctx.store)
    branch = await run.read_branch()
    pending = sync.get("pending")
    if pending and pending.get("head") == branch.head:
        await finish_rebuild(run, pending)  # a retry after the push: only the rest
        return str(pending["reply"])
    sync.pop("pending", None)

    inputs = await _fetch_inputs(run, branch, old_plan)
    old_tip = str(sync.get("tip") or old_plan["tip"])
    if isinstance(command, Extend):
        tip = await _extend_tip(command, Git(inputs.upstream_git),
                                inputs.config.upstream_branch, old_tip)
    else:
        tip = old_tip
        if inputs.fork_main == sync.get("ours"):
            return (f"The sync is already based on the newest `{inputs.fork_branch}` "
                    f"(`{inputs.fork_main[:12]}`); nothing to refresh.")

    recorded = await _record(run, branch, old_plan)  # 1.
    result, plan_json = await _merge(run, branch, inputs, tip, old_plan)  # 2.
    commit1 = str(result.commit)
    replay, head = await _replay(run, command, branch, plan_json, commit1, old_plan,
                                 inputs.workflows)  # 3.
    show_earlier(plan_json, old_plan, replay.earlier, refresh=isinstance(command, Refresh))

    # 4. Remember the new heads before pushing, then push over the head just read.
    answers, dropped = migrate_answers(old_plan, plan_json, dict(sync.get("answers", {})))
    # A confirmed whole file follows its item to the new id (it stays confirmed only while
    # the file is that very blob, which the rescan checks).
    confirmed = dict(sync.get("confirmed", {}))
    moved, _ = migrate_answers(old_plan, plan_json, {k: k for k in confirmed})
    reply = rebuild_text(command, old_plan, plan_json, recorded, replay, branch.head, head,
                         dropped)
    pending = {
        "head": head, "commit": commit1, "tip": plan_json["tip"], "ours": inputs.fork_main,
        "window_label": plan_json.get("window_label"), "answers": answers,
        "confirmed": {new_id: confirmed[old_id] for new_id, old_id in moved.items()},
        "report_path": result.report_path,
        **await asyncio.to_thread(save_plan, run.ctx.settings, run.req.fork, commit1,
                                  plan_json, run.ctx.store),
        "reply": reply,
    }
    sync["pending"] = pending
    remember_pushed(run.state, commit1)
    remember_pushed(run.state, head)
    await run.save()
    await run.push(branch, head)
    await finish_rebuild(run, pending)
    return reply


async def _fetch_inputs(run: Runner, branch: Branch, old_plan: dict[str, Any]) -> _Inputs:
    """Fetch the fork main, read its config, and fetch the upstream branch it names."""
    from bot.engine.config import load_config

    fork_branch = str(run.state.get("fork_branch") or old_plan.get("fork_branch") or "main")
    fork_main = await asyncio.to_thread(remote.fetch_branch, branch.git.git_dir, branch.url,
                                        fork_branch, branch.token)
    if fork_main is not None:  # the caches hold commits: its tree and config come now
        await asyncio.to_thread(remote.fetch_files, branch.git.git_dir, branch.url, [fork_main],
                                [CONFIG_PATH], branch.token, base=run.sync.get("ours"))
    config_text = await asyncio.to_thread(gitops.read_text, branch.git, fork_main or "",
                                          CONFIG_PATH)
    if fork_main is None or config_text is None:
        raise CommandFailed(f"the fork's `{fork_branch}` branch has no `{CONFIG_PATH}` "
                            "any more, so I cannot redo the merge.")
    config = load_config(config_text, CONFIG_PATH)
    upstream = config.upstream_repo
    upstream_branch = config.upstream_branch
    try:
        access = await upstream_access(run.ctx, run.req.fork, run.req.installation_id,
                                       upstream)
    except UpstreamRefused as exc:
        raise CommandFailed(str(exc)) from None
    upstream_git = await asyncio.to_thread(remote.ensure_mirror, run.ctx.cache_dir, upstream)
    await asyncio.to_thread(remote.fetch_branch, upstream_git, access.url, upstream_branch,
                            access.token)
    return _Inputs(fork_branch, fork_main, config, upstream_git,
                   await run.ctx.may_write_workflows(run.req.installation_id), access.url,
                   access.token)


async def _extend_tip(command: Extend, up: Git, upstream_branch: str, old_tip: str) -> str:
    """The new tip ``/sync extend`` names; it must come after the window's tip."""
    from bot.engine.window import resolve_rev

    rev = f"#{command.pr}" if command.pr is not None else command.sha or upstream_branch
    tip = await asyncio.to_thread(resolve_rev, up, rev, f"refs/heads/{upstream_branch}",
                                  "the extend target")
    if tip == old_tip or up.is_ancestor(tip, old_tip):
        raise CommandFailed(f"{command.target} (`{tip[:12]}`) is already in this "
                            f"window, which ends at `{old_tip[:12]}`.")
    if not up.is_ancestor(old_tip, tip):
        raise CommandFailed(f"{command.target} (`{tip[:12]}`) does not come after this "
                            f"window's tip `{old_tip[:12]}` on upstream "
                            f"`{upstream_branch}`.")
    return tip


async def _record(run: Runner, branch: Branch, old_plan: dict[str, Any]) -> Recorded:
    """1. Record what people resolved so far (before anything can fail on the way)."""
    sync = run.sync
    recorded = await asyncio.to_thread(record_branch, branch.git, old_plan, sync["commit"],
                                       branch.head)
    store: dict[str, str] = sync.setdefault("rerere", {})
    store.update(recorded.resolutions)
    hunks: dict[str, dict[str, str]] = sync.setdefault("rerere_hunks", {})
    hunks.update(recorded.hunks)
    if len(store) > MAX_RESOLUTIONS:
        sync["rerere"] = dict(list(store.items())[-MAX_RESOLUTIONS:])
    sync["rerere_hunks"] = {k: v for k, v in hunks.items() if k in sync["rerere"]}
    await run.save()
    return recorded


async def _merge(run: Runner, branch: Branch, inputs: _Inputs, tip: str,
                 old_plan: dict[str, Any]) -> tuple[SyncResult, dict[str, Any]]:
    """2. The new merge: commit 1 on a local work branch of the fork cache."""
    from bot.engine.pipeline import needs
    from bot.engine.pipeline import sync as engine_sync

    git = branch.git
    git.run("update-ref", "-d", f"refs/heads/{_LOCAL_WORK_BRANCH}", ok_codes=(0, 1))
    args: dict[str, Any] = {
        "to_rev": tip, "config": inputs.config, "fork_branch": inputs.fork_branch,
        "workdir": str(run.ctx.settings.work_dir),
        "git_timeout": run.ctx.settings.git_timeout_seconds, "workflows": inputs.workflows}
    # The caches are partial clones: the window's trees, then the blobs the merge reads.
    await window_trees(inputs.upstream_git, inputs.upstream_url, old_plan["cutoff"], tip,
                       inputs.upstream_token)
    wanted = await asyncio.to_thread(needs, git.git_dir, inputs.upstream_git, **args)
    await asyncio.to_thread(remote.fetch_blobs, git.git_dir, branch.url, wanted.fork,
                            branch.token, repo="the fork repository")
    await asyncio.to_thread(remote.fetch_blobs, inputs.upstream_git, inputs.upstream_url,
                            wanted.upstream, inputs.upstream_token,
                            repo="the upstream repository")
    result = await asyncio.to_thread(engine_sync, git.git_dir, inputs.upstream_git,
                                     branch=_LOCAL_WORK_BRANCH, **args)
    plan_json: dict[str, Any] = result.plan.to_json()
    if plan_json["cutoff"] != old_plan["cutoff"]:
        raise CommandFailed(
            f"`{inputs.fork_branch}` now starts from upstream `{plan_json['cutoff'][:12]}`, "
            f"not this window's cutoff `{old_plan['cutoff'][:12]}` (a newer sync was merged). "
            "Close this PR; the next sync starts from there.")
    return result, plan_json


async def _replay(run: Runner, command: Extend | Refresh, branch: Branch,
                  plan_json: dict[str, Any], commit1: str, old_plan: dict[str, Any],
                  workflows: bool) -> tuple[Replayed, str]:
    """3. Replay the resolutions, and carry people's other edits over; returns the head."""
    sync = run.sync
    git = branch.git
    replay = await asyncio.to_thread(
        replay_onto, git, plan_json, commit1, dict(sync["rerere"]), old_commit=sync["commit"],
        old_head=branch.head, hunks=dict(sync.get("rerere_hunks", {})),
        old_sizes=marker_sizes(old_plan), workflows=workflows)
    # Commits people pushed are never dropped from the branch: then the replay commit
    # also has the old head as a parent, and the push is a fast-forward.
    people = await asyncio.to_thread(gitops.commits_by_people, git, sync["commit"],
                                     branch.head, set(run.state.get("pushed", [])))
    head = commit1
    if replay.files or people:
        verb = "extend" if isinstance(command, Extend) else "refresh"
        message = (f"forksync: replay {replay.replayed} resolutions\n\n"
                   f"Recorded from {branch.head[:12]} for `/sync {verb}` requested by "
                   f"@{run.req.author} in #{run.req.pr}.\n")
        if people:
            message += (f"\nThe previous head {branch.head[:12]} is its second parent, so "
                        + (f"the {len(people)} commits people pushed stay" if len(people) != 1
                           else "the commit people pushed stays") + " in the history.\n")
        # Dated like commit 1, so a retried job makes the very same commit.
        date = git.text("log", "-1", "--format=%ct +0000", commit1).strip()
        head = await asyncio.to_thread(
            gitops.commit_files, git, commit1, replay.files, message, date=date,
            extra_parents=[branch.head] if people else [])
    replay.kept_history = bool(people)
    return replay, head


async def finish_rebuild(run: Runner, pending: dict[str, Any]) -> None:
    """Point the state at the new commit 1, then update the PR, its review and check."""
    from bot.sync.followup import read_head

    sync = run.sync
    for key in ("resolved", "remaining", "review_commit", "unanchored", "delivery", "resolutions",
                "resolved_by_command", "refused_head"):
        sync.pop(key, None)
    sync.update({k: v for k, v in pending.items()
                 if k not in ("head", "reply", "report_path")})
    sync["behind"] = 0
    sync["head"] = pending["head"]
    pull = await run.gh.getitem(f"/repos/{run.req.fork}/pulls/{run.req.pr}")
    html = (pull.get("base") or {}).get("repo", {}).get("html_url") \
        or f"https://github.com/{run.req.fork}"
    sync["report_url"] = (f"{html}/blob/{sync['commit']}/{pending['report_path']}"
                          if pending.get("report_path") else None)
    sync.pop("pending", None)
    await run.save()

    plan_json = load_plan(sync, run.ctx.store)
    git = Git(await asyncio.to_thread(remote.ensure_mirror, run.ctx.cache_dir, run.req.fork))
    result, _, _ = await asyncio.to_thread(read_head, git.git_dir, plan_json, sync,
                                           pending["head"])
    sync["resolved"] = result.resolved
    sync["remaining"] = [r.to_json() for r in result.remaining]

    still_open = {r.item_id for r in result.remaining}
    items = [i for i in plan_items(plan_json) if i["id"] in still_open]
    diff = await asyncio.to_thread(local_diff, git.git_dir, sync["ours"], sync["commit"])
    delivery = build_delivery(plan_json, PrDiff.parse(diff), sync["commit"], items=items,
                              answers=dict(sync.get("answers", {})))
    record(sync, delivery)
    await run.save()

    await run.patch_pr(pull, render_pr_body(plan_json, sync), title=pr_title(plan_json))
    if sync.get("review_commit") != sync["commit"]:
        # One review on the new commit 1 for the items still open (find-or-create), posted
        # the way the publisher posts it; what GitHub refused (422) moves to the PR body.
        posted = await post_delivery(run.gh, run.req.fork, run.req.pr, delivery)
        sync["review_commit"] = sync["commit"]
        if posted.unplaced() != delivery.unplaced():
            record(sync, posted)
            await run.save()
            pull = await run.gh.getitem(f"/repos/{run.req.fork}/pulls/{run.req.pr}")
            await run.patch_pr(pull, render_pr_body(plan_json, sync))
    check_id = await upsert_check_run(run.gh, run.req.fork, pending["head"], plan_json,
                                      result.remaining, behind=0,
                                      one_click=one_click_ids(sync), max_batches=1)
    sync.setdefault("check_runs", {})[pending["head"]] = check_id
    await run.save()


def migrate_answers(old_plan: dict[str, Any], new_plan: dict[str, Any],
                    answers: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """Carry answers to the new plan's item ids (matched by path and hunk); list the lost."""

    def identity(item: dict[str, Any]) -> tuple[str, str, str, str, str]:
        return (item["path"], item.get("kind", ""), item.get("ours", ""),
                item.get("base") or "", item.get("theirs", ""))

    old_items = {i["id"]: i for f in old_plan["files"] for i in f["review_items"]}
    new_by_identity: dict[tuple[str, str, str, str, str], str] = {}
    for f in new_plan["files"]:
        for item in f["review_items"]:
            new_by_identity.setdefault(identity(item), item["id"])
    migrated: dict[str, str] = {}
    dropped: list[str] = []
    for old_id, choice in answers.items():
        old = old_items.get(old_id)
        new_id = new_by_identity.get(identity(old)) if old else None
        if new_id is None:
            dropped.append(old_id)
        else:
            migrated[new_id] = choice
    return migrated, dropped


def show_earlier(plan_json: dict[str, Any], old_plan: dict[str, Any],
                 earlier: dict[str, Earlier], *, refresh: bool) -> None:
    """Put people's earlier resolution beside each region the new merge changed again.

    The item says what they had chosen and which upstream PRs changed the spot since; where
    the resolution still applies (it kept a side that did not change) it becomes the
    item's suggestion, one click away.
    """
    if not earlier:
        return
    before = {e["number"] for e in old_plan.get("window", []) if e.get("number") is not None}
    for f in plan_json.get("files", []):
        for item in f.get("review_items", []):
            if item.get("kind") != "conflict" or item.get("start_line") is None:
                continue
            found = earlier.get(hunk_key(item["path"], item.get("ours", ""),
                                         item.get("base") or "", item.get("theirs", "")))
            if found is None:
                continue
            new_prs = [n for n in item.get("prs", []) if n not in before]
            changed = (f"upstream changed it again in {', '.join(f'#{n}' for n in new_prs)}"
                       if new_prs else "the fork's main changed it since" if refresh
                       else "the new merge changed it again")
            how = {"ours": "ours (the fork's side)", "theirs": "theirs (upstream's side)"}.get(
                found.how, "your own edit")
            note = f"You resolved this as {how}; {changed}."
            item["earlier"] = {"text": found.text, "how": found.how, "applies": found.applies,
                               "prs": new_prs, "note": note}
            if found.applies:
                # A proposal a person already made: to confirm, not to decide anew.
                tiers = plan_json.setdefault("summary", {}).setdefault("tiers", {})
                if item.get("tier") == "Decide" and tiers.get("Decide"):
                    tiers["Decide"] -= 1
                    tiers["Confirm"] = tiers.get("Confirm", 0) + 1
                    item["tier"] = "Confirm"
                item["suggestion"] = found.text
                # The rule's reason described another proposal: this one is the person's.
                item["question"] = item["reason"] = (
                    f"{note} The suggestion keeps your earlier resolution; commit it, or "
                    "decide anew.")
            else:
                item["reason"] = f"{note} {item.get('reason', '')}".strip()


def rebuild_text(command: Extend | Refresh, old_plan: dict[str, Any], plan_json: dict[str, Any],
                 recorded: Recorded, replay: Replayed, old_head: str, new_head: str,
                 dropped: list[str]) -> str:
    """The reply to extend or refresh: the new window, what was replayed, file by file (once)."""
    if isinstance(command, Extend):
        first = (f"Extended the window to {command.target}: now "
                 f"{plan_json.get('window_label')} (was {old_plan.get('window_label')}).")
    else:
        first = (f"Refreshed the sync onto the newest fork main `{plan_json['ours'][:12]}` "
                 f"(was `{old_plan['ours'][:12]}`).")
    conflicts = plan_json.get("summary", {}).get("status", {}).get("conflict", 0)
    lines = [first, "",
             f"- New commit 1: the merge with {conflicts} conflicted file"
             f"{'s' if conflicts != 1 else ''}.",
             f"- Replayed **{replay.replayed}** recorded resolution"
             f"{'s' if replay.replayed != 1 else ''}"
             + (f" in a second commit `{new_head[:12]}`." if replay.files else ".")]
    if replay.kept_history:
        lines.append(f"- The commits people pushed stay in the branch's history: the previous "
                     f"head `{old_head[:12]}` is a parent of the new head, so this was a "
                     "fast-forward, not a force-push.")
    notes = file_notes(recorded, replay, old_head)
    if notes:
        lines.append("- Files people had changed, and what became of their work:")
        lines += [f"  - `{path}`: {'; '.join(said)}." for path, said in list(notes.items())[:30]]
        if len(notes) > 30:
            lines.append(f"  - … and {len(notes) - 30} more files; compare with "
                         f"`{old_head[:12]}`.")
    if dropped:
        lines.append(f"- Answers to {join_and(dropped)} no longer match an item and were "
                     "dropped.")
    lines.append(f"- The previous head was `{old_head[:12]}`.")
    return "\n".join(lines)


def file_notes(recorded: Recorded, replay: Replayed, old_head: str) -> dict[str, list[str]]:
    """Per path people changed, what happened to their work: each path once, in path order."""
    notes: dict[str, list[str]] = {}
    for path, n in replay.changed_again.items():
        notes.setdefault(path, []).append(
            f"{n} resolved region{'s' if n != 1 else ''} changed again in the new merge, so "
            f"{'it is' if n == 1 else 'they are'} back whole, with your earlier resolution "
            "shown in the review comment")
    for path in replay.carried:
        notes.setdefault(path, []).append("other edits carried over")
    for path in replay.partly:
        notes.setdefault(path, []).append(
            "other edits carried over, except those overlapping the new merge, which were "
            f"**not** (compare with `{old_head[:12]}`)")
    for path in replay.not_carried:
        notes.setdefault(path, []).append(
            f"edits overlap the new merge and were **not** carried over (compare with "
            f"`{old_head[:12]}`)")
    for path in replay.workflow_files:
        notes.setdefault(path, []).append(
            "a workflow file, which forksync may not change without the Workflows "
            f"permission: your edit stays in the history (`{old_head[:12]}`), to push again")
    for path in recorded.unplaced:
        notes.setdefault(path, []).append(
            "some resolutions could not be recorded because the lines around them changed "
            f"too (see `{old_head[:12]}`)")
    return dict(sorted(notes.items()))


__all__ = ["MAX_RESOLUTIONS", "file_notes", "finish_rebuild", "migrate_answers", "rebuild",
           "rebuild_text", "show_earlier"]
