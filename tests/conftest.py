"""The one FakeGH for unit tests, a fake job context around it, and the recorded samples.

bedevere style: a test builds an event from a sample file, dispatches it through a
handlers router with ``router.dispatch(event, ctx)``, and looks at what the fake
recorded. Canned responses are keyed by method and URL; nothing here knows about
any particular handler, so every handler test in the project can use it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uritemplate
from gidgethub import BadRequest, sansio
from hypothesis import settings

from bot.app.settings import Settings
from bot.app.store import Store, open_store
from bot.app.store.sqlite import SQLiteStore
from tests.pgserver import PostgresServer

SAMPLES = Path(__file__).parent / "samples"

# The property tests draw new examples on every plain `pytest`. `scripts/test` (what CI
# runs) loads "repeatable": the same examples every run, so a red CI run is a change in
# the code, never an unlucky draw. Pin what a fresh draw finds with `@example`.
settings.register_profile("repeatable", derandomize=True, database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
WRITE_METHODS = ("POST", "PATCH", "PUT", "DELETE")


def load_sample(name: str) -> Any:
    """The JSON in ``tests/samples/<name>.json``."""
    return json.loads((SAMPLES / f"{name}.json").read_text(encoding="utf-8"))


def sample_event(name: str, **changes: Any) -> sansio.Event:
    """A webhook event from a sample named ``<event>.<anything>``; ``changes`` update its data.

    A dotted key in ``changes`` reaches into nested dicts: ``**{"pull_request.merged": False}``.
    """
    data = load_sample(name)
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        target = data
        for key in parents:
            target = target[key]
        target[last] = value
    return sansio.Event(data, event=name.split(".", 1)[0], delivery_id=f"sample-{name}")


@dataclass
class Request:
    """One call the code under test made."""

    method: str
    url: str
    data: Any = None
    accept: str | None = None


class Responses:
    """Several canned answers for one request, given out in order; the last one repeats."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)

    def next(self) -> Any:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


class FakeGH:
    """A stand-in for ``GitHubClient``: canned responses by method + URL, every write recorded.

    An answer may be a value, an exception (raised), a callable ``f(request) -> value``,
    or ``Responses(a, b, ...)`` for a sequence. The URL key is a string (looked up with
    the query string, then without) or a compiled regex (``fullmatch``, tried after
    the strings, the latest registered first). An unknown GET raises 404, like GitHub;
    an unknown write answers ``{}``.
    """

    def __init__(self, responses: dict[tuple[str, str | re.Pattern[str]], Any] | None = None
                 ) -> None:
        self.responses: dict[tuple[str, str | re.Pattern[str]], Any] = dict(responses or {})
        self.requests: list[Request] = []

    def on(self, method: str, url: str | re.Pattern[str], *answers: Any) -> FakeGH:
        self.responses[(method.upper(), url)] = Responses(*answers) if len(answers) > 1 \
            else answers[0]
        return self

    @property
    def writes(self) -> list[Request]:
        return [r for r in self.requests if r.method in WRITE_METHODS]

    @property
    def write_count(self) -> int:
        return len(self.writes)

    def sent(self, method: str, url: str | None = None) -> list[Request]:
        """Requests with this method (and URL, query string ignored)."""
        return [r for r in self.requests if r.method == method
                and (url is None or r.url.split("?", 1)[0] == url)]

    def _lookup(self, method: str, url: str) -> tuple[bool, Any]:
        for candidate in (url, url.split("?", 1)[0]):
            if (method, candidate) in self.responses:
                return True, self.responses[(method, candidate)]
        # The latest registration wins, so a test can override a broader fixture.
        for (m, pattern), answer in reversed(self.responses.items()):
            if m == method and isinstance(pattern, re.Pattern) and (
                    pattern.fullmatch(url) or pattern.fullmatch(url.split("?", 1)[0])):
                return True, answer
        return False, None

    def _answer(self, request: Request) -> Any:
        found, answer = self._lookup(request.method, request.url)
        if not found:
            if request.method == "GET":
                raise BadRequest(404, f"FakeGH: nothing canned for GET {request.url}")  # type: ignore[arg-type]
            return {}
        if isinstance(answer, Responses):
            answer = answer.next()
        if isinstance(answer, BaseException):
            raise answer
        if callable(answer):
            return answer(request)
        return answer

    def _call(self, method: str, url: str, url_vars: dict[str, Any] | None, data: Any = None,
              accept: str | None = None) -> Any:
        request = Request(method, uritemplate.expand(url, url_vars or {}) if url_vars else url,
                          data, accept)
        self.requests.append(request)
        return self._answer(request)

    async def getitem(self, url: str, url_vars: dict[str, Any] | None = None, *,
                      accept: str | None = None, **_: Any) -> Any:
        return self._call("GET", url, url_vars, accept=accept)

    async def getstatus(self, url: str, url_vars: dict[str, Any] | None = None, *,
                        accept: str | None = None, **_: Any) -> int:
        try:
            self._call("GET", url, url_vars, accept=accept)
        except BadRequest as exc:
            return int(exc.status_code)
        return 200

    async def getiter(self, url: str, url_vars: dict[str, Any] | None = None, *,
                      accept: str | None = None, iterable_key: str | None = "items",
                      **_: Any) -> AsyncIterator[Any]:
        data = self._call("GET", url, url_vars, accept=accept)
        if isinstance(data, dict) and iterable_key in data:
            data = data[iterable_key]
        for item in data:
            yield item

    async def post(self, url: str, url_vars: dict[str, Any] | None = None, *, data: Any,
                   accept: str | None = None, **_: Any) -> Any:
        return self._call("POST", url, url_vars, data, accept)

    async def patch(self, url: str, url_vars: dict[str, Any] | None = None, *, data: Any,
                    accept: str | None = None, **_: Any) -> Any:
        return self._call("PATCH", url, url_vars, data, accept)

    async def put(self, url: str, url_vars: dict[str, Any] | None = None, *, data: Any = b"",
                  accept: str | None = None, **_: Any) -> Any:
        return self._call("PUT", url, url_vars, data, accept)

    async def delete(self, url: str, url_vars: dict[str, Any] | None = None, *,
                     data: Any = b"", accept: str | None = None, **_: Any) -> None:
        self._call("DELETE", url, url_vars, data, accept)


