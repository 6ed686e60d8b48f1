"""End to end: slash commands typed into the sync PR on the GitHub simulator.

The ``forksync serve`` process, the simulator and the repositories are those of
``tests/test_e2e.py`` (its ``world`` fixture); every request the bot makes is checked
against GitHub's OpenAPI description there.
"""

from __future__ import annotations

import re
import subprocess
from typing import Any

import pytest

from bot.engine.rerere import has_markers, parse_regions
from tests import test_e2e
from tests.sim import fixtures as sim_fixtures
from tests.test_e2e import (
    FORK,
    LOCK_CHANGE,
    TWIN_CHANGE,
    UPSTREAM,
    A,
    B,
    D,
    E,
    M,
    N,
    World,
    edit,
    markers,
    table,
)

# The fixtures of tests/test_e2e.py, used here as they are.
github_sim = sim_fixtures.github_sim
world = test_e2e.world

BOT_REPLY = "<!-- forksync:reply "


def replies(world: World, number: int) -> list[Any]:
    return [c for c in world.sim.issue_comments(FORK, number) if BOT_REPLY in c.body]


def reactions(world: World, comment: Any) -> list[str]:
    (found,) = [c for c in world.sim.issue_comments(FORK, comment.number) if c.id == comment.id]
    return [r.content for r in found.reactions]


async def test_commands_from_a_refusal_to_a_green_check(world: World) -> None:
    sim = world.sim
    pr = await world.open_sync()
    commit1 = pr.head_sha

    # Someone without write access is refused, politely, and nothing else happens.
    before = world.snapshot()
    asked = await sim.comment(FORK, pr.number, "mallory", "/sync resolve vime/table_b.py ours")
    await world.idle()
    assert reactions(world, asked) == ["-1"]
    (refusal,) = replies(world, pr.number)
    assert "Only people with write access" in refusal.body
    assert world.sync_pr().head_sha == commit1
    after = world.snapshot()
    assert after["writes"] - before["writes"] == 2  # the reaction and the reply
    # Asking again within the hour costs only the reaction.
    again = await sim.comment(FORK, pr.number, "mallory", "/sync refresh")
    await world.idle()
    assert reactions(world, again) == ["-1"] and len(replies(world, pr.number)) == 1
    assert world.snapshot()["writes"] - after["writes"] == 1

    # vera resolves B with upstream's side: a bot commit on the branch, then a rescan.
    asked = await sim.comment(FORK, pr.number, "vera", "/sync resolve vime/table_b.py theirs")
    await world.idle()
    assert reactions(world, asked) == ["eyes"]
    pr = world.sync_pr()
    assert pr.head_sha != commit1
    text_b = world.file_at(pr.head_sha, B)
    assert not has_markers(text_b) and "beta_10 = 1000  # upstream" in text_b
    assert f"- [x] `{B}`" in pr.body and f"- [ ] `{A}`" in pr.body
    assert "Resolved 2 conflict regions" in replies(world, pr.number)[-1].body

    # status, and a wrong command next to it: one reply, both reactions.
    asked = await sim.comment(FORK, pr.number, "vera", "/sync status\n/sync answer Q9 ours")
    await world.idle()
    assert reactions(world, asked) == ["eyes", "confused"]
    reply = replies(world, pr.number)[-1].body
    assert "**1 remaining**, 2 resolved (of 3)" in reply and "There is no Q9" in reply

    # Answering the last question with a side takes it: the check passes.
    (q_a,) = [line.split("**")[1] for line in pr.body.splitlines()
              if line.startswith("- **Q") and f"`{A}`" in line]
    asked = await sim.comment(FORK, pr.number, "vera", f"/sync answer {q_a} ours")
    await world.idle()
    pr = world.sync_pr()
    assert not has_markers(world.file_at(pr.head_sha, A))
    assert world.check(pr.head_sha).conclusion == "success"
    assert "answered: ours" in pr.body
    world.assert_clean()


