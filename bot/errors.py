"""Errors a user can cause. Each carries one line that tells them what to fix."""

from __future__ import annotations


class ForksyncError(Exception):
    """Base for every failure that ends as a one-line message, never a traceback."""

    exit_code = 1

    def __str__(self) -> str:
        return self.args[0] if self.args else self.__class__.__name__


class ConfigError(ForksyncError):
    """A problem in .github/forksync.yml: names the file, line, key and what was expected."""

    exit_code = 2

    def __init__(self, file: str, line: int | None, key: str, expected: str) -> None:
        self.file = file
        self.line = line
        self.key = key
        self.expected = expected
        where = f"{file}:{line}" if line is not None else file
        super().__init__(f"{where}: {key}: {expected}")


class GitError(ForksyncError):
    """git failed, or a repository/revision given by the user does not exist."""

    exit_code = 3


class WindowError(ForksyncError):
    """The window cannot be computed (no cutoff, cutoff not an ancestor of the tip, ...)."""

    exit_code = 4
