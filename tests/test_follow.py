"""Follow-up suggestions: once a file's resolved hunks all took one side, the open ones.

Pure functions on plan items and a hand-written diff, and the posting through a fake
GitHub (the end-to-end flow through the simulator is in ``tests/test_e2e.py``).
"""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

from gidgethub import BadRequest

from bench.learn_table import follow_lines
from bot.engine.anchor import PrDiff
from bot.engine.follow import (
    FOLLOW_MIN,
    TWIN,
    all_follow_ups,
    file_follow,
    follow_marker,
    follow_ups,
    placed,
    twin_follow_ups,
    twin_groups,
    twin_texts,
)
from bot.engine.gate import Remaining
from bot.engine.report.comments import render_follow_comment
from bot.engine.report.groups import follow_hint
from bot.engine.review import follow_review
from tests.test_e2e import suggestion_of

PATH = "vime/t.py"


def hunk(n: int, **kw: Any) -> dict[str, Any]:
    return {"id": f"Q{n}", "kind": "conflict", "path": PATH, "tier": "Decide",
            "base": f"t_{n} = {n}\n", "ours": f"t_{n} = {n}0  # fork\n",
            "theirs": f"t_{n} = {n}000  # upstream\n", "suggestion": None} | kw


ITEMS = [hunk(1), hunk(2), hunk(3), hunk(4)]


def plan(*items: dict[str, Any]) -> dict[str, Any]:
    return {"files": [{"path": PATH, "status": "conflict", "review_items": list(items)}]}


def test_two_resolved_hunks_that_took_one_side_make_a_follow_up() -> None:
    assert FOLLOW_MIN == 2
    assert file_follow(ITEMS, {"Q1"}, {"Q1": "ours"}) is None  # one is not enough
    follow = file_follow(ITEMS, {"Q1", "Q3"}, {"Q1": "ours", "Q3": "ours"})
    assert follow is not None and follow.side == "ours" and follow.done == ("Q1", "Q3")
    assert [i["id"] for i in follow.open] == ["Q2", "Q4"]
    # Mixed sides, or a hunk people wrote themselves: nothing to follow.
    assert file_follow(ITEMS, {"Q1", "Q3"}, {"Q1": "ours", "Q3": "theirs"}) is None
    assert file_follow(ITEMS, {"Q1", "Q3"}, {"Q1": "ours", "Q3": "edited"}) is None
    # A committed suggestion that was one side's text counts as that side.
    items = [hunk(1, suggestion="t_1 = 1000  # upstream\n"), *ITEMS[1:]]
    follow = file_follow(items, {"Q1", "Q2"}, {"Q1": "suggested", "Q2": "theirs"})
    assert follow is not None and follow.side == "theirs"
    # Nothing open: nothing to follow.
    assert file_follow(ITEMS[:2], {"Q1", "Q2"}, {"Q1": "ours", "Q2": "ours"}) is None


def test_follow_ups_skip_what_was_posted_and_what_the_first_comment_already_offers() -> None:
    said = {"Q1": "ours", "Q2": "ours"}
    items = [*ITEMS[:3], hunk(4, suggestion="t_4 = 40  # fork\n"), hunk(5)]
    follows = follow_ups(plan(*items), {"Q1", "Q2"}, said)
    assert [(f.item["id"], f.side, f.after) for f in follows] == \
        [("Q3", "ours", ("Q1", "Q2")), ("Q5", "ours", ("Q1", "Q2"))]
    assert follows[0].text == "t_3 = 30  # fork\n"
    assert [f.item["id"] for f in follow_ups(plan(*items), {"Q1", "Q2"}, said,
                                             already=["Q3"])] == ["Q5"]
    # The checklist's hint names the same side and the same open hunks.
    assert follow_hint(items, {"Q1", "Q2"}, said).endswith("`/sync answer Q3-Q5 ours`")


