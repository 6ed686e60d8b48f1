"""``/sync status``: what is left, what is done, and how far behind upstream the sync is.

Read-only: it reports the fork's state as the last rescan left it, and writes nothing.
"""

from __future__ import annotations

from typing import Any

from bot.engine.gate import Remaining, initial_remaining
from bot.sync.commands.request import join_and
from bot.sync.commands.runner import Runner
from bot.sync.state import load_plan


def status(run: Runner) -> str:
    """The reply to ``/sync status``."""
    sync = run.sync
    plan_json = load_plan(sync, run.ctx.store)
    return status_text(plan_json, sync)


def status_text(plan_json: dict[str, Any], sync: dict[str, Any]) -> str:
    """The ``/sync status`` reply: what is left, what is done, how far behind upstream."""
    items = [i for f in plan_json.get("files", []) for i in f.get("review_items", [])]
    answers: dict[str, str] = dict(sync.get("answers", {}))
    if "remaining" in sync:
        remaining = [Remaining.from_json(r) for r in sync["remaining"]]
    else:
        remaining = initial_remaining(plan_json, answers)
    regions_left = [r for r in remaining if r.region]
    strays = [r for r in remaining if r.orphan]
    # Every conflict region counts, Settled ones too: their markers stay until committed.
    region_total = sum(1 for i in items if i.get("kind") == "conflict"
                       and i.get("start_line") is not None)
    unknown = sum(1 for r in regions_left if r.item_id is None)
    left = len(regions_left) - unknown
    open_questions = [str(r.item_id) for r in remaining
                      if not r.marker and not r.orphan and r.item_id]
    files_left = sorted({r.path for r in regions_left})
    behind = int(sync.get("behind", 0))
    head = str(sync.get("head") or sync.get("commit") or "")
    lines = [f"**Status** of the sync {plan_json.get('window_label', '')}"
             + (f" at `{head[:12]}`" if head else "") + ":", ""]
    lines.append(f"- Conflict regions: **{left} remaining**, {region_total - left} resolved "
                 f"(of {region_total})"
                 + (f", in {join_and([f'`{p}`' for p in files_left[:10]])}"
                    + (f" and {len(files_left) - 10} more files" if len(files_left) > 10 else "")
                    if files_left else "") + ".")
    if unknown:
        lines.append(f"- {unknown} conflict region(s) that the sync did not write.")
    if strays:
        sure = [r for r in strays if r.marker]
        asked = [str(r.item_id) for r in strays if not r.marker]
        where = sorted({r.path for r in strays})
        lines.append(f"- Conflict marker lines outside any complete region: **{len(sure)}**"
                     + (f"; to confirm as content or remove: {join_and(asked[:20])}"
                        if asked else "")
                     + f" (in {join_and([f'`{p}`' for p in where[:10]])}).")
    lines.append(f"- Open questions: **{len(open_questions)}**"
                 + (f" ({join_and(open_questions[:20])})" if open_questions else "")
                 + (f"; {len(answers)} answered" if answers else "") + ".")
    if behind:
        lines.append(f"- Behind upstream by **{behind}** PR{'s' if behind != 1 else ''}; "
                     "`/sync extend` brings them in and replays every resolution made.")
    else:
        lines.append("- Up to date with upstream as of the last check.")
    if not remaining:
        lines += ["", "Nothing is left: the `forksync` check passes, and the PR can be "
                  "marked ready for review."]
    return "\n".join(lines)


__all__ = ["status", "status_text"]
