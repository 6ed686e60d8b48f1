"""Upstream's changes to workflow files the sync kept as the fork has them, with diffs. Pure.

Without the App's *Workflows* permission GitHub refuses a push that changes
``.github/workflows/``, so the merge keeps the fork's files (``policy: "workflows"`` in
the JSON report) and each upstream change becomes an item to port by hand. The PR body
and the check list them here, each with its diff.
"""

from __future__ import annotations

from typing import Any

from bot.engine.report.limits import fence

Json = dict[str, Any]
WORKFLOW_DIFF_LIMIT = 10_000  # characters of one workflow file's diff in the PR body


def workflow_changes(plan: Json, ids: set[str] | None = None,
                     limit: int = WORKFLOW_DIFF_LIMIT) -> list[str]:
    """The section's lines (none when there is nothing to port).

    ``ids`` limits the list to those items (the check lists only the open ones).
    """
    items = [i for f in plan["files"] if f.get("policy") == "workflows"
             for i in f["review_items"] if ids is None or i["id"] in ids]
    if not items:
        return []
    out = ["### Workflow files to port by hand", "",
           "The App has no *Workflows* permission, and GitHub refuses an App's push that "
           "changes `.github/workflows/`, so these files stay as the fork has them. Port each "
           "upstream change by hand (your own push may change them) and answer "
           "`/sync answer <Qn> done`, or `skip`; docs/APP.md says how to grant the permission "
           "instead.", ""]
    for item in items:
        diff = item.get("theirs") or ""
        if len(diff) > limit:
            diff = diff[:limit] + "\n… (shortened)\n"
        prs = " · " + ", ".join(f"#{n}" for n in item["prs"]) if item.get("prs") else ""
        out += [f"<details><summary><b>{item['id']}</b> <code>{item['path']}</code>{prs}"
                "</summary>", "", fence(diff, "diff"), "", "</details>", ""]
    return out[:-1]


__all__ = ["WORKFLOW_DIFF_LIMIT", "workflow_changes"]
