"""The ``forksync`` check run's text and the config warnings as annotations. Pure.

The check never says more than is true: it passes only when no marker region or open
decision is left (the caller counts them); warnings never turn it green or red.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from bot.engine.generated import file_levels
from bot.engine.report.body import code_span, count_of, decision_line
from bot.engine.report.groups import group_items, id_list, id_number
from bot.engine.report.limits import CHECK_SUMMARY_LIMIT, balanced_cut
from bot.engine.report.needs import workload

Json = dict[str, Any]
_TITLE_IDS = 80  # characters of ids a title names before it counts the rest


def _named(ids: Sequence[str], unknown: int = 0) -> str:
    """`` (Q1–Q10)``, `` (Q1, Q3, Q5 and 40 more)``: the ids a count is of, for a title
    (``unknown`` more are counted, with no id)."""
    ids = sorted(set(ids), key=id_number)
    head = ids
    while len(head) > 1 and len(id_list(head)) > _TITLE_IDS:
        head = head[: len(head) // 2]
    more = len(ids) - len(head) + unknown
    if not head:
        return ""
    return f" ({id_list(head)}{f' and {more} more' if more else ''})"


def open_title(markers: dict[str, int], regions: Sequence[str],
               decisions: Sequence[Json]) -> str:
    """What is still open, counted as the PR body counts it (its open items are these
    regions and decisions together), each count with its ids."""
    n = sum(markers.values())
    decided = [str(i["id"]) for i in decisions]
    if not n:
        return f"{count_of(len(decided), 'open decision')}{_named(decided)}"
    title = (f"{count_of(n, 'conflict region')} still open{_named(regions, n - len(regions))} "
             f"in {count_of(len(markers), 'file')}; ")
    return title + (f"{count_of(len(decided), 'other open decision')}{_named(decided)}"
                    if decided else "no other open decisions")


def render_check_output(plan: Json, remaining_markers: dict[str, int],
                        open_decisions: list[Json], *,
                        open_regions: Sequence[str] = (),
                        one_click: Collection[str] | None = None) -> tuple[str, str]:
    """Title and summary of the ``forksync`` check run.

    ``open_regions`` is the ids of the items whose marker regions remain (a region the
    plan does not know is only counted, in ``remaining_markers``). ``one_click`` is the
    ids whose posted thread has a suggestion button: the check says "one click" of those
    alone, as the PR body does (None: no review known, no button claimed).
    """
    markers = sum(remaining_markers.values())
    warnings = _warning_lines(plan)
    if not markers and not open_decisions:
        return ("All conflicts resolved", f"No conflict markers or open decisions remain in "
                f"the sync of {plan['upstream']['repo']} {plan['window_label']}."
                + ("\n\n" + "\n".join(warnings) if warnings else ""))
    title = open_title(remaining_markers, open_regions, open_decisions)
    items = {str(i["id"]): i for f in plan.get("files", []) for i in f.get("review_items", [])}
    lines = [f"Sync of {plan['upstream']['repo']} {plan['window_label']} is not finished: "
             f"{title}.", ""]
    # The same table as the PR body's "Open, by what each needs", on one line.
    open_items = [items[i] for i in open_regions if i in items]
    counted = {str(i["id"]) for i in open_items}
    open_items += [i for i in open_decisions if str(i["id"]) not in counted]
    work = workload(open_items, one_click, file_levels(plan))
    if work:
        lines += [f"By what each needs: {work}.", ""]
    if remaining_markers:
        by_path: dict[str, list[str]] = {}
        for i in open_regions:
            if i in items:
                by_path.setdefault(str(items[i]["path"]), []).append(i)
        lines += ["**Conflict regions still open**, by file", ""]
        lines += [f"- {code_span(p)}: {n}" + (f" ({id_list(by_path[p])})" if p in by_path else "")
                  for p, n in sorted(remaining_markers.items())]
        lines.append("")
    if open_decisions:
        lines += ["**Open decisions**, the weightiest first", ""]
        open_ids = {str(i["id"]) for i in open_decisions}
        skip = set(items) - open_ids
        groups = group_items(plan, skip=skip)
        known = {i for g in groups for i in g.ids}
        for g in groups:
            command = f" — `{g.command}`" if g.command else ""
            lines.append(f"- **{id_list(g.ids)}** {g.title}{command}")
        lines += [decision_line(i, {}, set()) for i in open_decisions
                  if str(i["id"]) not in known]
        lines.append("")
    lines += warnings
    summary = "\n".join(lines)
    return title, balanced_cut(summary, CHECK_SUMMARY_LIMIT, "… (shortened)")


def _warning_lines(plan: Json) -> list[str]:
    warnings = plan.get("warnings") or []
    if not warnings:
        return []
    return ["**Config warnings**", ""] + [
        f"- {code_span(w['path'])}: {w['message']}" if w.get("path") else f"- {w['message']}"
        for w in warnings]


def warning_annotations(plan: Json) -> list[Json]:
    """One ``warning`` annotation per config warning (the check's 50-a-request batching is
    the publisher's); a warning without a file sits on the config file."""
    out: list[Json] = []
    for w in plan.get("warnings") or []:
        line = int(w.get("line") or 1)
        out.append({"path": w.get("path") or ".github/forksync.yml", "start_line": line,
                    "end_line": line, "annotation_level": "warning",
                    "title": f"forksync config: {w.get('kind', 'warning')}",
                    "message": str(w["message"])[:64_000]})
    return out


__all__ = ["render_check_output", "warning_annotations"]
