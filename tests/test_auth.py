"""App JWT, installation tokens (cached until 5 minutes before expiry), static tokens."""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import aiohttp
import jwt
import pytest
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from bot.github.auth import AppAuth, AuthError, StaticToken

APP_ID = 1234


@pytest.fixture(scope="module")
def keypair() -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM,
                                serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return private, public


@dataclass
class FakeGitHubApps:
    public_key: str
    url: str = ""
    minted: int = 0
    lifetime: float = 3600.0
    installed: dict[str, int] = field(default_factory=lambda: {"o/fork": 99})
    # What GitHub says each minted token may do (changed by a test: "a grant made later").
    permissions: dict[str, str] = field(default_factory=lambda: {"contents": "write"})

    def check_jwt(self, request: web.Request) -> None:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        assert scheme.lower() == "bearer"
        claims = jwt.decode(token, self.public_key, algorithms=["RS256"])
        assert claims["iss"] == str(APP_ID)

    async def access_tokens(self, request: web.Request) -> web.Response:
        self.check_jwt(request)
        await asyncio.sleep(0.05)  # let concurrent callers pile up
        self.minted += 1
        expires = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=self.lifetime)
        return web.json_response({
            "token": f"ghs_minted{self.minted}_for_{request.match_info['id']}",
            "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "permissions": dict(self.permissions)}, status=201)

    async def repo_installation(self, request: web.Request) -> web.Response:
        self.check_jwt(request)
        name = f"{request.match_info['owner']}/{request.match_info['repo']}"
        if name not in self.installed:
            return web.json_response({"message": "Not Found"}, status=404)
        return web.json_response({"id": self.installed[name]})


@pytest.fixture
async def fake(keypair: tuple[str, str]) -> AsyncIterator[FakeGitHubApps]:
    fake = FakeGitHubApps(public_key=keypair[1])
    app = web.Application()
    app.router.add_post("/app/installations/{id}/access_tokens", fake.access_tokens)
    app.router.add_get("/repos/{owner}/{repo}/installation", fake.repo_installation)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    fake.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield fake
    await runner.cleanup()


def test_app_jwt_claims(keypair: tuple[str, str]) -> None:
    private, public = keypair
    auth = AppAuth(APP_ID, private, "https://api.github.com", session=None)  # type: ignore[arg-type]
    now = time.time()
    claims = jwt.decode(auth.app_jwt(), public, algorithms=["RS256"])
    assert claims["iss"] == str(APP_ID)
    assert now - 62 <= claims["iat"] <= now - 58  # backdated for clock drift
    assert claims["exp"] - claims["iat"] <= 600 and claims["exp"] > now
    assert jwt.get_unverified_header(auth.app_jwt())["alg"] == "RS256"


async def test_installation_token_is_cached_until_five_minutes_before_expiry(
        fake: FakeGitHubApps, keypair: tuple[str, str]) -> None:
    clock = {"now": time.time()}
    async with aiohttp.ClientSession() as session:
        auth = AppAuth(APP_ID, keypair[0], fake.url, session, clock=lambda: clock["now"])
        first = await auth.installation_token(7)
        assert first == "ghs_minted1_for_7"
        clock["now"] += 3600 - 301  # still more than 5 minutes left
        assert await auth.installation_token(7) == first and fake.minted == 1
        clock["now"] += 2  # now less than 5 minutes left
        assert await auth.installation_token(7) == "ghs_minted2_for_7"
        # another installation has its own token
        assert await auth.token_for(8) == "ghs_minted3_for_8"


async def test_concurrent_requests_mint_one_token(fake: FakeGitHubApps,
                                                  keypair: tuple[str, str]) -> None:
    async with aiohttp.ClientSession() as session:
        auth = AppAuth(APP_ID, keypair[0], fake.url, session)
        tokens = await asyncio.gather(*(auth.installation_token(7) for _ in range(10)))
    assert set(tokens) == {"ghs_minted1_for_7"} and fake.minted == 1


async def test_installation_for_repo(fake: FakeGitHubApps, keypair: tuple[str, str]) -> None:
    async with aiohttp.ClientSession() as session:
        auth = AppAuth(APP_ID, keypair[0], fake.url, session)
        assert await auth.installation_for_repo("o/fork") == 99
        with pytest.raises(AuthError, match="not installed on o/other"):
            await auth.installation_for_repo("o/other")
        with pytest.raises(AuthError, match="installation id"):
            await auth.token_for(None)


async def test_static_token() -> None:
    static = StaticToken("ghp_secret_value")
    assert await static.token_for() == "ghp_secret_value"
    assert await static.token_for(5) == "ghp_secret_value"
    assert "secret" not in repr(static)


async def test_a_tokens_permissions_are_those_it_was_minted_with(
        fake: FakeGitHubApps, keypair: tuple[str, str]) -> None:
    clock = {"now": time.time()}
    async with aiohttp.ClientSession() as session:
        auth = AppAuth(APP_ID, keypair[0], fake.url, session, clock=lambda: clock["now"])
        assert await auth.permission(7, "workflows") == "none"
        assert await auth.permission(7, "contents") == "write"
        # Granted later: the cached token still cannot, as on GitHub, until the next one.
        fake.permissions["workflows"] = "write"
        assert await auth.permission(7, "workflows") == "none" and fake.minted == 1
        clock["now"] += 3600
        assert await auth.permission(7, "workflows") == "write" and fake.minted == 2
        auth.forget(7)
        fake.permissions.pop("workflows")
        assert await auth.permission(7, "workflows") == "none"
