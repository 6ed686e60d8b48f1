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

from bot.engine.config import CONFIG_PATH
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
    # Commits alone, then fork main's tree and config, then the window's trees: as the App.
    fork_main = remote.fetch_branch(fork_cache, fork_url, "main", None) or ""
    remote.fetch(up_cache, up_url, ["+refs/heads/*:refs/heads/*"], None, trees=False)
    remote.fetch_files(fork_cache, fork_url, [fork_main], [CONFIG_PATH], None)
    workdir = str(root / "work")
    cutoff, tip = _window(fork_cache, up_cache, kw)
    chain = Git(up_cache).text("rev-list", "--first-parent", f"{cutoff}..{tip}", "--").split()
    remote.fetch_trees(up_cache, up_url, [cutoff, *chain], None)
    wanted = needs(fork_cache, up_cache, workdir=workdir, **kw)
    fetched = (remote.fetch_blobs(fork_cache, fork_url, wanted.fork, None),
               remote.fetch_blobs(up_cache, up_url, wanted.upstream, None))
    return PartialRun(plan(fork_cache, up_cache, workdir=workdir, **kw), wanted, fork_cache,
                      up_cache, fetched)


def _window(fork_cache: str, up_cache: str, kw: dict[str, Any]) -> tuple[str, str]:
    """The cutoff and the tip the plan will use (commits only), as the App finds them."""
    from bot.engine.config import load_config
    from bot.engine.window import find_cutoff, resolve_rev

    up = Git(up_cache)
    config = kw.get("config") or load_config(
        Git(fork_cache).text("cat-file", "blob", f"refs/heads/main:{CONFIG_PATH}"), CONFIG_PATH)
    branch = f"refs/heads/{config.upstream_branch}"
    cutoff = (resolve_rev(up, kw["from_rev"], branch, "--from") if kw.get("from_rev")
              else up.rev_parse(find_cutoff(Git(fork_cache), "refs/heads/main",
                                            config.upstream_repo, up) or ""))
    tip = resolve_rev(up, kw["to_rev"], branch, "--to") if kw.get("to_rev") else \
        up.rev_parse(branch)
    assert cutoff and tip, "no window"
    return cutoff, tip


def _git_dir(repo: Path) -> Path:
    return repo / ".git" if (repo / ".git").exists() else repo


__all__ = ["PartialRun", "blob_count", "partial_plan", "serve_filters"]
