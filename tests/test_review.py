"""The review as data: where each item's thread goes on the PR diff, and the request bodies.

Pure functions on a hand-written diff (every rule of GitHub's anchoring in a few lines)
and on the real diff of :func:`tests.factory.make_threads`, whose window needs every
kind of place a thread can have.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from bot.engine.anchor import PrDiff, Where, place
from bot.engine.gate import annotation_batches, check_run_request, initial_remaining
from bot.engine.model import Changed, plan_from_json
from bot.engine.pipeline import sync
from bot.engine.report import BODY_LIMIT
from bot.engine.review import (
    build_delivery,
    drop_threads,
    file_comment_budget,
    file_marker,
    local_diff,
    plan_items,
    pr_section,
    review_marker,
    write_budget,
)
from bot.engine.suggest import FORK_FILE
from bot.errors import ForksyncError
from tests.factory import make_threads

DIFF = """\
diff --git a/vime/a.py b/vime/a.py
index 1111111..2222222 100644
--- a/vime/a.py
+++ b/vime/a.py
@@ -1,4 +1,10 @@
 def f():
+<<<<<<< ours
     return 1
+||||||| base
+    return 0
+=======
+    return 2
+>>>>>>> theirs
 y = 0
 x = 1
@@ -20,3 +25,4 @@
 a
 b
+c
 d
