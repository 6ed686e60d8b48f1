"""Who may read a fork's upstream: the rule that keeps one installation's data from another.

The App may be installed on the upstream (installation A) and on the fork (B). A's
token can read everything A covers, private repositories included, so it is used
for B's fork only when

* A is B, or A and B belong to the same account; or
* the upstream's owner opted in: the upstream's own ``.github/forksync.yml``, read
  with A's token from its default branch, lists the fork under ``downstream:``.

Otherwise the upstream is read without a token, which works when it is public. A
private upstream is then refused with one message that says why and how to allow it;
the message is the same whether the repository is private or missing, so it tells
the fork's owner nothing GitHub itself would not.

In token mode (Action mode, a person's own token) there are no installations: the
token is the person's, and it reads what they may read.
"""

from __future__ import annotations

import base64
import logging
from dataclasses import dataclass

from bot.app.context import JobContext
from bot.engine.config import CONFIG_PATH, load_downstream
from bot.errors import ForksyncError
from bot.github.auth import AuthError
from bot.github.client import GitHubClient, get_or_none

log = logging.getLogger(__name__)


class UpstreamRefused(ForksyncError):
    """The fork may not read its upstream; the message says why and what allows it."""


@dataclass(frozen=True)
class UpstreamAccess:
    """How to read the upstream: its clone URL, and the token for git (None: anonymous)."""

    url: str
    token: str | None
    how: str  # for the logs: which rule allowed it


async def upstream_access(ctx: JobContext, fork: str, installation_id: int | None,
                          upstream: str) -> UpstreamAccess:
    """How the fork (in ``installation_id``) may read ``upstream``; UpstreamRefused if not."""
    settings = ctx.settings
    if installation_id is None:  # token mode: the person's own token
        gh = await ctx.gh_for(None)
        return UpstreamAccess(await _clone_url(ctx, gh, upstream), await ctx.git_token_for(None),
                              "the configured token")
    try:
        theirs = await ctx.installation_for_repo(upstream)
    except AuthError:
        theirs = None  # the App is not installed there
    if theirs is not None:
        how = await _may_use(ctx, fork, installation_id, theirs, upstream)
        if how is not None:
            gh = await ctx.gh_for(theirs)
            return UpstreamAccess(await _clone_url(ctx, gh, upstream),
                                  await ctx.git_token_for(theirs), how)
    # What the fork's own installation sees of it: outside its account, only what is public.
    own = await ctx.gh_for(installation_id)
    repo = await get_or_none(own, f"/repos/{upstream}")
    if not isinstance(repo, dict):
        raise UpstreamRefused(refusal(fork, upstream))
    url = settings.clone_url(upstream, repo.get("clone_url"))
    if repo.get("private"):  # visible to the fork's installation: it is its own account's
        return UpstreamAccess(url, await ctx.git_token_for(installation_id),
                              "the fork's installation")
    return UpstreamAccess(url, None, "public, without a token")


async def _may_use(ctx: JobContext, fork: str, ours: int, theirs: int,
                   upstream: str) -> str | None:
    """Why the upstream's installation may read it for this fork, or None."""
    if theirs == ours:
        return "the fork's installation"
    if await ctx.installation_account(theirs) == await ctx.installation_account(ours):
        return "an installation of the same account"
    if fork.lower() in (name.lower() for name in await _downstream(ctx, theirs, upstream)):
        return f"listed under downstream: in {upstream}'s {CONFIG_PATH}"
    return None


async def _downstream(ctx: JobContext, theirs: int, upstream: str) -> tuple[str, ...]:
    """The forks the upstream's own config lets read it (none when it has no such file)."""
    gh = await ctx.gh_for(theirs)
    content = await get_or_none(gh, f"/repos/{upstream}/contents/{CONFIG_PATH}")
    if not isinstance(content, dict):
        return ()
    try:
        text = base64.b64decode(content.get("content") or "").decode("utf-8", "replace")
        return load_downstream(text, f"{upstream}:{CONFIG_PATH}")
    except (ValueError, ForksyncError) as exc:
        # The fork is refused; `forksync check-config` shows the upstream's owner the error.
        log.warning("%s: its downstream list cannot be read: %s", upstream, exc)
        return ()


async def _clone_url(ctx: JobContext, gh: GitHubClient, full_name: str) -> str:
    if ctx.settings.git_url:
        return ctx.settings.clone_url(full_name)
    repo = await gh.getitem(f"/repos/{full_name}")
    return ctx.settings.clone_url(full_name, repo.get("clone_url"))


def refusal(fork: str, upstream: str) -> str:
    """Why the fork may not read its upstream, and the three ways that allow it."""
    return (f"forksync cannot read the upstream {upstream} for {fork}: it is not public, or "
            "it does not exist. A private upstream is read only through the forksync App's "
            "installation on it, and only for a fork of the same account, or for a fork "
            f"that the upstream lists under `downstream:` in its own {CONFIG_PATH} (on its "
            f"default branch), e.g. `downstream: [{fork}]`. Check `upstream.repo` in this "
            "fork's config, or ask the upstream's owner to list this fork.")


__all__ = ["UpstreamAccess", "UpstreamRefused", "refusal", "upstream_access"]
