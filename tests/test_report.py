"""The draft PR body, review comments and check text, rendered from the JSON report."""

from __future__ import annotations

import copy
from typing import Any

from bot.engine.markers import find_marker_regions
from bot.engine.report import (
    BEGIN,
    BODY_LIMIT,
    END,
    fence,
    merge_body,
    needs_overflow,
    render_body,
    render_check_output,
    render_markdown,
    render_review_comment,
)


def _item(n: int, path: str, tier: str = "Decide", kind: str = "conflict") -> dict[str, Any]:
    return {"id": f"Q{n}", "kind": kind, "path": path, "upstream_path": path, "tier": tier,
            "reason": "both sides changed the same lines differently",
            "question": "Keep ours or take theirs?", "choices": ["ours", "theirs"],
            "start_line": 3, "end_line": 9, "ours": "a\n", "base": "b\n", "theirs": "c\n",
            "suggestion": None if tier == "Decide" else "a\nc\n", "prs": [12, 14]}


def _plan(n_files: int = 2, n_window: int = 3) -> dict[str, Any]:
    files = [{"path": f"vime/f{i}.py", "upstream_path": f"slime/f{i}.py", "status": "conflict",
              "policy": None, "note": "", "binary": False,
              "review_items": [_item(i + 1, f"vime/f{i}.py")]} for i in range(n_files)]
    files.append({"path": "vime/new.py", "upstream_path": "slime/new.py", "status": "new",
                  "policy": None, "note": "", "binary": False, "review_items": []})
    window = [{"number": 100 + i, "title": f"PR {i} | pipes", "author": "alice",
               "sha": f"{i:040x}", "date": "2026-01-01T00:00:00Z", "kind": "pr"}
              for i in range(n_window)]
    return {"schema": "forksync.report/v1", "upstream": {"repo": "THUDM/slime", "branch": "main"},
            "cutoff": "a" * 40, "tip": "b" * 40, "ours": "c" * 40, "fork_branch": "main",
            "window_label": "#100..#102", "window": window, "files": files,
            "summary": {"files": len(files), "status": {"conflict": n_files, "new": 1},
                        "review_items": n_files, "tiers": {"Decide": n_files}, "prs": n_window,
                        "commits": n_window}}


def test_body_has_structure_counts_checklist_decisions_and_window() -> None:
    body = render_body(_plan())
    assert body.startswith(BEGIN) and body.endswith(END)
    assert "Commit 1 is the 3-way merge" in body
    assert "- [ ] `vime/f0.py`" in body and "- [ ] `vime/f1.py`" in body
    assert "**Decide** (2, 2 open)" in body
    assert "<details><summary>Window: 3 upstream changes</summary>" in body
    assert "- **#100** PR 0 | pipes (@alice)" in body  # one line per upstream PR


def test_body_counts_the_windows_other_commits_in_words() -> None:
    plan = _plan(n_window=2)
    plan["window"].append(dict(plan["window"][0], number=None, kind="commit", sha="e" * 40))
    assert "Syncs 2 upstream PRs and 1 other commit merged into" in render_body(plan)
    plan["window"].append(dict(plan["window"][2], sha="f" * 40))
    assert "Syncs 2 upstream PRs and 2 other commits merged into" in render_body(plan)


def test_checklist_ticks_resolved_files_and_shows_answers() -> None:
    body = render_body(_plan(), resolved={"Q1"}, answers={"Q2": "ours"})
    assert "- [x] `vime/f0.py`" in body and "- [x] `vime/f1.py`" in body
    assert "answered: ours" in body
    assert "**Decide** (2, 0 open)" in body


def test_counts_of_one_are_singular() -> None:
    body = render_body(_plan(n_files=1))
    assert "### Decisions: 1 item in 1 group\n" in body
    assert "### Conflicts (1 file)\n" in body
    body = render_body(_plan(n_files=2))
    assert "### Decisions: 2 items in 1 group\n" in body  # one shape: one group
    assert "### Conflicts (2 files)\n" in body


