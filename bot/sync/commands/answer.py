"""``/sync answer <Qn> <choice>``: record a decision on one review item.

Answering a conflict region with ``ours``, ``theirs`` or ``suggested`` also rewrites that
region on the sync branch (the suggestion comment promises it); answering a whole-file
conflict puts that side's file back. Every answer re-renders the decisions in the PR body.
"""

from __future__ import annotations

from typing import Any

from bot.sync.commands.parse import Answer
from bot.sync.commands.request import CommandFailed
from bot.sync.commands.resolve import resolve_items, resolve_regions, take_whole_file
from bot.sync.commands.runner import Runner
from bot.sync.state import load_plan


async def answer(run: Runner, command: Answer) -> str:
    """Record the decision; on a conflict region or a whole-file conflict, also take that side."""
    if len(command.questions) > 1:
        return await answer_many(run, command)
    sync = run.sync
    plan_json = load_plan(sync)
    item = _item(plan_json, command.question)
    choice = validate_answer(item, command.question, command.choice)
    answers: dict[str, str] = sync.setdefault("answers", {})
    extra = ""
    head_before = sync.get("head")
    if choice in ("ours", "theirs", "suggested") and item.get("start_line") is not None:
        # The comment on a conflict region promises that answering takes that side.
        extra = await resolve_regions(run, item["path"], choice, only={item["id"]})
    elif choice in ("ours", "theirs") and item.get("kind") == "file" and item.get("sides"):
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
    plan_json = load_plan(sync)
    items = [_item(plan_json, q) for q in command.questions]
    choices = {item["id"]: validate_answer(item, q, command.choice)
               for item, q in zip(items, command.questions, strict=True)}
    head_before = sync.get("head")
    regions: dict[str, set[str]] = {}
    whole = []
    for item in items:
        choice = choices[item["id"]]
        if choice in ("ours", "theirs", "suggested") and item.get("start_line") is not None:
            regions.setdefault(item["path"], set()).add(item["id"])
        elif choice in ("ours", "theirs") and item.get("kind") == "file" and item.get("sides"):
            whole.append(item)
    sides = {choices[i] for ids in regions.values() for i in ids}
    if len(sides) > 1:  # cannot happen with one choice; kept for a mixed-case choice
        raise CommandFailed("one command takes one side for all its regions")
    extra = await resolve_items(run, regions, sides.pop()) if regions else ""
    for item in whole:
        branch = await run.read_branch()
        tag = f"{run.req.comment_id}:{item['path']}:{choices[item['id']]}"
        extra += await take_whole_file(run, branch, item["path"], choices[item["id"]], item,
                                       tag)
    await run.record_answers(plan_json, choices, check=sync.get("head") == head_before)
    ids = ", ".join(choices)
    return (f"Recorded {len(choices)} answers ({ids}): `{command.choice}`. The decisions in "
            f"the PR description are updated.{extra}")


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
    for known in choices:
        if known.lower() == choice.lower():
            return known
    if item.get("tier") == "Decide" or not choices:
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


__all__ = ["answer", "answer_many", "validate_answer"]
