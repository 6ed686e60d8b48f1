"""One command comment in, one reply out: the ``"command"`` job's payload and its reply text.

Pure: no I/O. The comment handlers build a :class:`CommandRequest`; each command line ends
as an :class:`Outcome`; :func:`render_reply` turns them into the one reply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.errors import ForksyncError

ISSUE_COMMENT = "issue_comment"  # a comment in the PR's conversation
REVIEW_COMMENT = "review_comment"  # a reply in a review thread, e.g. under a suggestion


class CommandFailed(ForksyncError):
    """A valid command that cannot run as asked; the message is the reply."""


def reply_marker(comment_id: int) -> str:
    """The hidden marker that makes the one reply to a comment findable again."""
    return f"<!-- forksync:reply {comment_id} -->"


@dataclass(frozen=True)
class CommandRequest:
    """The ``"command"`` job's payload, as the comment handlers queue it.

    ``thread_id`` is the first comment of a review thread (replies go there, because
    GitHub takes no reply to a reply); None for conversation comments.
    """

    fork: str
    installation_id: int | None
    pr: int
    comment_id: int
    author: str
    body: str
    source: str = ISSUE_COMMENT
    thread_id: int | None = None

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> CommandRequest:
        installation = payload.get("installation_id")
        thread = payload.get("thread_id")
        return cls(fork=str(payload["fork"]),
                   installation_id=int(installation) if installation is not None else None,
                   pr=int(payload["pr"]), comment_id=int(payload["comment_id"]),
                   author=str(payload["author"]), body=str(payload["body"]),
                   source=str(payload.get("source", ISSUE_COMMENT)),
                   thread_id=int(thread) if thread is not None else None)

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "fork": self.fork, "installation_id": self.installation_id, "pr": self.pr,
            "comment_id": self.comment_id, "author": self.author, "body": self.body}
        if self.source != ISSUE_COMMENT:
            payload.update(source=self.source, thread_id=self.thread_id)
        return payload

    @property
    def key(self) -> str:
        """Names the comment among all comments of the fork (the two kinds have own ids)."""
        return f"{self.source}:{self.comment_id}"

    @property
    def _api_kind(self) -> str:
        """Review comments live under pulls/, conversation comments under issues/."""
        return "pulls" if self.source == REVIEW_COMMENT else "issues"

    @property
    def comment_url(self) -> str:
        return f"/repos/{self.fork}/{self._api_kind}/comments/{self.comment_id}"

    @property
    def replies_url(self) -> str:
        """Where the reply goes: the review thread, or the PR's conversation."""
        if self.source == REVIEW_COMMENT:
            thread = self.thread_id or self.comment_id
            return f"/repos/{self.fork}/pulls/{self.pr}/comments/{thread}/replies"
        return f"/repos/{self.fork}/issues/{self.pr}/comments"

    @property
    def listing_url(self) -> str:
        return f"/repos/{self.fork}/{self._api_kind}/{self.pr}/comments"


@dataclass
class Outcome:
    """How one command line ended; ``ok`` is False when the person got something wrong."""

    line: str
    text: str
    ok: bool = True


def render_reply(author: str, outcomes: list[Outcome], comment_id: int) -> str:
    """One reply for a whole comment: each command line quoted, then what happened."""
    parts = [f"@{author}"]
    for outcome in outcomes:
        parts.append(f"> {outcome.line}\n\n{outcome.text}")
    parts.append(reply_marker(comment_id))
    return "\n\n".join(parts)[:65_000]


def refusal_text(author: str, fork: str) -> str:
    return (f"@{author} thank you for the suggestion! Only people with write access to "
            f"`{fork}` can run `/sync` commands, so I did not run it. A maintainer can run "
            "it for you.")


def join_and(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``: a list as a reply says it."""
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


__all__ = [
    "ISSUE_COMMENT",
    "REVIEW_COMMENT",
    "CommandFailed",
    "CommandRequest",
    "Outcome",
    "join_and",
    "refusal_text",
    "render_reply",
    "reply_marker",
]
