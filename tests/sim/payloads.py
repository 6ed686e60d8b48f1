"""JSON shapes of GitHub's objects, shared by the REST answers and the webhook payloads.

Field sets follow GitHub's schemas (``full-repository``, ``pull-request``,
``issue-comment``, ``check-run``…); the simulator's own tests check its
answers and webhooks against the OpenAPI descriptions.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from .state import (
    CheckRun,
    Installation,
    IssueComment,
    PullRequest,
    Reaction,
    Repo,
    Review,
    ReviewComment,
    User,
    iso,
)

JSON = dict[str, Any]
APP_SLUG = "forksync-sim"
APP_NAME = "forksync (simulated)"


def node_id(kind: str, ident: int) -> str:
    return base64.b64encode(f"0:{kind}{ident}".encode()).decode().rstrip("=")


@dataclass(frozen=True)
class Urls:
    """Where things live: the API root, the HTML root and the git root are one server."""

    api: str
    html: str
    git: str


class Render:
    """Builds GitHub JSON for the simulator's records."""

    def __init__(self, urls: Urls, app_id: int, app_owner: User) -> None:
        self.urls = urls
        self.app_id = app_id
        self.app_owner = app_owner
        # What GitHub knows of the App; registering it from a manifest changes these.
        self.app_name = APP_NAME
        self.app_slug = APP_SLUG
        self.app_description = "forksync as the simulator knows it"
        self.app_permissions = {"contents": "write", "pull_requests": "write", "issues": "write",
                                "checks": "write", "metadata": "read"}
        self.app_events = ["push", "pull_request", "issue_comment", "check_run",
                           "pull_request_review_comment"]

    # --- people and apps --------------------------------------------------------------------

    def user(self, user: User) -> JSON:
        api = f"{self.urls.api}/users/{user.login}"
        return {
            "login": user.login, "id": user.id, "node_id": node_id("U", user.id),
            "avatar_url": f"{self.urls.html}/avatars/u/{user.id}?v=4", "gravatar_id": "",
            "url": api, "html_url": f"{self.urls.html}/{user.login}",
            "followers_url": f"{api}/followers",
            "following_url": f"{api}/following{{/other_user}}",
            "gists_url": f"{api}/gists{{/gist_id}}",
            "starred_url": f"{api}/starred{{/owner}}{{/repo}}",
            "subscriptions_url": f"{api}/subscriptions",
            "organizations_url": f"{api}/orgs", "repos_url": f"{api}/repos",
            "events_url": f"{api}/events{{/privacy}}",
            "received_events_url": f"{api}/received_events",
            "type": user.type, "user_view_type": "public", "site_admin": False,
        }

    def app(self) -> JSON:
        return {
            "id": self.app_id, "slug": self.app_slug, "node_id": node_id("A", self.app_id),
            "client_id": f"Iv1.{self.app_id:016x}",
            "owner": self.user(self.app_owner), "name": self.app_name,
            "description": self.app_description,
            "external_url": f"{self.urls.html}/apps/{self.app_slug}",
            "html_url": f"{self.urls.html}/apps/{self.app_slug}",
            "created_at": "2024-01-01T00:00:00Z", "updated_at": "2024-01-01T00:00:00Z",
            "permissions": dict(self.app_permissions), "events": list(self.app_events),
        }

    def installation(self, inst: Installation) -> JSON:
        return {
            "id": inst.id, "account": self.user(inst.account),
            "access_tokens_url": f"{self.urls.api}/app/installations/{inst.id}/access_tokens",
            "repositories_url": f"{self.urls.api}/installation/repositories",
            "html_url": f"{self.urls.html}/settings/installations/{inst.id}",
            "app_id": self.app_id, "app_slug": self.app_slug,
            "client_id": f"Iv1.{self.app_id:016x}",
            "target_id": inst.account.id, "target_type": inst.account.type,
            "permissions": dict(inst.permissions), "events": list(inst.events),
            "created_at": iso(inst.created_at), "updated_at": iso(inst.created_at),
            "single_file_name": None, "has_multiple_single_files": False,
            "single_file_paths": [], "suspended_by": None, "suspended_at": None,
            "repository_selection": "all" if inst.repositories is None else "selected",
        }

    def simple_installation(self, inst: Installation) -> JSON:
        return {"id": inst.id, "node_id": node_id("I", inst.id)}

    # --- repositories -----------------------------------------------------------------------

    def repo(self, repo: Repo, *, open_issues: int = 0, webhook_style: bool = False) -> JSON:
        api = f"{self.urls.api}/repos/{repo.full_name}"
        html = f"{self.urls.html}/{repo.full_name}"
        created: Any = iso(repo.created_at)
        pushed: Any = iso(repo.pushed_at)
        if webhook_style:
            # Push payloads carry these two as Unix timestamps, as github.com does.
            created, pushed = int(repo.created_at.timestamp()), int(repo.pushed_at.timestamp())
        return {
            "id": repo.id, "node_id": node_id("R", repo.id), "name": repo.name,
            "full_name": repo.full_name, "private": repo.private,
            "owner": self.user(repo.owner), "html_url": html, "description": repo.description,
            "fork": repo.parent is not None, "url": api,
            "forks_url": f"{api}/forks", "keys_url": f"{api}/keys{{/key_id}}",
            "collaborators_url": f"{api}/collaborators{{/collaborator}}",
            "teams_url": f"{api}/teams", "hooks_url": f"{api}/hooks",
            "issue_events_url": f"{api}/issues/events{{/number}}",
            "events_url": f"{api}/events", "assignees_url": f"{api}/assignees{{/user}}",
            "branches_url": f"{api}/branches{{/branch}}", "tags_url": f"{api}/tags",
            "blobs_url": f"{api}/git/blobs{{/sha}}", "git_tags_url": f"{api}/git/tags{{/sha}}",
            "git_refs_url": f"{api}/git/refs{{/sha}}", "trees_url": f"{api}/git/trees{{/sha}}",
            "statuses_url": f"{api}/statuses/{{sha}}", "languages_url": f"{api}/languages",
            "stargazers_url": f"{api}/stargazers", "contributors_url": f"{api}/contributors",
            "subscribers_url": f"{api}/subscribers", "subscription_url": f"{api}/subscription",
            "commits_url": f"{api}/commits{{/sha}}",
            "git_commits_url": f"{api}/git/commits{{/sha}}",
            "comments_url": f"{api}/comments{{/number}}",
            "issue_comment_url": f"{api}/issues/comments{{/number}}",
            "contents_url": f"{api}/contents/{{+path}}",
            "compare_url": f"{api}/compare/{{base}}...{{head}}", "merges_url": f"{api}/merges",
            "archive_url": f"{api}/{{archive_format}}{{/ref}}", "downloads_url": f"{api}/downloads",
            "issues_url": f"{api}/issues{{/number}}", "pulls_url": f"{api}/pulls{{/number}}",
            "milestones_url": f"{api}/milestones{{/number}}",
            "notifications_url": f"{api}/notifications{{?since,all,participating}}",
            "labels_url": f"{api}/labels{{/name}}", "releases_url": f"{api}/releases{{/id}}",
            "deployments_url": f"{api}/deployments",
            "created_at": created, "updated_at": iso(repo.pushed_at), "pushed_at": pushed,
            "git_url": f"{self.urls.git}/{repo.full_name}.git".replace("http", "git", 1),
            "ssh_url": f"git@sim:{repo.full_name}.git",
            "clone_url": f"{self.urls.git}/{repo.full_name}.git", "svn_url": html,
            "homepage": None, "size": 0, "stargazers_count": 0, "watchers_count": 0,
            "language": None, "has_issues": True, "has_projects": True,
            "has_downloads": True, "has_wiki": True, "has_pages": False,
            "has_discussions": False, "forks_count": 0, "mirror_url": None,
            "archived": False, "disabled": False, "open_issues_count": open_issues,
            "license": None, "allow_forking": True, "is_template": False,
            "web_commit_signoff_required": False, "topics": [],
            "visibility": "private" if repo.private else "public",
            "forks": 0, "open_issues": open_issues, "watchers": 0,
            "default_branch": repo.default_branch,
            "network_count": 0, "subscribers_count": 0,
            "allow_squash_merge": True, "allow_merge_commit": True, "allow_rebase_merge": True,
            "allow_auto_merge": False, "delete_branch_on_merge": False,
            "allow_update_branch": False, "use_squash_pr_title_as_default": False,
            "squash_merge_commit_title": "COMMIT_OR_PR_TITLE",
            "squash_merge_commit_message": "COMMIT_MESSAGES",
            "merge_commit_title": "MERGE_MESSAGE", "merge_commit_message": "PR_TITLE",
            "permissions": {"admin": False, "maintain": False, "push": True, "triage": True,
                            "pull": True},
        }

    # --- pull requests ----------------------------------------------------------------------

    def pull(self, pr: PullRequest, repo: Repo, *, base_sha: str, counts: dict[str, Any],
             comments: int, review_comments: int) -> JSON:
        api = f"{self.urls.api}/repos/{repo.full_name}"
        html = f"{self.urls.html}/{repo.full_name}/pull/{pr.number}"
        repo_json = self.repo(repo)

        def side(ref: str, sha: str) -> JSON:
            return {"label": f"{repo.owner.login}:{ref}", "ref": ref, "sha": sha,
                    "user": self.user(repo.owner), "repo": repo_json}

        return {
            "url": f"{api}/pulls/{pr.number}", "id": pr.id, "node_id": node_id("PR", pr.id),
            "html_url": html, "diff_url": f"{html}.diff", "patch_url": f"{html}.patch",
            "issue_url": f"{api}/issues/{pr.number}",
            "commits_url": f"{api}/pulls/{pr.number}/commits",
            "review_comments_url": f"{api}/pulls/{pr.number}/comments",
            "review_comment_url": f"{api}/pulls/comments{{/number}}",
            "comments_url": f"{api}/issues/{pr.number}/comments",
            "statuses_url": f"{api}/statuses/{pr.head_sha}",
            "number": pr.number, "state": pr.state, "locked": False, "title": pr.title,
            "user": self.user(pr.user), "body": pr.body, "labels": [], "milestone": None,
            "active_lock_reason": None,
            "created_at": iso(pr.created_at), "updated_at": iso(pr.updated_at),
            "closed_at": iso(pr.closed_at), "merged_at": iso(pr.merged_at),
            "merge_commit_sha": pr.merge_commit_sha, "assignee": None, "assignees": [],
            "requested_reviewers": [], "requested_teams": [],
            "head": side(pr.head_ref, pr.head_sha), "base": side(pr.base_ref, base_sha),
            "_links": {
                "self": {"href": f"{api}/pulls/{pr.number}"}, "html": {"href": html},
                "issue": {"href": f"{api}/issues/{pr.number}"},
                "comments": {"href": f"{api}/issues/{pr.number}/comments"},
                "review_comments": {"href": f"{api}/pulls/{pr.number}/comments"},
                "review_comment": {"href": f"{api}/pulls/comments{{/number}}"},
                "commits": {"href": f"{api}/pulls/{pr.number}/commits"},
                "statuses": {"href": f"{api}/statuses/{pr.head_sha}"},
            },
            "author_association": "OWNER" if pr.user.login == repo.owner.login else "NONE",
            "auto_merge": None, "draft": pr.draft, "merged": pr.merged,
            "mergeable": counts.get("mergeable"),
            "rebaseable": counts.get("mergeable"),
            "mergeable_state": counts.get("mergeable_state", "unknown"),
            "merged_by": self.user(pr.merged_by) if pr.merged_by else None,
            "comments": comments, "review_comments": review_comments,
            "maintainer_can_modify": pr.maintainer_can_modify,
            "commits": counts.get("commits", 0), "additions": counts.get("additions", 0),
            "deletions": counts.get("deletions", 0),
            "changed_files": counts.get("changed_files", 0),
        }

    # --- conversations ----------------------------------------------------------------------

    def reactions_summary(self, url: str, reactions: list[Reaction]) -> JSON:
        out: JSON = {"url": url, "total_count": len(reactions)}
        for content in ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"):
            out[content] = sum(1 for r in reactions if r.content == content)
        return out

    def issue_comment(self, comment: IssueComment, repo: Repo) -> JSON:
        api = f"{self.urls.api}/repos/{repo.full_name}"
        url = f"{api}/issues/comments/{comment.id}"
        return {
            "id": comment.id, "node_id": node_id("IC", comment.id), "url": url,
            "html_url": f"{self.urls.html}/{repo.full_name}/pull/{comment.number}"
                        f"#issuecomment-{comment.id}",
            "body": comment.body, "user": self.user(comment.user),
            "created_at": iso(comment.created_at), "updated_at": iso(comment.updated_at),
            "issue_url": f"{api}/issues/{comment.number}",
            "author_association": self.association(comment.user, repo),
            "performed_via_github_app": self.app() if comment.via_app else None,
            "reactions": self.reactions_summary(f"{url}/reactions", comment.reactions),
        }

    def reaction(self, reaction: Reaction) -> JSON:
        return {"id": reaction.id, "node_id": node_id("RE", reaction.id),
                "user": self.user(reaction.user), "content": reaction.content,
                "created_at": iso(reaction.created_at)}

    def association(self, user: User, repo: Repo) -> str:
        if user.login == repo.owner.login:
            return "OWNER"
        if user.login in repo.collaborators:
            return "COLLABORATOR"
        return "NONE"

    def review(self, review: Review, repo: Repo) -> JSON:
        api = f"{self.urls.api}/repos/{repo.full_name}"
        html = f"{self.urls.html}/{repo.full_name}/pull/{review.number}"
        return {
            "id": review.id, "node_id": node_id("PRR", review.id),
            "user": self.user(review.user), "body": review.body, "state": review.state,
            "html_url": f"{html}#pullrequestreview-{review.id}",
            "pull_request_url": f"{api}/pulls/{review.number}",
            "_links": {"html": {"href": f"{html}#pullrequestreview-{review.id}"},
                       "pull_request": {"href": f"{api}/pulls/{review.number}"}},
            "submitted_at": iso(review.submitted_at), "commit_id": review.commit_id,
            "author_association": self.association(review.user, repo),
        }

    def review_comment(self, comment: ReviewComment, repo: Repo, *,
                       webhook: bool = False) -> JSON:
        api = f"{self.urls.api}/repos/{repo.full_name}"
        html = f"{self.urls.html}/{repo.full_name}/pull/{comment.number}#discussion_r{comment.id}"
        url = f"{api}/pulls/comments/{comment.id}"
        return {
            "url": url, "pull_request_review_id": comment.review_id, "id": comment.id,
            "node_id": node_id("PRRC", comment.id), "diff_hunk": comment.diff_hunk,
            "path": comment.path, "commit_id": comment.commit_id,
            "original_commit_id": comment.commit_id, "user": self.user(comment.user),
            "body": comment.body, "created_at": iso(comment.created_at),
            "updated_at": iso(comment.created_at), "html_url": html,
            "pull_request_url": f"{api}/pulls/{comment.number}",
            "author_association": self.association(comment.user, repo),
            "_links": {"self": {"href": url}, "html": {"href": html},
                       "pull_request": {"href": f"{api}/pulls/{comment.number}"}},
            "start_line": comment.start_line, "original_start_line": comment.start_line,
            "start_side": comment.start_side, "side": comment.side,
            "subject_type": comment.subject_type,
            "reactions": self.reactions_summary(f"{url}/reactions", comment.reactions),
        } | ({"in_reply_to_id": comment.in_reply_to_id} if comment.in_reply_to_id else {}) | (
            {"position": comment.position, "original_position": comment.position,
             "line": comment.line, "original_line": comment.line}
            if comment.subject_type == "line" else
            # A file-level comment sits on no line: the REST answer leaves the line out, the
            # webhook (whose schema requires the keys) says null; its schema wants an
            # integer original_position, so 1.
            {"position": None, "original_position": 1, "line": None, "original_line": None}
            if webhook else {})

    # --- checks -----------------------------------------------------------------------------

    def check_run(self, run: CheckRun, repo: Repo, pulls: list[JSON]) -> JSON:
        api = f"{self.urls.api}/repos/{repo.full_name}"
        return {
            "id": run.id, "node_id": node_id("CR", run.id), "head_sha": run.head_sha,
            "external_id": run.external_id or "", "url": f"{api}/check-runs/{run.id}",
            "html_url": f"{self.urls.html}/{repo.full_name}/runs/{run.id}",
            "details_url": run.details_url or f"{self.urls.html}/apps/{APP_SLUG}",
            "status": run.status, "conclusion": run.conclusion,
            "started_at": iso(run.started_at), "completed_at": iso(run.completed_at),
            "output": {"title": run.title, "summary": run.summary, "text": run.text,
                       "annotations_count": len(run.annotations),
                       "annotations_url": f"{api}/check-runs/{run.id}/annotations"},
            "name": run.name, "check_suite": {"id": run.check_suite_id},
            "app": self.app(), "pull_requests": pulls,
        }

    def check_suite(self, run: CheckRun, repo: Repo, head_branch: str | None,
                    pulls: list[JSON]) -> JSON:
        api = f"{self.urls.api}/repos/{repo.full_name}"
        return {
            "id": run.check_suite_id, "node_id": node_id("CS", run.check_suite_id),
            "head_branch": head_branch, "head_sha": run.head_sha, "status": run.status,
            "conclusion": run.conclusion, "url": f"{api}/check-suites/{run.check_suite_id}",
            "before": None, "after": None, "pull_requests": pulls, "app": self.app(),
            "created_at": iso(run.started_at), "updated_at": iso(run.completed_at or
                                                                run.started_at),
        }

    def pr_ref(self, pr: PullRequest, repo: Repo, base_sha: str) -> JSON:
        """The minimal PR shape embedded in check runs and check suites."""
        repo_ref = {"id": repo.id, "url": f"{self.urls.api}/repos/{repo.full_name}",
                    "name": repo.name}
        return {"id": pr.id, "number": pr.number,
                "url": f"{self.urls.api}/repos/{repo.full_name}/pulls/{pr.number}",
                "head": {"ref": pr.head_ref, "sha": pr.head_sha, "repo": repo_ref},
                "base": {"ref": pr.base_ref, "sha": base_sha, "repo": repo_ref}}

