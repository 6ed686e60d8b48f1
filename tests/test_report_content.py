"""Review content: groups and ranking, the body's sections, and GitHub's limits on huge
and odd items (hypothesis), with fences and <details> always closed."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bot.engine.model import Changed
from bot.engine.report import (
    BODY_LIMIT,
    CHECK_SUMMARY_LIMIT,
    group_items,
    id_ranges,
    is_balanced,
    recommend,
    render_body,
    render_check_output,
    render_comment,
    warning_annotations,
)
from bot.engine.suggest import Hunk, propose, propose_hunk
from tests.test_report import _item, _plan


def _conflict(n: int, path: str, base: str, theirs: str, ours: str, prs: list[int]) -> Any:
    item = _item(n, path)
    item.update(base=base, theirs=theirs, ours=ours, prs=prs, start_line=n * 10,
                end_line=n * 10 + 5)
    return item


def _plan_with(items: list[dict[str, Any]]) -> dict[str, Any]:
    plan = _plan(n_files=0)
    plan["files"] = [{"path": i["path"], "upstream_path": i["path"], "status": "conflict",
                      "policy": None, "note": "", "binary": False, "review_items": [i]}
                     for i in items] + plan["files"]
    return plan


def test_the_same_change_in_n_places_is_one_group_with_one_command() -> None:
    # The fork's edit is already in upstream's version in each place: `theirs` loses
    # nothing, so one command may answer the whole group.
    same = [_conflict(n, f"vime/m{n}.py", "x = old()\n", "x = new()\n", f"x = fork{n}()\n",
                      [101]) for n in range(1, 5)]
    for item in same:
        item["rule"] = "already in theirs, by lines"
    other = _conflict(5, "vime/z.py", "a\n", "b\nc\nd\n", "e\n", [102])
    deleted = _item(6, "vime/gone.py", kind="file")
    deleted.update(sides={"ours": None, "theirs": {"mode": "100644", "oid": "f" * 40}},
                   prs=[100], start_line=None, end_line=None)
    groups = group_items(_plan_with([*same, other, deleted]))
    assert [g.ids for g in groups] == [["Q6"], ["Q1", "Q2", "Q3", "Q4"], ["Q5"]]
    assert "the fork deleted this file; upstream #100" in groups[0].title
    assert groups[1].command == "/sync answer Q1-Q4 theirs"
    assert "#101 PR 1 | pipes (@alice): the same change in 4 places" in groups[1].title
    body = render_body(_plan_with([*same, other, deleted]))
    assert "`/sync answer Q1-Q4 theirs`" in body
    assert body.index("**Q6**") < body.index("**Q1–Q4**") < body.index("**Q5**")


def test_a_decide_group_without_evidence_says_what_to_combine_and_offers_no_command() -> None:
    # Each place holds an edit of the fork's: `theirs` would drop all four of them.
    same = [_conflict(n, f"vime/m{n}.py", "x = old()\n", "x = new()\n", f"x = fork{n}()\n",
                      [101]) for n in range(1, 5)]
    (group,) = group_items(_plan_with(same))
    assert group.ids == ["Q1", "Q2", "Q3", "Q4"] and group.command is None
    # Both replaced `old`, each with a word of its own: the group names none of them,
    # each item its own.
    assert group.action == ("both replaced the same words in each place, each with words "
                            "of its own: pick one or write a third (each item names them)")
    body = render_body(_plan_with(same))
    assert "/sync answer Q1-Q4" not in body and "apply the fork's 1-line edit" not in body
    assert "both replaced `old`, the fork with `fork2` and upstream with `new`" in body
    # Edits to different words are still combined: one applied to the other's version.
    apart = [_conflict(n, f"vime/m{n}.py", "x = old(a)\n", "x = new(a)\n",
                       f"x = old(fork{n})\n", [101]) for n in range(1, 3)]
    (group,) = group_items(_plan_with(apart))
    assert group.action.startswith("combine by hand: apply the fork's 1-line edit to "
                                   "upstream's version (#101 changed 1 line;")


def test_both_sides_replacing_the_same_words_is_a_pick_not_an_edit_to_apply() -> None:
    # HabanaAI/vllm-fork@65a920e8bf01: `device="cuda"` became `get_device()` in the fork
    # and `self._device` upstream; the fork's edit cannot be applied to upstream's line.
    base = '        t = torch.zeros(n,\n                        device="cuda"),\n'
    item = _conflict(3, "tests/lora/utils.py", base,
                     base.replace('"cuda"', "self._device"),
                     base.replace('"cuda"', "get_device()"), [10223])
    action, choice = recommend(item)
    assert choice is None and "apply the fork's" not in action
    assert action == ('both replaced `"cuda"` in `device="cuda"`, the fork with '
                      '`get_device()` and upstream with `self._device`: pick one or write '
                      'a third')
    text = render_comment([item], _plan())
    assert 'Recommended: both replaced `"cuda"` in `device="cuda"`' in text
    # The fork also wrapped the line in an `if` (vllm/lora/punica.py): say to keep that.
    wrapped = "    if hpu():\n        pass\n    else:\n" + base
    item.update(ours=wrapped.replace('"cuda"', "get_device()"))
    assert recommend(item)[0].endswith("pick one or write a third; keep the fork's other "
                                       "edits here (base → ours shows them)")
    # A bracket opened inside the words is closed inside (ROCm/vllm@65405fdf6142).
    base = "    def ids(self, new: List[int]) -> None:\n"
    item.update(base=base, ours=base.replace("List[int]", "Tuple[int, ...]"),
                theirs=base.replace("self, new", "self,\n            new")
                .replace("List", "GenericSequence"))
    assert recommend(item)[0].startswith("both replaced `List[int]`, the fork with "
                                         "`Tuple[int, ...]` and upstream with "
                                         "`GenericSequence[int]`: pick one")


def test_the_recommendation_counts_the_lines_as_the_items_sentence_does() -> None:
    # Upstream dropped the `if` and re-indented the line it kept; the fork commented the
    # `else` branch's line, which upstream's kept line resembles. The sentence says upstream
    # changed 4 lines: the recommendation must too.
    base = ("    if qkv_format == \"thd\":\n        size = token_len // cp\n    else:\n"
            "        size = max_len // cp\n")
    theirs = "    size = token_len // cp\n"
    ours = base.replace("max_len // cp\n", "max_len // cp  # vime\n")
    prop = propose_hunk(Hunk(ours=ours, base=base, theirs=theirs))
    assert "Upstream replaced 4 lines with 1; the fork added `# vime` at the end of `size = " \
        "max_len // cp`." in prop.reason
    item = _conflict(1, "vime/cp.py", base, theirs, ours, [2100])
    item.update(reason=prop.reason, rule=prop.rule)
    (group,) = group_items(_plan_with([item]))
    assert "apply the fork's 1-line edit to upstream's version (#2100 changed 4 lines;" \
        in group.action


def test_a_flag_groups_title_counts_the_lines_it_flags_not_its_items() -> None:
    flag = _item(1, "docs/glm.md", kind="flag")
    flag.update(reason="flag `--sglang-ep-size`: no vLLM equivalent", start_line=152,
                end_line=152, ours="", base="", suggestion=None,
                choices=["keep", "adapt", "drop"],
                theirs="   --vllm-ep-size 64\n--vllm-speculative-algorithm EAGLE\n")
    (group,) = group_items(_plan_with([flag]))
    assert group.title == ("flag `--sglang-ep-size`: no vLLM equivalent: 2 lines in "
                           "`docs/glm.md`")


def test_a_group_of_two_offers_one_command_for_both() -> None:
    pair = [_conflict(n, f"vime/p{n}.py", "a = 1\n", "a = 2\n", "a = 1\n", [101])
            for n in (1, 2)]
    for p in pair:
        p.update(tier="Confirm", suggestion="a = 2\n", choices=["suggested", "ours", "theirs"])
    body = render_body(_plan_with(pair))
    assert "One command for both: `/sync answer Q1-Q2 suggested`" in body
    assert "One command for all 2" not in body


def test_a_recommendation_without_an_upstream_pr_names_none() -> None:
    from bot.engine.report import recommend

    gone = _conflict(1, "vime/gone.py", "a\n", "", "b\n", [])
    gone.update(rule="upstream deleted, fork changed", choices=["theirs", "ours"])
    action, choice = recommend(gone)
    assert action.startswith("take upstream's deletion unless the fork still needs") \
        and choice == "theirs"
    gone["prs"] = [12]
    assert recommend(gone)[0].startswith("take upstream's deletion (#12) unless")


def test_id_ranges() -> None:
    assert id_ranges(["Q3", "Q1", "Q2", "Q7", "Q9", "Q10"]) == "Q1-Q3,Q7,Q9-Q10"


def test_body_says_why_the_window_ends_and_claims_only_what_was_posted() -> None:
    plan = _plan()
    assert "the head of upstream `main`" in render_body(plan)
    plan["tip_source"] = "#102"
    body = render_body(plan, posted=1)
    assert "because `#102` was asked for as the tip" in body
    assert "1 of 2 review items has a review thread" in body
    assert "review thread" not in render_body(plan)


def test_body_lists_new_files_and_config_warnings() -> None:
    plan = _plan()
    plan["warnings"] = [{"kind": "patch-translated", "path": "docker/x.patch", "key": "k",
                         "message": "the patch file is translated"}]
    body = render_body(plan)
    assert "<details><summary>Added by upstream: 1 file</summary>" in body
    assert "- `vime/new.py`" in body
    assert "`docker/x.patch`: the patch file is translated" in body
    (note,) = warning_annotations(plan)
    assert note["path"] == "docker/x.patch" and note["annotation_level"] == "warning"


_text = st.lists(st.sampled_from(["a", "`", "~", "\n", "<details>", "</details>", "```", " ",
                                  "é", "|"]), max_size=60).map("".join)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ours=_text, theirs=_text, base=_text, scale=st.integers(0, 400))
def test_a_comment_stays_within_the_limit_and_balanced(ours: str, theirs: str, base: str,
                                                       scale: int) -> None:
    item = _conflict(1, "vime/a.py", base * scale, theirs * scale, ours * scale, [101])
    item["suggestion"] = None if scale % 2 else theirs * scale
    text = render_comment([item], _plan(), blob_url="https://example.test/blob/c/vime/a.py")
    assert len(text) <= BODY_LIMIT
    assert is_balanced(text)
    if len(theirs * scale) > 70_000:
        assert "lines shown; see [the whole file at the sync commit]" in text


def test_a_cut_side_says_where_it_is_whole_and_never_names_a_report() -> None:
    long = "".join(f"line {k}\n" for k in range(2000))
    item = _conflict(1, "vime/a.py", "b\n", long, "o\n", [101])
    text = render_comment([item], _plan())
    assert ("*the theirs diff: " in text and " lines shown; the conflict region, L10–15 of "
            "`vime/a.py` at commit 1, has each side whole.*") in text
    assert "full report" not in text
    manual = _item(2, "vime/m.py", kind="manual")
    manual.update(theirs=long, start_line=None, end_line=None)
    text = render_comment([manual], _plan())
    assert "lines shown.*" in text and "full report" not in text


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 1500), title=_text)
@example(n=1473, title="a```</details>aaa</details>aaa")  # code spans of our own tags
def test_a_huge_body_and_check_stay_within_the_limits(n: int, title: str) -> None:
    items = [_conflict(k, f"vime/p{k % 300}.py", "b\n", f"t{k}\n", f"o{k}\n", [100 + k % 7])
             for k in range(1, n + 1)]
    plan = _plan_with(items)
    for e in plan["window"]:
        e["title"] = title * 50
    body = render_body(plan, report_url="https://example.test/r.md")
    assert len(body) <= BODY_LIMIT and is_balanced(body)
    _, summary = render_check_output(plan, {"vime/p1.py": n}, items)
    assert len(summary) <= CHECK_SUMMARY_LIMIT and is_balanced(summary)


def test_a_group_comment_names_every_id_and_one_command() -> None:
    items = [_conflict(n, "vime/a.py", "x\n", "y\n", f"z{n}\n", [101]) for n in (3, 4)]
    for item in items:
        item["rule"] = "already in theirs"  # the evidence that lets `theirs` answer both
    text = render_comment(copy.deepcopy(items), _plan())
    assert text.startswith("**Q3–Q4**: 2 review items in this thread.")
    assert "`/sync answer Q3-Q4 theirs`" in text
    # The body and the check run name the group's ids the same way; commands keep the
    # form the parser takes.
    plan = _plan_with(copy.deepcopy(items))
    assert "- **Q3–Q4** " in render_body(plan)
    _, summary = render_check_output(plan, {"vime/a.py": 2}, copy.deepcopy(items))
    assert "- **Q3–Q4** " in summary and "`/sync answer Q3-Q4 theirs`" in summary
    assert "```suggestion" not in text  # a Decide item without a proposal offers no side
    for item in items:
        item["suggestion"] = f"y\nz{item['id']}\n"
    text = render_comment(copy.deepcopy(items), _plan())
    assert text.count("suggestion\n") == 1  # only the anchored region gets a suggestion


def test_a_decide_comment_recommends_combining_and_lists_the_sides_only_as_answers() -> None:
    item = _conflict(7, "vime/a.py", "x = f(a)\n", "x = f(a, b)\ny = 2\n", "x = g(a)\n", [101])
    text = render_comment([item], _plan())
    (recommended,) = [ln for ln in text.splitlines() if ln.startswith("Recommended:")]
    assert "apply the fork's 1-line edit to upstream's version" in recommended
    assert "/sync answer" not in recommended and "```suggestion" not in text
    assert "`/sync answer Q7 ours` keeps the fork's side, `/sync answer Q7 theirs` takes " \
           "upstream's" in text
    assert "base → ours" in text and "The fork's change (base → ours):" in text


def test_upstreams_deletion_of_a_file_the_fork_changed_is_not_recommended_in_one_command() -> None:
    gone = _item(8, "vime/gone.py", kind="file")
    gone.update(sides={"ours": {"mode": "100644", "oid": "f" * 40}, "theirs": None},
                choices=["theirs", "ours"], start_line=None, end_line=None)
    text = render_comment([gone], _plan())
    (recommended,) = [ln for ln in text.splitlines() if ln.startswith("Recommended:")]
    assert "decide whether the fork still needs its changes" in recommended
    assert "/sync answer" not in recommended


def _one_file(n: int) -> dict[str, Any]:
    items = [_conflict(k, "vime/t.py", f"v{k} = 0\n", f"v{k} = 1\n", f"v{k} = 2\n", [101])
             for k in range(1, n + 1)]
    plan = _plan(n_files=0)
    plan["files"] = [{"path": "vime/t.py", "upstream_path": "slime/t.py", "status": "conflict",
                      "policy": None, "note": "", "binary": False, "review_items": items}]
    return plan


def test_two_hunks_of_a_file_resolved_alike_suggest_the_same_for_the_rest() -> None:
    plan = _one_file(5)
    line = next(ln for ln in render_body(plan, resolved={"Q1", "Q3"}, resolutions={
        "Q1": "theirs", "Q3": "theirs"}).splitlines() if ln.startswith("- [ ] `vime/t.py`"))
    assert line.endswith("· the 2 resolved took upstream's side (theirs); the rest alike? "
                         "`/sync answer Q2,Q4-Q5 theirs`")
    # A suggestion that was the fork's text counts as ours.
    plan["files"][0]["review_items"][0]["suggestion"] = "v1 = 2\n"
    body = render_body(plan, resolved={"Q1", "Q2"}, resolutions={"Q1": "suggested",
                                                                  "Q2": "ours"})
    assert "`/sync answer Q3-Q5 ours`" in body


def test_no_hint_on_one_resolution_mixed_sides_or_hand_edits() -> None:
    plan = _one_file(4)
    for resolved, how in (({"Q1"}, {"Q1": "theirs"}),
                          ({"Q1", "Q2"}, {"Q1": "theirs", "Q2": "ours"}),
                          ({"Q1", "Q2"}, {"Q1": "theirs", "Q2": "edited"}),
                          # an item whose resolution was undone since is not counted
                          ({"Q1"}, {"Q1": "theirs", "Q2": "theirs"})):
        assert "the rest alike?" not in render_body(plan, resolved=resolved, resolutions=how)
    done = render_body(plan, resolved={"Q1", "Q2", "Q3", "Q4"},
                       resolutions=dict.fromkeys(("Q1", "Q2", "Q3", "Q4"), "theirs"))
    assert "the rest alike?" not in done and "- [x] `vime/t.py`" in done


def test_the_rescans_resolutions_reach_the_body() -> None:
    from bot.engine.review import pr_section

    sync = {"resolved": ["Q1", "Q2"], "resolutions": {"Q1": "ours", "Q2": "ours"}}
    assert "`/sync answer Q3 ours`" in pr_section(_one_file(3), sync)


def _proposed(n: int, path: str, ours: str, base: str, theirs: str) -> dict[str, Any]:
    """A review item as the engine writes it, from the engine's own proposal."""
    p = propose(ours, base, theirs, path)
    item = _conflict(n, path, base, theirs, ours, [101])
    item.update(tier=p.tier.value, rule=p.rule, reason=p.reason, question=p.question,
                choices=list(p.choices), suggestion=p.suggestion)
    return item


