"""The bot's section of the draft PR body, rendered from the JSON report. Pure.

Everything here renders from ``Plan.to_json()``, because the App stores that and
re-renders the body on every push without re-running the merge.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection, Iterable
from typing import Any

from bot.engine.follow import FOLLOW_MIN, twin_groups
from bot.engine.generated import (
    GENERATED,
    LOCKFILE,
    MANY,
    MANY_REGIONS,
    FileLevel,
    file_levels,
    one_comment,
)
from bot.engine.model import inputs_label
from bot.engine.report.figures import brief_reasons
from bot.engine.report.groups import (
    Group,
    by_author,
    follow_hint,
    group_items,
    id_list,
    own_question,
    recommend,
    shown_ids,
)
from bot.engine.report.limits import BODY_LIMIT, balanced_cut, one_line
from bot.engine.report.needs import workload_rows
from bot.engine.report.onefile import region_lines
from bot.engine.report.workflows import WORKFLOW_DIFF_LIMIT, workflow_changes

BEGIN = "<!-- forksync:begin -->"
END = "<!-- forksync:end -->"
STATUS_ORDER = ["clean", "conflict", "new", "deleted", "renamed", "skipped", "unchanged"]
TIERS = ["Decide", "Confirm", "Settled"]
LIST_LIMIT = 40  # paths listed per status before "and N more", in a shortened body

Json = dict[str, Any]


def code_span(text: str) -> str:
    return f"`{text}`" if "`" not in text else f"`` {text} ``"


def count_of(n: int, noun: str) -> str:
    """``1 file``, ``2 files``: a count with its noun in the right number."""
    return f"{n} {noun}{'s' if n != 1 else ''}"


def _prs(numbers: Iterable[int]) -> str:
    return ", ".join(f"#{n}" for n in numbers)


def _lines(item: Json) -> str:
    if item.get("start_line") is None:
        return ""
    if item["start_line"] == item["end_line"]:
        return f" L{item['start_line']}"
    return f" L{item['start_line']}–{item['end_line']}"


def open_items(plan: Json, resolved: set[str], answers: dict[str, str]) -> list[Json]:
    """Items still needing a person: not resolved, not answered, and not settled by policy."""
    out = []
    for f in plan["files"]:
        for item in f["review_items"]:
            if item["id"] in resolved or item["id"] in answers:
                continue
            if item["kind"] == "policy":
                continue
            out.append(item)
    return out


def file_done(f: Json, resolved: set[str], answers: dict[str, str]) -> bool:
    # A whole file is done when it is what was answered (the rescan says so), not when
    # an answer was given: the file may have changed since.
    return all(i["id"] in resolved or (i["id"] in answers and i["kind"] != "file")
               or i["kind"] in ("policy", "flag") for i in f["review_items"])


def tip_reason(plan: Json) -> str:
    """Why the window ends where it does."""
    source = plan.get("tip_source") or ""
    window = plan.get("window", [])
    last = next((k for k in range(len(window) - 1, -1, -1)
                 if window[k].get("number") is not None), None)
    at = f"`{plan['tip'][:10]}`"
    if last is not None:
        after = len(window) - 1 - last  # commits of no PR after the last PR
        at = (f"#{window[last]['number']}" if not after else
              f"{at} ({after} commit{'s' if after != 1 else ''} after "
              f"#{window[last]['number']})")
    branch = plan["upstream"]["branch"]
    if source in ("", "head"):
        return f"The window ends at {at}, the head of upstream `{branch}` when this sync ran."
    return f"The window ends at {at} because `{source}` was asked for as the tip."


def _header(plan: Json, behind: int, posted: int | None,
            one_click: Collection[str] | None = None) -> list[str]:
    up = plan["upstream"]
    window = plan["window"]
    prs = [e for e in window if e["number"] is not None]
    items = [i for f in plan["files"] for i in f["review_items"]]
    out = [
        f"## forksync: sync {up['repo']} {plan['window_label']}",
        "",
        f"Syncs {len(prs)} upstream PR{'s' if len(prs) != 1 else ''}"
        + (f" and {len(window) - len(prs)} other commit"
           f"{'s' if len(window) - len(prs) != 1 else ''}" if len(window) > len(prs) else "")
        + f" merged into `{up['repo']}` `{up['branch']}` after cutoff `{plan['cutoff'][:10]}`,"
        f" up to `{plan['tip'][:10]}`: {plan['summary']['files']} changed path"
        f"{'s' if plan['summary']['files'] != 1 else ''}. "
        + tip_reason(plan),
        "",
        "**Structure.** Commit 1 is the 3-way merge with the conflict markers kept as the "
        "review queue: " + inputs_label(
            f"fork `{plan.get('fork_branch', 'main')}` @ `{plan['ours'][:10]}`", "cutoff",
            "tip", plan.get("translated", True))
        + ". Later commits resolve it; the `forksync` check passes when no markers or open "
        "decisions remain.",
    ]
    if posted is not None and items:
        out[-1] += (f" {posted} of {len(items)} review item{'s' if len(items) != 1 else ''} "
                    f"{'have' if posted != 1 else 'has'} a review thread"
                    + (", with a one-click suggestion where there is one." if posted else "."))
    levels = file_levels(plan)
    out[-1] += _suggestion_count([i for i in items if not one_comment(levels, i)], one_click)
    out[-1] += _together(levels)
    per_file = Counter(i["path"] for i in items if i.get("kind") == "conflict"
                       and not one_comment(levels, i))
    many = sum(1 for n in per_file.values() if n > FOLLOW_MIN)
    if many:
        out[-1] += (f" In {'the' if many == 1 else 'each of the'} {many} file"
                    f"{'s' if many != 1 else ''} with more than {FOLLOW_MIN} conflict hunks, "
                    f"resolve {FOLLOW_MIN} the same way (both ours, or both theirs) and push: "
                    "its open hunks then get that side as a one-click follow-up suggestion.")
    twins = [[str(i["id"]) for i in g] for g in twin_groups(items).values()]
    if twins:
        copies = sum(len(g) for g in twins)
        out[-1] += (f" {copies} conflict hunks are {len(twins)} conflict"
                    f"{'s' if len(twins) != 1 else ''} that recur{'s' if len(twins) == 1 else ''} "
                    "exactly (twins: the same fork, base and upstream lines"
                    + (f", {shown_ids(twins[0])} among them" if len(twins) > 1 else
                       f": {shown_ids(twins[0])}")
                    + "): resolve one of each and push, and the others get its resolution as "
                    "a one-click follow-up.")
    learned = sum(1 for i in items if i.get("learned"))
    if learned:
        out[-1] += (f" {learned} proposal{'s follow' if learned != 1 else ' follows'} this "
                    "fork's own past resolutions (its merged sync PRs, or "
                    "`.github/forksync-learned.json` from `forksync learn`); each says which "
                    "habit and how often it held.")
    if behind:
        out += ["", f"> [!NOTE]\n> **Behind upstream by {behind} PR{'s' if behind != 1 else ''}"
                "** merged since this window's tip. Comment `/sync extend` to fold them in; "
                "resolutions made so far are replayed."]
    return out


def _counts(plan: Json) -> list[str]:
    status = plan["summary"]["status"]
    head = "| " + " | ".join(STATUS_ORDER) + " |"
    sep = "|" + "---|" * len(STATUS_ORDER)
    row = "| " + " | ".join(str(status.get(s, 0)) for s in STATUS_ORDER) + " |"
    return ["### Files", "", head, sep, row]


def _checklist(plan: Json, resolved: set[str], answers: dict[str, str],
               resolutions: dict[str, str]) -> list[str]:
    conflicted = [f for f in plan["files"] if f["status"] == "conflict"]
    if not conflicted:
        return ["### Conflicts", "", "No conflicts. :tada:"]
    out = [f"### Conflicts ({count_of(len(conflicted), 'file')})", ""]
    levels = file_levels(plan)
    for f in conflicted:
        mark = "x" if file_done(f, resolved, answers) else " "
        ids = [i["id"] for i in f["review_items"]]
        hunks = sum(1 for i in f["review_items"] if i["kind"] == "conflict")
        what = f"{hunks} hunk{'s' if hunks != 1 else ''}" if hunks else (f["note"] or "conflict")
        prs = sorted({n for i in f["review_items"] for n in i["prs"]})
        tail = f" · {_prs(prs)}" if prs else ""
        span = f" ({ids[0]}–{ids[-1]})" if len(ids) > 1 else f" ({ids[0]})" if ids else ""
        level = levels.get(f["path"])
        hint = follow_hint(f["review_items"], resolved, resolutions) \
            if mark == " " and level is None else ""
        if level is not None:  # what it is, and the one command
            hint = f" · {level.what}" + (f": `{level.resolve}`" if level.resolve and mark == " "
                                         else "")
        out.append(f"- [{mark}] {code_span(f['path'])}: {what}{span}{tail}{hint}")
    return out


def _together(levels: dict[str, FileLevel]) -> str:
    """What the review does with the files whose regions are answered together."""
    if not levels:
        return ""
    n = sum(level.regions for level in levels.values())
    kinds = Counter(level.kind for level in levels.values())
    what = {LOCKFILE: "lockfile", GENERATED: "generated file",
            MANY: f"file{{s}} with more than {MANY_REGIONS} conflict regions"}
    files = [f"{kinds[k]} " + (what[k].format(s="s" if kinds[k] != 1 else "") if k == MANY
                               else what[k] + ("s" if kinds[k] != 1 else ""))
             for k in (LOCKFILE, GENERATED, MANY) if kinds[k]]
    return (f" The {n:,} conflict region{'s' if n != 1 else ''} of "
            + " and ".join(files) + " get one comment per file, not a thread each"
            + (": a file a tool writes is regenerated, `/sync resolve <path> theirs` then "
               "the tool." if MANY not in kinds else
               "; each comment gives the commands that resolve its file."))


def _suggestion_count(items: list[Json], one_click: Collection[str] | None) -> str:
    """What the review offers, counted: never more than there is.

    ``one_click`` is the ids of the items whose posted thread carries a suggestion;
    before the review is posted (or with no PR) only the plan's proposals are counted.
    """
    hunks = [i for i in items if i.get("kind") == "conflict"]
    if not hunks:
        return ""
    proposed = sum(1 for i in hunks if i.get("suggestion") is not None)
    rest = ("what each side changed and are answered with `/sync answer <Qn> ours|theirs` "
            "or resolved by hand.")
    n = f"{len(hunks)} conflict hunk{'s' if len(hunks) != 1 else ''}"
    if one_click is None:
        if not proposed:
            return f" No conflict hunk has a proposed resolution: each shows {rest}"
        return (f" {proposed} of {n} {'has' if proposed == 1 else 'have'} a proposed "
                "resolution" + (f"; the others show {rest}" if proposed < len(hunks) else "."))
    if not proposed:
        return f" No conflict hunk has a one-click suggestion: each shows {rest}"
    clicks = sum(1 for i in hunks if i["id"] in one_click)
    text = (f" {clicks} of {n} {'has' if clicks == 1 else 'have'} a one-click suggestion"
            if clicks else " No conflict hunk has a one-click suggestion")
    if proposed > clicks:
        # A proposal on a region that spans several hunks of the diff cannot be one click.
        text += (f"; {proposed - clicks}{' more' if clicks else ''} "
                 f"{'has' if proposed - clicks == 1 else 'have'}"
                 " a proposal that `/sync answer <Qn> suggested` commits")
    return text + (f"; the others show {rest}" if proposed < len(hunks) else ".")


def _state(item: Json, answers: dict[str, str], resolved: set[str]) -> str:
    if item["id"] in answers:
        return f" — **answered: {answers[item['id']]}**"
    if item["id"] in resolved:
        return " — resolved"
    return ""


def _detail(item: Json, brief: dict[str, str] | None = None) -> str:
    """A Decide item asks its own question, if it has one (a port's is its recommendation,
    so not a port); otherwise the reason says what each side did, or what the proposal
    does (``brief``: as ``figures.brief_reasons`` shortens it)."""
    # A port's question is its group's recommendation: its reason says why instead.
    question = own_question(item) if item["tier"] == "Decide" and item["kind"] != "manual" \
        else None
    return str(question or (brief or {}).get(str(item["id"])) or item["reason"])


def decision_line(item: Json, answers: dict[str, str], resolved: set[str]) -> str:
    text = _detail(item)
    prs = f" ({_prs(item['prs'])})" if item["prs"] else ""
    return (f"- **{item['id']}** {code_span(item['path'])}{_lines(item)}: {text}{prs}"
            f"{_state(item, answers, resolved)}")


def _is_open(item: Json, answers: dict[str, str], resolved: set[str]) -> bool:
    return item["id"] not in resolved and item["id"] not in answers and item["kind"] != "policy"


def _group_lines(g: Group, answers: dict[str, str], resolved: set[str],
                 compact: bool, brief: dict[str, str] | None = None) -> list[str]:
    open_n = sum(1 for i in g.items if _is_open(i, answers, resolved))
    settled = g.items[0]["kind"] == "policy" or g.items[0]["tier"] == "Settled"
    done = " ✓" if not open_n and not settled else ""
    out = [f"- **{id_list(g.ids)}** {g.title}{done}"]
    if not settled:
        command = ""
        if g.command and open_n and g.level is None:  # a file's action names its command
            command = (f" One command for both: `{g.command}`" if len(g.items) == 2
                       else f" One command for all {len(g.items)}: `{g.command}`"
                       if len(g.items) > 1 else f" `{g.command}`")
        out.append(f"  - Recommended: {g.action}.{command}")
    if compact:
        return out
    if g.level is not None:  # a file answered together: its regions on one line
        done_n = len(g.items) - open_n
        out.append(f"  - at commit 1: {region_lines(g.items, 8)}"
                   + (f" ({done_n:,} resolved, {open_n:,} open)" if done_n and open_n else "")
                   + "; the review's one comment on the file has the rest")
        return out
    for item in g.items:
        own, _ = recommend(item)
        detail = _detail(item, brief)
        if len(g.items) == 1 and f"`{item['path']}`" in g.title:  # named by the title
            where = _lines(item).strip()
            out.append(f"  - {where + ': ' if where else ''}{detail}"
                       f"{_state(item, answers, resolved)}")
            continue
        where = f"{code_span(item['path'])}{_lines(item)}"
        tail = f" — {own}" if own != g.action else ""
        out.append(f"  - {item['id']} {where}: {detail}{tail}{_state(item, answers, resolved)}")
    return out


def _decisions(plan: Json, resolved: set[str], answers: dict[str, str],
               compact: bool = False, one_click: Collection[str] | None = None) -> list[str]:
    items = [i for f in plan["files"] for i in f["review_items"]]
    if not items:
        return []
    groups = group_items(plan)
    tiers = Counter(i["tier"] for i in items)
    open_tiers = Counter(i["tier"] for i in items if _is_open(i, answers, resolved))
    counts = " · ".join(f"**{t}** ({tiers[t]}, {open_tiers[t]} open)" for t in TIERS
                        if tiers[t])
    open_items = [i for i in items if _is_open(i, answers, resolved)]
    rows = workload_rows(open_items, one_click, file_levels(plan))
    table = ["| what it needs | items |", "|---|---|",
             *(f"| {need} | {id_list(ids)} |" for need, ids in rows), ""] if rows else []
    out = [f"### Decisions: {count_of(len(items), 'item')} in {count_of(len(groups), 'group')}", "",
           counts, "",
           *(["**Open, by what each needs:**", "", *table] if rows else []),
           "The weightiest first: whole-file conflicts (modify/delete), files to port by hand, "
           "then conflict hunks by lines at stake. Each group says what to do, and where one "
           "answer fits all its items, the one command that answers them.", ""]
    brief = brief_reasons(plan)  # a file's counts and figures in full once
    for g in groups:
        out.extend(_group_lines(g, answers, resolved, compact, brief))
    out += ["", "Answer with `/sync answer <Qn> <choice>` (ranges work: `/sync answer Q3-Q7,Q9 "
            "theirs`); resolve a whole file with `/sync resolve <path> ours|theirs|suggested`; "
            "`/sync help` lists all commands."]
    return out


def _upstream_prs(plan: Json, limit: int | None = None, report: str | None = None
                  ) -> list[str]:
    """One line per upstream PR: title, author, summary, its files, and its review items.

    Past ``limit``, the rest are counted, and said to be in ``report`` (the report file)
    if one was written, or else in the upstream's history, where they are.
    """
    window = plan["window"]
    by_pr: dict[int, list[str]] = {}
    for f in plan["files"]:
        for i in f["review_items"]:
            for n in i["prs"]:
                by_pr.setdefault(n, []).append(i["id"])
    shown = window if limit is None else window[:limit]
    out = [f"<details><summary>Window: {len(window)} upstream change"
           f"{'s' if len(window) != 1 else ''}</summary>", ""]
    for e in shown:
        num = f"#{e['number']}" if e["number"] is not None else f"`{e['sha'][:10]}`"
        files = list(e.get("files") or [])
        what = e.get("summary") or _where(files)
        ids = by_pr.get(e["number"], []) if e["number"] is not None else []
        tail = f" · items {id_list(ids)}" if ids else ""
        count = f" · {len(files)} file{'s' if len(files) != 1 else ''}" if files else ""
        out.append(f"- **{num}** {_inline(e['title'])} ({by_author(e)}){count}{tail}"
                   + (f"  \n  {_inline(what)}" if what else ""))
    if len(shown) < len(window):
        rest = (f"the full report, {report}, lists them" if report else
                f"`git log {plan['cutoff'][:10]}..{plan['tip'][:10]}` in "
                f"`{plan['upstream']['repo']}` has them")
        out.append(f"- … {len(window) - len(shown)} more: {rest}")
    out += ["", "</details>"]
    return out


def _where(files: list[str]) -> str:
    """A PR's reach when its message says nothing more: its top directories."""
    if not files:
        return ""
    dirs = Counter(f.rsplit("/", 1)[0] if "/" in f else "(top level)" for f in files)
    top = ", ".join(f"`{d}` ({n})" if n > 1 else f"`{d}`" for d, n in dirs.most_common(3))
    more = f" and {len(dirs) - 3} more" if len(dirs) > 3 else ""
    return f"touches {top}{more}"


