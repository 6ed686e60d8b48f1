"""Review items grouped and ranked for people: by upstream PR, the same change in N places
answered by one command, the weightiest decisions first. Pure, over the JSON report."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.engine.flags import SEARCHED, line_list
from bot.engine.follow import file_follow
from bot.engine.generated import FileLevel, file_levels, one_comment
from bot.engine.manual import applies_as_is
from bot.engine.report.ids import id_list, id_number, id_ranges, shown_ids
from bot.engine.report.limits import one_line
from bot.engine.report.onefile import level_action, level_title
from bot.engine.suggest import (
    NEAR_TWINS_RULE,
    THEIRS_HOLDS_FORK,
    UPSTREAM_REWROTE,
    base_rule,
    lines_changed,
)
from bot.engine.wholefile import MOVED_RULE
from bot.engine.window import LOGIN
from bot.engine.wordiff import Clash, clash

Json = dict[str, Any]

# Rank of a group's theme: whole-file decisions (modify/delete) first, then files to port
# by hand, then conflict hunks by lines at stake, then flags, proposals, settled items.
RANK_FILE, RANK_MANUAL, RANK_DECIDE, RANK_FLAG, RANK_CONFIRM, RANK_SETTLED = range(6)


@dataclass
class Group:
    """Items one person answers together, with what we recommend and the command for it."""

    rank: int
    title: str  # one line: what these items are
    items: list[Json]
    prs: list[int]
    action: str  # the recommended action, one sentence
    choice: str | None = None  # the answer the command gives every item, if one fits all
    lines: int = 0  # lines at stake: the region's ours + theirs lines
    notes: list[str] = field(default_factory=list)
    level: FileLevel | None = None  # a file whose regions are answered together

    @property
    def ids(self) -> list[str]:
        return [str(i["id"]) for i in self.items]

    @property
    def command(self) -> str | None:
        """``/sync answer Q21-Q33 theirs`` for the whole group, or None when no one answer
        fits; ``/sync resolve <path> theirs`` for a file answered together."""
        if self.level is not None:
            return self.level.resolve
        if self.choice is None:
            return None
        return f"/sync answer {id_ranges(self.ids)} {self.choice}"


def line_count(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def lines_at_stake(item: Json) -> int:
    return line_count(item.get("ours") or "") + line_count(item.get("theirs") or "")


def _change(old: str, new: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The lines one side removed and added, whitespace-trimmed: a change's shape."""
    a = [ln.strip() for ln in old.splitlines() if ln.strip()]
    b = [ln.strip() for ln in new.splitlines() if ln.strip()]
    removed: list[str] = []
    added: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag in ("delete", "replace"):
            removed.extend(a[i1:i2])
        if tag in ("insert", "replace"):
            added.extend(b[j1:j2])
    return tuple(removed), tuple(added)


def who_deleted(item: Json) -> str | None:
    """For a whole-file item: which side deleted the file, from its recorded sides."""
    sides = item.get("sides") or {}
    if "ours" in sides and sides["ours"] is None:
        return "fork"
    if "theirs" in sides and sides["theirs"] is None:
        return "upstream"
    return None


def own_question(item: Json) -> str | None:
    """The question only this item asks: a file's, a flag's or a port's. A hunk asks the
    same one everywhere (its answers are listed below it), so its reason, which says what
    each side did, speaks for it; a Settled item asks nothing."""
    if item.get("kind") == "conflict" or item.get("tier") == "Settled":
        return None
    return item.get("question") or None


def manual_title(item: Json) -> str:
    """What a ``manual`` item is, in a few words: a group's title, a row of the PR body."""
    return ("manual policy, but the fork never changed it" if applies_as_is(item)
            else "port by hand")


def _prs(numbers: Iterable[int]) -> str:
    return ", ".join(f"#{n}" for n in numbers)


