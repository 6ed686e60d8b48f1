"""The gate, as data: what keeps the ``forksync`` check failing, and what the check says.

The check fails while a conflict-marker region, a marker line outside any complete region
(an *orphan*), an open decision or translation residue remains (:class:`Remaining`); it
never passes with one left, and it names each one's file and line. Publishing and the
follow-up both render the check from here; :mod:`bot.github.checks` posts it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from bot.engine.generated import file_levels
from bot.engine.report import (
    CHECK_SUMMARY_LIMIT,
    own_question,
    render_check_output,
    warning_annotations,
    workflow_changes,
)
from bot.engine.report.ids import id_list
from bot.engine.report.onefile import level_action, level_title


@dataclass(frozen=True)
class Remaining:
    """What keeps the check failing: a marker region or line, an open decision, or residue.

    An orphan marker line has ``orphan`` set: ``marker`` when it is surely a leftover of a
    merge (its ``item_id`` is the item whose region it was part of, if known), or a
    question ``M<n>`` (``marker`` False) where it may be content.
    """

    path: str
    item_id: str | None  # None: a marker region the plan does not know, or residue
    start_line: int | None = None
    end_line: int | None = None
    message: str = ""
    marker: bool = True
    residue: bool = False  # an upstream name left in a line people changed
    orphan: bool = False  # a marker line outside any complete region, or a question on one
    texts: tuple[str, ...] = ()  # the marker lines (what `/sync answer Mn content` keeps)

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "id": self.item_id, "start_line": self.start_line,
                "end_line": self.end_line, "message": self.message, "marker": self.marker,
                "residue": self.residue, "orphan": self.orphan, "texts": list(self.texts)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Remaining:
        return cls(d["path"], d.get("id"), d.get("start_line"), d.get("end_line"),
                   d.get("message", ""), bool(d.get("marker", True)),
                   bool(d.get("residue", False)), bool(d.get("orphan", False)),
                   tuple(d.get("texts", ())))

    @property
    def region(self) -> bool:
        """A whole conflict-marker region (not a stray line, a decision or residue)."""
        return self.marker and not self.residue and not self.orphan


def item_message(item: dict[str, Any]) -> str:
    """What an annotation says of an item: its own question, or its reason."""
    what = own_question(item) or item.get("reason") or item.get("question") or "conflict"
    return f"{item['id']} ({item.get('tier', '')}): {what}"


def decision_is_open(item: dict[str, Any], answers: dict[str, str]) -> bool:
    """A region-less item (flag, whole-file, manual port) that still waits for a person."""
    if item.get("tier") == "Settled" or item.get("kind") in ("policy", "conflict"):
        return False
    return item["id"] not in answers


def initial_remaining(plan_json: dict[str, Any], answers: dict[str, str]) -> list[Remaining]:
    """What is open at commit 1: every conflict region and every unanswered decision."""
    out = []
    for f in plan_json.get("files", []):
        for item in f.get("review_items", []):
            if item.get("kind") == "conflict" and item.get("start_line") is not None:
                out.append(Remaining(item["path"], item["id"], item["start_line"],
                                     item.get("end_line"), item_message(item)))
            elif decision_is_open(item, answers):
                out.append(Remaining(item["path"], item["id"], item.get("start_line"),
                                     item.get("start_line"), item_message(item), marker=False))
    return out


def check_annotations(remaining: Sequence[Remaining]) -> list[dict[str, Any]]:
    """Failure annotations on markers and residue; a warning on each open decision, on its
    line, or on line 1 for one about the whole file (commit 1 holds a version of it)."""
    out = []
    for r in remaining:
        start, end = r.start_line, r.end_line
        if start is None:
            if r.marker or r.residue or r.orphan or r.item_id is None:
                continue
            start = end = 1
        if r.residue:
            level, title = "failure", "translation residue"
        elif r.orphan and r.marker:
            level, title = "failure", "conflict marker line outside any complete region"
        elif r.orphan:
            level, title = "failure", f"{r.item_id}: a conflict marker, or content?"
        elif r.marker:
            level, title = "failure", f"{r.item_id or 'conflict'}: conflict markers remain"
        else:
            level, title = "warning", f"{r.item_id}: open decision" + (
                " on the whole file" if r.start_line is None else "")
        out.append({
            "path": r.path,
            "start_line": start,
            "end_line": end if end is not None else start,
            "annotation_level": level, "title": title,
            "message": (r.message or "Resolve this conflict region.")[:60_000],
        })
    return out


def check_output(plan_json: dict[str, Any], remaining: Sequence[Remaining], *,
                 behind: int = 0, one_click: Collection[str] | None = None
                 ) -> tuple[str, str, str]:
    """(conclusion, title, summary) of the ``forksync`` check. ``one_click``: the ids whose
    posted thread has a suggestion button (the PR body's count); None claims none."""
    markers: dict[str, int] = {}
    open_regions: list[str] = []  # the items whose regions remain (the PR body's open ones)
    for r in remaining:
        if r.region:
            markers[r.path] = markers.get(r.path, 0) + 1
            if r.item_id is not None:
                open_regions.append(r.item_id)
    items = {i["id"]: i for f in plan_json.get("files", []) for i in f.get("review_items", [])}
    decisions = [items[r.item_id] for r in remaining
                 if not r.marker and not r.orphan and r.item_id is not None
                 and r.item_id in items]
    extra: list[str] = []  # what the title says beyond the regions and decisions
    sections: list[str] = []
    orphans = [r for r in remaining if r.orphan]
    if orphans:
        sure = sum(1 for r in orphans if r.marker)
        unsure = len(orphans) - sure
        if sure:
            extra.append(f"{sure} conflict marker line{'s' if sure != 1 else ''} outside "
                         "any region")
        regions = sum(1 for r in orphans if not r.marker and r.start_line != r.end_line)
        for n, what in ((unsure - regions, "line"), (regions, "region")):
            if n:
                extra.append(f"{n} marker-like {what}{'s' if n != 1 else ''} to confirm")
        sections.append("**Marker lines outside any complete conflict region**\n\n" + "\n".join(
            f"- `{r.path}` L{r.start_line}: {r.message}" for r in orphans))
    residue = [r for r in remaining if r.residue]
    if residue:
        extra.append(f"translation residue on {len(residue)} line"
                     f"{'s' if len(residue) != 1 else ''}")
        sections.append("**Translation residue** (upstream names in lines people changed)\n\n"
                        + "\n".join(f"- `{r.path}` L{r.start_line}: {r.message}"
                                     for r in residue))
    if markers or decisions or not extra:
        title, summary = render_check_output(plan_json, markers, decisions,
                                             open_regions=open_regions, one_click=one_click)
        title = "; ".join([title, *extra])
    else:
        title = extra[0][0].upper() + ", ".join(extra)[1:]
        summary = (f"Sync of {plan_json['upstream']['repo']} "
                   f"{plan_json.get('window_label', '')} is not finished.")
    reasons = [(items[r.item_id], r.message) for r in remaining
               if not r.marker and not r.orphan and r.item_id in items
               and r.message != item_message(items[r.item_id])]
    if reasons:
        sections.append("**Why these are still open**\n\n" + "\n".join(
            f"- **{item['id']}** `{item['path']}`: {message}" for item, message in reasons))
    open_ids = {r.item_id for r in remaining if not r.marker and r.item_id is not None}
    workflows = workflow_changes(plan_json, {i for i in open_ids if i in items}, limit=5_000)
    if workflows:
        sections.append("\n".join(workflows))
    summary = "\n\n".join([summary, *sections])
    if behind:
        prs = f"{behind} PR{'s' if behind != 1 else ''}"
        title += f" · behind upstream by {prs}"
        summary = (f"**Behind upstream by {prs}** merged after this window; `/sync extend` "
                   "brings them in.\n\n" + summary)
    conclusion = "failure" if remaining else "success"
    return conclusion, title[:1000], clip_summary(summary)


CHECK_NAME = "forksync"
MAX_ANNOTATIONS = 50  # GitHub's limit per check-run request


def annotation_batches(plan_json: dict[str, Any], remaining: Sequence[Remaining]
                       ) -> list[list[dict[str, Any]]]:
    """The check's annotations (what remains, then the config warnings), 50 per request.

    The open regions of a file answered together (a lockfile, a generated file, a file
    with very many regions: :mod:`bot.engine.generated`) are one annotation, on the first
    of them: four thousand regions of a generated parser are not 85 requests."""
    levels = file_levels(plan_json)
    together: dict[str, list[Remaining]] = {}
    rest: list[Remaining] = []
    for r in remaining:
        if r.region and r.item_id is not None and r.path in levels:
            together.setdefault(r.path, []).append(r)
        else:
            rest.append(r)
    notes = check_annotations(rest)
    for path, regions in together.items():
        level, first = levels[path], regions[0]
        ids = [str(r.item_id) for r in regions]
        lines = ", ".join(f"L{r.start_line}" for r in regions[:20]) + (
            f" and {len(regions) - 20:,} more" if len(regions) > 20 else "")
        notes.append({
            "path": path, "start_line": first.start_line,
            "end_line": first.end_line if first.end_line is not None else first.start_line,
            "annotation_level": "failure",
            "title": f"{id_list(ids)}: {len(regions):,} conflict region"
                     f"{'s' if len(regions) != 1 else ''} remain",
            "message": (f"`{path}`: {level_title(level, len(regions))}. Recommended: "
                        f"{level_action(level)}. Regions at {lines}.")[:60_000]})
    notes += warning_annotations(plan_json)
    return [notes[i:i + MAX_ANNOTATIONS] for i in range(0, len(notes), MAX_ANNOTATIONS)]


def check_run_request(plan_json: dict[str, Any], remaining: Sequence[Remaining], sha: str, *,
                      behind: int = 0, one_click: Collection[str] | None = None
                      ) -> dict[str, Any]:
    """The request body of ``POST /repos/{owner}/{repo}/check-runs``, first 50 annotations."""
    conclusion, title, summary = check_output(plan_json, remaining, behind=behind,
                                              one_click=one_click)
    batches = annotation_batches(plan_json, remaining)
    return {"name": CHECK_NAME, "head_sha": sha, "status": "completed",
            "conclusion": conclusion, "external_id": sha,
            "output": {"title": title, "summary": summary,
                       "annotations": batches[0] if batches else []}}


def clip_summary(text: str) -> str:
    """A check-run summary GitHub accepts: long ones end with a note instead."""
    if len(text) <= CHECK_SUMMARY_LIMIT:
        return text
    note = "\n\n… (truncated; the PR description has the full list)"
    return text[: CHECK_SUMMARY_LIMIT - len(note)] + note
