"""Review-comment bodies: what a thread's items are, who changed them, what we recommend,
and a one-click suggestion for the anchored region, always within GitHub's limits. Pure."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

from bot.engine.flags import SEARCHED, where_used
from bot.engine.follow import EVIDENCE, TWIN, TWIN_EVIDENCE, TWIN_FIGURE, FollowUp
from bot.engine.report.body import code_span
from bot.engine.report.figures import brief_reasons
from bot.engine.report.groups import (
    drops_fork,
    id_list,
    id_ranges,
    own_question,
    pr_label,
    recommend,
    shown_ids,
    who_deleted,
)
from bot.engine.report.limits import BODY_LIMIT, SIDE_LIMIT, balanced_cut, cut_side, fence
from bot.engine.suggest import FORK_FILE

Json = dict[str, Any]


def _prs_line(item: Json, plan: Json | None) -> str:
    prs = list(item.get("prs") or [])
    if not prs:
        return ""
    # Lines upstream left as they were are in the conflict for its edit next to them.
    head = "Upstream's edit next to these lines: " if item.get("kind") == "conflict" and \
        item.get("theirs") == item.get("base") else "Upstream: "
    if plan is None:
        return head + ", ".join(f"#{n}" for n in prs)
    return head + "; ".join(pr_label(plan, [n]) for n in prs)


def _suggestion(item: Json) -> tuple[str, str] | None:
    """The one-click replacement for the item's whole region, and what it does.

    Only the engine's own proposal is offered: a Decide item without one gets no
    suggestion block, since one side's text would silently drop the other side's edit.
    """
    if item.get("kind") != "conflict" or item.get("suggestion") is None:
        return None
    what = ("A starting point, not a sure answer (what it keeps is said above); check it "
            "before you commit it" if item.get("tier") == "Decide" else "Proposed resolution")
    if item.get("tier") == "Decide" and item.get("rule") == FORK_FILE:
        what = ("The fork's version (ours). It leaves out upstream's change (the first diff "
                "below): commit it if the fork's version already covers or replaces that change")
    elif drops_fork(item):
        what = ("Upstream's version (theirs). It leaves out the fork's change (the second diff "
                "below): commit it unless the fork still needs that change")
    if item["suggestion"] == "":  # an empty block deletes the lines: say it is meant
        return "", f"{what} (one click deletes the whole marker region; the block is empty " \
                   "on purpose):"
    blanks = _blank_lines(item["suggestion"])
    if blanks:  # a block of blank lines looks empty: say what it holds
        return item["suggestion"], (f"{what} (one click replaces the whole marker region "
                                    f"with {blanks}, all the block holds):")
    return item["suggestion"], f"{what} (one click replaces the whole marker region):"


def _blank_lines(text: str) -> str:
    """``one blank line`` (or ``3 blank lines``) for a text of blank lines only, else ""."""
    if not text or text.strip():
        return ""
    n = len(_diff_lines(text))
    return "one blank line" if n == 1 else f"{n} blank lines"


def change_diff(old: str, new: str, old_name: str, new_name: str) -> str:
    """A short unified diff of one side's change (one line of context)."""
    lines = list(difflib.unified_diff(_diff_lines(old), _diff_lines(new), old_name, new_name,
                                      n=1, lineterm=""))
    return "\n".join(lines) + "\n" if lines else f"(no change from {old_name})\n"


def _diff_lines(text: str) -> list[str]:
    if not text:
        return []  # no lines at all, not one empty line: deleting a blank line is a change
    return [ln.rstrip("\r") for ln in text.split("\n")][: -1 if text.endswith("\n") else None]


