"""Flagged upstream lines as review items: one question per flag and file, folded into
the conflict item whose region holds them."""

from __future__ import annotations

import regex

from bot.engine.config import Flag
from bot.engine.flags import Hit, add_flag_items
from bot.engine.model import ItemKind, ReviewItem, Tier

SPEC = Flag("--sglang-speculative-", "no vLLM equivalent",
            regex.compile("--sglang-speculative-"))
EP = Flag("--sglang-ep-size", "no vLLM equivalent", regex.compile("--sglang-ep-size"))


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
        "Upstream added `--vllm-speculative-a 4` (upstream wrote `--sglang-speculative-a 4`), "
        "`--vllm-speculative-b 4` (upstream wrote `--sglang-speculative-b 4`), "
        "`--vllm-speculative-c 4` (upstream wrote `--sglang-speculative-c 4`) and 2 more: "
        "no vLLM equivalent. Keep these 5 lines as they are, adapt them, or drop them?")
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
        "Upstream's side adds `--vllm-speculative-a 4` (upstream wrote "
        "`--sglang-speculative-a 4`), `--vllm-speculative-b 4` (upstream wrote "
        "`--sglang-speculative-b 4`), flagged `--sglang-speculative-`: no vLLM equivalent.")


def test_the_flag_is_a_sentence_of_its_own_after_any_reason() -> None:
    item = conflict(Tier.DECIDE, 10, 16, None)
    item.reason = "both sides added this file (add/add); two new files are never glued together"
    add_flag_items([item], "run.sh", "run.sh", [hit(SPEC, "  --sglang-speculative-a 4\n", 12)])
    assert "never glued together. Upstream's side adds `--vllm-speculative-a 4`" in item.reason
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