def test_a_hunk_comment_says_its_reason_once_and_its_choices_once() -> None:
    item = _proposed(7, "vime/a.py", "x = f(a)\ny = 2  # vime\n", "x = f(a)\ny = 2\n",
                     "x = f(a, b)\ny = 2\n")
    assert item["suggestion"] is not None and item["tier"] == "Decide"
    text = render_comment([item], _plan())
    assert text.count(item["reason"]) == 1  # the headline; "Recommended" does not repeat it
    assert item["question"] not in text  # the answer line already lists the choices
    (recommended,) = [ln for ln in text.splitlines() if ln.startswith("Recommended:")]
    assert recommended == ("Recommended: check the starting point, then commit or edit it. "
                           "`/sync answer Q7 suggested`")
    body = render_body(_plan_with([item]))
    assert body.count(item["reason"]) == 1 and item["question"] not in body


def test_upstreams_deletion_of_the_forks_edit_is_recommended_by_command_only() -> None:
    base = "def old(a):\n    x = f(a)\n    return x\n"
    item = _proposed(3, "vime/x.py", base.replace("f(a)", "f(a, vime=True)"), base, "")
    assert item["rule"] == "upstream deleted, fork changed" and item["suggestion"] is None
    (group,) = group_items(_plan_with([item]))
    assert group.command == "/sync answer Q3 theirs"
    assert group.action.startswith("take upstream's deletion (#101) unless the fork still "
                                   "needs these lines")
    text = render_comment([item], _plan())
    assert "```suggestion" not in text and "`/sync answer Q3 theirs`" in text


