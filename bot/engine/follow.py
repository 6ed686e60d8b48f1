"""Follow-up suggestions: once people resolve the first hunks of a file alike, the rest.

People who take one side at every hunk of a file they have resolved so far take it at
the next one too, far more often than any rule of :mod:`bot.engine.suggest` is right.
Replayed on real merges (``bench/replay_suggestions.py``; a person working down each file
in line order), the next hunk took that same side in 551 of 595 hunks of round 6's
training merges (92.6%), in 300 of 324, 517 of 530, 905 of 951 and 695 of 726 of the
validation sets valid2-valid5, and in 112 of 127 of valid6, replayed once after this was
built. By the tier criterion (:mod:`bot.engine.tiers`, merges as clusters) it would reach
Confirm (a bound of 0.934 over the eight training sets), but it stays a Decide's
suggestion, with its figure in the comment: the figure is for a person who resolves each
file top to bottom, and every follow-up of a file rests on the same person's first
answers.

**Twins.** A sync often holds the same conflict more than once: the same hunk of two
lock files, of a catalogue and its template, of one header copied into three folders.
Where an open hunk's three versions (ours, base, theirs) are exactly those of a hunk
people resolved already, and every such resolved twin got the same text, the follow-up
offers that text, whatever it is (a side, or what people wrote). People resolved such
twins alike in 99% of the replayed cases (``TWIN_EVIDENCE``); a twin's follow-up comes
before its file's side. The plan marks the twins (``ReviewItem.twins``,
:func:`bot.engine.classify.mark_twins`); this module reads the mark.

The App computes them after each push (:mod:`bot.sync.follow`) from what the rescan found
resolved and how (:func:`bot.engine.rescan.classify_resolution`), and posts at most one
review per push, on the head's lines of the regions still open. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bot.engine.generated import file_levels, one_comment

if TYPE_CHECKING:  # the gate imports the report, which imports this module
    from bot.engine.anchor import PrDiff
    from bot.engine.gate import Remaining

Json = dict[str, Any]

FOLLOW_MIN = 2  # resolved hunks of a file, all one side, before the rest are suggested it
EVIDENCE = ("in the replayed merges of 21 projects, the next hunk of such a file took the "
            "same side in 2,968 of 3,126 cases (94.9%)")
TWIN_FIGURE = "4,381 of 4,422 cases (99.1%)"
TWIN_EVIDENCE = ("in the replayed merges of 27 projects, a conflict identical to one already "
                 f"resolved in the same merge was resolved the same way in {TWIN_FIGURE}")
TWIN = "twin"  # a follow-up's ``side`` when it offers a resolved twin's text


def follow_marker(head: str) -> str:
    """The hidden marker of the follow-up review posted for one head of the sync branch."""
    return f"<!-- forksync:follow {head} -->"


def side_taken(item: Json, how: str | None) -> str | None:
    """The side a resolved item took: an answer or a whole side, or a suggestion that was
    one side's text; None for anything people wrote themselves."""
    if how in ("ours", "theirs"):
        return how
    if how == "suggested" and item.get("suggestion") is not None:
        for side in ("ours", "theirs"):
            if item["suggestion"] == item.get(side):
                return side
    return None


@dataclass(frozen=True)
class FileFollow:
    """One file whose resolved hunks (``done``, ids) all took ``side``; ``open`` still open."""

    path: str
    side: str
    done: tuple[str, ...]
    open: tuple[Json, ...]


def file_follow(items: Sequence[Json], resolved: set[str],
                resolutions: Mapping[str, str]) -> FileFollow | None:
    """For one file's items: its follow-up when at least ``FOLLOW_MIN`` of its conflict
    hunks are resolved, all took the same side, and some are still open."""
    hunks = [i for i in items if i.get("kind") == "conflict"]
    done = [i for i in hunks if i["id"] in resolved]
    open_ = tuple(i for i in hunks if i["id"] not in resolved)
    sides = {side_taken(i, resolutions.get(i["id"])) for i in done}
    if len(done) < FOLLOW_MIN or not open_ or len(sides) != 1 or None in sides:
        return None
    (side,) = sides
    assert side is not None
    return FileFollow(hunks[0]["path"], side, tuple(i["id"] for i in done), open_)


@dataclass(frozen=True)
class FollowUp:
    """One open hunk and the side its file's resolved hunks all took, or (``side`` is
    ``TWIN``) the text its resolved twins all got."""

    item: Json
    side: str
    after: tuple[str, ...]  # the resolved hunks it follows (of its file, or its twins)
    resolved: str | None = None  # a twin's: the text the twins in ``after`` got

    @property
    def text(self) -> str:
        if self.side == TWIN:
            return self.resolved or ""
        return str(self.item.get(self.side) or "")

    @property
    def taken(self) -> str | None:
        """The side this follow-up's text is ("ours", "theirs"), or None for another text."""
        if self.side != TWIN:
            return self.side
        return next((s for s in ("ours", "theirs")
                     if _same(str(self.item.get(s) or ""), self.text)), None)


def twin_groups(items: Iterable[Json]) -> dict[str, list[Json]]:
    """The plan's twins as the plan marked them: group (its first id) → its items."""
    groups: dict[str, list[Json]] = {}
    for item in items:
        twins = item.get("twins")
        if isinstance(twins, dict) and twins.get("group"):
            groups.setdefault(str(twins["group"]), []).append(item)
    return groups


