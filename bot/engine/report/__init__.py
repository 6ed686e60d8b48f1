"""Reports rendered from the JSON report (``Plan.to_json()``): pure text in, text out.

The seam with the publisher (and ``forksync sync --preview``) is these functions; their
signatures are kept stable:

- ``render_section(plan, *, resolved, answers, behind, unanchored, report_url,
  report_path, posted, one_click, limit) -> str``: the bot's section of the PR body
  (``render_body`` is the same for a new PR). ``posted`` is how many items got a thread
  and ``one_click`` which have a suggestion button; the body claims no more. A report
  file is named only when one was written (``report_url`` or ``report_path``).
- ``render_comment(items, plan=None, *, anchor=None, blob_url=None, limit) -> str``: one
  review-thread body for a group of items; the ```suggestion``` block is for ``anchor``'s
  region; ``blob_url`` (the file at the sync commit) is linked where a long side is cut.
  ``render_review_comment(item, plan=None, *, blob_url=None)`` is the one-item case.
- ``render_check_output(plan, remaining_markers, open_decisions, *, open_regions) ->
  (title, summary)`` (the open items named by id, counted as the PR body counts them) and
  ``warning_annotations(plan) -> list[annotation]``: the check run.
- ``group_items(plan, *, skip) -> list[Group]``: items grouped (by upstream PR and shape)
  and ranked, each group with its recommended action and one ``/sync answer`` command.
- ``workflow_changes(plan, ids=None) -> list[str]``: upstream's changes to workflow files
  kept as the fork has them (no Workflows permission), with diffs, for the body and check.

Every body and comment stays within ``BODY_LIMIT`` with fences and ``<details>`` closed.
"""

from bot.engine.report.body import (
    BEGIN,
    END,
    STATUS_ORDER,
    TIERS,
    file_done,
    human_summary,
    merge_body,
    needs_overflow,
    open_items,
    render_body,
    render_json,
    render_markdown,
    render_section,
    tip_reason,
)
from bot.engine.report.check import render_check_output, warning_annotations
from bot.engine.report.comments import render_comment, render_review_comment
from bot.engine.report.groups import (
    Group,
    group_items,
    id_ranges,
    own_question,
    recommend,
    who_deleted,
)
from bot.engine.report.limits import (
    BODY_LIMIT,
    CHECK_SUMMARY_LIMIT,
    SIDE_LIMIT,
    balanced_cut,
    cut_side,
    fence,
    is_balanced,
)
from bot.engine.report.workflows import workflow_changes

__all__ = [
    "BEGIN", "BODY_LIMIT", "CHECK_SUMMARY_LIMIT", "END", "SIDE_LIMIT", "STATUS_ORDER", "TIERS",
    "Group", "balanced_cut", "cut_side", "fence", "file_done", "group_items", "human_summary",
    "id_ranges", "is_balanced", "merge_body", "needs_overflow", "open_items", "own_question",
    "recommend",
    "render_body", "render_check_output", "render_comment", "render_json", "render_markdown",
    "render_review_comment", "render_section", "tip_reason", "warning_annotations",
    "who_deleted", "workflow_changes",
]
