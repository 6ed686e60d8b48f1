"""End to end: the ``forksync`` check cannot be fooled (issue 11).

Each test drives the real ``forksync serve`` against the GitHub simulator (the ``world``
of ``tests/test_e2e.py``): a broken marker region pushed by a person or left by
``/sync extend``, whole-file items, workflow files without and with the App's
*Workflows* permission, and the check while the sync is behind upstream.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from bot.engine.markers import find_marker_regions, scan, split_lines
from tests import test_e2e
from tests.factory import PNG_1X1
from tests.sim import fixtures as sim_fixtures
from tests.test_commands_e2e import reactions, replies
from tests.test_e2e import FORK, UPSTREAM, A, B, World, edit, resolve_by_hand, table

github_sim = sim_fixtures.github_sim
world = test_e2e.world

WORKFLOW = ".github/workflows/ci.yml"


async def merge_upstream_pr(world: World, branch: str, files: dict[str, str | bytes | None],
                            title: str) -> int:
    """An upstream PR merged (squash); returns its number."""
    sim = world.sim
    await sim.commit(UPSTREAM, branch, files, title, user="alice")
    pr = await sim.open_pr(UPSTREAM, branch, title=title, user="alice")
    await sim.merge_pr(UPSTREAM, pr.number, method="squash", user="zhuzilin")
    return int(pr.number)


async def command(world: World, text: str, user: str = "vera") -> str:
    """A slash command in the sync PR; returns the bot's reply."""
    pr = world.sync_pr()
    asked = await world.sim.comment(FORK, pr.number, user, text)
    await world.idle()
    assert reactions(world, asked) == ["eyes"], world.bot.log_tail()
    body: str = replies(world, pr.number)[-1].body
    return body


def annotations(world: World, sha: str, path: str) -> list[dict[str, Any]]:
    return [a for a in world.check(sha).annotations if a["path"] == path]


# -- 1. a broken region fails the check, whoever left it ----------------------------------


async def test_a_region_without_its_opening_line_fails_the_check_at_its_lines(
        world: World) -> None:
    sim = world.sim
    pr = await world.open_sync()
    commit1 = pr.head_sha
    # vera resolves B properly, and "resolves" A by deleting only the <<<<<<< line.
    text_a = world.file_at(commit1, A)
    (region,) = find_marker_regions(text_a)
    lines = split_lines(text_a)
    del lines[region.start_line - 1]
    broken = "".join(lines)
    head = await sim.commit(FORK, pr.head_ref, {A: broken, B: resolve_by_hand(
        world.file_at(commit1, B))}, "Resolve", user="vera")
    await world.idle()

    run = world.check(head)
    assert run.conclusion == "failure", run.title
    # The base line, the divider and the closer are named, each at its line.
    left = sorted(a["start_line"] for a in annotations(world, head, A))
    orphan_lines = [o.line for o in scan(broken, reference=text_a).orphans]
    assert len(orphan_lines) == 3 and left == orphan_lines
    assert all(a["annotation_level"] == "failure" for a in annotations(world, head, A))
    assert f"`{A}`" in run.summary and f"L{orphan_lines[0]}" in run.summary
    assert "marker line" in run.title
    pr = world.sync_pr()
    assert f"- [ ] `{A}`" in pr.body  # the checklist does not tick a broken file
    assert "the `forksync` check passes" not in await command(world, "/sync status")
    world.assert_clean()


# -- 1. extend never leaves a broken region, and shows what the person had chosen ------------


