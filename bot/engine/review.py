"""The ONE review of a sync PR, as data: which review items get a comment, and where.

GitHub takes a review comment only on lines of the PR diff, and rejects the whole
review with a 422 otherwise; so every comment is checked against the diff's hunks
(parsed with unidiff) first, and the items that fit nowhere are listed in the PR body
instead. Posting it is :mod:`bot.github.pulls`.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Sequence
from typing import Any

from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchSet

from bot.engine.git import Git
from bot.engine.report import fence, render_review_comment

log = logging.getLogger(__name__)


def review_marker(commit: str) -> str:
    """The hidden marker that makes the one review findable again."""
    return f"<!-- forksync:review {commit} -->"


def comment_items(plan_json: dict[str, Any]) -> list[dict[str, Any]]:
    """Review items a comment can sit on: conflict regions (multi-line) and flagged lines."""
    out = []
    for f in plan_json.get("files", []):
        for item in f.get("review_items", []):
            kind = item.get("kind")
            # A Settled hunk still has its markers: its comment carries the one-click fix.
            if item.get("start_line") is None or (item.get("tier") == "Settled"
                                                  and kind != "conflict"):
                continue
            if kind == "flag" or (kind == "conflict" and item.get("end_line") is not None):
                out.append(item)
    return out


def diff_hunks(diff_text: str) -> dict[str, list[tuple[int, int]]]:
    """RIGHT-side line ranges (first, last; 1-based) of every hunk, per new path."""
    try:
        patch = PatchSet(diff_text)
    except UnidiffParseError:
        log.warning("could not parse the PR diff; no comment will be anchored")
        return {}
    hunks: dict[str, list[tuple[int, int]]] = {}
    for patched in patch:
        if patched.is_removed_file:
            continue
        hunks[patched.path] = [(h.target_start, h.target_start + h.target_length - 1)
                               for h in patched if h.target_length > 0]
    return hunks


def _comment_lines(item: dict[str, Any]) -> tuple[int, int]:
    start = int(item["start_line"])
    end = int(item["end_line"]) if item.get("kind") == "conflict" else start
    return start, end


def anchorable(item: dict[str, Any], hunks: dict[str, list[tuple[int, int]]]) -> bool:
    """GitHub takes a comment only on diff lines; a multi-line one must stay in one hunk."""
    start, end = _comment_lines(item)
    return any(first <= start and end <= last for first, last in hunks.get(item["path"], []))


def split_anchored(items: Iterable[dict[str, Any]], diff_text: str
                   ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    hunks = diff_hunks(diff_text)
    anchored: list[dict[str, Any]] = []
    unanchored: list[dict[str, Any]] = []
    for item in items:
        (anchored if anchorable(item, hunks) else unanchored).append(item)
    return anchored, unanchored


def review_comment(item: dict[str, Any]) -> dict[str, Any]:
    start, end = _comment_lines(item)
    comment: dict[str, Any] = {"path": item["path"], "line": end, "side": "RIGHT",
                               "body": render_review_comment(item)}
    if end > start:
        comment.update(start_line=start, start_side="RIGHT")
    return comment


def review_body(commit: str, anchored: int, unanchored: int) -> str:
    lines = [f"forksync: {anchored} review item(s) below. On a conflict, the suggestion "
             "replaces the whole marker region, so **Commit suggestion** resolves it."]
    if unanchored:
        lines.append(f"{unanchored} more item(s) could not be placed on the diff; "
                     "the PR description lists them.")
    lines.append(review_marker(commit))
    return "\n\n".join(lines)


def unanchored_lines(items: Sequence[dict[str, Any]]) -> list[str]:
    """The PR body's entries for items that got no review comment, suggestion included."""
    out = []
    for item in items:
        start, end = _comment_lines(item)
        where = f"L{start}" if start == end else f"L{start}–{end}"
        line = (f"- **{item['id']}** `{item['path']}` {where} ({item.get('tier', '')}): "
                f"{item.get('question') or item.get('reason', '')}")
        if item.get("suggestion") is not None:
            line += ("\n  <details><summary>suggested resolution</summary>\n\n"
                     + fence(item["suggestion"]) + "\n\n  </details>")
        out.append(line)
    return out


def offending_comments(exc: BaseException, comments: Sequence[dict[str, Any]]) -> set[int]:
    """Indexes of the comments a 422 names; all of them when it names none we can match."""
    errors = getattr(exc, "errors", None) or []
    text = " ".join([str(exc), *(e if isinstance(e, str) else json.dumps(e) for e in errors)])
    named = {i for i, c in enumerate(comments)
             if re.search(rf"(?<![\w/.-]){re.escape(c['path'])}(?![\w/.-])", text)}
    return named or set(range(len(comments)))


def review_payload(commit: str, comments: list[dict[str, Any]], unanchored: int
                   ) -> dict[str, Any]:
    """The request body of the one review: a COMMENT review, marked with its commit."""
    payload: dict[str, Any] = {"commit_id": commit, "event": "COMMENT",
                               "body": review_body(commit, len(comments), unanchored)}
    if comments:
        payload["comments"] = comments
    return payload


def local_diff(git_dir: str, base: str, head: str) -> str:
    """The PR diff as GitHub makes it: from the merge base to the head, renames found."""
    git = Git(git_dir)
    merge_base = git.text("merge-base", base, head).strip()
    return git.text("diff", "--no-color", "--no-ext-diff", "-M", merge_base, head, "--")