DIFF = """\
diff --git a/vime/t.py b/vime/t.py
index 1111111..2222222 100644
--- a/vime/t.py
+++ b/vime/t.py
@@ -1,2 +1,9 @@
 t_0 = 0
+<<<<<<< ours
+t_3 = 30  # fork
+||||||| base
+t_3 = 3
+=======
+t_3 = 3000  # upstream
+>>>>>>> theirs
 t_9 = 9
"""


def remaining(item_id: str, start: int, end: int, **kw: Any) -> Remaining:
    return Remaining(PATH, item_id, start, end, "markers", **kw)


def test_a_follow_up_goes_only_on_a_whole_region_one_diff_hunk_shows() -> None:
    diff = PrDiff.parse(DIFF)
    follows = follow_ups(plan(*ITEMS), {"Q1", "Q2"}, {"Q1": "ours", "Q2": "ours"})
    got = placed(follows, [remaining("Q3", 2, 8), remaining("Q4", 20, 26),
                           remaining(None, 9, 9, orphan=True)], diff)  # type: ignore[arg-type]
    assert [(f.item["id"], start, end) for f, start, end in got] == [("Q3", 2, 8)]
    # A region the rescan no longer finds (resolved meanwhile) gets nothing.
    assert placed(follows, [], diff) == []


def test_the_follow_up_review_suggests_the_side_and_shows_what_it_drops() -> None:
    diff = PrDiff.parse(DIFF)
    follows = follow_ups(plan(*ITEMS), {"Q1", "Q2"}, {"Q1": "ours", "Q2": "ours"})
    got = placed(follows, [remaining("Q3", 2, 8), remaining("Q4", 40, 46)], diff)
    built = follow_review("a" * 40, got, {PATH: ["Q3", "Q4"]})
    assert built is not None
    review, carried = built
    assert [f.item["id"] for f in carried] == ["Q3"]
    assert review["commit_id"] == "a" * 40 and review["event"] == "COMMENT"
    assert review["body"].endswith(follow_marker("a" * 40))
    assert f"- `{PATH}`: Q3 → ours (as Q1–Q2)" in review["body"]
    (comment,) = review["comments"]
    assert (comment["path"], comment["start_line"], comment["line"]) == (PATH, 2, 8)
    assert comment["side"] == comment["start_side"] == "RIGHT"
    body = comment["body"]
    assert suggestion_of(body) == "t_3 = 30  # fork\n"
    assert body.startswith("**Q3 · follow-up: the fork's side (ours), like Q1–Q2**")
    assert "+t_3 = 3000  # upstream" in body  # what committing it drops
    assert "`/sync answer Q3 theirs` takes upstream's side instead" in body
    assert "`/sync answer Q3-Q4 ours`" in body


def test_a_follow_up_over_a_starting_point_says_there_are_two_to_choose_from() -> None:
    items = [*ITEMS[:2], hunk(3, suggestion="t_3 = 30  # fork\nt_3b = 1  # upstream\n")]
    (follow,) = follow_ups(plan(*items), {"Q1", "Q2"}, {"Q1": "ours", "Q2": "ours"})
    body = render_follow_comment(follow, ["Q3"])
    assert body is not None and suggestion_of(body) == "t_3 = 30  # fork\n"
    assert "offers another starting point (the rule's); commit one of the two." in body
    (plain,) = follow_ups(plan(*ITEMS[:3]), {"Q1", "Q2"}, {"Q1": "ours", "Q2": "ours"})
    assert "another starting point" not in (render_follow_comment(plain, ["Q3"]) or "")


def test_a_side_too_long_for_a_comment_is_never_cut_into_a_suggestion() -> None:
    long = "".join(f"t_{n} = {n}  # a long fork line that goes on and on\n" for n in range(3000))
    (follow,) = follow_ups(plan(*ITEMS[:2], hunk(3, ours=long)), {"Q1", "Q2"},
                           {"Q1": "ours", "Q2": "ours"})
    assert render_follow_comment(follow, ["Q3"]) is None
    assert follow_review("b" * 40, [(follow, 2, 8)], {}) is None
    # Backticks in the text get a longer fence: the content cannot close the suggestion.
    (follow,) = follow_ups(plan(*ITEMS[:2], hunk(3, ours="x = '```'\n")), {"Q1", "Q2"},
                           {"Q1": "ours", "Q2": "ours"})
    body = render_follow_comment(follow, ["Q3"])
    assert body is not None and suggestion_of(body) == "x = '```'\n"