def test_behind_upstream_is_shown() -> None:
    assert "Behind upstream by 3 PRs" in render_body(_plan(), behind=3)


def test_huge_plan_stays_under_the_limit_and_links_the_report() -> None:
    plan = _plan(n_files=900, n_window=3000)
    body = render_body(plan, report_url="https://example.test/blob/x/.forksync/reports/r.md")
    assert len(body) <= BODY_LIMIT
    assert body.startswith(BEGIN) and body.rstrip().endswith(END)
    assert "r.md" in body


def _with_new_files(plan: dict[str, Any], n: int) -> dict[str, Any]:
    plan["files"] += [{"path": f"vime/new{k}.py", "upstream_path": f"slime/new{k}.py",
                       "status": "new", "policy": None, "note": "", "binary": False,
                       "review_items": []} for k in range(n)]
    return plan


def test_a_body_that_fits_lists_every_file_and_names_no_report() -> None:
    body = render_body(_with_new_files(_plan(), 59))  # 60 new files: more than 40
    assert "<details><summary>Added by upstream: 60 files</summary>" in body
    assert "- `vime/new58.py`" in body
    assert "full report" not in body and " more" not in body


def test_a_shortened_body_names_a_report_only_when_one_was_written() -> None:
    plan = _with_new_files(_plan(n_files=900, n_window=3000), 100)
    assert needs_overflow(plan)
    # The report file itself lists everything.
    report = render_markdown(plan)
    assert "- `vime/new99.py`" in report and "- **#3099** PR 2999 | pipes" in report
    assert "full report" not in report and " more" not in report
    url = "https://example.test/blob/x/.forksync/reports/r.md"
    body = render_body(plan, report_url=url)
    assert len(body) <= BODY_LIMIT
    assert f"The full report is in [r.md]({url})." in body
    assert f"more: the full report, [r.md]({url}), lists them" in body
    # With no GitHub (the CLI's preview) the body names the file commit 1 holds.
    from bot.engine.review import pr_section

    body = pr_section(plan, {"report_path": ".forksync/reports/r.md"})
    assert "The full report is in `.forksync/reports/r.md` on this branch." in body
    # No report was written (the body grew past the limit after commit 1): none is named,
    # and each cut list says where its rest is.
    body = render_body(plan)
    assert len(body) <= BODY_LIMIT
    assert "full report" not in body and "report file on this branch" not in body
    assert "no report file was written for this sync" in body
    assert "more: the PR's *Files changed* tab has them all" in body
    assert "more: `git log aaaaaaaaaa..bbbbbbbbbb` in `THUDM/slime` has them" in body


def test_merge_body_rewrites_only_the_bot_section() -> None:
    old = "People wrote this.\n\n" + render_body(_plan()) + "\n\nAnd this after."
    new = merge_body(old, render_body(_plan(), resolved={"Q1", "Q2"}))
    assert new.startswith("People wrote this.") and new.endswith("And this after.")
    assert "- [x] `vime/f0.py`" in new
    assert new.count(BEGIN) == 1
    # A body without our section (a person deleted it) gets it back, their text kept.
    assert merge_body("only people", render_body(_plan())).endswith("only people")


def test_review_comment_suggestion_replaces_the_region_and_cannot_be_broken_out() -> None:
    item = _item(1, "vime/f0.py", tier="Settled")
    item["suggestion"] = "code with ``` fence inside\n"
    text = render_review_comment(item)
    assert "````suggestion\ncode with ``` fence inside\n````" in text
    decide = render_review_comment(_item(2, "vime/f1.py"))
    assert "#12, #14" in decide