def test_upstreams_rewrite_of_the_forks_line_is_recommended_as_theirs_never_an_edit_to_apply(
) -> None:
    # The slime window's QA case: the fork's only edit was on a line upstream's rewrite
    # deleted, so there is no line in upstream's version to apply it to. People committed
    # upstream's version in most such hunks (suggest.UPSTREAM_REWROTE's figures).
    from tests.test_suggest import REWRITE, REWRITTEN_BASE, REWRITTEN_FORK

    item = _proposed(3, "vime/rollout/vllm_rollout.py", REWRITTEN_FORK, REWRITTEN_BASE, REWRITE)
    assert item["rule"] == "upstream rewrote, fork changed" and item["suggestion"] is None
    (group,) = group_items(_plan_with([item]))
    assert group.command == "/sync answer Q3 theirs"
    assert group.action == ("take upstream's version (#101) unless the fork's edit still "
                            "matters here; then re-apply it to upstream's new code by hand")
    text = render_comment([item], _plan())
    assert "`/sync answer Q3 theirs`" in text and "```suggestion" not in text
    body = render_body(_plan_with([item]))
    assert "edit to upstream's version" not in text + body
    assert "combine by hand" not in text + body
    # In upstream's file the variant is recommended alike.
    item["rule"] += ", upstream's file"
    assert recommend(item)[1] == "theirs"