def github_like(gh: Any, *, refuse: str | None = None) -> list[dict[str, Any]]:
    """Just enough of GitHub behind the FakeGH: reviews kept; a 422 naming ``refuse``."""
    made: list[dict[str, Any]] = []
    base = "/repos/o/r/pulls/7"

    def post(request: Any) -> dict[str, Any]:
        paths = [c["path"] for c in request.data["comments"]]
        if refuse in paths:
            error = BadRequest(422, "Unprocessable Entity")  # type: ignore[arg-type]
            error.errors = [f"Line could not be resolved for {refuse}"]  # type: ignore[attr-defined]
            raise error
        made.append(request.data)
        return {"id": len(made)}

    gh.on("GET", f"{base}/reviews", lambda r: made)
    gh.on("POST", f"{base}/reviews", post)
    return made


def two_file_review() -> dict[str, Any]:
    return {"commit_id": "c" * 40, "event": "COMMENT",
            "body": "follow-ups\n\n" + follow_marker("c" * 40),
            "comments": [{"path": "vime/a.py", "line": 8, "side": "RIGHT", "body": "a"},
                         {"path": "vime/b.py", "line": 8, "side": "RIGHT", "body": "b"}]}


async def test_a_follow_up_review_is_posted_once(fake_gh: Any) -> None:
    from bot.github.pulls import post_follow_review

    made = github_like(fake_gh)
    review = two_file_review()
    assert await post_follow_review(fake_gh, "o/r", 7, review, follow_marker("c" * 40)) == [0, 1]
    assert made == [review]
    writes = fake_gh.write_count
    # The job runs again for the same head: found by its marker, not posted twice.
    assert await post_follow_review(fake_gh, "o/r", 7, review, follow_marker("c" * 40)) == [0, 1]
    assert fake_gh.write_count == writes and len(made) == 1


async def test_a_refused_follow_up_comment_is_left_out_and_the_rest_go_out(fake_gh: Any) -> None:
    from bot.github.pulls import post_follow_review

    made = github_like(fake_gh, refuse="vime/a.py")
    kept = await post_follow_review(fake_gh, "o/r", 7, two_file_review(),
                                    follow_marker("c" * 40))
    assert kept == [1]
    (review,) = made
    assert [c["path"] for c in review["comments"]] == ["vime/b.py"]


def case(merge: str, line: int, taken: str, *, right: bool = False, path: str = PATH,
         ours: str | None = None, theirs: str | None = None,
         committed: str | None = None) -> SimpleNamespace:
    ours, theirs = ours or f"o{line}\n", theirs or f"t{line}\n"
    return SimpleNamespace(repo="r/x", merge=merge, path=path, line=line, ours=ours,
                           base=f"b{line}\n", theirs=theirs, suggestion=None, right=right,
                           ours_right=taken == "ours", theirs_right=taken == "theirs",
                           committed=committed or {"ours": ours, "theirs": theirs}.get(taken,
                                                                                      "x\n"))


def test_the_replay_counts_follow_ups_as_the_app_posts_them() -> None:
    # One file: ours, ours, then ours (right) and theirs (wrong); another file mixed.
    cases = [case("m", 1, "ours"), case("m", 2, "ours"), case("m", 3, "ours"),
             case("m", 4, "theirs", right=True),
             case("n", 1, "ours"), case("n", 2, "theirs"), case("n", 3, "ours")]
    hint, twins, offered, one_click = follow_lines(cases)
    assert "right in 1 of 2" in hint and "alike in 0 of 0" in twins
    assert offered.endswith("2 hunks, right in 1 (50.0%)")
    # The first review had 1 right (m:4); the follow-up gains m:3 and loses m:4.
    assert re.search(r"1 of 7 \(14\.3%; at the first review 14\.3%: 1 gained, 1 lost\)",
                     one_click)


