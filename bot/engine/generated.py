"""Lockfiles, generated files and files with very many conflicts: one comment per file. Pure.

A lockfile (``Cargo.lock``, ``pnpm-lock.yaml``...) is written by its package manager from
the manifests, and a generated file (``Code generated ... DO NOT EDIT.``, a parser
Menhir wrote) by its tool from its sources. Neither is merged by hand, hunk by hunk: the
same advice a thousand times over helps nobody, and a hunk merged by hand can still be
wrong as a whole (keeping both sides of a ``Cargo.lock`` region listed one dependency
twice). What people do is take one side and run the tool again. So such a file's
conflict regions stay items of their own (the gate and the rescan count regions by item
id), but the review gives the file ONE comment, the PR body ONE group and one row, with
one command for every region: ``/sync resolve <path> theirs``, then the tool.

A file with more than :data:`MANY_REGIONS` conflict regions gets the same one comment
whatever it is, so that no review carries thousands of threads.

:func:`lockfile` finds a lockfile by its name, :func:`generated_marker` a generated file
by a marker in a comment of its first lines, :func:`linguist_generated` by the merged
tree's root ``.gitattributes``; the classifier records what it found on the file
(``FileResult.generated``), and :func:`file_levels` reads it back from the JSON report.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from bot.engine.markers import MarkerRegion
from bot.engine.model import ItemKind, ReviewItem, Tier

Json = dict[str, Any]

# A file with more conflict regions than this gets one comment, not a thread each. Why 50:
# GitHub's review page loads comments in batches and a review of more than a few dozen
# threads on one file is not read one by one; in the replayed merges of
# bench/replay_merges.txt, a file with more than 50 regions was resolved by taking one
# side whole, or rebuilt, in most merges (bench/README.md, round 15). It is also the
# number of items one more write request buys (``review.write_budget``).
MANY_REGIONS = 50

LOCKFILE, GENERATED, MANY = "lockfile", "generated", "many"
GENERATED_LINES = 5  # a generated file says so in its first lines


@dataclass(frozen=True)
class Lockfile:
    """A package manager's lockfile: who writes it, from what, and the command that does."""

    tool: str
    command: str  # regenerates the file from the manifests, keeping what it can
    manifest: str  # what the lockfile is resolved from
    merges_markers: bool = False  # the tool reads the file with conflict markers, both sides
    note: str = ""  # a caveat of the command, said after it


# By file name. Each command is the one the tool's documentation gives for bringing the
# lockfile in line with its manifest while keeping the versions already locked where it
# can. npm (5.7 and later), Yarn and pnpm also read a lockfile that still has conflict
# markers and merge both sides themselves.
LOCKFILES: dict[str, Lockfile] = {
    "Cargo.lock": Lockfile("Cargo", "cargo update --workspace", "`Cargo.toml`"),
    "package-lock.json": Lockfile("npm", "npm install", "`package.json`", True),
    "npm-shrinkwrap.json": Lockfile("npm", "npm install", "`package.json`", True),
    "yarn.lock": Lockfile("Yarn", "yarn install", "`package.json`", True),
    "pnpm-lock.yaml": Lockfile("pnpm", "pnpm install", "`package.json`", True),
    "bun.lock": Lockfile("Bun", "bun install", "`package.json`"),
    "poetry.lock": Lockfile("Poetry", "poetry lock", "`pyproject.toml`",
                            note="Poetry 1.x needs `poetry lock --no-update` to keep the "
                            "locked versions"),
    "uv.lock": Lockfile("uv", "uv lock", "`pyproject.toml`"),
    "Pipfile.lock": Lockfile("Pipenv", "pipenv lock", "`Pipfile`"),
    "composer.lock": Lockfile("Composer", "composer update --lock", "`composer.json`",
                              note="first run again the fork's own `composer require` or "
                              "`composer remove`, as Composer's guide to merge conflicts "
                              "says"),
    "Gemfile.lock": Lockfile("Bundler", "bundle install", "the `Gemfile`"),
    "go.sum": Lockfile("Go", "go mod tidy", "`go.mod`"),
    "flake.lock": Lockfile("Nix", "nix flake lock", "`flake.nix`"),
    "pubspec.lock": Lockfile("Dart's pub", "dart pub get", "`pubspec.yaml`",
                             note="`flutter pub get` in a Flutter project"),
    "Podfile.lock": Lockfile("CocoaPods", "pod install", "the `Podfile`"),
    "mix.lock": Lockfile("Mix", "mix deps.get", "`mix.exs`"),
    "packages.lock.json": Lockfile("NuGet", "dotnet restore --force-evaluate",
                                   "the project files"),
    "Package.resolved": Lockfile("SwiftPM", "swift package resolve", "`Package.swift`"),
    "gradle.lockfile": Lockfile("Gradle", "./gradlew dependencies --write-locks",
                                "the build scripts"),
}


def lockfile(path: str) -> Lockfile | None:
    """The lockfile at ``path``, by its name, or None."""
    return LOCKFILES.get(PurePosixPath(path).name)


