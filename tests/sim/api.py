"""The REST operations the simulator implements, keyed by their OpenAPI path template.

Handlers get an already authenticated, spec-validated :class:`Call` and either
return a response or raise :class:`ApiError` with GitHub's status and body.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlencode

from aiohttp import web

from . import gitrepo, prdiff
from .payloads import JSON, Render
from .state import (
    PERMISSION_RANK,
    CheckRun,
    IssueComment,
    PullRequest,
    Reaction,
    Repo,
    Review,
    ReviewComment,
    Token,
    iso,
    now,
)

if TYPE_CHECKING:
    from .server import Simulator

DOCS = "https://docs.github.com/rest"
BODY_LIMIT = 65536
SUMMARY_LIMIT = 65535
ANNOTATIONS_PER_REQUEST = 50
T = TypeVar("T")


class ApiError(Exception):
    """An error answer, shaped like GitHub's: message, optional errors, documentation_url."""

    def __init__(self, status: int, message: str, errors: list[Any] | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors
        self.headers = headers or {}

    def body(self) -> JSON:
        out: JSON = {"message": self.message}
        if self.errors is not None:
            out["errors"] = self.errors
        out["documentation_url"] = DOCS
        out["status"] = str(self.status)
        return out


def not_found() -> ApiError:
    return ApiError(404, "Not Found")


def validation_failed(resource: str, field: str, code: str = "custom",
                      message: str | None = None) -> ApiError:
    error: JSON = {"resource": resource, "field": field, "code": code}
    if message is not None:
        error["message"] = message
    return ApiError(422, "Validation Failed", [error])


@dataclass
class Call:
    """One authenticated API request, after spec validation."""

    request: web.Request
    template: str
    params: dict[str, str]
    body: Any
    token: Token | None
    app_jwt: bool

    def query(self, name: str, default: str | None = None) -> str | None:
        return self.request.query.get(name, default)


Handler = Callable[["Api", Call], Awaitable[web.StreamResponse]]
ROUTES: dict[tuple[str, str], Handler] = {}


def route(method: str, template: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        ROUTES[(method, template)] = fn
        return fn
    return register


def respond(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(data, status=status, headers=headers)


class Api:
    """REST handlers over the simulator's state and bare repositories."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.state = sim.state

    @property
    def render(self) -> Render:
        return self.sim.render

    async def dispatch(self, call: Call) -> web.StreamResponse | None:
        handler = ROUTES.get((call.request.method, call.template))
        if handler is None:
            return None
        return await handler(self, call)

    # --- helpers ----------------------------------------------------------------------------

    def repo(self, call: Call, *, need: str = "read") -> Repo:
        """The repository in the path, if this caller may see it (404 otherwise, like GitHub)."""
        full_name = f"{call.params['owner']}/{call.params['repo']}"
        repo = self.state.repos.get(full_name)
        if repo is None:
            raise not_found()
        token = call.token
        if token is None:
            if repo.private:
                raise not_found()
            if need != "read":
                raise ApiError(401, "Requires authentication")
            return repo
        if token.kind == "installation":
            inst = self.state.installations.get(token.installation_id or -1)
            if inst is None or not inst.covers(full_name):
                # Any token may read a public repository; writing needs the installation.
                if repo.private:
                    raise not_found()
                if need != "read" or call.request.method != "GET":
                    raise ApiError(403, "Resource not accessible by integration")
            return repo
        permission = self.sim.permission(repo, token.user.login)
        if PERMISSION_RANK[permission] < PERMISSION_RANK["read"]:
            raise not_found()
        if PERMISSION_RANK[permission] < PERMISSION_RANK[need]:
            raise ApiError(403, "Resource not accessible by personal access token")
        return repo

    def pull_of(self, repo: Repo, number: str) -> PullRequest:
        pr = self.state.pulls.get((repo.full_name, int(number)))
        if pr is None:
            raise not_found()
        return pr

    def paginate(self, call: Call, items: Sequence[T]) -> tuple[list[T], dict[str, str]]:
        per_page = min(max(int(call.query("per_page") or 30), 1), 100)
        page = max(int(call.query("page") or 1), 1)
        last = max(math.ceil(len(items) / per_page), 1)
        chunk = list(items[(page - 1) * per_page: page * per_page])
        links = []

        def url(n: int) -> str:
            query = {k: v for k, v in call.request.query.items() if k != "page"}
            query["page"] = str(n)
            return f"{self.sim.base_url}{call.request.rel_url.raw_path}?{urlencode(query)}"

        if page > 1:
            links.append(f'<{url(page - 1)}>; rel="prev"')
        if page < last:
            links.append(f'<{url(page + 1)}>; rel="next"')
            links.append(f'<{url(last)}>; rel="last"')
        if page > 1:
            links.append(f'<{url(1)}>; rel="first"')
        return chunk, ({"Link": ", ".join(links)} if links else {})

    async def branch_sha(self, repo: Repo, branch: str) -> str | None:
        return await gitrepo.rev_parse(repo.git_dir, f"refs/heads/{branch}")

    async def pr_diff_files(self, repo: Repo, pr: PullRequest,
                            head: str | None = None) -> tuple[str, list[prdiff.FileDiff]]:
        text = await self.sim.pr_diff_text(repo, pr, head)
        return text, prdiff.parse(text)

    async def pull_json(self, repo: Repo, pr: PullRequest, *, full: bool = True) -> JSON:
        return await self.sim.pull_json(repo, pr, full=full)

    def author(self, call: Call) -> Any:
        """The user an API call acts as: the App's bot user for installation tokens."""
        if call.token is None:
            raise ApiError(401, "Requires authentication")
        return call.token.user

    # --- the App ----------------------------------------------------------------------------

    @route("POST", "/app/installations/{installation_id}/access_tokens")
    async def create_installation_token(self, call: Call) -> web.StreamResponse:
        inst = self.state.installations.get(int(call.params["installation_id"]))
        if inst is None:
            raise not_found()
        token = self.state.new_token("installation", self.sim.bot_user, inst.id)
        data: JSON = {"token": token.value, "expires_at": iso(token.expires_at),
                      "permissions": dict(inst.permissions),
                      "repository_selection": "all" if inst.repositories is None else "selected"}
        return respond(data, 201)

    @route("GET", "/app")
    async def get_app(self, call: Call) -> web.StreamResponse:
        return respond(self.render.app())

    @route("GET", "/app/installations/{installation_id}")
    async def get_installation(self, call: Call) -> web.StreamResponse:
        inst = self.state.installations.get(int(call.params["installation_id"]))
        if inst is None:
            raise not_found()
        return respond(self.render.installation(inst))

    @route("GET", "/repos/{owner}/{repo}/installation")
    async def get_repo_installation(self, call: Call) -> web.StreamResponse:
        full_name = f"{call.params['owner']}/{call.params['repo']}"
        for inst in self.state.installations.values():
            if full_name in self.state.repos and inst.covers(full_name):
                return respond(self.render.installation(inst))
        raise not_found()

    @route("GET", "/rate_limit")
    async def rate_limit(self, call: Call) -> web.StreamResponse:
        limit, used, reset = self.sim.rate_numbers(call.token, call.request)
        core = {"limit": limit, "used": used, "remaining": max(limit - used, 0), "reset": reset}
        return respond({"resources": {"core": core}, "rate": core})

    # --- repository content -----------------------------------------------------------------

    @route("GET", "/repos/{owner}/{repo}")
    async def get_repo(self, call: Call) -> web.StreamResponse:
        repo = self.repo(call)
        open_prs = sum(1 for pr in self.state.prs(repo.full_name) if pr.state == "open")
        data = self.render.repo(repo, open_issues=open_prs)
        if repo.parent is not None and repo.parent in self.state.repos:
            # A fork names its parent and the root of its network, as GitHub does.
            parent = source = self.state.repos[repo.parent]
            while source.parent is not None and source.parent in self.state.repos:
                source = self.state.repos[source.parent]
            data["parent"], data["source"] = self.render.repo(parent), self.render.repo(source)
        return respond(data)

    @route("GET", "/repos/{owner}/{repo}/branches/{branch}")
    async def get_branch(self, call: Call) -> web.StreamResponse:
        repo = self.repo(call)
        branch = call.params["branch"]
        sha = await self.branch_sha(repo, branch)
        if sha is None:
            raise ApiError(404, "Branch not found")
        api = f"{self.sim.base_url}/repos/{repo.full_name}"
        commit = await self.sim.commit_json(repo, sha, with_files=False)
        return respond({
            "name": branch, "commit": commit,
            "_links": {"self": f"{api}/branches/{branch}",
                       "html": f"{self.sim.base_url}/{repo.full_name}/tree/{branch}"},
            "protected": False,
            "protection": {"enabled": False, "required_status_checks": {
                "enforcement_level": "off", "contexts": [], "checks": []}},
            "protection_url": f"{api}/branches/{branch}/protection",
        })

    @route("GET", "/repos/{owner}/{repo}/git/ref/{ref}")
    async def get_ref(self, call: Call) -> web.StreamResponse:
        repo = self.repo(call)
        ref = "refs/" + call.params["ref"]
        sha = (await gitrepo.refs(repo.git_dir)).get(ref)
        if sha is None:
            raise not_found()
        api = f"{self.sim.base_url}/repos/{repo.full_name}"
        return respond({"ref": ref, "node_id": f"REF_{sha[:12]}", "url": f"{api}/git/{ref}",
                        "object": {"type": "commit", "sha": sha,
                                   "url": f"{api}/git/commits/{sha}"}})

    @route("GET", "/repos/{owner}/{repo}/commits/{ref}")
    async def get_commit(self, call: Call) -> web.StreamResponse:
        repo = self.repo(call)
        sha = await gitrepo.resolve_ref(repo.git_dir, call.params["ref"])
        if sha is None:
            raise ApiError(422, f"No commit found for SHA: {call.params['ref']}")
        if "diff" in call.request.headers.get("Accept", ""):
            info = await gitrepo.commit_info(repo.git_dir, sha)
            parent = info.parents[0] if info.parents else gitrepo.EMPTY_TREE
            return web.Response(text=await gitrepo.diff(repo.git_dir, parent, sha),
                                content_type="application/vnd.github.diff")
        return respond(await self.sim.commit_json(repo, sha, with_files=True))

    @route("GET", "/repos/{owner}/{repo}/contents/{path}")
    async def get_contents(self, call: Call) -> web.StreamResponse:
        repo = self.repo(call)
        ref = call.query("ref") or repo.default_branch
        sha = await gitrepo.resolve_ref(repo.git_dir, ref)
        if sha is None:
            raise ApiError(404, f"No commit found for the ref {ref}")
        path = call.params["path"].strip("/")
        found = await gitrepo.read_path(repo.git_dir, sha, path)
        if found is None:
            raise not_found()
        kind, oid, data = found
        if kind == "tree":
            entries = []
            for raw in data.decode("utf-8", errors="replace").split("\x00"):
                if not raw:
                    continue
                meta, name = raw.split("\t", 1)
                _, otype, eoid, size = meta.split()
                entries.append(self._content_entry(
                    repo, ref, f"{path}/{name}", "dir" if otype == "tree" else "file", eoid,
                    0 if size == "-" else int(size)))
            return respond(entries)
        entry = self._content_entry(repo, ref, path, "file", oid, len(data))
        encoded = base64.b64encode(data).decode()
        entry["content"] = "\n".join(encoded[i:i + 60] for i in range(0, len(encoded), 60)) + "\n"
        entry["encoding"] = "base64"
        return respond(entry)

    def _content_entry(self, repo: Repo, ref: str, path: str, kind: str, oid: str,
                       size: int) -> JSON:
        api = f"{self.sim.base_url}/repos/{repo.full_name}"
        html = f"{self.sim.base_url}/{repo.full_name}/blob/{ref}/{path}"
        url = f"{api}/contents/{path}?ref={ref}"
        git_url = f"{api}/git/{'trees' if kind == 'dir' else 'blobs'}/{oid}"
        return {"type": kind, "size": size, "name": path.rsplit("/", 1)[-1], "path": path,
                "sha": oid, "url": url, "git_url": git_url, "html_url": html,
                "download_url": (f"{self.sim.base_url}/{repo.full_name}/raw/{ref}/{path}"
                                 if kind == "file" else None),
                "_links": {"self": url, "git": git_url, "html": html}}

    @route("GET", "/repos/{owner}/{repo}/collaborators/{username}/permission")
    async def get_permission(self, call: Call) -> web.StreamResponse:
        repo = self.repo(call)
        login = call.params["username"]
        user = self.state.users.get(login)
        if user is None:
            raise ApiError(404, f"{login} is not a user")
        permission = self.sim.permission(repo, login)
        collaborator = self.render.user(user) | {
            "permissions": {"admin": permission == "admin",
                            "maintain": permission == "admin",
                            "push": permission in ("admin", "write"),
                            "triage": permission in ("admin", "write"),
                            "pull": permission != "none"},
            "role_name": permission}
        return respond({"permission": permission, "role_name": permission,
                        "user": collaborator})

    # --- pull requests ----------------------------------------------------------------------

    @route("GET", "/repos/{owner}/{repo}/pulls")
    async def list_pulls(self, call: Call) -> web.StreamResponse:
        repo = self.repo(call)
        state = call.query("state", "open")
        head = call.query("head")
        base = call.query("base")
        prs = [pr for pr in self.state.prs(repo.full_name)
               if (state == "all" or pr.state == state)
               and (head is None or f"{repo.owner.login}:{pr.head_ref}" == head)
               and (base is None or pr.base_ref == base)]
        direction = call.query("direction", "desc")
        prs.sort(key=lambda pr: pr.created_at.timestamp() * 1e6 + pr.number,
                 reverse=direction == "desc")
        page, headers = self.paginate(call, prs)
        return respond([await self.pull_json(repo, pr, full=False) for pr in page],
                       headers=headers)

    @route("POST", "/repos/{owner}/{repo}/pulls")
    async def create_pull(self, call: Call) -> web.StreamResponse:
        repo = self.repo(call, need="write")
        body = call.body
        head = str(body.get("head", ""))
        if ":" in head:
            owner, _, head = head.partition(":")
            if owner != repo.owner.login:
                raise validation_failed("PullRequest", "head", "invalid")
        base = str(body.get("base", ""))
        head_sha = await self.branch_sha(repo, head)
        if head_sha is None:
            raise validation_failed("PullRequest", "head", "invalid")
        base_sha = await self.branch_sha(repo, base)
        if base_sha is None:
            raise validation_failed("PullRequest", "base", "invalid")
        if not body.get("title") and not body.get("issue"):
            raise validation_failed("PullRequest", "title", "missing_field")
        for pr in self.state.prs(repo.full_name):
            if pr.state == "open" and pr.head_ref == head and pr.base_ref == base:
                raise ApiError(422, "Validation Failed", [{
                    "resource": "PullRequest", "code": "custom",
                    "message": f"A pull request already exists for {repo.owner.login}:{head}."}])
        if await gitrepo.is_ancestor(repo.git_dir, head_sha, base_sha):
            raise ApiError(422, "Validation Failed", [{
                "resource": "PullRequest", "code": "custom",
                "message": f"No commits between {base} and {head}"}])
        text = body.get("body")
        if isinstance(text, str) and len(text) > BODY_LIMIT:
            raise validation_failed("Issue", "body", message=(
                f"body is too long (maximum is {BODY_LIMIT} characters)"))
        pr = PullRequest(repo=repo.full_name, number=self.state.next_number(repo.full_name),
                         id=self.state.next_id(), title=str(body.get("title", "")), body=text,
                         user=self.author(call), head_ref=head, head_sha=head_sha,
                         base_ref=base, draft=bool(body.get("draft", False)),
                         maintainer_can_modify=bool(body.get("maintainer_can_modify", False)))
        self.state.pulls[(repo.full_name, pr.number)] = pr
        data = await self.pull_json(repo, pr)
        await self.sim.events.pull_request(repo, pr, "opened", sender=pr.user)
        return respond(data, 201, headers={
            "Location": f"{self.sim.base_url}/repos/{repo.full_name}/pulls/{pr.number}"})

    @route("GET", "/repos/{owner}/{repo}/pulls/{pull_number}")
    async def get_pull(self, call: Call) -> web.StreamResponse:
        repo = self.repo(call)
        pr = self.pull_of(repo, call.params["pull_number"])
        accept = call.request.headers.get("Accept", "")
        if "diff" in accept or "patch" in accept:
            text = await self.sim.pr_diff_text(repo, pr)
            return web.Response(text=text, content_type="application/vnd.github.diff")
        return respond(await self.pull_json(repo, pr))

    @route("PATCH", "/repos/{owner}/{repo}/pulls/{pull_number}")
    async def update_pull(self, call: Call) -> web.StreamResponse:
        repo = self.repo(call, need="write")
        pr = self.pull_of(repo, call.params["pull_number"])
        body = call.body or {}
        text = body.get("body")
        if isinstance(text, str) and len(text) > BODY_LIMIT:
            raise validation_failed("Issue", "body", message=(
                f"body is too long (maximum is {BODY_LIMIT} characters)"))
        if "base" in body and await self.branch_sha(repo, str(body["base"])) is None:
            raise validation_failed("PullRequest", "base", "invalid")
        changes: JSON = {}
        if "title" in body and body["title"] != pr.title:
            changes["title"] = {"from": pr.title}
            pr.title = str(body["title"])
        if "body" in body and text != pr.body:
            changes["body"] = {"from": pr.body or ""}
            pr.body = text
        if "base" in body and body["base"] != pr.base_ref:
            changes["base"] = {"ref": {"from": pr.base_ref},
                               "sha": {"from": await self.branch_sha(repo, pr.base_ref) or ""}}
            pr.base_ref = str(body["base"])
        if "maintainer_can_modify" in body:
            pr.maintainer_can_modify = bool(body["maintainer_can_modify"])
        action: str | None = None
        if body.get("state") == "closed" and pr.state == "open":
            pr.state, pr.closed_at, action = "closed", now(), "closed"
        elif body.get("state") == "open" and pr.state == "closed" and not pr.merged:
            pr.state, pr.closed_at, action = "open", None, "reopened"
        pr.updated_at = now()
        data = await self.pull_json(repo, pr)
        if changes:
            await self.sim.events.pull_request(repo, pr, "edited", sender=self.author(call),
                                               changes=changes)
        if action is not None:
            await self.sim.events.pull_request(repo, pr, action, sender=self.author(call))
        return respond(data)

    @route("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/files")
    async def list_pull_files(self, call: Call) -> web.StreamResponse:
        repo = self.repo(call)
        pr = self.pull_of(repo, call.params["pull_number"])
        _, files = await self.pr_diff_files(repo, pr)
        page, headers = self.paginate(call, files)
        api = f"{self.sim.base_url}/repos/{repo.full_name}"
        html = f"{self.sim.base_url}/{repo.full_name}"
        out = []
        blobs = await gitrepo.blob_ids(repo.git_dir, pr.head_sha, [f.filename for f in page])
        for f in page:
            entry: JSON = {
                "sha": blobs.get(f.filename, gitrepo.ZERO_SHA), "filename": f.filename,
                "status": f.status, "additions": f.additions, "deletions": f.deletions,
                "changes": f.additions + f.deletions,
                "blob_url": f"{html}/blob/{pr.head_sha}/{f.filename}",
                "raw_url": f"{html}/raw/{pr.head_sha}/{f.filename}",
                "contents_url": f"{api}/contents/{f.filename}?ref={pr.head_sha}"}
            if f.patch is not None:
                entry["patch"] = f.patch
            if f.previous_filename is not None:
                entry["previous_filename"] = f.previous_filename
            out.append(entry)
        return respond(out, headers=headers)

    @route("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/commits")
    async def list_pull_commits(self, call: Call) -> web.StreamResponse:
        repo = self.repo(call)
        pr = self.pull_of(repo, call.params["pull_number"])
        base = pr.base_sha_at_merge or await self.branch_sha(repo, pr.base_ref)
        shas = await gitrepo.rev_list(repo.git_dir, pr.head_sha, [base] if base else [])
        page, headers = self.paginate(call, shas)
        return respond([await self.sim.commit_json(repo, sha, with_files=False) for sha in page],
                       headers=headers)

    # --- reviews ----------------------------------------------------------------------------

    @route("POST", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews")
    async def create_review(self, call: Call) -> web.StreamResponse:
        repo = self.repo(call)
        pr = self.pull_of(repo, call.params["pull_number"])
        body = call.body or {}
        user = self.author(call)
        commit_id = str(body.get("commit_id") or pr.head_sha)
        resolved = await gitrepo.rev_parse(repo.git_dir, commit_id)
        if resolved is None:
            raise ApiError(422, "Unprocessable Entity", [f"No commit found for SHA: {commit_id}"])
        if not await gitrepo.is_ancestor(repo.git_dir, resolved, pr.head_sha):
            raise ApiError(422, "Unprocessable Entity",
                           ["commit_id is not part of the pull request"])
        event = body.get("event")
        state = {"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED",
                 "COMMENT": "COMMENTED", None: "PENDING"}[event]
        text = str(body.get("body") or "")
        comments = body.get("comments") or []
        if event == "REQUEST_CHANGES" and not text:
            raise ApiError(422, "Unprocessable Entity",
                           ["Body is required when requesting changes"])
        if event == "COMMENT" and not text and not comments:
            raise ApiError(422, "Unprocessable Entity",
                           ["Body is required when using the COMMENT event"])
        if len(text) > BODY_LIMIT:
            raise ApiError(422, "Unprocessable Entity",
                           [f"Body is too long (maximum is {BODY_LIMIT} characters)"])
        if user.login == pr.user.login and event in ("APPROVE", "REQUEST_CHANGES"):
            raise ApiError(422, "Unprocessable Entity", [
                f"Can not {'approve' if event == 'APPROVE' else 'request changes on'} "
                "your own pull request"])
        _, files = await self.pr_diff_files(repo, pr, resolved)
        by_path = {f.filename: f for f in files}
        anchored = [self._anchor(c, by_path) for c in comments]
        # Only now, with every comment resolved, does anything get stored: GitHub is atomic.
        review = Review(id=self.state.next_id(), repo=repo.full_name, number=pr.number,
                        user=user, body=text, state=state, commit_id=resolved,  # type: ignore[arg-type]
                        submitted_at=None if state == "PENDING" else now())
        self.state.reviews[review.id] = review
        for comment, (diff_hunk, position, line, side, start_line, start_side) in zip(
                comments, anchored, strict=True):
            rc = ReviewComment(id=self.state.next_id(), review_id=review.id,
                               repo=repo.full_name, number=pr.number, user=user,
                               path=comment["path"], body=comment["body"], commit_id=resolved,
                               diff_hunk=diff_hunk, position=position, line=line, side=side,
                               start_line=start_line, start_side=start_side)
            self.state.review_comments[rc.id] = rc
        return respond(self.render.review(review, repo))

    def _anchor(self, comment: JSON, files: dict[str, prdiff.FileDiff]
                ) -> tuple[str, int, int | None, Any, int | None, Any]:
        def unresolved(what: str = "Line could not be resolved") -> ApiError:
            return ApiError(422, "Unprocessable Entity", [what])

        if len(comment.get("body", "")) > BODY_LIMIT:
            raise unresolved(f"Body is too long (maximum is {BODY_LIMIT} characters)")
        f = files.get(comment["path"])
        if f is None:
            raise unresolved("Path could not be resolved")
        if "line" not in comment:
            if "position" not in comment:
                raise unresolved()
            found_at = f.at_position(int(comment["position"]))
            if found_at is None or found_at[1].kind == "\\":
                raise unresolved("Position could not be resolved")
            hunk, line_obj = found_at
            side = "LEFT" if line_obj.kind == "-" else "RIGHT"
            number = line_obj.old if side == "LEFT" else line_obj.new
            return f.diff_hunk(hunk, line_obj), line_obj.position, number, side, None, None
        side = comment.get("side", "RIGHT")
        if side not in ("LEFT", "RIGHT"):
            raise unresolved()
        located = f.locate(side, int(comment["line"]))
        if located is None:
            raise unresolved()
        hunk, line_obj = located
        start_line = comment.get("start_line")
        start_side = None
        if start_line is not None:
            start_side = comment.get("start_side", side)
            if start_side not in ("LEFT", "RIGHT"):
                raise unresolved("start_line could not be resolved")
            start = f.locate(start_side, int(start_line))
            if start is None:
                raise unresolved("start_line could not be resolved")
            if start[0] is not hunk:
                raise unresolved("start_line must be part of the same hunk as the line.")
            if start[1].position >= line_obj.position:
                raise unresolved("start_line must precede the end line.")
        return (f.diff_hunk(hunk, line_obj), line_obj.position, int(comment["line"]), side,
                start_line, start_side)

    @route("POST", "/repos/{owner}/{repo}/pulls/{pull_number}/comments")
    async def create_review_comment(self, call: Call) -> web.StreamResponse:
        """One review comment outside a review: on a line, on a whole file, or a reply.

        GitHub files it under a one-comment review of its own. A file-level comment
        (``subject_type: file``) needs only its path to be in the PR diff; with any other
        path GitHub answers 422 (the thread's path is invalid, it has no diff hunk).
        """
        repo = self.repo(call)
        pr = self.pull_of(repo, call.params["pull_number"])
        body = call.body or {}
        text = str(body.get("body", ""))
        if len(text) > BODY_LIMIT:
            raise validation_failed("PullRequestReviewComment", "body", message=(
                f"Body is too long (maximum is {BODY_LIMIT} characters)"))
        user = self.author(call)
        if body.get("in_reply_to") is not None:  # every other field is ignored
            parent = self._review_comment(repo, str(body["in_reply_to"]))
            reply = await self.sim.add_review_reply(repo, pr, parent, user, text)
            return respond(self.render.review_comment(reply, repo), 201)
        commit_id = str(body["commit_id"])
        resolved = await gitrepo.rev_parse(repo.git_dir, commit_id)
        if resolved is None or not await gitrepo.is_ancestor(repo.git_dir, resolved,
                                                             pr.head_sha):
            raise validation_failed(
                "PullRequestReviewComment", "pull_request_review_thread.end_commit_oid",
                message="pull_request_review_thread.end_commit_oid is not part of the pull "
                        "request")
        _, files = await self.pr_diff_files(repo, pr, resolved)
        f = {x.filename: x for x in files}.get(str(body["path"]))
        if f is None:
            raise ApiError(422, "Validation Failed", [
                {"resource": "PullRequestReviewComment", "code": "invalid",
                 "field": "pull_request_review_thread.path"},
                {"resource": "PullRequestReviewComment", "code": "missing_field",
                 "field": "pull_request_review_thread.diff_hunk"}])
        if body.get("subject_type") == "file":
            diff_hunk = f.patch.split("\n", 1)[0] if f.patch else ""
            where: tuple[str, int | None, int | None, Any, int | None, Any] = (
                diff_hunk, None, None, "RIGHT", None, None)
        else:
            try:
                where = self._anchor(body, {f.filename: f})
            except ApiError as exc:
                message = str((exc.errors or [exc.message])[0])
                raise validation_failed("PullRequestReviewComment",
                                        "pull_request_review_thread.line",
                                        message=f"pull_request_review_thread.line: {message}"
                                        ) from None
        review = Review(self.state.next_id(), repo.full_name, pr.number, user, "", "COMMENTED",
                        resolved, submitted_at=now())
        self.state.reviews[review.id] = review
        diff_hunk, position, line, side, start_line, start_side = where
        comment = ReviewComment(
            id=self.state.next_id(), review_id=review.id, repo=repo.full_name, number=pr.number,
            user=user, path=f.filename, body=text, commit_id=resolved, diff_hunk=diff_hunk,
            position=position, line=line, side=side, start_line=start_line,
            start_side=start_side,
            subject_type="file" if body.get("subject_type") == "file" else "line")
        self.state.review_comments[comment.id] = comment
        await self.sim.events.review_comment(repo, pr, comment)
        return respond(self.render.review_comment(comment, repo), 201)

    @route("POST", "/repos/{owner}/{repo}/pulls/{pull_number}/comments/{comment_id}/replies")
    async def reply_to_review_comment(self, call: Call) -> web.StreamResponse:
        repo = self.repo(call)
        pr = self.pull_of(repo, call.params["pull_number"])
        parent = self._review_comment(repo, call.params["comment_id"])
        if parent.number != pr.number:
            raise not_found()
        text = str((call.body or {}).get("body", ""))
        if len(text) > BODY_LIMIT:
            raise validation_failed("PullRequestReviewComment", "body", message=(
                f"Body is too long (maximum is {BODY_LIMIT} characters)"))
        reply = await self.sim.add_review_reply(repo, pr, parent, self.author(call), text)
        return respond(self.render.review_comment(reply, repo), 201)

    def _review_comment(self, repo: Repo, comment_id: str) -> ReviewComment:
        comment = self.state.review_comments.get(int(comment_id))
        if comment is None or comment.repo != repo.full_name:
            raise not_found()
        return comment

    @route("GET", "/repos/{owner}/{repo}/pulls/comments/{comment_id}")
    async def get_review_comment(self, call: Call) -> web.StreamResponse:
        repo = self.repo(call)
        return respond(self.render.review_comment(
            self._review_comment(repo, call.params["comment_id"]), repo))

    @route("POST", "/repos/{owner}/{repo}/pulls/comments/{comment_id}/reactions")
    async def create_review_comment_reaction(self, call: Call) -> web.StreamResponse:
        repo = self.repo(call)
        comment = self._review_comment(repo, call.params["comment_id"])
        return self._react(comment.reactions, self.author(call),
                           str((call.body or {}).get("content", "")))

    @route("GET", "/repos/{owner}/{repo}/issues/comments/{comment_id}")
    async def get_issue_comment(self, call: Call) -> web.StreamResponse:
        repo = self.repo(call)
        return respond(self.render.issue_comment(
            self._issue_comment(repo, call.params["comment_id"]), repo))

    @route("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews")
    async def list_reviews(self, call: Call) -> web.StreamResponse:
        repo = self.repo(call)
        pr = self.pull_of(repo, call.params["pull_number"])
        reviews = sorted(self.state.reviews_of(repo.full_name, pr.number), key=lambda r: r.id)
        page, headers = self.paginate(call, reviews)
        return respond([self.render.review(r, repo) for r in page], headers=headers)

    @route("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/comments")
    async def list_review_comments(self, call: Call) -> web.StreamResponse:
        repo = self.repo(call)
        pr = self.pull_of(repo, call.params["pull_number"])
        comments = sorted(self.state.review_comments_of(repo.full_name, pr.number),
                          key=lambda c: c.id)
        page, headers = self.paginate(call, comments)
        return respond([self.render.review_comment(c, repo) for c in page], headers=headers)

    # --- issue comments and reactions -------------------------------------------------------

    @route("GET", "/repos/{owner}/{repo}/issues/{issue_number}/comments")
    async def list_issue_comments(self, call: Call) -> web.StreamResponse:
        repo = self.repo(call)
        pr = self.pull_of(repo, call.params["issue_number"])
        comments = sorted(self.state.issue_comments_of(repo.full_name, pr.number),
                          key=lambda c: c.id)
        page, headers = self.paginate(call, comments)
        return respond([self.render.issue_comment(c, repo) for c in page], headers=headers)

    @route("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments")
    async def create_issue_comment(self, call: Call) -> web.StreamResponse:
        repo = self.repo(call)
        pr = self.pull_of(repo, call.params["issue_number"])
        text = str((call.body or {}).get("body", ""))
        if len(text) > BODY_LIMIT:
            raise validation_failed("IssueComment", "body", message=(
                f"Body is too long (maximum is {BODY_LIMIT} characters)"))
        comment = await self.sim.add_issue_comment(repo, pr, self.author(call), text,
                                                   via_app=call.token is not None
                                                   and call.token.kind == "installation")
        return respond(self.render.issue_comment(comment, repo), 201, headers={
            "Location": self.render.issue_comment(comment, repo)["url"]})

    @route("PATCH", "/repos/{owner}/{repo}/issues/comments/{comment_id}")
    async def update_issue_comment(self, call: Call) -> web.StreamResponse:
        repo = self.repo(call)
        comment = self._issue_comment(repo, call.params["comment_id"])
        user = self.author(call)
        if user.login != comment.user.login and PERMISSION_RANK[
                self.sim.permission(repo, user.login)] < PERMISSION_RANK["write"]:
            raise ApiError(403, "Resource not accessible by integration")
        text = str((call.body or {}).get("body", ""))
        if len(text) > BODY_LIMIT:
            raise validation_failed("IssueComment", "body", message=(
                f"Body is too long (maximum is {BODY_LIMIT} characters)"))
        old_body, comment.body = comment.body, text
        comment.updated_at = now()
        data = self.render.issue_comment(comment, repo)
        if old_body != text:
            await self.sim.events.issue_comment(
                repo, self.state.pulls[(repo.full_name, comment.number)], comment,
                action="edited", sender=user, old_body=old_body)
        return respond(data)

    def _issue_comment(self, repo: Repo, comment_id: str) -> IssueComment:
        comment = self.state.issue_comments.get(int(comment_id))
        if comment is None or comment.repo != repo.full_name:
            raise not_found()
        return comment

    @route("POST", "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions")
    async def create_reaction(self, call: Call) -> web.StreamResponse:
        repo = self.repo(call)
        comment = self._issue_comment(repo, call.params["comment_id"])
        return self._react(comment.reactions, self.author(call),
                           str((call.body or {}).get("content", "")))

    def _react(self, reactions: list[Reaction], user: Any, content: str) -> web.Response:
        """201 for a new reaction, 200 with the existing one when it is there already."""
        for existing in reactions:
            if existing.user.login == user.login and existing.content == content:
                return respond(self.render.reaction(existing), 200)
        reaction = Reaction(self.state.next_id(), user, content)
        reactions.append(reaction)
        return respond(self.render.reaction(reaction), 201)

    # --- check runs -------------------------------------------------------------------------

    def _check_output(self, run: CheckRun, body: JSON) -> None:
        output = body.get("output")
        if output is None:
            return
        summary = output.get("summary")
        for key in ("summary", "text"):
            value = output.get(key)
            if isinstance(value, str) and len(value) > SUMMARY_LIMIT:
                raise ApiError(422, f"Invalid request.\n\nOnly {SUMMARY_LIMIT} characters are "
                               f"allowed; {len(value)} were supplied.")
        annotations = output.get("annotations") or []
        if len(annotations) > ANNOTATIONS_PER_REQUEST:
            raise ApiError(422, "Invalid request.\n\nOnly 50 annotations are allowed per "
                           "request.")
        run.title = output.get("title", run.title)
        run.summary = summary if summary is not None else run.summary
        run.text = output.get("text", run.text)
        run.annotations.extend(annotations)

    def _check_status(self, run: CheckRun, body: JSON) -> None:
        status = body.get("status")
        conclusion = body.get("conclusion")
        if conclusion is not None:
            status = "completed"
        if status == "completed" and conclusion is None and run.conclusion is None:
            raise ApiError(422, "Invalid request.\n\n`conclusion` is required when `status` is "
                           "`completed`.")
        if status is not None:
            run.status = status
        if conclusion is not None:
            run.conclusion = conclusion
        if "started_at" in body:
            run.started_at = _parse_time(body["started_at"]) or run.started_at
        if run.status == "completed":
            run.completed_at = _parse_time(body.get("completed_at")) or run.completed_at or now()
        for key in ("details_url", "external_id", "name"):
            if key in body:
                setattr(run, key, body[key])

    async def check_run_json(self, repo: Repo, run: CheckRun) -> JSON:
        return await self.sim.check_run_json(repo, run)

    @route("POST", "/repos/{owner}/{repo}/check-runs")
    async def create_check_run(self, call: Call) -> web.StreamResponse:
        repo = self.repo(call)
        if call.token is None or call.token.kind != "installation":
            raise ApiError(403, "You must authenticate via a GitHub App.")
        body = call.body or {}
        head_sha = await gitrepo.rev_parse(repo.git_dir, str(body.get("head_sha", "")))
        if head_sha is None or not head_sha.startswith(str(body.get("head_sha"))):
            raise ApiError(422, f"No commit found for SHA: {body.get('head_sha')}")
        run = CheckRun(id=self.state.next_id(), repo=repo.full_name,
                       name=str(body.get("name", "")), head_sha=head_sha,
                       check_suite_id=self.sim.check_suite_id(repo, head_sha))
        self._check_status(run, body)
        self._check_output(run, body)
        self.state.check_runs[run.id] = run
        data = await self.check_run_json(repo, run)
        await self.sim.events.check_run(repo, run, "created", self.author(call))
        return respond(data, 201)

    def _check_run(self, repo: Repo, run_id: str) -> CheckRun:
        run = self.state.check_runs.get(int(run_id))
        if run is None or run.repo != repo.full_name:
            raise not_found()
        return run

    @route("PATCH", "/repos/{owner}/{repo}/check-runs/{check_run_id}")
    async def update_check_run(self, call: Call) -> web.StreamResponse:
        repo = self.repo(call)
        if call.token is None or call.token.kind != "installation":
            raise ApiError(403, "You must authenticate via a GitHub App.")
        run = self._check_run(repo, call.params["check_run_id"])
        body = call.body or {}
        was_completed = run.status == "completed"
        self._check_status(run, body)
        self._check_output(run, body)
        data = await self.check_run_json(repo, run)
        if run.status == "completed" and not was_completed:
            await self.sim.events.check_run(repo, run, "completed", self.author(call))
        return respond(data)

    @route("GET", "/repos/{owner}/{repo}/check-runs/{check_run_id}")
    async def get_check_run(self, call: Call) -> web.StreamResponse:
        repo = self.repo(call)
        return respond(await self.check_run_json(
            repo, self._check_run(repo, call.params["check_run_id"])))

    @route("GET", "/repos/{owner}/{repo}/check-runs/{check_run_id}/annotations")
    async def list_annotations(self, call: Call) -> web.StreamResponse:
        repo = self.repo(call)
        run = self._check_run(repo, call.params["check_run_id"])
        page, headers = self.paginate(call, run.annotations)
        out = []
        for a in page:
            out.append({
                "path": a.get("path"), "start_line": a.get("start_line"),
                "end_line": a.get("end_line"), "start_column": a.get("start_column"),
                "end_column": a.get("end_column"),
                "annotation_level": a.get("annotation_level"), "title": a.get("title"),
                "message": a.get("message"), "raw_details": a.get("raw_details"),
                "blob_href": f"{self.sim.base_url}/{repo.full_name}/blob/{run.head_sha}/"
                             f"{a.get('path')}"})
        return respond(out, headers=headers)

    @route("GET", "/repos/{owner}/{repo}/commits/{ref}/check-runs")
    async def list_check_runs(self, call: Call) -> web.StreamResponse:
        repo = self.repo(call)
        sha = await gitrepo.resolve_ref(repo.git_dir, call.params["ref"])
        if sha is None:
            raise ApiError(422, f"No commit found for SHA: {call.params['ref']}")
        name = call.query("check_name")
        status = call.query("status")
        runs = [r for r in self.state.check_runs_of(repo.full_name, sha, name)
                if status is None or r.status == status]
        runs.sort(key=lambda r: r.id, reverse=True)
        page, headers = self.paginate(call, runs)
        return respond({"total_count": len(runs),
                        "check_runs": [await self.check_run_json(repo, r) for r in page]},
                       headers=headers)


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return None
