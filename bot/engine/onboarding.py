"""Onboarding a fork: a proposed `.github/forksync.yml` and the first cutoff, in one commit.

The commit adds the config on top of the fork's main and carries the first
``Upstream-Sync:`` trailer, so merging it is what tells every later sync where
upstream was last matched. The App opens it as its onboarding PR (the way Renovate
does); ``forksync init`` writes it onto a branch of a local fork.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from bot.engine.config import CONFIG_PATH, Config, load_config, load_config_file
from bot.engine.cutoff import CutoffGuess, TreeDistance, candidates, search
from bot.engine.git import CatFile, Git, TreeWriter
from bot.engine.merge import Entry, commit_tree_oid, edit_tree
from bot.engine.model import WindowEntry
from bot.engine.pipeline import Progress, default_workdir, open_repo, work_repo
from bot.engine.translate import Translator
from bot.engine.window import TRAILER_SYNC, list_window
from bot.errors import GitError

ONBOARDING_BRANCH = "forksync/onboarding"
ONBOARDING_TITLE = "Configure forksync"
# GitHub's owner rule (letters, digits, single hyphens) keeps a guess from any path honest.
_GITHUB_NAME = re.compile(r"[/:](?P<owner>[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38})/"
                          r"(?P<name>[\w.-]+?)(?:\.git)?/?$")


@dataclass
class Proposal:
    """What onboarding proposes for one fork, and how the cutoff was found."""

    upstream_repo: str
    upstream_branch: str
    fork_branch: str
    fork_main: str
    tip: str
    guess: CutoffGuess
    window: list[WindowEntry]  # what the first sync will bring: cutoff..tip
    config_text: str
    fork_git_dir: str
    work_git_dir: str
    seconds: float  # time spent inferring the cutoff

    @property
    def cutoff(self) -> str:
        return self.guess.best.sha

    @property
    def trailer(self) -> str:
        return f"{TRAILER_SYNC}: {self.upstream_repo}@{self.cutoff}"

    def explanation(self) -> str:
        """Markdown: the PR body of the onboarding PR, and what `forksync init` prints."""
        g, best = self.guess, self.guess.best
        prs = [e.number for e in self.window if e.number is not None]
        first_sync = (f"the first sync PR will bring in the {len(self.window)} upstream "
                      f"commits after it" + (f" (#{prs[0]}..#{prs[-1]})" if prs else "")
                      if self.window else "upstream has nothing newer yet; the first sync PR "
                      "opens with its next merge")
        runner = g.runner_up()
        second = (f" The next closest, `{runner.sha[:12]}`, differs by {runner.lines:,} lines."
                  if runner is not None else "")
        return "\n".join([
            f"forksync keeps this fork in sync with **{self.upstream_repo}** "
            f"(`{self.upstream_branch}`): one draft PR per window of upstream PRs, with a "
            "review and a check that gates the merge. Merging this PR turns it on.",
            "",
            f"### The cutoff: `{best.sha[:12]}`",
            "",
            "Each sync starts at the upstream commit the fork last matched, named by the "
            f"newest `{TRAILER_SYNC}:` trailer on `{self.fork_branch}`. This fork has none "
            f"yet, so forksync measured which upstream commit, translated, is closest to "
            f"`{self.fork_branch}` in changed lines. Of the {len(g.candidates)} commits on "
            f"upstream `{self.upstream_branch}` since {g.start}, it measured "
            f"{len(g.measured)} (sampling, then narrowing around the closest) in "
            f"{self.seconds:.1f} s: `{best.sha[:12]}` differs by {best.lines:,} lines in "
            f"{best.files:,} files.{second}",
            "",
            f"This PR's commit carries `{self.trailer}`; once it is merged, {first_sync}. "
            "If you know a better cutoff, amend the commit's trailer before merging.",
            "",
            "### The config",
            "",
            f"`{CONFIG_PATH}` names the upstream and skips `.github/workflows/**` (the App may "
            "not push workflow changes). The translation rules are a commented template: "
            "uncomment and edit them so upstream's names become this fork's; the README's "
            "*The config* section explains each one.",
            "",
            self.trailer,
        ])

    def commit_message(self) -> str:
        return (f"{ONBOARDING_TITLE}\n\nPropose {CONFIG_PATH}, following "
                f"{self.upstream_repo}@{self.upstream_branch}, and record the first cutoff "
                f"(the upstream commit closest to this fork's {self.fork_branch}: "
                f"{self.guess.best.lines} changed lines).\n\n{self.trailer}\n")


def config_template(upstream_repo: str, upstream_branch: str, fork_name: str | None) -> str:
    """The proposed config: the upstream, a commented rules template, the workflows policy."""
    up_name = upstream_repo.rpartition("/")[2]
    fork_name = fork_name or "myfork"
    return f"""\
# forksync: keep this fork in sync with {upstream_repo}.
# Reference: the README's "The config" section. Check a change with
# `forksync check-config .github/forksync.yml`.
upstream: {{repo: {upstream_repo}, branch: {upstream_branch}}}

# How upstream's names become this fork's. Rules apply in order, the first match
# wins; uncomment and edit them.
# translate:
#   paths:                         # longest prefix first
#     - {{from: "{up_name}/", to: "{fork_name}/"}}
#   keep:                          # spans copied unchanged
#     - 'https?://github\\.com/{upstream_repo}\\S*'
#   replace:
#     - {{from: {up_name}, to: {fork_name}, word: true}}
#   exclude: ['*.png', '*.svg']    # content kept as is, path still translated

policies:                          # first matching glob wins: ours, theirs, skip, manual
  - {{paths: ['.github/workflows/**'], action: skip}}   # the fork keeps its own CI

