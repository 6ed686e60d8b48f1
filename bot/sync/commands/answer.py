"""``/sync answer <Qn|Mn> <choice>``: record a decision on one review item or marker-like line.

Answering a conflict region with ``ours``, ``theirs`` or ``suggested`` also rewrites that
region on the sync branch (the suggestion comment promises it); answering a whole-file
conflict puts that side's file back, and ``confirm`` accepts the file as it is on the
branch now (the check passes only while it stays so). ``theirs`` on a ``manual`` item
whose file the fork never changed puts upstream's version on the branch too. ``M<n>``
names a line the check could not tell from a conflict marker; ``content`` keeps it.
Every answer re-renders the decisions in the PR body.
"""

from __future__ import annotations

import asyncio
from typing import Any

from bot.engine.follow import twin_texts
from bot.engine.rescan import CONFIRM, read_head, tree_entries
from bot.sync.commands.parse import Answer
from bot.sync.commands.request import CommandFailed, join_and
from bot.sync.commands.resolve import (
    resolve_items,
    resolve_regions,
    take_whole_file,
    takes_a_side,
)
from bot.sync.commands.runner import Runner
from bot.sync.followup import fetch_read_files
from bot.sync.state import load_plan

CONTENT = "content"  # the answer that keeps a marker-like line as content
TWIN = "twin"  # the answer that gives conflict hunks the text their twins were resolved to
WHOLE_FILE_CHOICES = ("ours", "theirs", CONFIRM)


async def answer(run: Runner, command: Answer) -> str:
    """Record the decision; on a conflict region or a whole-file conflict, also take that side."""
    marker_lines = [q for q in command.questions if q.startswith("M")]
    if marker_lines:
        if len(marker_lines) != len(command.questions):
            raise CommandFailed("Answer marker-like lines (M1, …) and review items (Q1, …) in "
                                "separate commands.")
        plan_json = load_plan(run.sync, run.ctx.store)
        return "\n\n".join([await _answer_marker_line(run, plan_json, q, command.choice)
                             for q in marker_lines])
    if command.choice.lower() == TWIN:
        return await answer_twins(run, command)
    if len(command.questions) > 1:
        return await answer_many(run, command)
    sync = run.sync
    plan_json = load_plan(sync, run.ctx.store)
    item = _item(plan_json, command.question)
    choice = validate_answer(item, command.question, command.choice)
    answers: dict[str, str] = sync.setdefault("answers", {})
    extra = ""
    head_before = sync.get("head")
    if choice == CONFIRM and item.get("kind") == "file":
        return await _confirm_file(run, plan_json, item)
    if choice in ("ours", "theirs", "suggested") and item.get("start_line") is not None:
        # The comment on a conflict region promises that answering takes that side.
        extra = await resolve_regions(run, item["path"], choice, only={item["id"]})
    elif choice in ("ours", "theirs") and takes_a_side(item) and item.get("sides"):
        branch = await run.read_branch()
        tag = f"{run.req.comment_id}:{item['path']}:{choice}"
        extra = await take_whole_file(run, branch, item["path"], choice, item, tag)
    if answers.get(item["id"]) != choice:
        # After a push the rescan of the new head updates the check; else do it here.
        await run.record_answer(plan_json, item["id"], choice,
                                check=sync.get("head") == head_before)
    return f"Recorded **{item['id']}**: `{choice}`. The decisions in the PR description " \
           f"are updated.{extra}"


