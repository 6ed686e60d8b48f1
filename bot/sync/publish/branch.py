"""Step 3: commit 1 pushed to the sync branch with a lease, only over a head the bot wrote.

Owns ``pushed`` (every head the bot wrote, remembered before the push, so after a
crash between the push and the save the head is still known as the bot's own) and
``sync.refused_head`` (a refusal is said once per head). DESIGN: never force-push over
commits that people pushed.
"""

from __future__ import annotations

import asyncio
import logging
import re

from bot.github import remote
from bot.github.checks import report_error
from bot.sync.publish.context import RunContext
from bot.sync.state import remember_pushed

log = logging.getLogger(__name__)


async def push(run: RunContext) -> bool:
    """Push commit 1 with a lease, unless the branch head is a commit the bot did not write."""
    repos, sync, token = run.repos, run.sync, run.token
    branch, commit = sync["branch"], sync["commit"]
    # Remembered before the push: after a crash between the push and the save, the
    # branch head is still recognised as the bot's own.
    remember_pushed(run.state, commit)
    await run.save()
    head = await asyncio.to_thread(remote.remote_head, repos.fork_url, branch, token)
    if head == commit:
        return True
    if head is None or head in run.state.get("pushed", []):
        try:
            await asyncio.to_thread(remote.push_with_lease, repos.fork_git, repos.fork_url,
                                    commit, branch, head, token)
            return True
        except remote.WorkflowsRefused as exc:
            # Trying again cannot help until someone grants the permission: say so once.
            await report_error(run.gh, run.fork, repos.fork_main, "forksync could not push",
                               str(exc))
            await run.save()
            return False
        except remote.PushRejected:
            head = await asyncio.to_thread(remote.remote_head, repos.fork_url, branch, token)
            if head == commit:
                return True
    await refuse_push(run, head or "")
    await run.save()
    return False


async def refuse_push(run: RunContext, head: str) -> None:
    """Tell people, where they look, why the bot stopped and how to go on by hand."""
    repos, sync, fork = run.repos, run.sync, run.fork
    if sync.get("refused_head") == head:
        return  # said so already
    text = manual_instructions(_public_url(repos.fork_url), sync["branch"], head,
                               _public_url(repos.upstream_url), sync.get("tip", ""),
                               repos.fork_branch)
    owner = fork.split("/", 1)[0]
    pulls = [p async for p in run.gh.getiter(
        f"/repos/{fork}/pulls?state=all&head={owner}:{sync['branch']}")]
    if pulls:
        await run.gh.post(f"/repos/{fork}/issues/{pulls[0]['number']}/comments",
                          data={"body": text})
    else:
        await report_error(run.gh, fork, repos.fork_main, "forksync could not push", text)
    sync["refused_head"] = head
    log.warning("%s: refused to push over %s at %s", fork, sync["branch"], head[:12])


def manual_instructions(fork_url: str, branch: str, head: str, upstream_url: str, tip: str,
                        fork_branch: str) -> str:
    """miss-islington style: what happened, and the exact commands to finish by hand."""
    name = fork_url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")
    return (
        f"forksync did not push the new sync to `{branch}`: the branch is at "
        f"`{head[:12] or 'an unknown commit'}`, which forksync did not write, and forksync "
        "never overwrites commits that people pushed.\n\n"
        "If that work is not needed any more, delete the branch; forksync starts the sync "
        "again on the next upstream change:\n\n"
        f"```\ngit push {fork_url} --delete {branch}\n```\n\n"
        "Or make the sync by hand and push it to a branch of its own:\n\n"
        "```\n"
        f"git clone --branch {fork_branch} {fork_url} {name} && cd {name}\n"
        f"forksync sync --fork . --upstream {upstream_url} --to {tip} --branch {branch}-manual\n"
        f"git push origin {branch}-manual\n"
        "```\n\n"
        f"then open a pull request from `{branch}-manual` into `{fork_branch}`.\n"
    )


def _public_url(url: str) -> str:
    """A clone URL without credentials, fit for instructions in a comment."""
    return re.sub(r"^(\w+://)[^/@]*@", r"\1", url)