def test_add_add_is_recommended_as_one_whole_version_never_an_edit_to_apply() -> None:
    item = _conflict(4, "docs/new.md", "", "# Title\n\nBody.\n", "stub\n", [101])
    item.update(rule="add/add", reason="both sides added this file (add/add)")
    (group,) = group_items(_plan_with([item]))
    assert group.command is None
    assert group.action == ("keep one whole version, the fork's (1 line) or upstream's "
                            "(3 lines): `/sync resolve docs/new.md ours` (or `theirs`)")
    assert "apply the fork's" not in render_body(_plan_with([item]))


def test_nearly_the_same_addition_is_recommended_as_one_side_never_combined() -> None:
    base = "FROM rocm\n\nRUN make\n"
    build = "# triton\nRUN git clone https://github.com/{}/triton.git\nRUN pip install .\n"
    item = _proposed(2, "Dockerfile.rocm", base.replace("\nRUN", "\n" + build.format("ROCm")
                                                         + "RUN"), base,
                     base.replace("\nRUN", "\n" + build.format("ROCmSoftwarePlatform") + "RUN"))
    assert item["rule"] == "both added nearly the same lines" and item["suggestion"] is None
    text = render_comment([item], _plan())
    (recommended,) = [ln for ln in text.splitlines() if ln.startswith("Recommended:")]
    assert recommended.startswith("Recommended: keep one of the two") and "`/sync answer Q2 " \
        "ours` (or `theirs`)" in recommended
    assert "combine by hand" not in text and "```suggestion" not in text
    body = render_body(_plan_with([item]))
    assert "1 hunk where both sides added nearly the same lines: keep one side" in body
    assert "combine by hand" not in body


