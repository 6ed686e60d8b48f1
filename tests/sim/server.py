"""The simulator: one aiohttp server for the REST API and git smart HTTP, plus test helpers.

The server runs on its own thread and event loop. The bot under test may run
git synchronously (``subprocess.run``) from inside its own event loop; if both
shared one loop, a ``git push`` to the simulator would deadlock.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import logging
import re
import tempfile
import threading
import time
import uuid
from collections.abc import Coroutine, Mapping
from concurrent.futures import Future
from datetime import timedelta
from functools import cache
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import jwt
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from . import gitrepo, workflows
from .api import Api, ApiError, Call
from .apps import NEW_APP_PAGE, AppRegistry
from .events import Events
from .openapi import Match, RestSpec, WebhookSpec, rest_spec, webhook_spec
from .payloads import JSON, Render, Urls
from .state import (
    PERMISSION_RANK,
    CheckRun,
    Installation,
    IssueComment,
    PullRequest,
    Repo,
    RequestRecord,
    Review,
    ReviewComment,
    State,
    Token,
    User,
    now,
)
from .traffic import Fault, FaultKind, FaultQueue
from .webhooks import Delivery, WebhookSender

log = logging.getLogger(__name__)
T = TypeVar("T")

GIT_PATH = re.compile(r"^/(?P<owner>[^/]+)/(?P<name>[^/]+?)\.git(?P<rest>/.*)$")
JWT_ONLY = re.compile(r"^/app(/|$)|^/(repos/\{owner\}/\{repo\}|orgs/\{org\}|users/\{username\})"
                      r"/installation$")
ANON_LIMIT = 60
SECONDARY_RATE_LIMIT_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try "
    "again. If you reach out to GitHub Support for help, please include the request ID {}.")
ERROR_MESSAGES = {500: "Server Error", 502: "Server Error", 503: "Service Unavailable",
                  504: "We couldn't respond to your request in time. Sorry about that. "
                       "Please try resubmitting your request and contact us if the problem "
                       "persists."}


@cache
def _app_key() -> tuple[str, str]:
    """One RSA key per process: generating one per test would dominate the suite's time."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return private, public


