"""Where commit 1's tree still refers to a path: the files and lines that name it.

A whole-file item asks whether a deletion stands (one side deleted a file the other
changed), and an add/add asks which of two new versions to keep; both are answered better
knowing what on the branch still uses the file. One ``git grep`` over the merged tree, with
fixed strings, finds the candidate lines for every path of a sync at once (a second one
reads the doc pages, see below), and each line is checked here for a real reference:

- the path itself: from the root (``docs/en/a.md``, ``${ROOT}/docs/en/a.md``), relative
  to the referring file (``./a.md``, ``../en/a.md``, ``${SCRIPT_DIR}/models/a.sh``), or at
  the end of a URL (``https://github.com/o/r/blob/main/docs/en/a.md``);
- a doc page (``.md``, ``.rst``) from another doc page also without its extension, or as
  ``.html``, in a link, a role or a toctree (``(a.html)``, ``:doc:`get_started/a```);
- a Python module by its dotted name (``import a.b.c``, ``from a.b.c import x``, the
  string ``"a.b.c.requests.get"``) or from its package (``from a.b import c``).

The bare names of doc pages are searched in doc pages only (a second git grep, over those),
where they are links, not words of code. Relative imports and import lists split over lines
are not followed. The output read is bounded (``OUTPUT_LIMIT`` per grep), and so are the
paths one sync searches (``TARGETS_MOST``); a cut output, or a blob the repository lacks (a
partial clone: git grep skips it and says so), makes what was found a lower bound
(``Refs.complete`` is False), said as "at least".
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from bot.engine.git import Git

DOC_SUFFIXES = frozenset({".md", ".rst", ".mdx", ".markdown"})
OUTPUT_LIMIT = 1 << 20  # bytes of git grep's output read per sync; the rest is not read
TARGETS_MOST = 64  # paths searched per sync (each adds a few patterns to the one grep)
FILES_SHOWN = 3  # referring files a sentence names; it counts the rest
LINES_SHOWN = 3  # line numbers it gives per file; it counts the rest
NAMES_SHOWN = 3  # names imported from a module that it gives

# A version this short beside one at least STUB_RATIO times longer (and STUB_FULL lines or
# more) is a stub: an add/add whose referring files need the other version.
STUB_LINES, STUB_RATIO, STUB_FULL = 5, 4, 10

_TOKEN = re.compile(r"[\w.~/@+%-]+")
_LINK_OPENERS = "(<`"  # what comes before a doc link's target: (a.md) <a> `a`


@dataclass(frozen=True)
class Refs:
    """The files of a tree that refer to one path, and where."""

    target: str
    lines: dict[str, tuple[int, ...]]  # referring file -> its line numbers, ascending
    names: tuple[str, ...] = ()  # names Python files import from it (a module), sorted
    complete: bool = True  # False: some of the tree was not read; there may be more

    @property
    def files(self) -> list[str]:
        """The referring files in the order a sentence names them: tests last."""
        return sorted(self.lines, key=lambda p: (_is_test(p), p))

    def count(self) -> str:
        """``2 files``, or ``at least 2 files`` when some of the tree was not read."""
        n = len(self.lines)
        return f"{'' if self.complete else 'at least '}{n} file{'s' if n != 1 else ''}"

    def where(self) -> str:
        """```README.md` L99; `docs/en/index.rst` L35, L52; and 2 more files``."""
        parts = []
        files = self.files
        for path in files[:FILES_SHOWN]:
            lines = self.lines[path]
            more = len(lines) - LINES_SHOWN
            parts.append(f"{_code(path)} " + ", ".join(f"L{n}" for n in lines[:LINES_SHOWN])
                         + (f" and {more} more line{'s' if more != 1 else ''}" if more > 0
                            else ""))
        rest = len(files) - FILES_SHOWN
        if rest > 0:
            parts.append(f"and {rest} more file{'s' if rest != 1 else ''}")
        return "; ".join(parts)

    def to_json(self, **extra: Any) -> dict[str, Any]:
        """What a review item records (``ReviewItem.refs``): the count, whether it is a
        lower bound, and ``extra`` (an add/add's side to keep)."""
        return {"files": len(self.lines), "complete": self.complete, **extra}


def _is_test(path: str) -> bool:
    p = PurePosixPath(path)
    return (any(part in ("test", "tests", "testing") for part in p.parts[:-1])
            or p.name.startswith("test_") or p.stem.endswith("_test"))


def _code(text: str) -> str:
    return f"`` {text} ``" if "`" in text else f"`{text}`"


class _Target:
    """One path searched for: the fixed strings its references hold, and their checks."""

    def __init__(self, path: str) -> None:
        p = PurePosixPath(path)
        self.path = path
        self.name = p.name
        self.doc = p.suffix.lower() in DOC_SUFFIXES
        self.stem = p.stem
        # Searched in every file; a doc page's bare name only in doc pages, where it is a
        # link, not a word of code ("usage", "index").
        self.needles = {self.name}
        self.doc_needles = {self.stem} if self.doc and self.stem else set()
        self.module: re.Pattern[str] | None = None  # its dotted name, where it is used
        self.package: tuple[re.Pattern[str], str] | None = None  # from <package> import <leaf>
        self.imports: re.Pattern[str] | None = None  # from <module> import <names>
        parts = list(p.with_suffix("").parts) if p.suffix == ".py" else []
        if parts[:1] == ["src"] and len(parts) > 1:
            parts = parts[1:]  # the src layout: src/pkg/mod.py is pkg.mod
        if parts[-1:] == ["__init__"]:
            parts = parts[:-1]
        if not parts or not all(x.isidentifier() for x in parts):
            return
        dotted = ".".join(parts)
        self.imports = re.compile(rf"\bfrom\s+{re.escape(dotted)}\s+import\s+(.*)")
        if len(parts) == 1:  # a top-level module: its name alone is any word
            self.needles |= {f"import {dotted}", f"from {dotted} "}
            self.module = re.compile(rf"\b(?:import|from)\s+{re.escape(dotted)}(?![\w])")
            return
        parent = ".".join(parts[:-1])
        self.needles |= {dotted, f"{parent} import"}
        self.module = re.compile(rf"(?<![\w.]){re.escape(dotted)}(?!\w)")
        self.package = (re.compile(rf"\bfrom\s+{re.escape(parent)}\s+import\s+(.*)"), parts[-1])

    def refers(self, referrer: str, text: str) -> bool:
        """Whether line ``text`` of file ``referrer`` refers to this path."""
        if self.module is not None and self.module.search(text):
            return True
        if self.package is not None:
            m = self.package[0].search(text)
            if m and self.package[1] in _imported(m.group(1)):
                return True
        from_doc = PurePosixPath(referrer).suffix.lower() in DOC_SUFFIXES
        here = posixpath.dirname(referrer)
        for m in _TOKEN.finditer(text):
            token = m.group().rstrip(".")
            candidate = None
            if token == self.name or token.endswith("/" + self.name):
                candidate = token
            elif self.doc and from_doc and (
                    text[m.start() - 1:m.start()] in tuple(_LINK_OPENERS)
                    or text.strip() == m.group()):  # a toctree's line is the target alone
                for end in (self.stem + ".html", self.stem):
                    if token == end or token.endswith("/" + end):
                        candidate = token[:len(token) - len(end)] + self.name
                        break
            if candidate is not None and self._is_path(candidate, here, from_doc):
                return True
        return False

    def _is_path(self, candidate: str, here: str, from_doc: bool) -> bool:
        """Whether ``candidate``, read in a file of directory ``here``, is this path: from
        the root or from ``here`` (a doc's bare file name only from ``here``)."""
        if "//" in candidate:  # a URL: the path is its end
            return candidate.endswith("/" + self.path)
        rooted = candidate.lstrip("/")
        if posixpath.normpath(posixpath.join(here, rooted)) == self.path:
            return True
        return ("/" in candidate or not from_doc) and posixpath.normpath(rooted) == self.path

    def names(self, referrer: str, text: str) -> list[str]:
        """The names a Python line imports from this module (``from m import a, b``)."""
        if self.imports is None or not referrer.endswith((".py", ".pyi")):
            return []
        m = self.imports.search(text)
        return sorted(_imported(m.group(1))) if m else []


def _imported(names: str) -> set[str]:
    """The names of an import list as one line holds it: ``(a, b as c)  # x`` -> a, b."""
    names = names.split("#", 1)[0].replace("(", " ").replace(")", " ").replace("\\", " ")
    found = {part.split(" as ", 1)[0].strip() for part in names.split(",")}
    return {n for n in found if n.isidentifier()}


def find_refs(git: Git, tree: str, targets: Iterable[str], *,
              skip: Collection[str] = ()) -> dict[str, Refs]:
    """The references in ``tree`` to each of ``targets`` (the first ``TARGETS_MOST``); a
    path no file refers to is left out. One ``git grep`` over every file, and a second over
    the doc pages for the pages' bare names where a target is one. A file never refers to
    itself, and the files of ``skip`` (say, those the sync's proposals delete) are not read
    as referring."""
    wanted = [_Target(t) for t in dict.fromkeys(targets)][:TARGETS_MOST]
    if not wanted:
        return {}
    everywhere, whole = _grep(git, tree, {n for t in wanted for n in t.needles}, ())
    in_docs, docs_whole = _grep(git, tree, {n for t in wanted for n in t.doc_needles},
                                [f"*{suffix}" for suffix in sorted(DOC_SUFFIXES)])
    found: dict[str, dict[str, set[int]]] = {t.path: {} for t in wanted}
    names: dict[str, set[str]] = {t.path: set() for t in wanted}
    excluded = set(skip)
    for path, number, text in [*_parse(everywhere, tree), *_parse(in_docs, tree)]:
        if path in excluded:
            continue
        for t in wanted:
            if path == t.path or not any(n in text for n in t.needles | t.doc_needles):
                continue
            if t.refers(path, text):
                found[t.path].setdefault(path, set()).add(number)
                names[t.path].update(t.names(path, text))
    return {t.path: Refs(t.path, {p: tuple(sorted(ns)) for p, ns in found[t.path].items()},
                         tuple(sorted(names[t.path])),
                         whole and (docs_whole or not t.doc_needles))
            for t in wanted if found[t.path]}


def _grep(git: Git, tree: str, needles: set[str], pathspecs: Iterable[str]
          ) -> tuple[bytes, bool]:
    """The lines of ``tree``'s files (those of ``pathspecs``, or all) that hold one of
    ``needles``, as ``git grep -z -n`` prints them, up to ``OUTPUT_LIMIT`` bytes; and
    whether that is all of them (False: cut, or some blob could not be read)."""
    if not needles:
        return b"", True
    args = ["grep", "-I", "-n", "-z", "-F", "--no-color"]
    for needle in sorted(needles):
        args += ["-e", needle]
    head = git.run_head(*args, tree, "--", *pathspecs, limit=OUTPUT_LIMIT, ok_codes=(0, 1))
    # git grep names each blob it could not read (a partial clone lacks it) and goes on.
    return head.stdout, not head.cut and not head.stderr.strip()


def _parse(out: bytes, tree: str) -> Iterator[tuple[str, int, str]]:
    """``<tree>:<path>\\0<line>\\0<text>\\n`` records of ``git grep -z -n``; a record cut
    by the output limit is left out."""
    prefix = f"{tree}:".encode()
    pos, end = 0, len(out)
    while pos < end:
        a = out.find(b"\0", pos)
        b = out.find(b"\0", a + 1) if a >= 0 else -1
        c = out.find(b"\n", b + 1) if b >= 0 else -1
        if c < 0:
            return
        name = out[pos:a].removeprefix(prefix)
        number = out[a + 1:b]
        pos = c + 1
        if number.isdigit():
            yield (name.decode("utf-8", "surrogateescape"), int(number),
                   out[b + 1:c].decode("utf-8", "replace"))


def line_count(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def stub_side(ours: str, theirs: str) -> str | None:
    """The side ("ours" or "theirs") whose version is a stub beside the other's, or None."""
    a, b = line_count(ours), line_count(theirs)
    if a <= STUB_LINES and b >= max(STUB_RATIO * max(a, 1), STUB_FULL):
        return "ours"
    if b <= STUB_LINES and a >= max(STUB_RATIO * max(b, 1), STUB_FULL):
        return "theirs"
    return None


def deletion_note(refs: Refs, deleted_by: str) -> str:
    """The sentence a whole-file item that keeps a deletion gets: who still refers to the
    file, and to check them first."""
    one = len(refs.lines) == 1
    verb = "keep" if deleted_by == "fork" else "take"
    return (f"{_cap(refs.count())} on this branch still refer{'s' if one else ''} to it: "
            f"{refs.where()}. Check {'it' if one else 'these'} before you {verb} the deletion.")


_WHOSE = {"ours": "the fork's", "theirs": "upstream's"}


def stub_note(refs: Refs, ours: str, theirs: str) -> tuple[str, str] | None:
    """For an add/add whose one version is a stub and which files on the branch refer to:
    the sentence that says so, and the side that keeps those files working; None where no
    version is a stub, or the stub has every name the referring files import from it."""
    stub = stub_side(ours, theirs)
    if stub is None:
        return None
    keep = "theirs" if stub == "ours" else "ours"
    text = {"ours": ours, "theirs": theirs}
    lacks = [n for n in refs.names if not re.search(rf"(?<!\w){re.escape(n)}(?!\w)", text[stub])]
    if refs.names and not lacks:
        return None  # the stub may well re-export them: nothing sure to say
    one = len(refs.lines) == 1
    said = f"{_cap(refs.count())} on this branch refer{'s' if one else ''} to it: {refs.where()}."
    if refs.names:
        said += f" Imported from it: {_names(list(refs.names))}" + (
            f", none of which {_WHOSE[stub]} version has." if len(lacks) == len(refs.names)
            else f"; {_WHOSE[stub]} version lacks {_names(lacks)}.")
    n, m = line_count(text[stub]), line_count(text[keep])
    said += f" {_cap(_WHOSE[stub])} version is a {n}-line stub; {_WHOSE[keep]} has {m} lines."
    return said, keep


def _names(names: list[str]) -> str:
    shown = ", ".join(f"`{n}`" for n in names[:NAMES_SHOWN])
    more = len(names) - NAMES_SHOWN
    return shown + (f" and {more} more name{'s' if more != 1 else ''}" if more > 0 else "")


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


__all__ = ["Refs", "deletion_note", "find_refs", "line_count", "stub_note", "stub_side"]
