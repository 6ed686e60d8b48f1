"""Webhook handlers, bedevere style: a recorded sample through the combined router."""

from __future__ import annotations

import base64

import pytest
from gidgethub import BadRequest

import handlers
from bot.sync.jobs import JOBS, POLL, RESCAN, SYNC
from bot.sync.onboard import ONBOARD
from bot.sync.state import fork_state_key, load_fork_state, save_fork_state
from tests.conftest import FakeContext, load_sample, sample_event

FORK = "vime-org/vime"
UPSTREAM = "THUDM/slime"
CONFIG = "upstream: {repo: THUDM/slime, branch: main}\ntranslate: {replace: []}\n"


def register(ctx: FakeContext, fork: str = FORK, **extra: object) -> None:
    save_fork_state(ctx.store, fork, {"installation_id": 77, "upstream": UPSTREAM,
                                      "upstream_branch": "main", **extra})


def kinds(ctx: FakeContext) -> list[tuple[str, str]]:
    return [(kind, key) for kind, key, _payload, _dedup in ctx.enqueued]


async def test_upstream_push_queues_a_sync_for_each_following_fork(fake_ctx: FakeContext) -> None:
    register(fake_ctx)
    register(fake_ctx, "other/fork")
    register(fake_ctx, "third/fork", upstream="someone/else")
    event = sample_event("push.upstream_main")
    await handlers.router.dispatch(event, fake_ctx)
    assert sorted(kinds(fake_ctx)) == [(SYNC, "other/fork"), (SYNC, FORK)]
    payload = next(p for _k, key, p, _d in fake_ctx.enqueued if key == FORK)
    assert payload == {"fork": FORK, "installation_id": 77}
    assert fake_ctx.gh.requests == []  # handlers only queue: no API call


async def test_a_push_to_the_mirror_the_config_names_queues_the_sync(
        fake_ctx: FakeContext) -> None:
    register(fake_ctx, upstream_mirror="vime-org/slime-mirror")
    register(fake_ctx, "other/fork", upstream="someone/else")
    mirror = sample_event("push.upstream_main",
                          **{"repository.full_name": "vime-org/slime-mirror"})
    await handlers.router.dispatch(mirror, fake_ctx)
    assert kinds(fake_ctx) == [(SYNC, FORK)]
    unrelated = sample_event("push.upstream_main", **{"repository.full_name": "vime-org/docs"})
    await handlers.router.dispatch(unrelated, fake_ctx)
    assert len(fake_ctx.enqueued) == 1


@pytest.mark.parametrize("pusher", ["attacker/slime", "vime-org/slime", "attacker/slime-mirror",
                                    "THUDM/slime-mirror"])
async def test_a_repository_named_like_the_upstream_or_its_mirror_queues_nothing(
        fake_ctx: FakeContext, pusher: str) -> None:
    # Mirrors were matched by repository name: a push to attacker/slime synced vime-org/vime.
    register(fake_ctx)
    register(fake_ctx, "victim/vime", upstream_mirror="victim/slime-mirror")
    for event in (sample_event("push.upstream_main", **{"repository.full_name": pusher}),
                  sample_event("pull_request.closed.upstream_merged",
                               **{"repository.full_name": pusher})):
        await handlers.router.dispatch(event, fake_ctx)
    assert fake_ctx.enqueued == []


async def test_push_to_another_branch_or_a_deleted_branch_queues_nothing(
        fake_ctx: FakeContext) -> None:
    register(fake_ctx)
    await handlers.router.dispatch(sample_event("push.upstream_main", ref="refs/heads/dev"),
                                   fake_ctx)
    await handlers.router.dispatch(sample_event("push.upstream_main", deleted=True), fake_ctx)
    await handlers.router.dispatch(sample_event("push.upstream_main", ref="refs/tags/v1"),
                                   fake_ctx)
    assert fake_ctx.enqueued == []


async def test_merge_push_and_pr_closed_for_one_merge_queue_one_sync(
        fake_ctx: FakeContext) -> None:
    register(fake_ctx)
    closed = sample_event("pull_request.closed.upstream_merged")
    push = sample_event("push.upstream_main", after=closed.data["pull_request"]["merge_commit_sha"])
    await handlers.router.dispatch(closed, fake_ctx)
    await handlers.router.dispatch(push, fake_ctx)
    await handlers.router.dispatch(closed, fake_ctx)  # redelivered by hand
    assert kinds(fake_ctx) == [(SYNC, FORK)]


async def test_upstream_pr_closed_without_merge_queues_nothing(fake_ctx: FakeContext) -> None:
    register(fake_ctx)
    event = sample_event("pull_request.closed.upstream_merged", **{"pull_request.merged": False})
    await handlers.router.dispatch(event, fake_ctx)
    assert fake_ctx.enqueued == []


def config_content(text: str = CONFIG) -> dict[str, object]:
    return {"type": "file", "encoding": "base64", "path": ".github/forksync.yml",
            "content": base64.b64encode(text.encode()).decode()}


