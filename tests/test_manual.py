"""Files under a ``manual`` policy, on real repositories: ported by hand where the fork
rewrote them; upstream's version proposed where the fork never changed them; and each
place (the review, the PR body, the check) says what to do once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bot.engine.preview import Preview, build_preview
from bot.engine.review import local_diff
from tests.factory import PLAIN_CONFIG, Scenario, git
from tests.test_engine_oracle import merged_blob, run_plan

UP = "slime/rollout/sglang_rollout.py"
FORK = "vime/rollout/vllm_rollout.py"
MANUAL_CONFIG = PLAIN_CONFIG + f"policies:\n  - {{paths: ['{FORK}'], action: manual}}\n"


REWRITE = '"""Rollout with vLLM (rewritten for the fork)."""\n'


def scenario(tmp_path: Path, fork_edit: Callable[[str], str] | None = None) -> Scenario:
    """A fork synced at the cutoff (``fork_edit``: what it did to the file since, if
    anything), then two upstream PRs that change the file."""
    s = Scenario(tmp_path / "repos", config=MANUAL_CONFIG)
    s.sync_fork()
    if fork_edit is not None:
        s.fork_commit("Fork: our rollout", {FORK: fork_edit(s.fork_file(FORK).decode())})
    text = s.upstream_file(UP).decode()
    s.upstream_pr(11, "Stream rollouts", "erin", files={
        UP: text + "\n\ndef stream_rollout(args, prompts):\n"
                   "    yield from generate_rollout(args, prompts)\n"})
    s.upstream_pr(12, "Log the sglang version", "bob", files={
        UP: "import logging\n" + s.upstream_file(UP).decode()})
    return s


def the_item(p: Any) -> Any:
    (item,) = [i for f in p.files if f.path == FORK for i in f.review_items]
    return item


def test_a_manual_file_the_fork_never_changed_proposes_upstreams_version(
        tmp_path: Path) -> None:
    s = scenario(tmp_path)
    assert s.fork_file(FORK) == s.translate_text(s.upstream_file(UP, s.cutoff), UP)
    p = run_plan(s, tmp_path)
    item = the_item(p)
    assert (item.kind.value, item.tier.value) == ("manual", "Confirm")
    assert item.choices == ["theirs", "done", "skip"]
    assert "the fork has not changed this file since the split" in item.reason
    assert "so upstream's change applies as it is" in item.reason
    assert item.prs == [11, 12]
    # Commit 1 keeps the fork's file; `theirs` is upstream's translated version.
    assert merged_blob(p, FORK) == s.fork_file(FORK)
    assert item.sides["ours"]["oid"] == git(s.fork_git, "rev-parse", f"main:{FORK}"
                                            ).decode().strip()
    theirs = git(p.work_git_dir, "cat-file", "blob", item.sides["theirs"]["oid"])
    assert theirs == s.translate_text(s.upstream_file(UP), UP)
    assert b"def stream_rollout" in theirs and b"vllm" in theirs and b"sglang" not in theirs
    # The file's status says so too (the PR body's checklist row).
    (f,) = [f for f in p.files if f.path == FORK]
    assert f.note == "manual policy, but the fork never changed it: upstream's version applies"


def test_a_manual_file_the_fork_rewrote_is_ported_by_hand(tmp_path: Path) -> None:
    s = scenario(tmp_path, lambda _: REWRITE)
    item = the_item(run_plan(s, tmp_path))
    assert (item.kind.value, item.tier.value) == ("manual", "Decide")
    assert item.choices == ["done", "skip"] and item.sides is None
    assert item.reason.endswith("the fork rewrote this file, so it is never merged textually")


def test_a_fork_change_of_whitespace_only_is_still_a_change(tmp_path: Path) -> None:
    # Upstream's version would drop it (in Python, indentation is meaning): ported by hand.
    s = scenario(tmp_path, lambda text: text.replace("\n", "  \n", 1))
    item = the_item(run_plan(s, tmp_path))
    assert (item.tier.value, item.choices, item.sides) == ("Decide", ["done", "skip"], None)


# -- what the review, the PR body and the check say -------------------------------------


def preview(s: Scenario, tmp_path: Path) -> Preview:
    """What the App would post for commit 1 of this sync (as ``sync --preview`` writes it)."""
    from bot.engine.pipeline import sync

    result = sync(str(s.fork_dir), str(s.upstream_dir), workdir=str(tmp_path / "work"),
                  branch="forksync/test")
    plan_json = json.loads(json.dumps(result.plan.to_json()))
    diff = local_diff(str(s.fork_git), "main", result.commit)
    return build_preview(plan_json, diff, result.commit, title="sync", branch=result.branch)


def item_block(review_body: str, q: str) -> str:
    """The ``<details>`` of item ``q`` in the review body (it has no thread)."""
    m = re.search(rf"<details><summary>{q} · .*?</details>", review_body, re.S)
    assert m, review_body
    return m.group(0)


def test_a_port_by_hand_is_asked_once_in_each_place(tmp_path: Path) -> None:
    s = scenario(tmp_path, lambda _: REWRITE)
    pv = preview(s, tmp_path)
    (q,) = re.findall(r"<summary>(Q\d+) · ", pv.delivery.review["body"])
    block = item_block(pv.delivery.review["body"], q)
    # Once: the recommendation, with its command; no reason or question that says it again.
    assert block.count("by hand") == 1, block
    assert (f"Recommended: port the change of #11 and #12 to the fork's version by hand, then "
            f"answer `done`. `/sync answer {q} done`") in block
    assert f"Or `/sync answer {q} skip` leaves upstream's change out." in block
    assert "rewritten for the fork" not in block and "Port upstream's change" not in block
    assert "+def stream_rollout(args, prompts):" in block  # the diff to port
    body = pv.pr_body
    assert "Port upstream's change" not in body
    assert (f"- **{q}** `{FORK}`: port by hand\n  - Recommended: port the change of #11 and "
            "#12") in body
    assert f"- **{q}** `{FORK}` (Decide): port by hand\n" in body  # no thread: a short row
    assert f"- [ ] `{FORK}`: manual policy: port by hand ({q}) · #11, #12" in body
    summary = pv.check["output"]["summary"]
    assert f"- **{q}** `{FORK}`: port by hand — `/sync answer {q} done`" in summary


def test_a_file_the_fork_never_changed_offers_theirs_in_each_place(tmp_path: Path) -> None:
    pv = preview(scenario(tmp_path), tmp_path)
    (q,) = re.findall(r"<summary>(Q\d+) · ", pv.delivery.review["body"])
    block = item_block(pv.delivery.review["body"], q)
    assert f"**{q} · Confirm**" in block
    assert ("the fork has not changed this file since the split (it is the translated base "
            "byte for byte), so upstream's change applies as it is") in block
    assert ("Recommended: take upstream's version (theirs): it is the fork's file with "
            f"upstream's change applied. `/sync answer {q} theirs`") in block
    assert (f"Or `/sync answer {q} done` once you have ported it by hand, or "
            f"`/sync answer {q} skip` leaves upstream's change out.") in block
    assert "Upstream: #11 Stream rollouts (@erin); #12 Log the sglang version (@bob)" in block
    assert "by hand" not in block.replace("once you have ported it by hand", "")
    body = pv.pr_body
    assert (f"| 1 file under a manual policy that the fork never changed, with upstream's "
            f"version (theirs) proposed: one command takes it, `/sync answer {q} theirs` | "
            f"{q} |") in body
    assert (f"- **{q}** `{FORK}`: manual policy, but the fork never changed it\n"
            "  - Recommended: take upstream's version (theirs)") in body
    assert f"- **{q}** `{FORK}` (Confirm): manual policy, but the fork never changed it\n" \
        in body
    assert ": port by hand" not in body
    summary = pv.check["output"]["summary"]
    assert (f"- **{q}** `{FORK}`: manual policy, but the fork never changed it — "
            f"`/sync answer {q} theirs`") in summary