async def test_extend_replays_what_people_resolved(world: World) -> None:
    sim = world.sim
    pr = await world.open_sync()
    commit1 = pr.head_sha

    # vera resolves the region in A by hand.
    text_a = world.file_at(commit1, A)
    (region,) = parse_regions(text_a)
    mine = text_a.replace(region.text, "alpha_5 = 55  # agreed\n")
    pushed = await sim.commit(FORK, pr.head_ref, {A: mine}, "Resolve A", user="vera")
    await world.idle()

    # Upstream merges another PR: the sync PR says it is behind.
    await sim.commit(UPSTREAM, "more", {"slime/more.py": "more = 1\n",
                                        "slime/table_b.py": edit(table("beta"), {
                                            10: "beta_10 = 1000  # upstream",
                                            30: "beta_30 = 3000  # upstream",
                                            35: "beta_35 = 35  # upstream"})},
                     "More", user="alice")
    up = await sim.open_pr(UPSTREAM, "more", title="More", user="alice")
    await sim.merge_pr(UPSTREAM, up.number, method="squash", user="zhuzilin")
    await world.idle()
    assert "Behind upstream by 1 PR" in world.sync_pr().body

    asked = await sim.comment(FORK, pr.number, "vera", "/sync extend")
    await world.idle()
    assert reactions(world, asked) == ["eyes"], world.bot.log_tail()
    reply = replies(world, pr.number)[-1].body
    assert "Replayed **1** recorded resolution" in reply, reply
    pr = world.sync_pr()
    head = pr.head_sha
    assert "alpha_5 = 55  # agreed\n" in world.file_at(head, A)
    assert world.file_at(head, "vime/more.py") == "more = 1\n"
    parents = subprocess.run(["git", f"--git-dir={sim.git_dir(FORK)}", "rev-list", "--parents",
                              "-n", "1", head], capture_output=True, text=True,
                             check=True).stdout.split()
    assert parents[2] == pushed  # vera's commit stays in the history: a fast-forward
    assert "Behind upstream" not in pr.body
    assert len(sim.reviews(FORK, pr.number)) == 2  # one per commit 1
    assert world.check(head).conclusion == "failure"  # B's regions are still open
    world.assert_clean()


@pytest.mark.parametrize("world", [{"twin_tables": True}], indirect=True)
async def test_answer_twin_gives_open_twins_the_text_one_was_resolved_to_by_hand(
        world: World) -> None:
    sim = world.sim
    pr = await world.open_sync(extra=TWIN_CHANGE)
    ids = {c.path: re.match(r"\*\*(Q\d+) ", c.body).group(1)  # type: ignore[union-attr]
           for c in sim.review_comments(FORK, pr.number)}
    d_id, e_id, a_id = ids[D], ids[E], ids[A]

    # Before any twin is resolved there is no text to give; a hunk with no twin has none.
    asked = await sim.comment(FORK, pr.number, "vera", f"/sync answer {e_id} twin")
    await world.idle()
    assert reactions(world, asked) == ["eyes", "confused"]  # taken up, then it failed
    assert f"{e_id}: no twin of it is resolved" in replies(world, pr.number)[-1].body
    asked = await sim.comment(FORK, pr.number, "vera", f"/sync answer {a_id} twin")
    await world.idle()
    assert f"{a_id} has no twins" in replies(world, pr.number)[-1].body
    assert world.sync_pr().head_sha == pr.head_sha  # nothing written

    # vera resolves D by hand with a line of her own (no side is it), and pushes.
    mine = "delta_7 = 77  # both, agreed\n"
    d_text = world.file_at(pr.head_sha, D)
    (region,) = parse_regions(d_text)
    head = await sim.commit(FORK, pr.head_ref, {D: d_text.replace(region.text, mine)},
                            "Resolve delta_7", user="vera")
    await world.idle()

    # One command gives E that text: a bot commit, recorded as answered, D left alone.
    asked = await sim.comment(FORK, pr.number, "vera", f"/sync answer {d_id},{e_id} twin")
    await world.idle()
    assert reactions(world, asked) == ["eyes"]
    reply = replies(world, pr.number)[-1].body
    assert f"Recorded 1 answer ({e_id}): `twin`" in reply and f"{d_id} was resolved" in reply
    pr = world.sync_pr()
    assert pr.head_sha != head
    assert world.file_at(pr.head_sha, E) == world.file_at(pr.head_sha, D)
    assert mine in world.file_at(pr.head_sha, E)
    assert world.file_at(pr.head_sha, D) == world.file_at(head, D)
    assert f"- [x] `{E}`" in pr.body
    world.assert_clean()


