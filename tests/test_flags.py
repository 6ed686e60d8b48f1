"""Flagged upstream lines as review items: one question per flag and file, folded into
the conflict item whose region holds them."""

from __future__ import annotations

import regex

from bot.engine.config import Flag
from bot.engine.flags import FLAG_CHOICES, ForkUse, Hit, add_flag_items, fork_use, line_list
from bot.engine.model import ItemKind, ReviewItem, Tier
from bot.engine.report.comments import render_comment
from bot.engine.report.groups import recommend
from bot.engine.report.needs import workload
from bot.engine.spelling import Uses, option_at, search

SPEC = Flag("--sglang-speculative-", "no vLLM equivalent",
            regex.compile("--sglang-speculative-"))
EP = Flag("--sglang-ep-size", "no vLLM equivalent", regex.compile("--sglang-ep-size"))
BOTH = Flag("--sglang-(ep-size|speculative-)", "no vLLM equivalent",
            regex.compile("--sglang-(ep-size|speculative-)"))


def hit(flag: Flag, line: str, anchor: int | None) -> Hit:
    return Hit(flag, line, line.replace("sglang", "vllm").rstrip("\n"), anchor)


def conflict(tier: Tier, start: int, end: int, suggestion: str | None,
             theirs: str = "b\n") -> ReviewItem:
    return ReviewItem(id="", kind=ItemKind.CONFLICT, path="run.sh", upstream_path="run.sh",
                      tier=tier, reason="the two edits merge word by word.", ours="a\n",
                      theirs=theirs, start_line=start, end_line=end, suggestion=suggestion,
                      question="Commit both edits combined?",
                      choices=["suggested", "ours", "theirs"], rule="merge word by word")


def test_the_lines_of_one_flag_in_one_file_are_one_question() -> None:
    # The shape of slime #2120: five speculative-decoding options added to one script.
    items: list[ReviewItem] = []
    lines = [f"  --sglang-speculative-{k} 4\n" for k in ("a", "b", "c", "d", "e")]
    add_flag_items(items, "run.sh", "run.sh",
                   [hit(SPEC, ln, 40 + i) for i, ln in enumerate(lines)]
                   + [hit(EP, "  --sglang-ep-size 64\n", 30)])
    assert [(i.kind, i.tier, i.start_line) for i in items] == [
        (ItemKind.FLAG, Tier.DECIDE, 40), (ItemKind.FLAG, Tier.DECIDE, 30)]
    spec = items[0]
    # The lines as the fork's file holds them (translated), upstream's words beside them.
    assert spec.theirs == "".join(ln.replace("sglang", "vllm") for ln in lines)
    assert spec.choices == ["keep", "adapt", "drop"]
    assert spec.question == (
        "Upstream added 5 flagged lines at L40–44, e.g. `--sglang-speculative-a 4` (here "
        "`--vllm-speculative-a 4`): no vLLM equivalent. Keep these 5 lines as they are, "
        "adapt them, or drop them?")
    assert items[1].question is not None
    assert items[1].question.endswith("Keep it as it is, adapt it, or drop it?")


def test_a_flagged_line_inside_a_confirm_region_makes_it_a_decide() -> None:
    items = [conflict(Tier.CONFIRM, 10, 16, "a\nb\n")]
    add_flag_items(items, "run.sh", "run.sh", [hit(SPEC, "  --sglang-speculative-a 4\n", 12),
                                               hit(SPEC, "  --sglang-speculative-b 4\n", 13)])
    (item,) = items  # no item of its own: the hunk's comment is where it is decided
    assert item.tier is Tier.DECIDE and item.rule == "merge word by word, flagged"
    assert item.suggestion == "a\nb\n" and item.choices == ["suggested", "ours", "theirs"]
    assert item.reason.endswith(
        "Upstream's side adds `--sglang-speculative-a 4` (here `--vllm-speculative-a 4`), "
        "`--sglang-speculative-b 4` (here `--vllm-speculative-b 4`), flagged "
        "`--sglang-speculative-`: no vLLM equivalent.")