def test_the_replay_offers_a_twin_the_text_its_resolved_twins_got() -> None:
    # The same conflict in three files of one merge: people wrote "both\n" in the first
    # two (a twin follow-up then offers it at the second and third: right, then wrong).
    same = {"ours": "o\n", "theirs": "t\n"}
    cases = [case("m", 1, "edited", path="a.json", committed="both\n", **same),
             case("m", 1, "edited", path="b.json", committed="both\n", **same),
             case("m", 1, "edited", path="c.json", committed="other\n", **same),
             # Another merge's copy is not a twin: twins are found within one merge.
             case("n", 1, "edited", path="a.json", committed="both\n", **same)]
    _hint, twins, offered, one_click = follow_lines(cases)
    assert twins.endswith("alike in 1 of 2 (50.0%); offered as follow-ups at 2, right at 1")
    assert offered.endswith("2 hunks, right in 1 (50.0%)")
    assert re.search(r"1 of 4 \(25\.0%; at the first review 0\.0%: 1 gained, 0 lost\)",
                     one_click)


# -- twins: an open hunk identical to resolved ones gets the text they got -------------
def twin(n: int, path: str, **kw: Any) -> dict[str, Any]:
    return {"id": f"Q{n}", "kind": "conflict", "path": path, "tier": "Decide",
            "base": '  "lodash": "4.17.20",\n', "ours": '  "lodash": "4.17.21-fork",\n',
            "theirs": '  "lodash": "4.17.21",\n', "suggestion": None} | kw