def drops_fork(item: Json) -> bool:
    """A proposal above Decide that is upstream's side as it is, not the fork's: one click
    drops the fork's edit (a rule earned it in upstream's files; ``suggest.UPSTREAM_FILE``)."""
    return (item.get("tier") != "Decide" and item.get("suggestion") is not None
            and item.get("suggestion") == item.get("theirs") != item.get("ours")
            and item.get("rule") not in THEIRS_HOLDS_FORK)


def _flag_answer(item: Json) -> tuple[str, str | None]:
    """A flag's answer, from how fork main writes the flagged options (``flagged``)."""
    flagged = item.get("flagged") or {}
    one = len(flagged.get("lines") or []) == 1 if flagged else \
        line_count(item.get("theirs") or "") <= 1
    answer = flagged.get("answer")
    if answer == "keep":
        return ("keep " + ("it: the fork already uses this option" if one else
                           "them: the fork already uses these options") + " as written"), "keep"
    if answer == "adapt":
        return ("change " + ("it" if one else "them") + " to the fork's spelling, then "
                "answer `adapt`"), "adapt"
    lines = flagged.get("lines") or []
    lacking = [ln.get("line") for ln in lines if ln.get("fork") is None]
    if flagged.get("searched") and None not in lacking and 0 < len(lacking) < len(lines) \
            and all(ln.get("option") for ln in lines):
        nums = line_list([int(n) for n in lacking if n is not None])
        whose = "its option is" if len(lacking) == 1 else "their options are"
        return (f"keep, adapt or drop {nums}: {whose} in none of {SEARCHED}; the fork has "
                "the other lines' options"), None
    return ("check " + ("the flagged line has" if one else "the flagged lines have")
            + " a fork equivalent; keep, adapt or drop " + ("it" if one else "them")), None