@pytest.mark.parametrize("world", [{"manual": True}], indirect=True)
async def test_theirs_takes_upstreams_version_of_a_manual_file_the_fork_never_changed(
        world: World) -> None:
    sim = world.sim
    upstream = {p: edit(table(p[-5:-3]), {3: f"{p[-5:-3]}_3 = 300  # upstream"}) for p in (M, N)}
    pr = await world.open_sync(extra={f"slime/{p.rsplit('/', 1)[1]}": t
                                      for p, t in upstream.items()})
    commit1 = pr.head_sha
    assert world.file_at(commit1, M) == table("mu")  # commit 1 keeps the fork's files
    ids = dict(re.findall(r"- \*\*(Q\d+)\*\* `(vime/table_[mn]u\.py)`", pr.body))
    q_m, q_n = (next(q for q, p in ids.items() if p == path) for path in (M, N))
    # The review offers the command this test types.
    (review,) = sim.reviews(FORK, pr.number)
    assert f"`/sync answer {q_m} theirs`" in review.body and "applies as it is" in review.body

    # The answer the item recommends puts upstream's version on the branch.
    asked = await sim.comment(FORK, pr.number, "vera", f"/sync answer {q_m} theirs")
    await world.idle()
    assert reactions(world, asked) == ["eyes"], world.bot.log_tail()
    reply = replies(world, pr.number)[-1].body
    assert f"Recorded **{q_m}**: `theirs`" in reply and f"`{M}` is set to theirs" in reply
    pr = world.sync_pr()
    assert pr.head_sha != commit1 and world.file_at(pr.head_sha, M) == upstream[M]
    # So does resolving the whole file.
    asked = await sim.comment(FORK, pr.number, "vera", f"/sync resolve {N} theirs")
    await world.idle()
    assert reactions(world, asked) == ["eyes"], world.bot.log_tail()
    pr = world.sync_pr()
    assert world.file_at(pr.head_sha, N) == upstream[N]
    assert world.file_at(pr.head_sha, A) == world.file_at(commit1, A)  # nothing else moved
    assert f"- [x] `{M}`" in pr.body and f"- [x] `{N}`" in pr.body
    assert "answered: theirs" in pr.body
    run = world.check(pr.head_sha)
    assert "no other open decisions" in run.title, run.title
    assert q_m not in run.summary and q_n not in run.summary
    world.assert_clean()


@pytest.mark.parametrize("world", [{"lockfile": True}], indirect=True)
async def test_a_lockfile_gets_one_comment_and_one_command_resolves_it(world: World) -> None:
    sim = world.sim
    pr = await world.open_sync(extra=LOCK_CHANGE)
    commit1 = pr.head_sha
    regions = parse_regions(world.file_at(commit1, "Cargo.lock"))
    assert len(regions) == 2
    # ONE comment for the lockfile, on the file, with no suggestion; A and B keep theirs.
    comments = sim.review_comments(FORK, pr.number)
    (lock,) = [c for c in comments if c.path == "Cargo.lock"]
    assert lock.subject_type == "file" and "```suggestion" not in lock.body
    ids = re.match(r"\*\*(Q\d+)–(Q\d+) · `Cargo\.lock`: a Cargo lockfile with 2 conflict "
                   r"regions: regenerate it\*\*", lock.body)
    assert ids, lock.body
    assert "`/sync resolve Cargo.lock theirs`" in lock.body
    assert "run `cargo update --workspace`" in lock.body
    assert sorted(c.path for c in comments) == ["Cargo.lock", A, B, B]
    (review,) = [r for r in sim.reviews(FORK, pr.number) if "forksync:review" in r.body]
    assert "1 for the whole of a file whose 2 conflict regions" in review.body
    # The body: one row, one group with the one command; the check counts every region.
    first, last = ids.groups()
    assert (f"| 1 lockfile with 2 conflict regions: regenerate it, `/sync resolve Cargo.lock "
            f"theirs` then `cargo update --workspace` | {first}–{last} |") in pr.body
    assert "2 of 3 conflict hunks have a one-click suggestion" in pr.body
    run = world.check(commit1)
    assert run.conclusion == "failure" and run.title.startswith(
        "5 conflict regions still open"), run.title
    assert sum(1 for a in markers(run) if a["path"] == "Cargo.lock") == 1

    # The one command takes upstream's side of both regions: the file is upstream's.
    asked = await sim.comment(FORK, pr.number, "vera", "/sync resolve Cargo.lock theirs")
    await world.idle()
    assert reactions(world, asked) == ["eyes"], world.bot.log_tail()
    assert "Resolved 2 conflict regions in `Cargo.lock` with **theirs**" in \
        replies(world, pr.number)[-1].body
    pr = world.sync_pr()
    assert world.file_at(pr.head_sha, "Cargo.lock") == LOCK_CHANGE["Cargo.lock"]
    assert "- [x] `Cargo.lock`" in pr.body
    run = world.check(pr.head_sha)
    assert run.conclusion == "failure" and run.title.startswith(
        "3 conflict regions still open"), run.title
    assert not [a for a in markers(run) if a["path"] == "Cargo.lock"]
    assert not [r for r in sim.reviews(FORK, pr.number) if "forksync:follow" in r.body]

    # The rest, and the check passes.
    asked = await sim.comment(FORK, pr.number, "vera",
                              f"/sync resolve {A} ours\n/sync resolve {B} ours")
    await world.idle()
    pr = world.sync_pr()
    assert world.check(pr.head_sha).conclusion == "success", world.check(pr.head_sha).title
    world.assert_clean()