# flags:                           # upstream lines that always need a human look
#   - {{pattern: 'an-option-this-fork-lacks', say: 'why it needs a look'}}
"""


def upstream_name(location: str) -> str | None:
    """``owner/name`` from a GitHub-style URL or path (``…/owner/name(.git)``), if it has one."""
    m = _GITHUB_NAME.search(location.rstrip("/"))
    return f"{m['owner']}/{m['name']}" if m else None


def root_date(git: Git, ref: str) -> int | None:
    """When the fork's history begins: the committer date of its oldest root commit."""
    out = git.text("log", "--max-parents=0", "--format=%ct", ref, "--").split()
    return min(int(t) for t in out) if out else None


def propose_from_repos(fork: Git, fork_ref: str, upstream: Git, upstream_ref: str, *,
                       upstream_repo: str, upstream_branch: str, fork_branch: str,
                       workdir: Path, config: Config | None = None,
                       config_text: str | None = None, fork_name: str | None = None,
                       progress: Progress | None = None) -> Proposal:
    """The proposal for a fork and its upstream, both local repositories."""
    say = progress or (lambda _msg: None)
    fork_main = fork.rev_parse(fork_ref)
    tip = upstream.rev_parse(upstream_ref)
    if fork_main is None:
        raise GitError(f"the fork has no branch {fork_branch!r}")
    if tip is None:
        raise GitError(f"the upstream has no branch {upstream_branch!r}")
    text = config_text or config_template(upstream_repo, upstream_branch, fork_name)
    cfg = config or load_config(text, CONFIG_PATH)
    say("listing upstream commits")
    work = work_repo(workdir, fork, upstream)
    shas, start = candidates(upstream, tip, both=work, fork_ref=fork_main,
                             since=root_date(fork, fork_main))
    started = time.monotonic()
    say(f"measuring {len(shas)} candidate cutoffs")
    with CatFile(work) as cat, TreeWriter(work, cache=cat.tree_cache) as writer:
        distance = TreeDistance(work, cat, writer, Translator(cfg.translate),
                                commit_tree_oid(cat, fork_main))
        best, measured = search(shas, distance)
    guess = CutoffGuess(best, shas, measured, start)
    return Proposal(upstream_repo, upstream_branch, fork_branch, fork_main, tip, guess,
                    list_window(upstream, best.sha, tip), text, fork.git_dir, work.git_dir,
                    time.monotonic() - started)


def propose(fork: str, upstream: str, *, upstream_repo: str | None = None,
            upstream_branch: str = "main", fork_branch: str = "main",
            config_path: str | None = None, workdir: str | Path | None = None,
            progress: Progress | None = None) -> Proposal:
    """``forksync init``: the proposal for a fork and upstream given as paths or URLs."""
    wd = Path(workdir) if workdir else default_workdir()
    config = load_config_file(config_path) if config_path else None
    text = Path(config_path).read_text(encoding="utf-8") if config_path else None
    repo = config.upstream_repo if config else upstream_repo or upstream_name(upstream)
    if repo is None:
        raise GitError(f"cannot tell the upstream's GitHub name from {upstream}; pass "
                       "--upstream-repo OWNER/NAME")
    branch = config.upstream_branch if config else upstream_branch
    fork_git = open_repo(fork, wd, "fork")
    up_git = open_repo(upstream, wd, "upstream")
    fork_ref = _ref(fork_git, fork_branch, "fork")
    fork_name = (upstream_name(fork) or Path(fork).resolve().name).rpartition("/")[2]
    return propose_from_repos(fork_git, fork_ref, up_git, _ref(up_git, branch, "upstream"),
                              upstream_repo=repo, upstream_branch=branch,
                              fork_branch=fork_branch, workdir=wd, config=config,
                              config_text=text, fork_name=fork_name.removesuffix(".git"),
                              progress=progress)


def _ref(git: Git, branch: str, what: str) -> str:
    for ref in (f"refs/heads/{branch}", f"refs/remotes/origin/{branch}"):
        if git.rev_parse(ref):
            return ref
    raise GitError(f"the {what} repository has no branch {branch!r}")


def onboarding_commit(p: Proposal) -> str:
    """The commit the onboarding PR holds: fork main plus the config, with the trailer."""
    work = Git(p.work_git_dir)
    (oid,) = work.hash_blobs([p.config_text.encode()])
    with CatFile(work) as cat, TreeWriter(work, cache=cat.tree_cache) as writer:
        tree = edit_tree(cat, writer, commit_tree_oid(cat, p.fork_main),
                         {CONFIG_PATH: Entry("100644", oid)})
    # Dated from its inputs, so proposing twice makes the same commit.
    date = work.text("log", "-1", "--format=%ct", p.fork_main).strip() + " +0000"
    return work.commit_tree(tree, [p.fork_main], p.commit_message(), date=date)


def write_branch(p: Proposal, branch: str = ONBOARDING_BRANCH) -> str:
    """Write the onboarding commit onto a new branch of the local fork; never moves a ref."""
    fork = Git(p.fork_git_dir)
    commit = onboarding_commit(p)
    existing = fork.rev_parse(f"refs/heads/{branch}")
    if existing == commit:
        return branch
    if existing is not None:
        raise GitError(f"branch {branch} already exists in the fork at {existing[:12]}; "
                       "delete it or pass --branch")
    Git(p.work_git_dir).run("push", "--quiet", f"--force-with-lease=refs/heads/{branch}:",
                            p.fork_git_dir, f"{commit}:refs/heads/{branch}")
    return branch


__all__ = ["ONBOARDING_BRANCH", "ONBOARDING_TITLE", "Proposal", "config_template",
           "onboarding_commit", "propose", "propose_from_repos", "root_date", "upstream_name",
           "write_branch"]
