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


class GitTimeout(GitError):
    """A git process ran past its time limit and was stopped, so no job can hang on it."""


class MissingObject(GitError):
    """A git object a sync needs is missing from a repository, or cannot be read (corrupt).

    The message names the object and, where the reader knows them, the repository and
    the path it was reading: ``the upstream repository is missing blob <oid>
    (slime/x.py at the tip); ...``. A reader further out adds what it knows with :meth:`at`.
    """

    def __init__(self, oid: str, *, kind: str | None = None, path: str | None = None,
                 repo: str | None = None) -> None:
        self.oid, self.kind, self.path, self.repo = oid, kind, path, repo
        where = f" ({path})" if path else ""
        super().__init__(f"{repo or 'a repository'} is missing {kind or 'git object'} {oid}"
                         f"{where}, or it is corrupt: fetch the repository again, or clone "
                         "it afresh")

    def at(self, *, path: str | None = None, repo: str | None = None,
           kind: str | None = None) -> MissingObject:
        """The same object, with the context an outer reader knows filled in where unknown."""
        return MissingObject(self.oid, kind=self.kind or kind, path=self.path or path,
                             repo=self.repo or repo)


class DiskFull(GitError):
    """A write failed for want of disk space: the job fails and is retried, nothing is lost."""