def _inline(text: str) -> str:
    return one_line(text)


def _paths(plan: Json, limit: int | None = None, report: str | None = None) -> list[str]:
    """New, deleted and renamed files, each a list a reviewer can scan: all of them, or
    ``limit`` of each and where the rest are (the report file, if one was written; the
    PR's diff has them all in any case)."""
    out: list[str] = []
    for status, label in (("new", "Added by upstream"), ("deleted", "Deleted by upstream"),
                          ("renamed", "Renamed by upstream")):
        files = [f for f in plan["files"] if f["status"] == status]
        if not files:
            continue
        shown = files if limit is None else files[:limit]
        out += [f"<details><summary>{label}: {len(files)} file{'s' if len(files) != 1 else ''}"
                "</summary>", ""]
        out += [f"- {code_span(f['path'])}" + (f" ({f['note']})" if f.get("note") else "")
                for f in shown]
        if len(shown) < len(files):
            rest = (f"the full report, {report}, lists them" if report
                    else "the PR's *Files changed* tab has them all")
            out.append(f"- … {len(files) - len(shown)} more: {rest}")
        out += ["", "</details>", ""]
    return out[:-1] if out else []


def _warnings(plan: Json) -> list[str]:
    warnings = plan.get("warnings") or []
    if not warnings:
        return []
    out = [f"### Config warnings ({len(warnings)})", ""]
    out += [f"- {code_span(w['path'])}: {w['message']}" if w.get("path") else f"- {w['message']}"
            for w in warnings]
    return out


