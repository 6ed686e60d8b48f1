"""The ``"command"`` job and the ``issue_comment`` handler, with the shared FakeGH.

Commands that write to the sync branch run against real git: a fork and an upstream
made by ``tests/factory.py``, served as ``file://`` remotes, with commit 1 written by
the engine itself. GitHub is the one FakeGH from ``conftest.py``.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bot.app.settings import Settings
from bot.app.store import Store
from bot.engine.git import BOT_NAME, Git
from bot.engine.markers import scan, split_lines
from bot.engine.rerere import has_markers, parse_regions
from bot.github import checks, remote
from bot.sync.commands.answer import validate_answer
from bot.sync.commands.gitops import TRAILER, commit_files
from bot.sync.commands.jobs import JOBS, run_command
from bot.sync.commands.parse import USAGE
from bot.sync.commands.rebuild import migrate_answers
from bot.sync.commands.request import reply_marker
from bot.sync.commands.runner import REFUSAL_REPLY_EVERY
from bot.sync.state import load_fork_state, save_fork_state, save_plan, sync_branch_name
from handlers.commands import router as commands_router
from tests.conftest import FakeContext, FakeGH, sample_event
from tests.factory import PLAIN_CONFIG, Scenario, git, git_text
from tests.partial import serve_filters

FORK = "vime-org/vime"
PR = 7
USER = "vime-dev"
PATH = "vime/calc.py"
BASE = "".join(f"line {i}\n" for i in range(1, 31))
FORK_TEXT = BASE.replace("line 5\n", "line 5 fork\n").replace("line 20\n", "line 20 fork\n")
UP_TEXT = BASE.replace("line 5\n", "line 5 upstream\n").replace("line 20\n", "line 20 upstream\n")
PEOPLE_NOTES = "Notes people wrote under the report."


@dataclass
class Live:
    """An open sync PR: commit 1 on the sync branch of a ``file://`` fork, and its state."""

    scenario: Scenario
    ctx: FakeContext
    gh: FakeGH
    remote: Path  # the fork as the server holds it (bare)
    upstream_remote: Path
    branch: str
    commit: str
    plan_json: dict[str, Any]

    @property
    def head(self) -> str:
        return git_text(self.remote, "rev-parse", f"refs/heads/{self.branch}")

    def file(self, rev: str, path: str = PATH) -> str:
        return git_text(self.remote, "show", f"{rev}:{path}") + "\n"

    def state(self) -> dict[str, Any]:
        return load_fork_state(self.ctx.store, FORK)

    def sync(self) -> dict[str, Any]:
        sync: dict[str, Any] = self.state()["sync"]
        return sync

    def edit_plan(self, change: Any) -> None:
        """Change the stored plan (e.g. give an item a suggestion) as the engine might have."""
        path = Path(self.sync()["plan_file"])
        plan_json = json.loads(path.read_text())
        change(plan_json)
        path.write_text(json.dumps(plan_json))

    def person_commits(self, files: dict[str, str | None], message: str = "Resolve") -> str:
        """Someone pushes a commit to the sync branch (not the bot)."""
        who = {"GIT_AUTHOR_NAME": "Vera Vime", "GIT_AUTHOR_EMAIL": "vera@vime.dev",
               "GIT_COMMITTER_NAME": "Vera Vime", "GIT_COMMITTER_EMAIL": "vera@vime.dev"}
        sha = commit_files(Git(self.remote, env=who), self.head, files, message + "\n")
        git(self.remote, "update-ref", f"refs/heads/{self.branch}", sha)
        return sha

    async def comment(self, body: str, *, comment_id: int = 501, author: str = USER,
                      **extra: Any) -> None:
        await run_command(self.ctx, {  # type: ignore[arg-type]
            "fork": FORK, "installation_id": 1, "pr": PR, "comment_id": comment_id,
            "author": author, "body": body, **extra})

    def replies(self) -> list[str]:
        return [r.data["body"] for r in self.gh.sent("POST", f"/repos/{FORK}/issues/{PR}/comments")]

    def reactions(self, comment_id: int = 501) -> list[str]:
        return [r.data["content"] for r in
                self.gh.sent("POST", f"/repos/{FORK}/issues/comments/{comment_id}/reactions")]


def _bare_clone(source: Path, target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(source), str(target)], check=True,
                   capture_output=True)
    serve_filters(target)  # the App's caches are partial clones
    return target


def _pull(live_head: str, branch: str) -> dict[str, Any]:
    return {"number": PR, "state": "open", "title": "sync(THUDM/slime #11..#11): 3-way merge",
            "body": f"<!-- forksync:begin -->\nold\n<!-- forksync:end -->\n\n{PEOPLE_NOTES}",
            "head": {"sha": live_head, "ref": branch, "repo": {"full_name": FORK}},
            "base": {"ref": "main", "repo": {"full_name": FORK,
                                             "html_url": f"https://github.com/{FORK}"}}}


@pytest.fixture
def live(tmp_path: Path, fake_store: Store, fake_gh: FakeGH) -> Live:
    return make_live(tmp_path, fake_store, fake_gh)


