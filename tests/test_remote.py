"""git over smart HTTP (a local ``git http-backend`` that demands the token) and file://."""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web

from bot.engine.git import Git, clean_env
from bot.errors import GitError
from bot.github.remote import (
    PushRejected,
    WorkflowsRefused,
    auth_env,
    ensure_mirror,
    fetch,
    ls_remote,
    push_with_lease,
    remote_head,
)

TOKEN = "ghs_" + "Q" * 36


@dataclass
class GitHTTP:
    """Smart HTTP for bare repos under ``root``; only ``x-access-token:TOKEN`` may use it."""

    root: Path
    url: str = ""
    authorizations: list[str | None] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        auth = request.headers.get("Authorization")
        self.authorizations.append(auth)
        expected = "Basic " + base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
        if auth != expected:
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="git"'})
        env = {
            **clean_env(), "GIT_PROJECT_ROOT": str(self.root), "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": request.path, "REQUEST_METHOD": request.method,
            "QUERY_STRING": request.query_string, "REMOTE_USER": "x-access-token",
            "REMOTE_ADDR": "127.0.0.1",
            "CONTENT_TYPE": request.headers.get("Content-Type", ""),
            "HTTP_CONTENT_ENCODING": request.headers.get("Content-Encoding", ""),
            "GIT_PROTOCOL": request.headers.get("Git-Protocol", ""),
        }
        body = await request.read()
        proc = await asyncio.create_subprocess_exec(
            "git", "http-backend", env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE)
        out, _ = await proc.communicate(body)
        head, _, payload = out.partition(b"\r\n\r\n")
        status, headers = 200, {}
        for line in head.decode().split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers[name] = value.strip()
        return web.Response(status=status, body=payload, headers=headers)


