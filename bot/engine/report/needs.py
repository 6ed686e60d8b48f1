"""The open items by what each needs of a person: the PR body's table and the check's line.

Pure. Only items whose posted review thread carries a suggestion are said to take one
click; a proposal with no button names the command that commits it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from bot.engine.generated import GENERATED, LOCKFILE, MANY, FileLevel, one_comment
from bot.engine.manual import applies_as_is
from bot.engine.report.groups import drops_fork, id_ranges, recommend
from bot.engine.suggest import FORK_FILE, NEAR_TWINS_RULE
from bot.engine.wholefile import MOVED_RULE

Json = dict[str, Any]


# What an open item asks of a person, most work first; each phrase takes the item count.
# A need with a proposal (``_PROPOSED``) is two rows: the items whose review thread has a
# suggestion button (one click each), and the others, which a command commits (a region
# spanning several hunks of the PR diff has no button; nor has any item before the review
# is posted, when no button is known and none is claimed).
_NEEDS = [
    ("file", "{n} file{s} one side deleted: keep or delete"),
    ("file propose ours", "{n} file{s} the fork deleted and upstream changed, with the "
     "deletion (ours) proposed"),
    ("file propose theirs", "{n} file{s} one side deleted, with upstream's side (theirs) "
     "proposed"),
    ("file confirm ours", "{n} file{s} one side deleted, with the fork's side (ours) proposed"),
    ("file confirm theirs", "{n} file{s} one side deleted, with upstream's side (theirs) "
     "proposed"),
    ("moved ours", "{n} new file{s} of the fork's that git moved into a directory upstream "
     "renamed, with the move proposed"),
    ("moved theirs", "{n} new file{s} of upstream's that git moved into a directory the fork "
     "renamed, with the move proposed"),
    ("manual", "{n} file{s} to port by hand"),
    ("manual theirs", "{n} file{s} under a manual policy that the fork never changed, with "
     "upstream's version (theirs) proposed"),
    ("add/add", "{n} file{s} both sides added: keep one version"),
    ("near twins", "{n} hunk{s} where both sides added nearly the same lines: keep one "
     "side (`/sync answer Qn ours` or `theirs`)"),
    ("by hand", "{n} hunk{s} to combine by hand (both edits shown as diffs)"),
    ("answer", "{n} hunk{s} with a recommended answer, one command each"),
    ("fork file", "{n} hunk{s} in files that are mostly the fork's, with the fork's version "
     "proposed (upstream's change there is left out)"),
    ("start", "{n} starting point{s} to check"),
    ("drops fork", "{n} hunk{s} in upstream's files where upstream's version is proposed "
     "(the fork's edit there is dropped, as people usually do in such files)"),
    ("proposal", "{n} proposal{s} to confirm"),
    ("flag keep", "{n} flag question{s} whose options the fork already uses as written"),
    ("flag adapt", "{n} flag question{s} whose options the fork spells otherwise: change the "
     "lines to its spelling, then answer `adapt`"),
    ("flag", "{n} flag question{s}: keep, adapt or drop the flagged lines"),
]


def _need(item: Json) -> str:
    kind = item.get("kind")
    if kind == "file":
        choice = recommend(item)[1]
        if item.get("rule") == MOVED_RULE and choice:
            return f"moved {choice}"
        if choice in ("ours", "theirs"):
            return f"file {'propose' if item.get('tier') == 'Decide' else 'confirm'} {choice}"
    if kind == "manual" and applies_as_is(item):
        return "manual theirs"
    if kind == "flag":
        answer = recommend(item)[1]
        return f"flag {answer}" if answer in ("keep", "adapt") else "flag"
    if kind in ("file", "manual"):
        return str(kind)
    if item.get("rule") == "add/add":
        return "add/add"
    if item.get("rule") == NEAR_TWINS_RULE:
        return "near twins"
    if item.get("suggestion") is not None:
        if item.get("tier") != "Decide":
            return "drops fork" if drops_fork(item) else "proposal"
        return "fork file" if item.get("rule") == FORK_FILE else "start"
    return "answer" if recommend(item)[1] else "by hand"


_PROPOSED = ("fork file", "start", "drops fork", "proposal")


def _how(key: str, ids: list[str]) -> str:
    """How a row's proposals are committed: by their button, or by a command."""
    if key.endswith(" click"):
        return ", one click each"
    if key.endswith(" command"):
        return (f", one command: `/sync answer {ids[0]} suggested`" if len(ids) == 1
                else ", one command each: `/sync answer Qn suggested`")
    return ""


