"""The engine's data: what a plan is made of. Pure values, no I/O.

These types are the contract between the engine (plan/sync), the reports, the
publisher and the App. Their JSON shape (``to_json``) is the user-facing report
schema from DESIGN.md, so fields are only ever added, never renamed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from bot.engine.markers import MARKER_SIZE


class Status(StrEnum):
    """The one status every path in the window gets."""

    CLEAN = "clean"  # merged without conflict, and the result differs from ours
    CONFLICT = "conflict"  # needs a person (markers, modify/delete, ...)
    NEW = "new"  # in theirs' but not in ours
    DELETED = "deleted"  # upstream deleted it and the deletion merged
    RENAMED = "renamed"  # upstream renamed it and the rename merged
    SKIPPED = "skipped"  # a policy excluded it
    UNCHANGED = "unchanged"  # ours already matches the merge result


class Tier(StrEnum):
    """How much of a person a review item needs."""

    DECIDE = "Decide"  # needs judgement: no safe proposal
    CONFIRM = "Confirm"  # the bot has a proposal to confirm
    SETTLED = "Settled"  # resolved by a policy or a safe rule, with its reason


class ItemKind(StrEnum):
    CONFLICT = "conflict"  # a marker region in the merged file
    FILE = "file"  # a whole-file conflict: modify/delete, add/add binary, mode, ...
    MANUAL = "manual"  # a `manual` policy: port the translated upstream diff by hand
    FLAG = "flag"  # an upstream-added line matched a `flags` pattern
    POLICY = "policy"  # a conflict a policy (ours/theirs/skip) resolved


@dataclass(frozen=True)
class WindowEntry:
    """One upstream PR (or PR-less commit) merged inside the window."""

    number: int | None  # None: a commit with no PR
    title: str
    author: str
    sha: str
    date: str  # ISO 8601 committer date
    summary: str = ""  # one line from the commit message body, if it has one
    files: tuple[str, ...] = ()  # upstream paths this PR changed (first-parent diff)
    # The author's GitHub login where the commit tells it ("Merge pull request #N from
    # login/branch", or a users.noreply.github.com address); "" when only a name is known,
    # which is never written as an @-mention (it would notify whoever has that login).
    login: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "title": self.title,
            "author": self.author,
            "sha": self.sha,
            "date": self.date,
            "kind": "pr" if self.number is not None else "commit",
            "summary": self.summary,
            "files": list(self.files),
            "login": self.login,
        }


@dataclass
class ReviewItem:
    """One thing a person should look at: usually one conflict hunk.

    ``start_line``/``end_line`` are 1-based and inclusive, in the merged file of
    commit 1, and cover the whole marker region (``<<<<<<<`` to ``>>>>>>>``), so
    a ```suggestion``` with ``suggestion`` replaces the region in one click. They
    are ``None`` for items that have no region (whole-file conflicts, flags on
    clean files); those go into the PR body rather than a review comment.
    """

    id: str  # "Q1", "Q2", ... stable within one plan, in path then line order
    kind: ItemKind
    path: str  # fork path
    upstream_path: str
    tier: Tier
    reason: str  # why the suggestion is safe, or why a person must decide
    ours: str = ""
    base: str = ""
    theirs: str = ""
    start_line: int | None = None
    end_line: int | None = None
    suggestion: str | None = None  # replacement text for the whole region, or None
    question: str | None = None  # set when tier is DECIDE/CONFIRM
    choices: list[str] = field(default_factory=list)  # e.g. ["ours", "theirs", "suggested"]
    prs: list[int] = field(default_factory=list)  # upstream PRs whose commits changed these lines
    # Whole-file items, and `manual` items whose file the fork never changed
    # (``bot.engine.manual``): each side's tree entry at the path ({"mode", "oid"}, None if
    # absent), so "/sync resolve <path> ours|theirs" can put that side back without re-merging.
    sides: dict[str, dict[str, str] | None] | None = None
    rule: str = ""  # conflict items: the suggestion rule that decided ("merge word by word", ...)
    # The habit of this fork's past merges that raised the tier (``bot.engine.learn``), if any.
    learned: str = ""
    # Conflict items with twins, other items of the plan with exactly this hunk's three
    # versions (``bot.engine.follow``; people resolve them alike): {"group": the first
    # item's id, "count": how many others, "some": up to three of them, {"id", "path"}}.
    twins: dict[str, Any] | None = None
    # Whole-file items that keep a deletion, and add/add items whose one version is a stub:
    # the files of commit 1 that still refer to the path (``bot.engine.refs``), counted:
    # {"files": how many, "complete": False where that is a lower bound, and for an
    # add/add "keep": the side that keeps them working}. The reason names them.
    refs: dict[str, Any] | None = None
    # Flag items: their lines, each with how fork main writes its option
    # (``bot.engine.flags``): {"searched": fork files searched, "answer", "lines":
    # [{"line", "text", "upstream", "option", "fork", "proposed"}]}.
    flagged: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind.value,
            "path": self.path,
            "upstream_path": self.upstream_path,
            "tier": self.tier.value,
            "reason": self.reason,
            "question": self.question,
            "choices": list(self.choices),
            "start_line": self.start_line,
            "end_line": self.end_line,
            "ours": self.ours,
            "base": self.base,
            "theirs": self.theirs,
            "suggestion": self.suggestion,
            "prs": list(self.prs),
            **({"sides": self.sides} if self.sides is not None else {}),
            **({"rule": self.rule} if self.rule else {}),
            **({"learned": self.learned} if self.learned else {}),
            **({"twins": self.twins} if self.twins else {}),
            **({"refs": self.refs} if self.refs else {}),
            **({"flagged": self.flagged} if self.flagged is not None else {}),
        }


@dataclass(frozen=True)
class Changed:
    """The lines each side added or removed in one file, from base to its version
    (``bot.engine.share`` counts them)."""

    ours: int
    theirs: int

    @property
    def total(self) -> int:
        return self.ours + self.theirs

    @property
    def fork_share(self) -> float:
        """The fork's part of all the lines changed in the file (0 when nothing changed)."""
        return self.ours / self.total if self.total else 0.0