def test_the_body_counts_open_items_by_what_each_needs_and_follows_the_answers() -> None:
    gone = _item(1, "vime/gone.py", kind="file")  # upstream deleted it: no answer proposed
    gone.update(sides={"ours": {"mode": "100644", "oid": "f" * 40}, "theirs": None},
                choices=["theirs", "ours"], start_line=None, end_line=None)
    start = _proposed(2, "vime/a.py", "x = f(a)\ny = 2  # vime\n", "x = f(a)\ny = 2\n",
                      "x = f(a, b)\ny = 2\n")
    by_hand = _proposed(3, "vime/b.py", "t = 60\n", "t = 30\n", "t = 10\n")
    base = "def old(a):\n    x = f(a)\n    return x\n"
    deleted = _proposed(4, "vime/c.py", base.replace("f(a)", "f(a, v)"), base, "")
    plan = _plan_with([gone, start, by_hand, deleted])
    body = render_body(plan, one_click=["Q2"])  # the review gave Q2 a suggestion button
    assert ("**Open, by what each needs:**\n\n| what it needs | items |\n|---|---|\n"
            "| 1 file one side deleted: keep or delete | Q1 |\n"
            "| 1 hunk to combine by hand (both edits shown as diffs) | Q3 |\n"
            "| 1 hunk with a recommended answer, one command each | Q4 |\n"
            "| 1 starting point to check, one click each | Q2 |\n\n") in body
    # The body is rendered again as items close: the table follows.
    later = render_body(plan, resolved={"Q1", "Q2", "Q4"}, one_click=["Q2"])
    assert ("**Open, by what each needs:**\n\n| what it needs | items |\n|---|---|\n"
            "| 1 hunk to combine by hand (both edits shown as diffs) | Q3 |\n\n") in later
    assert render_body(plan, resolved={"Q1", "Q2", "Q3", "Q4"}).count("what it needs") == 0