def _unanchored(items: list[str]) -> list[str]:
    if not items:
        return []
    return ["### Items with no thread on the diff", "",
            "GitHub has no place for a thread on these (the review body has them in full):",
            "", *items]


def render_section(plan: Json, *, resolved: set[str] | None = None,
                   answers: dict[str, str] | None = None, behind: int = 0,
                   unanchored: list[str] | None = None, report_url: str | None = None,
                   report_path: str | None = None,
                   posted: int | None = None, one_click: Collection[str] | None = None,
                   resolutions: dict[str, str] | None = None, limit: int = BODY_LIMIT) -> str:
    """The bot's own section of the PR body, between the delimiters, within ``limit``.

    Everything is listed when it fits. A shortened body names the report file only when
    one was written (``report_url``, or ``report_path`` on the sync branch with no URL
    to link); otherwise each cut says where the rest can be seen.

    ``posted`` is how many review items got a thread (the publisher knows); the body
    claims no more than that, and nothing about threads when it is None. ``one_click``
    is the ids of the items whose thread carries a suggestion (a button); with None no
    button is claimed, and only the plan's proposals are counted.
    """
    resolved = resolved or set()
    answers = answers or {}

    def parts(compact: bool, window: int | None, paths: int | None,
              note: list[str]) -> list[list[str]]:
        return [_header(plan, behind, posted, one_click), note, _counts(plan), _warnings(plan),
                _decisions(plan, resolved, answers, compact, one_click),
                _checklist(plan, resolved, answers, resolutions or {}),
                workflow_changes(plan, limit=2_000 if compact else WORKFLOW_DIFF_LIMIT),
                _unanchored(unanchored or []),
                _paths(plan, paths, report), _upstream_prs(plan, window, report)]

    report = (f"[{report_url.rsplit('/', 1)[-1]}]({report_url})" if report_url
              else f"`{report_path}` on this branch" if report_path else None)
    text = _join(parts(False, None, None, []))
    if len(text) <= limit:
        return text
    link = f"The full report is in {report}." if report else ""

    def note(compact: bool) -> list[str]:
        if report:
            return ["> [!IMPORTANT]", f"> This body is shortened to fit GitHub's limit. {link}"]
        return ["> [!IMPORTANT]", "> This body is shortened to fit GitHub's limit, and no "
                "report file was written for this sync: each list cut here says where the "
                "rest is." + (" The decisions are listed by group, without each item's own "
                              "line: its review comment has it." if compact else "")]

    for compact, window, paths in ((False, None, LIST_LIMIT), (True, 50, 20), (True, 10, 5),
                                   (True, 0, 0)):
        text = _join(parts(compact, window, paths, note(compact)))
        if len(text) <= limit:
            return text
    # Still too long: cut at a line end, closing what the cut left open, delimiters kept.
    inner = text[len(BEGIN) + 1: -len(END) - 1]
    return f"{BEGIN}\n" + balanced_cut(inner, limit - len(BEGIN) - len(END) - 2,
                                       f"… (truncated to fit GitHub's limit) {link}".rstrip()
                                       ) + f"\n{END}"