async def answer_many(run: Runner, command: Answer) -> str:
    """``/sync answer Q21-Q33 theirs``: every item checked first, then one commit for all
    their regions, one PR update and one check update; whole-file items one by one."""
    sync = run.sync
    plan_json = load_plan(sync, run.ctx.store)
    items = [_item(plan_json, q) for q in command.questions]
    choices = {item["id"]: validate_answer(item, q, command.choice)
               for item, q in zip(items, command.questions, strict=True)}
    head_before = sync.get("head")
    regions: dict[str, set[str]] = {}
    whole = []
    confirmed: list[dict[str, Any]] = []
    for item in items:
        choice = choices[item["id"]]
        if choice in ("ours", "theirs", "suggested") and item.get("start_line") is not None:
            regions.setdefault(item["path"], set()).add(item["id"])
        elif choice in ("ours", "theirs") and takes_a_side(item) and item.get("sides"):
            whole.append(item)
        elif choice == CONFIRM and item.get("kind") == "file":
            confirmed.append(item)
    sides = {choices[i] for ids in regions.values() for i in ids}
    if len(sides) > 1:  # cannot happen with one choice; kept for a mixed-case choice
        raise CommandFailed("one command takes one side for all its regions")
    extra = await resolve_items(run, regions, sides.pop()) if regions else ""
    for item in whole:
        branch = await run.read_branch()
        tag = f"{run.req.comment_id}:{item['path']}:{choices[item['id']]}"
        extra += await take_whole_file(run, branch, item["path"], choices[item["id"]], item,
                                       tag)
    for item in confirmed:
        extra += "\n\n" + await _confirm_file(run, plan_json, item)
    await run.record_answers(plan_json, choices, check=sync.get("head") == head_before)
    ids = ", ".join(choices)
    return (f"Recorded {len(choices)} answers ({ids}): `{command.choice}`. The decisions in "
            f"the PR description are updated.{extra}")


async def answer_twins(run: Runner, command: Answer) -> str:
    """``/sync answer Q5-Q80 twin``: each hunk takes the text its twins (identical hunks)
    were all resolved to at the branch head, a hand-made resolution included, which
    ``ours``/``theirs``/``suggested`` cannot name. One commit for all, as ``answer_many``."""
    sync = run.sync
    plan_json = load_plan(sync, run.ctx.store)
    items = [_item(plan_json, q) for q in command.questions]
    lone = [str(i["id"]) for i in items if i.get("kind") != "conflict" or not i.get("twins")]
    if lone:
        raise CommandFailed(f"{join_and(lone)} {'has' if len(lone) == 1 else 'have'} no "
                            f"twins: `{TWIN}` gives a hunk the text that hunks identical to it "
                            "were resolved to. Answer with `ours`, `theirs` or `suggested`, "
                            "or resolve by hand.")
    head_before = sync.get("head")
    branch = await run.read_branch()

    async def access() -> tuple[str, str]:
        return branch.url, branch.token

    # Read the head as the rescan reads it (files people changed outside the plan too).
    await fetch_read_files(branch.git, plan_json, sync, branch.head, access)
    result, _, _ = await asyncio.to_thread(read_head, branch.git.git_dir, plan_json, sync,
                                           branch.head)
    done = set(result.resolved)
    texts = twin_texts(plan_json, done, result.resolutions, result.texts)
    waiting = [str(i["id"]) for i in items if i["id"] not in done and i["id"] not in texts]
    if waiting:
        raise CommandFailed(
            f"{join_and(waiting)}: no twin of {'it' if len(waiting) == 1 else 'theirs'} is "
            f"resolved at `{branch.head[:12]}`, or its resolved twins got different texts. "
            f"Resolve one twin, push, then answer `{TWIN}` again.")
    open_ids = [i for i in items if i["id"] not in done]
    regions: dict[str, set[str]] = {}
    for item in open_ids:
        regions.setdefault(item["path"], set()).add(item["id"])
    extra = await resolve_items(run, regions, TWIN, texts, branch) if regions else ""
    choices = {str(i["id"]): TWIN for i in open_ids}
    if choices:
        await run.record_answers(plan_json, choices, check=sync.get("head") == head_before)
    skipped = [str(i["id"]) for i in items if i["id"] in done]
    one = len(skipped) == 1
    note = (f" {join_and(skipped)} {'was' if one else 'were'} resolved already and "
            f"{'is' if one else 'are'} left as {'it is' if one else 'they are'}."
            if skipped else "")
    return (f"Recorded {len(choices)} answer{'s' if len(choices) != 1 else ''}"
            + (f" ({', '.join(choices)})" if choices else "")
            + f": `{TWIN}`, the text their twins were resolved to.{note}{extra}")