def _deleted_by_fork(tier: str | None = None) -> list[dict[str, Any]]:
    from bot.engine.suggest import propose_whole_file

    proposal = propose_whole_file("fork")  # a Decide: keep the fork's deletion
    items = []
    for n in (1, 2):
        gone = _item(n, f"vime/gone{n}.py", kind="file")
        gone.update(sides={"ours": None, "theirs": {"mode": "100644", "oid": "f" * 40}},
                    choices=list(proposal.choices), tier=tier or proposal.tier.value,
                    reason=proposal.reason, start_line=None, end_line=None)
        items.append(gone)
    items.append(_proposed(3, "vime/b.py", "t = 60\n", "t = 30\n", "t = 10\n"))
    return items


def test_deleted_files_with_a_proposal_are_one_command_in_the_needs_table() -> None:
    items = _deleted_by_fork()
    body = render_body(_plan_with(items))
    assert ("| 2 files the fork deleted and upstream changed, with the deletion (ours) "
            "proposed: one command takes it for all, `/sync answer Q1-Q2 ours` | Q1–Q2 |\n"
            "| 1 hunk to combine by hand (both edits shown as diffs) | Q3 |\n") in body
    # The comment says who deleted the file once: the reason already does.
    text = render_comment([items[0]], _plan())
    assert text.count("deleted this file") <= 1 and "1,650 of 1,883" in text
    assert "`/sync answer Q1 ours`" in text


def test_the_deletions_figures_are_said_once_per_sync() -> None:
    items = _deleted_by_fork()
    plan = _plan_with(items)
    first, second = (render_comment([i], plan) for i in items[:2])
    assert "1,650 of 1,883" in first and "figures: see" not in first
    assert "1,650 of 1,883" not in second
    assert "people kept it in 88% of such files (figures: see Q1). Take upstream's" in second
    assert render_body(plan).count("1,650 of 1,883") <= 1  # the body groups them


def test_deleted_files_a_fork_has_learned_to_keep_deleted_are_confirmed_in_one_command() -> None:
    body = render_body(_plan_with(_deleted_by_fork("Confirm")))
    assert ("| 2 files one side deleted, with the fork's side (ours) proposed: one command "
            "confirms all, `/sync answer Q1-Q2 ours` | Q1–Q2 |\n") in body


def test_the_body_says_how_follow_ups_come_only_where_a_file_has_enough_hunks() -> None:
    two = [_conflict(n, "vime/two.py", f"t = {n}0\n", f"t = {n}\n", f"t = {n}00\n", [101])
           for n in (1, 2)]
    assert "follow-up suggestion" not in render_body(_plan_with(two))
    three = [_conflict(n, "vime/three.py", f"t = {n}0\n", f"t = {n}\n", f"t = {n}00\n", [101])
             for n in (3, 4, 5)]
    body = render_body(_plan_with([*two, *three]))
    assert ("In the 1 file with more than 2 conflict hunks, resolve 2 the same way (both "
            "ours, or both theirs) and push: its open hunks then get that side as a one-click "
            "follow-up suggestion.") in body