def test_decide_comment_shows_both_changes_as_diffs_and_offers_no_side() -> None:
    item = _item(2, "vime/f1.py")
    item.update(ours="    return self.llm.generate(prompts)\n",
                base="    return [self.rank for _ in prompts]\n",
                theirs="    return [[self.rank] * len(p) for p in prompts]\n")
    text = render_review_comment(item)
    assert "```suggestion" not in text  # no one-click default that drops the fork's edit
    assert "```diff\n--- base\n+++ theirs\n@@ -1 +1 @@\n-    return [self.rank for _ in " \
           "prompts]\n+    return [[self.rank] * len(p) for p in prompts]\n```" in text
    assert "+    return self.llm.generate(prompts)" in text
    assert text.count(item["base"].strip()) == 2  # in the two diffs only: no full copies
    assert "`/sync answer Q2 ours` keeps the fork's side" in text
    assert "`/sync answer Q2 theirs` takes upstream's" in text


def test_a_side_that_deleted_a_blank_line_shows_the_deletion() -> None:
    # An empty side is no lines, not one empty line: upstream deleting a blank line the
    # fork replaced with a comment is a change, and its diff says so.
    item = _item(6, "vime/ray/utils.py")
    item.update(ours="  # vime\n", base="\n", theirs="", suggestion="  # vime\n",
                rule="upstream layout only")
    text = render_review_comment(item)
    assert "no change from base" not in text
    assert "--- base\n+++ theirs\n@@ -1 +0,0 @@\n-\n```" in text
    assert "--- base\n+++ ours\n@@ -1 +1 @@\n-\n+  # vime\n```" in text


def test_decide_starting_point_and_confirm_proposal_are_labelled_differently() -> None:
    decide = _item(3, "vime/f2.py")
    decide["suggestion"] = "a\nc\n"
    assert "A starting point, not a sure answer" in render_review_comment(decide)
    confirm = _item(4, "vime/f3.py", tier="Confirm")
    confirm["choices"] = ["suggested", "ours", "theirs"]
    text = render_review_comment(confirm)
    assert "Proposed resolution (one click replaces the whole marker region):" in text
    assert "<details><summary>what each side changed</summary>" in text
    assert "`/sync answer Q4 suggested` commits the suggestion" in text


def test_an_empty_suggestion_is_said_to_delete_the_region() -> None:
    confirm = _item(4, "vime/f3.py", tier="Confirm")
    confirm.update(suggestion="", choices=["suggested", "ours", "theirs"])
    text = render_review_comment(confirm)
    assert "Proposed resolution (one click deletes the whole marker region; the block is " \
        "empty on purpose):\n\n```suggestion\n```" in text


def test_lines_upstream_did_not_change_cite_its_pr_as_the_edit_next_to_them() -> None:
    # ROCm/vllm@65405fdf6142 vllm/transformers_utils/configs/__init__.py: upstream's diff
    # is "(no change from base)"; its PR made the edit next to the region.
    item = _item(17, "vime/configs.py")
    item.update(base="]\n", theirs="]\n", ours='    "Grok1Config",\n]\n', prs=[9747],
                suggestion='    "Grok1Config",\n]\n', rule="already in ours",
                reason="upstream did not change these lines; git put them in the conflict "
                       "next to upstream's edit. The proposal keeps the fork's version (ours): "
                       "the fork added 1 line.")
    text = render_review_comment(item)
    assert "Upstream's edit next to these lines: #9747" in text
    assert "\nUpstream: #9747" not in text and "(no change from base)" in text


def test_a_suggestion_of_blank_lines_says_what_the_block_holds() -> None:
    confirm = _item(4, "vime/f3.py", tier="Confirm")
    confirm.update(suggestion="\n\n", choices=["suggested", "ours", "theirs"])
    text = render_review_comment(confirm)
    assert "(one click replaces the whole marker region with 2 blank lines, all the block " \
        "holds):\n\n```suggestion\n\n\n```" in text


