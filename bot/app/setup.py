"""`forksync setup`: register the GitHub App from its manifest and write `.env` (as Probot does).

GitHub's manifest flow: a page on localhost holds a form whose button posts the
App's manifest (JSON) to GitHub; GitHub asks the person to confirm, creates the App
and redirects back to the page's server with a one-time ``code``; the server trades
the code for the App's ID, private key and webhook secret
(``POST /app-manifests/{code}/conversions``) and writes them where ``forksync
serve`` reads them. GitHub Enterprise Server works the same, at its own address.
"""

from __future__ import annotations

import asyncio
import html
import json
import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import aiohttp
from aiohttp import web
from gidgethub import BadRequest, GitHubException

from bot.app.settings import DEFAULT_API_URL
from bot.errors import ForksyncError
from bot.github.client import GitHubClient

HOMEPAGE = "https://github.com/forksync/forksync"
DESCRIPTION = ("Keeps a translated downstream fork in sync with its upstream: one draft PR per "
               "window of upstream PRs, one review with a suggestion per conflict, and a check "
               "that gates the merge.")
# The same permissions and events as app.yml (tests/test_setup.py keeps them equal);
# docs/APP.md says why each one is needed.
PERMISSIONS = {"contents": "write", "pull_requests": "write", "checks": "write",
               "issues": "write", "metadata": "read"}
EVENTS = ["push", "pull_request", "issue_comment", "pull_request_review_comment", "check_run"]


class SetupError(ForksyncError):
    """The App could not be registered, or its settings not written."""