def _sides(item: Json, budget: int, url: str | None) -> str:
    """What each side changed, as short diffs cut to ``budget`` with a link: open on a
    Decide item, folded in a ``<details>`` otherwise. An add/add diffs the two versions."""
    # Where a cut diff can be read whole: commit 1's region has every side (diff3).
    where = (f"the conflict region, L{item['start_line']}–{item['end_line']} of "
             f"`{item['path']}` at commit 1, has each side whole"
             if item.get("start_line") is not None else None)
    if item.get("rule") == "add/add":
        text, note = cut_side(change_diff(item.get("ours") or "", item.get("theirs") or "",
                                          "ours", "theirs"), budget, url, "the diff", where)
        return "\n\n".join(["How upstream's version (theirs) differs from the fork's (ours):",
                             fence(text, "diff"), *([note] if note else [])])
    parts = []
    for label, key in (("Upstream's change (base → theirs):", "theirs"),
                       ("The fork's change (base → ours):", "ours")):
        diff = change_diff(item.get("base") or "", item.get(key) or "", "base", key)
        text, note = cut_side(diff, budget, url, f"the {key} diff", where)
        parts += [label, fence(text, "diff"), *([note] if note else [])]
    if item.get("tier") == "Decide" or drops_fork(item):
        return "\n\n".join(parts)
    return "\n\n".join(["<details><summary>what each side changed</summary>", *parts,
                         "</details>"])


def _flag_lines(flagged: Json, budget: int) -> str:
    """Each flagged line: where it is, the fork's spelling proposed for it, and how fork
    main writes its option (``flags.py`` searched it); cut to ``budget`` characters."""
    searched = int(flagged.get("searched") or 0)
    lines = list(flagged.get("lines") or [])
    out: list[str] = []
    for k, ln in enumerate(lines):
        where = f"L{ln['line']}" if ln.get("line") is not None else "(not found in the file)"
        text = code_span(str(ln["text"]).strip())
        if ln.get("proposed"):
            text += f" → {code_span(str(ln['proposed']).strip())}"
        fork, note = ln.get("fork"), ""
        if searched and ln.get("option"):
            if fork is None:
                note = f": in none of {SEARCHED}"
            else:
                note = (": as the fork writes it" if fork["spelling"] == ln["option"]
                        else ": the fork's spelling") + f" ({where_used(fork)})"
        entry = f"- {where} {text}{note}"
        if budget - len(entry) < 0 and out:
            out.append(f"- … and {len(lines) - k} more")
            break
        budget -= len(entry) + 1
        out.append(entry)
    text = "\n".join(out)
    if searched:
        text += f"\n\nSearched: fork main's versions of {SEARCHED} in this window ({searched})."
    return text


def _answer_line(item: Json) -> str:
    """Every answer the item takes. A conflict region takes ``ours`` and ``theirs`` always
    (``choices`` leaves out a side the proposal already is), ``suggested`` with a
    proposal, which may be one side's text: then the line says so."""
    choices = [str(c) for c in item["choices"]]
    if item.get("kind") == "manual":
        return _other_answers(item)
    if item.get("kind") != "conflict":
        return f"Answer: `/sync answer {item['id']} <{'|'.join(choices)}>`"
    q, proposal = item["id"], item.get("suggestion")
    line = (f"Answer: `/sync answer {q} ours` keeps the fork's side, `/sync answer {q} theirs` "
            "takes upstream's")
    if proposal is not None:
        same = next((f" (the same text as `{side}`)" for side in ("ours", "theirs")
                     if proposal == item.get(side)), "")
        line += f", `/sync answer {q} suggested` commits the suggestion{same}"
    return line + "; or edit the region by hand."


def _other_answers(item: Json) -> str:
    """A port's answers besides the recommended one (its line names that one)."""
    q, choice = item["id"], recommend(item)[1]
    what = {"theirs": "takes upstream's version",
            "done": "once you have ported it by hand",
            "skip": "leaves upstream's change out"}
    others = [f"`/sync answer {q} {c}` {what.get(c, '')}".rstrip()
              for c in (str(c) for c in item["choices"]) if c != choice]
    if not others:
        return ""
    return "Or " + (", or ".join(others) if len(others) < 3
                    else ", ".join(others[:-1]) + ", or " + others[-1]) + "."