def make_live(tmp_path: Path, fake_store: Store, fake_gh: FakeGH,
              texts: tuple[str, str, str] = (BASE, FORK_TEXT, UP_TEXT)) -> Live:
    """The sync PR of ``live``, with ``vime/calc.py`` at base, in the fork and upstream."""
    from bot.engine.pipeline import sync as engine_sync

    base, fork_text, up_text = texts
    s = Scenario(tmp_path / "repos", config=PLAIN_CONFIG)
    s.upstream_pr(10, "Add calc", "alice", files={"slime/calc.py": base,
                                                  "slime/other.py": "x = 1\n"})
    s.sync_fork()
    s.fork_commit("Fork: tweak calc", files={PATH: fork_text})
    s.upstream_pr(11, "Tune calc", "bob", files={"slime/calc.py": up_text})
    remotes = tmp_path / "remotes"
    remote = _bare_clone(s.fork_dir, remotes / "vime-org" / "vime.git")
    upstream_remote = _bare_clone(s.upstream_dir, remotes / "THUDM" / "slime.git")
    settings = Settings(webhook_secret="s3cret", token="ghs_faketoken0000000000",
                        git_url=f"file://{remotes}", data_dir=tmp_path / "data")
    branch = sync_branch_name(s.cutoff)
    result = engine_sync(str(remote), str(upstream_remote), branch=branch,
                         workdir=str(tmp_path / "work"))
    plan_json = result.plan.to_json()
    save_fork_state(fake_store, FORK, {
        "installation_id": 1, "upstream": "THUDM/slime", "upstream_branch": "main",
        "fork_branch": "main", "pushed": [result.commit],
        "sync": {"branch": branch, "commit": result.commit, "cutoff": plan_json["cutoff"],
                 "tip": plan_json["tip"], "ours": plan_json["ours"], "pr": PR, "behind": 0,
                 "head": result.commit, "window_label": plan_json["window_label"],
                 **save_plan(settings, FORK, result.commit, plan_json)}})
    ctx = FakeContext(settings, fake_store, fake_gh, installation_id=1)
    fake_gh.on("GET", f"/repos/{FORK}/collaborators/{USER}/permission",
               {"permission": "write", "role_name": "write"})
    fake_gh.on("GET", f"/repos/{FORK}/pulls/{PR}", lambda _r: _pull(live_obj.head, branch))
    fake_gh.on("GET", f"/repos/{FORK}/pulls/{PR}/reviews", [])
    fake_gh.on("POST", f"/repos/{FORK}/check-runs", {"id": 77})
    fake_gh.on("GET", f"/repos/{FORK}/commits/{result.commit}/check-runs", {"check_runs": []})
    live_obj = Live(s, ctx, fake_gh, remote, upstream_remote, branch, result.commit, plan_json)
    return live_obj