def test_add_add_comment_diffs_the_two_versions_and_never_glues_them() -> None:
    item = _item(5, "docker/patch/vllm.patch")
    item.update(ours="# stub\n", base="", theirs="--- a/x\n+++ b/x\n", rule="add/add",
                reason="both sides added this file (add/add) and their versions differ here; "
                "two new files are never glued together")
    text = render_review_comment(item)
    assert text.count("never glued together") == 1  # the reason says it; nothing repeats it
    assert "```suggestion" not in text
    assert "```diff\n--- ours\n+++ theirs\n" in text
    assert "`/sync resolve docker/patch/vllm.patch ours` (or `theirs`)" in text


def test_body_counts_the_hunks_that_have_a_suggestion() -> None:
    plan = _plan(n_files=3)
    plan["files"][0]["review_items"][0]["suggestion"] = "a\n"
    body = render_body(plan)
    # With no review posted, the plan's proposals are counted, and no one-click is claimed.
    assert "1 of 3 conflict hunks has a proposed resolution" in body
    assert "one-click" not in body
    assert "1 of 3 conflict hunks has a one-click suggestion" in \
        render_body(plan, one_click=["Q1"])
    # A proposal the review could not make one click (its region spans diff hunks).
    assert "No conflict hunk has a one-click suggestion; 1 has a proposal that " \
        "`/sync answer <Qn> suggested` commits" in render_body(plan, one_click=[])


def test_the_needs_table_promises_one_click_only_where_the_review_has_a_button() -> None:
    plan = _plan(n_files=3)
    for item in (f["review_items"][0] for f in plan["files"][:3]):
        item["suggestion"] = "a\n"
    # Q2's region spans two hunks of the PR diff: its thread has no suggestion block.
    body = render_body(plan, posted=3, one_click=["Q1", "Q3"])
    assert "| 2 starting points to check, one click each | Q1, Q3 |\n" in body
    assert ("| 1 starting point to check, one command: `/sync answer Q2 suggested` | Q2 |\n"
            in body)
    # Before the review is posted no button is known, and none is promised.
    body = render_body(plan)
    assert "one click" not in body and "one-click" not in body
    assert ("| 3 starting points to check, one command each: `/sync answer Qn suggested` "
            "| Q1–Q3 |\n") in body


def test_fence_is_longer_than_any_backtick_run() -> None:
    assert fence("a ```` b").startswith("`````")


def test_check_output_counts_markers_and_decisions() -> None:
    plan = _plan()
    title, summary = render_check_output(plan, {"vime/f0.py": 2}, [plan["files"][1]
                                                                    ["review_items"][0]],
                                         open_regions=["Q1"])
    # One region is the plan's Q1; the other is one the plan does not know.
    assert title == ("2 conflict regions still open (Q1 and 1 more) in 1 file; "
                     "1 other open decision (Q2)")
    assert "`vime/f0.py`: 2 (Q1)" in summary and "Q2" in summary
    # Q1's region and the open decision Q2 are hunks with no proposal and no side to
    # recommend (the region the plan does not know is not counted by what it needs).
    assert "By what each needs: 2 hunks to combine by hand (both edits shown as diffs)." \
        in summary
    done_title, _ = render_check_output(plan, {}, [])
    assert done_title == "All conflicts resolved"


def test_the_check_counts_open_items_as_the_pr_body_does_and_names_them() -> None:
    from bot.engine.gate import check_output, initial_remaining

    plan = _plan(n_files=3)
    for f in plan["files"][:3]:  # one region in each of 3 files, all Decide
        f["review_items"][0]["suggestion"] = "a\n"
    plan["files"][2]["review_items"][0]["rule"] = "add/add"
    body = render_body(plan)
    assert "**Decide** (3, 3 open)" in body
    conclusion, title, summary = check_output(plan, initial_remaining(plan, {}))
    assert conclusion == "failure"
    assert title == "3 conflict regions still open (Q1–Q3) in 3 files; no other open decisions"
    assert summary.startswith(f"Sync of THUDM/slime #100..#102 is not finished: {title}.")
    # The check's one line counts what the body's table counts, with no button claimed.
    assert ("By what each needs: 1 file both sides added: keep one version · 2 starting "
            "points to check, one command each: `/sync answer Qn suggested`.") in summary
    assert "| 2 starting points to check, one command each: `/sync answer Qn suggested` " \
        "| Q1–Q2 |" in body
    assert "- `vime/f1.py`: 1 (Q2)" in summary


