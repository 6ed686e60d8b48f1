"""bot/sync/access.py: which token may read a fork's upstream, against the GitHub simulator.

Real HTTP and real git: the App authenticates to the simulator, whose installations,
accounts and private repositories decide what each token can see; every case that
allows a read also fetches the upstream with what it returned.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest

from bot.app.context import JobContext, Platform
from bot.app.settings import Settings
from bot.app.store.sqlite import SQLiteStore
from bot.engine.git import Git, clean_env
from bot.github import remote
from bot.github.auth import AppAuth
from bot.sync.access import UpstreamAccess, UpstreamRefused, refusal, upstream_access
from tests.sim import Simulator, github_sim  # noqa: F401 - github_sim is a fixture

FORK = "vime-org/vime"
UPSTREAM = "THUDM/slime"
OPT_IN = ".github/forksync.yml"


def _repo(path: Path, files: dict[str, str]) -> Path:
    env = {**clean_env(), "GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@x",
           "GIT_COMMITTER_NAME": "Dev", "GIT_COMMITTER_EMAIL": "dev@x"}
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=path, env=env, check=True)
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    subprocess.run(["git", "add", "-A"], cwd=path, env=env, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "init"], cwd=path, env=env, check=True)
    return path


@pytest.fixture
def sim(github_sim: Simulator, tmp_path: Path) -> Iterator[Simulator]:  # noqa: F811
    github_sim.create_repo("vime-org", "vime", _repo(tmp_path / "fork", {"a.py": "fork\n"}))
    yield github_sim
    assert github_sim.violations == [] and github_sim.internal_errors == []


class Reader:
    """The App's platform against the simulator, acting for the fork's installation."""

    def __init__(self, sim: Simulator, tmp_path: Path, platform: Platform) -> None:
        self.sim = sim
        self.tmp_path = tmp_path
        self.platform = platform
        self.fork_installation = sim.installation_id(FORK)

    @property
    def ctx(self) -> JobContext:
        return self.platform.context(installation_id=self.fork_installation)

    async def access(self) -> UpstreamAccess:
        return await upstream_access(self.ctx, FORK, self.fork_installation, UPSTREAM)

    async def fetched_head(self, access: UpstreamAccess) -> str | None:
        """Fetch the upstream's main with what access returned; its head, as the sim has it."""
        cache = remote.ensure_mirror(self.tmp_path / "cache", UPSTREAM)
        await asyncio.to_thread(remote.fetch, cache, access.url,
                                ["+refs/heads/main:refs/heads/main"], access.token)
        return Git(cache).rev_parse("refs/heads/main")


@pytest.fixture
async def reader(sim: Simulator, tmp_path: Path) -> AsyncIterator[Reader]:
    settings = Settings(app_id=sim.app_id, private_key=sim.private_key_pem,
                        webhook_secret=sim.webhook_secret, api_url=sim.base_url,
                        git_url=sim.git_base, data_dir=tmp_path / "data")
    store = SQLiteStore(settings.db_path)
    async with aiohttp.ClientSession() as session:
        yield Reader(sim, tmp_path, Platform(settings, store, session))
    store.close()


def upstream(sim: Simulator, tmp_path: Path, *, private: bool, install: bool,
             owner: str = "THUDM", files: dict[str, str] | None = None) -> str:
    return sim.create_repo(owner, "slime", _repo(tmp_path / f"{owner}-slime",
                                                 {"slime.py": "up\n", **(files or {})}),
                           private=private, install=install)


async def test_a_private_upstream_of_another_account_is_refused(sim: Simulator, tmp_path: Path,
                                                                reader: Reader) -> None:
    # Before: the App's installation on THUDM read it for vime-org's fork.
    upstream(sim, tmp_path, private=True, install=True)
    with pytest.raises(UpstreamRefused) as refused:
        await reader.access()
    assert str(refused.value) == refusal(FORK, UPSTREAM)
    assert f"`downstream: [{FORK}]`" in str(refused.value)


async def test_a_private_upstream_without_the_app_is_refused_in_the_same_words(
        sim: Simulator, tmp_path: Path, reader: Reader) -> None:
    upstream(sim, tmp_path, private=True, install=False)
    with pytest.raises(UpstreamRefused) as refused:
        await reader.access()
    # The same words as when the App is installed there: no hint that it exists.
    assert str(refused.value) == refusal(FORK, UPSTREAM)