# What a generated file says of itself, in a comment: "@generated" (Meta's convention),
# "DO NOT EDIT" (Go's "Code generated ... DO NOT EDIT.", protoc's "DO NOT EDIT!"),
# "<auto-generated>" (.NET), "This file is automatically generated", "This generated code
# requires..." (Menhir), "Generated by ..." at the start of the comment. A line that only
# mentions generated things ("tokens generated by the lexer") does not count.
_SAYS_GENERATED = re.compile(
    r"@generated\b"
    r"|\bdo not (?:edit|modify)\b"
    r"|<auto-?generated\b"
    r"|\bthis generated (?:code|file|source)\b"
    r"|\bthis (?:\w+ )?(?:file|code|module|header|source|document)\b[^.]*?"
    r"\b(?:is|was|has been)\s+(?:(?!not\b)\w+\s+)?(?:auto-?|automatically\s+)?generated\b"
    r"|^(?:file\s+|code\s+)?(?:auto-?|automatically\s+)?generated\s+(?:by|from|with|using)\b"
    r"|^(?:auto-?|automatically\s+)generated\b",
    re.IGNORECASE)
# Comment leaders of one line: // # /* * (* -- ; % ! <!-- {- .. "rem" and "::" of batch.
_LINE_LEADER = re.compile(r"^(?://+!?|#+!?|/\*+!?|\*+|\(\*+|--+|;+|%+|!+|<!--|\{-|\.\.|"
                          r"@?rem\b|::)\s*", re.IGNORECASE)
# Openers of a comment that may go on over the next lines, with their closers.
_BLOCKS = {"/*": "*/", "(*": "*)", "<!--": "-->", "{-": "-}", '"""': '"""', "'''": "'''"}
# In prose a "#" or "*" opens a heading or a list item, not a comment.
_PROSE = frozenset({".md", ".markdown", ".rst", ".txt", ".adoc", ".org"})
_PROSE_LEADER = re.compile(r"^(?:<!--|\.\.)\s*")


def generated_marker(text: str | None, path: str = "") -> str | None:
    """The line of a comment in the first :data:`GENERATED_LINES` lines of ``text`` that
    says the file is generated, or None. Only comments count: prose that mentions
    generated code is not a marker."""
    if not text:
        return None
    prose = PurePosixPath(path).suffix.lower() in _PROSE
    closer: str | None = None  # inside a block comment or docstring opened above
    for raw in text.split("\n", GENERATED_LINES)[:GENERATED_LINES]:
        line = raw.strip()
        body: str | None = None
        if closer is not None:
            body = line.lstrip("*").strip()
            if closer in line:
                closer = None
        else:
            leader = (_PROSE_LEADER if prose else _LINE_LEADER).match(line)
            opener = next((o for o in _BLOCKS if line.startswith(o)), None)
            if opener is not None and (not prose or opener == "<!--"):
                body = line[len(opener):].strip()
                if _BLOCKS[opener] not in body:
                    closer = _BLOCKS[opener]
            elif leader is not None:
                body = line[leader.end():]
        if body and _SAYS_GENERATED.search(body):
            return line[:160]
    return None


_TOOL = re.compile(r"generated\s+(?:automatically\s+)?(?:by|with|using)\s+`?([\w@+/.-]+)",
                   re.IGNORECASE)
_NOT_A_TOOL = frozenset({"a", "an", "the", "this", "our", "your", "some", "hand", "script"})


def marker_tool(marker: str) -> str:
    """The tool a marker names ("Code generated by protoc-gen-go." → ``protoc-gen-go``), or
    "" where it names none, or names it in words ("by the protocol buffer compiler")."""
    m = _TOOL.search(marker)
    name = m.group(1).rstrip(".") if m else ""
    return "" if name.lower() in _NOT_A_TOOL else name


def linguist_generated(attributes: str | None, path: str) -> str | None:
    """The line of a root ``.gitattributes`` that marks ``path`` ``linguist-generated``
    (GitHub's own mark: it folds such files in a PR's diff), or None. The last matching
    line wins, as in git; patterns are matched as git matches them, short of ``**`` in
    the middle of a pattern, which matches any number of folders here too."""
    if not attributes:
        return None
    found: str | None = None
    for raw in attributes.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pattern, *attrs = line.split()
        said = [a for a in attrs if a.lstrip("-!").split("=")[0] == "linguist-generated"]
        if not said or not _attr_matches(pattern, path):
            continue
        last = said[-1]
        found = None if last.startswith(("-", "!")) or last.endswith("=false") else line
    return found


def _attr_matches(pattern: str, path: str) -> bool:
    if "/" not in pattern.rstrip("/"):
        return fnmatch.fnmatchcase(PurePosixPath(path).name, pattern)
    pattern = pattern.lstrip("/")
    if pattern.endswith("/**"):
        return path.startswith(pattern[:-2])
    return fnmatch.fnmatchcase(path, pattern.replace("**/", "*"))