def test_the_flag_is_a_sentence_of_its_own_after_any_reason() -> None:
    item = conflict(Tier.DECIDE, 10, 16, None)
    item.reason = "both sides added this file (add/add); two new files are never glued together"
    add_flag_items([item], "run.sh", "run.sh", [hit(SPEC, "  --sglang-speculative-a 4\n", 12)])
    assert "never glued together. Upstream's side adds `--sglang-speculative-a 4`" in item.reason
    assert ".. Upstream" not in item.reason


def test_a_flagged_region_never_offers_upstreams_side() -> None:
    items = [conflict(Tier.CONFIRM, 10, 16, "b\n", theirs="b\n")]
    add_flag_items(items, "run.sh", "run.sh", [hit(SPEC, "  --sglang-speculative-a 4\n", 11)])
    assert items[0].tier is Tier.DECIDE and items[0].suggestion is None
    assert items[0].choices == ["ours", "theirs"]


def test_a_line_outside_every_region_or_not_found_gets_a_flag_item() -> None:
    items = [conflict(Tier.DECIDE, 10, 16, None)]
    add_flag_items(items, "run.sh", "run.sh", [hit(SPEC, "  --sglang-speculative-a 4\n", 20),
                                               hit(SPEC, "  --sglang-speculative-b 4\n", None)])
    assert [i.kind for i in items] == [ItemKind.CONFLICT, ItemKind.FLAG]
    assert items[1].start_line == 20 and items[1].theirs.count("\n") == 2
    assert items[0].reason == "the two edits merge word by word."


# -- the lines' numbers, and how the fork writes the options -----------------------------

def test_a_question_names_the_line_of_every_flagged_line() -> None:
    # One comment sits on the first line; the others are named, as runs.
    items: list[ReviewItem] = []
    add_flag_items(items, "glm.md", "glm.md",
                   [hit(EP, "   --sglang-ep-size 64\n", 154)]
                   + [hit(SPEC, f"--sglang-speculative-{k} 4\n", 167 + i)
                      for i, k in enumerate("abcd")]
                   + [hit(SPEC, "--sglang-speculative-e 4\n", None)])
    assert [i.start_line for i in items] == [154, 167]
    assert items[1].question is not None and items[1].question.startswith(
        "Upstream added 5 flagged lines at L167–170, 1 of them not found in the merged "
        "file, e.g. `--sglang-speculative-a 4` (here `--vllm-speculative-a 4`)")
    assert items[0].question is not None and items[0].question.startswith(
        "Upstream added `--sglang-ep-size 64` (here `--vllm-ep-size 64`) at L154: ")
    assert line_list([154, 167, 168, 169, 170, 172]) == "L154, L167–170 and L172"


EP_MD = [Uses("--vllm-ep-size", (("examples/run.sh", 210), ("scripts/run-glm5-744B-A40B.sh", 110),
                                 ("scripts/run-kimi.sh", 128))),
         Uses("--vLLM-ep-size", (("docs/en/qwen3.md", 65), ("docs/zh/qwen3.md", 64)))]


def spelled(flag: Flag, line: str, merged: str, anchor: int, option: str,
            uses: list[Uses], near: str = "scripts/run-glm5.2-744B-A40B.sh") -> Hit:
    return Hit(flag, line, merged, anchor, option, fork_use(uses, option, near))


def test_the_fork_s_spelling_is_the_one_most_files_use_with_the_nearest_example() -> None:
    use = fork_use(EP_MD, "--vLLM-ep-size", "scripts/run-glm5.2-744B-A40B.sh")
    assert use == ForkUse("--vllm-ep-size", 3, "scripts/run-glm5-744B-A40B.sh", 110,
                          (("--vLLM-ep-size", 2),))
    # A tie keeps the spelling as written: nothing to change.
    tie = [Uses("--a-b", (("x.sh", 1),)), Uses("--A-B", (("y.md", 2),))]
    assert fork_use(tie, "--A-B", "z.md") == ForkUse("--A-B", 1, "y.md", 2, (("--a-b", 1),))
    assert fork_use([], "--a-b", "x.sh") is None