def _join(parts: list[list[str]]) -> str:
    body = "\n\n".join("\n".join(p) for p in parts if p)
    return f"{BEGIN}\n{body}\n{END}"


def render_body(plan: Json, **kw: Any) -> str:
    """The whole draft PR body for a new PR: just the bot's section."""
    return render_section(plan, **kw)


def needs_overflow(plan: Json) -> bool:
    return len(render_section(plan, limit=10**9)) > BODY_LIMIT


def merge_body(old_body: str | None, new_section: str) -> str:
    """Replace only the bot's delimited section; keep everything people wrote around it."""
    old = old_body or ""
    start = old.find(BEGIN)
    end = old.find(END, start + 1) if start >= 0 else -1
    if start < 0 or end < 0:
        return (new_section + ("\n\n" + old if old.strip() else ""))[:BODY_LIMIT]
    merged = old[:start] + new_section + old[end + len(END):]
    if len(merged) > BODY_LIMIT:  # people's text is kept; our section shrinks if it must
        return old[:start] + new_section[: max(0, BODY_LIMIT - len(old) + (end - start))] \
            + old[end + len(END):]
    return merged


def render_markdown(plan: Json) -> str:
    """The full report, with no length limit (the overflow file and `--markdown`)."""
    return render_section(plan, limit=10**9)


def render_json(plan: Json) -> str:
    return json.dumps(plan, indent=2, ensure_ascii=False) + "\n"


def human_summary(plan: Json) -> str:
    """The few lines `forksync plan` prints."""
    s = plan["summary"]
    status = ", ".join(f"{s['status'][k]} {k}" for k in STATUS_ORDER if s["status"].get(k))
    tiers = ", ".join(f"{v} {k}" for k, v in s["tiers"].items() if v)
    return "\n".join([
        f"window {plan['window_label']}: {s['prs']} PRs, {s['commits']} commits, "
        f"cutoff {plan['cutoff'][:10]} → tip {plan['tip'][:10]}",
        f"files: {s['files']} ({status or 'none'})",
        f"review items: {s['review_items']}" + (f" ({tiers})" if tiers else ""),
        *(f"warning: {w['path'] + ': ' if w.get('path') else ''}{w['message']}"
          for w in plan.get("warnings") or []),
    ])
