"""The window: which upstream PRs a sync brings in, from the cutoff to the tip."""

from __future__ import annotations

import re
from dataclasses import replace

from bot.engine.git import Git, reading
from bot.engine.model import WindowEntry
from bot.errors import ForksyncError, GitError, MissingObject, WindowError

TRAILER_SYNC = "Upstream-Sync"
TRAILER_WINDOW = "Upstream-Window"

_SQUASH = re.compile(r"^(?P<title>.*?)\s*\(#(?P<n>\d+)\)\s*$")
_MERGE = re.compile(r"^Merge pull request #(?P<n>\d+) from (?P<who>[^/\s]+)(?:/\S*)?")
LOGIN = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})"  # a GitHub login's shape
# GitHub's address for a user who keeps theirs private: [id+]login@users.noreply.github.com
_NOREPLY = re.compile(rf"^(?:\d+\+)?(?P<login>{LOGIN})"
                      r"@users\.noreply\.github\.com$", re.IGNORECASE)
_SYNC_LINE = re.compile(
    r"^\s*Upstream-Sync:\s*(?P<repo>[\w.-]+/[\w.-]+)@(?P<sha>[0-9a-fA-F]{7,64})\s*$",
    re.MULTILINE | re.IGNORECASE)
_PR_REV = re.compile(r"^#(\d+)$")

_RS = "\x1e"  # record separator: commit messages may hold anything but this
_US = "\x1f"


def find_cutoff(fork: Git, fork_ref: str, upstream_repo: str | None = None,
                upstream: Git | None = None) -> str | None:
    """The upstream SHA of the newest ``Upstream-Sync:`` line on ``fork_ref``'s history.

    The trailer of commit 1 is on main's first parents when the sync PR was
    fast-forwarded or rebased; a merge commit puts it on the second parent, and a
    squash keeps it in the message body (GitHub lists the squashed commits). So every
    ``Upstream-Sync:`` line reachable from main counts, newest first; with ``upstream``
    given, the newest by upstream ancestry wins, so an old branch merged late cannot
    move the cutoff back. Lines naming another repository than ``upstream_repo`` are
    ignored: a fork that once followed another upstream does not pick up its SHAs.
    """
    out = fork.text("log", "--date-order", "-n", "50", "-E", "-i",
                    f"--grep=^[[:space:]]*{TRAILER_SYNC}:", f"--format=%B{_RS}", fork_ref, "--")
    found: list[str] = []
    for message in out.split(_RS):
        # In one message the last line written is the one that counts.
        for m in reversed(list(_SYNC_LINE.finditer(message))):
            if upstream_repo and m["repo"].lower() != upstream_repo.lower():
                continue
            if m["sha"].lower() not in found:
                found.append(m["sha"].lower())
            break
    if upstream is None or len(found) < 2:
        return found[0] if found else None
    return newest_by_ancestry(upstream, found) or found[0]


def last_trailer(message: str, upstream_repo: str | None = None) -> str | None:
    """The upstream SHA of the last ``Upstream-Sync:`` line in one commit message."""
    for m in reversed(list(_SYNC_LINE.finditer(message))):
        if upstream_repo is None or m["repo"].lower() == upstream_repo.lower():
            return m["sha"].lower()
    return None


def newest_by_ancestry(upstream: Git, shas: list[str]) -> str | None:
    """Of these upstream commits, the one every other is an ancestor of (unknown ones skipped)."""
    known: list[str] = []
    for sha in shas:
        full = upstream.rev_parse(sha)
        if full and full not in known:
            known.append(full)
    with reading("the upstream repository", "the history between synced commits",
                 kind="commit"):
        for candidate in known:
            if all(other == candidate or upstream.is_ancestor(other, candidate)
                   for other in known):
                return candidate
    return known[0] if known else None


def resolve_pr_merge(upstream: Git, branch_ref: str, number: int) -> str:
    """The commit on ``branch_ref``'s first-parent history that merged upstream PR ``number``."""
    pattern = rf"(\(#{number}\)$)|(^Merge pull request #{number}( |$))"
    out = upstream.text("log", "--first-parent", "-E", f"--grep={pattern}", "-n", "1",
                        "--format=%H", branch_ref, "--").strip()
    if not out:
        # A revision that does not exist, like an unknown SHA: a repository error.
        branch = branch_ref.rpartition("/")[2]
        raise GitError(f"upstream PR #{number} has no merge commit on {branch}: no commit there "
                       f"is titled `... (#{number})` or `Merge pull request #{number} ...`")
    return out


