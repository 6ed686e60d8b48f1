"""The ONE review of a sync PR, and its file-level comments, as request bodies (pure).

:func:`build_delivery` turns a plan and the PR diff into a :class:`Delivery`: a thread
for every review item (placed by :mod:`bot.engine.anchor`), the exact request body of
``POST /pulls/{n}/reviews`` and those of ``POST /pulls/{n}/comments`` for file-level
comments. ``forksync sync --preview`` writes these very objects; the App posts them
(:func:`bot.github.pulls.post_delivery`), so what is previewed is what is posted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.engine.anchor import PrDiff, Thread, Where, place
from bot.engine.follow import TWIN, FollowUp, follow_marker
from bot.engine.gate import annotation_batches, initial_remaining
from bot.engine.generated import MANY_REGIONS, FileLevel, file_levels, one_comment
from bot.engine.git import Git
from bot.engine.report import BODY_LIMIT, render_body, render_comment
from bot.engine.report.comments import render_follow_comment
from bot.engine.report.groups import id_list, id_ranges, manual_title, shown_ids
from bot.engine.report.onefile import level_action, level_title, render_level_comment

Json = dict[str, Any]

BUDGET_BASE = 5  # write requests per sync PR: 5 + ⌈review items / 50⌉
ANNOTATIONS_PER_REQUEST = 50  # GitHub's limit per check-run request
_SLACK = 200  # room for the note, the ids line and the markers around an item's text
_SUGGESTION = re.compile(r"^(`{3,})suggestion$", re.MULTILINE)


def review_marker(commit: str) -> str:
    """The hidden marker that makes the one review findable again."""
    return f"<!-- forksync:review {commit} -->"


def file_marker(commit: str, path: str) -> str:
    """The hidden marker of a file-level comment (its path JSON-quoted: no ``-->`` inside)."""
    return f"<!-- forksync:file {commit} {json.dumps(path)[1:-1].replace('>', '%3E')} -->"


def write_budget(items: int) -> int:
    """The most write requests one sync PR may cost."""
    return BUDGET_BASE + -(-items // 50)


def file_comment_budget(items: int, annotations: int) -> int:
    """What the budget leaves for file-level comments, one request each.

    Spent first: the PR, the review and one retry of it after a 422, one update of the
    PR body, and the check run with one request per 50 annotations.
    """
    check = max(1, -(-annotations // ANNOTATIONS_PER_REQUEST))
    return max(0, write_budget(items) - 4 - check)


def plan_items(plan_json: Json) -> list[Json]:
    """Every review item of the plan, in id order: each one gets a thread."""
    return [i for f in plan_json.get("files", []) for i in f.get("review_items", [])]


@dataclass(frozen=True)
class Delivery:
    """Where every item's thread goes, and the request bodies that put them there."""

    commit: str
    threads: tuple[Thread, ...]
    review: Json  # the request body of POST /repos/{owner}/{repo}/pulls/{n}/reviews
    file_comments: tuple[Json, ...]  # request bodies of POST .../pulls/{n}/comments
    items: dict[str, Json] = field(default_factory=dict, repr=False, compare=False)
    plan: Json = field(default_factory=dict, repr=False, compare=False)

    @property
    def review_index(self) -> list[int]:
        """For each of ``review["comments"]``, the index of its thread in ``threads``."""
        return [k for k, t in enumerate(self.threads) if t.where in (Where.REGION, Where.LINE)]

    @property
    def file_index(self) -> list[int]:
        """For each of ``file_comments``, the index of its thread in ``threads``."""
        return [k for k, t in enumerate(self.threads) if t.where is Where.FILE]

    def unplaced(self) -> list[str]:
        """Ids of the items with no thread (the review body and the PR body carry them)."""
        return [i for t in self.threads if t.where is Where.NONE for i in t.ids]

    def one_click(self) -> list[str]:
        """Ids of the items whose thread carries a ```suggestion``` block: a button that
        resolves them in one click (a thread's block is its first item's, on its region)."""
        comments = self.review.get("comments", [])
        return [self.threads[k].ids[0] for k, c in zip(self.review_index, comments, strict=True)
                if _SUGGESTION.search(c["body"])]

    def summary(self) -> Json:
        """Counts for the PR body: it never claims more than this."""
        by = {w: [t for t in self.threads if t.where is w] for w in Where}
        one_click = self.one_click()
        return {"items": sum(len(t.ids) for t in self.threads),
                "threads": sum(len(by[w]) for w in (Where.REGION, Where.LINE, Where.FILE)),
                "suggestions": len(one_click), "one_click": one_click,
                "comments": len(by[Where.LINE]) + len(by[Where.REGION]),
                "files": len(by[Where.FILE]), "unplaced": self.unplaced()}


