"""GitHubClient against a tiny local aiohttp server: retries, rate limits, errors, tokens."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from gidgethub import BadRequest, GitHubBroken, RateLimitExceeded

from bot.github.client import GitHubClient, WriteLimiter, static_provider

TOKEN = "ghs_" + "a" * 36

Reply = Callable[[web.Request], Any]


@dataclass
class FakeAPI:
    """Scripted replies per path: each request pops the next one (the last one repeats)."""

    url: str = ""
    script: dict[str, list[Reply]] = field(default_factory=dict)
    seen: list[tuple[str, str, str | None, float]] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append((request.method, request.path, request.headers.get("Authorization"),
                          time.monotonic()))
        replies = self.script.get(request.path) or [lambda r: web.json_response({})]
        reply = replies.pop(0) if len(replies) > 1 else replies[0]
        result = reply(request)
        if asyncio.iscoroutine(result):
            result = await result
        assert isinstance(result, web.StreamResponse)
        return result


def status(code: int, body: dict[str, Any] | None = None, **hdrs: str) -> Reply:
    return lambda r: web.json_response(body or {"message": f"status {code}"}, status=code,
                                       headers=hdrs)


def ok(body: Any = None) -> Reply:
    return lambda r: web.json_response(body if body is not None else {"ok": True})


def slow(seconds: float) -> Reply:
    async def reply(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(seconds)
        return web.json_response({"late": True})

    return reply


class RecordingClient(GitHubClient):
    """Records the waits instead of sleeping them, so rate-limit tests take no time."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sleeps: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)


@pytest.fixture
async def api() -> AsyncIterator[FakeAPI]:
    fake = FakeAPI()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    fake.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield fake
    await runner.cleanup()


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


def client(session: aiohttp.ClientSession, api: FakeAPI, cls: type[GitHubClient] = GitHubClient,
           **kw: Any) -> Any:
    options: dict[str, Any] = {"max_retries": 3, "backoff_base": 0.01, "backoff_cap": 0.05,
                               "request_timeout": 5.0, **kw}
    return cls(session, base_url=api.url, token_provider=static_provider(TOKEN), **options)


async def test_call_style_and_token_header(api: FakeAPI, session: aiohttp.ClientSession) -> None:
    api.script["/repos/o/r"] = [ok({"full_name": "o/r"})]
    gh = client(session, api)
    data = await gh.getitem("/repos/{owner}/{repo}", {"owner": "o", "repo": "r"})
    assert data == {"full_name": "o/r"}
    assert api.seen[0][:3] == ("GET", "/repos/o/r", f"token {TOKEN}")


async def test_token_provider_is_asked_on_every_request(
        api: FakeAPI, session: aiohttp.ClientSession) -> None:
    tokens = iter(["first", "second"])

    async def provider() -> str:
        return next(tokens)

    gh = GitHubClient(session, base_url=api.url, token_provider=provider)
    await gh.getitem("/a")
    await gh.getitem("/a")
    assert [s[2] for s in api.seen] == ["token first", "token second"]


@pytest.mark.parametrize("code", [500, 502, 503, 504])
async def test_retries_5xx_then_succeeds(api: FakeAPI, session: aiohttp.ClientSession,
                                         code: int) -> None:
    api.script["/x"] = [status(code), status(code), ok({"n": 1})]
    gh = client(session, api)
    assert await gh.getitem("/x") == {"n": 1}
    assert len(api.seen) == 3 and gh.retry_count == 2


async def test_gives_up_after_max_retries_with_githubs_error(
        api: FakeAPI, session: aiohttp.ClientSession) -> None:
    api.script["/x"] = [status(502, {"message": "Server Error"})]
    gh = client(session, api, max_retries=2)
    with pytest.raises(GitHubBroken, match="Server Error"):
        await gh.getitem("/x")
    assert len(api.seen) == 3  # 1 + 2 retries


async def test_retries_a_timeout(api: FakeAPI, session: aiohttp.ClientSession) -> None:
    api.script["/x"] = [slow(1.0), ok({"fast": True})]
    gh = client(session, api, request_timeout=0.2)
    assert await gh.getitem("/x") == {"fast": True}
    assert len(api.seen) == 2