def test_a_group_of_one_says_its_id_and_path_once_and_counts_many_prs() -> None:
    one = _conflict(1, "vime/one.py", "t = 60\n", "t = 30\n", "t = 10\n", [101])
    gone = _item(2, "vime/gone.py", kind="file")
    gone.update(sides={"ours": None, "theirs": {"mode": "100644", "oid": "f" * 40}},
                prs=[100, 103, 104, 105], start_line=None, end_line=None)
    body = render_body(_plan_with([one, gone]))
    assert body.count("`vime/one.py`") == 2  # the group's title and the checklist
    assert "\n  - L10–15: both sides changed the same lines differently\n" in body
    # Four PRs: the title lists them, the recommendation counts them.
    assert "upstream #100, #103, #104, #105 changed it" in body
    assert ("Recommended: keep the fork's deletion, unless the fork needs these 4 upstream "
            "PRs' change") in body
    # Two PRs are named, and a list takes no 's (Linuxbrew/brew: "#11218, #11391's change").
    gone.update(prs=[100, 103])
    body = render_body(_plan_with([one, gone]))
    assert "unless the fork needs the change of #100 and #103 (then take theirs" in body
    assert ": 1 changed path. " in body  # one path, said so
    # A settled group's title names no path: its items still do.
    settled = _item(3, "vime/kept.py", kind="policy")
    settled.update(tier="Settled", reason="policy `ours`", start_line=None, end_line=None)
    assert "\n  - Q3 `vime/kept.py`: policy `ours`" in render_body(_plan_with([settled]))


def test_a_confirm_that_takes_upstreams_deletion_shows_the_forks_change_it_drops() -> None:
    base = "def old(a):\n    x = f(a)\n    return x\n"
    ours = "def old(a):\n    x = f(a, vime=True)\n    return x\n"
    p = propose_hunk(Hunk(ours, base, "", path="vime/u.py", changed=Changed(2, 40)))
    item = _conflict(7, "vime/u.py", base, "", ours, [101])
    item.update(tier=p.tier.value, rule=p.rule, reason=p.reason, question=p.question,
                choices=list(p.choices), suggestion=p.suggestion)
    assert item["tier"] == "Confirm"
    text = render_comment([item], _plan())
    assert "```suggestion\n```" in text  # one click deletes the region, as upstream did
    assert ("Upstream's version (theirs). It leaves out the fork's change (the second diff "
            "below): commit it unless the fork still needs that change") in text
    # The diffs are open, not folded: the person sees the fork's edit the click drops.
    assert "<details><summary>what each side changed</summary>" not in text
    assert "+    x = f(a, vime=True)" in text
    assert "245 of 274 such hunks (89%)" in text
    assert ("| 1 hunk in upstream's files where upstream's version is proposed (the fork's "
            "edit there is dropped, as people usually do in such files), one click each | Q7 |"
            ) in render_body(_plan_with([item]), one_click=["Q7"])
    assert ("Recommended: take upstream's version (#101) unless the fork still needs "
            "its change here (the comment shows it). `/sync answer Q7 suggested`"
            ) in render_body(_plan_with([item]))


def test_a_proposal_from_the_forks_file_says_what_its_click_leaves_out() -> None:
    ours, base, theirs = "    return rt.alloc(n, domain)\n", "    return alloc(n)\n", \
        "    return alloc(n, flags)\n"
    p = propose_hunk(Hunk(ours, base, theirs, path="vime/gc.py", changed=Changed(90, 10)))
    item = _conflict(5, "vime/gc.py", base, theirs, ours, [101])
    item.update(tier=p.tier.value, rule=p.rule, reason=p.reason, question=p.question,
                choices=list(p.choices), suggestion=p.suggestion)
    text = render_comment([item], _plan())
    assert "```suggestion\n    return rt.alloc(n, domain)\n```" in text
    assert "It leaves out upstream's change (the first diff below)" in text
    assert text.index("```suggestion") < text.index("Upstream's change (base → theirs)")
    assert "+    return alloc(n, flags)" in text  # what the click drops is shown as a diff
    body = render_body(_plan_with([item]), one_click=["Q5"])
    assert ("| 1 hunk in files that are mostly the fork's, with the fork's version proposed "
            "(upstream's change there is left out), one click each | Q5 |") in body
    # Any other starting point keeps the generic row and label.
    other = _proposed(6, "vime/a.py", "x = f(a)\ny = 2  # vime\n", "x = f(a)\ny = 2\n",
                      "x = f(a, b)\ny = 2\n")
    assert "starting point to check" in render_body(_plan_with([other]))
    assert "It leaves out upstream's change" not in render_comment([other], _plan())