class Simulator:
    """A local GitHub: REST subset, git over smart HTTP, signed webhooks, spec checks."""

    def __init__(self, *, bot_url: str | None = None, webhook_secret: str = "sim-webhook-secret",
                 root: Path | None = None, host: str = "127.0.0.1", port: int = 0,
                 app_id: int = 424242, check_responses: bool = True,
                 content_limits: tuple[int, int] | None = (80, 500)) -> None:
        self.host = host
        self.port = port
        self.app_id = app_id
        self.webhook_secret = webhook_secret
        self.private_key_pem, self.public_key_pem = _app_key()
        self.check_responses = check_responses
        # GitHub's secondary limits on content-creating requests: per minute, per hour.
        self.content_limits = content_limits
        self._content_times: dict[str, list[float]] = {}
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if root is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="github-sim-")
            root = Path(self._tmp.name)
        self.root = root
        self.repos_root = root / "repos"
        self.repos_root.mkdir(parents=True, exist_ok=True)
        self.hooks_dir = workflows.install_hook(root / "hooks")
        self.state = State()
        self.bot_user = self.state.user("forksync-sim[bot]", "Bot")
        self.app_owner = self.state.user("forksync-dev", "Organization")
        # Problems the *caller* caused: requests or webhooks that do not match GitHub's spec.
        self.violations: list[str] = []
        # Problems the *simulator* caused: its own answers not matching the documented shape.
        self.response_violations: list[str] = []
        # Requests for real GitHub operations that the simulator does not implement.
        self.unimplemented: list[str] = []
        self.requests: list[RequestRecord] = []
        # Exceptions inside the simulator itself (answered 500): always a simulator bug.
        self.internal_errors: list[str] = []
        self.faults = FaultQueue()
        self._initial_bot_url = bot_url
        self._anon_used: dict[str, int] = {}
        self._suites: dict[tuple[str, str], int] = {}
        self._repo_locks: dict[str, asyncio.Lock] = {}
        self._in_flight: set[asyncio.Future[Any]] = set()
        self._diff_cache: dict[tuple[str, str, str], str] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None
        self._runner: web.AppRunner | None = None
        self.base_url = ""
        self.render: Render = Render(Urls("", "", ""), app_id, self.app_owner)
        self.spec: RestSpec = rest_spec()
        self.hooks_spec: WebhookSpec = webhook_spec()
        self.webhooks: WebhookSender = WebhookSender(
            bot_url=bot_url, secret=webhook_secret, spec=self.hooks_spec,
            violations=self.violations, app_id=app_id)
        self.events = Events(self)
        self.api = Api(self)
        self.apps = AppRegistry(self)  # registering the App from a manifest

    # --- lifecycle --------------------------------------------------------------------------

    @property
    def git_base(self) -> str:
        return self.base_url

    @property
    def bot_url(self) -> str | None:
        return self.webhooks.bot_url

    @bot_url.setter
    def bot_url(self, url: str | None) -> None:
        self.webhooks.bot_url = url

    @property
    def deliveries(self) -> list[Delivery]:
        return self.webhooks.deliveries

    def start(self) -> Simulator:
        """Start serving on a background thread; returns once the port is bound."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def main() -> None:
            try:
                asyncio.run(self._serve(ready))
            except BaseException as exc:
                failure.append(exc)
                ready.set()

        self._thread = threading.Thread(target=main, name="github-sim", daemon=True)
        self._thread.start()
        ready.wait(timeout=30)
        if failure:
            raise RuntimeError(f"the GitHub simulator failed to start: {failure[0]}") from \
                failure[0]
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> Simulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _serve(self, ready: threading.Event) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        app = web.Application(client_max_size=1024**3)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        server = site._server
        assert server is not None
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1]
        self.base_url = f"http://{self.host}:{self.port}"
        self.render = Render(Urls(self.base_url, self.base_url, self.base_url), self.app_id,
                             self.app_owner)
        await self.webhooks.start()
        ready.set()
        try:
            await self._stop.wait()
        finally:
            await self.webhooks.stop()
            await self._runner.cleanup()
            if self._in_flight:
                await asyncio.wait(list(self._in_flight), timeout=10)

    def _submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        if self._loop is None:
            coro.close()
            raise RuntimeError("the simulator is not running: call start() first")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    async def _on_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the simulator's loop and await it from any loop."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            return await coro
        return await asyncio.wrap_future(self._submit(coro))

    def run_sync(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        """Run a coroutine on the simulator's loop from synchronous code."""
        return self._submit(coro).result(timeout)

    # --- the one HTTP entry point -----------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        record = RequestRecord(request.method, request.path, request.query_string, 0, "api",
                               timestamp=time.time())
        self.requests.append(record)
        request_id = f"{uuid.uuid4().hex[:4].upper()}:{uuid.uuid4().hex[:6].upper()}"
        git_match = GIT_PATH.match(request.rel_url.raw_path)
        page = NEW_APP_PAGE.match(request.path)
        if git_match:
            record.kind = "git"
        elif page:
            record.kind = "web"
        try:
            fault = self.faults.take(request.method, request.path)
            if fault is not None:
                record.fault = fault.kind
                response = await self._fault_response(request, fault, request_id)
            elif page:
                response = await self.apps.new_app_page(request, page["org"])
            elif git_match:
                # Shielded like API calls, so that git's child process is always reaped.
                git_task = asyncio.ensure_future(self._git(request, git_match, record))
                self._track(git_task)
                response = await asyncio.shield(git_task)
            else:
                # GitHub finishes a request even if the client hangs up half way: never leave
                # half of a write behind because the handler was cancelled.
                task = asyncio.ensure_future(self._api_recorded(request, record, request_id))
                self._track(task)
                response = await asyncio.shield(task)
        except asyncio.CancelledError:
            record.status = record.status or 0
            raise
        except Exception as exc:
            response = self._internal_error(request, exc, request_id)
        record.status = response.status
        return response

    async def _fault_response(self, request: web.Request, fault: Fault,
                              request_id: str) -> web.StreamResponse:
        if fault.kind == "timeout":
            await asyncio.sleep(fault.delay)
            return self._error(ApiError(504, ERROR_MESSAGES[504]), request_id)
        if fault.kind == "disconnect":
            if request.transport is not None:
                request.transport.close()
            raise asyncio.CancelledError
        if fault.kind in ("secondary_rate_limit", "rate_limit"):
            status = 403 if fault.kind == "secondary_rate_limit" else 429
            return self._error(ApiError(status, SECONDARY_RATE_LIMIT_MESSAGE.format(request_id),
                                        headers={"Retry-After": str(fault.retry_after)}),
                               request_id)
        if fault.kind == "primary_rate_limit":
            error = ApiError(403, "API rate limit exceeded for installation.", headers={
                "X-RateLimit-Remaining": "0", "X-RateLimit-Used": "5000",
                "X-RateLimit-Reset": str(int(time.time()) + fault.retry_after)})
            return self._error(error, request_id)
        return self._error(ApiError(fault.status, ERROR_MESSAGES.get(fault.status,
                                                                     "Server Error")),
                           request_id)

    def _internal_error(self, request: web.Request, exc: Exception,
                        request_id: str) -> web.Response:
        """A simulator bug: recorded for the tests to fail on, answered as GitHub would."""
        log.exception("simulator error on %s %s", request.method, request.path)
        self.internal_errors.append(f"{request.method} {request.path}: "
                                    f"{type(exc).__name__}: {exc}")
        return self._error(ApiError(500, ERROR_MESSAGES[500]), request_id)

    def _error(self, error: ApiError, request_id: str,
               extra: Mapping[str, str] | None = None) -> web.Response:
        headers = {"X-GitHub-Request-Id": request_id, **(extra or {}), **error.headers}
        return web.json_response(error.body(), status=error.status, headers=headers)

    async def _api_recorded(self, request: web.Request, record: RequestRecord,
                            request_id: str) -> web.StreamResponse:
        try:
            response = await self._api(request, record, request_id)
        except Exception as exc:  # a simulator bug must still answer like GitHub
            response = self._internal_error(request, exc, request_id)
        record.status = response.status
        return response

    async def _api(self, request: web.Request, record: RequestRecord,
                   request_id: str) -> web.StreamResponse:
        raw_path = request.rel_url.raw_path
        match = self.spec.match(request.method, raw_path)
        token: Token | None = None
        rate: dict[str, str] = {}
        try:
            if match is None:
                self.violations.append(
                    f"{request.method} {request.path}: no such operation in GitHub's REST API")
                raise ApiError(404, "Not Found")
            record.operation = match.operation.template
            if match.operation.template == "/app/installations/{installation_id}/access_tokens":
                record.kind = "token"
            raw = await request.read()
            body: Any = None
            if raw.strip():
                try:
                    body = json.loads(raw)
                except ValueError as exc:
                    self.violations.append(f"{request.method} {request.path}: body is not JSON")
                    raise ApiError(400, "Problems parsing JSON") from exc
            record.body = body
            token, app_jwt = self._authenticate(request, match)
            record.actor = token.user.login if token else ("app" if app_jwt else None)
            rate = self._rate_headers(token, request, count=not app_jwt)
            query = {key: request.query.getall(key) for key in request.query}
            problems = self.spec.validate_request(match, query, body,
                                                  has_body=bool(raw.strip()))
            if problems:
                self.violations.extend(problems)
                raise ApiError(422, "Invalid request.\n\n" + "\n".join(problems))
            self._enforce_content_limits(request, record, request_id)
            call = Call(request, match.operation.template, match.params, body, token, app_jwt)
            response = await self.api.dispatch(call)
            if response is None:
                self.unimplemented.append(f"{request.method} {match.operation.template}")
                raise ApiError(404, "Not Found")
        except ApiError as error:
            if not rate:  # refused before authentication: counted against the caller's IP
                rate = self._rate_headers(None, request, count=True)
            return self._error(error, request_id, rate)
        response.headers.update(rate)
        response.headers["X-GitHub-Request-Id"] = request_id
        response.headers["X-GitHub-Media-Type"] = "github.v3; format=json"
        response.headers["X-GitHub-Api-Version-Selected"] = "2022-11-28"
        if self.check_responses and isinstance(response, web.Response) and \
                response.content_type == "application/json" and 200 <= response.status < 300:
            assert response.body is not None
            data = json.loads(bytes(response.body))  # type: ignore[arg-type]
            self.response_violations.extend(
                self.spec.validate_response(match, response.status, data))
        return response

    def _enforce_content_limits(self, request: web.Request, record: RequestRecord,
                                request_id: str) -> None:
        """Answer like GitHub when one caller creates content too fast (and flag the caller)."""
        if self.content_limits is None or request.method != "POST" or record.kind != "api":
            return
        per_minute, per_hour = self.content_limits
        moment = time.time()
        times = self._content_times.setdefault(record.actor or request.remote or "?", [])
        times[:] = [t for t in times if moment - t < 3600]
        in_minute = sum(1 for t in times if moment - t < 60)
        if in_minute >= per_minute or len(times) >= per_hour:
            self.violations.append(
                f"POST {request.path}: secondary rate limit, more than {per_minute} "
                f"content-creating requests a minute or {per_hour} an hour")
            raise ApiError(403, SECONDARY_RATE_LIMIT_MESSAGE.format(request_id),
                           headers={"Retry-After": "60"})
        times.append(moment)

    def _authenticate(self, request: web.Request, match: Match) -> tuple[Token | None, bool]:
        header = request.headers.get("Authorization", "")
        scheme, _, credential = header.partition(" ")
        credential = credential.strip()
        needs_jwt = JWT_ONLY.search(match.operation.template) is not None
        if needs_jwt:
            if scheme.lower() != "bearer" or credential.count(".") != 2:
                raise ApiError(401, "A JSON web token could not be decoded")
            self._verify_jwt(credential)
            return None, True
        if not header:
            return None, False
        if scheme.lower() not in ("token", "bearer"):
            raise ApiError(401, "Bad credentials")
        token = self.state.tokens.get(credential)
        if token is None or token.expires_at < now():
            raise ApiError(401, "Bad credentials")
        return token, False

    def _verify_jwt(self, credential: str) -> None:
        try:
            claims = jwt.decode(credential, self.public_key_pem, algorithms=["RS256"],
                                options={"require": ["exp", "iat", "iss"]}, leeway=60)
        except jwt.ExpiredSignatureError as exc:
            raise ApiError(401, "'Expiration time' claim ('exp') must be a numeric value "
                                "representing the future time at which the assertion "
                                "expires") from exc
        except jwt.PyJWTError as exc:
            raise ApiError(401, "A JSON web token could not be decoded") from exc
        if str(claims["iss"]) != str(self.app_id):
            raise ApiError(401, "A JSON web token could not be decoded")
        if claims["exp"] > time.time() + 600 + 60:
            raise ApiError(401, "'Expiration time' claim ('exp') is too far in the future")

    def rate_numbers(self, token: Token | None, request: web.Request) -> tuple[int, int, int]:
        if token is not None:
            return token.rate_limit, token.used, int(token.reset_at.timestamp())
        ip = request.remote or "?"
        return ANON_LIMIT, self._anon_used.get(ip, 0), int(time.time()) + 3600

    def _rate_headers(self, token: Token | None, request: web.Request, *,
                      count: bool) -> dict[str, str]:
        if count:
            if token is not None:
                token.used += 1
            else:
                ip = request.remote or "?"
                self._anon_used[ip] = self._anon_used.get(ip, 0) + 1
        limit, used, reset = self.rate_numbers(token, request)
        return {"X-RateLimit-Limit": str(limit), "X-RateLimit-Remaining": str(max(limit - used, 0)),
                "X-RateLimit-Used": str(used), "X-RateLimit-Reset": str(reset),
                "X-RateLimit-Resource": "core"}

    # --- git smart HTTP ---------------------------------------------------------------------

    async def _git(self, request: web.Request, m: re.Match[str],
                   record: RequestRecord) -> web.StreamResponse:
        full_name = f"{m['owner']}/{m['name']}"
        repo = self.state.repos.get(full_name)
        if repo is None:
            return web.Response(status=404, text="Repository not found.\n")
        rest = m["rest"]
        service = request.query.get("service", "") if rest == "/info/refs" else rest[1:]
        writing = service == "git-receive-pack"
        challenge = {"WWW-Authenticate": 'Basic realm="GitHub"'}
        credential = _git_credential(request.headers.get("Authorization", ""))
        user: User | None = None
        token: Token | None = None
        if credential is not None:
            token = self.state.tokens.get(credential)
            if token is None or token.expires_at < now():
                return web.Response(status=401, text="Invalid username or token.\n",
                                    headers=challenge)
            user = token.user
            level = self._git_permission(token, repo)
            if level == "none":
                return web.Response(status=404, text="Repository not found.\n")
            if PERMISSION_RANK[level] < PERMISSION_RANK["write" if writing else "read"]:
                return web.Response(
                    status=403, text=f"Permission to {full_name}.git denied to {user.login}.\n")
        elif writing or repo.private:
            return web.Response(status=401, text="Authentication required.\n", headers=challenge)
        record.actor = user.login if user else None
        path_info = f"/{full_name}.git{rest}"
        if not (request.method == "POST" and rest == "/git-receive-pack"):
            sent: list[int] = []
            response = await gitrepo.http_backend(request, self.repos_root, path_info,
                                                  user.login if user else None, sent=sent)
            record.bytes_out = sum(sent)  # what the client fetched (benchmarks count it)
            return response
        assert user is not None and token is not None
        # git hangs up as soon as it has read the answer, which cancels this handler; the
        # ref snapshot and the webhooks after the push must happen regardless.
        task = asyncio.ensure_future(self._receive_pack(request, repo, path_info, user, record,
                                                        self._workflows_permission(token)))
        self._track(task)
        return await asyncio.shield(task)

    def _track(self, task: asyncio.Future[Any]) -> None:
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)

    async def _receive_pack(self, request: web.Request, repo: Repo, path_info: str,
                            user: User, record: RequestRecord,
                            workflows_permission: str) -> web.StreamResponse:
        async with self._repo_lock(repo.full_name):
            before = await gitrepo.refs(repo.git_dir)
            try:
                response = await gitrepo.http_backend(
                    request, self.repos_root, path_info, user.login,
                    {workflows.ENV_PERMISSION: workflows_permission})
                record.status = response.status
                return response
            finally:
                after = await gitrepo.refs(repo.git_dir)
                await self.events.ref_changes(repo, before, after, user)

    def _workflows_permission(self, token: Token) -> str:
        """What a push with ``token`` may do to workflow files (see ``tests/sim/workflows``)."""
        if token.kind != "installation":
            return "write"  # people's tokens carry no modelled scopes
        inst = self.state.installations.get(token.installation_id or -1)
        return (inst.permissions.get("workflows", "none") if inst is not None else "none")

    def _git_permission(self, token: Token, repo: Repo) -> str:
        if token.kind == "installation":
            inst = self.state.installations.get(token.installation_id or -1)
            if inst is not None and inst.covers(repo.full_name):
                return "write"
            return "none" if repo.private else "read"
        return self.permission(repo, token.user.login)

    def _repo_lock(self, full_name: str) -> asyncio.Lock:
        if full_name not in self._repo_locks:
            self._repo_locks[full_name] = asyncio.Lock()
        return self._repo_locks[full_name]

    # --- shared lookups used by the API and the events --------------------------------------

    def permission(self, repo: Repo, login: str) -> str:
        if login == repo.owner.login:
            return "admin"
        if login in repo.collaborators:
            return repo.collaborators[login]
        return "none" if repo.private else "read"

    def installation_for(self, full_name: str) -> Installation | None:
        for inst in self.state.installations.values():
            if inst.covers(full_name):
                return inst
        return None

    def check_suite_id(self, repo: Repo, head_sha: str) -> int:
        key = (repo.full_name, head_sha)
        if key not in self._suites:
            self._suites[key] = self.state.next_id()
        return self._suites[key]

    async def pr_diff_text(self, repo: Repo, pr: PullRequest, head: str | None = None) -> str:
        """``git diff merge-base(base, head) head``, which is what GitHub shows for a PR."""
        head = head or pr.head_sha
        base = await gitrepo.rev_parse(repo.git_dir, f"refs/heads/{pr.base_ref}") or head
        key = (repo.full_name, base, head)
        if key not in self._diff_cache:
            mb = await gitrepo.merge_base(repo.git_dir, base, head) or gitrepo.EMPTY_TREE
            self._diff_cache[key] = await gitrepo.diff(repo.git_dir, mb, head)
        return self._diff_cache[key]

    async def pull_json(self, repo: Repo, pr: PullRequest, *, full: bool = True) -> JSON:
        base_sha = await gitrepo.rev_parse(repo.git_dir, f"refs/heads/{pr.base_ref}") or ""
        counts: dict[str, Any] = {}
        if full:
            from . import prdiff

            files = prdiff.parse(await self.pr_diff_text(repo, pr))
            commits = await gitrepo.rev_list(repo.git_dir, pr.head_sha,
                                             [base_sha] if base_sha else [])
            if pr.state == "open":
                conflicts = await gitrepo.merge_conflicts(repo.git_dir, base_sha, pr.head_sha)
                counts["mergeable"] = not conflicts
                counts["mergeable_state"] = "dirty" if conflicts else (
                    "draft" if pr.draft else "clean")
            counts |= {"commits": len(commits), "changed_files": len(files),
                       "additions": sum(f.additions for f in files),
                       "deletions": sum(f.deletions for f in files)}
        data = self.render.pull(
            pr, repo, base_sha=base_sha, counts=counts,
            comments=len(self.state.issue_comments_of(repo.full_name, pr.number)),
            review_comments=len(self.state.review_comments_of(repo.full_name, pr.number)))
        if not full:
            for key in ("additions", "deletions", "changed_files", "commits", "comments",
                        "review_comments", "mergeable", "rebaseable", "mergeable_state",
                        "merged", "merged_by", "maintainer_can_modify"):
                data.pop(key, None)
        return data

    async def commit_json(self, repo: Repo, sha: str, *, with_files: bool) -> JSON:
        info = await gitrepo.commit_info(repo.git_dir, sha)
        api = f"{self.base_url}/repos/{repo.full_name}"
        html = f"{self.base_url}/{repo.full_name}"
        data: JSON = {
            "sha": sha, "node_id": f"C_{sha[:16]}", "url": f"{api}/commits/{sha}",
            "html_url": f"{html}/commit/{sha}", "comments_url": f"{api}/commits/{sha}/comments",
            "commit": {
                "author": {"name": info.author_name, "email": info.author_email,
                           "date": info.author_date},
                "committer": {"name": info.committer_name, "email": info.committer_email,
                              "date": info.committer_date},
                "message": info.message, "tree": {"sha": info.tree,
                                                  "url": f"{api}/git/trees/{info.tree}"},
                "url": f"{api}/git/commits/{sha}", "comment_count": 0,
                "verification": {"verified": False, "reason": "unsigned", "signature": None,
                                 "payload": None, "verified_at": None}},
            "author": None, "committer": None,
            "parents": [{"sha": p, "url": f"{api}/commits/{p}", "html_url": f"{html}/commit/{p}"}
                        for p in info.parents],
        }
        if with_files:
            from . import prdiff

            parent = info.parents[0] if info.parents else gitrepo.EMPTY_TREE
            files = prdiff.parse(await gitrepo.diff(repo.git_dir, parent, sha))
            data["files"] = [
                {"sha": None, "filename": f.filename, "status": f.status,
                 "additions": f.additions, "deletions": f.deletions,
                 "changes": f.additions + f.deletions,
                 "blob_url": f"{html}/blob/{sha}/{f.filename}",
                 "raw_url": f"{html}/raw/{sha}/{f.filename}",
                 "contents_url": f"{api}/contents/{f.filename}?ref={sha}",
                 **({"patch": f.patch} if f.patch is not None else {}),
                 **({"previous_filename": f.previous_filename}
                    if f.previous_filename else {})} for f in files]
            additions = sum(f.additions for f in files)
            deletions = sum(f.deletions for f in files)
            data["stats"] = {"additions": additions, "deletions": deletions,
                             "total": additions + deletions}
        return data

    async def check_run_json(self, repo: Repo, run: CheckRun) -> JSON:
        pulls = []
        for pr in self.state.prs(repo.full_name):
            if pr.state == "open" and pr.head_sha == run.head_sha:
                base = await gitrepo.rev_parse(repo.git_dir, f"refs/heads/{pr.base_ref}") or ""
                pulls.append(self.render.pr_ref(pr, repo, base))
        return self.render.check_run(run, repo, pulls)

    async def add_issue_comment(self, repo: Repo, pr: PullRequest, user: User, body: str, *,
                                via_app: bool = False) -> IssueComment:
        comment = IssueComment(self.state.next_id(), repo.full_name, pr.number, user, body,
                               via_app=via_app)
        self.state.issue_comments[comment.id] = comment
        await self.events.issue_comment(repo, pr, comment)
        return comment

    async def add_review_reply(self, repo: Repo, pr: PullRequest, parent: ReviewComment,
                               user: User, body: str) -> ReviewComment:
        """A reply in a review thread: GitHub files it under a one-comment review of its own."""
        if parent.in_reply_to_id is not None:  # GitHub threads replies under the first comment
            parent = self.state.review_comments[parent.in_reply_to_id]
        review = Review(self.state.next_id(), repo.full_name, pr.number, user, "", "COMMENTED",
                        pr.head_sha)
        self.state.reviews[review.id] = review
        reply = ReviewComment(
            id=self.state.next_id(), review_id=review.id, repo=repo.full_name, number=pr.number,
            user=user, path=parent.path, body=body, commit_id=parent.commit_id,
            diff_hunk=parent.diff_hunk, position=parent.position, line=parent.line,
            side=parent.side, start_line=parent.start_line, start_side=parent.start_side,
            in_reply_to_id=parent.id, subject_type=parent.subject_type)
        self.state.review_comments[reply.id] = reply
        await self.events.review_comment(repo, pr, reply)
        return reply

    # --- test helpers: setup (synchronous) --------------------------------------------------

    def create_repo(self, owner: str, name: str, from_path: str | Path | None = None, *,
                    private: bool = False, default_branch: str = "main",
                    install: bool = True, fork_of: str | None = None) -> str:
        """A bare repository (optionally a copy of a local one); returns ``owner/name``.

        ``fork_of`` makes it a GitHub fork of that repository (``parent`` in the API).
        """
        full_name = f"{owner}/{name}"
        if full_name in self.state.repos:
            raise ValueError(f"{full_name} exists already")
        if fork_of is not None and fork_of not in self.state.repos:
            raise ValueError(f"no repository {fork_of} to fork")
        git_dir = self.repos_root / owner / f"{name}.git"
        gitrepo.init_bare(git_dir, default_branch=default_branch,
                          from_path=Path(from_path) if from_path else None,
                          config=workflows.guard_config(self.hooks_dir))
        self.state.repos[full_name] = Repo(self.state.user(owner), name, self.state.next_id(),
                                           git_dir, private=private,
                                           default_branch=default_branch, parent=fork_of)
        if install and self.installation_for(full_name) is None:
            self._new_installation(owner, None)
        return full_name

    def _new_installation(self, owner: str, repositories: list[str] | None) -> Installation:
        for inst in self.state.installations.values():
            if inst.account.login == owner:
                if repositories is None:
                    inst.repositories = None
                elif inst.repositories is not None:
                    inst.repositories.update(repositories)
                return inst
        inst = Installation(self.state.next_id(), self.state.user(owner),
                            set(repositories) if repositories is not None else None,
                            permissions=dict(self.render.app_permissions),
                            events=list(self.render.app_events))
        self.state.installations[inst.id] = inst
        return inst

    def add_collaborator(self, repo: str, user: str, permission: str = "write") -> None:
        if permission not in PERMISSION_RANK:
            raise ValueError(f"unknown permission {permission!r}")
        self.state.user(user)
        self.state.repos[repo].collaborators[user] = permission

    def add_user(self, login: str) -> User:
        return self.state.user(login)

    def installation_id(self, repo: str) -> int:
        inst = self.installation_for(repo)
        if inst is None:
            raise LookupError(f"the app is not installed on {repo}")
        return inst.id

    def issue_token(self, repo_or_installation: str | int) -> str:
        """An installation token, as ``POST /app/installations/{id}/access_tokens`` would mint."""
        inst_id = (repo_or_installation if isinstance(repo_or_installation, int)
                   else self.installation_id(repo_or_installation))
        if inst_id not in self.state.installations:
            raise LookupError(f"no installation {inst_id}")
        return self.state.new_token("installation", self.bot_user, inst_id).value

    def user_token(self, login: str) -> str:
        """A personal access token for a (human) user, for pushes and comments as them."""
        return self.state.new_token("user", self.state.user(login)).value

    def git_url(self, repo: str, token: str | None = None) -> str:
        if repo not in self.state.repos:
            raise LookupError(f"no repository {repo}")
        auth = f"x-access-token:{quote(token, safe='')}@" if token else ""
        return f"http://{auth}{self.host}:{self.port}/{repo}.git"

    def ref(self, repo: str, branch: str) -> str | None:
        """The commit a branch points at, straight from the bare repository."""
        return gitrepo.refs_sync(self.state.repos[repo].git_dir).get(f"refs/heads/{branch}")

    def git_dir(self, repo: str) -> Path:
        return self.state.repos[repo].git_dir

    # --- test helpers: inspection -----------------------------------------------------------

    def prs(self, repo: str) -> list[PullRequest]:
        return self.state.prs(repo)

    def pr(self, repo: str, number: int) -> PullRequest:
        return self.state.pulls[(repo, number)]

    def reviews(self, repo: str, number: int) -> list[Any]:
        return sorted(self.state.reviews_of(repo, number), key=lambda r: r.id)

    def review_comments(self, repo: str, number: int) -> list[Any]:
        return sorted(self.state.review_comments_of(repo, number), key=lambda c: c.id)

    def issue_comments(self, repo: str, number: int) -> list[IssueComment]:
        return sorted(self.state.issue_comments_of(repo, number), key=lambda c: c.id)

    def check_runs(self, repo: str, head_sha: str | None = None,
                   name: str | None = None) -> list[CheckRun]:
        return sorted(self.state.check_runs_of(repo, head_sha, name), key=lambda c: c.id)

    def writes(self, repo: str | None = None) -> list[RequestRecord]:
        """Non-GET REST calls (optionally to one repo); git and token minting do not count."""
        prefix = f"/repos/{repo}/" if repo else "/"
        return [r for r in self.requests if r.is_write and (r.path + "/").startswith(prefix)]

    def git_bytes(self, since: int = 0) -> int:
        """Bytes the git server sent (every clone and fetch) in requests ``since`` onwards."""
        return sum(r.bytes_out for r in self.requests[since:] if r.kind == "git")

    def api_requests(self) -> list[RequestRecord]:
        return [r for r in self.requests if r.kind == "api"]

    def events_sent(self, event: str | None = None, action: str | None = None) -> list[Delivery]:
        return [d for d in self.deliveries if (event is None or d.event == event)
                and (action is None or d.action == action)]

    # --- test helpers: faults ---------------------------------------------------------------

    def inject_fault(self, path: str, kind: FaultKind = "status", *, method: str | None = None,
                     times: int = 1, status: int = 502, retry_after: int = 1,
                     delay: float = 60.0) -> Fault:
        """Make the next ``times`` requests whose path matches the regex ``path`` fail."""
        return self.faults.add(Fault(kind, re.compile(path), method.upper() if method else None,
                                     times, status, retry_after, delay))

    # --- test helpers: things people do on GitHub (these send webhooks) ---------------------

    async def wait_deliveries(self) -> list[Delivery]:
        """Wait until every webhook queued so far has been delivered (or has failed)."""
        async def settle() -> None:
            # A push's webhooks are queued only after git has its answer: wait for those too.
            while self._in_flight:
                await asyncio.gather(*list(self._in_flight), return_exceptions=True)
            await self.webhooks.drain()
        await self._on_loop(settle())
        return self.deliveries

    async def install(self, owner: str, repositories: list[str] | None = None, *,
                      sender: str | None = None,
                      permissions: Mapping[str, str] | None = None) -> int:
        """Install the App on an account (all repos, or the listed ``owner/name``s).

        ``permissions`` are granted on top of the defaults (``{"workflows": "write"}``).
        """
        async def go() -> int:
            inst = self._new_installation(owner, repositories)
            inst.permissions.update(permissions or {})
            await self.events.installation_created(inst, self.state.user(sender or owner))
            return inst.id
        return await self._on_loop(go())

    async def add_installation_repos(self, owner: str, repositories: list[str], *,
                                     sender: str | None = None) -> None:
        """Add repos to a selected-repos installation; sends ``installation_repositories``."""
        async def go() -> None:
            inst = self._new_installation(owner, repositories)
            repos = [self.state.repos[name] for name in repositories]
            await self.events.installation_repositories(inst, repos, "added",
                                                        self.state.user(sender or owner))
        await self._on_loop(go())

    async def uninstall(self, owner: str, *, sender: str | None = None) -> None:
        """Remove the App from an account; its tokens stop working; sends ``deleted``."""
        async def go() -> None:
            for inst in list(self.state.installations.values()):
                if inst.account.login == owner:
                    await self.events.installation_deleted(inst, self.state.user(sender or owner))
                    del self.state.installations[inst.id]
                    for token in self.state.tokens.values():
                        if token.installation_id == inst.id:
                            token.expires_at = now()
        await self._on_loop(go())

    def expire_tokens(self) -> None:
        """Make every token issued so far expired (to test refreshing them)."""
        for token in self.state.tokens.values():
            token.expires_at = now() - timedelta(seconds=1)

    async def comment(self, repo: str, number: int, user: str, body: str) -> IssueComment:
        """``user`` writes an issue comment on PR ``number``; sends ``issue_comment`` created."""
        async def go() -> IssueComment:
            r = self.state.repos[repo]
            return await self.add_issue_comment(r, self.state.pulls[(repo, number)],
                                                self.state.user(user), body)
        return await self._on_loop(go())

    async def reply(self, repo: str, number: int, comment_id: int, user: str,
                    body: str) -> ReviewComment:
        """``user`` replies in the review thread of ``comment_id``; sends
        ``pull_request_review_comment`` created."""
        async def go() -> ReviewComment:
            r = self.state.repos[repo]
            return await self.add_review_reply(r, self.state.pulls[(repo, number)],
                                               self.state.review_comments[comment_id],
                                               self.state.user(user), body)
        return await self._on_loop(go())

    async def commit(self, repo: str, branch: str, files: Mapping[str, str | bytes | None],
                     message: str, *, user: str = "octocat", parent: str | None = None) -> str:
        """``user`` commits to ``branch`` on the web (None deletes a path); sends ``push``."""
        async def go() -> str:
            r = self.state.repos[repo]
            async with self._repo_lock(repo):
                before = await gitrepo.refs(r.git_dir)
                ref = f"refs/heads/{branch}"
                base = parent or before.get(ref) or before.get(f"refs/heads/{r.default_branch}")
                data = {p: (v.encode() if isinstance(v, str) else v) for p, v in files.items()}
                who = self.state.user(user)
                sha = await gitrepo.commit_files(
                    r.git_dir, base, data, message, author=user,
                    email=f"{who.id}+{user}@users.noreply.github.com")
                await gitrepo.update_ref(r.git_dir, ref, sha)
                after = await gitrepo.refs(r.git_dir)
                await self.events.ref_changes(r, before, after, who)
            return sha
        return await self._on_loop(go())

    async def open_pr(self, repo: str, head: str, *, base: str | None = None,
                      title: str = "A pull request", body: str | None = None,
                      user: str = "octocat", draft: bool = False) -> PullRequest:
        """``user`` opens a PR; sends ``pull_request`` opened."""
        async def go() -> PullRequest:
            r = self.state.repos[repo]
            head_sha = await gitrepo.rev_parse(r.git_dir, f"refs/heads/{head}")
            if head_sha is None:
                raise LookupError(f"no branch {head} in {repo}")
            pr = PullRequest(repo, self.state.next_number(repo), self.state.next_id(), title,
                             body, self.state.user(user), head, head_sha,
                             base or r.default_branch, draft=draft)
            self.state.pulls[(repo, pr.number)] = pr
            await self.events.pull_request(r, pr, "opened", sender=pr.user)
            return pr
        return await self._on_loop(go())

    async def merge_pr(self, repo: str, number: int, *, method: str = "merge",
                       user: str = "octocat") -> str:
        """Merge (``merge``, ``squash`` or ``fast-forward``); sends ``push`` and ``closed``."""
        async def go() -> str:
            r = self.state.repos[repo]
            pr = self.state.pulls[(repo, number)]
            if pr.state != "open":
                raise ValueError(f"PR #{number} is not open")
            who = self.state.user(user)
            async with self._repo_lock(repo):
                before = await gitrepo.refs(r.git_dir)
                base_ref = f"refs/heads/{pr.base_ref}"
                base = before[base_ref]
                if method == "fast-forward":
                    if not await gitrepo.is_ancestor(r.git_dir, base, pr.head_sha):
                        raise ValueError(f"PR #{number} cannot be fast-forwarded")
                    sha = pr.head_sha
                else:
                    code, out = await gitrepo.run(r.git_dir, "merge-tree", "--write-tree",
                                                  base, pr.head_sha, ok=(0, 1))
                    if code != 0:
                        raise ValueError(f"PR #{number} has conflicts with {pr.base_ref}")
                    tree = out.decode().split()[0]
                    parents = [base] if method == "squash" else [base, pr.head_sha]
                    message = (f"{pr.title} (#{number})" if method == "squash" else
                               f"Merge pull request #{number} from {r.owner.login}/{pr.head_ref}"
                               f"\n\n{pr.title}")
                    args = ["commit-tree", tree]
                    for p in parents:
                        args += ["-p", p]
                    email = f"{who.id}+{user}@users.noreply.github.com"
                    _, raw = await gitrepo.run(r.git_dir, *args, input=message.encode(), env={
                        "GIT_AUTHOR_NAME": user, "GIT_AUTHOR_EMAIL": email})
                    sha = raw.decode().strip()
                await gitrepo.update_ref(r.git_dir, base_ref, sha, base)
                after = await gitrepo.refs(r.git_dir)
                pr.state, pr.merged, pr.merged_by = "closed", True, who
                pr.merged_at = pr.closed_at = pr.updated_at = now()
                pr.merge_commit_sha, pr.base_sha_at_merge = sha, base
                await self.events.ref_changes(r, before, after, who)
                await self.events.pull_request(r, pr, "closed", sender=who)
            return sha
        return await self._on_loop(go())

    async def close_pr(self, repo: str, number: int, *, user: str = "octocat") -> None:
        async def go() -> None:
            pr = self.state.pulls[(repo, number)]
            pr.state, pr.closed_at, pr.updated_at = "closed", now(), now()
            await self.events.pull_request(self.state.repos[repo], pr, "closed",
                                           sender=self.state.user(user))
        await self._on_loop(go())

    async def rerequest_check_run(self, repo: str, check_run_id: int, *,
                                  user: str = "octocat") -> None:
        """``user`` clicks "Re-run" on a check run; sends ``check_run`` rerequested."""
        async def go() -> None:
            run = self.state.check_runs[check_run_id]
            await self.events.check_run(self.state.repos[repo], run, "rerequested",
                                        self.state.user(user))
        await self._on_loop(go())

    async def mark_ready(self, repo: str, number: int, *, user: str = "octocat") -> None:
        """Take a PR out of draft (GitHub does this only through the UI and GraphQL)."""
        async def go() -> None:
            pr = self.state.pulls[(repo, number)]
            pr.draft, pr.updated_at = False, now()
            await self.events.pull_request(self.state.repos[repo], pr, "ready_for_review",
                                           sender=self.state.user(user))
        await self._on_loop(go())


def _git_credential(header: str) -> str | None:
    """The token in a git request: basic auth (any user, token as password) or a bearer."""
    scheme, _, value = header.partition(" ")
    value = value.strip()
    if scheme.lower() in ("bearer", "token") and value:
        return value
    if scheme.lower() == "basic" and value:
        with contextlib.suppress(binascii.Error, UnicodeDecodeError):
            user, _, password = base64.b64decode(value).decode().partition(":")
            return password or user
    return None