@dataclass(frozen=True)
class SetupOptions:
    """What `forksync setup` was asked to do, checked before anything is served."""

    webhook_url: str
    env_file: Path
    name: str = "forksync"
    org: str | None = None
    api_url: str = DEFAULT_API_URL
    github_url: str = "https://github.com"
    host: str = "127.0.0.1"
    port: int = 0

    @classmethod
    def from_args(cls, args: Any, environ: Mapping[str, str]) -> SetupOptions:
        api_url = (args.api_url or environ.get("FORKSYNC_API_URL")
                   or environ.get("GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/")
        github_url = (args.github_url or web_url(api_url)
                      or environ.get("FORKSYNC_GIT_URL") or "").rstrip("/")
        if not github_url:
            raise SetupError(f"cannot tell GitHub's web address from the API URL {api_url}; "
                             "pass --github-url https://HOST")
        for flag, url in (("--webhook-url", args.webhook_url), ("--api-url", api_url),
                          ("--github-url", github_url)):
            if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc:
                raise SetupError(f"{flag}: expected an http(s) URL, got {url!r}")
        env_file = Path(args.env_file)
        if env_file.exists():
            raise SetupError(f"{env_file} exists already; setup never overwrites it (move it "
                             "away, or pass --env-file with another name)")
        if not env_file.parent.is_dir():
            raise SetupError(f"cannot write {env_file}: the directory {env_file.parent} does "
                             "not exist")
        return cls(args.webhook_url, env_file, args.name, args.org, api_url, github_url,
                   args.host, args.port)

    @property
    def new_app_url(self) -> str:
        """GitHub's page that receives the manifest (a person's account or an organization's)."""
        if self.org:
            return f"{self.github_url}/organizations/{quote(self.org)}/settings/apps/new"
        return f"{self.github_url}/settings/apps/new"


@dataclass(frozen=True)
class Registration:
    """The App GitHub created, and where its settings went."""

    app_id: int
    slug: str
    html_url: str
    env_file: Path

    @property
    def install_url(self) -> str:
        return f"{self.html_url}/installations/new"


def web_url(api_url: str) -> str | None:
    """GitHub's web address for an API URL: github.com, or a GHES host's own root."""
    if api_url.rstrip("/") == DEFAULT_API_URL:
        return "https://github.com"
    if api_url.rstrip("/").endswith("/api/v3"):
        return api_url.rstrip("/").removesuffix("/api/v3")
    return None


def manifest(options: SetupOptions, redirect_url: str) -> dict[str, Any]:
    """The App's manifest, as GitHub's manifest flow takes it."""
    return {
        "name": options.name, "url": HOMEPAGE, "description": DESCRIPTION,
        "hook_attributes": {"url": options.webhook_url, "active": True},
        "redirect_url": redirect_url, "public": False,
        "default_permissions": dict(PERMISSIONS), "default_events": list(EVENTS),
    }


def form_page(options: SetupOptions, state: str, redirect_url: str) -> str:
    """The local page: one button that posts the manifest to GitHub."""
    data = html.escape(json.dumps(manifest(options, redirect_url)), quote=True)
    action = html.escape(f"{options.new_app_url}?state={state}", quote=True)
    where = html.escape(options.github_url)
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>Register forksync</title></head>
<body>
<h1>Register the forksync GitHub App</h1>
<p>The button sends the App's manifest (its name, webhook URL, permissions and events) to
{where}, which asks you to confirm and then sends you back here.</p>
<form action="{action}" method="post">
<input type="hidden" name="manifest" value="{data}">
<button type="submit">Create the GitHub App on {where}</button>
</form>
</body></html>
"""


def env_text(data: Mapping[str, Any], options: SetupOptions) -> str:
    """The `.env` for `forksync serve`; `docker --env-file` reads it too (no quotes, one line)."""
    pem = str(data["pem"]).strip().replace("\n", "\\n")
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    lines = [
        f"# forksync settings, written by `forksync setup` at {stamp} for the GitHub App",
        f"# {data.get('name', options.name)} ({data.get('html_url', '')}). Keep this file "
        "secret; docs/APP.md lists every setting.",
        f"FORKSYNC_APP_ID={data['id']}",
        f"FORKSYNC_PRIVATE_KEY={pem}",
        f"FORKSYNC_WEBHOOK_SECRET={data.get('webhook_secret') or ''}",
        f"FORKSYNC_API_URL={options.api_url}",
    ]
    if options.api_url != DEFAULT_API_URL:
        lines.append(f"FORKSYNC_GIT_URL={options.github_url}")
    # GitHub shows these once; forksync does not use them, but nothing it gave is dropped.
    lines.append(f"# OAuth client (unused by forksync): client_id={data.get('client_id', '')} "
                 f"client_secret={data.get('client_secret', '')}")
    return "\n".join(lines) + "\n"


def write_env(path: Path, text: str) -> None:
    """Create the file readable by its owner only; never replace one that exists."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise SetupError(f"{path} appeared while setup ran; not overwritten") from None
    except OSError as exc:
        raise SetupError(f"cannot write {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)


async def convert(session: aiohttp.ClientSession, api_url: str, code: str) -> dict[str, Any]:
    """Trade the one-time code for the App's ID, key and webhook secret."""
    gh = GitHubClient(session, base_url=api_url, token_provider=None, max_retries=2)
    try:
        data: dict[str, Any] = await gh.post("/app-manifests/{code}/conversions",
                                             url_vars={"code": code}, data=b"")
    except BadRequest as exc:
        if int(exc.status_code) == 404:
            raise SetupError("GitHub does not know the code it sent back (a code works once, "
                             "for one hour); run `forksync setup` again") from None
        raise SetupError(f"GitHub refused the App's manifest: {exc}") from None
    except (GitHubException, aiohttp.ClientError, TimeoutError) as exc:
        raise SetupError(f"cannot reach GitHub at {api_url}: {exc}") from None
    return data


class _Flow:
    """The local server's two pages and the outcome they wait for."""

    def __init__(self, options: SetupOptions, session: aiohttp.ClientSession) -> None:
        self.options = options
        self.session = session
        self.state = secrets.token_urlsafe(24)
        self.redirect_url = ""
        self.done: asyncio.Future[Registration] = asyncio.get_running_loop().create_future()

    async def index(self, request: web.Request) -> web.Response:
        return web.Response(text=form_page(self.options, self.state, self.redirect_url),
                            content_type="text/html")

    async def callback(self, request: web.Request) -> web.Response:
        code = request.query.get("code", "")
        if not code or not secrets.compare_digest(request.query.get("state", ""), self.state):
            # Not our round trip (a stale tab, a forged link): keep waiting for the real one.
            return _page("That link is not from this setup", "Start again from the setup page.",
                         400)
        if self.done.done():
            return _page("Already registered", "This setup is finished.", 409)
        try:
            data = await convert(self.session, self.options.api_url, code)
            write_env(self.options.env_file, env_text(data, self.options))
            if not data.get("webhook_secret"):
                raise SetupError(f"GitHub returned no webhook secret; set one on the App's "
                                 f"settings page and put it in FORKSYNC_WEBHOOK_SECRET in "
                                 f"{self.options.env_file}")
        except SetupError as exc:
            self.done.set_exception(exc)
            return _page("The App was not set up", str(exc), 502)
        registration = Registration(int(data["id"]), str(data.get("slug", "")),
                                    str(data.get("html_url", "")), self.options.env_file)
        self.done.set_result(registration)
        link = html.escape(registration.install_url, quote=True)
        return _page(f"Registered {data.get('name', self.options.name)}",
                     f'Settings written to {self.options.env_file}. Next, '
                     f'<a href="{link}">install the App on your fork</a>.', 200, raw=True)


def _page(title: str, text: str, status: int, *, raw: bool = False) -> web.Response:
    body = text if raw else html.escape(text)
    return web.Response(status=status, content_type="text/html",
                        text=f"<!doctype html><title>{html.escape(title)}</title>"
                             f"<h1>{html.escape(title)}</h1><p>{body}</p>\n")


async def setup_app(options: SetupOptions, announce: Callable[[str], None]) -> Registration:
    """Serve the page until GitHub comes back with a code, then write the `.env`."""
    async with aiohttp.ClientSession() as session:
        flow = _Flow(options, session)
        app = web.Application()
        app.router.add_get("/", flow.index)
        app.router.add_get("/callback", flow.callback)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        try:
            site = web.TCPSite(runner, options.host, options.port)
            try:
                await site.start()
            except OSError as exc:
                why = os.strerror(exc.errno).lower() if exc.errno else str(exc)
                raise SetupError(f"cannot listen on {options.host}:{options.port}: {why} "
                                 "(pass --port)") from None
            host, port = runner.addresses[0][:2]
            local = f"http://{host}:{port}"
            flow.redirect_url = f"{local}/callback"
            announce(f"Open {local}/ in a browser and press the button to register the App on "
                     f"{options.github_url} (Ctrl-C to stop).")
            return await flow.done
        finally:
            await runner.cleanup()


def run_setup(options: SetupOptions, announce: Callable[[str], None]) -> Registration:
    """Blocking entry for `forksync setup`."""
    return asyncio.run(setup_app(options, announce))


__all__ = ["EVENTS", "PERMISSIONS", "Registration", "SetupError", "SetupOptions", "env_text",
           "form_page", "manifest", "run_setup", "setup_app", "web_url"]