def recommend(item: Json) -> tuple[str, str | None]:
    """What we recommend for one item, and the answer that does it (None: by hand).

    A Decide conflict is never answered ``ours`` or ``theirs`` by recommendation, which
    would drop one side's edit, unless the item itself shows that side already holds the
    other's edit (``THEIRS_HOLDS_FORK``), or upstream deleted or rewrote the lines the fork
    edited (the fork's edit has nothing left to apply to; people took upstream's version in
    most such hunks, ``suggest.UPSTREAM_REWROTE``; the command is given, never a one-click
    suggestion). The action does not repeat the item's reason: both are shown together.
    """
    kind, tier = item.get("kind"), item.get("tier")
    numbers = item.get("prs") or []
    # The title lists every PR; past three, the recommendation counts them instead.
    prs = (_prs(numbers) or "upstream") if len(numbers) <= 3 else \
        f"these {len(numbers)} upstream PRs"
    which = f" ({prs})" if numbers else ""  # "upstream's deletion (#12)"; no "(upstream)"
    choices = [str(c) for c in item.get("choices") or []]
    if kind == "policy" or tier == "Settled":
        return "nothing to do: settled (the suggestion, where there is one, applies it)", None
    found = item.get("refs")
    refs: Json = found if isinstance(found, dict) else {}
    if kind == "file":
        if item.get("rule") == MOVED_RULE:
            side = next((s for s, e in (item.get("sides") or {}).items() if e), None)
            who = "the fork" if side == "ours" else "upstream"
            return (f"keep {who}'s new file where git moved it (into the renamed directory), "
                    "or move it by hand and answer `confirm`", side)
        # Files on the branch still refer to it (the reason names them): no one command
        # deletes it with the others before they are looked at.
        if who_deleted(item) == "fork":
            if refs.get("files"):
                return (f"fix {_referring(refs)}, then keep the fork's deletion; or take "
                        "theirs if the fork still needs this file", None)
            return (f"keep the fork's deletion, unless the fork needs {_change_of(prs)} "
                    "(then take theirs and adapt it)", "ours")
        if who_deleted(item) == "upstream":
            one = refs.get("files") == 1 and refs.get("complete", True)
            fixed = (f" and {_referring(refs)} {'is' if one else 'are'} fixed"
                     if refs.get("files") else "")
            return (f"decide whether the fork still needs its changes to this file: take "
                    f"upstream's deletion{which} once they are moved elsewhere or dropped"
                    f"{fixed}, or keep the fork's version", None)
        return "pick the side to keep (git cannot merge this file line by line)", None
    if kind == "manual":
        if applies_as_is(item):
            if (item.get("sides") or {}).get("theirs") is None:
                return f"take upstream's deletion{which} (theirs)", "theirs"
            return ("take upstream's version (theirs): it is the fork's file with upstream's "
                    "change applied", "theirs")
        return (f"port {_change_of(prs)} to the fork's version by hand, then answer "
                "`done`", "done")
    if kind == "flag":
        return _flag_answer(item)
    if item.get("suggestion") is not None:
        choice = "suggested" if not choices or "suggested" in choices else None
        # A Decide's suggestion is a starting point, not a promise.
        what = ("check the starting point, then commit or edit it" if tier == "Decide"
                else f"take upstream's version{which} unless the fork still needs its change "
                "here (the comment shows it)" if drops_fork(item) else "accept the proposal")
        return what, choice
    rule = item.get("rule")
    if rule in THEIRS_HOLDS_FORK and "theirs" in choices:
        return ("take upstream's version (theirs) once you have checked that the fork's edit "
                "is already in it, or only changed the layout", "theirs")
    if base_rule(str(rule)) == "upstream deleted, fork changed" and "theirs" in choices:
        return (f"take upstream's deletion{which} unless the fork still needs these lines; "
                "then keep ours and adapt it", "theirs")
    if base_rule(str(rule)) == UPSTREAM_REWROTE and "theirs" in choices:
        # The fork's edit has no line left in upstream's version to be applied to.
        return (f"take upstream's version{which} unless the fork's edit still matters here; "
                "then re-apply it to upstream's new code by hand", "theirs")
    if rule == "add/add":
        keep = refs.get("keep")
        if keep in ("ours", "theirs") and keep in choices:
            whose, stub = (("upstream's", "the fork's") if keep == "theirs"
                           else ("the fork's", "upstream's"))
            return (f"take {whose} whole version ({keep}), which keeps {_referring(refs, '')} "
                    f"working: {stub} is a stub", keep)
        ours, theirs = (line_count(item.get(k) or "") for k in ("ours", "theirs"))
        return (f"keep one whole version, the fork's ({_n_lines(ours)}) or upstream's "
                f"({_n_lines(theirs)}): `/sync resolve {item.get('path')} ours` (or `theirs`)",
                None)
    if rule == NEAR_TWINS_RULE:
        return ("keep one of the two: they add nearly the same lines (the reason says where "
                "they differ), and keeping both would repeat them. `/sync answer "
                f"{item.get('id')} ours` (or `theirs`)", None)
    both = clash(item.get("base") or "", item.get("ours") or "", item.get("theirs") or "")
    if both is not None:  # one edit cannot be applied to the other: they replaced one text
        return _pick_one(both), None
    # Counted as the item's sentence counts them ("Upstream changed 4 lines"), so the two
    # never disagree.
    fork = lines_changed(item.get("base") or "", item.get("ours") or "")
    upstream = lines_changed(item.get("base") or "", item.get("theirs") or "")
    shown = "both edits are shown as diffs, base → ours and base → theirs"
    if fork <= upstream:
        return (f"combine by hand: apply the fork's {fork}-line edit to upstream's version "
                f"({prs} changed {_n_lines(upstream)}; {shown})", None)
    return (f"combine by hand: apply {_change_of(prs, f'{upstream}-line change')} to the fork's "
            f"version (the fork changed {_n_lines(fork)}; {shown})", None)


def _referring(refs: Json, still: str = "still ") -> str:
    """``the 2 files that still refer to it``: the files an item's ``refs`` counts (the
    reason names them), or ``the files that still refer to it (at least 2)``."""
    n = int(refs.get("files") or 0)
    if not refs.get("complete", True):
        return f"the files that {still}refer to it (at least {n})"
    return f"the file that {still}refers to it" if n == 1 else \
        f"the {n} files that {still}refer to it"