def _forks_file_items(ids: range, path: str, changed: Changed) -> list[dict[str, Any]]:
    out = []
    for n in ids:
        ours, base, theirs = (f"    return rt.alloc(n{n}, domain)\n", f"    return alloc(n{n})\n",
                              f"    return alloc(n{n}, flags)\n")
        p = propose_hunk(Hunk(ours, base, theirs, path=path, changed=changed))
        item = _conflict(n, path, base, theirs, ours, [101])
        item.update(tier=p.tier.value, rule=p.rule, reason=p.reason, question=p.question,
                    choices=list(p.choices), suggestion=p.suggestion)
        out.append(item)
    return out


def test_a_files_counts_and_figures_are_said_in_full_once_per_file() -> None:
    # HabanaAI/vllm-fork@bf1b786787e3: "people kept the fork's version in 67% of such
    # hunks of 37 projects' merges (6,901 of 10,310; …)" 22 times in the comments and 22
    # in the PR body, "of the 2,319 lines changed in it" 14 times.
    from bot.engine.suggest import FORK_FILE_FIGURE

    gc = _forks_file_items(range(1, 4), "vime/gc.py", Changed(1943, 376))
    rt = _forks_file_items(range(4, 6), "vime/rt.py", Changed(90, 10))
    plan = _plan(n_files=0)
    plan["files"] = [{"path": f[0]["path"], "upstream_path": f[0]["path"], "status": "conflict",
                      "policy": None, "note": "", "binary": False, "review_items": f}
                     for f in (gc, rt)] + plan["files"]
    texts = [render_comment([i], plan) for i in gc + rt]
    assert [FORK_FILE_FIGURE in t for t in texts] == [True, False, False, True, False]
    assert [t.count("lines changed in it since the two split") for t in texts] == \
        [1, 0, 0, 1, 0]
    # A later item still says what the file is and the gist, and where the rest is.
    # Q1 says both the counts and the figures: one back-reference names it, once.
    assert ("in a file that is mostly the fork's (counts and figures: see Q1). Upstream "
            "changed `return alloc(n2)` to") in texts[1]
    assert ("The proposal keeps the fork's version, so upstream's change here is not applied: "
            "people kept the fork's version in 67% of such hunks.") in texts[1]
    assert [t.count("see Q") for t in texts] == [0, 1, 1, 0, 1]
    assert "(counts and figures: see Q4)" in texts[4] and "(figures: see" not in texts[4]
    body = render_body(plan)
    assert body.count(FORK_FILE_FIGURE) == 2 and body.count("(counts and figures: see Q1)") == 2
    # Without the plan (one item alone), the comment says it all.
    assert FORK_FILE_FIGURE in render_comment([gc[1]])


def test_counts_and_figures_said_by_two_items_keep_a_reference_each() -> None:
    from bot.engine.report.figures import brief_reasons
    from bot.engine.suggest import FORK_FILE_FIGURE

    counts = ": of the 2,319 lines changed in it since the two split, the fork changed 1,943 " \
             "and upstream 376."
    reasons = [f"Kept: {FORK_FILE_FIGURE}",  # Q1 says the figures only
               f"In the fork's file{counts}",  # Q2 the counts only
               f"In the fork's file{counts} Kept: {FORK_FILE_FIGURE}"]
    plan = _plan(n_files=1)
    plan["files"][0]["review_items"] = [
        dict(_item(n, "vime/f0.py"), reason=r) for n, r in enumerate(reasons, 1)]
    short = brief_reasons(plan)
    assert set(short) == {"Q3"}
    assert short["Q3"] == ("In the fork's file (counts: see Q2). Kept: people kept the fork's "
                           "version in 67% of such hunks (figures: see Q1).")


def test_each_figure_in_short_keeps_its_figures_number() -> None:
    import re

    from bot.engine.suggest import FIGURE_GISTS, FILE_COUNTS, FORK_FILE_FIGURE, TIER_FIGURES

    assert set(FIGURE_GISTS) == {FORK_FILE_FIGURE, *TIER_FIGURES.values()}
    for full, gist in FIGURE_GISTS.items():
        assert re.findall(r"\d+%|\d+ of \d+", gist)[0] in full
    # The counts of a file that is upstream's are found as those of one that is the fork's.
    base = "def old(a):\n    x = f(a)\n    return x\n"
    p = propose_hunk(Hunk(base.replace("f(a)", "f(a, v)"), base, "", changed=Changed(2, 40)))
    found = FILE_COUNTS.search(p.reason)
    assert found and found.group() == (": of the 42 lines changed in it since the two split, "
                                       "upstream changed 40 and the fork 2.")