async def test_extend_keeps_a_region_whole_and_offers_the_earlier_resolution(
        world: World) -> None:
    sim = world.sim
    pr = await world.open_sync()
    commit1 = pr.head_sha
    # vera keeps ours in A, resolves B by hand, and pushes.
    text_a = world.file_at(commit1, A)
    (region,) = find_marker_regions(text_a)
    kept = region.ours
    lines = split_lines(text_a)
    lines[region.start_line - 1:region.end_line] = [kept]
    await sim.commit(FORK, pr.head_ref, {A: "".join(lines), B: resolve_by_hand(
        world.file_at(commit1, B))}, "Resolve A and B", user="vera")
    await world.idle()
    assert world.check(world.sync_pr().head_sha).conclusion == "success"

    # Upstream changes that line again; vera extends the window.
    again = await merge_upstream_pr(world, "again", {"slime/table_a.py": edit(table("alpha"), {
        5: "alpha_5 = 7000  # upstream again", 25: "alpha_25 = 25000  # upstream"})},
        "Tune alpha again")
    await world.idle()
    reply = await command(world, "/sync extend")
    pr = world.sync_pr()
    head = pr.head_sha
    text = world.file_at(head, A)

    # The new region is whole: one complete region, no orphan marker line.
    found = scan(text)
    assert len(found.regions) == 1 and found.orphans == [], text
    (new,) = found.regions
    assert new.ours == kept and "alpha_5 = 7000  # upstream again" in new.theirs
    run = world.check(head)
    assert run.conclusion == "failure"
    assert [(a["start_line"], a["end_line"]) for a in annotations(world, head, A)] == [
        (new.start_line, new.end_line)]
    # The reply names A once, and says why its resolution was not replayed.
    assert reply.count(f"`{A}`") == 1, reply
    assert f"`{A}`: 1 resolved region changed again in the new merge" in reply
    # The new review comment on A shows vera's earlier resolution and offers it again.
    (comment,) = [c for c in sim.review_comments(FORK, pr.number)
                  if c.path == A and "resolved this" in c.body]
    assert f"upstream changed it again in #{again}" in comment.body, comment.body
    suggestion = re.search(r"(`{3,})suggestion\n(.*?)\1", comment.body, re.S)
    assert suggestion and suggestion.group(2) == kept
    world.assert_clean()


async def test_extend_with_nothing_left_to_review_posts_no_review(world: World) -> None:
    sim = world.sim
    pr = await world.open_sync()
    await sim.commit(FORK, pr.head_ref, {
        A: resolve_by_hand(world.file_at(pr.head_sha, A)),
        B: resolve_by_hand(world.file_at(pr.head_sha, B))}, "Resolve", user="vera")
    await world.idle()
    await merge_upstream_pr(world, "later", {"slime/later.py": "later = 1\n"}, "Add later")
    await world.idle()
    reply = await command(world, "/sync extend")
    assert "Replayed **3** recorded resolutions" in reply, reply
    pr = world.sync_pr()
    assert len(sim.reviews(FORK, pr.number)) == 1  # the first one; an empty one is not posted
    assert world.check(pr.head_sha).conclusion == "success"
    world.assert_clean()


# -- 2. whole-file items tick only on one of their answers -------------------------------


async def test_whole_file_items_tick_only_when_the_file_is_one_of_their_answers(
        world: World) -> None:
    sim = world.sim
    sim.add_collaborator(FORK, "vera", "write")
    # The fork deletes the rollout actor and redraws the diagram; upstream changes both.
    await sim.commit(FORK, "main", {"vime/ray/rollout.py": None, "imgs/arch.png":
                                    PNG_1X1 + b"fork"}, "Fork: drop the actor", user="vera")
    await merge_upstream_pr(world, "tune", {
        "slime/table_a.py": table("alpha"), "slime/ray/rollout.py": "rollout = 2\n",
        "imgs/arch.png": PNG_1X1 + b"upstream"}, "Rework the actor")
    await world.idle()
    pr = world.sync_pr()
    commit1 = pr.head_sha
    items = {m.group(2): m.group(1) for m in re.finditer(
        r"- \*\*(Q\d+)\*\* `([^`]+)`", pr.body)}
    deleted_q, binary_q = items["vime/ray/rollout.py"], items["imgs/arch.png"]
    # Each choice says what it means.
    assert "`ours`: the fork deleted this file" in pr.body, pr.body
    assert "`theirs`: upstream's version" in pr.body

    # An edit that is neither answer ticks nothing.
    head = await sim.commit(FORK, pr.head_ref, {
        "vime/ray/rollout.py": "rollout = 3  # mine\n", "imgs/arch.png": PNG_1X1 + b"mine"},
        "Edit", user="vera")
    await world.idle()
    pr = world.sync_pr()
    assert "- [ ] `vime/ray/rollout.py`" in pr.body and "- [ ] `imgs/arch.png`" in pr.body
    run = world.check(head)
    assert run.conclusion == "failure" and deleted_q in run.summary and binary_q in run.summary

    # Deleting the file is an answer (ours); the new image is confirmed explicitly.
    await sim.commit(FORK, pr.head_ref, {"vime/ray/rollout.py": None}, "Drop it", user="vera")
    await world.idle()
    pr = world.sync_pr()
    assert "- [x] `vime/ray/rollout.py`" in pr.body and "- [ ] `imgs/arch.png`" in pr.body
    reply = await command(world, f"/sync answer {binary_q} confirm")
    assert "imgs/arch.png" in reply
    pr = world.sync_pr()
    assert "- [x] `imgs/arch.png`" in pr.body
    assert binary_q not in world.check(pr.head_sha).summary
    # Changing the confirmed image again re-opens the item.
    head = await sim.commit(FORK, pr.head_ref, {"imgs/arch.png": PNG_1X1 + b"again"},
                            "Again", user="vera")
    await world.idle()
    assert "- [ ] `imgs/arch.png`" in world.sync_pr().body
    assert commit1 != head
    world.assert_clean()