CLASH = "both replaced"  # how a recommendation over a clash (``wordiff.clash``) begins


def _pick_one(c: Clash) -> str:
    """``both replaced `"cuda"` in `device="cuda"`, the fork with …: pick one or write a
    third``, and which side's other edits to keep."""
    where = f"`{c.base}`" + (f" in `{c.context}`" if c.context != c.base else "")
    more = {(True, True): "; keep both sides' other edits here (the diffs show them)",
            (True, False): "; keep the fork's other edits here (base → ours shows them)",
            (False, True): "; keep upstream's other edits here (base → theirs shows them)",
            (False, False): ""}[(c.ours_more, c.theirs_more)]
    return (f"{CLASH} {where}, the fork with `{c.ours}` and upstream with "
            f"`{c.theirs}`: pick one or write a third{more}")


def _change_of(prs: str, what: str = "change") -> str:
    """``#12's change``; ``the change of #11218 and #11391`` (a list takes no ``'s``)."""
    head, _, last = prs.rpartition(", ")
    if head:
        return f"the {what} of {head} and {last}"
    suffix = "'" if prs.endswith("s") else "'s"
    return f"{prs}{suffix} {what}"


def _n_lines(n: int) -> str:
    return f"{n} line{'s' if n != 1 else ''}"


def _shape(item: Json) -> tuple[Any, ...]:
    """Items with equal shapes are the same upstream change in several places (the fork's
    own edits there may differ: one answer still fits them all)."""
    return (item.get("kind"), item.get("tier"), item.get("rule") or item.get("reason"),
            _change(item.get("base") or "", item.get("theirs") or ""))


def _window(plan: Json) -> dict[int, Json]:
    return {e["number"]: e for e in plan.get("window", []) if e.get("number") is not None}


_LOGIN = re.compile(LOGIN)


def by_author(entry: Json) -> str:
    """``@login`` where the window knows the author's GitHub login, else ``by Name``:
    a git name is not a login, and ``@Jee Jee Li`` would notify the user ``Jee``. (A plan
    saved before logins were recorded has only ``author``, which was a login where it
    has a login's shape.)"""
    login = entry.get("login")
    if login is None and _LOGIN.fullmatch(str(entry.get("author", ""))):
        login = entry["author"]
    if login:
        return f"@{login}"
    name = str(entry.get("author", "")).replace("<", "&lt;").replace("@", "&#64;")
    return f"by {name}" if name else "author unknown"


def pr_label(plan: Json, prs: Sequence[int]) -> str:
    """``#2100 Remove bshd support (@alice)``, or several numbers."""
    window = _window(plan)
    if len(prs) == 1 and prs[0] in window:
        e = window[prs[0]]
        # A title is people's text: no HTML of its own in our Markdown.
        title = one_line(str(e.get("title", "")))
        return f"#{prs[0]} {title} ({by_author(e)})"
    return _prs(prs) or "no upstream PR"


