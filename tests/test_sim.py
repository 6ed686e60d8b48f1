"""The GitHub simulator itself, over real HTTP and real git."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from gidgethub import BadRequest, GitHubBroken, sansio
from gidgethub.aiohttp import GitHubAPI
from gidgethub.apps import get_installation_access_token, get_jwt

from tests.sim import Simulator, github_sim
from tests.sim.openapi import RestSpec, SpecMissingError, rest_spec

__all__ = ["github_sim"]

OWNER, NAME = "acme", "fork"
REPO = f"{OWNER}/{NAME}"
BASE_TEXT = "".join(f"line {i}\n" for i in range(1, 31))


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env |= {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0", "GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@x",
            "GIT_COMMITTER_NAME": "Dev", "GIT_COMMITTER_EMAIL": "dev@x"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          check=check)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A working copy with one commit on main: f.txt with 30 lines."""
    path = tmp_path / "work"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "f.txt").write_text(BASE_TEXT)
    git(path, "add", ".")
    git(path, "commit", "-qm", "init")
    return path


@pytest.fixture
def sim(github_sim: Simulator, work: Path) -> Iterator[Simulator]:
    github_sim.create_repo(OWNER, NAME, work)
    yield github_sim
    # Every test doubles as a conformance check of the simulator's own answers.
    assert github_sim.response_violations == []
    assert github_sim.internal_errors == []


def change_line(work: Path, branch: str, changes: dict[int, str]) -> None:
    """Commit on ``branch`` (from main) with some lines of f.txt replaced (1-based)."""
    git(work, "checkout", "-q", "-B", branch, "main")
    lines = BASE_TEXT.splitlines(keepends=True)
    for number, text in changes.items():
        lines[number - 1] = text + "\n"
    (work / "f.txt").write_text("".join(lines))
    git(work, "commit", "-qam", f"change on {branch}")


def push(sim: Simulator, work: Path, branch: str,
         token: str | None) -> subprocess.CompletedProcess[str]:
    url = sim.git_url(REPO, token) if token else sim.git_url(REPO)
    return git(work, "push", "-q", url, f"{branch}:refs/heads/{branch}", check=False)


@dataclass
class Receiver:
    """A tiny webhook receiver, checking signatures with gidgethub as the bot will."""

    secret: str
    events: list[sansio.Event] = field(default_factory=list)
    raw: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    url: str = ""

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.raw.append((dict(request.headers), body))
        event = sansio.Event.from_http(request.headers, body, secret=self.secret)
        self.events.append(event)
        return web.Response(status=202)