def test_an_option_the_fork_spells_otherwise_is_proposed_in_its_spelling() -> None:
    # slime #2093 in vime: the `*.md` prose rule wrote `--vLLM-ep-size`; the fork's
    # scripts pass `--vllm-ep-size`.
    items: list[ReviewItem] = []
    add_flag_items(items, "docs/en/glm.md", "docs/en/glm.md", [
        spelled(EP, "   --sglang-ep-size 64\n", "   --vLLM-ep-size 64", 154, "--vLLM-ep-size",
                EP_MD)], searched=114)
    (item,) = items
    assert item.question == (
        "Upstream added `--sglang-ep-size 64` (here `--vLLM-ep-size 64`) at L154: no vLLM "
        "equivalent. But the fork spells it `--vllm-ep-size` (3 of the files upstream "
        "changed, e.g. `scripts/run-glm5-744B-A40B.sh` L110). Change it to the fork's "
        "spelling?")
    data = item.to_json()
    assert data["flagged"]["answer"] == "adapt"
    assert data["flagged"]["lines"][0]["proposed"] == "   --vllm-ep-size 64"
    assert recommend(data) == ("change it to the fork's spelling, then answer `adapt`",
                               "adapt")
    data["id"] = "Q3"
    body = render_comment([data])
    assert ("- L154 `--vLLM-ep-size 64` → `--vllm-ep-size 64`: the fork's spelling (3 of the "
            "files upstream changed, e.g. `scripts/run-glm5-744B-A40B.sh` L110)") in body
    assert "Searched: fork main's versions of the files upstream changed in this window " \
        "(114)." in body
    assert "Recommended: change it to the fork's spelling, then answer `adapt`. " \
        "`/sync answer Q3 adapt`" in body


def test_options_the_fork_writes_as_here_are_kept() -> None:
    spec = [Uses("--vllm-speculative-a", (("scripts/run-glm5-744B-A40B.sh", 121),))]
    items: list[ReviewItem] = []
    add_flag_items(items, "run.sh", "run.sh", [
        spelled(EP, "  --sglang-ep-size 64\n", "  --vllm-ep-size 64", 168, "--vllm-ep-size",
                EP_MD),
        spelled(SPEC, "  --sglang-speculative-a 4\n", "  --vllm-speculative-a 4", 195,
                "--vllm-speculative-a", spec)], searched=114)
    items += [ReviewItem(id="", kind=ItemKind.FLAG, path="a.sh", upstream_path="a.sh",
                         tier=Tier.DECIDE, reason="flag", theirs="x\n", start_line=1,
                         end_line=1, question="?", choices=list(FLAG_CHOICES))]
    (ep, spec_item, plain) = [i.to_json() for i in items]
    assert ep["question"].endswith(
        "But the fork already uses it as written: `--vllm-ep-size` (3 of the files upstream "
        "changed, e.g. `scripts/run-glm5-744B-A40B.sh` L110). Keep it as it is?")
    assert recommend(ep)[1] == recommend(spec_item)[1] == "keep"
    for i, q in zip((ep, spec_item, plain), ("Q14", "Q15", "Q16"), strict=True):
        i["id"] = q
    # The PR body's table: one command keeps both; the third is still a question.
    assert workload([ep, spec_item, plain]) == (
        "2 flag questions whose options the fork already uses as written: keep them, "
        "`/sync answer Q14-Q15 keep` · 1 flag question: keep, adapt or drop the flagged lines")