@pytest.mark.parametrize("listed", [FORK, FORK.upper()])
async def test_a_private_upstream_that_lists_the_fork_is_read_with_its_installation(
        sim: Simulator, tmp_path: Path, reader: Reader, listed: str) -> None:
    upstream(sim, tmp_path, private=True, install=True,
             files={OPT_IN: f"downstream:\n  - other/fork\n  - {listed}\n"})
    access = await reader.access()
    assert access.token is not None and "downstream" in access.how
    assert await reader.fetched_head(access) == sim.ref(UPSTREAM, "main")


@pytest.mark.parametrize("opt_in", ["downstream: [other/fork]\n", "downstream: {vime-org: vime}\n",
                                    "downstream: [vime-org/vime\n", "upstream: {repo: a/b}\n"])
async def test_a_list_without_the_fork_or_a_broken_one_is_no_opt_in(
        sim: Simulator, tmp_path: Path, reader: Reader, opt_in: str) -> None:
    upstream(sim, tmp_path, private=True, install=True, files={OPT_IN: opt_in})
    with pytest.raises(UpstreamRefused):
        await reader.access()


@pytest.mark.parametrize("install", [True, False])
async def test_a_public_upstream_is_read_without_a_token(sim: Simulator, tmp_path: Path,
                                                         reader: Reader, install: bool) -> None:
    upstream(sim, tmp_path, private=False, install=install)
    access = await reader.access()
    assert access.token is None
    assert await reader.fetched_head(access) == sim.ref(UPSTREAM, "main")


async def test_a_private_upstream_of_the_forks_own_installation(
        sim: Simulator, tmp_path: Path, reader: Reader) -> None:
    # vime-org's installation covers both: the fork's own token reads it.
    sim.create_repo("vime-org", "slime", _repo(tmp_path / "own", {"slime.py": "up\n"}),
                    private=True)
    access = await upstream_access(reader.ctx, FORK, reader.fork_installation, "vime-org/slime")
    assert access.how == "the fork's installation" and access.token is not None
    cache = remote.ensure_mirror(tmp_path / "cache", "vime-org/slime")
    await asyncio.to_thread(remote.fetch, cache, access.url, ["+refs/heads/main:refs/heads/main"],
                            access.token)
    assert Git(cache).rev_parse("refs/heads/main") == sim.ref("vime-org/slime", "main")


async def test_two_installations_of_one_account_may_share(
        sim: Simulator, tmp_path: Path, reader: Reader, monkeypatch: pytest.MonkeyPatch) -> None:
    # GitHub gives an account one installation of an App, so the simulator cannot show two;
    # the rule still compares accounts, not installation ids.
    upstream(sim, tmp_path, private=True, install=True)
    auth = reader.platform.auth
    assert isinstance(auth, AppAuth)
    assert await auth.installation_account(sim.installation_id(UPSTREAM)) != \
        await auth.installation_account(reader.fork_installation)

    async def one_account(installation_id: int) -> int:
        return 4242

    monkeypatch.setattr(auth, "installation_account", one_account)
    access = await reader.access()
    assert access.how == "an installation of the same account"
    assert await reader.fetched_head(access) == sim.ref(UPSTREAM, "main")


async def test_token_mode_reads_with_the_persons_token(sim: Simulator, tmp_path: Path) -> None:
    upstream(sim, tmp_path, private=True, install=False)
    sim.add_collaborator(UPSTREAM, "vera", "read")
    settings = Settings(token=sim.user_token("vera"), api_url=sim.base_url,
                        git_url=sim.git_base, data_dir=tmp_path / "data")
    store = SQLiteStore(settings.db_path)
    async with aiohttp.ClientSession() as session:
        ctx = Platform(settings, store, session).context()
        access = await upstream_access(ctx, FORK, None, UPSTREAM)
    store.close()
    assert access.token == settings.token
    cache = remote.ensure_mirror(tmp_path / "cache", UPSTREAM)
    await asyncio.to_thread(remote.fetch, cache, access.url, ["+refs/heads/main:refs/heads/main"],
                            access.token)
    assert Git(cache).rev_parse("refs/heads/main") == sim.ref(UPSTREAM, "main")