@pytest.fixture
async def receiver(sim: Simulator) -> AsyncIterator[Receiver]:
    rec = Receiver(sim.webhook_secret)
    app = web.Application()
    app.router.add_post("/webhook", rec.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    rec.url = f"http://127.0.0.1:{port}/webhook"
    sim.bot_url = rec.url
    yield rec
    await runner.cleanup()


@pytest.fixture
async def gh(sim: Simulator) -> AsyncIterator[GitHubAPI]:
    async with aiohttp.ClientSession() as session:
        yield GitHubAPI(session, "forksync-tests", oauth_token=sim.issue_token(REPO),
                        base_url=sim.base_url)


async def open_sync_pr(sim: Simulator, gh: GitHubAPI, work: Path) -> dict[str, Any]:
    """Branch ``sync`` changes lines 5 and 25 (two hunks); opened as a draft PR by the bot."""
    change_line(work, "sync", {5: "five", 25: "twenty-five"})
    assert push(sim, work, "sync", sim.issue_token(REPO)).returncode == 0
    pr: dict[str, Any] = await gh.post(f"/repos/{REPO}/pulls", data={
        "title": "Sync upstream", "head": "sync", "base": "main", "body": "report",
        "draft": True})
    return pr


# --- git over smart HTTP and the push webhook ---------------------------------------------


async def test_push_sends_signed_schema_valid_push_webhook(
        sim: Simulator, work: Path, receiver: Receiver) -> None:
    before = sim.ref(REPO, "main")
    (work / "g.txt").write_text("new\n")
    git(work, "add", "g.txt")
    git(work, "commit", "-qm", "add g")
    after = git(work, "rev-parse", "HEAD").stdout.strip()

    result = await asyncio.to_thread(push, sim, work, "main", sim.issue_token(REPO))
    assert result.returncode == 0, result.stderr
    await sim.wait_deliveries()

    assert sim.ref(REPO, "main") == after
    [event] = receiver.events  # from_http already checked X-Hub-Signature-256
    headers, _ = receiver.raw[0]
    assert event.event == "push"
    assert uuid.UUID(event.delivery_id)
    assert headers["X-Hub-Signature-256"].startswith("sha256=")
    assert event.data["ref"] == "refs/heads/main"
    assert (event.data["before"], event.data["after"]) == (before, after)
    assert event.data["created"] is False and event.data["forced"] is False
    assert [c["id"] for c in event.data["commits"]] == [after]
    assert event.data["commits"][0]["added"] == ["g.txt"]
    assert event.data["installation"]["id"] == sim.installation_id(REPO)
    assert event.data["repository"]["full_name"] == REPO
    assert sim.violations == []
    assert sim.deliveries[0].status == 202


async def test_push_to_a_pr_head_sends_synchronize(
        sim: Simulator, work: Path, gh: GitHubAPI, receiver: Receiver) -> None:
    pr = await open_sync_pr(sim, gh, work)
    old_head = pr["head"]["sha"]
    new_head = await sim.commit(REPO, "sync", {"f.txt": BASE_TEXT}, "resolve", user="alice")
    await sim.wait_deliveries()

    kinds = [(e.event, e.data.get("action")) for e in receiver.events]
    assert kinds == [("push", None), ("pull_request", "opened"), ("push", None),
                     ("pull_request", "synchronize")]
    sync = receiver.events[-1].data
    assert (sync["before"], sync["after"]) == (old_head, new_head)
    assert sync["pull_request"]["head"]["sha"] == new_head
    assert sim.pr(REPO, pr["number"]).head_sha == new_head
    assert sim.violations == []


async def test_git_push_needs_a_token_with_write_access(sim: Simulator, work: Path) -> None:
    change_line(work, "topic", {1: "one"})
    anonymous = await asyncio.to_thread(push, sim, work, "topic", None)
    assert anonymous.returncode != 0
    bad = await asyncio.to_thread(push, sim, work, "topic", "ghs_not_a_real_token")
    assert bad.returncode != 0
    sim.add_user("mallory")
    reader = await asyncio.to_thread(push, sim, work, "topic", sim.user_token("mallory"))
    assert reader.returncode != 0 and "denied" in reader.stderr
    assert sim.ref(REPO, "topic") is None

    sim.add_collaborator(REPO, "alice", "write")
    ok = await asyncio.to_thread(push, sim, work, "topic", sim.user_token("alice"))
    assert ok.returncode == 0, ok.stderr
    assert sim.ref(REPO, "topic") == git(work, "rev-parse", "topic").stdout.strip()
    assert [d.event for d in await sim.wait_deliveries()] == ["push"]
    assert sim.deliveries[0].payload["sender"]["login"] == "alice"


async def test_an_apps_push_that_touches_a_workflow_file_is_refused_as_on_github(
        sim: Simulator, work: Path) -> None:
    # A new branch whose commit creates a workflow file: refused, with GitHub's words.
    git(work, "checkout", "-q", "-b", "ci", "main")
    (work / ".github" / "workflows").mkdir(parents=True)
    (work / ".github" / "workflows" / "ci.yml").write_text("on: push\n")
    git(work, "add", ".")
    git(work, "commit", "-qm", "add CI")
    refused = await asyncio.to_thread(push, sim, work, "ci", sim.issue_token(REPO))
    assert refused.returncode != 0
    assert ("! [remote rejected] ci -> ci (refusing to allow a GitHub App to create or update "
            "workflow `.github/workflows/ci.yml` without `workflows` permission)"
            in refused.stderr), refused.stderr
    assert sim.ref(REPO, "ci") is None
    # A later commit that leaves the workflow alone does not help: its parent is new too.
    (work / "f.txt").write_text("changed\n")
    git(work, "commit", "-qam", "other")
    assert (await asyncio.to_thread(push, sim, work, "ci", sim.issue_token(REPO))).returncode

    # A branch with no workflow change goes through; so does a person's own push.
    change_line(work, "plain", {3: "three"})
    assert (await asyncio.to_thread(push, sim, work, "plain", sim.issue_token(REPO))
            ).returncode == 0
    sim.add_collaborator(REPO, "alice", "write")
    ok = await asyncio.to_thread(push, sim, work, "ci", sim.user_token("alice"))
    assert ok.returncode == 0, ok.stderr

    # Now that the workflow commits exist in the repository, a merge of them into main
    # still changes main's workflow files (against its first parent): refused.
    git(work, "checkout", "-q", "main")
    git(work, "merge", "-q", "--no-ff", "-m", "merge ci", "ci")
    merged = await asyncio.to_thread(push, sim, work, "main", sim.issue_token(REPO))
    assert "without `workflows` permission" in merged.stderr, merged.stderr

    # With the Workflows permission granted to the installation, the same push goes through.
    await sim.install(OWNER, permissions={"workflows": "write"})
    ok = await asyncio.to_thread(push, sim, work, "main", sim.issue_token(REPO))
    assert ok.returncode == 0, ok.stderr
    assert sim.ref(REPO, "main") == git(work, "rev-parse", "main").stdout.strip()


async def test_git_token_in_extra_header_and_private_reads(
        github_sim: Simulator, work: Path, tmp_path: Path) -> None:
    github_sim.create_repo("acme", "secret", work, private=True)
    url = f"{github_sim.git_base}/acme/secret.git"
    refused = await asyncio.to_thread(git, tmp_path, "clone", "-q", url, "anon", check=False)
    assert refused.returncode != 0
    token = github_sim.issue_token("acme/secret")
    cloned = await asyncio.to_thread(
        git, tmp_path, "-c", f"http.extraHeader=Authorization: Bearer {token}", "clone", "-q",
        url, "mine", check=False)
    assert cloned.returncode == 0, cloned.stderr
    assert (tmp_path / "mine" / "f.txt").read_text() == BASE_TEXT


# --- API basics ---------------------------------------------------------------------------


async def test_app_jwt_mints_installation_tokens(sim: Simulator) -> None:
    async with aiohttp.ClientSession() as session:
        app_gh = GitHubAPI(session, "t", base_url=sim.base_url)
        minted = await get_installation_access_token(
            app_gh, installation_id=str(sim.installation_id(REPO)), app_id=str(sim.app_id),
            private_key=sim.private_key_pem)
        assert minted["token"].startswith("ghs_") and minted["expires_at"].endswith("Z")
        inst = await app_gh.getitem(f"/repos/{REPO}/installation",
                                    jwt=get_jwt(app_id=str(sim.app_id),
                                                private_key=sim.private_key_pem))
        assert inst["id"] == sim.installation_id(REPO)

        gh = GitHubAPI(session, "t", oauth_token=minted["token"], base_url=sim.base_url)
        repo = await gh.getitem(f"/repos/{REPO}")
        assert repo["default_branch"] == "main"
        assert gh.rate_limit is not None and gh.rate_limit.remaining == 4999

        async with session.get(f"{sim.base_url}/repos/{REPO}",
                               headers={"Authorization": "token nope"}) as resp:
            assert resp.status == 401
            assert (await resp.json())["message"] == "Bad credentials"
        async with session.post(
                f"{sim.base_url}/app/installations/{sim.installation_id(REPO)}/access_tokens",
                headers={"Authorization": f"Bearer {minted['token']}"}) as resp:
            assert resp.status == 401
    assert [r.kind for r in sim.requests][:1] == ["token"]
    assert sim.writes() == []  # token minting is not a write of the bot's work
    assert sim.violations == []


async def test_contents_commits_branches_refs_and_permissions(
        sim: Simulator, gh: GitHubAPI) -> None:
    import base64

    main = sim.ref(REPO, "main")
    content = await gh.getitem(f"/repos/{REPO}/contents/f.txt?ref=main")
    assert base64.b64decode(content["content"]).decode() == BASE_TEXT
    ref = await gh.getitem(f"/repos/{REPO}/git/ref/heads/main")
    assert ref["object"]["sha"] == main
    branch = await gh.getitem(f"/repos/{REPO}/branches/main")
    assert branch["commit"]["sha"] == main
    commit = await gh.getitem(f"/repos/{REPO}/commits/{main}")
    assert commit["commit"]["message"] == "init" and commit["files"][0]["status"] == "added"
    sim.add_collaborator(REPO, "alice", "write")
    sim.add_user("bob")
    assert (await gh.getitem(f"/repos/{REPO}/collaborators/alice/permission"))[
        "permission"] == "write"
    assert (await gh.getitem(f"/repos/{REPO}/collaborators/bob/permission"))[
        "permission"] == "read"
    assert (await gh.getitem(f"/repos/{REPO}/collaborators/{OWNER}/permission"))[
        "permission"] == "admin"
    with pytest.raises(BadRequest) as missing:
        await gh.getitem(f"/repos/{REPO}/contents/nope.txt")
    assert missing.value.status_code == 404
    with pytest.raises(BadRequest):
        await gh.getitem("/repos/acme/unknown")
    assert sim.violations == []


# --- pull requests, files, pagination -----------------------------------------------------


async def test_pr_files_and_diff_come_from_git(sim: Simulator, gh: GitHubAPI, work: Path
                                               ) -> None:
    pr = await open_sync_pr(sim, gh, work)
    assert pr["draft"] is True and pr["head"]["ref"] == "sync" and pr["base"]["ref"] == "main"
    assert pr["changed_files"] == 1 and pr["additions"] == 2 and pr["deletions"] == 2
    files = [f async for f in gh.getiter(f"/repos/{REPO}/pulls/{pr['number']}/files")]
    assert [f["filename"] for f in files] == ["f.txt"]
    assert files[0]["patch"].count("@@ -") == 2
    assert "-line 5\n+five" in files[0]["patch"]
    diff = await gh.getitem(f"/repos/{REPO}/pulls/{pr['number']}",
                            accept="application/vnd.github.diff")
    assert diff.startswith("diff --git a/f.txt b/f.txt") and "+twenty-five" in diff
    with pytest.raises(BadRequest) as dup:
        await gh.post(f"/repos/{REPO}/pulls",
                      data={"title": "again", "head": "sync", "base": "main"})
    assert dup.value.status_code == 422
    assert sim.violations == []


async def test_pulls_pagination_has_real_link_headers(sim: Simulator, gh: GitHubAPI,
                                                      work: Path) -> None:
    token = sim.issue_token(REPO)
    for i in range(5):
        change_line(work, f"b{i}", {i + 1: f"x{i}"})
        assert push(sim, work, f"b{i}", token).returncode == 0
        await gh.post(f"/repos/{REPO}/pulls", data={"title": f"pr {i}", "head": f"b{i}",
                                                    "base": "main"})
    async with aiohttp.ClientSession() as session, session.get(
            f"{sim.base_url}/repos/{REPO}/pulls?per_page=2&page=2",
            headers={"Authorization": f"token {token}"}) as resp:
        link = resp.headers["Link"]
        assert len(await resp.json()) == 2
    rels = dict((rel, url) for url, rel in re.findall(r'<([^>]+)>; rel="(\w+)"', link))
    assert set(rels) == {"prev", "next", "last", "first"}
    assert "page=3" in rels["next"] and "page=3" in rels["last"] and "per_page=2" in rels["next"]
    numbers = [p["number"] async for p in gh.getiter(f"/repos/{REPO}/pulls?per_page=2")]
    assert numbers == [5, 4, 3, 2, 1]
    mine = [p async for p in gh.getiter(f"/repos/{REPO}/pulls?head={OWNER}:b3&state=all")]
    assert [p["title"] for p in mine] == ["pr 3"]
    assert sim.violations == []


async def test_pr_body_over_the_limit_is_422(sim: Simulator, gh: GitHubAPI, work: Path) -> None:
    pr = await open_sync_pr(sim, gh, work)
    with pytest.raises(BadRequest) as too_long:
        await gh.patch(f"/repos/{REPO}/pulls/{pr['number']}", data={"body": "x" * 65537})
    assert too_long.value.status_code == 422
    await gh.patch(f"/repos/{REPO}/pulls/{pr['number']}", data={"body": "x" * 65536})
    assert sim.pr(REPO, pr["number"]).body == "x" * 65536


# --- reviews ------------------------------------------------------------------------------


async def test_review_outside_the_diff_is_rejected_whole(sim: Simulator, gh: GitHubAPI,
                                                         work: Path) -> None:
    pr = await open_sync_pr(sim, gh, work)
    url = f"/repos/{REPO}/pulls/{pr['number']}/reviews"
    good = {"path": "f.txt", "line": 5, "side": "RIGHT", "body": "```suggestion\nfive\n```"}
    for bad in ({"path": "f.txt", "line": 15, "side": "RIGHT", "body": "outside any hunk"},
                {"path": "f.txt", "start_line": 4, "line": 25, "side": "RIGHT",
                 "body": "spans two hunks"},
                {"path": "f.txt", "start_line": 6, "line": 5, "body": "backwards"},
                {"path": "nope.txt", "line": 1, "body": "no such file"}):
        with pytest.raises(BadRequest) as rejected:
            await gh.post(url, data={"commit_id": pr["head"]["sha"], "event": "COMMENT",
                                     "body": "review", "comments": [good, bad]})
        assert rejected.value.status_code == 422
        assert "could not be resolved" in str(rejected.value) or "hunk" in str(rejected.value) \
            or "precede" in str(rejected.value)
    with pytest.raises(BadRequest) as foreign:
        await gh.post(url, data={"commit_id": "f" * 40, "event": "COMMENT", "body": "x"})
    assert foreign.value.status_code == 422
    assert sim.reviews(REPO, pr["number"]) == []
    assert sim.review_comments(REPO, pr["number"]) == []

    multi = {"path": "f.txt", "start_line": 3, "start_side": "RIGHT", "line": 7,
             "side": "RIGHT", "body": "```suggestion\nthree\nfour\nfive\nsix\nseven\n```"}
    left = {"path": "f.txt", "line": 25, "side": "LEFT", "body": "was line 25"}
    review = await gh.post(url, data={"commit_id": pr["head"]["sha"], "event": "COMMENT",
                                      "body": "review", "comments": [good, multi, left]})
    assert review["state"] == "COMMENTED"
    comments = [c async for c in gh.getiter(f"/repos/{REPO}/pulls/{pr['number']}/comments")]
    assert [(c["line"], c["start_line"], c["side"]) for c in comments] == [
        (5, None, "RIGHT"), (7, 3, "RIGHT"), (25, None, "LEFT")]
    assert comments[0]["diff_hunk"].startswith("@@ ") and comments[0]["diff_hunk"].endswith(
        "+five")
    assert [r["id"] async for r in gh.getiter(url)] == [review["id"]]
    assert sim.violations == []


async def test_single_review_comments_on_a_line_on_a_file_or_as_a_reply(
        sim: Simulator, gh: GitHubAPI, work: Path, receiver: Receiver) -> None:
    pr = await open_sync_pr(sim, gh, work)
    url = f"/repos/{REPO}/pulls/{pr['number']}/comments"
    head = pr["head"]["sha"]
    # A file-level comment needs only its path in the diff; GitHub refuses any other path.
    with pytest.raises(BadRequest) as outside:
        await gh.post(url, data={"body": "x", "commit_id": head, "path": "nope.txt",
                                 "subject_type": "file"})
    assert outside.value.status_code == 422
    assert "pull_request_review_thread.path" in json.dumps(outside.value.errors)
    with pytest.raises(BadRequest) as off_hunk:
        await gh.post(url, data={"body": "x", "commit_id": head, "path": "f.txt", "line": 15,
                                 "side": "RIGHT"})
    assert off_hunk.value.status_code == 422
    assert sim.review_comments(REPO, pr["number"]) == []
    whole = await gh.post(url, data={"body": "the whole file", "commit_id": head,
                                     "path": "f.txt", "subject_type": "file"})
    assert whole["subject_type"] == "file" and "line" not in whole
    on_line = await gh.post(url, data={"body": "line five", "commit_id": head,
                                       "path": "f.txt", "line": 5, "side": "RIGHT"})
    assert on_line["subject_type"] == "line" and on_line["line"] == 5
    reply = await gh.post(url, data={"body": "a reply", "in_reply_to": whole["id"],
                                     "commit_id": head, "path": "ignored.txt", "line": 99})
    assert reply["in_reply_to_id"] == whole["id"] and reply["path"] == "f.txt"
    listed = [(c["body"], c["subject_type"]) async for c in gh.getiter(url)]
    assert listed == [("the whole file", "file"), ("line five", "line"), ("a reply", "file")]
    # Each is filed under a one-comment review of its own, as on github.com.
    assert len(sim.reviews(REPO, pr["number"])) == 3
    await sim.wait_deliveries()
    sent = [e for e in receiver.events if e.event == "pull_request_review_comment"]
    assert [e.data["comment"]["subject_type"] for e in sent] == ["file", "line", "file"]
    assert sent[0].data["comment"]["line"] is None
    assert sim.violations == [] and sim.response_violations == []


# --- comments, reactions, check runs ------------------------------------------------------


async def test_comments_reactions_and_the_issue_comment_webhook(
        sim: Simulator, gh: GitHubAPI, work: Path, receiver: Receiver) -> None:
    pr = await open_sync_pr(sim, gh, work)
    await sim.comment(REPO, pr["number"], "alice", "/sync status")
    await sim.wait_deliveries()
    event = receiver.events[-1]
    assert (event.event, event.data["action"]) == ("issue_comment", "created")
    assert event.data["comment"]["user"]["login"] == "alice"
    assert event.data["issue"]["pull_request"]["url"].endswith(f"/pulls/{pr['number']}")
    comment_id = event.data["comment"]["id"]

    reaction = await gh.post(f"/repos/{REPO}/issues/comments/{comment_id}/reactions",
                             data={"content": "eyes"}, accept="application/vnd.github+json")
    assert reaction["content"] == "eyes"
    reply = await gh.post(f"/repos/{REPO}/issues/{pr['number']}/comments",
                          data={"body": "All good."})
    edited = await gh.patch(f"/repos/{REPO}/issues/comments/{reply['id']}",
                            data={"body": "All good!"})
    assert edited["body"] == "All good!"
    with pytest.raises(BadRequest) as too_long:
        await gh.post(f"/repos/{REPO}/issues/{pr['number']}/comments",
                      data={"body": "x" * 65537})
    assert too_long.value.status_code == 422
    url = f"/repos/{REPO}/issues/{pr['number']}/comments"
    bodies = [c["body"] async for c in gh.getiter(url)]
    assert bodies == ["/sync status", "All good!"]
    assert sim.issue_comments(REPO, pr["number"])[0].reactions[0].content == "eyes"
    await sim.wait_deliveries()
    # The bot's own comment and edit come back as webhooks too, as on github.com.
    created, edited = receiver.events[-2:]
    assert (created.data["action"], created.data["sender"]["type"]) == ("created", "Bot")
    assert edited.data["action"] == "edited"
    assert edited.data["changes"] == {"body": {"from": "All good."}}
    assert sim.violations == []


async def test_check_runs_limits_annotations_and_rerequest(
        sim: Simulator, gh: GitHubAPI, work: Path, receiver: Receiver) -> None:
    pr = await open_sync_pr(sim, gh, work)
    head = pr["head"]["sha"]
    note = {"path": "f.txt", "start_line": 5, "end_line": 5, "annotation_level": "failure",
            "message": "conflict marker"}
    with pytest.raises(BadRequest) as too_many:
        await gh.post(f"/repos/{REPO}/check-runs", data={
            "name": "forksync", "head_sha": head, "status": "in_progress",
            "output": {"title": "t", "summary": "s", "annotations": [note] * 51}})
    assert too_many.value.status_code == 422
    run = await gh.post(f"/repos/{REPO}/check-runs", data={
        "name": "forksync", "head_sha": head, "status": "in_progress",
        "output": {"title": "Sync", "summary": "working", "annotations": [note] * 50}})
    done = await gh.patch(f"/repos/{REPO}/check-runs/{run['id']}", data={
        "conclusion": "failure", "output": {"title": "Sync", "summary": "2 markers left",
                                            "annotations": [note]}})
    assert done["status"] == "completed" and done["conclusion"] == "failure"
    assert done["output"]["annotations_count"] == 51
    assert done["pull_requests"][0]["number"] == pr["number"]
    listed = await gh.getitem(f"/repos/{REPO}/commits/sync/check-runs?check_name=forksync")
    assert [r["id"] for r in listed["check_runs"]] == [run["id"]]
    notes = [a async for a in gh.getiter(f"/repos/{REPO}/check-runs/{run['id']}/annotations")]
    assert len(notes) == 51
    with pytest.raises(BadRequest) as too_long:
        await gh.patch(f"/repos/{REPO}/check-runs/{run['id']}",
                       data={"output": {"title": "t", "summary": "x" * 65536}})
    assert too_long.value.status_code == 422
    sim.violations.clear()  # the over-long summary is a spec violation, on purpose

    await sim.rerequest_check_run(REPO, run["id"], user="alice")
    await sim.wait_deliveries()
    event = receiver.events[-1]
    assert (event.event, event.data["action"]) == ("check_run", "rerequested")
    assert event.data["check_run"]["id"] == run["id"]
    assert sim.violations == []


# --- helpers that stand in for people ------------------------------------------------------


async def test_merge_install_and_close_send_valid_webhooks(
        sim: Simulator, gh: GitHubAPI, work: Path, receiver: Receiver) -> None:
    pr = await open_sync_pr(sim, gh, work)
    sha = await sim.merge_pr(REPO, pr["number"], method="squash", user="alice")
    assert sim.ref(REPO, "main") == sha
    merged = await gh.getitem(f"/repos/{REPO}/pulls/{pr['number']}")
    assert merged["merged"] is True and merged["state"] == "closed"
    sim.create_repo("other", "repo", work, install=False)
    installation = await sim.install("other")
    await sim.wait_deliveries()
    kinds = [(e.event, e.data.get("action")) for e in receiver.events]
    assert kinds == [("push", None), ("pull_request", "opened"), ("push", None),
                     ("pull_request", "closed"), ("installation", "created")]
    assert receiver.events[2].data["ref"] == "refs/heads/main"
    assert receiver.events[3].data["pull_request"]["merged"] is True
    assert receiver.events[4].data["installation"]["id"] == installation
    assert [r["full_name"] for r in receiver.events[4].data["repositories"]] == ["other/repo"]
    assert sim.violations == []


# --- faults, counting, spec checks --------------------------------------------------------


async def test_injected_faults(sim: Simulator, gh: GitHubAPI) -> None:
    sim.inject_fault(r"^/repos/acme/fork$", "status", status=502, times=2)
    for _ in range(2):
        with pytest.raises(GitHubBroken) as broken:
            await gh.getitem(f"/repos/{REPO}")
        assert broken.value.status_code == 502
    assert (await gh.getitem(f"/repos/{REPO}"))["full_name"] == REPO

    token = sim.issue_token(REPO)
    headers = {"Authorization": f"token {token}"}
    sim.inject_fault(r"/pulls$", "secondary_rate_limit", method="POST", retry_after=1)
    sim.inject_fault(r"/pulls$", "rate_limit", method="POST", retry_after=2)
    async with aiohttp.ClientSession(headers=headers) as session:
        url = f"{sim.base_url}/repos/{REPO}/pulls"
        async with session.post(url, json={"title": "t", "head": "x", "base": "main"}) as r:
            assert r.status == 403 and r.headers["Retry-After"] == "1"
            assert "secondary rate limit" in (await r.json())["message"]
        async with session.post(url, json={"title": "t", "head": "x", "base": "main"}) as r:
            assert r.status == 429 and r.headers["Retry-After"] == "2"
        async with session.post(url, json={"title": "t", "head": "x", "base": "main"}) as r:
            assert r.status == 422  # the fault is used up: real validation again

        sim.inject_fault(r"/pulls$", "timeout", method="GET", delay=5)
        with pytest.raises(TimeoutError):
            async with session.get(url, timeout=aiohttp.ClientTimeout(total=0.3)):
                pass
        # POST: aiohttp silently retries an idempotent request once when the server hangs up.
        sim.inject_fault(r"/pulls$", "disconnect", method="POST")
        with pytest.raises(aiohttp.ClientError):
            async with session.post(url, json={"title": "t", "head": "x", "base": "main"}):
                pass
        async with session.get(url) as r:
            assert r.status == 200
    assert [r.fault for r in sim.requests if r.fault] == [
        "status", "status", "secondary_rate_limit", "rate_limit", "timeout", "disconnect"]


async def test_writes_are_counted_without_git_or_tokens(sim: Simulator, gh: GitHubAPI,
                                                        work: Path) -> None:
    pr = await open_sync_pr(sim, gh, work)
    await gh.post(f"/repos/{REPO}/issues/{pr['number']}/comments", data={"body": "hi"})
    await gh.getitem(f"/repos/{REPO}/pulls/{pr['number']}")
    writes = sim.writes()
    assert [(w.method, w.operation) for w in writes] == [
        ("POST", "/repos/{owner}/{repo}/pulls"),
        ("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments")]
    assert writes[0].body["head"] == "sync" and writes[0].status == 201
    assert any(r.kind == "git" for r in sim.requests)


async def test_requests_that_break_the_openapi_spec_are_recorded(
        sim: Simulator, gh: GitHubAPI, work: Path) -> None:
    pr = await open_sync_pr(sim, gh, work)
    with pytest.raises(BadRequest) as wrong_event:
        await gh.post(f"/repos/{REPO}/pulls/{pr['number']}/reviews",
                      data={"event": "COMMENTED", "body": "x"})
    assert wrong_event.value.status_code == 422
    with pytest.raises(BadRequest) as wrong_type:
        await gh.post(f"/repos/{REPO}/check-runs", data={"name": "forksync", "head_sha": 42})
    assert wrong_type.value.status_code == 422
    with pytest.raises(BadRequest) as no_such_route:
        await gh.getitem(f"/repos/{REPO}/pulls/{pr['number']}/nonsense")
    assert no_such_route.value.status_code == 404
    with pytest.raises(BadRequest):
        await gh.getitem(f"/repos/{REPO}/pulls?state=bogus")
    assert len(sim.violations) == 4
    assert "'COMMENTED' is not one of" in sim.violations[0]
    assert "head_sha: 42 is not of type 'string'" in sim.violations[1]
    assert "no such operation" in sim.violations[2]
    assert "parameter 'state'" in sim.violations[3]
    assert sim.reviews(REPO, pr["number"]) == []


def test_standalone_module_has_a_cli() -> None:
    out = subprocess.run([sys.executable, "-m", "tests.sim", "--help"],
                         cwd=Path(__file__).resolve().parents[1], capture_output=True,
                         text=True, check=True)
    assert "--bot-url" in out.stdout and "--secret" in out.stdout


async def test_bot_edits_and_checks_come_back_as_webhooks_only_where_installed(
        sim: Simulator, gh: GitHubAPI, work: Path, receiver: Receiver) -> None:
    pr = await open_sync_pr(sim, gh, work)
    await gh.patch(f"/repos/{REPO}/pulls/{pr['number']}", data={"body": "report v2"})
    run = await gh.post(f"/repos/{REPO}/check-runs", data={
        "name": "forksync", "head_sha": pr["head"]["sha"], "status": "in_progress"})
    await gh.patch(f"/repos/{REPO}/check-runs/{run['id']}", data={"conclusion": "success"})
    sim.create_repo("stranger", "repo", work, install=False)
    await sim.commit("stranger/repo", "main", {"x": "y"}, "not ours")
    await sim.wait_deliveries()
    kinds = [(e.event, e.data.get("action")) for e in receiver.events]
    assert kinds == [("push", None), ("pull_request", "opened"), ("pull_request", "edited"),
                     ("check_run", "created"), ("check_run", "completed")]
    assert receiver.events[2].data["changes"] == {"body": {"from": "report"}}
    assert sim.violations == []


async def test_installation_lifecycle_and_token_expiry(
        sim: Simulator, work: Path, receiver: Receiver) -> None:
    sim.create_repo("org", "a", work, install=False)
    sim.create_repo("org", "b", work, install=False)
    sim.create_repo(OWNER, "private", work, private=True)
    inst = await sim.install("org", ["org/a"])
    await sim.add_installation_repos("org", ["org/b"])
    token = sim.issue_token(inst)
    async with aiohttp.ClientSession() as session:
        gh = GitHubAPI(session, "t", oauth_token=token, base_url=sim.base_url)
        assert (await gh.getitem("/repos/org/b"))["full_name"] == "org/b"
        with pytest.raises(BadRequest) as hidden:
            await gh.getitem(f"/repos/{OWNER}/private")  # another account's private repo
        assert hidden.value.status_code == 404
        sim.expire_tokens()
        with pytest.raises(BadRequest) as expired:
            await gh.getitem("/repos/org/b")
        assert expired.value.status_code == 401
        await sim.uninstall("org")
        with pytest.raises(LookupError):
            sim.issue_token("org/a")
    await sim.wait_deliveries()
    kinds = [(e.event, e.data.get("action")) for e in receiver.events]
    assert kinds == [("installation", "created"), ("installation_repositories", "added"),
                     ("installation", "deleted")]
    assert [r["full_name"] for r in receiver.events[1].data["repositories_added"]] == ["org/b"]
    assert sim.violations == []


async def test_content_creation_is_held_to_githubs_secondary_limits(
        github_sim: Simulator, work: Path) -> None:
    github_sim.content_limits = (3, 500)
    github_sim.create_repo(OWNER, NAME, work)
    async with aiohttp.ClientSession() as session:
        gh = GitHubAPI(session, "t", oauth_token=github_sim.issue_token(REPO),
                       base_url=github_sim.base_url)
        pr = await open_sync_pr(github_sim, gh, work)  # the first content-creating POST
        for i in range(2):
            await gh.post(f"/repos/{REPO}/issues/{pr['number']}/comments", data={"body": f"{i}"})
        with pytest.raises(BadRequest) as limited:
            await gh.post(f"/repos/{REPO}/issues/{pr['number']}/comments", data={"body": "3"})
        assert limited.value.status_code == 403
        assert "secondary rate limit" in str(limited.value)
    assert len(github_sim.issue_comments(REPO, pr["number"])) == 2
    assert len(github_sim.violations) == 1 and "secondary rate limit" in github_sim.violations[0]


async def test_operations_the_simulator_lacks_are_listed(sim: Simulator, gh: GitHubAPI) -> None:
    with pytest.raises(BadRequest) as missing:
        await gh.getitem(f"/repos/{REPO}/labels")
    assert missing.value.status_code == 404
    assert sim.unimplemented == ["GET /repos/{owner}/{repo}/labels"]
    assert sim.violations == []  # a real GitHub operation: not the caller's fault


def test_standalone_server_serves_a_repository(work: Path, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.sim", "--port", "0", "--root", str(tmp_path / "sim"),
         "--repo", f"{REPO}={work}"],
        cwd=Path(__file__).resolve().parents[1], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        repo_line = proc.stdout.readline()
        base_line = proc.stdout.readline()
        token = re.search(r"token (\S+)", repo_line)
        base = re.search(r"on (http://\S+)", base_line)
        assert token and base, (repo_line, base_line)
        clone = git(tmp_path, "-c", f"http.extraHeader=Authorization: token {token[1]}",
                    "clone", "-q", f"{base[1]}/{REPO}.git", "clone", check=False)
        assert clone.returncode == 0, clone.stderr
        assert (tmp_path / "clone" / "f.txt").read_text() == BASE_TEXT
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def test_pushes_that_merge_or_delete_a_head_close_the_pr(
        sim: Simulator, gh: GitHubAPI, work: Path, receiver: Receiver) -> None:
    pr = await open_sync_pr(sim, gh, work)
    change_line(work, "other", {1: "one"})
    token = sim.issue_token(REPO)
    assert push(sim, work, "other", token).returncode == 0
    other = await gh.post(f"/repos/{REPO}/pulls",
                          data={"title": "other", "head": "other", "base": "main"})
    git(work, "checkout", "-q", "main")
    git(work, "merge", "-q", "--no-edit", "sync")  # merged locally, then pushed to main
    assert push(sim, work, "main", token).returncode == 0
    deleted = git(work, "push", "-q", sim.git_url(REPO, token), ":refs/heads/other",
                  check=False)
    assert deleted.returncode == 0, deleted.stderr
    await sim.wait_deliveries()
    closed = {e.data["number"]: e.data["pull_request"] for e in receiver.events
              if e.event == "pull_request" and e.data["action"] == "closed"}
    assert closed[pr["number"]]["merged"] is True
    assert closed[other["number"]]["merged"] is False
    assert [e.data["deleted"] for e in receiver.events if e.event == "push"][-1] is True
    assert sim.violations == []


async def test_any_installation_token_reads_public_repos_but_writes_only_its_own(
        sim: Simulator, work: Path, tmp_path: Path) -> None:
    sim.create_repo("downstream", "fork", work)
    token = sim.issue_token("downstream/fork")
    async with aiohttp.ClientSession() as session:
        gh = GitHubAPI(session, "t", oauth_token=token, base_url=sim.base_url)
        assert (await gh.getitem(f"/repos/{REPO}"))["private"] is False
        with pytest.raises(BadRequest) as refused:
            await gh.post(f"/repos/{REPO}/check-runs",
                          data={"name": "x", "head_sha": sim.ref(REPO, "main")})
        assert refused.value.status_code == 403
    header = f"http.extraHeader=Authorization: token {token}"
    fetched = git(tmp_path, "-c", header, "clone", "-q", f"{sim.git_base}/{REPO}.git", "up",
                  check=False)
    assert fetched.returncode == 0, fetched.stderr
    change_line(work, "topic", {2: "two"})
    pushed = git(work, "-c", header, "push", "-q", f"{sim.git_base}/{REPO}.git", "topic",
                 check=False)
    assert pushed.returncode != 0 and sim.ref(REPO, "topic") is None


# --- the OpenAPI layer on its own ---------------------------------------------------------


def test_spec_matching_prefers_literals_and_lets_refs_hold_slashes() -> None:
    spec = rest_spec()

    def template(method: str, path: str) -> str | None:
        found = spec.match(method, path)
        return found.operation.template if found else None

    assert template("GET", "/repos/o/r/pulls/comments") == "/repos/{owner}/{repo}/pulls/comments"
    assert template("GET", "/repos/o/r/pulls/7") == "/repos/{owner}/{repo}/pulls/{pull_number}"
    found = spec.match("GET", "/repos/o/r/commits/forksync/sync-1/check-runs")
    assert found is not None and found.params["ref"] == "forksync/sync-1"
    assert found.operation.template == "/repos/{owner}/{repo}/commits/{ref}/check-runs"
    assert template("GET", "/repos/o/r/contents/a/b%20c.py") == \
        "/repos/{owner}/{repo}/contents/{path}"
    content = spec.match("GET", "/repos/o/r/contents/a/b%20c.py")
    assert content is not None and content.params["path"] == "a/b c.py"
    assert template("DELETE", "/app") is None and template("GET", "/nope") is None


def test_openapi_30_nullable_becomes_json_schema_null() -> None:
    spec = rest_spec()
    found = spec.match("POST", "/repos/o/r/check-runs")
    assert found is not None
    ok = {"name": "forksync", "head_sha": "a" * 40, "status": "completed",
          "conclusion": "success", "output": {"title": "t", "summary": "s"}}
    assert spec.validate_request(found, {}, ok, has_body=True) == []
    problems = spec.validate_request(found, {}, {"head_sha": "x"}, has_body=True)
    assert problems and "'name' is a required property" in problems[0]
    # pull-request-simple says `"body": {"type": "string", "nullable": true}`.
    pulls = spec.match("GET", "/repos/o/r/pulls")
    assert pulls is not None
    assert spec.validate_response(pulls, 200, [{"body": None}]) != []  # other fields missing
    assert not any("body" in p and "None is not of type" in p
                   for p in spec.validate_response(pulls, 200, [{"body": None}]))


def test_a_missing_spec_says_to_run_npm_ci(tmp_path: Path) -> None:
    with pytest.raises(SpecMissingError, match="npm ci"):
        RestSpec.load(tmp_path / "api.github.com.json")


async def test_a_bot_that_answers_webhooks_slowly_is_flagged(sim: Simulator) -> None:
    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(2)
        return web.Response(status=202)

    app = web.Application()
    app.router.add_post("/webhook", slow)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    sim.bot_url = f"http://127.0.0.1:{runner.addresses[0][1]}/webhook"
    sim.webhooks.timeout = 0.2  # GitHub's 10 s, shortened for the test
    await sim.commit(REPO, "main", {"x.txt": "x"}, "x")
    [delivery] = await sim.wait_deliveries()
    await runner.cleanup()
    assert delivery.status is None and delivery.error and "0.2 s" in delivery.error
    assert len(sim.violations) == 1 and "did not answer" in sim.violations[0]


async def test_git_traffic_takes_faults_too(sim: Simulator, work: Path) -> None:
    sim.inject_fault(r"/git-receive-pack$", "status", method="POST", status=503)
    change_line(work, "topic", {3: "three"})
    failed = await asyncio.to_thread(push, sim, work, "topic", sim.issue_token(REPO))
    assert failed.returncode != 0 and sim.ref(REPO, "topic") is None
    assert await sim.wait_deliveries() == []
    retried = await asyncio.to_thread(push, sim, work, "topic", sim.issue_token(REPO))
    assert retried.returncode == 0 and sim.ref(REPO, "topic") is not None


async def test_review_thread_replies_and_reactions(
        sim: Simulator, gh: GitHubAPI, work: Path, receiver: Receiver) -> None:
    pr = await open_sync_pr(sim, gh, work)
    number = pr["number"]
    await gh.post(f"/repos/{REPO}/pulls/{number}/reviews", data={
        "event": "COMMENT", "body": "review",
        "comments": [{"path": "f.txt", "line": 5, "side": "RIGHT", "body": "suggestion"}]})
    [top] = sim.review_comments(REPO, number)
    human = await sim.reply(REPO, number, top.id, "alice", "/sync resolve f.txt theirs")
    await sim.wait_deliveries()
    event = receiver.events[-1]
    assert (event.event, event.data["action"]) == ("pull_request_review_comment", "created")
    assert event.data["comment"]["in_reply_to_id"] == top.id
    assert event.data["comment"]["user"]["login"] == "alice"

    reaction = await gh.post(f"/repos/{REPO}/pulls/comments/{human.id}/reactions",
                             data={"content": "+1"})
    assert reaction["content"] == "+1"
    # Replying to a reply lands in the same thread, under its first comment.
    answer = await gh.post(f"/repos/{REPO}/pulls/{number}/comments/{human.id}/replies",
                           data={"body": "Resolved f.txt as theirs."})
    assert answer["in_reply_to_id"] == top.id and answer["line"] == 5
    fetched = await gh.getitem(f"/repos/{REPO}/pulls/comments/{human.id}")
    assert fetched["reactions"]["+1"] == 1
    thread = [c["body"] async for c in gh.getiter(f"/repos/{REPO}/pulls/{number}/comments")]
    assert thread == ["suggestion", "/sync resolve f.txt theirs", "Resolved f.txt as theirs."]
    # On github.com every reply is filed under a one-comment review of its own.
    assert [r.body for r in sim.reviews(REPO, number)] == ["review", "", ""]
    await sim.wait_deliveries()
    assert receiver.events[-1].data["sender"]["type"] == "Bot"
    assert sim.violations == []
