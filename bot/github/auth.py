"""Who the bot is on GitHub: a GitHub App (JWT + installation tokens) or one static token.

Both expose ``await auth.token_for(installation_id)``. The installation token is
cached until five minutes before GitHub says it expires, so a job that starts
with a cached token still has at least five minutes of validity for its first
request, and ``GitHubClient`` asks again before each request.
"""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import aiohttp
from gidgethub import BadRequest
from gidgethub.apps import get_jwt

from bot.errors import ForksyncError
from bot.github.client import GitHubClient

TOKEN_REFRESH_MARGIN = 5 * 60  # seconds before expires_at that a cached token is renewed
JWT_LIFETIME = 9 * 60  # from the backdated iat: GitHub allows at most 10 minutes


class AuthError(ForksyncError):
    """The App cannot act on a repository (not installed, or credentials rejected)."""


class TokenSource(Protocol):
    """What a job needs: a token for an installation (or for everything, in token mode)."""

    async def token_for(self, installation_id: int | None = None) -> str: ...


@dataclass(frozen=True)
class _CachedToken:
    token: str
    refresh_at: float  # time.time() at which to mint a new one


class AppAuth:
    """GitHub App authentication: the App JWT and cached installation tokens."""

    def __init__(self, app_id: int, private_key: str, base_url: str,
                 session: aiohttp.ClientSession, *,
                 clock: Callable[[], float] = time.time,
                 client: GitHubClient | None = None) -> None:
        self.app_id = app_id
        self._private_key = private_key
        self.base_url = base_url.rstrip("/")
        self._clock = clock
        # No token provider: every call here passes the App JWT explicitly.
        self._gh = client or GitHubClient(session, base_url=self.base_url, token_provider=None)
        self._tokens: dict[int, _CachedToken] = {}
        # What each installation's current token may do, as GitHub said when minting it.
        self._permissions: dict[int, dict[str, str]] = {}
        self._repo_installations: dict[str, int] = {}
        self._accounts: dict[int, int] = {}
        self._locks: dict[int, asyncio.Lock] = {}
        self.tokens_minted = 0

    def app_jwt(self) -> str:
        """A fresh RS256 App JWT: issued 60 s in the past (clock drift), valid < 10 minutes."""
        return get_jwt(app_id=str(self.app_id), private_key=self._private_key,
                       expiration=JWT_LIFETIME)

    async def installation_token(self, installation_id: int) -> str:
        """An installation access token, from the cache while it has 5+ minutes left."""
        cached = self._tokens.get(installation_id)
        if cached is not None and self._clock() < cached.refresh_at:
            return cached.token
        # One mint per installation even when several jobs ask at once.
        lock = self._locks.setdefault(installation_id, asyncio.Lock())
        async with lock:
            cached = self._tokens.get(installation_id)
            if cached is not None and self._clock() < cached.refresh_at:
                return cached.token
            data = await self._gh.post("/app/installations/{installation_id}/access_tokens",
                                       {"installation_id": installation_id}, data=b"",
                                       jwt=self.app_jwt())
            token = str(data["token"])
            expires = _parse_time(data.get("expires_at"), default=self._clock() + 3600)
            self._tokens[installation_id] = _CachedToken(token, expires - TOKEN_REFRESH_MARGIN)
            self._permissions[installation_id] = {
                str(k): str(v) for k, v in (data.get("permissions") or {}).items()}
            self.tokens_minted += 1
            return token

    async def token_for(self, installation_id: int | None = None) -> str:
        if installation_id is None:
            raise AuthError("App mode needs an installation id to act on a repository")
        return await self.installation_token(installation_id)

    async def permission(self, installation_id: int, name: str) -> str:
        """The level (``read``, ``write``, or ``none``) of one permission of the token a job
        gets now: a token keeps the permissions it was minted with, so a grant made later
        counts from the next token on."""
        await self.installation_token(installation_id)
        return self._permissions.get(installation_id, {}).get(name, "none")

    async def installation_for_repo(self, full_name: str) -> int:
        """The installation id of this App on ``owner/repo``; AuthError if not installed."""
        if full_name in self._repo_installations:
            return self._repo_installations[full_name]
        owner, _, repo = full_name.partition("/")
        try:
            data = await self._gh.getitem("/repos/{owner}/{repo}/installation",
                                          {"owner": owner, "repo": repo}, jwt=self.app_jwt())
        except BadRequest as exc:
            if int(exc.status_code) == 404:
                raise AuthError(
                    f"the forksync App is not installed on {full_name}: install it there, "
                    "or grant the installation access to that repository") from None
            raise
        installation_id = int(data["id"])
        self._repo_installations[full_name] = installation_id
        return installation_id

    async def installation_account(self, installation_id: int) -> int:
        """The id of the account (user or organization) an installation belongs to."""
        if installation_id not in self._accounts:
            data = await self._gh.getitem("/app/installations/{installation_id}",
                                          {"installation_id": installation_id},
                                          jwt=self.app_jwt())
            # An installation never changes account; the id survives renames.
            self._accounts[installation_id] = int(data["account"]["id"])
        return self._accounts[installation_id]

    def forget(self, installation_id: int) -> None:
        """Drop a cached token (e.g. after GitHub answered 401 with it)."""
        self._tokens.pop(installation_id, None)
        self._permissions.pop(installation_id, None)


class StaticToken:
    """Token mode (GitHub Actions, a PAT): the same token for every installation."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def token_for(self, installation_id: int | None = None) -> str:
        return self._token

    def __repr__(self) -> str:
        return "StaticToken(***)"


def _parse_time(value: object, *, default: float) -> float:
    if not isinstance(value, str):
        return default
    try:
        parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return default
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.UTC)
    return parsed.timestamp()


__all__ = ["AppAuth", "AuthError", "StaticToken", "TokenSource"]