@pytest.mark.parametrize("sample", ["installation.created", "installation_repositories.added"])
async def test_installation_registers_forks_with_a_config_and_queues_their_first_sync(
        fake_ctx: FakeContext, sample: str) -> None:
    fake_ctx.gh.on("GET", f"/repos/{FORK}/contents/.github/forksync.yml", config_content())
    event = sample_event(sample)
    await handlers.router.dispatch(event, fake_ctx)
    assert kinds(fake_ctx) == [(SYNC, FORK)]
    state = load_fork_state(fake_ctx.store, FORK)
    assert state["installation_id"] == event.data["installation"]["id"]
    assert (state["upstream"], state["upstream_branch"]) == (UPSTREAM, "main")
    assert fake_ctx.gh.writes == []


async def test_installation_records_the_mirror_the_config_names(fake_ctx: FakeContext) -> None:
    fake_ctx.gh.on("GET", f"/repos/{FORK}/contents/.github/forksync.yml", config_content(
        "upstream: {repo: THUDM/slime, mirror: vime-org/slime-mirror}\n"))
    await handlers.router.dispatch(sample_event("installation.created"), fake_ctx)
    assert load_fork_state(fake_ctx.store, FORK)["upstream_mirror"] == "vime-org/slime-mirror"
    await handlers.router.dispatch(sample_event(
        "push.upstream_main", **{"repository.full_name": "vime-org/slime-mirror"}), fake_ctx)
    # The first sync, then the one the mirror's push started.
    assert kinds(fake_ctx) == [(SYNC, FORK), (SYNC, FORK)]


async def test_an_upstreams_own_file_does_not_make_it_a_fork(fake_ctx: FakeContext) -> None:
    fake_ctx.gh.on("GET", f"/repos/{FORK}/contents/.github/forksync.yml",
                   config_content("downstream: [other/fork]\n"))
    await handlers.router.dispatch(sample_event("installation.created"), fake_ctx)
    # Not registered; the onboarding job finds the file there and stops (tests/test_onboard).
    assert kinds(fake_ctx) == [(ONBOARD, FORK)]
    assert fake_ctx.store.get_state(fork_state_key(FORK)) is None


async def test_installation_on_a_repo_without_config_queues_its_onboarding_only(
        fake_ctx: FakeContext) -> None:
    await handlers.router.dispatch(sample_event("installation.created"), fake_ctx)  # GET → 404
    assert kinds(fake_ctx) == [(ONBOARD, FORK)]  # the job decides: a fork gets one PR
    assert fake_ctx.enqueued[0][3] == f"onboard:{FORK}"  # once per repository
    assert fake_ctx.store.get_state(fork_state_key(FORK)) is None
    assert fake_ctx.gh.writes == []


def onboarding_commits(*messages: str) -> list[dict[str, object]]:
    return [{"sha": f"{i:040x}", "commit": {"message": m}} for i, m in enumerate(messages)]


@pytest.mark.parametrize("merged", [True, False])
async def test_a_merged_onboarding_pr_registers_the_fork_with_its_cutoff(
        fake_ctx: FakeContext, merged: bool) -> None:
    fake_ctx.gh.on("GET", f"/repos/{FORK}/contents/.github/forksync.yml", config_content())
    fake_ctx.gh.on("GET", f"/repos/{FORK}/pulls/1/commits", onboarding_commits(
        f"Configure forksync\n\nUpstream-Sync: {UPSTREAM}@{'ab' * 20}\n",
        "Our translation rules\n"))  # people pushed on top: the trailer is still found
    event = sample_event("pull_request.closed.onboarding_merged",
                         **{"pull_request.merged": merged})
    await handlers.router.dispatch(event, fake_ctx)
    if not merged:  # closed unmerged: declined, nothing happens
        assert fake_ctx.enqueued == [] and fake_ctx.gh.requests == []
        return
    assert kinds(fake_ctx) == [(SYNC, FORK)]
    state = load_fork_state(fake_ctx.store, FORK)
    assert state["last_synced_tip"] == "ab" * 20 and state["upstream"] == UPSTREAM


async def test_installation_with_a_broken_config_still_queues_the_sync_that_reports_it(
        fake_ctx: FakeContext) -> None:
    fake_ctx.gh.on("GET", f"/repos/{FORK}/contents/.github/forksync.yml",
                   config_content("upstream: [not, a, mapping\n"))
    await handlers.router.dispatch(sample_event("installation.created"), fake_ctx)
    assert kinds(fake_ctx) == [(SYNC, FORK)]
    assert "upstream" not in load_fork_state(fake_ctx.store, FORK)


async def test_installation_check_that_fails_otherwise_raises_for_a_retry(
        fake_ctx: FakeContext) -> None:
    fake_ctx.gh.on("GET", f"/repos/{FORK}/contents/.github/forksync.yml",
                   BadRequest(403, "Resource not accessible by integration"))  # type: ignore[arg-type]
    with pytest.raises(BadRequest):
        await handlers.router.dispatch(sample_event("installation.created"), fake_ctx)