def two_files(*items: dict[str, Any]) -> dict[str, Any]:
    """A plan of ``items`` by file, its twins marked the way a plan marks them."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for i in items:
        groups.setdefault((i["ours"], i["base"], i["theirs"]), []).append(i)
    marked = []
    for i in items:
        same = groups[(i["ours"], i["base"], i["theirs"])]
        marked.append(i | ({"twins": {"group": same[0]["id"], "count": len(same) - 1, "some": [
            {"id": o["id"], "path": o["path"]} for o in same if o is not i][:3]}}
            if len(same) > 1 else {}))
    paths = dict.fromkeys(i["path"] for i in items)
    return {"files": [{"path": p, "status": "conflict",
                       "review_items": [i for i in marked if i["path"] == p]} for p in paths]}


def test_a_twin_gets_the_text_people_wrote_at_its_resolved_twin() -> None:
    items = [twin(1, "a/package.json"), twin(2, "b/package.json"), twin(3, "c/package.json"),
             hunk(4)]
    wrote = '  "lodash": "4.17.21", "fork": true,\n'
    follows = twin_follow_ups(two_files(*items), {"Q1"}, {"Q1": "edited"}, {"Q1": wrote})
    assert [(f.item["id"], f.side, f.after, f.text) for f in follows] == \
        [("Q2", TWIN, ("Q1",), wrote), ("Q3", TWIN, ("Q1",), wrote)]
    # An answer without a push counts by what it takes; twins that got different texts,
    # or a resolution whose text is unknown, make no follow-up.
    said = twin_follow_ups(two_files(*items), {"Q1"}, {"Q1": "theirs"}, {})
    assert [f.text for f in said] == ['  "lodash": "4.17.21",\n'] * 2
    assert twin_follow_ups(two_files(*items), {"Q1", "Q2"}, {"Q1": "edited", "Q2": "ours"},
                           {"Q1": wrote}) == []
    assert twin_follow_ups(two_files(*items), {"Q1"}, {"Q1": "edited"}, {}) == []
    # Not twice, and not where the hunk's own suggestion is that text already.
    assert [f.item["id"] for f in twin_follow_ups(
        two_files(items[0], items[1], twin(3, "c/package.json", suggestion=wrote)),
        {"Q1"}, {"Q1": "edited"}, {"Q1": wrote}, already=["Q2"])] == []


def test_a_twin_follow_up_comes_before_its_files_side() -> None:
    # File PATH: Q1, Q2 took ours, so Q3 and Q4 follow ours; Q4 is also the twin of Q9,
    # resolved by hand in another file: Q4 gets the twin's text.
    items = [hunk(1), hunk(2), hunk(3), hunk(4), hunk(4) | {"id": "Q9", "path": "other/t.py"}]
    wrote = "t_4 = 4  # both\n"
    plan_json = two_files(*items)
    follows = all_follow_ups(plan_json, {"Q1", "Q2", "Q9"},
                             {"Q1": "ours", "Q2": "ours", "Q9": "edited"}, {"Q9": wrote})
    assert [(f.item["id"], f.side, f.text) for f in follows] == [
        ("Q3", "ours", "t_3 = 30  # fork\n"), ("Q4", TWIN, wrote)]
    # Twins are what the plan marked: without the mark (a plan from before), no twin.
    assert list(twin_groups(plan_json["files"][0]["review_items"])) == ["Q4"]
    unmarked = {"files": [{"path": PATH, "review_items": items[:4]},
                          {"path": "other/t.py", "review_items": items[4:]}]}
    assert twin_follow_ups(unmarked, {"Q9"}, {"Q9": "edited"}, {"Q9": wrote}) == []


def test_the_twin_comment_offers_the_text_and_shows_what_it_changes() -> None:
    wrote = '  "lodash": "4.17.21", "fork": true,\n'
    (f,) = twin_follow_ups(two_files(twin(1, "a/package.json"), twin(2, "b/package.json")),
                           {"Q1"}, {"Q1": "edited"}, {"Q1": wrote})
    body = render_follow_comment(f, ["Q2"])
    assert body is not None
    assert body.startswith("**Q2 · follow-up: as resolved at Q1** — this conflict is "
                           "identical to Q1 (the same fork, base and upstream lines), which "
                           "was resolved to a text of its own (neither side as it was)")
    assert suggestion_of(body) == wrote
    assert "Against the fork's side (ours), it changes:" in body
    assert '+  "lodash": "4.17.21", "fork": true,' in body
    # A twin resolved to one side says which, and what that drops.
    (g,) = twin_follow_ups(two_files(twin(1, "a/package.json"), twin(2, "b/package.json")),
                           {"Q1"}, {"Q1": "ours"}, {})
    side_body = render_follow_comment(g, ["Q2"])
    assert side_body is not None and "resolved to the fork's side (ours)" in side_body
    assert "Committing it drops upstream's change:" in side_body
    review = follow_review("b" * 40, [(f, 3, 9)], {"b/package.json": ["Q2"]})
    assert review is not None
    assert "- `b/package.json`: Q2 → twin, as resolved at Q1" in review[0]["body"]
    assert "identical to hunks already resolved" in review[0]["body"]


def test_a_twin_in_thousands_of_files_keeps_the_review_body_within_githubs_limit() -> None:
    items = [twin(n, f"pkg{n:04d}/very/deep/folder/of/a/monorepo/package-lock.json")
             for n in range(1, 2001)]
    follows = twin_follow_ups(two_files(*items), {"Q1"}, {"Q1": "ours"}, {})
    assert len(follows) == 1999
    built = follow_review("c" * 40, [(f, 3, 9) for f in follows], {})
    assert built is not None
    review, carried = built
    assert len(carried) == len(review["comments"]) == 1999
    assert len(review["body"]) <= 65_536 and "more files (each comment says its own)" in \
        review["body"]
    assert review["body"].endswith(follow_marker("c" * 40))


def test_a_plan_marks_twins_with_their_group_a_count_and_a_few_of_them() -> None:
    from bot.engine.classify import TWINS_SHOWN, mark_twins
    from bot.engine.model import ItemKind, ReviewItem, Tier

    def item(n: int, path: str, ours: str = "b\n") -> ReviewItem:
        return ReviewItem(id=f"Q{n}", kind=ItemKind.CONFLICT, path=path, upstream_path=path,
                          tier=Tier.DECIDE, reason="", ours=ours, base="a\n", theirs="c\n")

    # 20,000 copies of one lock-file hunk: each names three, not 19,999 (linear, and the
    # JSON report stays small), the ones in other files first.
    items = [item(n, f"pkg{n // 2}/package-lock.json") for n in range(1, 20_001)]
    alone = item(20_001, "src/a.py", ours="other\n")
    mark_twins([*items, alone])
    assert alone.twins is None
    first, second = items[0], items[1]
    assert first.twins is not None and second.twins is not None
    assert (first.twins["group"], first.twins["count"]) == ("Q1", 19_999)
    assert len(first.twins["some"]) == TWINS_SHOWN == 3
    assert all(s["path"] != second.path for s in second.twins["some"])  # other files first
    assert items[-1].twins is not None and items[-1].twins["group"] == "Q1"
    assert item(1, "x").to_json().get("twins") is None
    assert first.to_json()["twins"] == first.twins


def test_a_comment_names_a_few_twins_and_counts_the_rest() -> None:
    from bot.engine.report.comments import render_comment

    # The group's first item carries the whole comment and names a few of the others.
    first = twin(6, "pkg6/package-lock.json", start_line=3, end_line=9,
                 choices=["ours", "theirs"], prs=[], reason="both changed",
                 twins={"group": "Q6", "count": 2999, "some": [
                     {"id": "Q1", "path": "pkg1/package-lock.json"},
                     {"id": "Q2", "path": "pkg6/package-lock.json"},
                     {"id": "Q3", "path": "pkg3/package-lock.json"}]})
    body = render_comment([first])
    (line,) = [b for b in body.split("\n\n") if "Twin" in b]
    assert line.startswith("**Twins:** Q1 in `pkg1/package-lock.json`, Q2 in this file, Q3 "
                           "in `pkg3/package-lock.json` and 2,996 more are this very conflict")
    assert "all 2,999 get your resolution" in line and "/sync answer" not in line
    assert "follow-up; people resolved such twins alike in 4,381 of 4,422 cases (99.1%)." \
        in line
    assert "Upstream's change (base → theirs)" in body
    few = dict(first, twins={"group": "Q6", "count": 1,
                             "some": [{"id": "Q1", "path": "pkg1/package-lock.json"}]})
    (line,) = [b for b in render_comment([few]).split("\n\n") if "Twin" in b]
    assert line.startswith("**Twin:** Q1 in `pkg1/package-lock.json` is this very conflict")
    assert line.endswith("`/sync answer Q1,Q6 ours` (or `theirs`); once this one is resolved "
                         "by hand and pushed, `/sync answer Q1 twin` gives it that text.")
    # With a proposal, the recommended `suggested` comes first (HabanaAI/vllm-fork@
    # bf1b786787e3 Q33 offered `ours` while recommending `suggested`).
    proposed = dict(few, suggestion='  "lodash": "4.17.21-fork",\n',
                    choices=["suggested", "ours", "theirs"])
    text = render_comment([proposed])
    assert "Recommended: check the starting point, then commit or edit it. `/sync answer Q6 " \
        "suggested`" in text
    assert "`/sync answer Q1,Q6 suggested` (or `ours` or `theirs`); once this one" in text
    two = dict(first, twins={"group": "Q6", "count": 2, "some": [
        {"id": "Q1", "path": "pkg1/package-lock.json"}, {"id": "Q2", "path": "pkg6/x.json"}]})
    (line,) = [b for b in render_comment([two]).split("\n\n") if "Twin" in b]
    assert "push: both get your resolution" in line and "all 2 " not in line
    # Every other copy's comment is short: where the first is, and its answers.
    copy = dict(first, id="Q7", path="pkg7/package-lock.json", twins={
        "group": "Q6", "count": 2999, "some": [{"id": "Q6", "path": "pkg6/package-lock.json"}]})
    short = render_comment([copy])
    assert short.startswith("**Q7 · Decide** — the same conflict as Q6 in "
                            "`pkg6/package-lock.json` (the same fork, base and upstream lines; "
                            "3,000 copies in this sync), whose comment says what each side "
                            "changed. Resolve Q6 or any copy and push")
    assert "Upstream's change" not in short and "Recommended" not in short
    assert "`/sync answer Q7 ours`" in short
    assert "alike in 4,381 of 4,422 cases (99.1%)." in short and "(99.1%))" not in short
    # Two copies: not "any copy" but the two by name.
    pair = dict(copy, twins={"group": "Q6", "count": 1, "some": [
        {"id": "Q6", "path": "pkg6/package-lock.json"}]})
    assert "2 copies in this sync), whose comment says what each side changed. Resolve Q6 or " \
        "this one (Q7) and push: the other then gets that resolution" in render_comment([pair])
    assert len(short) < len(body) - 350  # the first's recommendation names both versions


def test_twins_resolved_alike_get_one_command_for_all_in_the_review() -> None:
    items = [twin(n, f"pkg{n}/package.json") for n in range(1, 6)]
    follows = twin_follow_ups(two_files(*items), {"Q1"}, {"Q1": "ours"}, {})
    assert [f.taken for f in follows] == ["ours"] * 4
    built = follow_review("d" * 40, [(f, 3, 9) for f in follows], {})
    assert built is not None
    assert ("In one command:\n- the 4 open twins of Q1, resolved to ours: "
            "`/sync answer Q2-Q5 ours` takes it for all of them") in built[0]["body"]
    # Resolved to a text of its own: no side to answer with; `twin` gives them that text.
    wrote = '  "lodash": "4.17.21", "fork": true,\n'
    mine = twin_follow_ups(two_files(*items), {"Q1"}, {"Q1": "edited"}, {"Q1": wrote})
    assert [f.taken for f in mine] == [None] * 4
    built = follow_review("d" * 40, [(f, 3, 9) for f in mine], {})
    assert built is not None
    assert ("In one command:\n- the 4 open twins of Q1, resolved by hand: "
            "`/sync answer Q2-Q5 twin` gives them all that text") in built[0]["body"]
    assert "`/sync answer Q2-Q5 ours`" not in built[0]["body"]
    # What `twin` writes: every open twin, its own suggestion or not; none once all agree
    # no more (a second twin resolved to another text).
    assert twin_texts(two_files(*items), {"Q1"}, {"Q1": "edited"}, {"Q1": wrote}) == {
        f"Q{n}": wrote for n in range(2, 6)}
    assert twin_texts(two_files(*items), {"Q1", "Q2"}, {"Q1": "edited", "Q2": "edited"},
                      {"Q1": wrote, "Q2": "other\n"}) == {}
    assert twin_texts(two_files(*items), set(), {}, {}) == {}


def test_the_replay_counts_the_checklists_hint_even_where_a_twin_is_offered() -> None:
    # a.json's conflict recurs as z.json's third hunk; z.json's first two took ours.
    same = {"ours": "o\n", "theirs": "t\n"}
    cases = [case("m", 3, "ours", path="a.json", **same),  # the same base as z.json:3
             case("m", 1, "ours", path="z.json"), case("m", 2, "ours", path="z.json"),
             case("m", 3, "ours", path="z.json", **same)]
    hint, twins, offered, _ = follow_lines(cases)
    assert "right in 1 of 1" in hint  # the checklist names ours at z.json's third hunk
    assert twins.endswith("alike in 1 of 1 (100.0%); offered as follow-ups at 1, right at 1")
    assert offered.endswith("1 hunks, right in 1 (100.0%)")  # the twin, not a second one
