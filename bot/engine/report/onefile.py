"""One comment, one group and one row for a file whose regions are answered together. Pure.

A lockfile, a generated file, or a file with more than ``MANY_REGIONS`` conflict regions
(:mod:`bot.engine.generated`) gets no thread per region: its review comment, its group in
the PR body and its row in the needs table all say what the file is, how many regions
it has, and the recommendation with its one command (``/sync resolve <path> theirs``,
then the tool that writes the file). The same words in each place, from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.engine.generated import GENERATED, LOCKFILE, MANY, MANY_REGIONS, FileLevel
from bot.engine.report.ids import id_list, id_ranges
from bot.engine.report.limits import BODY_LIMIT

Json = dict[str, Any]
REGIONS_SHOWN = 30  # regions a comment lists by line before it counts the rest


def _regions(n: int) -> str:
    return f"{n:,} conflict region{'s' if n != 1 else ''}"


def level_title(level: FileLevel, n: int | None = None) -> str:
    """``a Cargo lockfile with 11 conflict regions: regenerate it``, after the path."""
    n = level.regions if n is None else n
    if level.kind == MANY:
        return f"{_regions(n)}, too many for a thread each"
    return f"{level.what} with {_regions(n)}: regenerate it"


def level_action(level: FileLevel) -> str:
    """The recommendation, one sentence with its commands (no full stop)."""
    path = level.path
    if level.kind == LOCKFILE:
        return (f"take upstream's version of the whole file and regenerate it: "
                f"`/sync resolve {path} theirs`, then run `{level.command}` on the sync "
                "branch and push")
    if level.kind == GENERATED:
        return (f"take upstream's version of the whole file and regenerate it: "
                f"`/sync resolve {path} theirs`, then, once its sources are merged, run "
                f"{_tool(level)} on the sync branch and push")
    return (f"resolve them on the sync branch and push, or take one side for the whole "
            f"file: `/sync resolve {path} ours` (or `theirs`)")


def _tool(level: FileLevel) -> str:
    """What regenerates a generated file: the tool its marker names, if it names one."""
    return f"the tool that made it (`{level.tool}`, its first lines say)" if level.tool \
        else "the tool that made it"


def _why(level: FileLevel) -> str:
    """What the file is, and why its regions get one comment."""
    n = level.regions
    if level.kind == LOCKFILE:
        lock = level.lock
        made = f"{level.tool} writes this file from {lock.manifest}" if lock else \
            f"{level.tool or 'its package manager'} writes this file"
        return (f"{made}, so its {_regions(n)} get this one comment rather than a thread "
                "each: merged region by region, a lockfile can list one package twice or "
                "miss one, whichever side each region keeps.")
    if level.kind == GENERATED:
        said = (f"the repository's `.gitattributes` marks it generated (`{level.evidence}`)"
                if level.attribute else
                f"its first lines say a tool writes it (`{level.evidence}`)")
        return (f"{said}, so its {_regions(n)} get this one comment "
                "rather than a thread each: a generated file is made again from its "
                "sources, not merged by hand.")
    return (f"that is more than {MANY_REGIONS}, so they share this one comment: a review of "
            f"{n:,} threads on one file is not read one by one.")


def _steps(level: FileLevel) -> list[str]:
    path, n = level.path, level.regions
    if level.kind == MANY:
        return []
    every = ("its conflict region" if n == 1 else "both conflict regions" if n == 2
             else f"all {_regions(n)} at once")
    resolve = (f"1. `/sync resolve {path} theirs` takes upstream's side of {every} (a comment "
               "on this PR, or a reply here);")
    if level.kind == LOCKFILE:
        run = f"2. on the sync branch, run `{level.command}` and push what it changes."
        lock = level.lock
        if lock is not None and lock.note:
            run = run[:-1] + f" ({lock.note})."
        why = (f"Upstream's lockfile is the one its own changes were resolved against; "
               f"{level.tool} then resolves the fork's own dependency changes again from the "
               f"merged {lock.manifest if lock else 'manifests'}, so both sides' dependencies "
               "end up in it and the other locked versions stay as upstream has them.")
    else:
        run = (f"2. once the file's sources are merged, run {_tool(level)} on the sync "
               "branch and push the file it writes.")
        why = ("Upstream's version is the newer build of the two; running the tool on the "
               "merged sources puts the fork's changes back in, which no choice of regions "
               "can.")
    tool = f"`{level.tool}`" if level.kind == GENERATED and level.tool else \
        level.tool or "the tool"
    check = (f"The `forksync` check counts the {_regions(n)} until they are gone; it does not "
             f"run {tool}, so do step 2 before you merge.")
    out = ["**Recommended:** take upstream's version of the whole file, then regenerate it:",
           f"{resolve}\n{run}", f"{why} {check}"]
    lock = level.lock
    if lock is not None and lock.merges_markers:
        out.append(f"Or let {level.tool} merge the two sides itself: run `{level.command}` on "
                   "the sync branch as it is, conflict markers and all, and push. "
                   f"{level.tool} reads a lockfile with conflict markers; check what it "
                   "chose.")
    return out


def _many_steps(level: FileLevel, items: Sequence[Json]) -> list[str]:
    path = level.path
    proposed = [str(i["id"]) for i in items if i.get("suggestion") is not None]
    out = ["**What to do:**",
           f"- where one side rewrote the file (reformatted, moved or vendored it), take that "
           f"side whole: `/sync resolve {path} ours` keeps the fork's version of every "
           f"region, `/sync resolve {path} theirs` takes upstream's;"]
    if proposed and len(proposed) == len(items):
        out.append(f"- `/sync resolve {path} suggested` commits forksync's starting point at "
                   "every region (a finer merge of both edits: read the result in the Files "
                   "tab before you merge);")
    elif proposed:
        out.append(f"- `/sync answer {id_ranges(proposed)} suggested` commits forksync's "
                   f"starting points at the {len(proposed):,} regions that have one (a finer "
                   "merge of both edits: read the result in the Files tab before you merge);")
    out.append("- or resolve the regions on the sync branch by hand and push: each one "
               "resolved ticks off. `/sync answer Qn ours|theirs` answers one region.")
    return ["\n".join(out)]


def region_lines(items: Sequence[Json], most: int = REGIONS_SHOWN) -> str:
    """``Q3 L5–12, Q4 L40–52 and 9 more``: where the regions are in commit 1."""
    shown = []
    for item in items[:most]:
        start, end = item.get("start_line"), item.get("end_line")
        where = "" if start is None else f" L{start}" if end in (None, start) \
            else f" L{start}–{end}"
        shown.append(f"{item['id']}{where}")
    more = len(items) - len(shown)
    return ", ".join(shown) + (f" and {more:,} more" if more > 0 else "")


def render_level_comment(level: FileLevel, items: Sequence[Json], *, note: str = "",
                         limit: int = BODY_LIMIT) -> str:
    """The one review comment of a file whose regions are answered together."""
    ids = [str(i["id"]) for i in items]
    head = f"**{id_list(ids)} · `{level.path}`: {level_title(level, len(items))}** — {_why(level)}"
    tail = ("Other answers: " + (f"`/sync resolve {level.path} ours` keeps the fork's version "
                                 "of the whole file (regenerate it all the same); "
                                 if level.kind != MANY else "")
            + "`/sync answer Qn ours|theirs` answers one region; or edit the file on the "
            "sync branch and push.") if level.kind != MANY else ""
    where = (f"The {_regions(len(items))} at commit 1: {region_lines(items)}. The PR's "
             "*Files changed* tab shows each (a long file may need *Load diff*).")
    parts = [head, *([f"> {note}"] if note else []),
             *(_many_steps(level, items) if level.kind == MANY else _steps(level)),
             *([tail] if tail else []), where]
    text = "\n\n".join(parts)
    most = REGIONS_SHOWN
    while len(text) > limit and most > 1:  # long paths: fewer regions by line
        most //= 2
        parts[-1] = (f"The {_regions(len(items))} at commit 1: {region_lines(items, most)}. "
                     "The PR's *Files changed* tab shows each.")
        text = "\n\n".join(parts)
    return text


__all__ = ["level_action", "level_title", "region_lines", "render_level_comment"]