# -- 3. workflow files, without and with the Workflows permission -------------------------


UPSTREAM_CI = "name: CI\non: [push, pull_request]\njobs:\n  test:\n    runs-on: ubuntu-24.04\n"


async def merge_workflow_change(world: World) -> int:
    ci = world.file_at(world.sim.ref(FORK, "main") or "", WORKFLOW)
    assert "runs-on: ubuntu-latest" in ci
    return await merge_upstream_pr(world, "ci", {
        "slime/table_a.py": UPSTREAM_CHANGE_A,
        ".github/workflows/ci.yml": ci.replace("ubuntu-latest", "ubuntu-24.04")},
        "CI on 24.04")


UPSTREAM_CHANGE_A = edit(table("alpha"), {5: "alpha_5 = 5000  # upstream"})


async def test_without_the_workflows_permission_workflow_changes_are_listed_to_port(
        world: World) -> None:
    sim = world.sim
    sim.add_collaborator(FORK, "vera", "write")
    number = await merge_workflow_change(world)
    await world.idle()
    pr = world.sync_pr()  # the push went through
    head = pr.head_sha
    fork_ci = world.file_at(sim.ref(FORK, "main") or "", WORKFLOW)
    assert world.file_at(head, WORKFLOW) == fork_ci  # left as the fork has it
    # The PR body and the check list the upstream change with its diff, to port by hand.
    for text in (pr.body, world.check(head).summary):
        assert WORKFLOW in text and "Workflows" in text
        assert "-    runs-on: ubuntu-latest\n+    runs-on: ubuntu-24.04" in text, text
        assert f"#{number}" in text
    assert world.check(head).conclusion == "failure"
    assert not [r for r in sim.requests if r.kind == "git" and r.status >= 400]
    # vera ports it by hand and says so: the item closes.
    (q,) = set(re.findall(rf"\*\*(Q\d+)\*\* `{re.escape(WORKFLOW)}`", pr.body))
    await sim.commit(FORK, pr.head_ref, {WORKFLOW: fork_ci.replace("ubuntu-latest",
                                                                   "ubuntu-24.04")},
                     "Port the CI change", user="vera")
    await world.idle()
    await command(world, f"/sync answer {q} done")
    assert q not in world.check(world.sync_pr().head_sha).summary
    world.assert_clean()


@pytest.mark.parametrize("world", [{"workflows": "write"}], indirect=True)
async def test_with_the_workflows_permission_workflow_files_merge_like_others(
        world: World) -> None:
    number = await merge_workflow_change(world)
    await world.idle()
    pr = world.sync_pr()
    assert "runs-on: ubuntu-24.04" in world.file_at(pr.head_sha, WORKFLOW)
    assert "Workflows" not in pr.body and f"#{number}" in pr.body
    world.assert_clean()


# -- 4. behind upstream, and one wording for conflicted files ---------------------------


async def test_the_check_title_says_how_far_behind_upstream_the_sync_is(world: World) -> None:
    sim = world.sim
    await world.merge_upstream()
    await world.idle()
    pr = world.sync_pr()
    assert pr.title.endswith("[2 conflicted files need review]"), pr.title
    head = await sim.commit(FORK, pr.head_ref, {
        A: resolve_by_hand(world.file_at(pr.head_sha, A)),
        B: resolve_by_hand(world.file_at(pr.head_sha, B))}, "Resolve", user="vera")
    await world.idle()
    assert world.check(head).title == "All conflicts resolved"
    await merge_upstream_pr(world, "later", {"slime/later.py": "later = 1\n"}, "Add later")
    await world.idle()
    run = world.check(head)
    assert run.conclusion == "success"  # behind is not a failure ...
    assert "behind upstream by 1 PR" in run.title, run.title  # ... but the title says it
    world.assert_clean()