@dataclass
class FileResult:
    """The outcome of the sync at one path of the window."""

    path: str  # fork path (after translation and merge)
    upstream_path: str  # upstream path at the tip (or at the cutoff if deleted)
    status: Status
    review_items: list[ReviewItem] = field(default_factory=list)
    policy: str | None = None  # the policy action that applied, if any
    note: str = ""  # one line for humans, e.g. "CONFLICT (modify/delete)"
    binary: bool = False
    # The conflict-marker size the merge wrote this file's regions with: git's 7, or more
    # where a line of the file could be taken for a marker. Rescans parse with it.
    marker_size: int = MARKER_SIZE
    # A conflicted text file's lines changed since base by each side, as `git diff
    # --numstat` counts them: what decides "conflict, the fork's file", kept so that the
    # App's memory replays its outcomes with the rule the classifier used.
    changed: Changed | None = None
    # A lockfile or a generated file (``bot.engine.generated.detect``): {"kind": "lockfile",
    # "tool", "command"} or {"kind": "generated", "evidence": the marker line}. Its regions
    # get one comment for the whole file, and one command: take a side, run the tool again.
    generated: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "upstream_path": self.upstream_path,
            "status": self.status.value,
            "policy": self.policy,
            "note": self.note,
            "binary": self.binary,
            "marker_size": self.marker_size,
            **({"changed": {"ours": self.changed.ours, "theirs": self.changed.theirs}}
               if self.changed is not None else {}),
            **({"generated": dict(self.generated)} if self.generated else {}),
            "review_items": [item.to_json() for item in self.review_items],
        }


@dataclass
class Plan:
    """Everything one sync computes, before anything is written anywhere."""

    upstream_repo: str  # "owner/repo" as named in the config
    upstream_branch: str
    cutoff: str  # full upstream SHA
    tip: str  # full upstream SHA
    ours: str  # full SHA of fork main
    window: list[WindowEntry]
    files: list[FileResult]
    merged_tree: str  # tree OID of commit 1, in the work repository
    work_git_dir: str  # the scratch repository holding merged_tree and its objects
    fork_branch: str = "main"
    messages: list[str] = field(default_factory=list)  # git merge-tree's informational lines
    tip_source: str = ""  # why the window ends at the tip: "head" or what was asked ("#N", a sha)
    warnings: list[dict[str, Any]] = field(default_factory=list)  # config warnings (warnings.py)
    translated: bool = True  # False: the config renames nothing, base and theirs are upstream's

    @classmethod
    def from_json(cls, d: dict[str, Any], *, work_git_dir: str = "") -> Plan:
        return plan_from_json(d, work_git_dir=work_git_dir)

    @property
    def items(self) -> list[ReviewItem]:
        return [item for f in self.files for item in f.review_items]

    def counts(self) -> dict[str, int]:
        counts = {s.value: 0 for s in Status}
        for f in self.files:
            counts[f.status.value] += 1
        return counts

    def tier_counts(self) -> dict[str, int]:
        counts = {t.value: 0 for t in Tier}
        for item in self.items:
            counts[item.tier.value] += 1
        return counts

    @property
    def window_label(self) -> str:
        """``#first..#last`` (in merge order) for the Upstream-Window trailer, or short SHAs."""
        numbers = [e.number for e in self.window if e.number is not None]
        if numbers:
            return f"#{numbers[0]}..#{numbers[-1]}"
        return f"{self.cutoff[:12]}..{self.tip[:12]}"

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": "forksync.report/v1",
            "upstream": {"repo": self.upstream_repo, "branch": self.upstream_branch},
            "cutoff": self.cutoff,
            "tip": self.tip,
            "ours": self.ours,
            "fork_branch": self.fork_branch,
            "merged_tree": self.merged_tree,
            "messages": list(self.messages),
            "window_label": self.window_label,
            "tip_source": self.tip_source,
            "window": [e.to_json() for e in self.window],
            "files": [f.to_json() for f in self.files],
            "warnings": list(self.warnings),
            "translated": self.translated,
            "summary": {
                "files": len(self.files),
                "status": self.counts(),
                "review_items": len(self.items),
                "tiers": self.tier_counts(),
                "prs": sum(1 for e in self.window if e.number is not None),
                "commits": len(self.window),
            },
        }


