"""Plans made the App's way: partial clones, the needed blobs fetched in one batch, then plan.

``partial_plan`` serves the two repositories over ``file://`` (git's own upload-pack,
with filters allowed as GitHub allows them), clones each into a cache with
``--filter=blob:none``, asks the engine which blobs the plan reads, fetches those, and
plans on the caches. A blob the engine forgot to name is then missing, and the plan
fails with ``MissingObject``: tests compare it with the plan made on the full repositories.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.engine.git import Git
from bot.engine.needs import Needs
from bot.github import remote


@dataclass
class PartialRun:
    plan: Any
    needs: Needs
    fork_cache: str
    upstream_cache: str
    fetched: tuple[int, int]  # blobs fetched into the fork cache, the upstream cache


def serve_filters(repo: str | Path) -> str:
    """Let ``repo`` answer filtered fetches and wants by OID (as GitHub does); its file:// URL."""
    git = Git(_git_dir(Path(repo)))
    git.run("config", "uploadpack.allowFilter", "true")
    git.run("config", "uploadpack.allowAnySHA1InWant", "true")
    return Path(repo).resolve().as_uri()


def blob_count(git_dir: str | Path) -> int:
    """How many blobs a repository has (loose and packed)."""
    out = Git(git_dir).run("cat-file", "--batch-all-objects", "--batch-check=%(objecttype)")
    return out.split().count(b"blob")


def partial_plan(fork: str | Path, upstream: str | Path, root: Path, **kw: Any) -> PartialRun:
    """Plan ``upstream`` into ``fork`` from partial clones of both, as the App does."""
    from bot.engine.pipeline import needs, plan

    fork_url, up_url = serve_filters(fork), serve_filters(upstream)
    fork_cache = remote.ensure_mirror(root / "cache", "fork")
    up_cache = remote.ensure_mirror(root / "cache", "upstream")
    remote.fetch(fork_cache, fork_url, ["+refs/heads/*:refs/heads/*"], None)
    remote.fetch(up_cache, up_url, ["+refs/heads/*:refs/heads/*"], None)
    # The config comes first, as in the App: the window cannot be known without it.
    from bot.engine.config import CONFIG_PATH
    from bot.engine.needs import blobs_at

    remote.fetch_blobs(fork_cache, fork_url, blobs_at(Git(fork_cache), ["refs/heads/main"],
                                                      [CONFIG_PATH]), None)
    workdir = str(root / "work")
    wanted = needs(fork_cache, up_cache, workdir=workdir, **kw)
    fetched = (remote.fetch_blobs(fork_cache, fork_url, wanted.fork, None),
               remote.fetch_blobs(up_cache, up_url, wanted.upstream, None))
    return PartialRun(plan(fork_cache, up_cache, workdir=workdir, **kw), wanted, fork_cache,
                      up_cache, fetched)


def _git_dir(repo: Path) -> Path:
    return repo / ".git" if (repo / ".git").exists() else repo


__all__ = ["PartialRun", "blob_count", "partial_plan", "serve_filters"]
