"""`forksync setup`: the manifest flow against the simulator, as a person runs it."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
import yaml

from bot.app.settings import Settings
from bot.app.setup import EVENTS, PERMISSIONS, SetupError, SetupOptions, env_text, web_url
from bot.github.auth import AppAuth
from tests.sim import Simulator, github_sim  # noqa: F401 - github_sim is a fixture
from tests.sim.apps import press_the_button

REPO_ROOT = Path(__file__).resolve().parents[1]


def read_env(path: Path) -> dict[str, str]:
    """The file as `docker run --env-file` reads it: KEY=VALUE lines, # comments."""
    pairs = [line.split("=", 1) for line in path.read_text().splitlines()
             if line and not line.startswith("#")]
    return {k: v for k, v in pairs}


class SetupProcess:
    """`forksync setup` running as its own process, waiting for the browser."""

    def __init__(self, *args: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FORKSYNC_", "GITHUB_"))}
        self.proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "setup", *args],
                                     cwd=REPO_ROOT, text=True, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE,
                                     env={**env, "PYTHONPATH": str(REPO_ROOT)})
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()
        assert first.startswith("Open http://127.0.0.1:"), first + self.proc.stderr.read() \
            if self.proc.stderr else first
        self.page = first.split()[1]

    def finish(self) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=60)
        return self.proc.returncode, out, err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate(timeout=30)


@pytest.fixture
def setup_args(github_sim: Simulator, tmp_path: Path) -> Iterator[list[str]]:  # noqa: F811
    yield ["--webhook-url", "http://127.0.0.1:9/webhook", "--api-url", github_sim.base_url,
           "--github-url", github_sim.base_url, "--env-file", str(tmp_path / ".env")]
    assert github_sim.violations == [] and github_sim.unimplemented == []
    assert github_sim.internal_errors == [] and github_sim.response_violations == []


async def test_setup_registers_the_app_and_writes_an_env_that_serve_can_use(
        github_sim: Simulator, setup_args: list[str], tmp_path: Path) -> None:  # noqa: F811
    old_key = github_sim.private_key_pem
    setup = SetupProcess(*setup_args, "--name", "forksync for vime")
    try:
        status, page = await press_the_button(setup.page)
        code, out, err = setup.finish()
    finally:
        setup.kill()
    assert status == 200 and "Registered forksync for vime" in page, page
    assert code == 0, err
    assert f"Install it on your fork: {github_sim.base_url}/apps/forksync-for-vime/" \
           "installations/new" in out

    # What GitHub registered is what the manifest asked for.
    (manifest,) = github_sim.apps.created
    assert manifest["hook_attributes"] == {"url": "http://127.0.0.1:9/webhook", "active": True}
    assert manifest["default_permissions"] == PERMISSIONS
    assert manifest["default_events"] == EVENTS
    assert github_sim.bot_url == "http://127.0.0.1:9/webhook"
    [conversion] = [r for r in github_sim.requests
                    if r.operation == "/app-manifests/{code}/conversions"]
    assert conversion.method == "POST" and conversion.status == 201 and conversion.actor is None

    env_file = tmp_path / ".env"
    assert env_file.stat().st_mode & 0o777 == 0o600
    env = read_env(env_file)
    assert env["FORKSYNC_APP_ID"] == str(github_sim.app_id)
    assert env["FORKSYNC_WEBHOOK_SECRET"] == github_sim.webhook_secret
    assert env["FORKSYNC_API_URL"] == github_sim.base_url
    assert env["FORKSYNC_GIT_URL"] == github_sim.base_url
    assert github_sim.private_key_pem != old_key  # a new App, a new key
    # The settings load, and the key in them is the one GitHub now checks JWTs against.
    settings = Settings.from_env(env)
    assert settings.mode == "app" and settings.app_id and settings.private_key
    async with aiohttp.ClientSession() as session:
        auth = AppAuth(settings.app_id, settings.private_key, settings.api_url, session)
        async with session.get(f"{github_sim.base_url}/app", headers={
                "Authorization": f"Bearer {auth.app_jwt()}",
                "Accept": "application/vnd.github+json"}) as r:
            assert r.status == 200, await r.text()
            assert (await r.json())["name"] == "forksync for vime"