def group_items(plan: Json, *, skip: set[str] | None = None) -> list[Group]:
    """Every review item of the plan in one group, the groups ranked by weight."""
    skip = skip or set()
    items = [i for f in plan.get("files", []) for i in f.get("review_items", [])
             if i["id"] not in skip]
    groups: list[Group] = []
    shaped: dict[tuple[Any, ...], Group] = {}
    levels = file_levels(plan)
    together: dict[str, Group] = {}  # a file answered together: one group
    for item in items:
        if one_comment(levels, item):
            level = levels[item["path"]]
            group = together.get(level.path)
            if group is None:
                group = together[level.path] = Group(RANK_FILE, "", [], [],
                                                     level_action(level), level.side,
                                                     level=level)
                groups.append(group)
            group.items.append(item)
            group.lines += lines_at_stake(item)
            continue
        action, choice = recommend(item)
        prs = sorted(item.get("prs") or [])
        kind, tier = item.get("kind"), item.get("tier")
        lines = lines_at_stake(item)
        if kind == "file":
            who = who_deleted(item)
            what = {"fork": f"the fork deleted this file; upstream {_prs(prs)} changed it",
                    "upstream": f"upstream deleted this file ({_prs(prs)}); the fork changed it",
                    None: item.get("reason", "")}[who]
            groups.append(Group(RANK_FILE, f"`{item['path']}`: {what}", [item], prs, action,
                                choice, lines))
            continue
        if kind == "manual":
            groups.append(Group(RANK_MANUAL, f"`{item['path']}`: {manual_title(item)}",
                                [item], prs, action, choice, lines))
            continue
        rank = {"flag": RANK_FLAG, "policy": RANK_SETTLED}.get(str(kind)) or (
            RANK_SETTLED if tier == "Settled" else RANK_CONFIRM if tier == "Confirm"
            else RANK_DECIDE)
        key = (rank, tuple(prs), action if rank != RANK_DECIDE else None, _shape(item)) \
            if rank != RANK_SETTLED else (rank,)
        group = shaped.get(key)
        if group is None:
            group = shaped[key] = Group(rank, "", [], prs, action, choice)
            groups.append(group)
        group.items.append(item)
        group.lines += lines
        if group.choice != choice:
            group.choice = None
    for g in groups:
        if g.level is not None:
            g.prs = sorted({n for i in g.items for n in i.get("prs") or []})
            g.title = f"`{g.level.path}`: {level_title(g.level, len(g.items))}"
        if not g.title:
            g.title = _title(plan, g)
        actions = {recommend(i)[0] for i in g.items} if g.action.startswith(CLASH) else set()
        if len(actions) > 1 and all(a.startswith(CLASH) for a in actions):
            # Each place's own words: the group's line names none of them.
            g.action = (f"{CLASH} the same words in each place, each with words of its own: "
                        "pick one or write a third (each item names them)")
    groups.sort(key=lambda g: (g.rank, -g.lines if g.rank == RANK_DECIDE else 0,
                               id_number(g.ids[0])))
    return groups


def _title(plan: Json, g: Group) -> str:
    files = sorted({str(i["path"]) for i in g.items})
    where = f"`{files[0]}`" if len(files) == 1 else f"{len(files)} files"
    n = len(g.items)
    if g.rank == RANK_SETTLED:
        return f"{n} item{'s' if n != 1 else ''} settled by policies or safe rules"
    if g.rank == RANK_FLAG:  # one item per flag and file, over each line it flags
        lines = sum(line_count(i.get("theirs") or "") or 1 for i in g.items)
        return f"{g.items[0].get('reason', 'flag')}: {_n_lines(lines)} in {where}"
    what = "the same change in" if n > 1 else "one region in"
    places = f"{n} places" if n > 1 else where
    if n > 1 and len(files) == 1:
        places += f" of {where}"
    elif n > 1:
        places += f" across {where}"
    return f"{pr_label(plan, g.prs)}: {what} {places}"


__all__ = ["Group", "group_items", "id_list", "id_number", "id_ranges", "lines_at_stake",
           "manual_title", "own_question", "pr_label", "recommend", "shown_ids", "who_deleted"]


def follow_hint(items: Sequence[Json], resolved: set[str], resolutions: dict[str, str]) -> str:
    """For one file's items: when at least two of its conflict hunks are resolved and all
    took the same side, the command that gives the same side to the hunks still open
    (:func:`bot.engine.follow.file_follow`; the review also suggests it on each)."""
    follow = file_follow(items, resolved, resolutions)
    if follow is None:
        return ""
    side, done, open_ = follow.side, follow.done, follow.open
    whose = "the fork's side (ours)" if side == "ours" else "upstream's side (theirs)"
    return (f" · the {len(done)} resolved took {whose}; the rest alike? "
            f"`/sync answer {id_ranges([i['id'] for i in open_])} {side}`")
