"""Reports: the draft PR body (Markdown), review-comment bodies, the check-run text. Pure.

Everything here renders from the JSON report (``Plan.to_json()``), because the App
stores that and re-renders the body on every push without re-running the merge.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

BODY_LIMIT = 65_536  # GitHub's limit for PR bodies and comments
CHECK_SUMMARY_LIMIT = 65_535
BEGIN = "<!-- forksync:begin -->"
END = "<!-- forksync:end -->"
STATUS_ORDER = ["clean", "conflict", "new", "deleted", "renamed", "skipped", "unchanged"]
TIERS = ["Decide", "Confirm", "Settled"]

Json = dict[str, Any]


def fence(text: str, info: str = "") -> str:
    """A code fence longer than any backtick run inside ``text``, so content cannot close it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"{ticks}{info}\n{body}{ticks}"


def _code(text: str) -> str:
    return f"`{text}`" if "`" not in text else f"`` {text} ``"


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
    return all(i["id"] in resolved or i["id"] in answers or i["kind"] in ("policy", "flag")
               for i in f["review_items"])


def _header(plan: Json, behind: int) -> list[str]:
    up = plan["upstream"]
    window = plan["window"]
    prs = [e for e in window if e["number"] is not None]
    out = [
        f"## forksync: sync {up['repo']} {plan['window_label']}",
        "",
        f"Syncs {len(prs)} upstream PR{'s' if len(prs) != 1 else ''}"
        + (f" and {len(window) - len(prs)} other commit(s)" if len(window) > len(prs) else "")
        + f" merged into `{up['repo']}` `{up['branch']}` after cutoff `{plan['cutoff'][:10]}`,"
        f" up to `{plan['tip'][:10]}`: {plan['summary']['files']} changed paths.",
        "",
        "**Structure.** Commit 1 is the 3-way merge with the conflict markers kept as the "
        f"review queue: ours = fork `{plan.get('fork_branch', 'main')}` @ `{plan['ours'][:10]}`"
        " · base' = translate(upstream@cutoff) · theirs' = translate(upstream@tip). Later "
        "commits resolve it; the `forksync` check passes when no markers or open decisions "
        "remain. Each conflict hunk has a review comment with a one-click suggestion.",
    ]
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


def _checklist(plan: Json, resolved: set[str], answers: dict[str, str]) -> list[str]:
    conflicted = [f for f in plan["files"] if f["status"] == "conflict"]
    if not conflicted:
        return ["### Conflicts", "", "No conflicts. :tada:"]
    out = [f"### Conflicts ({len(conflicted)} files)", ""]
    for f in conflicted:
        mark = "x" if file_done(f, resolved, answers) else " "
        ids = [i["id"] for i in f["review_items"]]
        hunks = sum(1 for i in f["review_items"] if i["kind"] == "conflict")
        what = f"{hunks} hunk{'s' if hunks != 1 else ''}" if hunks else (f["note"] or "conflict")
        prs = sorted({n for i in f["review_items"] for n in i["prs"]})
        tail = f" · {_prs(prs)}" if prs else ""
        span = f" ({ids[0]}–{ids[-1]})" if len(ids) > 1 else f" ({ids[0]})" if ids else ""
        out.append(f"- [{mark}] {_code(f['path'])}: {what}{span}{tail}")
    return out


def _decision_line(item: Json, answers: dict[str, str], resolved: set[str]) -> str:
    state = ""
    if item["id"] in answers:
        state = f" — **answered: {answers[item['id']]}**"
    elif item["id"] in resolved:
        state = " — resolved"
    asks = item["tier"] != "Settled" and item.get("question")
    text = item["question"] if asks else item["reason"]
    prs = f" ({_prs(item['prs'])})" if item["prs"] else ""
    return f"- **{item['id']}** {_code(item['path'])}{_lines(item)}: {text}{prs}{state}"


def _decisions(plan: Json, resolved: set[str], answers: dict[str, str],
               compact: bool = False) -> list[str]:
    items = [i for f in plan["files"] for i in f["review_items"]]
    if not items:
        return []
    out = ["### Decisions", ""]
    for tier in TIERS:
        group = [i for i in items if i["tier"] == tier]
        if not group:
            continue
        open_n = sum(1 for i in group if i["id"] not in resolved and i["id"] not in answers
                     and i["kind"] != "policy")
        out.append(f"**{tier}** ({len(group)}, {open_n} open)")
        out.append("")
        if compact and tier == "Settled":
            out.append(f"- {len(group)} items settled by policies or safe rules; see the "
                       "review comments or the full report.")
        else:
            out.extend(_decision_line(i, answers, resolved) for i in group)
        out.append("")
    out.append("Answer with `/sync answer <Qn> <choice>`; resolve a whole file with "
               "`/sync resolve <path> ours|theirs|suggested`; `/sync help` lists all commands.")
    return out