@pytest.fixture
async def git_http(tmp_path: Path) -> AsyncIterator[GitHTTP]:
    root = tmp_path / "server"
    (root / "o").mkdir(parents=True)
    Git(root / "o" / "r.git").run("init", "--quiet", "--bare", str(root / "o" / "r.git"))
    server = GitHTTP(root)
    app = web.Application(client_max_size=100 * 1024 * 1024)
    app.router.add_route("*", "/{tail:.*}", server.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    server.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield server
    await runner.cleanup()


def commit(git_dir: str | Path, message: str, parents: tuple[str, ...] = ()) -> str:
    git = Git(git_dir)
    blob = git.hash_blobs([message.encode()])[0]
    tree = git.text("mktree", input=f"100644 blob {blob}\tfile.txt\n".encode()).strip()
    return git.commit_tree(tree, list(parents), message)


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[str]:
    yield ensure_mirror(tmp_path / "cache", "o/r")


def server_head(server: GitHTTP, branch: str) -> str | None:
    return Git(server.root / "o" / "r.git").rev_parse(f"refs/heads/{branch}")


async def test_push_then_fetch_over_http_with_the_token(git_http: GitHTTP, mirror: str,
                                                        tmp_path: Path) -> None:
    url = f"{git_http.url}/o/r.git"
    first = commit(mirror, "one")
    await asyncio.to_thread(push_with_lease, mirror, url, first, "forksync/sync", None, TOKEN)
    assert server_head(git_http, "forksync/sync") == first
    assert all(a and a.startswith("Basic ") for a in git_http.authorizations)

    refs = await asyncio.to_thread(ls_remote, url, TOKEN)
    assert refs["refs/heads/forksync/sync"] == first
    assert await asyncio.to_thread(remote_head, url, "forksync/sync", TOKEN) == first
    assert await asyncio.to_thread(remote_head, url, "nope", TOKEN) is None

    other = ensure_mirror(tmp_path / "cache", "someone/else")
    await asyncio.to_thread(fetch, other, url, ["+refs/heads/*:refs/remotes/fork/*"], TOKEN)
    assert Git(other).rev_parse("refs/remotes/fork/forksync/sync") == first
    for git_dir in (mirror, other):
        config = (Path(git_dir) / "config").read_text()
        assert TOKEN not in config and "extraHeader" not in config


async def test_a_push_github_refuses_for_a_workflow_file_says_which_and_what_to_do(
        git_http: GitHTTP, mirror: str, tmp_path: Path) -> None:
    from tests.sim.workflows import guard_config, install_hook

    server = git_http.root / "o" / "r.git"
    for key, value in guard_config(install_hook(tmp_path / "hooks")):
        Git(server).run("config", key, value)
    git = Git(mirror)
    blob = git.hash_blobs([b"on: push\n"])[0]
    workflows = git.text("mktree", input=f"100644 blob {blob}\tci.yml\n".encode()).strip()
    github = git.text("mktree", input=f"040000 tree {workflows}\tworkflows\n".encode()).strip()
    root = git.text("mktree", input=f"040000 tree {github}\t.github\n".encode()).strip()
    sha = git.commit_tree(root, [], "CI")
    url = f"{git_http.url}/o/r.git"
    with pytest.raises(WorkflowsRefused) as info:
        await asyncio.to_thread(push_with_lease, mirror, url, sha, "forksync/sync", None, TOKEN)
    message = str(info.value)
    assert ("refusing to allow a GitHub App to create or update workflow "
            "`.github/workflows/ci.yml` without `workflows` permission") in message
    assert "Grant the App the Workflows permission" in message and TOKEN not in message
    assert server_head(git_http, "forksync/sync") is None
    # A push that leaves workflow files alone goes through the same guard.
    plain = commit(mirror, "plain")
    await asyncio.to_thread(push_with_lease, mirror, url, plain, "forksync/sync", None, TOKEN)
    assert server_head(git_http, "forksync/sync") == plain


async def test_lease_lets_the_bot_move_its_own_head(git_http: GitHTTP, mirror: str) -> None:
    url = f"{git_http.url}/o/r.git"
    first = commit(mirror, "one")
    await asyncio.to_thread(push_with_lease, mirror, url, first, "forksync/sync", None, TOKEN)
    rewritten = commit(mirror, "one, rebuilt")  # not a descendant: needs the force
    await asyncio.to_thread(push_with_lease, mirror, url, rewritten, "forksync/sync", first,
                            TOKEN)
    assert server_head(git_http, "forksync/sync") == rewritten


async def test_lease_refuses_to_overwrite_what_someone_else_pushed(git_http: GitHTTP,
                                                                   mirror: str) -> None:
    url = f"{git_http.url}/o/r.git"
    ours = commit(mirror, "bot")
    await asyncio.to_thread(push_with_lease, mirror, url, ours, "forksync/sync", None, TOKEN)
    # A maintainer pushes a resolution on top.
    server_git = Git(git_http.root / "o" / "r.git")
    theirs = commit(server_git.git_dir, "human resolution", (ours,))
    server_git.run("update-ref", "refs/heads/forksync/sync", theirs, ours)

    rebuilt = commit(mirror, "bot again")
    with pytest.raises(PushRejected) as info:
        await asyncio.to_thread(push_with_lease, mirror, url, rebuilt, "forksync/sync", ours,
                                TOKEN)
    assert server_head(git_http, "forksync/sync") == theirs
    assert "moved since the bot last wrote it" in str(info.value)
    assert TOKEN not in str(info.value)


async def test_lease_with_no_expected_head_refuses_an_existing_branch(git_http: GitHTTP,
                                                                      mirror: str) -> None:
    url = f"{git_http.url}/o/r.git"
    first = commit(mirror, "one")
    await asyncio.to_thread(push_with_lease, mirror, url, first, "b", None, TOKEN)
    with pytest.raises(PushRejected):
        await asyncio.to_thread(push_with_lease, mirror, url, commit(mirror, "two"), "b", None,
                                TOKEN)
    assert server_head(git_http, "b") == first


async def test_wrong_token_fails_without_leaking_it(git_http: GitHTTP, mirror: str) -> None:
    url = f"{git_http.url}/o/r.git"
    wrong = "ghs_" + "W" * 36
    for call in (lambda: fetch(mirror, url, ["refs/heads/*:refs/x/*"], wrong),
                 lambda: ls_remote(url, wrong),
                 lambda: push_with_lease(mirror, url, commit(mirror, "x"), "b", None, wrong)):
        with pytest.raises(GitError) as info:
            await asyncio.to_thread(call)
        message = str(info.value)
        assert wrong not in message and base64.b64encode(wrong.encode()).decode() not in message
        assert "x-access-token" not in message
    assert wrong not in (Path(mirror) / "config").read_text()


def test_token_is_passed_by_environment_not_argv() -> None:
    env = auth_env(TOKEN)
    assert env["GIT_CONFIG_COUNT"] == "1" and env["GIT_CONFIG_KEY_0"] == "http.extraHeader"
    assert env["GIT_CONFIG_VALUE_0"] == "Authorization: Basic " + base64.b64encode(
        f"x-access-token:{TOKEN}".encode()).decode()
    assert auth_env(None) == {}


def test_file_url_push_and_fetch_without_a_token(tmp_path: Path) -> None:
    bare = tmp_path / "remote.git"
    Git(bare).run("init", "--quiet", "--bare", str(bare))
    mirror = ensure_mirror(tmp_path / "cache", "o/r")
    sha = commit(mirror, "one")
    push_with_lease(mirror, bare.as_uri(), sha, "main", None, None)
    assert ls_remote(bare.as_uri(), None)["refs/heads/main"] == sha
    other = ensure_mirror(tmp_path / "cache", "u/r")
    fetch(other, bare.as_uri(), ["refs/heads/main:refs/heads/main"], None)
    assert Git(other).rev_parse("main") == sha


def test_missing_remote_is_a_git_error(tmp_path: Path) -> None:
    mirror = ensure_mirror(tmp_path / "cache", "o/r")
    with pytest.raises(GitError, match="fetching from"):
        fetch(mirror, (tmp_path / "nowhere.git").as_uri(), ["refs/heads/main"], None)


def test_ensure_mirror_is_idempotent_and_safe_for_odd_names(tmp_path: Path) -> None:
    a = ensure_mirror(tmp_path / "cache", "THUDM/slime")
    assert a == ensure_mirror(tmp_path / "cache", "THUDM/slime")
    assert Path(a).name == "THUDM__slime.git"
    odd = ensure_mirror(tmp_path / "cache", "../../etc/passwd")
    assert Path(odd).parent == tmp_path / "cache"
    out = subprocess.run(["git", "--git-dir", a, "rev-parse", "--is-bare-repository"],
                         capture_output=True, text=True, env=clean_env(), check=True)
    assert out.stdout.strip() == "true"
    assert not any(p.name.endswith(".init") for p in (tmp_path / "cache").iterdir())
    assert os.access(a, os.W_OK)
