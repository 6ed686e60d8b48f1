"""What the simulated GitHub knows: users, repos, installations, tokens, PRs and their threads.

Plain dataclasses, mutated only on the simulator's event loop. Git data itself
lives in bare repositories on disk; these records hold everything else.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

Permission = Literal["admin", "write", "read", "none"]
PERMISSION_RANK: dict[str, int] = {"none": 0, "read": 1, "triage": 1, "write": 2,
                                   "maintain": 2, "admin": 3}
REACTIONS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")
TOKEN_TTL = timedelta(hours=1)


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def iso(moment: datetime | None) -> str | None:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ") if moment is not None else None


@dataclass
class User:
    login: str
    id: int
    type: Literal["User", "Bot", "Organization"] = "User"


@dataclass
class Installation:
    id: int
    account: User
    repositories: set[str] | None = None  # full names; None means "all repositories"
    permissions: dict[str, str] = field(default_factory=lambda: {
        "contents": "write", "pull_requests": "write", "issues": "write",
        "checks": "write", "metadata": "read"})
    events: list[str] = field(default_factory=lambda: [
        "push", "pull_request", "issue_comment", "check_run", "pull_request_review_comment"])
    created_at: datetime = field(default_factory=now)

    def covers(self, full_name: str) -> bool:
        owner = full_name.split("/", 1)[0]
        if owner != self.account.login:
            return False
        return self.repositories is None or full_name in self.repositories


@dataclass
class Token:
    value: str
    kind: Literal["installation", "user"]
    user: User
    installation_id: int | None = None
    expires_at: datetime = field(default_factory=lambda: now() + TOKEN_TTL)
    rate_limit: int = 5000
    used: int = 0
    reset_at: datetime = field(default_factory=lambda: now() + timedelta(hours=1))


@dataclass
class Repo:
    owner: User
    name: str
    id: int
    git_dir: Path
    private: bool = False
    default_branch: str = "main"
    description: str | None = None
    collaborators: dict[str, str] = field(default_factory=dict)
    created_at: datetime = field(default_factory=now)
    pushed_at: datetime = field(default_factory=now)
    parent: str | None = None  # full name of the repository this one is a GitHub fork of

    @property
    def full_name(self) -> str:
        return f"{self.owner.login}/{self.name}"


@dataclass
class PullRequest:
    repo: str
    number: int
    id: int
    title: str
    body: str | None
    user: User
    head_ref: str
    head_sha: str
    base_ref: str
    draft: bool = False
    state: Literal["open", "closed"] = "open"
    maintainer_can_modify: bool = False
    merged: bool = False
    merged_by: User | None = None
    merge_commit_sha: str | None = None
    base_sha_at_merge: str | None = None  # a merged PR keeps listing the commits it brought
    created_at: datetime = field(default_factory=now)
    updated_at: datetime = field(default_factory=now)
    closed_at: datetime | None = None
    merged_at: datetime | None = None


@dataclass
class Reaction:
    id: int
    user: User
    content: str
    created_at: datetime = field(default_factory=now)


@dataclass
class IssueComment:
    id: int
    repo: str
    number: int
    user: User
    body: str
    created_at: datetime = field(default_factory=now)
    updated_at: datetime = field(default_factory=now)
    reactions: list[Reaction] = field(default_factory=list)
    via_app: bool = False


@dataclass
class Review:
    id: int
    repo: str
    number: int
    user: User
    body: str
    state: Literal["COMMENTED", "CHANGES_REQUESTED", "APPROVED", "PENDING"]
    commit_id: str
    submitted_at: datetime | None = field(default_factory=now)


@dataclass
class ReviewComment:
    id: int
    review_id: int
    repo: str
    number: int
    user: User
    path: str
    body: str
    commit_id: str
    diff_hunk: str
    position: int | None
    line: int | None
    side: Literal["LEFT", "RIGHT"]
    start_line: int | None = None
    start_side: Literal["LEFT", "RIGHT"] | None = None
    in_reply_to_id: int | None = None
    created_at: datetime = field(default_factory=now)
    reactions: list[Reaction] = field(default_factory=list)
    subject_type: Literal["line", "file"] = "line"


@dataclass
class CheckRun:
    id: int
    repo: str
    name: str
    head_sha: str
    status: str = "queued"
    conclusion: str | None = None
    started_at: datetime | None = field(default_factory=now)
    completed_at: datetime | None = None
    details_url: str | None = None
    external_id: str | None = None
    title: str | None = None
    summary: str | None = None
    text: str | None = None
    annotations: list[dict[str, Any]] = field(default_factory=list)
    check_suite_id: int = 0


@dataclass
class RequestRecord:
    """One HTTP request the simulator answered."""

    method: str
    path: str
    query: str
    status: int
    kind: Literal["api", "git", "token", "web"]
    operation: str | None = None  # the OpenAPI path template, when the request matched one
    body: Any = None
    actor: str | None = None
    timestamp: float = 0.0
    fault: str | None = None
    bytes_out: int = 0  # the response body's size, counted for git requests

    @property
    def is_write(self) -> bool:
        return self.kind == "api" and self.method not in ("GET", "HEAD")


@dataclass
class State:
    """All records of the simulated GitHub, with one id sequence shared by every kind."""

    users: dict[str, User] = field(default_factory=dict)
    repos: dict[str, Repo] = field(default_factory=dict)
    installations: dict[int, Installation] = field(default_factory=dict)
    tokens: dict[str, Token] = field(default_factory=dict)
    pulls: dict[tuple[str, int], PullRequest] = field(default_factory=dict)
    issue_comments: dict[int, IssueComment] = field(default_factory=dict)
    reviews: dict[int, Review] = field(default_factory=dict)
    review_comments: dict[int, ReviewComment] = field(default_factory=dict)
    check_runs: dict[int, CheckRun] = field(default_factory=dict)
    issue_numbers: dict[str, int] = field(default_factory=dict)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1001))

    def next_id(self) -> int:
        return next(self._ids)

    def user(self, login: str, kind: Literal["User", "Bot", "Organization"] = "User") -> User:
        if login not in self.users:
            self.users[login] = User(login, self.next_id(), kind)
        return self.users[login]

    def next_number(self, repo: str) -> int:
        self.issue_numbers[repo] = self.issue_numbers.get(repo, 0) + 1
        return self.issue_numbers[repo]

    def new_token(self, kind: Literal["installation", "user"], user: User,
                  installation_id: int | None = None) -> Token:
        prefix = "ghs_" if kind == "installation" else "ghp_"
        token = Token(prefix + secrets.token_hex(18), kind, user, installation_id)
        self.tokens[token.value] = token
        return token

    def prs(self, repo: str) -> list[PullRequest]:
        return sorted((pr for (name, _), pr in self.pulls.items() if name == repo),
                      key=lambda pr: pr.number)

    def reviews_of(self, repo: str, number: int) -> list[Review]:
        return [r for r in self.reviews.values() if (r.repo, r.number) == (repo, number)]

    def review_comments_of(self, repo: str, number: int) -> list[ReviewComment]:
        return [c for c in self.review_comments.values() if (c.repo, c.number) == (repo, number)]

    def issue_comments_of(self, repo: str, number: int) -> list[IssueComment]:
        return [c for c in self.issue_comments.values() if (c.repo, c.number) == (repo, number)]

    def check_runs_of(self, repo: str, head_sha: str | None = None,
                      name: str | None = None) -> list[CheckRun]:
        return [c for c in self.check_runs.values()
                if c.repo == repo and (head_sha is None or c.head_sha == head_sha)
                and (name is None or c.name == name)]
