"""The ``forksync`` check run through the REST API: find it, create or update it, or fail it.

It is the gate that blocks the merge. Annotations go out 50 per request (GitHub's
limit), and a rerun sends only what differs, so a crash between requests never sends
an annotation twice. What the check says is built purely in :mod:`bot.engine.gate`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from bot.engine.gate import (
    CHECK_NAME,
    MAX_ANNOTATIONS,
    Remaining,
    annotation_batches,
    check_output,
    check_run_request,
    clip_summary,
)
from bot.github.client import GitHubClient

__all__ = ["CHECK_NAME", "MAX_ANNOTATIONS", "find_check_run", "report_error",
           "upsert_check_run"]


async def find_check_run(gh: GitHubClient, fork: str, sha: str) -> Any | None:
    data = await gh.getitem(f"/repos/{fork}/commits/{sha}/check-runs?check_name={CHECK_NAME}")
    runs = [r for r in (data or {}).get("check_runs", []) if r.get("name") == CHECK_NAME]
    return runs[0] if runs else None


async def upsert_check_run(gh: GitHubClient, fork: str, sha: str, plan_json: dict[str, Any],
                           remaining: Sequence[Remaining], *, behind: int = 0,
                           one_click: Collection[str] | None = None,
                           max_batches: int | None = None) -> int:
    """Find-or-create the ``forksync`` check on ``sha``; send only what differs.

    Annotations go out 50 per request. ``max_batches`` caps those requests (a push
    rescan keeps to one); the summary still names every remaining file. ``one_click``
    is the ids whose posted thread has a suggestion button (``one_click_ids(sync)``).
    """
    conclusion, title, summary = check_output(plan_json, remaining, behind=behind,
                                              one_click=one_click)
    batches = annotation_batches(plan_json, remaining)
    if max_batches is not None:
        batches = batches[:max_batches]
    run = await find_check_run(gh, fork, sha)
    if run is None:
        # The very request body `forksync sync --preview` writes to check.json.
        run = await gh.post(f"/repos/{fork}/check-runs",
                            data=check_run_request(plan_json, remaining, sha, behind=behind,
                                                   one_click=one_click))
        start = 1
    else:
        output = run.get("output") or {}
        same = (run.get("status") == "completed" and run.get("conclusion") == conclusion
                and output.get("title") == title and output.get("summary") == summary)
        # Annotations accumulate on GitHub: after a crash between batches, go on from
        # the first batch not sent yet rather than send any twice.
        start = -(-int(output.get("annotations_count") or 0) // MAX_ANNOTATIONS)
        if same and start >= len(batches):
            return int(run["id"])
        if not same:
            await gh.patch(f"/repos/{fork}/check-runs/{run['id']}", data={
                "status": "completed", "conclusion": conclusion,
                "output": {"title": title, "summary": summary,
                           "annotations": batches[start] if start < len(batches) else []}})
            start += 1
    for batch in batches[start:]:
        await gh.patch(f"/repos/{fork}/check-runs/{run['id']}", data={
            "output": {"title": title, "summary": summary, "annotations": batch}})
    return int(run["id"])


async def report_error(gh: GitHubClient, fork: str, sha: str, title: str, text: str) -> None:
    """A failure people must fix, with no PR to say it in: a failing check on the fork's head."""
    run = await find_check_run(gh, fork, sha)
    output = (run or {}).get("output") or {}
    if run is not None and output.get("title") == title[:1000] \
            and output.get("summary") == clip_summary(text):
        return  # said so already
    if run is not None:
        await gh.patch(f"/repos/{fork}/check-runs/{run['id']}", data={
            "status": "completed", "conclusion": "failure",
            "output": {"title": title[:1000], "summary": clip_summary(text)}})
        return
    await gh.post(f"/repos/{fork}/check-runs", data={
        "name": CHECK_NAME, "head_sha": sha, "status": "completed", "conclusion": "failure",
        "output": {"title": title[:1000], "summary": clip_summary(text)}})