async def test_connection_refused_is_retried_then_reported(session: aiohttp.ClientSession) -> None:
    gh = GitHubClient(session, base_url="http://127.0.0.1:9", token_provider=None,
                      max_retries=2, backoff_base=0.01, backoff_cap=0.02)
    with pytest.raises(GitHubBroken, match="GitHub unreachable after 3 attempts"):
        await gh.getitem("/x")
    assert gh.request_count == 3


async def test_secondary_rate_limit_with_retry_after_waits_that_long(
        api: FakeAPI, session: aiohttp.ClientSession) -> None:
    limited = {"message": "You have exceeded a secondary rate limit."}
    api.script["/repos/o/r/pulls"] = [status(403, limited, **{"Retry-After": "1"}),
                                      ok({"number": 1})]
    gh = client(session, api)
    started = time.monotonic()
    assert await gh.post("/repos/o/r/pulls", data={"title": "t"}) == {"number": 1}
    # really waited, with the jitter staying small
    assert 1.0 <= time.monotonic() - started < 2.5
    assert gh.write_count == 2


async def test_429_retry_after_and_secondary_limit_without_headers(
        api: FakeAPI, session: aiohttp.ClientSession) -> None:
    api.script["/a"] = [status(429, **{"Retry-After": "7"}), ok()]
    api.script["/b"] = [status(403, {"message": "You have exceeded a secondary rate limit"}), ok()]
    gh = client(session, api, cls=RecordingClient)
    await gh.getitem("/a")
    await gh.getitem("/b")
    assert 7 <= gh.sleeps[0] < 8 and 60 <= gh.sleeps[1] < 61


async def test_primary_rate_limit_waits_until_reset(api: FakeAPI,
                                                    session: aiohttp.ClientSession) -> None:
    reset = str(int(time.time()) + 30)
    api.script["/x"] = [status(403, {"message": "API rate limit exceeded"},
                               **{"X-RateLimit-Remaining": "0", "X-RateLimit-Limit": "5000",
                                  "X-RateLimit-Reset": reset}), ok()]
    gh = client(session, api, cls=RecordingClient)
    await gh.getitem("/x")
    assert 25 <= gh.sleeps[0] <= 33


async def test_rate_limit_wait_longer_than_the_cap_raises(
        api: FakeAPI, session: aiohttp.ClientSession) -> None:
    reset = str(int(time.time()) + 3000)
    api.script["/x"] = [status(403, {"message": "API rate limit exceeded"},
                               **{"X-RateLimit-Remaining": "0", "X-RateLimit-Limit": "5000",
                                  "X-RateLimit-Reset": reset})]
    gh = client(session, api, cls=RecordingClient, max_rate_limit_wait=600)
    with pytest.raises(RateLimitExceeded) as info:
        await gh.getitem("/x")
    assert gh.sleeps == [] and len(api.seen) == 1
    assert info.value.rate_limit.reset_datetime.timestamp() == float(reset)


@pytest.mark.parametrize("code", [401, 403, 404, 409])
async def test_other_4xx_raise_at_once_with_githubs_message(
        api: FakeAPI, session: aiohttp.ClientSession, code: int) -> None:
    api.script["/x"] = [status(code, {"message": "Resource not accessible by integration"})]
    gh = client(session, api)
    with pytest.raises(BadRequest, match="Resource not accessible by integration") as info:
        await gh.post("/x", data={})
    assert int(info.value.status_code) == code
    assert len(api.seen) == 1


async def test_422_keeps_githubs_validation_detail(api: FakeAPI,
                                                   session: aiohttp.ClientSession) -> None:
    api.script["/x"] = [status(422, {"message": "Validation Failed", "errors": [
        {"resource": "PullRequestReviewComment", "code": "custom",
         "message": "pull_request_review_thread.line must be part of the diff"}]})]
    gh = client(session, api)
    with pytest.raises(BadRequest, match="must be part of the diff"):
        await gh.post("/x", data={})