def inputs_label(ours: str, cutoff: str, tip: str, translated: bool = True) -> str:
    """The merge's three inputs, as commit 1's message and the PR body name them."""
    if translated:
        return (f"ours = {ours} · base' = translate(upstream@{cutoff}) · "
                f"theirs' = translate(upstream@{tip})")
    return f"ours = {ours} · base = upstream@{cutoff} · theirs = upstream@{tip}"


def conflicts_label(n: int) -> str:
    """The one wording, in commit 1's message and the PR title: "2 conflicted files need review"."""
    return f"{n} conflicted file{'s need' if n != 1 else ' needs'} review"


def marker_size_of(file_json: dict[str, Any]) -> int:
    """A file's marker size in a JSON report (reports written before it was recorded: 7)."""
    return int(file_json.get("marker_size") or MARKER_SIZE)


def changed_of(file_json: dict[str, Any]) -> Changed | None:
    """A file entry's lines changed by each side, if the plan counted them."""
    c = file_json.get("changed")
    if not isinstance(c, dict):
        return None
    try:
        return Changed(int(c["ours"]), int(c["theirs"]))
    except (KeyError, TypeError, ValueError):
        return None


def marker_sizes(plan_json: dict[str, Any]) -> dict[str, int]:
    """Path -> the marker size its merge used, for every file of a JSON report."""
    return {f["path"]: marker_size_of(f) for f in plan_json.get("files", [])}


def item_from_json(d: dict[str, Any]) -> ReviewItem:
    return ReviewItem(
        id=d["id"], kind=ItemKind(d["kind"]), path=d["path"], upstream_path=d["upstream_path"],
        tier=Tier(d["tier"]), reason=d["reason"], ours=d.get("ours", ""), base=d.get("base", ""),
        theirs=d.get("theirs", ""), start_line=d.get("start_line"), end_line=d.get("end_line"),
        suggestion=d.get("suggestion"), question=d.get("question"),
        choices=list(d.get("choices", [])), prs=list(d.get("prs", [])),
        sides=d.get("sides"), rule=d.get("rule", ""), learned=d.get("learned", ""),
        twins=d.get("twins"), refs=d.get("refs"), flagged=d.get("flagged"),
    )


def plan_from_json(d: dict[str, Any], *, work_git_dir: str = "") -> Plan:
    """Rebuild a Plan from its JSON report (the App stores reports, not live objects)."""
    return Plan(
        upstream_repo=d["upstream"]["repo"],
        upstream_branch=d["upstream"]["branch"],
        cutoff=d["cutoff"],
        tip=d["tip"],
        ours=d["ours"],
        window=[WindowEntry(e["number"], e["title"], e["author"], e["sha"], e["date"],
                            e.get("summary", ""), tuple(e.get("files", ())),
                            e.get("login", ""))
                for e in d["window"]],
        files=[FileResult(f["path"], f["upstream_path"], Status(f["status"]),
                          [item_from_json(i) for i in f["review_items"]], f.get("policy"),
                          f.get("note", ""), f.get("binary", False), marker_size_of(f),
                          changed_of(f), f.get("generated"))
               for f in d["files"]],
        merged_tree=d.get("merged_tree", ""),
        work_git_dir=work_git_dir,
        fork_branch=d.get("fork_branch", "main"),
        messages=list(d.get("messages", [])),
        tip_source=d.get("tip_source", ""),
        warnings=list(d.get("warnings", [])),
        translated=bool(d.get("translated", True)),
    )
