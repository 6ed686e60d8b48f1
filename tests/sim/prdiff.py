"""A pull request's diff as GitHub sees it: per-file patches and where review comments may go.

GitHub only accepts a review comment on a line that the PR diff shows: on the
RIGHT side a line of the new file inside a hunk (added or context), on the
LEFT side a line of the old file inside a hunk (removed or context). A
multi-line comment must start and end in the same hunk. Anything else gets
``422 Line could not be resolved`` and the whole review is rejected.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from unidiff.patch import PatchSet


@dataclass(frozen=True)
class DiffLine:
    kind: str  # " ", "+", "-" (or "\\" for "no newline at end of file")
    old: int | None
    new: int | None
    position: int  # GitHub's legacy "position": lines below the file's first @@ header


@dataclass
class Hunk:
    header: str
    lines: list[DiffLine] = field(default_factory=list)
    header_position: int = 0

    def find(self, side: str, number: int) -> DiffLine | None:
        for line in self.lines:
            if side == "RIGHT" and line.kind in " +" and line.new == number:
                return line
            if side == "LEFT" and line.kind in " -" and line.old == number:
                return line
        return None


@dataclass
class FileDiff:
    filename: str
    previous_filename: str | None
    status: str  # added, removed, modified, renamed
    additions: int
    deletions: int
    patch: str | None
    binary: bool
    hunks: list[Hunk] = field(default_factory=list)

    def locate(self, side: str, line: int) -> tuple[Hunk, DiffLine] | None:
        for hunk in self.hunks:
            found = hunk.find(side, line)
            if found is not None:
                return hunk, found
        return None

    def at_position(self, position: int) -> tuple[Hunk, DiffLine] | None:
        for hunk in self.hunks:
            for line in hunk.lines:
                if line.position == position:
                    return hunk, line
        return None

    def diff_hunk(self, hunk: Hunk, upto: DiffLine) -> str:
        """The ``diff_hunk`` GitHub stores on a comment: the hunk header down to the line."""
        out = [hunk.header]
        for line in hunk.lines:
            if line.kind != "\\":
                out.append(line_text(self, line))
            if line is upto:
                break
        return "\n".join(out)


def line_text(file: FileDiff, line: DiffLine) -> str:
    assert file.patch is not None
    return file.patch.split("\n")[line.position]


def parse(diff_text: str) -> list[FileDiff]:
    files: list[FileDiff] = []
    for patched in PatchSet(diff_text):
        if patched.is_added_file:
            status = "added"
        elif patched.is_removed_file:
            status = "removed"
        elif patched.is_rename:
            status = "renamed"
        else:
            status = "modified"
        filename = patched.path
        previous = patched.source_file[2:] if patched.is_rename else None
        hunks: list[Hunk] = []
        patch_lines: list[str] = []
        for hunk in patched:
            text = str(hunk).rstrip("\n").split("\n")
            header = text[0]
            h = Hunk(header, header_position=len(patch_lines))
            patch_lines.append(header)
            for body_line, raw in zip(hunk, text[1:], strict=False):
                h.lines.append(DiffLine(body_line.line_type, body_line.source_line_no,
                                        body_line.target_line_no, len(patch_lines)))
                patch_lines.append(raw)
            hunks.append(h)
        files.append(FileDiff(
            filename=filename, previous_filename=previous, status=status,
            additions=patched.added, deletions=patched.removed,
            patch="\n".join(patch_lines) if patch_lines else None,
            binary=bool(patched.is_binary_file), hunks=hunks))
    return files
