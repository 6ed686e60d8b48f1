"""Review-comment bodies: what a thread's items are, who changed them, what we recommend,
and a one-click suggestion for the anchored region, always within GitHub's limits. Pure."""

from __future__ import annotations

from typing import Any

from bot.engine.report.groups import id_ranges, pr_label, recommend, who_deleted
from bot.engine.report.limits import BODY_LIMIT, SIDE_LIMIT, balanced_cut, cut_side, fence

Json = dict[str, Any]


def _prs_line(item: Json, plan: Json | None) -> str:
    prs = list(item.get("prs") or [])
    if not prs:
        return ""
    if plan is None:
        return "Upstream: " + ", ".join(f"#{n}" for n in prs)
    return "Upstream: " + "; ".join(pr_label(plan, [n]) for n in prs)


def _suggestion(item: Json) -> tuple[str, str] | None:
    """The one-click replacement for the item's whole region, and what it does."""
    if item.get("kind") != "conflict":
        return None
    if item.get("suggestion") is not None:
        return item["suggestion"], "Proposed resolution (one click replaces the whole marker " \
                                   "region):"
    return item.get("theirs") or "", (
        "No safe proposal. One click takes upstream's side (theirs); reply "
        f"`/sync answer {item['id']} ours` to keep ours instead:")


def _sides(item: Json, budget: int, url: str | None) -> str:
    """ours / base / theirs in a closed ``<details>``, each cut to ``budget`` with a link."""
    parts = ["<details><summary>ours / base / theirs</summary>", ""]
    for label, key in (("ours (fork)", "ours"), ("base' (upstream at cutoff, translated)", "base"),
                       ("theirs' (upstream at tip, translated)", "theirs")):
        text, note = cut_side(item.get(key) or "", budget, url, label.split(" ")[0])
        parts += [f"{label}:", fence(text)] + ([note] if note else [])
    return "\n".join([*parts, "", "</details>"])


def _item_block(item: Json, plan: Json | None, *, anchored: bool, side_budget: int,
                url: str | None, with_suggestion: bool) -> list[str]:
    out = [f"**{item['id']} · {item['tier']}** — {item['reason']}"]
    if item.get("kind") == "file":
        who = who_deleted(item)
        if who == "fork":
            out.append("The fork deleted this file; upstream changed it.")
        elif who == "upstream":
            out.append("Upstream deleted this file; the fork changed it.")
    prs = _prs_line(item, plan)
    if prs:
        out.append(prs)
    if item.get("question") and item["tier"] != "Settled":
        out.append(item["question"])
    action, choice = recommend(item)
    if item["tier"] != "Settled" and item.get("kind") != "policy":
        out.append(f"Recommended: {action}."
                   + (f" `/sync answer {item['id']} {choice}`" if choice else ""))
    proposal = _suggestion(item) if anchored else None
    if proposal is not None:
        text, what = proposal
        if with_suggestion:
            out += [what, fence(text, "suggestion")]
        else:  # never cut a suggestion: a partial one would be a wrong one-click answer
            out.append("The proposal is too long to show in one comment; "
                       f"`/sync answer {item['id']} "
                       f"{'suggested' if item.get('suggestion') is not None else 'theirs'}` "
                       "applies it.")
    if item.get("kind") == "conflict":
        out.append(_sides(item, side_budget, url))
    elif item.get("theirs"):
        text, note = cut_side(item["theirs"], side_budget * 3, url, "upstream's diff")
        out.append(fence(text, "diff" if item.get("kind") == "manual" else ""))
        if note:
            out.append(note)
    if item.get("choices"):
        out.append(f"Answer: `/sync answer {item['id']} <{'|'.join(item['choices'])}>`")
    return out


def render_comment(items: list[Json], plan: Json | None = None, *, anchor: str | None = None,
                   blob_url: str | None = None, limit: int = BODY_LIMIT) -> str:
    """One review-thread body for ``items`` (the ids it names), within ``limit``.

    The suggestion block is for ``anchor``'s region (default: the first item with a
    region), since a suggestion replaces the lines the comment sits on. ``blob_url``
    links the whole file at the sync commit where a long side is cut.
    """
    if not items:
        raise ValueError("a comment carries at least one review item")
    if anchor is None:
        anchor = next((str(i["id"]) for i in items if i.get("start_line") is not None), None)
    for budget, with_suggestion in ((SIDE_LIMIT, True), (SIDE_LIMIT // 6, True), (200, True),
                                    (200, False)):
        blocks: list[str] = []
        if len(items) > 1:
            blocks.append(_group_header(items))
        for item in items:
            blocks += _item_block(item, plan, anchored=item["id"] == anchor,
                                  side_budget=budget, url=blob_url,
                                  with_suggestion=with_suggestion)
        text = "\n\n".join(blocks)
        if len(text) <= limit:
            return text
    return balanced_cut(text, limit, "… (shortened: see the full report)")


def _group_header(items: list[Json]) -> str:
    ids = id_ranges(str(i["id"]) for i in items)
    choices = {recommend(i)[1] for i in items}
    line = f"**{ids}**: {len(items)} review items in this thread."
    if len(choices) == 1 and None not in choices:
        line += f" One command answers them all: `/sync answer {ids} {choices.pop()}`"
    return line


def render_review_comment(item: Json, plan: Json | None = None, *,
                          blob_url: str | None = None) -> str:
    """One review comment for one item: what, why, which PRs, a ```suggestion``` for it."""
    return render_comment([item], plan, blob_url=blob_url)


__all__ = ["render_comment", "render_review_comment"]
