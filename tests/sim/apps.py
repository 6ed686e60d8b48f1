"""Registering the App from a manifest: GitHub's web page that takes it, and the code exchange.

GitHub's manifest flow has two halves. On the web, a form posts the manifest to
``/settings/apps/new`` (or ``/organizations/{org}/settings/apps/new``); GitHub
shows it, the person presses "Create GitHub App", and GitHub redirects to the
manifest's ``redirect_url`` with ``?code=...&state=...``. Over the API,
``POST /app-manifests/{code}/conversions`` (no authentication; the code works once,
for an hour) returns the App with its ``pem``, ``webhook_secret`` and OAuth client.

The simulator presses the button at once. After the exchange it *is* the new App:
JWTs must be signed with the new key, webhooks are signed with the new secret and
sent to the manifest's hook URL, and new installations get its permissions and events.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

import aiohttp
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from .api import Api, ApiError, Call, respond, route
from .state import User

if TYPE_CHECKING:
    from .server import Simulator

NEW_APP_PAGE = re.compile(r"^/(?:organizations/(?P<org>[^/]+)/)?settings/apps/new$")
CODE_TTL = 3600.0
_REQUIRED = ("name", "url", "redirect_url")


@dataclass
class PendingApp:
    """A manifest a person confirmed, waiting for its code to be exchanged."""

    manifest: dict[str, Any]
    owner: User
    created: float
    used: bool = False


def manifest_problems(manifest: Any) -> list[str]:
    """What GitHub would refuse in a manifest (the fields the flow depends on)."""
    if not isinstance(manifest, dict):
        return ["the manifest is not a JSON object"]
    problems = [f"{key} is missing" for key in _REQUIRED if not isinstance(manifest.get(key), str)]
    hook = manifest.get("hook_attributes")
    if hook is not None and not (isinstance(hook, dict) and isinstance(hook.get("url"), str)):
        problems.append("hook_attributes.url is missing")
    for key in ("url", "redirect_url"):
        if isinstance(manifest.get(key), str) and urlsplit(manifest[key]).scheme not in (
                "http", "https"):
            problems.append(f"{key} is not an http(s) URL")
    if not isinstance(manifest.get("default_permissions", {}), dict):
        problems.append("default_permissions is not an object")
    if not isinstance(manifest.get("default_events", []), list):
        problems.append("default_events is not a list")
    return problems


class AppRegistry:
    """The manifests waiting for their exchange, and the apps made from them."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.pending: dict[str, PendingApp] = {}
        self.created: list[dict[str, Any]] = []  # the manifests that became the App
        self.code_ttl = CODE_TTL  # seconds a code can be exchanged; a test may shorten it

    async def new_app_page(self, request: web.Request, org: str | None) -> web.Response:
        """``POST /settings/apps/new?state=...`` with the form field ``manifest``."""
        if request.method != "POST":
            return web.Response(status=405, text="Use the manifest form (POST).\n")
        form = await request.post()
        raw = form.get("manifest")
        try:
            manifest = json.loads(str(raw)) if raw is not None else None
        except ValueError:
            manifest = None
        problems = manifest_problems(manifest)
        if problems:
            self.sim.violations.append(f"POST {request.path}: invalid manifest: "
                                       + "; ".join(problems))
            return web.Response(status=422, text="Invalid GitHub App manifest: "
                                + "; ".join(problems) + "\n")
        assert isinstance(manifest, dict)
        owner = self.sim.state.user(org, "Organization") if org else self.sim.app_owner
        code = secrets.token_hex(10)
        self.pending[code] = PendingApp(manifest, owner, time.time())
        query = {"code": code}
        if request.query.get("state"):
            query["state"] = request.query["state"]
        target = manifest["redirect_url"]
        sep = "&" if urlsplit(target).query else "?"
        return web.Response(status=302, headers={"Location": f"{target}{sep}{urlencode(query)}"})

    def take(self, code: str) -> PendingApp | None:
        """The confirmed manifest for a code, once; None if unknown, used or expired."""
        pending = self.pending.get(code)
        if pending is None or pending.used or time.time() - pending.created > self.code_ttl:
            return None
        pending.used = True
        return pending

    def become(self, pending: PendingApp) -> tuple[str, str]:
        """Turn the simulator's App into the registered one; its new key and webhook secret."""
        sim, manifest = self.sim, pending.manifest
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        sim.private_key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption()).decode()
        sim.public_key_pem = key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
        secret = secrets.token_hex(20)
        sim.webhook_secret = sim.webhooks.secret = secret
        hook = manifest.get("hook_attributes") or {}
        if hook.get("url") and hook.get("active", True):
            sim.bot_url = hook["url"]
        render = sim.render
        render.app_owner = sim.app_owner = pending.owner
        render.app_name = manifest["name"]
        render.app_slug = re.sub(r"[^a-z0-9]+", "-", manifest["name"].lower()).strip("-")
        render.app_description = manifest.get("description") or ""
        render.app_permissions = {"metadata": "read", **manifest.get("default_permissions", {})}
        render.app_events = list(manifest.get("default_events", []))
        self.created.append(manifest)
        return sim.private_key_pem, secret


@route("POST", "/app-manifests/{code}/conversions")
async def create_from_manifest(api: Api, call: Call) -> web.StreamResponse:
    registry = api.sim.apps
    pending = registry.take(call.params["code"])
    if pending is None:
        raise ApiError(404, "Not Found")
    pem, secret = registry.become(pending)
    data = {**api.render.app(), "client_secret": secrets.token_hex(20),
            "webhook_secret": secret, "pem": pem}
    return respond(data, 201)




class _Form(HTMLParser):
    """The first form of a page: its action and its fields (what a browser would submit)."""

    def __init__(self) -> None:
        super().__init__()
        self.action: str | None = None
        self.fields: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form" and self.action is None:
            self.action = a.get("action", "")
        elif tag == "input" and self.action is not None and a.get("name"):
            self.fields[a["name"]] = a.get("value", "")


async def press_the_button(page_url: str) -> tuple[int, str]:
    """A person's browser: open the page, submit its form, follow the redirects back.

    Returns the status and text of the last page (the one ``redirect_url`` serves).
    """
    async with aiohttp.ClientSession() as session:
        async with session.get(page_url) as r:
            form = _Form()
            form.feed(await r.text())
        if form.action is None:
            raise AssertionError(f"no form on {page_url}")
        async with session.post(form.action, data=form.fields) as r:
            return r.status, await r.text()


__all__ = ["NEW_APP_PAGE", "AppRegistry", "PendingApp", "create_from_manifest",
           "manifest_problems", "press_the_button"]