def _window_table(plan: Json, limit: int | None = None) -> list[str]:
    window = plan["window"]
    shown = window if limit is None else window[:limit]
    out = [f"<details><summary>Window: {len(window)} upstream change"
           f"{'s' if len(window) != 1 else ''}</summary>", "",
           "| PR | title | author | commit |", "|---|---|---|---|"]
    for e in shown:
        num = f"#{e['number']}" if e["number"] is not None else "—"
        title = e["title"].replace("|", "\\|")
        out.append(f"| {num} | {title} | {e['author']} | `{e['sha'][:10]}` |")
    if len(shown) < len(window):
        out.append(f"| … | {len(window) - len(shown)} more in the full report | | |")
    out += ["", "</details>"]
    return out


def _unanchored(items: list[str]) -> list[str]:
    if not items:
        return []
    return ["### Items without a review comment", "",
            "These could not be anchored on the PR diff, so they are listed here instead:", "",
            *items]


def render_section(plan: Json, *, resolved: set[str] | None = None,
                   answers: dict[str, str] | None = None, behind: int = 0,
                   unanchored: list[str] | None = None, report_url: str | None = None,
                   limit: int = BODY_LIMIT) -> str:
    """The bot's own section of the PR body, between the delimiters, within ``limit``."""
    resolved = resolved or set()
    answers = answers or {}
    parts_full = [
        _header(plan, behind), _counts(plan), _checklist(plan, resolved, answers),
        _decisions(plan, resolved, answers), _unanchored(unanchored or []), _window_table(plan),
    ]
    text = _join(parts_full)
    if len(text) <= limit:
        return text
    link = (f"The full report is in [{report_url.rsplit('/', 1)[-1]}]({report_url})."
            if report_url else "The full report is in the report file on this branch.")
    note = ["> [!IMPORTANT]", f"> This body is shortened to fit GitHub's limit. {link}"]
    for window_limit in (50, 10, 0):
        parts = [
            _header(plan, behind), note, _counts(plan), _checklist(plan, resolved, answers),
            _decisions(plan, resolved, answers, compact=True), _unanchored(unanchored or []),
            _window_table(plan, window_limit),
        ]
        text = _join(parts)
        if len(text) <= limit:
            return text
    # Still too long: cut at a line boundary, keeping the delimiters intact.
    cut = text[: limit - len(END) - 200].rsplit("\n", 1)[0]
    return cut + f"\n\n… (truncated) {link}\n{END}"


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


def render_review_comment(item: Json) -> str:
    """One review comment: what, why, which PRs, and a ```suggestion``` for the whole region."""
    head = f"**{item['id']} · {item['tier']}** — {item['reason']}"
    out = [head]
    if item["prs"]:
        out.append(f"Upstream: {_prs(item['prs'])}")
    if item.get("question") and item["tier"] != "Settled":
        out.append(item["question"])
    if item["kind"] == "conflict":
        if item.get("suggestion") is not None:
            out.append("Proposed resolution (one click replaces the whole marker region):")
            out.append(fence(item["suggestion"], "suggestion"))
        else:
            out.append("No safe proposal. One click takes upstream's side (theirs); reply "
                       f"`/sync answer {item['id']} ours` to keep ours instead:")
            out.append(fence(item["theirs"], "suggestion"))
        details = ["<details><summary>ours / base / theirs</summary>", "",
                   "ours (fork):", fence(item["ours"]), "base' (upstream at cutoff, translated):",
                   fence(item["base"]), "theirs' (upstream at tip, translated):",
                   fence(item["theirs"]), "", "</details>"]
        out.append("\n".join(details))
    elif item.get("theirs"):
        out.append(fence(item["theirs"], "diff" if item["kind"] == "manual" else ""))
    if item.get("choices"):
        out.append(f"Answer: `/sync answer {item['id']} <{'|'.join(item['choices'])}>`")
    text = "\n\n".join(out)
    if len(text) > BODY_LIMIT:
        text = text[: BODY_LIMIT - 200] + "\n\n… (shortened: see the full report)"
    return text


def render_check_output(plan: Json, remaining_markers: dict[str, int],
                        open_decisions: list[Json]) -> tuple[str, str]:
    """Title and summary of the ``forksync`` check run."""
    markers = sum(remaining_markers.values())
    if not markers and not open_decisions:
        return ("All conflicts resolved", f"No conflict markers or open decisions remain in "
                f"the sync of {plan['upstream']['repo']} {plan['window_label']}.")
    title = (f"{markers} conflict marker region{'s' if markers != 1 else ''} in "
             f"{len(remaining_markers)} file{'s' if len(remaining_markers) != 1 else ''}, "
             f"{len(open_decisions)} open decision{'s' if len(open_decisions) != 1 else ''}")
    lines = [f"Sync of {plan['upstream']['repo']} {plan['window_label']} is not finished.", ""]
    if remaining_markers:
        lines += ["**Files with conflict markers**", ""]
        lines += [f"- {_code(p)}: {n}" for p, n in sorted(remaining_markers.items())]
        lines.append("")
    if open_decisions:
        lines += ["**Open decisions**", ""]
        lines += [_decision_line(i, {}, set()) for i in open_decisions]
    summary = "\n".join(lines)
    if len(summary) > CHECK_SUMMARY_LIMIT:
        summary = summary[: CHECK_SUMMARY_LIMIT - 100] + "\n\n… (shortened)"
    return title, summary


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
    ])