def test_an_option_missing_from_the_fork_leaves_the_question_open() -> None:
    items: list[ReviewItem] = []
    add_flag_items(items, "run.sh", "run.sh", [
        spelled(BOTH, "  --sglang-ep-size 64\n", "  --vllm-ep-size 64", 168, "--vllm-ep-size",
                EP_MD),
        spelled(BOTH, "  --sglang-speculative-z 1\n", "  --vllm-speculative-z 1", 199,
                "--vllm-speculative-z", [])], searched=114)
    (data,) = [i.to_json() for i in items]
    assert data["question"] == (
        "Upstream added 2 flagged lines at L168 and L199, e.g. `--sglang-ep-size 64` (here "
        "`--vllm-ep-size 64`): no vLLM equivalent. The fork has 1 of these 2 options, e.g. "
        "`--vllm-ep-size` (3 of the files upstream changed, e.g. "
        "`scripts/run-glm5-744B-A40B.sh` L110); `--vllm-speculative-z` is in none of them. "
        "Keep these 2 lines as they are, adapt them, or drop them?")
    assert recommend(data) == (
        "keep, adapt or drop L199: its option is in none of the files upstream changed; the "
        "fork has the other lines' options", None)
    data["id"] = "Q14"
    assert "- L199 `--vllm-speculative-z 1`: in none of the files upstream changed" \
        in render_comment([data])
    # Found nowhere: said so; not searched (no option, or no search): nothing is claimed.
    none: list[ReviewItem] = []
    add_flag_items(none, "run.sh", "run.sh", [spelled(
        SPEC, "  --sglang-speculative-z 1\n", "  --vllm-speculative-z 1", 9,
        "--vllm-speculative-z", [])], searched=114)
    assert none[0].question is not None and none[0].question.endswith(
        "None of the files upstream changed (114 on fork main) writes it either. Keep it as "
        "it is, adapt it, or drop it?")
    unsearched: list[ReviewItem] = []
    add_flag_items(unsearched, "run.sh", "run.sh", [spelled(
        SPEC, "  --sglang-speculative-z 1\n", "  --vllm-speculative-z 1", 9,
        "--vllm-speculative-z", [])])
    assert unsearched[0].question is not None and "fork" not in unsearched[0].question


def test_the_fork_is_searched_in_any_case_and_with_dashes_or_underscores() -> None:
    files = [("a.sh", "x\n  --vllm-ep-size 8 \\\n"), ("b.md", "Pass `--vLLM-ep-size`.\n"),
             ("c.py", 'p.add_argument("--vllm_ep_size")\n--vllm-ep-size\n'),
             ("d.sh", "--vllm-ep-size-max 3 ----vllm-ep-size x--vllm-ep-size\n")]
    found = search(files, ["--vLLM-ep-size", "not an option", "--none-here"])
    assert found.files == 4
    assert found.uses("--VLLM_EP_SIZE") == [
        Uses("--vllm-ep-size", (("a.sh", 2), ("c.py", 2))), Uses("--vLLM-ep-size", (("b.md", 1),)),
        Uses("--vllm_ep_size", (("c.py", 1),))]
    assert found.uses("--none-here") == []
    assert option_at("  --sglang-speculative-algorithm EAGLE", 2, 23) == \
        "--sglang-speculative-algorithm"
    assert option_at("import sglang.srt", 7, 13) is None


def test_a_flagged_line_in_a_conflict_region_says_how_the_fork_writes_its_option() -> None:
    items = [conflict(Tier.CONFIRM, 160, 172, "a\n")]
    add_flag_items(items, "run.sh", "run.sh", [
        spelled(EP, "  --sglang-ep-size 64\n", "  --vllm-ep-size 64", 168, "--vllm-ep-size",
                EP_MD)], searched=114)
    (item,) = items
    assert item.tier is Tier.DECIDE and item.reason.endswith(
        "flagged `--sglang-ep-size`: no vLLM equivalent. But the fork already uses it as "
        "written: `--vllm-ep-size` (3 of the files upstream changed, e.g. "
        "`scripts/run-glm5-744B-A40B.sh` L110).")