def _twins_line(item: Json, twins: Json) -> str:
    """Where else this very conflict is, and how one resolution serves them all."""
    some = [s for s in twins.get("some") or [] if isinstance(s, dict)]
    count = int(twins.get("count") or len(some))
    ids = [str(s["id"]) for s in some]
    more = count - len(ids)
    named = ", ".join(str(s["id"]) + (f" in `{s['path']}`" if s.get("path") != item["path"]
                                      else " in this file") for s in some)
    named += f" and {more:,} more" if more > 0 else ""
    one = count == 1
    line = (f"**Twin{'' if one else 's'}:** {named} {'is' if one else 'are'} this very "
            "conflict (the same fork, base and upstream lines). Resolve this one and push: "
            f"{'it gets' if one else 'both get' if count == 2 else f'all {count:,} get'} "
            "your resolution as a one-click "
            f"follow-up; people resolved such twins alike in {TWIN_FIGURE}.")
    if more <= 0:
        # The recommended answer first, as the item's own line gives it.
        choice = recommend(item)[1]
        first, *others = [choice] + [c for c in ("ours", "theirs") if c != choice] \
            if choice else ["ours", "theirs"]
        line += (" Or answer all at once: `/sync answer "
                 f"{id_ranges([str(item['id']), *ids])} {first}` (or "
                 f"{' or '.join(f'`{c}`' for c in others)}); once this one is "
                 f"resolved by hand and pushed, `/sync answer {id_ranges(ids)} twin` gives "
                 f"{'it' if one else 'the others'} that text.")
    return line


def _copy_of(item: Json) -> Json | None:
    """The twins of an item that is not its group's first (its comment is short: the
    first one's says what each side changed), or None."""
    twins = item.get("twins")
    if not isinstance(twins, dict) or not twins.get("group") or item["tier"] == "Settled":
        return None
    return twins if str(twins["group"]) != str(item["id"]) else None


def _copy_line(item: Json, twins: Json) -> str:
    group = str(twins["group"])
    path = next((str(s.get("path")) for s in twins.get("some") or []
                 if isinstance(s, dict) and str(s.get("id")) == group), None)
    where = f" in `{path}`" if path and path != item["path"] else ""
    copies = int(twins.get("count") or 1) + 1
    which = (f"Resolve {group} or this one ({item['id']}) and push: the other then gets"
             if copies == 2 else f"Resolve {group} or any copy and push: this one then gets")
    return (f"the same conflict as {group}{where} (the same fork, base and upstream lines; "
            f"{copies:,} copies in this sync), whose comment says what each side changed. "
            f"{which} that resolution as a one-click follow-up; people resolved such twins "
            f"alike in {TWIN_FIGURE}.")


