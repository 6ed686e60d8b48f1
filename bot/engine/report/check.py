"""The ``forksync`` check run's text and the config warnings as annotations. Pure.

The check never says more than is true: it passes only when no marker region or open
decision is left (the caller counts them); warnings never turn it green or red.
"""

from __future__ import annotations

from typing import Any

from bot.engine.report.body import _code, _decision_line, workload
from bot.engine.report.groups import group_items, id_list
from bot.engine.report.limits import CHECK_SUMMARY_LIMIT, balanced_cut

Json = dict[str, Any]


def render_check_output(plan: Json, remaining_markers: dict[str, int],
                        open_decisions: list[Json]) -> tuple[str, str]:
    """Title and summary of the ``forksync`` check run."""
    markers = sum(remaining_markers.values())
    warnings = _warning_lines(plan)
    if not markers and not open_decisions:
        return ("All conflicts resolved", f"No conflict markers or open decisions remain in "
                f"the sync of {plan['upstream']['repo']} {plan['window_label']}."
                + ("\n\n" + "\n".join(warnings) if warnings else ""))
    title = (f"{markers} conflict marker region{'s' if markers != 1 else ''} in "
             f"{len(remaining_markers)} file{'s' if len(remaining_markers) != 1 else ''}, "
             f"{len(open_decisions)} open decision{'s' if len(open_decisions) != 1 else ''}")
    lines = [f"Sync of {plan['upstream']['repo']} {plan['window_label']} is not finished.", ""]
    if remaining_markers:
        lines += ["**Files with conflict markers**", ""]
        lines += [f"- {_code(p)}: {n}" for p, n in sorted(remaining_markers.items())]
        lines.append("")
    if open_decisions:
        lines += ["**Open decisions**, the weightiest first", ""]
        work = workload(open_decisions)
        if work:
            lines += [f"By what each needs: {work}.", ""]
        open_ids = {str(i["id"]) for i in open_decisions}
        skip = {str(i["id"]) for f in plan.get("files", []) for i in f.get("review_items", [])
                } - open_ids
        groups = group_items(plan, skip=skip)
        known = {i for g in groups for i in g.ids}
        for g in groups:
            command = f" — `{g.command}`" if g.command else ""
            lines.append(f"- **{id_list(g.ids)}** {g.title}{command}")
        lines += [_decision_line(i, {}, set()) for i in open_decisions
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
        f"- {_code(w['path'])}: {w['message']}" if w.get("path") else f"- {w['message']}"
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
