"""A pull request through the REST API: its diff, its body, and its ONE review.

The review is find-or-create (a hidden marker names its commit), and a 422 never loses
it: the comments GitHub rejects are left out of a second try, for the caller to list
in the PR body. What the review says is built purely in :mod:`bot.engine.review`.
"""

from __future__ import annotations

import logging
from typing import Any

from gidgethub import BadRequest

from bot.engine.report import BODY_LIMIT, merge_body
from bot.engine.review import offending_comments, review_comment, review_marker, review_payload
from bot.github.client import GitHubClient

log = logging.getLogger(__name__)


async def pr_diff(gh: GitHubClient, fork: str, number: int) -> str | None:
    """The PR diff as GitHub shows it; from the per-file patches when it is too large."""
    try:
        text = await gh.getitem(f"/repos/{fork}/pulls/{number}",
                                accept="application/vnd.github.diff")
        if isinstance(text, str):
            return text
    except BadRequest as exc:  # 406: too large to render as one diff
        log.info("%s#%d: no whole PR diff (%s); reading the file patches", fork, number, exc)
    try:
        parts = []
        async for f in gh.getiter(f"/repos/{fork}/pulls/{number}/files?per_page=100"):
            if f.get("patch") is None:
                continue  # binary, or too large for GitHub to show: no line can be commented
            old = f.get("previous_filename") or f["filename"]
            parts.append(f"diff --git a/{old} b/{f['filename']}\n--- a/{old}\n"
                         f"+++ b/{f['filename']}\n{f['patch']}\n")
        return "".join(parts)
    except BadRequest as exc:
        log.warning("%s#%d: no PR files (%s); anchoring on the local diff", fork, number, exc)
        return None


async def update_body(gh: GitHubClient, fork: str, number: int, old_body: str,
                      section: str, *, title: str | None = None) -> bool:
    """Rewrite only the bot's section of the PR body (and the title, if given) in one request.

    No request at all when nothing changed.
    """
    new_body = merge_body(old_body, section)
    data: dict[str, Any] = {}
    if new_body != old_body:
        data["body"] = new_body[:BODY_LIMIT]
    if title is not None:
        data["title"] = title
    if not data:
        return False
    await gh.patch(f"/repos/{fork}/pulls/{number}", data=data)
    return True


async def review_posted(gh: GitHubClient, fork: str, number: int, commit: str) -> bool:
    """Is the one review of ``commit`` already on the PR (found by its hidden marker)?"""
    marker = review_marker(commit)
    async for review in gh.getiter(f"/repos/{fork}/pulls/{number}/reviews"):
        if marker in (review.get("body") or ""):
            return True
    return False


async def post_review(gh: GitHubClient, fork: str, number: int, commit: str,
                      anchored: list[dict[str, Any]], unanchored: int, *,
                      checked: bool = False) -> list[str] | None:
    """Post the one review of ``commit`` (find-or-create); None if it is already there.

    ``checked`` says the caller has just looked with :func:`review_posted`. Returns the
    ids of the items whose comments GitHub rejected with a 422: the review goes out
    again without them, and the caller lists them in the PR body instead, so a bad
    anchor never loses the review.
    """
    if not checked and await review_posted(gh, fork, number, commit):
        return None
    url = f"/repos/{fork}/pulls/{number}/reviews"
    comments = [review_comment(item) for item in anchored]
    try:
        await gh.post(url, data=review_payload(commit, comments, unanchored))
    except BadRequest as exc:
        if exc.status_code != 422 or not comments:
            raise
        bad = offending_comments(exc, comments)
        log.warning("%s#%d: review rejected (%s); moving %d comment(s) to the PR body",
                    fork, number, exc, len(bad))
        kept = [c for i, c in enumerate(comments) if i not in bad]
        await gh.post(url, data=review_payload(commit, kept, unanchored + len(bad)))
        return [anchored[i]["id"] for i in sorted(bad)]
    return []