diff --git a/imgs/logo.png b/imgs/logo.png
new file mode 100644
index 0000000..3333333
Binary files /dev/null and b/imgs/logo.png differ
diff --git a/vime/old.py b/vime/old.py
deleted file mode 100644
index 4444444..0000000
--- a/vime/old.py
+++ /dev/null
@@ -1,2 +0,0 @@
-a = 1
-b = 2
"""


def item(**kw: Any) -> dict[str, Any]:
    base = {"id": "Q1", "kind": "conflict", "path": "vime/a.py", "upstream_path": "slime/a.py",
            "tier": "Decide", "reason": "both changed", "question": "which?",
            "choices": ["ours", "theirs"], "start_line": 2, "end_line": 8,
            "ours": "    return 1\n", "base": "    return 0\n", "theirs": "    return 2\n",
            "suggestion": "    return 2\n", "prs": [5]}
    return base | kw


def plan_of(*items: dict[str, Any]) -> dict[str, Any]:
    files: dict[str, list[dict[str, Any]]] = {}
    for i in items:
        files.setdefault(i["path"], []).append(i)
    return {"upstream": {"repo": "THUDM/slime", "branch": "main"}, "window_label": "#5..#5",
            "cutoff": "c" * 40, "tip": "d" * 40, "ours": "e" * 40, "window": [],
            "summary": {"files": len(files), "status": {}, "review_items": len(items),
                        "tiers": {}, "prs": 0, "commits": 0},
            "files": [{"path": p, "upstream_path": p, "status": "conflict", "note": "",
                       "policy": None, "binary": False, "review_items": its}
                      for p, its in files.items()]}


# -- the PR diff -----------------------------------------------------------------------


def test_the_diff_knows_every_path_and_the_right_side_lines_of_each_hunk() -> None:
    diff = PrDiff.parse(DIFF)
    assert set(diff.files) == {"vime/a.py", "imgs/logo.png", "vime/old.py"}
    a = diff.files["vime/a.py"]
    assert [(h.first, h.last) for h in a.right_hunks] == [(1, 10), (25, 28)]
    assert a.right_hunks[0].right_text(2, 3) == ["<<<<<<< ours", "    return 1"]
    logo = diff.files["imgs/logo.png"]
    assert logo.binary and logo.right_hunks == () and logo.status == "added"
    assert diff.files["vime/old.py"].status == "removed"
    assert diff.files["vime/old.py"].right_hunks == ()
    with pytest.raises(ForksyncError, match="PR diff"):
        PrDiff.parse("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n-a\n")


def test_the_file_listing_gives_the_same_hunks_and_files_without_a_patch() -> None:
    listing = [{"filename": "vime/a.py", "status": "modified",
                "patch": DIFF.split("+++ b/vime/a.py\n")[1].split("diff --git")[0]},
               {"filename": "imgs/logo.png", "status": "added"}]
    diff = PrDiff.from_listing(listing)
    assert [(h.first, h.last) for h in diff.files["vime/a.py"].right_hunks] == [(1, 10),
                                                                              (25, 28)]
    assert diff.files["imgs/logo.png"].right_hunks == () and diff.files["imgs/logo.png"].binary


# -- where each thread goes ------------------------------------------------------------


def test_each_item_gets_the_best_place_the_diff_offers() -> None:
    diff = PrDiff.parse(DIFF)
    items = [
        item(id="Q1"),                                            # inside one hunk
        item(id="Q2", start_line=8, end_line=26),                 # over two hunks
        item(id="Q3", kind="flag", start_line=27, end_line=27),   # a line in a hunk
        item(id="Q4", kind="flag", start_line=15, end_line=15),   # a line outside them
        item(id="Q5", kind="file", start_line=None, end_line=None),  # the whole file
        item(id="Q6", kind="file", path="imgs/logo.png", start_line=None, end_line=None),
        item(id="Q7", kind="file", path="vime/b.py", start_line=None, end_line=None),
    ]
    threads = place(items, diff, file_comments=5)
    got = [(t.ids, t.where, t.start_line, t.line) for t in threads]
    assert got == [
        (("Q1",), Where.REGION, 2, 8),
        (("Q2",), Where.LINE, None, 8),
        (("Q3",), Where.LINE, None, 27),
        (("Q4",), Where.LINE, None, 10),
        (("Q5",), Where.LINE, None, 1),
        (("Q6",), Where.FILE, None, None),
        (("Q7",), Where.NONE, None, None),
    ]
    notes = {t.ids[0]: t.note for t in threads}
    assert notes["Q1"] == "" and "spans 2 hunks" in notes["Q2"]
    assert "L15 is not part of the PR diff" in notes["Q4"] and "(L10)" in notes["Q4"]
    assert "whole file" in notes["Q5"] and "binary" in notes["Q6"]
    assert "not changed by this PR" in notes["Q7"]


def test_one_file_comment_carries_all_of_a_files_items_and_the_budget_caps_them() -> None:
    diff = PrDiff.parse(DIFF + "diff --git a/b.png b/b.png\nnew file mode 100644\n"
                        "index 0000000..5555555\nBinary files /dev/null and b/b.png differ\n")
    items = [item(id="Q1", kind="file", path="imgs/logo.png", start_line=None),
             item(id="Q2", kind="flag", path="imgs/logo.png", start_line=None),
             item(id="Q3", kind="file", path="b.png", start_line=None)]
    threads = place(items, diff, file_comments=1)
    assert [(t.ids, t.where) for t in threads] == [(("Q1", "Q2"), Where.FILE),
                                                  (("Q3",), Where.NONE)]
    assert "write budget" in threads[1].note


def test_the_write_budget_leaves_file_comments_what_the_other_requests_do_not_take() -> None:
    assert write_budget(0) == 5 and write_budget(50) == 6 and write_budget(51) == 7
    # PR, review, its retry after a 422, one body update: 4; the check: 1 per 50 annotations.
    assert file_comment_budget(3, 3) == 5 + 1 - 4 - 1
    assert file_comment_budget(66, 59) == 5 + 2 - 4 - 2
    assert file_comment_budget(120, 120) == 5 + 3 - 4 - 3
    for items in range(1, 300, 7):
        for notes in range(0, items + 1, 5):
            writes = 4 + max(1, -(-notes // 50)) + file_comment_budget(items, notes)
            assert writes <= write_budget(items) and file_comment_budget(items, notes) >= 1


# -- the request bodies ----------------------------------------------------------------


def test_the_review_body_and_comments_name_their_items_and_the_suggestion_only_fits_a_region(
) -> None:
    diff = PrDiff.parse(DIFF)
    plan = plan_of(item(id="Q1"), item(id="Q2", start_line=8, end_line=26, choices=[]),
                   item(id="Q3", kind="file", path="imgs/logo.png", start_line=None,
                        end_line=None, choices=["ours", "theirs"], suggestion=None),
                   item(id="Q4", kind="manual", path="vime/b.py", start_line=None,
                        end_line=None, theirs="-a\n+b\n", choices=["done", "skip"]))
    d = build_delivery(plan, diff, "f" * 40)
    review = d.review
    assert set(review) == {"commit_id", "event", "body", "comments"}
    assert review["commit_id"] == "f" * 40 and review["event"] == "COMMENT"
    region, line = review["comments"]
    assert {k: region[k] for k in ("path", "start_line", "start_side", "line", "side")} == {
        "path": "vime/a.py", "start_line": 2, "start_side": "RIGHT", "line": 8,
        "side": "RIGHT"}
    assert "```suggestion\n    return 2\n```" in region["body"]
    assert region["body"].startswith("**Q1 · Decide**")
    # Over two hunks: no suggestion (it would replace one line), the command instead.
    assert set(line) == {"path", "line", "side", "body"} and line["line"] == 8
    assert "suggestion" not in re.findall(r"^`{3,}(\w*)", line["body"], re.M)
    assert "`/sync answer Q2 ours|theirs|suggested`" in line["body"]
    assert line["body"].startswith("**Q2 · Decide**")
    (file_comment,) = d.file_comments
    assert file_comment == {"body": file_comment["body"], "commit_id": "f" * 40,
                            "path": "imgs/logo.png", "subject_type": "file"}
    assert file_comment["body"].startswith("**Q3 · Decide**")
    assert file_comment["body"].endswith(file_marker("f" * 40, "imgs/logo.png"))
    assert d.unplaced() == ["Q4"]
    assert d.summary() == {"items": 4, "threads": 3, "suggestions": 1, "one_click": ["Q1"],
                           "comments": 2, "files": 1, "unplaced": ["Q4"]}
    body = review["body"]
    assert body.startswith("**forksync** · 3 threads for 4 review items of commit 1")
    assert "1 with a one-click suggestion" in body and "1 file-level comment" in body
    assert "<summary>Q4 · <code>vime/b.py</code></summary>" in body and "+b" in body
    assert body.endswith(review_marker("f" * 40))
    json.dumps(review)  # plain JSON


def test_a_refused_comment_leaves_the_review_and_its_item_moves_to_the_body() -> None:
    d = build_delivery(plan_of(item(id="Q1"), item(id="Q2", start_line=27, end_line=27,
                                                    kind="flag")),
                       PrDiff.parse(DIFF), "f" * 40)
    after = drop_threads(d, {d.review_index[0]})
    assert [c["line"] for c in after.review["comments"]] == [27]
    assert after.unplaced() == ["Q1"]
    assert "GitHub refused the comment on `vime/a.py` L8 (422)" in after.review["body"]
    assert after.summary()["threads"] == 1


def test_every_body_stays_within_githubs_limit_with_its_fences_closed() -> None:
    huge = "x = '```'\n" * 9000  # ~90,000 characters, with backticks inside
    diff = PrDiff.parse(DIFF)
    plan = plan_of(item(id="Q1", ours=huge, base=huge, theirs=huge, suggestion=huge),
                   item(id="Q2", start_line=8, end_line=26, ours=huge, theirs=huge),
                   *[item(id=f"Q{n}", kind="manual", path=f"vime/m{n}.py", start_line=None,
                          end_line=None, theirs=huge) for n in range(3, 8)])
    d = build_delivery(plan, diff, "f" * 40)
    texts = [d.review["body"], *(c["body"] for c in d.review["comments"])]
    for text in texts:
        assert len(text) <= BODY_LIMIT
        fences = re.findall(r"^(`{3,})", text, re.M)
        assert len(fences) % 2 == 0, "a fence is left open"
        assert text.count("<details>") == text.count("</details>")
    assert d.unplaced() == [f"Q{n}" for n in range(3, 8)]
    for n in range(3, 8):  # each orphan is in the review body, in full or as one line
        assert f"**Q{n}**" in d.review["body"] or f"<summary>Q{n} ·" in d.review["body"]


def test_the_pr_body_never_claims_more_than_the_delivery() -> None:
    plan = plan_of(item(id="Q1"), item(id="Q2", path="vime/b.py", kind="file",
                                       start_line=None, end_line=None))
    d = build_delivery(plan, PrDiff.parse(DIFF), "f" * 40)
    body = pr_section(plan, {"delivery": d.summary(), "unanchored": d.unplaced()})
    assert "1 of 2 review items has a review thread" in body
    assert "Each conflict hunk has a review comment" not in body
    assert "### Items with no thread on the diff" in body and "**Q2** `vime/b.py`" in body
    refused = drop_threads(d, {d.review_index[0]})
    body = pr_section(plan, {"delivery": refused.summary(), "unanchored": refused.unplaced()})
    assert "0 of 2 review items have a review thread." in body
    assert "No conflict hunk has a one-click suggestion; 1 has a proposal" in body
    assert "review thread" not in pr_section(plan, {})  # no delivery known: no claim


def test_the_pr_bodys_needs_table_says_one_click_only_for_threads_with_a_button() -> None:
    # Both hunks have a starting point; Q2's region spans two hunks of the PR diff, so its
    # thread sits on one line with no suggestion block: it is answered by a command.
    plan = plan_of(item(id="Q1"), item(id="Q2", start_line=8, end_line=26))
    d = build_delivery(plan, PrDiff.parse(DIFF), "f" * 40)
    assert d.one_click() == ["Q1"]
    body = pr_section(plan, {"delivery": d.summary(), "unanchored": d.unplaced()})
    assert "| 1 starting point to check, one click each | Q1 |\n" in body
    assert ("| 1 starting point to check, one command: `/sync answer Q2 suggested` | Q2 |\n"
            in body)
    # A state saved before the ids were recorded knows no button, and claims none.
    old = {k: v for k, v in d.summary().items() if k != "one_click"}
    body = pr_section(plan, {"delivery": old, "unanchored": d.unplaced()})
    assert "one click each" not in body
    assert "2 of 2 conflict hunks have a proposed resolution." in body


# -- a real window with every kind of place ---------------------------------------------


@pytest.fixture(scope="module")
def threads_sync(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str, str]:
    root = tmp_path_factory.mktemp("threads")
    s = make_threads(root / "repos")
    result = sync(str(s.fork_dir), str(s.upstream_dir), workdir=root / "work")
    diff = local_diff(result.plan.work_git_dir, result.plan.ours, result.commit)
    return result.plan.to_json(), diff, result.commit


def test_on_real_git_every_item_whose_file_is_in_the_diff_gets_a_thread(
        threads_sync: tuple[dict[str, Any], str, str]) -> None:
    plan, diff_text, commit = threads_sync
    diff = PrDiff.parse(diff_text)
    d = build_delivery(plan, diff, commit)
    where = {i: t.where for t in d.threads for i in t.ids}
    kinds = {i["id"]: (i["kind"], i["path"]) for i in plan_items(plan)}
    assert {i: (kinds[i], w.value) for i, w in where.items()} == {
        "Q1": (("policy", "docker/Dockerfile"), "none"),
        "Q2": (("file", "imgs/arch.png"), "none"),
        "Q3": (("file", "imgs/logo.png"), "file"),
        "Q4": (("flag", "vime/utils/arguments.py"), "line"),
        "Q5": (("file", "vime/utils/legacy.py"), "line"),
        "Q6": (("conflict", "vime/utils/table.py"), "line"),
        "Q7": (("conflict", "vime/utils/table.py"), "region"),
    }
    # Those with no thread are exactly the items on paths the PR diff does not have.
    assert [i for i, w in where.items() if w is Where.NONE] == [
        i for i, (_, path) in kinds.items() if path not in diff.files]
    for comment in d.review["comments"]:
        hunks = diff.files[comment["path"]].right_hunks
        start = comment.get("start_line", comment["line"])
        assert any(h.has(start, comment["line"]) for h in hunks), comment["path"]


def test_on_real_git_a_conflict_in_the_forks_own_file_starts_from_ours(
        threads_sync: tuple[dict[str, Any], str, str]) -> None:
    # The fork rewrote 22 of table.py's 60 lines, upstream 3 (44 and 6 changed lines, as
    # git diff --numstat counts them): its conflict over lines 10-30 starts from ours.
    plan, diff_text, commit = threads_sync
    (q6,) = [i for i in plan_items(plan) if i["id"] == "Q6"]
    assert (q6["rule"], q6["tier"], q6["suggestion"]) == (FORK_FILE, "Decide", q6["ours"])
    assert "the fork changed 44 and upstream 6" in q6["reason"]
    # The plan keeps the counts (the App's memory replays its outcomes with them).
    (table,) = [f for f in plan["files"] if f["path"] == "vime/utils/table.py"]
    assert table["changed"] == {"ours": 44, "theirs": 6}
    assert plan_from_json(plan).files[[f["path"] for f in plan["files"]].index(
        "vime/utils/table.py")].changed == Changed(44, 6)
    # Its region spans two hunks of the PR diff: no one-click, the command commits it.
    d = build_delivery(plan, PrDiff.parse(diff_text), commit)
    (comment,) = [c for c in d.review["comments"] if "**Q6 " in c["body"]]
    assert "```suggestion" not in comment["body"]
    assert "`/sync answer Q6 suggested`" in comment["body"]


def test_the_check_request_is_the_gate_on_commit_1(
        threads_sync: tuple[dict[str, Any], str, str]) -> None:
    plan, _, commit = threads_sync
    req = check_run_request(plan, initial_remaining(plan, {}), commit)
    assert {k: req[k] for k in ("name", "head_sha", "status", "conclusion", "external_id")} \
        == {"name": "forksync", "head_sha": commit, "status": "completed",
            "conclusion": "failure", "external_id": commit}
    notes = req["output"]["annotations"]
    # The regions, and the decisions about whole files on their line 1.
    assert [(a["path"], a["start_line"]) for a in notes if a["title"].startswith("Q")] == [
        ("imgs/arch.png", 1), ("imgs/logo.png", 1), ("vime/utils/arguments.py", 10),
        ("vime/utils/legacy.py", 1), ("vime/utils/table.py", 10), ("vime/utils/table.py", 96)]
    # Then the config's own warnings (the example config has some), as GitHub gets them.
    assert {a["path"] for a in notes if not a["title"].startswith("Q")} \
        <= {".github/forksync.yml"}
    assert req["output"]["annotations"] == [a for b in annotation_batches(
        plan, initial_remaining(plan, {})) for a in b][:50]
    # A hunk's annotation says what each side did, not the question every hunk asks.
    hunks = {i["id"]: i for i in plan_items(plan) if i["kind"] == "conflict"}
    said = [a["message"] for a in notes if a["title"].split(":")[0] in hunks]
    assert said and all("Both sides changed these lines." not in m for m in said)
    assert all(hunks[m.split(" ")[0]]["reason"] in m for m in said)


def test_file_markers_cannot_close_the_comment_they_hide_in() -> None:
    marker = file_marker("f" * 40, "odd-->name.py")
    assert marker.count("-->") == 1 and marker.endswith("-->")


# -- posting: the one place a delivery goes out ----------------------------------------


def github_like(gh: Any, refuse: set[str] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Just enough of GitHub behind the FakeGH: reviews and PR comments, kept."""
    from gidgethub import BadRequest

    made: dict[str, list[dict[str, Any]]] = {"reviews": [], "comments": []}
    base = "/repos/o/r/pulls/7"

    def post_comment(request: Any) -> dict[str, Any]:
        if request.data["path"] in (refuse or set()):
            error = BadRequest(422, "Validation Failed")  # type: ignore[arg-type]
            error.errors = [{"field": "pull_request_review_thread.path"}]  # type: ignore[attr-defined]
            raise error
        made["comments"].append(request.data)
        return {"id": len(made["comments"])}

    gh.on("GET", f"{base}/reviews", lambda r: made["reviews"])
    gh.on("POST", f"{base}/reviews", lambda r: made["reviews"].append(r.data) or {"id": 1})
    gh.on("GET", f"{base}/comments", lambda r: made["comments"])
    gh.on("POST", f"{base}/comments", post_comment)
    return made