def resolve_rev(repo: Git, rev: str, branch_ref: str, what: str) -> str:
    """A SHA, a branch, or ``#N`` (the merge of upstream PR N) as a full commit SHA."""
    m = _PR_REV.match(rev.strip())
    if m:
        return resolve_pr_merge(repo, branch_ref, int(m.group(1)))
    candidates = (rev, f"refs/remotes/origin/{rev}", f"refs/heads/{rev}")
    for candidate in candidates:
        sha = repo.rev_parse(candidate)
        if sha:
            return sha
    for candidate in candidates:  # named, but its commit is gone: a broken repository
        gone = repo.missing_commit(candidate)
        if gone:
            raise MissingObject(gone, kind="commit", repo="the upstream repository",
                                path=f"{what} {rev}")
    raise GitError(f"{what} {rev!r} is not a commit, branch or #PR in the upstream repository")


def check_ancestry(upstream: Git, cutoff: str, tip: str, *, cutoff_name: str = "cutoff",
                   tip_name: str = "tip") -> None:
    """The cutoff must be an ancestor of the tip: it says which way round they are wrong.

    A tip that is an ancestor of the cutoff is older than it (the two are swapped, or
    the tip is already synced); neither an ancestor of the other means upstream
    history was rewritten. ``cutoff_name``/``tip_name`` say where each came from.
    """
    if upstream.is_ancestor(cutoff, tip):
        return
    if upstream.is_ancestor(tip, cutoff):
        why = ("they are in the wrong order: the window runs from the older upstream commit "
               "(--from) to the newer one (--to)") if cutoff_name.startswith("--") else \
            f"the fork has synced past {tip_name} already; name a newer tip"
        raise WindowError(f"{cutoff_name} {cutoff[:12]} is newer than {tip_name} {tip[:12]}: "
                          f"{why}")
    raise WindowError(
        f"{cutoff_name} {cutoff[:12]} is not an ancestor of {tip_name} {tip[:12]}: upstream "
        "history was rewritten (force-push?); pass --from with a commit on the current "
        "upstream branch"
    )


def list_window(upstream: Git, cutoff: str, tip: str) -> list[WindowEntry]:
    """Every PR (or PR-less commit) on the first-parent path from cutoff to tip, oldest first."""
    out = upstream.text(
        "log", "--first-parent", "--reverse",
        f"--format=%H{_US}%an{_US}%ae{_US}%cI{_US}%P{_US}%s{_US}%b{_RS}",
        f"{cutoff}..{tip}", "--",
    )
    files = upstream.start("-c", "core.quotePath=false", "log", "--first-parent",
                           "--diff-merges=first-parent", "--no-renames", "--name-only",
                           f"--format={_RS}%H", f"{cutoff}..{tip}", "--")
    entries: list[WindowEntry] = []
    for record in out.split(_RS):
        record = record.lstrip("\n")
        if not record:
            continue
        sha, author, email, date, parents, subject, body = record.split(_US, 6)
        entry = _entry(sha, author, date, parents.split(), subject, body)
        noreply = _NOREPLY.match(email)
        entries.append(replace(entry, login=entry.login or (noreply["login"] if noreply else "")))
    changed: dict[str, tuple[str, ...]] = {}
    try:
        listing = files.output().decode("utf-8", "replace")
    except ForksyncError:
        # The per-PR file lists are only for people; a missing object is reported
        # precisely by the merge, which reads the same trees next.
        listing = ""
    for record in listing.split(_RS):
        sha, _, names = record.partition("\n")
        changed[sha.strip()] = tuple(n for n in names.splitlines() if n)
    return [replace(e, files=changed.get(e.sha, ())) for e in entries]


_NOT_SUMMARY = re.compile(r"^(\w[\w-]*-by|Co-authored-by|Change-Id|\*\s*$|-+$|#)", re.I)


def _summary(body: str, title: str) -> str:
    """The first line of the message body that says something beyond the title."""
    for line in body.splitlines():
        text = line.strip().lstrip("*-• ").strip()
        if not text or _NOT_SUMMARY.match(text) or text == title or text.startswith("<!--"):
            continue
        if not any(ch.isalnum() for ch in text):
            continue  # a bare fence or rule line (Linuxbrew/brew@b381137cef) says nothing
        if _SQUASH.match(text) and text.rstrip(")").endswith(tuple("0123456789")):
            continue  # a squashed commit list names the PR's own commits: say nothing
        return text if len(text) <= 160 else text[:157].rstrip() + "…"
    return ""


def _entry(sha: str, author: str, date: str, parents: list[str], subject: str,
           body: str) -> WindowEntry:
    merge = _MERGE.match(subject)
    if merge and len(parents) > 1:
        # GitHub's merge commits carry the PR title as the first body line.
        title = next((ln.strip() for ln in body.splitlines() if ln.strip()), subject)
        rest = body.split(title, 1)[-1] if title in body else body
        return WindowEntry(int(merge["n"]), title, merge["who"], sha, date,
                           _summary(rest, title), login=merge["who"])
    squash = _SQUASH.match(subject)
    if squash:
        return WindowEntry(int(squash["n"]), squash["title"], author, sha, date,
                           _summary(body, squash["title"]))
    return WindowEntry(None, subject, author, sha, date, _summary(body, subject))