def _item_block(item: Json, plan: Json | None, *, anchored: bool, side_budget: int,
                url: str | None, with_suggestion: bool, reason: str) -> list[str]:
    copy = _copy_of(item)
    if copy is not None:
        out = [f"**{item['id']} · {item['tier']}** — {_copy_line(item, copy)}"]
    else:
        out = [f"**{item['id']} · {item['tier']}** — {reason}"]
    if item.get("kind") == "file" and "deleted this file" not in item.get("reason", ""):
        who = who_deleted(item)
        if who == "fork":
            out.append("The fork deleted this file; upstream changed it.")
        elif who == "upstream":
            out.append("Upstream deleted this file; the fork changed it.")
    prs = _prs_line(item, plan)
    if prs:
        out.append(prs)
    # A port's question is its recommendation, which names the command: said once.
    question = own_question(item) if copy is None and item.get("kind") != "manual" else None
    if question:
        out.append(question)
    earlier = item.get("earlier")
    if item.get("kind") == "conflict" and earlier and not earlier.get("applies"):
        # The region changed again since someone resolved it: show what they had.
        text, note = cut_side(earlier.get("text") or "", side_budget, url, "earlier")
        out += ["Your earlier resolution (it does not fit the new region as it is):",
                fence(text)] + ([note] if note else [])
    action, choice = recommend(item)
    # A copy's "combine by hand" points at diffs its first twin's comment shows.
    if item["tier"] != "Settled" and item.get("kind") != "policy" and (copy is None or choice):
        out.append(f"Recommended: {action}."
                   + (f" `/sync answer {item['id']} {choice}`" if choice else ""))
    twins = item.get("twins")
    if isinstance(twins, dict) and twins and item["tier"] != "Settled" and copy is None:
        out.append(_twins_line(item, twins))
    proposal = _suggestion(item) if anchored else None
    if not anchored and item.get("kind") == "conflict" and item.get("suggestion") is not None:
        # No one-click here (the comment does not cover the whole region): show the
        # proposal as code, for the command to take.
        if not item["suggestion"].strip():  # an empty-looking fence would say nothing
            kept = _blank_lines(item["suggestion"]) or "nothing"
            out.append(f"Proposed resolution: delete the region's lines, keeping {kept} "
                       f"in their place (`/sync answer {item['id']} suggested` commits it).")
        else:
            text, note = cut_side(item["suggestion"], side_budget, url, "the proposal")
            out += [f"Proposed resolution (`/sync answer {item['id']} suggested` commits "
                    "it):", fence(text), *([note] if note else [])]
    if proposal is not None:
        text, what = proposal
        if with_suggestion:
            out += [what, fence(text, "suggestion")]
        else:  # never cut a suggestion: a partial one would be a wrong one-click answer
            out.append("The proposal is too long to show in one comment; "
                       f"`/sync answer {item['id']} suggested` applies it.")
    if item.get("kind") == "conflict":
        if copy is None:
            out.append(_sides(item, side_budget, url))
    elif item.get("kind") == "flag" and item.get("flagged"):
        out.append(_flag_lines(item["flagged"], side_budget * 3))
    elif item.get("theirs"):
        text, note = cut_side(item["theirs"], side_budget * 3, url, "upstream's diff")
        out.append(fence(text, "diff" if item.get("kind") == "manual" else ""))
        if note:
            out.append(note)
    answers = _answer_line(item) if item.get("choices") else ""
    if answers:
        out.append(answers)
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
    # A file's counts and figures in full on its first item only.
    brief = brief_reasons(plan, {str(i["path"]) for i in items}) if plan is not None else {}
    for budget, with_suggestion in ((SIDE_LIMIT, True), (SIDE_LIMIT // 6, True), (200, True),
                                    (200, False)):
        blocks: list[str] = []
        if len(items) > 1:
            blocks.append(_group_header(items))
        for item in items:
            blocks += _item_block(item, plan, anchored=item["id"] == anchor,
                                  side_budget=budget, url=blob_url,
                                  with_suggestion=with_suggestion,
                                  reason=brief.get(str(item["id"])) or str(item["reason"]))
        text = "\n\n".join(blocks)
        if len(text) <= limit:
            return text
    return balanced_cut(text, limit, "… (shortened to fit GitHub's limit)")


def _group_header(items: list[Json]) -> str:
    ids = [str(i["id"]) for i in items]
    choices = {recommend(i)[1] for i in items}
    line = f"**{id_list(ids)}**: {len(items)} review items in this thread."
    if len(choices) == 1 and None not in choices:
        line += (f" One command answers them all: `/sync answer {id_ranges(ids)} "
                 f"{choices.pop()}`")
    return line


def render_review_comment(item: Json, plan: Json | None = None, *,
                          blob_url: str | None = None) -> str:
    """One review comment for one item: what, why, which PRs, a ```suggestion``` for it."""
    return render_comment([item], plan, blob_url=blob_url)


def render_follow_comment(follow: FollowUp, open_ids: Sequence[str], *,
                          limit: int = BODY_LIMIT) -> str | None:
    """The comment of a follow-up suggestion (:mod:`bot.engine.follow`): the side the
    file's resolved hunks all took, in one click, and what committing it drops. None when
    the side's text does not fit: a suggestion is never cut."""
    if follow.side == TWIN:
        return _twin_comment(follow, limit)
    item, side = follow.item, follow.side
    other = "theirs" if side == "ours" else "ours"
    whose = "the fork's side (ours)" if side == "ours" else "upstream's side (theirs)"
    dropped = ("upstream's change (base → theirs)" if side == "ours"
               else "the fork's change (base → ours)")
    after = id_list(list(follow.after))
    head = (f"**{item['id']} · follow-up: {whose}, like {after}** — every hunk of this file "
            f"resolved so far ({after}) took {whose}, so this one offers it in one click. "
            f"{EVIDENCE[0].upper()}{EVIDENCE[1:]}: check that {dropped.split(' (')[0]} "
            "below can go.")
    rest = [x for x in open_ids if x != item["id"]]
    tail = (f"Other answers: `/sync answer {item['id']} {other}` takes "
            f"{'upstream' if other == 'theirs' else 'the fork'}'s side instead, or edit the "
            "region by hand." + (f" Every open hunk of this file alike, in one command: "
                                 f"`/sync answer {id_ranges([item['id'], *rest])} {side}`."
                                 if rest else ""))
    diff = change_diff(item.get("base") or "", item.get(other) or "", "base", other)
    return _follow_body(follow, head, f"One click takes {whose} for the whole region:",
                        f"Committing it drops {dropped}:", diff, f"the {other} diff", tail,
                        limit)


def _twin_comment(follow: FollowUp, limit: int) -> str | None:
    """A twin's follow-up: the text its identical, resolved twins got, in one click, and
    how that text differs from the fork's side. None when it does not fit."""
    item, text = follow.item, follow.text
    after = shown_ids(follow.after)
    one = len(follow.after) == 1
    side = follow.taken
    what = {"ours": "the fork's side (ours)", "theirs": "upstream's side (theirs)",
            None: "a text of its own (neither side as it was)"}[side]
    head = (f"**{item['id']} · follow-up: as resolved at {after}** — this conflict is "
            f"identical to {after} (the same fork, base and upstream lines), which "
            f"{'was' if one else 'were all'} resolved to {what}, so this one offers "
            f"{'it' if one else 'the same'} in one click. "
            f"{TWIN_EVIDENCE[0].upper()}{TWIN_EVIDENCE[1:]}.")
    tail = ("Other answers: `/sync answer "
            f"{item['id']} ours` or `theirs` takes one side instead, or edit the region by hand.")
    if side is not None:
        other = "theirs" if side == "ours" else "ours"
        caption = ("Committing it drops upstream's change:" if side == "ours"
                   else "Committing it drops the fork's change:")
        diff = change_diff(item.get("base") or "", item.get(other) or "", "base", other)
    else:
        caption = "Against the fork's side (ours), it changes:"
        diff = change_diff(item.get("ours") or "", text, "ours", "resolution")
    return _follow_body(follow, head, f"One click commits {after}'s resolution for the whole "
                        "region:", caption, diff, "the diff", tail, limit)


def _follow_body(follow: FollowUp, head: str, lead: str, caption: str, diff: str,
                 what: str, tail: str, limit: int) -> str | None:
    """A follow-up comment: its head, the suggestion of the follow-up's text, the diff of
    what it drops or changes (cut to fit), its other answers. None when it cannot fit."""
    if follow.item.get("suggestion") is not None:
        head += (" The first comment on these lines offers another starting point (the "
                 "rule's); commit one of the two.")
    suggestion = fence(follow.text, "suggestion")
    for budget in (SIDE_LIMIT, SIDE_LIMIT // 6, 200):
        shown, note = cut_side(diff, budget, None, what)
        body = "\n\n".join([head, lead, suggestion, caption, fence(shown, "diff"),
                             *([note] if note else []), tail])
        if len(body) <= limit:
            return body
    return None


__all__ = ["render_comment", "render_follow_comment", "render_review_comment"]