def detect(path: str, texts: Iterable[str | None], attributes: str | None = None
           ) -> Json | None:
    """What the classifier records on a conflicted text file that is a lockfile or a
    generated file (``texts``: its versions, the fork's and upstream's; either side's
    marker counts), or None. ``attributes``: the merged tree's root ``.gitattributes``."""
    lock = lockfile(path)
    if lock is not None:
        return {"kind": LOCKFILE, "tool": lock.tool, "command": lock.command}
    for text in texts:
        marker = generated_marker(text, path)
        if marker is not None:
            tool = marker_tool(marker)
            return {"kind": GENERATED, "evidence": marker, **({"tool": tool} if tool else {})}
    attr = linguist_generated(attributes, path)
    if attr is not None:
        return {"kind": GENERATED, "evidence": attr, "attribute": True}
    return None


LOCKFILE_RULE, GENERATED_RULE = "lockfile", "generated file"  # their items' ``rule``


def regenerate_item(path: str, upstream_path: str, found: Json,
                    region: MarkerRegion) -> ReviewItem:
    """The item of one conflict region of a lockfile or a generated file (``found``: what
    :func:`detect` recorded). No proposal: keeping both sides of a lockfile's region can
    list a dependency twice, and either side alone can miss the other's; the file's one
    comment recommends a side for the whole file and the command that makes it again."""
    if found.get("kind") == LOCKFILE:
        rule, how = LOCKFILE_RULE, f"`{found.get('command')}`"
        what = f"a {found.get('tool')} lockfile"
    else:
        rule, how, what = GENERATED_RULE, "the tool that made it", "a generated file"
    return ReviewItem(
        id="", kind=ItemKind.CONFLICT, path=path, upstream_path=upstream_path,
        tier=Tier.DECIDE, rule=rule,
        reason=(f"A conflict region of `{path}`, {what}: take one side for the whole file "
                f"and regenerate it with {how}, rather than merge it region by region."),
        question="Take upstream's version of the whole file (theirs) and regenerate it, or "
                 "keep the fork's (ours)?",
        choices=["ours", "theirs"], ours=region.ours, base=region.base or "",
        theirs=region.theirs, start_line=region.start_line, end_line=region.end_line)


@dataclass(frozen=True)
class FileLevel:
    """A conflicted file whose regions get one comment: what it is and what to do."""

    path: str
    kind: str  # LOCKFILE, GENERATED or MANY
    ids: tuple[str, ...]  # its conflict items, in line order
    tool: str = ""  # a lockfile's package manager, or the tool a generated file names
    command: str = ""  # a lockfile's command that regenerates it
    evidence: str = ""  # a generated file's marker line, or its .gitattributes line
    attribute: bool = False  # the evidence is a .gitattributes line

    @property
    def regions(self) -> int:
        return len(self.ids)

    @property
    def side(self) -> str | None:
        """The side recommended as the start: upstream's, for a file a tool makes again."""
        return None if self.kind == MANY else "theirs"

    @property
    def resolve(self) -> str | None:
        """The one command that resolves every region of the file, if one is recommended."""
        return f"/sync resolve {self.path} {self.side}" if self.side else None

    @property
    def lock(self) -> Lockfile | None:
        return lockfile(self.path) if self.kind == LOCKFILE else None

    @property
    def what(self) -> str:
        """``a Cargo lockfile``, ``a generated file``, ``a file``."""
        if self.kind == LOCKFILE:
            return f"a {self.tool} lockfile" if self.tool else "a lockfile"
        return "a generated file" if self.kind == GENERATED else "a file"


def level_of(file_json: Json) -> FileLevel | None:
    """The one-comment delivery of one file of a JSON report, or None (a thread a region)."""
    if file_json.get("status") != "conflict":
        return None
    ids = tuple(str(i["id"]) for i in file_json.get("review_items", [])
                if i.get("kind") == "conflict")
    if not ids:
        return None
    found = file_json.get("generated")
    if isinstance(found, dict) and found.get("kind") in (LOCKFILE, GENERATED):
        return FileLevel(str(file_json["path"]), str(found["kind"]), ids,
                         str(found.get("tool") or ""), str(found.get("command") or ""),
                         str(found.get("evidence") or ""), bool(found.get("attribute")))
    if len(ids) > MANY_REGIONS:
        return FileLevel(str(file_json["path"]), MANY, ids)
    return None


def file_levels(plan_json: Mapping[str, Any]) -> dict[str, FileLevel]:
    """Path → its one-comment delivery, for every such file of the report."""
    out = {}
    for f in plan_json.get("files", []):
        level = level_of(f)
        if level is not None:
            out[level.path] = level
    return out


def one_comment(levels: Mapping[str, FileLevel], item: Mapping[str, Any]) -> bool:
    """Whether ``item`` is a conflict region of a file delivered as one comment."""
    return item.get("kind") == "conflict" and str(item.get("path")) in levels


__all__ = ["GENERATED", "GENERATED_LINES", "GENERATED_RULE", "LOCKFILE", "LOCKFILES",
           "LOCKFILE_RULE", "MANY", "MANY_REGIONS", "FileLevel", "Lockfile", "detect",
           "file_levels", "generated_marker", "level_of", "linguist_generated", "lockfile",
           "marker_tool", "one_comment", "regenerate_item"]