async def _confirm_file(run: Runner, plan_json: dict[str, Any], item: dict[str, Any]) -> str:
    """``confirm`` on a whole-file item: the file as it is at the branch head is the answer."""
    sync = run.sync
    branch = await run.read_branch()
    path = item["path"]
    entry = (await asyncio.to_thread(tree_entries, branch.git, branch.head, [path]))[path]
    sync.setdefault("confirmed", {})[item["id"]] = entry
    sync.setdefault("answers", {})[item["id"]] = CONFIRM
    await run.save()
    # Always refresh: confirming again after the file changed must update the check.
    await run.refresh_pr(plan_json, answered=item["id"], check=sync.get("head") == branch.head)
    what = (f"deleted at `{branch.head[:12]}`" if entry is None
            else f"as it is at `{branch.head[:12]}` (blob `{entry['oid'][:12]}`)")
    return (f"Recorded **{item['id']}**: `{CONFIRM}`: `{path}` is accepted {what}. If the "
            "file changes again, the check asks again.")


async def _answer_marker_line(run: Runner, plan_json: dict[str, Any], question: str,
                              choice: str) -> str:
    """``/sync answer M<n> content``: a line the check asked about is content, not a marker."""
    sync = run.sync
    asked = [r for r in sync.get("remaining", [])
             if r.get("id") == question and r.get("orphan") and not r.get("marker")]
    if not asked:
        raise CommandFailed(f"The last check asks nothing as {question}; the marker-like "
                            "lines it asks about are listed in the check, as M1, M2, …")
    if choice.lower() != CONTENT:
        raise CommandFailed(f"{question} asks whether a line is a conflict marker. If it is "
                            f"content, answer `/sync answer {question} {CONTENT}`; if it is a "
                            "leftover of a merge, remove it and push.")
    (line,) = asked
    kept: list[str] = sync.setdefault("content_lines", {}).setdefault(line["path"], [])
    kept += [t for t in line.get("texts", []) if t not in kept]
    await run.save()
    await run.refresh_pr(plan_json, answered=question)
    where = (f"L{line['start_line']}" if line.get("start_line") == line.get("end_line")
             else f"L{line['start_line']}–{line['end_line']}")
    return (f"Recorded **{question}**: `{line['path']}` {where} is content, not a "
            "conflict marker; lines like it in that file are not asked about again.")


def validate_answer(item: dict[str, Any], question: str, choice: str) -> str:
    """The choice as recorded, or CommandFailed saying which choices the item takes."""
    choices = [str(c) for c in item.get("choices") or []]
    if item.get("kind") == "conflict" and choice.lower() in ("ours", "theirs", "suggested"):
        # Any conflict region, Settled ones too: its markers stay until someone takes a
        # side, and a comment that cannot carry a suggestion offers these commands.
        return choice.lower()
    if item.get("tier") == "Settled" or item.get("kind") == "policy":
        raise CommandFailed(f"{item['id']} is settled ({item.get('reason', '')}) and needs "
                            "no answer.")
    if item.get("kind") == "file":
        # A whole file is decided by what it holds: one side, or a confirmed version.
        choices = list(WHOLE_FILE_CHOICES)
    for known in choices:
        if known.lower() == choice.lower():
            return known
    if item.get("kind") == "manual" and choice.lower() in ("ours", "theirs", "suggested"):
        # Recorded as free text, it would close the port with the file unchanged.
        options = ", ".join(f"`{c}`" for c in choices)
        raise CommandFailed(f"`{choice}` would not change `{item['path']}`: {item['id']} is a "
                            f"port by hand (the fork rewrote the file). Port upstream's change, "
                            f"push, then answer one of {options}.")
    if item.get("kind") != "file" and (item.get("tier") == "Decide" or not choices):
        return choice  # a free-text decision
    options = ", ".join(f"`{c}`" for c in choices)
    raise CommandFailed(f"`{choice}` is not a choice for {item['id']}; choose one of {options}. "
                        f"Usage: `/sync answer {item['id']} <choice>`")


def _item(plan_json: dict[str, Any], question: str) -> dict[str, Any]:
    """The review item ``Qn`` names (any case), or CommandFailed saying which there are."""
    items = [i for f in plan_json.get("files", []) for i in f.get("review_items", [])]
    for item in items:
        if str(item["id"]).upper() == question.upper():
            found: dict[str, Any] = item
            return found
    if not items:
        raise CommandFailed(f"There is no {question}: this sync has no review items.")
    raise CommandFailed(f"There is no {question} in this sync; its items are "
                        f"{items[0]['id']}–{items[-1]['id']}.")


__all__ = ["TWIN", "answer", "answer_many", "answer_twins", "validate_answer"]
