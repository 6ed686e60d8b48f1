"""git's merge messages in forksync's words: "the fork" and "upstream", not ours/theirs.

``git merge-tree --messages`` tells why a path conflicted, in git's words and with
the synthetic ref names (``ours``, ``theirs``) that no reader of a sync PR has
seen: ``warning: Cannot merge binary files: a.png (ours vs. theirs)``. Review items
and the checklist say the same thing about the fork and upstream instead.
"""

from __future__ import annotations

import re

_SIDES = {"ours": "the fork", "theirs": "upstream"}
_DELETED = re.compile(r"deleted in (?P<gone>\S+) and modified in (?P<kept>\S+)\.")
_RENAME_DELETE = re.compile(r"renamed to (?P<to>\S+) in (?P<renamer>\S+), but deleted in "
                            r"(?P<deleter>\S+?)\.?$")

# kind → (short label for the checklist, sentence for a review item's reason)
_SIMPLE: dict[str, tuple[str, str]] = {
    "CONFLICT (contents)": ("content conflict", "The fork and upstream changed the same lines."),
    "CONFLICT (binary)": ("binary file changed on both sides",
                          "The fork and upstream both changed this binary file, which cannot "
                          "be merged line by line."),
    "CONFLICT (file/directory)": ("a file on one side, a directory on the other",
                                  "One side has a file at this path and the other a "
                                  "directory."),
    "CONFLICT (distinct modes)": ("a different kind of entry on each side",
                                  "The fork and upstream have different kinds of entry here "
                                  "(a file, a symlink or a submodule)."),
    "CONFLICT (rename/rename)": ("renamed differently on each side",
                                 "The fork and upstream renamed this file to different names."),
    "CONFLICT (rename involved in collision)": ("rename collision",
                                                "A rename puts two files at this path."),
}


def _side(name: str) -> str:
    return _SIDES.get(name, name)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def describe(kind: str, text: str) -> tuple[str, str]:
    """A short label and a sentence for one of git's conflict messages (kind and text)."""
    if kind in _SIMPLE:
        label, sentence = _SIMPLE[kind]
        if kind == "CONFLICT (contents)" and "(add/add)" in text:
            return ("added on both sides",
                    "The fork and upstream both added this file, with different content.")
        return label, sentence
    if kind == "CONFLICT (modify/delete)":
        m = _DELETED.search(text)
        if m:
            gone, kept = _side(m["gone"]), _side(m["kept"])
            return (f"deleted in {gone}, changed in {kept}".replace("in upstream", "upstream"),
                    f"{_cap(gone)} deleted this file and {kept} changed it.")
        return "deleted on one side, changed on the other", \
            "One side deleted this file and the other changed it."
    if kind == "CONFLICT (rename/delete)":
        m = _RENAME_DELETE.search(text)
        if m:
            renamer, deleter = _side(m["renamer"]), _side(m["deleter"])
            return (f"renamed by {renamer}, deleted by {deleter}",
                    f"{_cap(renamer)} renamed this file (to {m['to']}) and {deleter} "
                    "deleted it.")
        return "renamed on one side, deleted on the other", \
            "One side renamed this file and the other deleted it."
    if "submodule" in kind:
        return ("submodule conflict",
                "The fork and upstream moved this submodule to commits git cannot merge.")
    if "directory rename" in kind:
        return ("directory rename conflict",
                "A directory renamed on one side moves this file where the other side does not "
                "expect it.")
    inner = re.sub(r"^CONFLICT\s*\(|\)$", "", kind).strip() or "conflict"
    return inner, f"git could not merge this path ({inner})."