def build_delivery(plan_json: Json, diff: PrDiff, commit: str, *,
                   items: Sequence[Json] | None = None,
                   answers: dict[str, str] | None = None) -> Delivery:
    """The threads of ``items`` (default: every item of the plan) and their request bodies."""
    chosen = list(plan_items(plan_json) if items is None else items)
    notes = [a for batch in annotation_batches(
        plan_json, initial_remaining(plan_json, dict(answers or {}))) for a in batch]
    budget = file_comment_budget(len(plan_items(plan_json)), len(notes))
    threads = place(chosen, diff, file_comments=budget, whole=file_levels(plan_json))
    return _assemble(commit, tuple(threads), {i["id"]: i for i in chosen}, plan_json)


def drop_threads(delivery: Delivery, gone: set[int]) -> Delivery:
    """The delivery without the threads ``gone`` (indexes in ``threads``) GitHub refused (422).

    Their items have no thread; the review body and the PR description carry them.
    """
    threads = tuple(
        Thread(t.ids, t.path, Where.NONE, note=(
            f"GitHub refused the comment on `{t.path}`" + (f" L{t.line}" if t.line else "")
            + " (422), so it has no thread")) if k in gone else t
        for k, t in enumerate(delivery.threads))
    return _assemble(delivery.commit, threads, delivery.items, delivery.plan)


def _assemble(commit: str, threads: tuple[Thread, ...], items: dict[str, Json],
              plan: Json) -> Delivery:
    levels = file_levels(plan)
    comments = [review_comment(t, items, plan, levels=levels) for t in threads
                if t.where in (Where.REGION, Where.LINE)]
    files = tuple({"body": thread_body(t, items, plan, marker=file_marker(commit, t.path),
                                       levels=levels),
                   "commit_id": commit, "path": t.path, "subject_type": "file"}
                  for t in threads if t.where is Where.FILE)
    review: Json = {"commit_id": commit, "event": "COMMENT", "body": ""}
    if comments:
        review["comments"] = comments
    delivery = Delivery(commit, threads, review, files, items, plan)
    review["body"] = review_body(delivery)
    return delivery


def review_comment(thread: Thread, items: dict[str, Json], plan: Json | None = None, *,
                   levels: Mapping[str, FileLevel] | None = None) -> Json:
    """One entry of the review's ``comments[]``: always on the RIGHT side (commit 1's lines)."""
    assert thread.line is not None
    comment: Json = {"path": thread.path, "line": thread.line, "side": "RIGHT",
                     "body": thread_body(thread, items, plan, levels=levels)}
    if thread.start_line is not None and thread.start_line < thread.line:
        comment.update(start_line=thread.start_line, start_side="RIGHT")
    return comment


def _commands(item: Json) -> str:
    """How to answer a conflict region with no one-click suggestion, if its text does not say."""
    if item.get("kind") != "conflict" or item.get("choices"):
        return ""
    choices = "ours|theirs" + ("|suggested" if item.get("suggestion") is not None else "")
    return f" Answer with `/sync answer {item['id']} {choices}`, or edit the region by hand."