def resolved_text(item: Json, how: str | None, texts: Mapping[str, str]) -> str | None:
    """The text a resolved hunk got: as found at the head, else what its answer takes."""
    if item["id"] in texts:
        return texts[item["id"]]
    if how in ("ours", "theirs"):
        return item.get(how)
    if how == "suggested":
        return item.get("suggestion")
    return None


def _same(a: str, b: str) -> bool:
    return a.rstrip("\r\n") == b.rstrip("\r\n")


def twin_follow_ups(plan_json: Json, resolved: set[str], resolutions: Mapping[str, str],
                    texts: Mapping[str, str], already: Iterable[str] = ()) -> list[FollowUp]:
    """Every open hunk with a resolved twin, offered the text its resolved twins all got
    (none where they got different texts, or one of them is unknown), in plan order. Left
    out as in :func:`follow_ups`."""
    skip = set(already)
    levels = file_levels(plan_json)
    out = []
    for twins, done, first in _agreed_groups(plan_json, resolved, resolutions, texts):
        after = tuple(i["id"] for i in done)  # one tuple for the group, however large
        for item in twins:
            if item["id"] in resolved or item["id"] in skip or one_comment(levels, item):
                continue
            if item.get("suggestion") is not None and _same(item["suggestion"], first):
                continue
            out.append(FollowUp(item, TWIN, after, first))
    return out


def twin_texts(plan_json: Json, resolved: set[str], resolutions: Mapping[str, str],
               texts: Mapping[str, str]) -> dict[str, str]:
    """Every open hunk whose resolved twins all got one text → that text (what
    ``/sync answer Qn twin`` writes, the hunk's own suggestion or not)."""
    return {item["id"]: text
            for twins, _, text in _agreed_groups(plan_json, resolved, resolutions, texts)
            for item in twins if item["id"] not in resolved}


def _agreed_groups(plan_json: Json, resolved: set[str], resolutions: Mapping[str, str],
                   texts: Mapping[str, str]) -> Iterator[tuple[list[Json], list[Json], str]]:
    """Each twin group with open hunks whose resolved hunks all got one known text: the
    group, its resolved hunks, and that text."""
    groups = twin_groups(i for f in plan_json.get("files", []) for i in f.get("review_items", []))
    for twins in groups.values():
        done = [i for i in twins if i["id"] in resolved]
        if not done or len(done) == len(twins):
            continue
        got = [resolved_text(i, resolutions.get(i["id"]), texts) for i in done]
        first = got[0]
        if first is None or any(t is None or not _same(t, first) for t in got):
            continue
        yield twins, done, first


def follow_ups(plan_json: Json, resolved: set[str], resolutions: Mapping[str, str],
               already: Iterable[str] = ()) -> list[FollowUp]:
    """Every open hunk a follow-up suggests a side for, in plan order.

    Left out: hunks in ``already`` (suggested at an earlier push), hunks whose own
    suggestion is that side's text already (their first comment has the same button), and
    the regions of a file answered together (:mod:`bot.engine.generated`), which get no
    thread each, at the first review or after.
    """
    skip = set(already)
    levels = file_levels(plan_json)
    out: list[FollowUp] = []
    for f in plan_json.get("files", []):
        if f.get("path") in levels:  # answered together, by its one comment: no thread each
            continue
        follow = file_follow(f.get("review_items", []), resolved, resolutions)
        if follow is None:
            continue
        for item in follow.open:
            if item["id"] in skip or item.get(follow.side) is None:
                continue
            if item.get("suggestion") is not None and item["suggestion"] == item[follow.side]:
                continue
            out.append(FollowUp(item, follow.side, follow.done))
    return out


def placed(follows: Sequence[FollowUp], remaining: Sequence[Remaining],
           diff: PrDiff) -> list[tuple[FollowUp, int, int]]:
    """The follow-ups whose region is still whole at the head, on lines one diff hunk shows
    (a suggestion replaces exactly the lines its comment covers), with those lines."""
    where = {r.item_id: r for r in remaining
             if r.marker and not r.orphan and r.start_line is not None and r.end_line}
    out = []
    for f in follows:
        r = where.get(str(f.item["id"]))
        if r is None or r.path != f.item["path"]:
            continue
        assert r.start_line is not None and r.end_line is not None
        hunk = diff.hunk_at(r.path, r.start_line)
        if hunk is not None and hunk.has(r.start_line, r.end_line):
            out.append((f, r.start_line, r.end_line))
    return out


def all_follow_ups(plan_json: Json, resolved: set[str], resolutions: Mapping[str, str],
                   texts: Mapping[str, str], already: Iterable[str] = ()) -> list[FollowUp]:
    """The follow-ups of one head: each open hunk's twin follow-up, else its file's side."""
    twins = twin_follow_ups(plan_json, resolved, resolutions, texts, already)
    taken = {str(f.item["id"]) for f in twins}
    sides = [f for f in follow_ups(plan_json, resolved, resolutions, already)
             if str(f.item["id"]) not in taken]
    order = {str(i["id"]): n for n, i in enumerate(
        i for f in plan_json.get("files", []) for i in f.get("review_items", []))}
    return sorted(twins + sides, key=lambda f: order.get(str(f.item["id"]), 0))


__all__ = ["EVIDENCE", "FOLLOW_MIN", "TWIN", "TWIN_EVIDENCE", "TWIN_FIGURE", "FileFollow",
           "FollowUp", "all_follow_ups", "file_follow", "follow_marker", "follow_ups", "placed",
           "resolved_text", "side_taken", "twin_follow_ups", "twin_groups", "twin_texts"]