async def test_a_code_works_once(github_sim: Simulator, setup_args: list[str],  # noqa: F811
                                 tmp_path: Path) -> None:
    setup = SetupProcess(*setup_args)
    try:
        status, _ = await press_the_button(setup.page)
        assert status == 200
        assert setup.finish()[0] == 0
    finally:
        setup.kill()
    (code,) = github_sim.apps.pending
    async with aiohttp.ClientSession() as session, session.post(
            f"{github_sim.base_url}/app-manifests/{code}/conversions") as r:
        assert r.status == 404
    # The second setup is refused before it serves anything: the .env exists.
    second = subprocess.run([sys.executable, "-m", "bot.cli", "setup", *setup_args],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert second.returncode == 1
    assert second.stderr.strip() == (f"forksync: error: {tmp_path / '.env'} exists already; "
                                     "setup never overwrites it (move it away, or pass "
                                     "--env-file with another name)")


async def test_a_foreign_callback_is_refused_and_setup_keeps_waiting(
        github_sim: Simulator, setup_args: list[str]) -> None:  # noqa: F811
    setup = SetupProcess(*setup_args)
    try:
        callback = setup.page.rstrip("/") + "/callback"
        async with aiohttp.ClientSession() as session, session.get(
                callback, params={"code": "forged", "state": "not-ours"}) as r:
            assert r.status == 400
        assert setup.proc.poll() is None  # still waiting for the real one
        status, _ = await press_the_button(setup.page)
        assert status == 200 and setup.finish()[0] == 0
    finally:
        setup.kill()
    # The forged code never reached GitHub.
    assert [r.path for r in github_sim.requests if "conversions" in r.path] == [
        f"/app-manifests/{next(iter(github_sim.apps.pending))}/conversions"]


async def test_an_expired_code_is_one_line_and_exit_1(
        github_sim: Simulator, setup_args: list[str]) -> None:  # noqa: F811
    github_sim.apps.code_ttl = -1.0  # every code has expired by the time it is exchanged
    setup = SetupProcess(*setup_args)
    try:
        status, page = await press_the_button(setup.page)
        code, _, err = setup.finish()
    finally:
        setup.kill()
    assert status == 502 and "run `forksync setup` again" in page
    assert code == 1
    assert err.strip() == ("forksync: error: GitHub does not know the code it sent back (a code "
                           "works once, for one hour); run `forksync setup` again")


def test_github_enterprise_server_is_reached_through_the_api_url(tmp_path: Path) -> None:
    args = argparse.Namespace(webhook_url="https://bot.example/webhook", name="forksync",
                              org="acme", api_url="https://ghe.example.com/api/v3",
                              github_url=None, env_file=str(tmp_path / ".env"),
                              host="127.0.0.1", port=0)
    options = SetupOptions.from_args(args, {})
    assert options.github_url == "https://ghe.example.com"
    assert options.new_app_url == "https://ghe.example.com/organizations/acme/settings/apps/new"
    text = env_text({"id": 7, "pem": "-----BEGIN RSA PRIVATE KEY-----\nAB\n-----END RSA "
                     "PRIVATE KEY-----\n", "webhook_secret": "w"}, options)
    assert "FORKSYNC_API_URL=https://ghe.example.com/api/v3\n" in text
    assert "FORKSYNC_GIT_URL=https://ghe.example.com\n" in text
    assert "FORKSYNC_PRIVATE_KEY=-----BEGIN RSA PRIVATE KEY-----\\nAB\\n-----END" in text
    assert web_url("https://api.github.com") == "https://github.com"
    assert web_url("http://127.0.0.1:9") is None
    with pytest.raises(SetupError, match="pass --github-url"):
        SetupOptions.from_args(argparse.Namespace(**{**vars(args),
                                                     "api_url": "http://127.0.0.1:9"}), {})


def test_app_yml_asks_for_what_setup_registers() -> None:
    app = yaml.safe_load((REPO_ROOT / "app.yml").read_text())
    assert app["default_permissions"] == PERMISSIONS
    assert app["default_events"] == EVENTS