async def test_uninstall_forgets_the_fork(fake_ctx: FakeContext) -> None:
    installation_id = load_sample("installation.deleted")["installation"]["id"]
    save_fork_state(fake_ctx.store, FORK, {"installation_id": installation_id})
    register(fake_ctx, "other/fork")  # another installation's fork stays
    await handlers.router.dispatch(sample_event("installation.deleted"), fake_ctx)
    assert fake_ctx.store.get_state(fork_state_key("other/fork")) is not None
    assert fake_ctx.store.get_state(fork_state_key(FORK)) is None


async def test_push_to_the_sync_branch_queues_one_rescan_per_head(fake_ctx: FakeContext) -> None:
    event = sample_event("pull_request.synchronize.sync_branch")
    await handlers.router.dispatch(event, fake_ctx)
    await handlers.router.dispatch(event, fake_ctx)
    pull = event.data["pull_request"]
    assert kinds(fake_ctx) == [(RESCAN, FORK)]
    assert fake_ctx.enqueued[0][2] == {"fork": FORK, "installation_id": 1,
                                       "pr": pull["number"], "head_sha": pull["head"]["sha"]}


async def test_push_to_another_branch_or_from_a_fork_repo_is_not_a_sync_pr(
        fake_ctx: FakeContext) -> None:
    await handlers.router.dispatch(sample_event("pull_request.synchronize.sync_branch", **{
        "pull_request.head.ref": "feature"}), fake_ctx)
    await handlers.router.dispatch(sample_event("pull_request.synchronize.sync_branch", **{
        "pull_request.head.repo.full_name": "mallory/vime"}), fake_ctx)
    assert fake_ctx.enqueued == []


async def test_rerequested_check_rescans_again_every_time(fake_ctx: FakeContext) -> None:
    await handlers.router.dispatch(sample_event("check_run.rerequested"), fake_ctx)
    event = sample_event("check_run.rerequested")
    event.delivery_id = "another-click"
    await handlers.router.dispatch(event, fake_ctx)
    run = event.data["check_run"]
    assert kinds(fake_ctx) == [(RESCAN, FORK), (RESCAN, FORK)]
    assert fake_ctx.enqueued[0][2]["pr"] == run["pull_requests"][0]["number"]
    assert fake_ctx.enqueued[0][2]["head_sha"] == run["head_sha"]


async def test_rerequest_without_pr_list_uses_the_fork_state(fake_ctx: FakeContext) -> None:
    register(fake_ctx, sync={"pr": 12})
    await handlers.router.dispatch(sample_event("check_run.rerequested", **{
        "check_run.pull_requests": []}), fake_ctx)
    assert fake_ctx.enqueued[0][2]["pr"] == 12


async def test_rerequest_of_another_check_is_ignored(fake_ctx: FakeContext) -> None:
    await handlers.router.dispatch(sample_event("check_run.rerequested", **{
        "check_run.name": "CI"}), fake_ctx)
    assert fake_ctx.enqueued == []


async def test_merged_sync_pr_starts_the_next_sync_when_upstream_moved_on(
        fake_ctx: FakeContext) -> None:
    event = sample_event("pull_request.closed.sync_pr_merged")
    number = event.data["pull_request"]["number"]
    register(fake_ctx, sync={"pr": number, "behind": 0})
    await handlers.router.dispatch(event, fake_ctx)
    assert fake_ctx.enqueued == []
    register(fake_ctx, sync={"pr": number, "behind": 3})
    await handlers.router.dispatch(event, fake_ctx)
    assert kinds(fake_ctx) == [(SYNC, FORK)]


def test_job_registry_has_the_publisher_the_follow_up_the_schedule_and_the_commands() -> None:
    from bot.sync.commands.jobs import JOBS as COMMAND_JOBS

    assert {SYNC, RESCAN, POLL, ONBOARD} | set(COMMAND_JOBS) == set(JOBS)
    assert all(callable(fn) for fn in JOBS.values())


async def test_a_sync_pr_that_cannot_be_learned_from_still_starts_the_next_sync(
        fake_ctx: FakeContext, caplog: pytest.LogCaptureFixture) -> None:
    # The plan file of the merged PR is gone (a new machine, say): learning fails, says
    # why once, and the next sync is queued all the same.
    event = sample_event("pull_request.closed.sync_pr_merged")
    number = event.data["pull_request"]["number"]
    register(fake_ctx, sync={"pr": number, "behind": 2, "commit": "c" * 40,
                             "plan_file": str(fake_ctx.settings.data_dir / "gone.json")})
    with caplog.at_level("WARNING", logger="bot.sync.learning"):
        await handlers.router.dispatch(event, fake_ctx)
    assert kinds(fake_ctx) == [(SYNC, FORK)]
    (record,) = [r for r in caplog.records if r.name == "bot.sync.learning"]
    assert f"#{number}: could not learn from the merged sync PR" in record.getMessage()
    assert not record.exc_info  # a known cause: one line, no traceback