def test_the_check_says_one_click_where_the_body_does_and_a_command_elsewhere() -> None:
    from bot.engine.gate import check_output, initial_remaining

    plan = _plan(n_files=3)
    for f in plan["files"][:3]:
        f["review_items"][0]["suggestion"] = "a\n"
    # The review gave Q1 and Q3 a button; Q2's region spans two hunks of the PR diff.
    body = render_body(plan, posted=3, one_click=["Q1", "Q3"])
    _, _, summary = check_output(plan, initial_remaining(plan, {}), one_click=["Q1", "Q3"])
    assert "| 2 starting points to check, one click each | Q1, Q3 |\n" in body
    assert ("By what each needs: 2 starting points to check, one click each · 1 starting "
            "point to check, one command: `/sync answer Q2 suggested`.") in summary
    # No review known: the check claims no button, as the body claims none.
    assert "one click" not in check_output(plan, initial_remaining(plan, {}))[2]


def test_the_checks_title_names_a_few_ids_and_counts_the_rest() -> None:
    ids = [f"Q{2 * k + 1}" for k in range(200)]  # no two consecutive: no ranges
    title, _ = render_check_output(_plan(), {"vime/f0.py": 200}, [], open_regions=ids)
    assert title.startswith("200 conflict regions still open (Q1, Q3, Q5, ")
    assert " more) in 1 file; no other open decisions" in title and len(title) < 160


def test_plan_json_roundtrip_is_stable() -> None:
    from bot.engine.model import plan_from_json

    plan = _plan()
    plan["merged_tree"] = "d" * 40
    again = plan_from_json(copy.deepcopy(plan)).to_json()
    assert [f["path"] for f in again["files"]] == [f["path"] for f in plan["files"]]
    assert again["files"][0]["review_items"][0]["prs"] == [12, 14]
    assert find_marker_regions("") == []


def test_a_fork_without_translation_is_not_told_of_a_translation() -> None:
    plan = _plan()
    assert "base' = translate(upstream@cutoff) · theirs' = translate(upstream@tip)" \
        in render_body(plan)
    plan["translated"] = False
    body = render_body(plan)
    assert "base = upstream@cutoff · theirs = upstream@tip" in body
    assert "translate(" not in body


def test_peoples_titles_and_summaries_open_no_block_and_keep_code_spans_as_typed() -> None:
    from bot.engine.report import is_balanced

    plan = _plan(n_window=2)
    # foundry-zksync #12786: `&lt;` showed as typed inside the code span.
    plan["window"][0]["title"] = "Use `WithOtherFields<TransactionRequest>` for <b>calls</b>"
    # Linuxbrew/brew@b381137cef: a summary that is a bare fence opened a code block that
    # swallowed the rest of the body.
    plan["window"][1]["summary"] = "```"
    body = render_body(plan)
    assert "Use `WithOtherFields<TransactionRequest>` for &lt;b>calls&lt;/b>" in body
    assert "\n  ```" not in body and "\n  \\```" in body
    assert is_balanced(body)


def test_the_window_ends_at_the_tip_commit_when_commits_follow_the_last_pr() -> None:
    from bot.engine.report.body import tip_reason

    plan = _plan(n_window=2)
    assert tip_reason(plan) == ("The window ends at #101, the head of upstream `main` when "
                                "this sync ran.")
    # LoopKit/Loop: three direct commits after #1393; the head is the last of them.
    for k in range(3):
        plan["window"].append(dict(plan["window"][0], number=None, kind="commit",
                                   sha=f"{k + 7:x}" * 40))
    assert tip_reason(plan) == ("The window ends at `bbbbbbbbbb` (3 commits after #101), the "
                                "head of upstream `main` when this sync ran.")