@dataclass
class FakeContext:
    """What ``bot.app.context.JobContext`` offers a handler or job, around one FakeGH.

    ``enqueue`` goes to a real ``Store`` (so dedup behaves as in production) and is
    also listed in ``enqueued``.
    """

    settings: Settings
    store: Store
    gh: FakeGH
    installation_id: int | None = None
    token: str = "ghs_faketoken0000000000"
    enqueued: list[tuple[str, str, dict[str, Any], str | None]] = field(default_factory=list)
    workflows: bool = True  # the token may change workflow files (file:// remotes allow it)

    @property
    def data_dir(self) -> Path:
        return self.settings.data_dir

    @property
    def cache_dir(self) -> Path:
        return self.settings.cache_dir

    async def gh_for(self, installation_id: int | None = None) -> FakeGH:
        return self.gh

    async def gh_for_repo(self, full_name: str) -> FakeGH:
        return self.gh

    async def installation_for_repo(self, full_name: str) -> int | None:
        return self.installation_id

    async def git_token_for(self, installation_id: int | None = None) -> str:
        return self.token

    async def may_write_workflows(self, installation_id: int | None = None) -> bool:
        return self.workflows

    async def enqueue(self, kind: str, key: str, payload: dict[str, Any],
                      dedup: str | None = None, *, run_at: float | None = None) -> int | None:
        job_id = self.store.enqueue(kind, key, payload, dedup, run_at=run_at)
        if job_id is not None:
            self.enqueued.append((kind, key, payload, dedup))
        return job_id

    async def get_state(self, key: str) -> dict[str, Any] | None:
        return self.store.get_state(key)

    async def put_state(self, key: str, value: dict[str, Any]) -> None:
        self.store.put_state(key, value)


@pytest.fixture
def fake_gh() -> FakeGH:
    return FakeGH()


@pytest.fixture
def fake_store(tmp_path: Path) -> Iterator[Store]:
    store = SQLiteStore(tmp_path / "state" / "forksync.sqlite3")
    yield store
    store.close()


@pytest.fixture
def fake_settings(tmp_path: Path) -> Settings:
    return Settings(webhook_secret="s3cret", token="ghs_faketoken0000000000",
                    api_url="https://api.github.com", git_url="https://github.com",
                    data_dir=tmp_path / "data")


@pytest.fixture
def fake_ctx(fake_settings: Settings, fake_store: Store, fake_gh: FakeGH) -> FakeContext:
    return FakeContext(fake_settings, fake_store, fake_gh, installation_id=1)


Sample = Callable[..., sansio.Event]


# -- the store's two backends ---------------------------------------------------------

BACKENDS = ("sqlite", "postgres")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the whole session, started on first use."""
    server = PostgresServer().start()
    yield server
    server.stop()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store_location(backend: str, tmp_path: Path,
                   request: pytest.FixtureRequest) -> Iterator[str]:
    """Where this test's store lives: a SQLite file, or a fresh PostgreSQL database."""
    if backend == "sqlite":
        yield str(tmp_path / "store" / "forksync.sqlite3")
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    url = server.create_database()
    yield url
    server.drop_database(url)


@pytest.fixture
def make_store(store_location: str) -> Iterator[Callable[..., Store]]:
    """Opens (migrated) stores at this test's location; every one is closed afterwards."""
    opened: list[Store] = []

    def make(**options: Any) -> Store:
        store = open_store(store_location, schema="upgrade", **options)
        opened.append(store)
        return store

    yield make
    for store in opened:
        with contextlib.suppress(Exception):  # already closed by the test
            store.close()
