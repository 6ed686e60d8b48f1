"""What happens on the simulated GitHub after a state change: the webhook events it sends."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import gitrepo
from .payloads import JSON
from .state import (
    CheckRun,
    Installation,
    IssueComment,
    PullRequest,
    Repo,
    ReviewComment,
    User,
    iso,
    now,
)

if TYPE_CHECKING:
    from .server import Simulator

MAX_PUSH_COMMITS = 20  # github.com lists at most 20 commits in a push payload
# Every App gets these without subscribing to them.
ALWAYS_DELIVERED = frozenset({"installation", "installation_repositories"})


def noreply_email(user: User) -> str:
    return f"{user.id}+{user.login}@users.noreply.github.com"


class Events:
    """Builds realistic payloads (shapes from ``@octokit/openapi-webhooks``) and sends them."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim

    def _envelope(self, repo: Repo, sender: User, *, webhook_style: bool = False
                  ) -> tuple[JSON, int | None]:
        render = self.sim.render
        open_prs = sum(1 for pr in self.sim.state.prs(repo.full_name) if pr.state == "open")
        payload: JSON = {"repository": render.repo(repo, open_issues=open_prs,
                                                   webhook_style=webhook_style),
                         "sender": render.user(sender)}
        inst = self.sim.installation_for(repo.full_name)
        if inst is not None:
            payload["installation"] = render.simple_installation(inst)
        return payload, inst.id if inst else None

    def _send(self, event: str, payload: JSON, installation_id: int | None) -> None:
        """Deliver like GitHub: only to an installation that covers the repo and subscribes."""
        inst = self.sim.state.installations.get(installation_id or -1)
        if inst is None:
            return
        if event not in ALWAYS_DELIVERED and event not in inst.events:
            return
        self.sim.webhooks.send(event, payload, installation_id=installation_id)

    async def ref_changes(self, repo: Repo, before: dict[str, str], after: dict[str, str],
                          pusher: User) -> None:
        """One ``push`` per moved ref, then ``synchronize`` for open PRs whose head moved."""
        changed = sorted(ref for ref in set(before) | set(after)
                         if before.get(ref) != after.get(ref))
        if changed:
            repo.pushed_at = now()
        for ref in changed:
            await self.push(repo, ref, before.get(ref, gitrepo.ZERO_SHA),
                            after.get(ref, gitrepo.ZERO_SHA), pusher, other_refs=after)
        for ref in changed:
            if not ref.startswith("refs/heads/"):
                continue
            branch = ref.removeprefix("refs/heads/")
            if ref not in after:
                await self._head_deleted(repo, branch, pusher)
                continue
            await self._merged_by_push(repo, branch, after[ref], pusher)
            for pr in self.sim.state.prs(repo.full_name):
                if pr.state == "open" and pr.head_ref == branch and pr.head_sha != after[ref]:
                    old = pr.head_sha
                    pr.head_sha = after[ref]
                    pr.updated_at = now()
                    await self.pull_request(repo, pr, "synchronize", sender=pusher,
                                            before=old, after=after[ref])

    async def _head_deleted(self, repo: Repo, branch: str, pusher: User) -> None:
        """GitHub closes the open PRs whose head branch was deleted."""
        for pr in self.sim.state.prs(repo.full_name):
            if pr.state == "open" and pr.head_ref == branch:
                pr.state, pr.closed_at, pr.updated_at = "closed", now(), now()
                await self.pull_request(repo, pr, "closed", sender=pusher)

    async def _merged_by_push(self, repo: Repo, branch: str, tip: str, pusher: User) -> None:
        """A push that puts a PR's head into its base marks the PR merged, as on GitHub."""
        for pr in self.sim.state.prs(repo.full_name):
            if pr.state == "open" and pr.base_ref == branch and \
                    await gitrepo.is_ancestor(repo.git_dir, pr.head_sha, tip):
                pr.state, pr.merged, pr.merged_by = "closed", True, pusher
                pr.merged_at = pr.closed_at = pr.updated_at = now()
                pr.merge_commit_sha = tip
                await self.pull_request(repo, pr, "closed", sender=pusher)

    async def push(self, repo: Repo, ref: str, before: str, after: str, pusher: User, *,
                   other_refs: dict[str, str]) -> None:
        git_dir = repo.git_dir
        created, deleted = before == gitrepo.ZERO_SHA, after == gitrepo.ZERO_SHA
        commits: list[JSON] = []
        forced = False
        if not deleted:
            exclude = ([before] if not created else
                       [sha for name, sha in other_refs.items() if name != ref])
            shas = await gitrepo.rev_list(git_dir, after, exclude)
            commits = [await self._push_commit(repo, sha) for sha in shas[-MAX_PUSH_COMMITS:]]
            if not created:
                forced = not await gitrepo.is_ancestor(git_dir, before, after)
        head_commit = (commits[-1] if commits and commits[-1]["id"] == after else
                       (await self._push_commit(repo, after) if not deleted else None))
        html = f"{self.sim.base_url}/{repo.full_name}"
        compare = (f"{html}/compare/{before[:12]}...{after[:12]}" if not created
                   else f"{html}/commit/{after[:12]}")
        payload: JSON = {"ref": ref, "before": before, "after": after, "created": created,
                         "deleted": deleted, "forced": forced, "base_ref": None,
                         "compare": compare, "commits": commits, "head_commit": head_commit,
                         "pusher": {"name": pusher.login, "email": noreply_email(pusher)}}
        envelope, inst = self._envelope(repo, pusher, webhook_style=True)
        self._send("push", payload | envelope, inst)

    async def _push_commit(self, repo: Repo, sha: str) -> JSON:
        info = await gitrepo.commit_info(repo.git_dir, sha)
        added, removed, modified = await gitrepo.changed_paths(repo.git_dir, sha)
        return {
            "id": sha, "tree_id": info.tree, "distinct": True, "message": info.message,
            "timestamp": info.committer_date,
            "url": f"{self.sim.base_url}/{repo.full_name}/commit/{sha}",
            "author": {"name": info.author_name, "email": info.author_email,
                       "date": info.author_date},
            "committer": {"name": info.committer_name, "email": info.committer_email,
                          "date": info.committer_date},
            "added": added, "removed": removed, "modified": modified,
        }

    async def pull_request(self, repo: Repo, pr: PullRequest, action: str, *, sender: User,
                           before: str | None = None, after: str | None = None,
                           changes: JSON | None = None) -> None:
        envelope, inst = self._envelope(repo, sender)
        pull = await self.sim.pull_json(repo, pr, full=True)
        pull |= {k: v for k, v in envelope["repository"].items() if k.startswith("allow_")
                 or k in ("delete_branch_on_merge", "use_squash_pr_title_as_default",
                          "squash_merge_commit_title", "squash_merge_commit_message",
                          "merge_commit_title", "merge_commit_message")}
        payload: JSON = {"action": action, "number": pr.number, "pull_request": pull}
        if action == "synchronize":
            payload |= {"before": before, "after": after}
        if action == "edited":
            payload["changes"] = changes or {}
        self._send("pull_request", payload | envelope, inst)

    async def issue_comment(self, repo: Repo, pr: PullRequest, comment: IssueComment, *,
                            action: str = "created", sender: User | None = None,
                            old_body: str | None = None) -> None:
        envelope, inst = self._envelope(repo, sender or comment.user)
        payload: JSON = {"action": action, "issue": await self._issue(repo, pr),
                         "comment": self.sim.render.issue_comment(comment, repo)}
        if action == "edited":
            payload["changes"] = {"body": {"from": old_body or ""}}
        self._send("issue_comment", payload | envelope, inst)

    async def review_comment(self, repo: Repo, pr: PullRequest, comment: ReviewComment) -> None:
        envelope, inst = self._envelope(repo, comment.user)
        pull = await self.sim.pull_json(repo, pr, full=False)
        payload: JSON = {"action": "created", "pull_request": pull,
                         "comment": self.sim.render.review_comment(comment, repo,
                                                                    webhook=True)}
        self._send("pull_request_review_comment", payload | envelope, inst)

    async def _issue(self, repo: Repo, pr: PullRequest) -> JSON:
        render = self.sim.render
        api = f"{self.sim.base_url}/repos/{repo.full_name}"
        html = f"{self.sim.base_url}/{repo.full_name}/pull/{pr.number}"
        comments = len(self.sim.state.issue_comments_of(repo.full_name, pr.number))
        return {
            "url": f"{api}/issues/{pr.number}", "repository_url": api,
            "labels_url": f"{api}/issues/{pr.number}/labels{{/name}}",
            "comments_url": f"{api}/issues/{pr.number}/comments",
            "events_url": f"{api}/issues/{pr.number}/events", "html_url": html,
            "id": pr.id + 500_000_000, "node_id": f"PR_{pr.id}", "number": pr.number,
            "title": pr.title, "user": render.user(pr.user), "labels": [], "state": pr.state,
            "locked": False, "assignee": None, "assignees": [], "milestone": None,
            "comments": comments, "created_at": iso(pr.created_at),
            "updated_at": iso(pr.updated_at), "closed_at": iso(pr.closed_at),
            "author_association": render.association(pr.user, repo),
            "active_lock_reason": None, "draft": pr.draft, "body": pr.body,
            "reactions": render.reactions_summary(f"{api}/issues/{pr.number}/reactions", []),
            "timeline_url": f"{api}/issues/{pr.number}/timeline",
            "performed_via_github_app": None, "state_reason": None,
            "pull_request": {"url": f"{api}/pulls/{pr.number}", "html_url": html,
                             "diff_url": f"{html}.diff", "patch_url": f"{html}.patch",
                             "merged_at": iso(pr.merged_at)},
        }

    async def installation_created(self, inst: Installation, sender: User) -> None:
        render = self.sim.render
        repos = [r for name, r in self.sim.state.repos.items() if inst.covers(name)]
        payload: JSON = {
            "action": "created", "installation": render.installation(inst),
            "repositories": [{"id": r.id, "node_id": render.repo(r)["node_id"], "name": r.name,
                              "full_name": r.full_name, "private": r.private} for r in repos],
            "requester": None, "sender": render.user(sender)}
        self._send("installation", payload, inst.id)

    async def installation_repositories(self, inst: Installation, repos: list[Repo],
                                        action: str, sender: User) -> None:
        def short(r: Repo) -> JSON:
            return {"id": r.id, "node_id": self.sim.render.repo(r)["node_id"], "name": r.name,
                    "full_name": r.full_name, "private": r.private}
        payload: JSON = {
            "action": action, "installation": self.sim.render.installation(inst),
            "repository_selection": "all" if inst.repositories is None else "selected",
            "repositories_added": [short(r) for r in repos] if action == "added" else [],
            "repositories_removed": [short(r) for r in repos] if action == "removed" else [],
            "requester": None, "sender": self.sim.render.user(sender)}
        self._send("installation_repositories", payload, inst.id)

    async def installation_deleted(self, inst: Installation, sender: User) -> None:
        payload: JSON = {"action": "deleted", "installation": self.sim.render.installation(inst),
                         "repositories": [], "requester": None,
                         "sender": self.sim.render.user(sender)}
        self._send("installation", payload, inst.id)

    async def check_run(self, repo: Repo, run: CheckRun, action: str, sender: User) -> None:
        envelope, inst = self._envelope(repo, sender)
        run_json: dict[str, Any] = await self.sim.check_run_json(repo, run)
        head_branch = None
        for pr in self.sim.state.prs(repo.full_name):
            if pr.head_sha == run.head_sha:
                head_branch = pr.head_ref
        run_json["check_suite"] = self.sim.render.check_suite(
            run, repo, head_branch, run_json["pull_requests"])
        payload: JSON = {"action": action, "check_run": run_json}
        self._send("check_run", payload | envelope, inst)