async def test_write_count_and_pagination(api: FakeAPI, session: aiohttp.ClientSession) -> None:
    api.script["/items"] = [lambda r: web.json_response(
        [1, 2], headers={"Link": f'<{api.url}/items2>; rel="next"'})]
    api.script["/items2"] = [ok([3])]
    gh = client(session, api)
    assert [i async for i in gh.getiter("/items")] == [1, 2, 3]
    await gh.post("/w", data={})
    await gh.patch("/w", data={})
    await gh.put("/w", data={})
    await gh.delete("/w")
    assert gh.write_count == 4 and gh.request_count == 6


async def test_tokens_never_reach_the_log(api: FakeAPI, session: aiohttp.ClientSession,
                                          caplog: pytest.LogCaptureFixture) -> None:
    api.script["/x"] = [status(502), ok()]
    caplog.set_level(logging.DEBUG)
    gh = client(session, api)
    await gh.getitem("/x?access_token=" + TOKEN)
    ours = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("bot"))
    assert "retry" in ours and TOKEN not in ours


async def test_explicit_jwt_is_not_replaced_by_the_token(
        api: FakeAPI, session: aiohttp.ClientSession) -> None:
    gh = client(session, api)
    await gh.getitem("/app", jwt="the.jwt.value")
    assert api.seen[0][2] == "bearer the.jwt.value"


async def test_401_renews_the_token_once(api: FakeAPI, session: aiohttp.ClientSession) -> None:
    tokens = iter(["revoked", "fresh", "fresh2"])
    renewals: list[int] = []

    async def provider() -> str:
        return next(tokens)

    def deny_revoked(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") == "token revoked":
            return web.json_response({"message": "Bad credentials"}, status=401)
        return web.json_response({"ok": True})

    api.script["/x"] = [deny_revoked]
    gh = GitHubClient(session, base_url=api.url, token_provider=provider,
                      on_unauthorized=lambda: renewals.append(1))
    assert await gh.getitem("/x") == {"ok": True}
    assert renewals == [1] and [s[2] for s in api.seen] == ["token revoked", "token fresh"]


async def test_401_twice_is_raised(api: FakeAPI, session: aiohttp.ClientSession) -> None:
    api.script["/x"] = [status(401, {"message": "Bad credentials"})]
    renewals: list[int] = []
    gh = GitHubClient(session, base_url=api.url, token_provider=static_provider(TOKEN),
                      on_unauthorized=lambda: renewals.append(1))
    with pytest.raises(BadRequest, match="Bad credentials"):
        await gh.getitem("/x")
    assert renewals == [1] and len(api.seen) == 2


async def test_write_limiter_paces_content_creation(api: FakeAPI,
                                                    session: aiohttp.ClientSession) -> None:
    limiter = WriteLimiter(per_minute=3, per_hour=100, minute=0.3, hour=60)
    gh = client(session, api, write_limiter=limiter)
    started = time.monotonic()
    for _ in range(7):
        await gh.post("/w", data={})
    await gh.getitem("/r")  # reads are never paced
    elapsed = time.monotonic() - started
    assert 0.6 <= elapsed < 1.5 and gh.write_count == 7
    posts = [t for method, _, _, t in api.seen if method == "POST"]
    # never more than 3 writes inside any 0.3 s window
    assert all(posts[i + 3] - posts[i] >= 0.29 for i in range(len(posts) - 3))


async def test_write_limiter_refuses_a_wait_past_its_cap(api: FakeAPI,
                                                         session: aiohttp.ClientSession) -> None:
    limiter = WriteLimiter(per_minute=100, per_hour=2, hour=3600, max_wait=10)
    gh = client(session, api, write_limiter=limiter)
    await gh.post("/w", data={})
    await gh.post("/w", data={})
    with pytest.raises(RateLimitExceeded, match="secondary limit on content creation") as info:
        await gh.post("/w", data={})
    assert info.value.rate_limit.reset_datetime.timestamp() > time.time() + 3000
    assert len(api.seen) == 2
