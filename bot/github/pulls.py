"""A pull request through the REST API: its diff, its body, its ONE review and file comments.

The review and each file-level comment are find-or-create (hidden markers name the
commit), and a 422 never loses the review: the comments GitHub rejects are left out of
a second try, for the caller to list in the PR body. Every request body is built purely
in :mod:`bot.engine.review` (a :class:`~bot.engine.review.Delivery`); this is the one
place that posts one.
"""

from __future__ import annotations

import logging
from typing import Any

from gidgethub import BadRequest

from bot.engine.anchor import PrDiff
from bot.engine.report import BODY_LIMIT, merge_body
from bot.engine.review import Delivery, drop_threads, offending_comments, review_marker
from bot.errors import ForksyncError
from bot.github.client import GitHubClient

log = logging.getLogger(__name__)

Json = dict[str, Any]


async def pr_diff(gh: GitHubClient, fork: str, number: int) -> PrDiff | None:
    """The PR diff as GitHub shows it; from the file listing when it is too large for one."""
    try:
        text = await gh.getitem(f"/repos/{fork}/pulls/{number}",
                                accept="application/vnd.github.diff")
        if isinstance(text, str):
            return PrDiff.parse(text)
    except BadRequest as exc:  # 406: too large to render as one diff
        log.info("%s#%d: no whole PR diff (%s); reading the file patches", fork, number, exc)
    except ForksyncError as exc:
        log.warning("%s#%d: %s; reading the file patches", fork, number, exc)
    try:
        # A file without a ``patch`` (binary, or too large to show) is in the diff with
        # no line: it can still take a file-level comment.
        return PrDiff.from_listing(
            [f async for f in gh.getiter(f"/repos/{fork}/pulls/{number}/files?per_page=100")])
    except (BadRequest, ForksyncError) as exc:
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
    return await review_with(gh, fork, number, review_marker(commit))


async def review_with(gh: GitHubClient, fork: str, number: int, marker: str) -> bool:
    """Is a review whose body holds the hidden ``marker`` on the PR?"""
    async for review in gh.getiter(f"/repos/{fork}/pulls/{number}/reviews"):
        if marker in (review.get("body") or ""):
            return True
    return False


async def post_follow_review(gh: GitHubClient, fork: str, number: int, review: Json,
                             marker: str) -> list[int]:
    """Post a follow-up review once (found again by ``marker``); the indexes of its comments
    GitHub took. A 422 leaves out the comments it names and tries once more."""
    comments = review["comments"]
    if await review_with(gh, fork, number, marker):
        return list(range(len(comments)))
    url = f"/repos/{fork}/pulls/{number}/reviews"
    try:
        await gh.post(url, data=review)
        return list(range(len(comments)))
    except BadRequest as exc:
        if exc.status_code != 422:
            raise
        bad = offending_comments(exc, comments)
        log.warning("%s#%d: follow-up review rejected (%s); %d comment(s) left out", fork,
                    number, exc, len(bad))
    kept = [k for k in range(len(comments)) if k not in bad]
    if not kept:
        return []
    await gh.post(url, data=review | {"comments": [comments[k] for k in kept]})
    return kept


async def post_delivery(gh: GitHubClient, fork: str, number: int, delivery: Delivery, *,
                        review_there: bool | None = None) -> Delivery:
    """Post the one review and every file-level comment not on the PR yet; what it now carries.

    The request bodies are the delivery's own (what ``forksync sync --preview`` writes).
    ``review_there`` is what the caller just found with :func:`review_posted` (None: look). A
    422 never loses the review: it goes out again without the comments GitHub named, and
    a refused file-level comment is left out; their items come back with no thread, for
    the caller to list in the PR body.
    """
    url = f"/repos/{fork}/pulls/{number}"
    if review_there is None:
        review_there = await review_posted(gh, fork, number, delivery.commit)
    comments = delivery.review.get("comments", [])
    # A review with no comment and no item in its body (every item has a file comment,
    # or there is none) says nothing: it is never posted.
    if not review_there and (comments or delivery.unplaced()):
        try:
            await gh.post(f"{url}/reviews", data=delivery.review)
        except BadRequest as exc:
            if exc.status_code != 422 or not comments:
                raise
            bad = offending_comments(exc, comments)
            log.warning("%s#%d: review rejected (%s); %d comment(s) left out", fork, number,
                        exc, len(bad))
            delivery = drop_threads(delivery, {delivery.review_index[i] for i in bad})
            await gh.post(f"{url}/reviews", data=delivery.review)
    if not delivery.file_comments:
        return delivery
    # Find-or-create by hidden marker, so a resumed run never posts one twice.
    posted = {c.get("body", "").rsplit("\n", 1)[-1] async for c in
              gh.getiter(f"{url}/comments?per_page=100") if c.get("subject_type") == "file"}
    refused = set()
    for k, body in zip(delivery.file_index, delivery.file_comments, strict=True):
        if body["body"].rsplit("\n", 1)[-1] in posted:
            continue
        try:
            await gh.post(f"{url}/comments", data=body)
        except BadRequest as exc:
            if exc.status_code != 422:
                raise
            log.warning("%s#%d: file comment on %s refused (%s)", fork, number, body["path"],
                        exc)
            refused.add(k)
    return drop_threads(delivery, refused) if refused else delivery