def thread_body(thread: Thread, items: dict[str, Json], plan: Json | None = None, *,
                marker: str = "", limit: int = BODY_LIMIT,
                levels: Mapping[str, FileLevel] | None = None) -> str:
    """The text of one thread: its items' comment, with why it sits where it does.

    The ```suggestion``` is only for a thread on a whole region (a suggestion replaces
    exactly the lines the comment covers); elsewhere the note says which command answers.
    The regions of a file answered together (``levels``: a lockfile, a generated file, a
    file with very many regions) get the file's one comment, with no suggestion.
    """
    texts = [items[i] for i in thread.ids]
    levels = file_levels(plan or {}) if levels is None else levels
    level = levels.get(thread.path)
    regions = [i for i in texts if level is not None and one_comment(levels, i)]
    if level is not None and regions:
        room = limit - len(marker) - _SLACK
        others = [i for i in texts if not one_comment(levels, i)]
        text = render_level_comment(level, regions, note=thread.note,
                                    limit=room if not others else room // 2)
        if others:  # an item of another kind on the same file-level comment
            text += "\n\n" + render_comment(others, plan, anchor="", limit=room // 2)
        return text + (f"\n\n{marker}" if marker else "")
    anchor = thread.ids[0] if thread.where is Where.REGION else ""
    note = thread.note + ("".join(_commands(item) for item in texts) if thread.note else "")
    room = limit - len(note) - len(marker) - _SLACK
    first, _, rest = render_comment(texts, plan, anchor=anchor, limit=room).partition("\n\n")
    text = "\n\n".join(p for p in (first, f"> {note}" if note else "", rest) if p)
    return text + (f"\n\n{marker}" if marker else "")


def review_body(delivery: Delivery) -> str:
    """The review's own text: what its threads are, and in full every item with no thread."""
    s = delivery.summary()
    lines = [f"**forksync** · {s['threads']} thread{'s' if s['threads'] != 1 else ''} for "
             f"{s['items']} review item{'s' if s['items'] != 1 else ''} of commit 1 "
             f"(`{delivery.commit[:10]}`)."]
    counts = []
    levels = file_levels(delivery.plan)
    whole = [t for t in delivery.threads if t.where is not Where.NONE and t.path in levels
             and any(one_comment(levels, delivery.items[i]) for i in t.ids)]
    if s["suggestions"]:
        counts.append(f"- {s['suggestions']} with a one-click suggestion that replaces a whole "
                      "conflict region (**Commit suggestion** resolves it)")
    if whole:
        n = sum(1 for t in whole for i in t.ids if one_comment(levels, delivery.items[i]))
        which = "the whole of a file" if len(whole) == 1 else "whole files, one each,"
        counts.append(f"- {len(whole)} for {which} whose {n:,} conflict regions are answered "
                      f"together (a lockfile, a generated file, or more than {MANY_REGIONS} "
                      "regions): each says what the file is and the commands that resolve it")
    plain = s["comments"] - s["suggestions"] - sum(1 for t in whole if t.where is not Where.FILE)
    if plain:
        counts.append(f"- {plain} without one: answer with the command each comment names")
    files = s["files"] - sum(1 for t in whole if t.where is Where.FILE)
    if files:
        counts.append(f"- {files} file-level comment{'s' if files != 1 else ''} "
                      "(files the diff shows without lines)")
    lines.append("\n".join(counts))
    orphans = [t for t in delivery.threads if t.where is Where.NONE]
    if orphans:
        n = sum(len(t.ids) for t in orphans)
        lines.append(f"**{n} item{'s' if n != 1 else ''} with no thread**, in full here and "
                     "listed in the PR description:")
        room = BODY_LIMIT - sum(len(x) + 2 for x in lines) - 300
        lines.extend(_orphans(orphans, delivery, room))
    lines.append(review_marker(delivery.commit))
    return "\n\n".join(x for x in lines if x)


def _orphans(threads: list[Thread], delivery: Delivery, room: int) -> list[str]:
    """Each item with no thread inside a ``<details>``; one line each once room runs out."""
    out: list[str] = []
    levels = file_levels(delivery.plan)
    for t in threads:
        level = levels.get(t.path)
        together = [i for i in t.ids if level is not None
                    and one_comment(levels, delivery.items[i])]
        if level is not None and together:  # a file answered together: one entry
            line = (f"- **{id_list(together)}** `{t.path}`: {t.note}. "
                    f"{level_title(level, len(together))[0].upper()}"
                    f"{level_title(level, len(together))[1:]}; recommended: "
                    f"{level_action(level)}.")
            out.append(line)
            room -= len(line) + 2
        for i in t.ids:
            if i in together:
                continue
            item = delivery.items[i]
            short = f"- **{i}** `{t.path}`: {t.note}.{_commands(item)}"
            share = max(0, min(BODY_LIMIT // 4, room - len(short) * 2))
            text = (render_comment([item], delivery.plan, anchor="", limit=share)
                    if share > 200 else "")
            block = (f"<details><summary>{i} · <code>{_html(t.path)}</code></summary>\n\n"
                     f"> {t.note}.{_commands(item)}\n\n{text}\n\n</details>")
            chosen = block if text and len(block) < room - len(short) else short
            out.append(chosen)
            room -= len(chosen) + 2
    return out


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def pr_section(plan_json: Json, sync: Json) -> str:
    """The bot's section of the PR body, from the plan and the fork's sync state."""
    unplaced = set(sync.get("unanchored", []))
    return render_body(
        plan_json, resolved=set(sync.get("resolved", [])),
        answers=dict(sync.get("answers", {})), behind=int(sync.get("behind", 0)),
        resolutions=dict(sync.get("resolutions", {})),
        unanchored=unanchored_lines([i for i in plan_items(plan_json) if i["id"] in unplaced],
                                    file_levels(plan_json)),
        report_url=sync.get("report_url"), report_path=sync.get("report_path"),
        posted=(sync["delivery"]["items"] - len(sync["delivery"]["unplaced"])
                if sync.get("delivery") else None),
        one_click=one_click_ids(sync))


def one_click_ids(sync: Json) -> list[str] | None:
    """The ids of the items whose posted thread carries a suggestion button, as the PR
    body and the check count them; None before a review is posted, or for a state saved
    before the ids were recorded: then no button is claimed."""
    return sync["delivery"].get("one_click") if sync.get("delivery") else None


def unanchored_lines(items: Sequence[Json],
                     levels: Mapping[str, FileLevel] | None = None) -> list[str]:
    """The PR body's entries for items with no thread (one for each file whose regions
    are answered together, ``levels``)."""
    out = []
    levels = levels or {}
    together: dict[str, list[str]] = {}
    for item in items:
        if one_comment(levels, item):
            together.setdefault(str(item["path"]), []).append(str(item["id"]))
            continue
        start, end = item.get("start_line"), item.get("end_line")
        where = "" if start is None else f" L{start}" if end in (None, start) \
            else f" L{start}–{end}"
        # A port's row is short: the review body has its diff and what to do.
        what = manual_title(item) if item.get("kind") == "manual" else \
            item.get("question") or item.get("reason", "")
        out.append(f"- **{item['id']}** `{item['path']}`{where} ({item.get('tier', '')}): "
                   f"{what}{_commands(item)}")
    for path, ids in together.items():
        level = levels[path]
        out.append(f"- **{id_list(ids)}** `{path}`: {level_title(level, len(ids))}; "
                   f"recommended: {level_action(level)}.")
    return out


def follow_review(head: str, placed: Sequence[tuple[FollowUp, int, int]],
                  open_ids: dict[str, list[str]]) -> tuple[Json, list[FollowUp]] | None:
    """The request body of the follow-up review of one head (:mod:`bot.engine.follow`): a
    comment with a one-click suggestion on each region in ``placed`` (its lines at the
    head), and the follow-ups it carries. None when no comment fits."""
    comments, posted = [], []
    for f, start, end in placed:
        body = render_follow_comment(f, open_ids.get(f.item["path"], []))
        if body is None:
            continue
        comment: Json = {"path": f.item["path"], "line": end, "side": "RIGHT", "body": body}
        if start < end:
            comment.update(start_line=start, start_side="RIGHT")
        comments.append(comment)
        posted.append(f)
    if not comments:
        return None
    by_file: dict[tuple[str, str, tuple[str, ...]], list[str]] = {}
    for f in posted:
        by_file.setdefault((f.item["path"], f.side, f.after), []).append(f.item["id"])
    n = len(comments)
    sides = any(f.side != TWIN for f in posted)
    twins = any(f.side == TWIN for f in posted)
    why = " ".join([
        *(["In each file below with a side, every hunk resolved so far took that side, so "
           "each open hunk offers it in one click."] if sides else []),
        *(["A hunk marked *twin* is identical to hunks already resolved (the same fork, base "
           "and upstream lines), so it offers the text they got."] if twins else []),
        "Check what each drops or changes (its comment shows it) before you commit it."])
    listed: list[str] = []
    room = BODY_LIMIT // 2  # a twin of a lock file can recur in hundreds of files
    for (path, side, after), ids in by_file.items():
        line = (f"- `{path}`: {shown_ids(ids, 12)} → "
                + (f"twin, as resolved at {shown_ids(after)}" if side == TWIN
                   else f"{side} (as {id_list(list(after))})"))
        room -= len(line) + 1
        if room < 0:
            listed.append(f"- … and {len(by_file) - len(listed)} more files (each comment "
                          "says its own)")
            break
        listed.append(line)
    lines = [f"**forksync** · {n} follow-up suggestion{'s' if n != 1 else ''} on "
             f"`{head[:10]}`. {why}", "\n".join(listed), *_twin_commands(posted),
             follow_marker(head)]
    return {"commit_id": head, "event": "COMMENT", "body": "\n\n".join(lines),
            "comments": comments}, posted


def _twin_commands(posted: Sequence[FollowUp], room: int = BODY_LIMIT // 8) -> list[str]:
    """One command per group of twins resolved alike: all its open copies at once (a lock
    file's hunk can recur fifty times; fifty clicks is a lot). Resolved to one side, the
    command names it; to a text of its own, ``twin`` gives them that text."""
    groups: dict[tuple[tuple[str, ...], str | None], list[str]] = {}
    for f in posted:
        if f.side == TWIN:
            groups.setdefault((f.after, f.taken), []).append(str(f.item["id"]))
    lines = []
    for (after, side), ids in groups.items():
        if len(ids) < 2:
            continue
        line = (f"- the {len(ids)} open twins of {shown_ids(after)}, resolved to {side}: "
                f"`/sync answer {id_ranges(ids)} {side}` takes it for all of them"
                if side is not None else
                f"- the {len(ids)} open twins of {shown_ids(after)}, resolved by hand: "
                f"`/sync answer {id_ranges(ids)} twin` gives them all that text")
        room -= len(line)
        if room < 0:
            break
        lines.append(line)
    return ["In one command:\n" + "\n".join(lines)] if lines else []


def offending_comments(exc: BaseException, comments: Sequence[Json]) -> set[int]:
    """Indexes of the comments a 422 names; all of them when it names none we can match."""
    errors = getattr(exc, "errors", None) or []
    text = " ".join([str(exc), *(e if isinstance(e, str) else json.dumps(e) for e in errors)])
    named = {i for i, c in enumerate(comments)
             if re.search(rf"(?<![\w/.-]){re.escape(c['path'])}(?![\w/.-])", text)}
    return named or set(range(len(comments)))


def local_diff(git_dir: str, base: str, head: str) -> str:
    """The PR diff as GitHub makes it: from the merge base to the head, renames found."""
    git = Git(git_dir)
    merge_base = git.text("merge-base", base, head).strip()
    return git.text("diff", "--no-color", "--no-ext-diff", "-M", merge_base, head, "--")