def workload_rows(items: list[Json], one_click: Collection[str] | None = None,
                  levels: Mapping[str, FileLevel] | None = None
                  ) -> list[tuple[str, list[str]]]:
    """The open items by what each needs of a person, most work first: the phrase with
    its count, and the items' ids (the table a hand-written sync PR keeps:
    "Decide: Q26 · Q37 · Q43").

    ``one_click`` is the ids whose posted thread has a suggestion button; only those are
    said to take one click (None: no review posted, no button claimed). The regions of a
    file answered together (``levels``: a lockfile, a generated file, a file with very
    many regions) count as that file, on one row per kind.
    """
    needs: dict[str, list[str]] = {}
    together: dict[str, dict[str, list[str]]] = {}  # kind → path → open region ids
    levels = levels or {}
    for i in items:
        if i.get("kind") == "policy":
            continue
        if one_comment(levels, i):
            level = levels[str(i["path"])]
            together.setdefault(level.kind, {}).setdefault(level.path, []).append(str(i["id"]))
            continue
        need = _need(i)
        if need in _PROPOSED:
            need += " click" if one_click is not None and i["id"] in one_click else " command"
        needs.setdefault(need, []).append(str(i["id"]))
    rows = []
    for base, text in _NEEDS:
        for key in (f"{base} click", f"{base} command") if base in _PROPOSED else (base,):
            if key in needs:
                rows.append((_phrase(key, text, needs[key]), needs[key]))
        if base == "add/add":  # whole files before hunks
            rows += [_level_row(kind, together[kind], levels)
                     for kind in (LOCKFILE, GENERATED, MANY) if kind in together]
    return rows


def _level_row(kind: str, files: dict[str, list[str]], levels: Mapping[str, FileLevel]
               ) -> tuple[str, list[str]]:
    """``1 lockfile with 11 conflict regions: regenerate it, `/sync resolve Cargo.lock
    theirs` then `cargo update --workspace``` (several files: the command's shape)."""
    ids = [i for found in files.values() for i in found]
    n, k = len(ids), len(files)
    regions = f"{n:,} conflict region{'s' if n != 1 else ''}"
    what = {LOCKFILE: "lockfile", GENERATED: "generated file", MANY: "file"}[kind]
    head = f"{k} {what}{'s' if k != 1 else ''} with {regions}"
    if kind == MANY:
        return (f"{head}, too many for a thread each: one comment on "
                f"{'the' if k == 1 else 'each'} file; `/sync resolve <path> ours` (or "
                "`theirs`) for a whole file, or resolve them by hand", ids)
    if k == 1:
        (path,) = files
        level = levels[path]
        then = f"`{level.command}`" if level.command else \
            f"`{level.tool}`" if level.tool else "the tool that made it"
        return (f"{head}: regenerate it, `/sync resolve {path} theirs` then {then}", ids)
    then = "its package manager" if kind == LOCKFILE else "the tool that made it"
    return (f"{head}: regenerate each, `/sync resolve <path> theirs` then {then} (each "
            "file's comment names it)", ids)


def _phrase(key: str, text: str, ids: list[str]) -> str:
    """One row's phrase: the need with its count, and how its items are answered."""
    phrase = text.format(n=len(ids), s="s" if len(ids) != 1 else "") + _how(key, ids)
    if key == "flag keep":
        phrase += (f": keep {'it' if len(ids) == 1 else 'them'}, "
                   f"`/sync answer {id_ranges(ids)} keep`")
    if key.startswith(("file confirm", "file propose", "manual theirs", "moved")):
        many = len(ids) > 1
        does = (f"confirms {'all' if many else 'it'}" if key.startswith("file confirm")
                else f"takes it{' for all' if many else ''}")
        phrase += (f": one command {does}, "
                   f"`/sync answer {id_ranges(ids)} {key.rsplit(' ', 1)[1]}`")
    return phrase


def workload(items: list[Json], one_click: Collection[str] | None = None,
             levels: Mapping[str, FileLevel] | None = None) -> str:
    """The open items counted by what each needs of a person: the size of the job, at a
    glance, the way a hand-written sync PR says "3 genuine decisions + 6 to confirm"."""
    return " · ".join(need for need, _ in workload_rows(items, one_click, levels))


__all__ = ["workload", "workload_rows"]