@pytest.fixture
def no_check_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``forksync`` check exists yet on any head (the heads are made during the test)."""

    async def none(*_a: Any) -> None:
        return None

    monkeypatch.setattr(checks, "find_check_run", none)


def test_the_registry_names_the_job() -> None:
    assert JOBS["command"] is run_command


# -- permission ----------------------------------------------------------------------------


@pytest.mark.parametrize("answer", [{"permission": "read", "role_name": "triage"},
                                    {"permission": "none", "role_name": "none"}])
async def test_without_write_access_a_polite_refusal_and_nothing_else(live: Live,
                                                                      answer: Any) -> None:
    live.gh.on("GET", f"/repos/{FORK}/collaborators/mallory/permission", answer)
    before = live.head
    await live.comment("/sync resolve vime/calc.py theirs", author="mallory")
    assert live.reactions() == ["-1"]
    (reply,) = live.replies()
    assert reply.startswith("@mallory thank you")
    assert f"Only people with write access to `{FORK}`" in reply
    assert live.gh.write_count == 2  # the reaction and the reply, nothing else
    assert live.head == before


async def test_a_refusal_is_replied_once_per_author_and_pr_an_hour_then_only_reacted_to(
        live: Live) -> None:
    # Anyone may comment: each refusal cost a reaction AND a reply of the write budget.
    for n in range(4):
        await live.comment("/sync refresh", comment_id=600 + n, author="mallory")
    assert [live.reactions(600 + n) for n in range(4)] == [["-1"]] * 4
    assert len(live.replies()) == 1 and live.gh.write_count == 5
    # Another author, or the same one on another PR, is told once too.
    await live.comment("/sync status", comment_id=610, author="trudy")
    await live.comment("/sync status", comment_id=611, author="Mallory", pr=PR + 1)
    assert len(live.replies()) + len(live.gh.sent(
        "POST", f"/repos/{FORK}/issues/{PR + 1}/comments")) == 3
    # An hour later, mallory is told again, once.
    state = live.state()
    state["refusals_replied"] = {k: at - REFUSAL_REPLY_EVERY
                                 for k, at in state["refusals_replied"].items()}
    save_fork_state(live.ctx.store, FORK, state)
    await live.comment("/sync refresh", comment_id=620, author="mallory")
    await live.comment("/sync refresh", comment_id=621, author="mallory")
    assert len(live.replies()) == 3 and live.reactions(621) == ["-1"]
    # Old entries are forgotten, so the state stays small.
    assert set(live.state()["refusals_replied"]) == {f"{PR}:mallory"}


async def test_not_a_collaborator_at_all_is_refused(live: Live) -> None:
    # FakeGH answers 404 for an unknown GET, as GitHub does for a non-collaborator.
    await live.comment("/sync status", author="stranger")
    assert live.reactions() == ["-1"]
    assert len(live.replies()) == 1 and live.gh.write_count == 2


@pytest.mark.parametrize("role", ["admin", "maintain", "write"])
async def test_write_roles_may_run_commands(live: Live, role: str) -> None:
    live.gh.on("GET", f"/repos/{FORK}/collaborators/{USER}/permission",
               {"permission": "write" if role == "maintain" else role, "role_name": role})
    await live.comment("/sync help")
    assert live.reactions() == ["eyes"]
    assert USAGE["resolve"] in live.replies()[0]


# -- replies, reactions, idempotency ---------------------------------------------------------


async def test_parse_error_gets_confused_and_the_usage(live: Live) -> None:
    await live.comment("/sync resolve vime/calc.py mine")
    assert live.reactions() == ["confused"]
    (reply,) = live.replies()
    assert "`mine` is not a side" in reply and f"Usage: `{USAGE['resolve']}`" in reply
    assert reply_marker(501) in reply


async def test_several_commands_one_reply_both_reactions(live: Live) -> None:
    await live.comment("/sync status\n> /sync refresh\n/sync frobnicate\n")
    assert live.reactions() == ["eyes", "confused"]
    (reply,) = live.replies()
    assert "> /sync status" in reply and "> /sync frobnicate" in reply
    assert "> /sync refresh" not in reply  # quoted: not a command
    assert reply.index("Conflict regions") < reply.index("`frobnicate` is not a command")


async def test_a_comment_is_answered_once(live: Live) -> None:
    await live.comment("/sync status")
    await live.comment("/sync status")
    assert len(live.replies()) == 1


async def test_a_retry_finds_the_reply_it_posted_before_crashing(live: Live) -> None:
    live.ctx.job = SimpleNamespace(attempts=2)  # type: ignore[attr-defined]
    live.gh.on("GET", f"/repos/{FORK}/issues/{PR}/comments",
               [{"body": "earlier"}, {"body": "@vime-dev ...\n\n" + reply_marker(501)}])
    await live.comment("/sync status")
    assert live.gh.write_count == 0


async def test_an_unexpected_failure_is_retried_then_reported(
        live: Live, monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.sync.commands import status

    def broken(*_a: Any) -> str:
        raise KeyError("plan_file")

    monkeypatch.setattr(status, "status_text", broken)
    live.ctx.job = SimpleNamespace(attempts=1)  # type: ignore[attr-defined]
    with pytest.raises(KeyError):
        await live.comment("/sync status")
    assert live.replies() == []
    live.ctx.job = SimpleNamespace(attempts=live.ctx.store.max_attempts)  # type: ignore[attr-defined]
    live.gh.on("GET", f"/repos/{FORK}/issues/{PR}/comments", [])
    await live.comment("/sync status")
    assert "This failed unexpectedly" in live.replies()[0]


async def test_a_reply_in_a_review_thread_is_answered_in_that_thread(live: Live) -> None:
    await live.comment("/sync answer Q1 theirs", comment_id=2001, source="review_comment",
                       thread_id=2000)
    reacted = live.gh.sent("POST", f"/repos/{FORK}/pulls/comments/2001/reactions")
    assert [r.data["content"] for r in reacted] == ["eyes"]
    (reply,) = live.gh.sent("POST", f"/repos/{FORK}/pulls/{PR}/comments/2000/replies")
    assert "Recorded **Q1**: `theirs`" in reply.data["body"]
    assert live.replies() == []  # nothing in the conversation
    assert live.state()["commands_done"] == ["review_comment:2001"]
    assert "line 5 upstream\n" in live.file(live.head)


async def test_comment_without_commands_does_nothing(live: Live) -> None:
    await live.comment("LGTM, but `/sync status` later")
    assert live.gh.requests == []


async def test_commands_on_another_pr_say_which_is_the_sync_pr(live: Live) -> None:
    await run_command(live.ctx, {"fork": FORK, "installation_id": 1, "pr": 3,  # type: ignore[arg-type]
                                 "comment_id": 9, "author": USER, "body": "/sync status"})
    reply = live.gh.sent("POST", f"/repos/{FORK}/issues/3/comments")[0].data["body"]
    assert "#3 is not this fork's open sync PR" in reply and "#7" in reply


# -- status ---------------------------------------------------------------------------------


async def test_status_counts_what_is_left(live: Live) -> None:
    state = live.state()
    state["sync"]["behind"] = 3
    save_fork_state(live.ctx.store, FORK, state)
    await live.comment("/sync status")
    (reply,) = live.replies()
    assert "Conflict regions: **2 remaining**, 0 resolved (of 2), in `vime/calc.py`." in reply
    assert "Open questions: **0**" in reply
    assert "Behind upstream by **3** PRs" in reply and "/sync extend" in reply
    assert live.gh.write_count == 2  # eyes and the reply


async def test_status_after_a_rescan(live: Live) -> None:
    state = live.state()
    state["sync"]["remaining"] = [
        {"path": PATH, "id": "Q2", "start_line": 22, "end_line": 28, "marker": True},
        {"path": "vime/x.py", "id": "Q3", "start_line": None, "end_line": None,
         "marker": False}]
    state["sync"]["answers"] = {"Q9": "ours"}
    save_fork_state(live.ctx.store, FORK, state)
    await live.comment("/sync status")
    reply = live.replies()[0]
    assert "**1 remaining**, 1 resolved (of 2)" in reply
    assert "Open questions: **1** (Q3); 1 answered." in reply
    assert "Up to date with upstream" in reply


async def test_status_counts_marker_lines_outside_a_region_and_never_says_it_passes(
        live: Live) -> None:
    state = live.state()
    state["sync"]["remaining"] = [
        {"path": PATH, "id": "Q1", "start_line": 6, "end_line": 6, "marker": True,
         "orphan": True, "texts": ["||||||| upstream@0123"]},
        {"path": "docs/a.md", "id": "M1", "start_line": 3, "end_line": 3, "marker": False,
         "orphan": True, "texts": ["<<<<<<< HEAD"]}]
    save_fork_state(live.ctx.store, FORK, state)
    await live.comment("/sync status")
    reply = live.replies()[0]
    assert ("Conflict marker lines outside any complete region: **1**; to confirm as content "
            "or remove: M1 (in `docs/a.md` and `vime/calc.py`).") in reply
    assert "Open questions: **0**" in reply and "check passes" not in reply


async def test_a_marker_like_line_answered_content_leaves_the_check(
        live: Live, no_check_runs: None) -> None:
    state = live.state()
    state["sync"]["remaining"] = [
        {"path": "docs/a.md", "id": "M1", "start_line": 3, "end_line": 3, "marker": False,
         "orphan": True, "texts": ["<<<<<<< HEAD"]},
        {"path": "docs/a.md", "id": "M2", "start_line": 9, "end_line": 9, "marker": False,
         "orphan": True, "texts": ["<<<<<<< HEAD"]}]
    save_fork_state(live.ctx.store, FORK, state)
    await live.comment("/sync answer M1 maybe", comment_id=502)
    assert "answer `/sync answer M1 content`" in live.replies()[-1]
    await live.comment("/sync answer M3 content", comment_id=503)
    assert "asks nothing as M3" in live.replies()[-1]
    await live.comment("/sync answer m1 content", comment_id=504)
    assert "Recorded **M1**: `docs/a.md` L3 is content" in live.replies()[-1]
    sync = live.sync()
    assert sync["content_lines"] == {"docs/a.md": ["<<<<<<< HEAD"]}
    # The same text on another line is content too: nothing is left for the check.
    assert sync["remaining"] == []
    check = live.gh.sent("POST", f"/repos/{FORK}/check-runs")[-1].data
    assert check["conclusion"] == "success"


# -- answer ---------------------------------------------------------------------------------


async def test_answer_to_an_unknown_question(live: Live) -> None:
    await live.comment("/sync answer Q9 ours")
    assert live.reactions() == ["eyes", "confused"]
    assert "There is no Q9 in this sync; its items are Q1–Q2." in live.replies()[0]
    assert "answers" not in live.sync() or not live.sync()["answers"]


async def test_answer_with_a_choice_the_item_does_not_offer(live: Live) -> None:
    def confirm(plan_json: dict[str, Any]) -> None:
        plan_json["files"][0]["review_items"][1]["tier"] = "Confirm"

    live.edit_plan(confirm)
    await live.comment("/sync answer Q2 maybe")
    reply = live.replies()[0]
    assert "`maybe` is not a choice for Q2; choose one of `ours`, `theirs`." in reply
    assert "Usage: `/sync answer Q2 <choice>`" in reply
    assert live.reactions() == ["eyes", "confused"]


async def test_a_free_text_decision_is_recorded_in_the_state_and_the_body(live: Live) -> None:
    await live.comment("/sync answer q1 keep both lines, fork first")
    assert live.sync()["answers"] == {"Q1": "keep both lines, fork first"}
    (patch,) = live.gh.sent("PATCH", f"/repos/{FORK}/pulls/{PR}")
    assert "**answered: keep both lines, fork first**" in patch.data["body"]
    assert patch.data["body"].endswith(PEOPLE_NOTES)  # people's text is kept
    assert "Recorded **Q1**: `keep both lines, fork first`" in live.replies()[0]
    assert live.head == live.commit  # a free-text answer changes no file
    # The conflict region itself still keeps the check failing.
    assert {r["id"] for r in live.sync()["remaining"] if r["marker"]} == {"Q1", "Q2"}
    assert live.gh.sent("POST", f"/repos/{FORK}/check-runs")


async def test_answering_a_side_takes_it_for_that_region_only(live: Live) -> None:
    await live.comment("/sync answer Q1 theirs")
    text = live.file(live.head)
    assert "line 5 upstream\n" in text and "line 5 fork" not in text
    assert [r.ours for r in parse_regions(text)] == ["line 20 fork\n"]  # Q2 still open
    assert live.sync()["answers"] == {"Q1": "theirs"}
    reply = live.replies()[0]
    assert "Resolved 1 conflict region in `vime/calc.py` with **theirs** (Q1)" in reply


async def test_a_range_answers_a_group_in_one_commit(live: Live) -> None:
    await live.comment("/sync answer Q1-Q2 theirs")
    head = live.head
    assert git_text(live.remote, "rev-parse", f"{head}^") == live.commit  # one commit
    text = live.file(head)
    assert parse_regions(text) == [] and "line 5 upstream\n" in text
    assert live.sync()["answers"] == {"Q1": "theirs", "Q2": "theirs"}
    reply = live.replies()[0]
    assert "Recorded 2 answers (Q1, Q2)" in reply
    assert "Resolved 2 conflict regions in 1 file with **theirs**" in reply


async def test_a_range_answers_regions_merged_with_longer_markers(
        tmp_path: Path, fake_store: Store, fake_gh: FakeGH) -> None:
    # A line of the file looks like a marker, so the merge wrote 8-character markers: the
    # range must find its regions at that size too, as one answer does.
    base = BASE.replace("line 12\n", "=======\n")
    fork, up = ({"line 5\n": f"line 5 {who}\n", "line 20\n": f"line 20 {who}\n"}
                for who in ("fork", "upstream"))
    texts = (base, "".join(fork.get(ln, ln) for ln in split_lines(base)),
             "".join(up.get(ln, ln) for ln in split_lines(base)))
    live = make_live(tmp_path, fake_store, fake_gh, texts)
    (calc,) = [f for f in live.plan_json["files"] if f["path"] == PATH]
    assert calc["marker_size"] == 8
    await live.comment("/sync answer Q1-Q2 theirs")
    text = live.file(live.head)
    assert parse_regions(text, 8) == [] and "line 20 upstream\n" in text
    assert "=======\n" in text  # the content line stays
    assert "Resolved 2 conflict regions in 1 file with **theirs**" in live.replies()[0]


async def test_a_range_with_an_unknown_item_changes_nothing(live: Live) -> None:
    await live.comment("/sync answer Q1-Q9 theirs")
    assert live.head == live.commit
    assert not live.sync().get("answers")
    assert "There is no Q3" in live.replies()[0]


def test_validate_answer() -> None:
    decide = {"id": "Q1", "tier": "Decide", "choices": ["ours", "theirs"]}
    assert validate_answer(decide, "Q1", "THEIRS") == "theirs"
    assert validate_answer(decide, "Q1", "both") == "both"
    settled = {"id": "Q2", "tier": "Settled", "kind": "policy", "reason": "policy: ours"}
    with pytest.raises(Exception, match="Q2 is settled"):
        validate_answer(settled, "Q2", "ours")
    # A Settled conflict region keeps its markers: a comment that cannot carry its
    # suggestion offers these answers, so they are taken.
    region = {"id": "Q3", "tier": "Settled", "kind": "conflict", "choices": []}
    assert validate_answer(region, "Q3", "Suggested") == "suggested"
    assert validate_answer(region, "Q3", "ours") == "ours"
    with pytest.raises(Exception, match="Q3 is settled"):
        validate_answer(region, "Q3", "both")
    # A port by hand: `theirs` would close it with the file unchanged (free text), so it
    # is refused; its own answers, and other free text, are taken.
    port = {"id": "Q4", "tier": "Decide", "kind": "manual", "path": "vime/r.py",
            "choices": ["done", "skip"]}
    with pytest.raises(Exception, match=re.escape("`theirs` would not change `vime/r.py`: Q4 "
                                                  "is a port by hand")):
        validate_answer(port, "Q4", "theirs")
    assert validate_answer(port, "Q4", "Done") == "done"
    assert validate_answer(port, "Q4", "ported in #7") == "ported in #7"


# -- resolve --------------------------------------------------------------------------------


async def test_resolve_takes_a_side_for_every_region_and_pushes_on_the_head(live: Live) -> None:
    await live.comment("/sync resolve vime/calc.py ours")
    head = live.head
    assert head != live.commit
    assert git_text(live.remote, "rev-parse", f"{head}^") == live.commit
    assert live.file(head) == FORK_TEXT
    assert git_text(live.remote, "log", "-1", "--format=%an", head) == BOT_NAME
    message = git_text(live.remote, "log", "-1", "--format=%B", head)
    assert f"{TRAILER}: 501:{PATH}:ours" in message and f"@{USER}" in message
    assert head in live.state()["pushed"]
    assert live.reactions() == ["eyes"]
    assert "Resolved 2 conflict regions in `vime/calc.py` with **ours** (Q1, Q2)" in \
        live.replies()[0]


async def test_resolve_builds_on_what_people_pushed(live: Live) -> None:
    resolved_q1 = live.file(live.commit).replace(parse_regions(live.file(live.commit))[0].text,
                                                 "line 5 both\n")
    person = live.person_commits({PATH: resolved_q1})
    await live.comment("/sync resolve vime/calc.py theirs")
    assert git_text(live.remote, "rev-parse", f"{live.head}^") == person
    text = live.file(live.head)
    assert "line 5 both\n" in text and "line 20 upstream\n" in text and not has_markers(text)
    assert "Resolved 1 conflict region" in live.replies()[0]


async def test_resolve_is_idempotent_when_the_job_runs_again(live: Live) -> None:
    await live.comment("/sync resolve vime/calc.py theirs")
    first = live.head
    state = live.state()
    state["commands_done"] = []  # as if the job died before it saved
    save_fork_state(live.ctx.store, FORK, state)
    await live.comment("/sync resolve vime/calc.py theirs")
    assert live.head == first
    assert f"Done already in {first[:12]}" in live.replies()[-1]


async def test_resolve_a_file_that_is_done_changes_nothing(live: Live) -> None:
    live.person_commits({PATH: FORK_TEXT})
    head = live.head
    await live.comment("/sync resolve vime/calc.py ours", comment_id=502)
    assert live.head == head
    assert "has no conflict markers left" in live.replies()[0]


async def test_resolve_on_a_region_that_lost_its_first_line_says_where_it_is(
        live: Live) -> None:
    text = live.file(live.commit)
    first, _ = parse_regions(text)
    lines = text.splitlines(keepends=True)
    del lines[first.start]  # someone deleted only the <<<<<<< line of the first region
    broken = "".join(lines)
    live.person_commits({PATH: broken})
    strays = [o.line for o in scan(broken, reference=text).orphans]
    assert len(strays) == 3
    where = f"({', '.join(f'L{n}' for n in strays)})"
    # The intact region is resolved; the reply says where the broken one is.
    await live.comment("/sync resolve vime/calc.py ours", comment_id=502)
    reply = live.replies()[-1]
    assert "Resolved 1 conflict region" in reply
    assert "also has conflict marker lines outside any complete region" in reply
    assert where in reply and "Fix it by hand" in reply
    # With nothing else left, the command fails and says so, rather than "nothing to do".
    head = live.head
    await live.comment("/sync resolve vime/calc.py theirs", comment_id=503)
    assert live.head == head
    reply = live.replies()[-1]
    assert "`vime/calc.py` has conflict marker lines outside any complete region" in reply
    assert where in reply and "nothing to change" not in reply


async def test_resolve_suggested_names_the_items_without_a_suggestion(live: Live) -> None:
    await live.comment("/sync resolve vime/calc.py suggested")
    assert "Q1 and Q2 in `vime/calc.py` have no suggestion" in live.replies()[0]
    assert live.reactions() == ["eyes", "confused"]
    assert live.head == live.commit


async def test_resolve_suggested_uses_each_items_suggestion(live: Live) -> None:
    def suggest(plan_json: dict[str, Any]) -> None:
        for n, item in enumerate(plan_json["files"][0]["review_items"]):
            item["suggestion"] = f"suggested {n}\n"

    live.edit_plan(suggest)
    await live.comment("/sync resolve vime/calc.py suggested")
    text = live.file(live.head)
    assert text == BASE.replace("line 5\n", "suggested 0\n").replace("line 20\n", "suggested 1\n")


async def test_resolve_a_whole_file_conflict_says_what_to_do(live: Live) -> None:
    def whole_file(plan_json: dict[str, Any]) -> None:
        plan_json["files"][0]["review_items"] = [{
            "id": "Q1", "kind": "file", "path": PATH, "upstream_path": "slime/calc.py",
            "tier": "Decide", "reason": "CONFLICT (modify/delete): slime/calc.py deleted",
            "question": "Keep ours?", "choices": ["ours", "theirs"], "start_line": None,
            "end_line": None, "ours": "", "base": "", "theirs": "", "suggestion": None,
            "prs": [11]}]

    live.edit_plan(whole_file)
    live.person_commits({PATH: FORK_TEXT})
    await live.comment("/sync resolve vime/calc.py theirs")
    reply = live.replies()[0]
    assert "has a whole-file conflict (CONFLICT (modify/delete)" in reply
    assert "`/sync answer Q1 ours` or `/sync answer Q1 theirs`" in reply


def _whole_file_item(sides: dict[str, Any]) -> Any:
    def change(plan_json: dict[str, Any]) -> None:
        plan_json["files"][0]["review_items"] = [{
            "id": "Q1", "kind": "file", "path": PATH, "upstream_path": "slime/calc.py",
            "tier": "Decide", "reason": "CONFLICT (binary): both sides changed it",
            "question": "Keep ours?", "choices": ["ours", "theirs"], "start_line": None,
            "end_line": None, "ours": "", "base": "", "theirs": "", "suggestion": None,
            "prs": [11], "sides": sides}]
    return change


async def test_resolve_a_whole_file_conflict_with_theirs_deletes_it(live: Live) -> None:
    live.edit_plan(_whole_file_item({"ours": {"mode": "100644", "oid": "0" * 40},
                                     "theirs": None}))
    live.person_commits({PATH: FORK_TEXT})  # no markers left: only the whole file can change
    await live.comment("/sync resolve vime/calc.py theirs")
    assert PATH not in git_text(live.remote, "ls-tree", "-r", "--name-only", live.head)
    assert "`vime/calc.py` is deleted in" in live.replies()[0]
    assert live.sync()["answers"] == {"Q1": "theirs"}


async def test_resolve_a_whole_file_conflict_with_a_side_only_upstream_has(live: Live) -> None:
    # A binary file's upstream version lives only in the upstream's cache, not the fork's.
    upstream_cache = remote.ensure_mirror(live.ctx.cache_dir, "THUDM/slime")
    blob = Git(upstream_cache).hash_blobs([b"\x89PNG\0upstream"])[0]
    assert Git(live.remote).run_proc("cat-file", "-e", blob).returncode != 0
    live.edit_plan(_whole_file_item({"ours": None, "theirs": {"mode": "100644", "oid": blob}}))
    live.person_commits({PATH: FORK_TEXT})
    await live.comment("/sync resolve vime/calc.py theirs")
    shown = subprocess.run(["git", f"--git-dir={live.remote}", "show", f"{live.head}:{PATH}"],
                           capture_output=True, check=True).stdout
    assert shown == b"\x89PNG\0upstream"
    assert live.sync()["answers"] == {"Q1": "theirs"}


async def test_answering_a_whole_file_question_takes_that_side(live: Live) -> None:
    ours = git_text(live.remote, "rev-parse", f"main:{PATH}")  # fork main's version
    live.edit_plan(_whole_file_item({"ours": {"mode": "100644", "oid": ours}, "theirs": None}))
    await live.comment("/sync answer Q1 ours")
    assert live.file(live.head) == FORK_TEXT
    assert "Recorded **Q1**: `ours`" in live.replies()[0]


async def test_resolve_a_path_that_is_not_conflicted(live: Live) -> None:
    await live.comment("/sync resolve vime/other.py ours")
    assert ("`vime/other.py` is not a conflicted file of this sync. Conflicted files: "
            "`vime/calc.py`.") in live.replies()[0]


async def test_resolve_never_overwrites_a_push_it_did_not_see(
        live: Live, monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.sync.commands import gitops

    real = gitops.commit_files
    raced: list[str] = []

    def commit_then_someone_pushes(*args: Any, **kw: Any) -> str:
        sha = real(*args, **kw)
        raced.append(live.person_commits({"vime/other.py": "x = 2\n"}, "A push in between"))
        return sha

    monkeypatch.setattr(gitops, "commit_files", commit_then_someone_pushes)
    await live.comment("/sync resolve vime/calc.py ours")
    assert live.head == raced[0]  # the person's push stands
    assert "Someone pushed to the sync branch while I was working" in live.replies()[0]


# -- extend / refresh -----------------------------------------------------------------------


def _update_upstream_remote(live: Live) -> None:
    git(live.upstream_remote, "fetch", "-q", str(live.scenario.upstream_dir),
        "+refs/heads/main:refs/heads/main")


def _update_fork_remote(live: Live) -> None:
    git(live.remote, "fetch", "-q", str(live.scenario.fork_dir), "+refs/heads/main:refs/heads/main")


async def test_extend_replays_resolutions_and_carries_other_edits(
        live: Live, no_check_runs: None) -> None:
    s = live.scenario
    commit1 = live.file(live.commit)
    q1, _q2 = parse_regions(commit1)
    # People resolve Q1 by hand and fix a line elsewhere in the file; Q2 stays open.
    person = live.person_commits({PATH: commit1.replace(q1.text, "line 5 fork+upstream\n")
                                  .replace("line 12\n", "line 12 fixed\n")})
    # Upstream moves on: #12 adds a file and touches the region of Q2 again.
    s.upstream_pr(12, "More calc", "carol", files={
        "slime/new.py": "y = 2\n",
        "slime/calc.py": UP_TEXT.replace("line 20 upstream\n", "line 20 upstream v2\n")})
    _update_upstream_remote(live)
    await live.comment("/sync extend #12")

    reply = live.replies()[0]
    assert live.reactions() == ["eyes"], reply
    assert "Extended the window to #12: now #11..#12 (was #11..#11)." in reply
    assert "Replayed **1** recorded resolution" in reply
    head = live.head
    sync = live.sync()
    commit1_new = sync["commit"]
    # A fast-forward: the person's commit stays in the history, as the second parent.
    assert git_text(live.remote, "rev-parse", f"{head}^1", f"{head}^2").split() == [
        commit1_new, person]
    assert "stay in the branch's history" in reply
    assert git_text(live.remote, "log", "-1", "--format=%s", head) == \
        "forksync: replay 1 resolutions"
    assert "Upstream-Sync: THUDM/slime@" + s.tip in \
        git_text(live.remote, "log", "-1", "--format=%B", commit1_new)
    text = live.file(head)
    assert "line 5 fork+upstream\n" in text  # Q1 replayed
    assert "line 12 fixed\n" in text  # the other edit carried over
    (region,) = parse_regions(text)  # Q2 changed upstream again: a fresh region to review
    assert region.theirs == "line 20 upstream v2\n"
    assert live.file(head, "vime/new.py") == "y = 2\n"
    assert sync["tip"] == s.tip and "pending" not in sync and sync["head"] == head
    assert sync["behind"] == 0 and sync["review_commit"] == commit1_new
    assert {head, commit1_new} <= set(live.state()["pushed"])
    (review,) = live.gh.sent("POST", f"/repos/{FORK}/pulls/{PR}/reviews")
    assert review.data["commit_id"] == commit1_new
    # One comment, for the region still open, on its lines in the new commit 1.
    (item,) = [i for f in json.loads(Path(sync["plan_file"]).read_text())["files"]
               for i in f["review_items"] if i["theirs"] == "line 20 upstream v2\n"]
    assert [(c["start_line"], c["line"]) for c in review.data["comments"]] == [
        (item["start_line"], item["end_line"])]
    patch = live.gh.sent("PATCH", f"/repos/{FORK}/pulls/{PR}")[0].data
    assert "#11..#12" in patch["title"] and patch["body"].endswith(PEOPLE_NOTES)
    check = live.gh.sent("POST", f"/repos/{FORK}/check-runs")[0].data
    assert check["head_sha"] == head and check["conclusion"] == "failure"


async def test_a_rejected_review_comment_moves_to_the_pr_body(
        live: Live, no_check_runs: None) -> None:
    from http import HTTPStatus

    from gidgethub import BadRequest

    from tests.conftest import Responses

    live.scenario.upstream_pr(12, "More calc", "carol", files={
        "slime/calc.py": UP_TEXT.replace("line 20 upstream\n", "line 20 upstream v2\n")})
    _update_upstream_remote(live)
    rejected = BadRequest(HTTPStatus.UNPROCESSABLE_ENTITY,  # type: ignore[arg-type]
                          "pull_request_review_thread.line must be part of the diff: "
                          "vime/calc.py")
    live.gh.on("POST", f"/repos/{FORK}/pulls/{PR}/reviews", Responses(rejected, {"id": 1}))
    await live.comment("/sync extend")
    first, second = live.gh.sent("POST", f"/repos/{FORK}/pulls/{PR}/reviews")
    assert len(first.data["comments"]) == 2 and "comments" not in second.data
    assert "**2 items with no thread**" in second.data["body"]
    assert "GitHub refused the comment on `vime/calc.py`" in second.data["body"]
    sync = live.sync()
    assert len(sync["unanchored"]) == 2
    body = live.gh.sent("PATCH", f"/repos/{FORK}/pulls/{PR}")[-1].data["body"]
    assert "Items with no thread on the diff" in body
    assert "review items have a review thread." in body and " 0 of " in body


async def test_extend_to_a_tip_already_in_the_window(live: Live) -> None:
    await live.comment("/sync extend #11")
    assert "#11 (`" in live.replies()[0] and "is already in this window" in live.replies()[0]
    assert live.reactions() == ["eyes", "confused"] and live.head == live.commit


async def test_refresh_onto_a_newer_fork_main_keeps_every_resolution(
        live: Live, no_check_runs: None) -> None:
    s = live.scenario
    commit1 = live.file(live.commit)
    q1, q2 = parse_regions(commit1)
    person = live.person_commits({PATH: commit1.replace(q1.text, "five\n")
                                  .replace(q2.text, "twenty\n")})
    s.fork_commit("Fork: unrelated work", files={"vime/other.py": "x = 1  # fork\n"})
    _update_fork_remote(live)
    await live.comment("/sync refresh")
    reply = live.replies()[0]
    assert "Refreshed the sync onto the newest fork main" in reply, reply
    assert "Replayed **2** recorded resolutions" in reply
    head = live.head
    sync = live.sync()
    assert git_text(live.remote, "rev-parse", f"{sync['commit']}^") == s.fork_head
    assert live.file(head) == BASE.replace("line 5\n", "five\n").replace("line 20\n", "twenty\n")
    assert git_text(live.remote, "rev-parse", f"{head}^2") == person
    assert live.file(head, "vime/other.py") == "x = 1  # fork\n"
    assert sync["ours"] == s.fork_head and sync["resolved"] == ["Q1", "Q2"]
    assert live.gh.sent("POST", f"/repos/{FORK}/check-runs")[0].data["conclusion"] == "success"


async def test_a_branch_with_only_the_bots_commits_is_replaced(
        live: Live, no_check_runs: None) -> None:
    await live.comment("/sync answer Q1 ours", comment_id=600)  # the bot resolves Q1
    bot_head = live.head
    live.scenario.upstream_pr(12, "Docs", "carol", files={"README.md": "slime docs\n"})
    _update_upstream_remote(live)
    await live.comment("/sync extend", comment_id=601)
    reply = live.replies()[-1]
    assert "Extended the window to the upstream head" in reply, reply
    head = live.head
    sync = live.sync()
    assert git_text(live.remote, "rev-list", "--parents", "-n", "1", head).split() == [
        head, sync["commit"]]  # linear: commit 1 and the replay, over the bot's own head
    assert bot_head not in git_text(live.remote, "rev-list", head).split()
    assert "line 5 fork\n" in live.file(head) and len(parse_regions(live.file(head))) == 1
    assert sync["answers"] == {"Q1": "ours"}  # the answer follows its item


async def test_a_retry_after_the_push_only_finishes_the_job(
        live: Live, no_check_runs: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.sync.commands import rebuild

    live.scenario.upstream_pr(12, "Docs", "carol", files={"README.md": "slime docs\n"})
    _update_upstream_remote(live)
    real = rebuild.finish_rebuild
    calls: list[int] = []

    async def crash_once(self: Any, pending: dict[str, Any]) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("worker killed")
        await real(self, pending)

    monkeypatch.setattr(rebuild, "finish_rebuild", crash_once)
    live.ctx.job = SimpleNamespace(attempts=1)  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError):
        await live.comment("/sync extend")
    pushed = live.head
    assert live.sync()["pending"]["head"] == pushed and live.replies() == []
    live.ctx.job = SimpleNamespace(attempts=2)  # type: ignore[attr-defined]
    live.gh.on("GET", f"/repos/{FORK}/issues/{PR}/comments", [])
    await live.comment("/sync extend")  # the queue runs the job again
    assert live.head == pushed  # no second merge, no second push
    sync = live.sync()
    assert "pending" not in sync and sync["head"] == pushed
    (reply,) = live.replies()
    assert "Extended the window to the upstream head" in reply


async def test_refresh_when_nothing_moved(live: Live) -> None:
    await live.comment("/sync refresh")
    assert "already based on the newest `main`" in live.replies()[0]
    assert live.head == live.commit


def test_answers_follow_their_items_to_the_new_plan() -> None:
    old = {"files": [{"review_items": [
        {"id": "Q1", "path": "a", "kind": "conflict", "ours": "o", "base": "b", "theirs": "t"},
        {"id": "Q2", "path": "b", "kind": "flag", "ours": "", "base": "", "theirs": "x"}]}]}
    new = {"files": [{"review_items": [
        {"id": "Q1", "path": "0", "kind": "conflict", "ours": "n", "base": "n", "theirs": "n"},
        {"id": "Q2", "path": "a", "kind": "conflict", "ours": "o", "base": "b", "theirs": "t"}]}]}
    assert migrate_answers(old, new, {"Q1": "ours", "Q2": "yes"}) == ({"Q2": "ours"}, ["Q2"])


# -- the issue_comment handler --------------------------------------------------------------


def _comment_event(**changes: Any) -> Any:
    return sample_event("issue_comment.created", **changes)


async def test_handler_queues_a_command_job_for_the_sync_pr(fake_ctx: FakeContext) -> None:
    event = _comment_event()
    fork = event.data["repository"]["full_name"]
    number = event.data["issue"]["number"]
    save_fork_state(fake_ctx.store, fork, {"sync": {"pr": number}})
    await commands_router.dispatch(event, fake_ctx)
    comment = event.data["comment"]
    assert fake_ctx.enqueued == [("command", fork, {
        "fork": fork, "installation_id": event.data["installation"]["id"], "pr": number,
        "comment_id": comment["id"], "author": comment["user"]["login"],
        "body": comment["body"]}, f"command:{fork}:issue_comment:{comment['id']}")]
    assert fake_ctx.gh.requests == []  # the state knew the PR: no request
    await commands_router.dispatch(event, fake_ctx)  # redelivered: still one job
    assert len(fake_ctx.enqueued) == 1


async def test_handler_asks_for_the_head_branch_when_the_state_does_not_know(
        fake_ctx: FakeContext) -> None:
    event = _comment_event()
    fork = event.data["repository"]["full_name"]
    number = event.data["issue"]["number"]
    fake_ctx.gh.on("GET", f"/repos/{fork}/pulls/{number}",
                   {"head": {"ref": "forksync/sync-0123456789", "repo": {"full_name": fork}}})
    await commands_router.dispatch(event, fake_ctx)
    assert len(fake_ctx.enqueued) == 1


@pytest.mark.parametrize("head", [
    {"ref": "feature", "repo": {"full_name": "vime-org/vime"}},
    {"ref": "forksync/sync-0123456789", "repo": {"full_name": "someone/vime"}},
])
async def test_handler_ignores_other_prs(fake_ctx: FakeContext, head: Any) -> None:
    event = _comment_event()
    fake_ctx.gh.on("GET", f"/repos/vime-org/vime/pulls/{event.data['issue']['number']}",
                   {"head": head})
    await commands_router.dispatch(event, fake_ctx)
    assert fake_ctx.enqueued == []


@pytest.mark.parametrize("changes", [
    {"sender.type": "Bot"},
    {"comment.user.type": "Bot"},
    {"comment.body": "no command here, just `/sync status` in prose"},
    {"comment.body": "```\n/sync refresh\n```"},
])
async def test_handler_ignores_bots_and_comments_without_commands(
        fake_ctx: FakeContext, changes: dict[str, Any]) -> None:
    event = _comment_event(**changes)
    save_fork_state(fake_ctx.store, "vime-org/vime",
                    {"sync": {"pr": event.data["issue"]["number"]}})
    await commands_router.dispatch(event, fake_ctx)
    assert fake_ctx.enqueued == [] and fake_ctx.gh.requests == []


async def test_handler_queues_replies_in_review_threads(fake_ctx: FakeContext) -> None:
    event = sample_event("pull_request_review_comment.created")
    fork = event.data["repository"]["full_name"]
    comment = event.data["comment"]
    await commands_router.dispatch(event, fake_ctx)
    assert fake_ctx.enqueued == [("command", fork, {
        "fork": fork, "installation_id": event.data["installation"]["id"],
        "pr": event.data["pull_request"]["number"], "comment_id": comment["id"],
        "author": comment["user"]["login"], "body": comment["body"],
        "source": "review_comment", "thread_id": comment["in_reply_to_id"]},
        f"command:{fork}:review_comment:{comment['id']}")]
    assert fake_ctx.gh.requests == []  # the event names the head branch: no request


@pytest.mark.parametrize("changes", [
    {"sender.type": "Bot"},
    {"pull_request.head.ref": "feature"},
    {"comment.body": "Looks right to me."},
])
async def test_handler_ignores_other_review_comments(fake_ctx: FakeContext,
                                                     changes: dict[str, Any]) -> None:
    await commands_router.dispatch(
        sample_event("pull_request_review_comment.created", **changes), fake_ctx)
    assert fake_ctx.enqueued == []


async def test_handler_ignores_plain_issues(fake_ctx: FakeContext) -> None:
    event = _comment_event()
    del event.data["issue"]["pull_request"]
    await commands_router.dispatch(event, fake_ctx)
    assert fake_ctx.enqueued == [] and fake_ctx.gh.requests == []


def test_a_whole_file_side_is_looked_for_only_in_this_forks_scratch_repositories(
        tmp_path: Path) -> None:
    """`/sync resolve` may bring a side from the engine's scratch repositories, never from
    one made for another fork, even when that one holds the very object."""
    from bot.engine.pipeline import work_repo
    from bot.sync.commands.resolve import _own_scratch

    def bare(name: str) -> Git:
        path = tmp_path / name
        git(tmp_path, "init", "--bare", "-q", str(path))
        return Git(path)

    upstream = bare("upstream.git")
    ours, theirs = bare("fork-a.git"), bare("fork-b.git")
    mine = work_repo(tmp_path / "data", ours, upstream)
    other = work_repo(tmp_path / "data", theirs, upstream)
    [oid] = other.hash_blobs([b"another fork's translated file\n"])
    assert other.run_proc("cat-file", "-e", oid).returncode == 0
    found = _own_scratch(tmp_path / "data" / "work", ours)
    assert found == [str(mine.git_dir)], found
    assert _own_scratch(tmp_path / "data" / "work", theirs) == [str(other.git_dir)]
    assert _own_scratch(tmp_path / "nowhere", ours) == []