async def test_posting_twice_makes_each_thread_once(fake_gh: Any) -> None:
    from bot.github.pulls import post_delivery

    made = github_like(fake_gh)
    plan = plan_of(item(id="Q1"), item(id="Q2", kind="file", path="imgs/logo.png",
                                       start_line=None, end_line=None))
    d = build_delivery(plan, PrDiff.parse(DIFF), "f" * 40)
    posted = await post_delivery(fake_gh, "o/r", 7, d)
    assert posted == d and made["reviews"] == [d.review]
    assert made["comments"] == list(d.file_comments)
    writes = fake_gh.write_count
    again = await post_delivery(fake_gh, "o/r", 7, d)  # a resumed run: found, not re-posted
    assert again.unplaced() == [] and fake_gh.write_count == writes == 2


async def test_a_refused_file_comment_leaves_its_item_without_a_thread(fake_gh: Any) -> None:
    from bot.github.pulls import post_delivery

    made = github_like(fake_gh, refuse={"imgs/logo.png"})
    plan = plan_of(item(id="Q1"), item(id="Q2", kind="file", path="imgs/logo.png",
                                       start_line=None, end_line=None))
    posted = await post_delivery(fake_gh, "o/r", 7, build_delivery(plan, PrDiff.parse(DIFF),
                                                                   "f" * 40))
    assert made["comments"] == [] and posted.unplaced() == ["Q2"]
    assert posted.summary()["files"] == 0 and posted.summary()["threads"] == 1


def test_a_region_with_a_proposal_but_no_one_click_shows_it_for_the_command() -> None:
    plan = plan_of(item(id="Q1", start_line=8, end_line=26, tier="Confirm",
                        suggestion="    return 3\n"))
    (comment,) = build_delivery(plan, PrDiff.parse(DIFF), "f" * 40).review["comments"]
    assert "```suggestion" not in comment["body"]
    assert "Proposed resolution (`/sync answer Q1 suggested` commits it):\n\n```\n" \
        "    return 3\n```" in comment["body"]


def test_a_proposal_that_deletes_the_region_says_so_instead_of_an_empty_block() -> None:
    plan = plan_of(item(id="Q1", start_line=8, end_line=26, tier="Confirm", suggestion=""))
    (comment,) = build_delivery(plan, PrDiff.parse(DIFF), "f" * 40).review["comments"]
    assert "Proposed resolution: delete the region's lines, keeping nothing in their place " \
        "(`/sync answer Q1 suggested` commits it)." in comment["body"]
    assert "```\n```" not in comment["body"]


def test_a_proposal_of_blank_lines_names_them_and_every_answer_is_listed() -> None:
    # HabanaAI/vllm-fork@bf1b786787e3 vllm/engine/arg_utils.py Q18: upstream's deletion
    # left one blank line, shown as an empty-looking block; its answer line left out
    # `theirs` (its choices do: the proposal is upstream's side).
    plan = plan_of(item(id="Q1", start_line=8, end_line=26, tier="Confirm", suggestion="\n",
                        theirs="\n", choices=["suggested", "ours"]))
    (comment,) = build_delivery(plan, PrDiff.parse(DIFF), "f" * 40).review["comments"]
    body = comment["body"]
    assert "Proposed resolution: delete the region's lines, keeping one blank line in their " \
        "place (`/sync answer Q1 suggested` commits it)." in body
    assert "```\n\n```" not in body and "<suggested|ours>" not in body
    assert "Answer: `/sync answer Q1 ours` keeps the fork's side, `/sync answer Q1 theirs` " \
        "takes upstream's, `/sync answer Q1 suggested` commits the suggestion (the same text " \
        "as `theirs`); or edit the region by hand." in body


def test_a_tip_named_by_the_sha_of_the_head_ends_the_window_at_the_head(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """The App names its tip by SHA; the body must read as a preview of the same sync."""
    from bot.engine.pipeline import plan

    root = tmp_path_factory.mktemp("tip")
    s = make_threads(root / "repos")
    args = (str(s.fork_dir), str(s.upstream_dir))
    assert plan(*args, workdir=root / "w").tip_source == "head"
    assert plan(*args, to_rev=s.tip, workdir=root / "w").tip_source == "head"
    assert plan(*args, to_rev="#6", workdir=root / "w").tip_source == "#6"
