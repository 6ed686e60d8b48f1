"""Workflow files without the App's Workflows permission: kept as the fork has them. Pure.

GitHub refuses an App's push that creates or changes anything under
``.github/workflows/`` unless the App has the *Workflows* permission. Without it the
merge keeps the fork's workflow files, and each upstream change becomes a review item
with its translated diff, to port by hand (people's own pushes may change those files).
"""

from __future__ import annotations

from bot.engine.model import ItemKind, ReviewItem, Tier

WORKFLOWS_DIR = ".github/workflows/"
WORKFLOWS_POLICY = "workflows"  # FileResult.policy of a workflow file kept as the fork has it
WORKFLOW_NOTE = "workflow file: kept as the fork has it (no Workflows permission)"


def is_workflow(fork_path: str | None) -> bool:
    """A GitHub Actions workflow file (what the Workflows permission guards)."""
    return fork_path is not None and fork_path.startswith(WORKFLOWS_DIR)


def workflow_item(path: str, upstream_path: str, diff: str) -> ReviewItem:
    """The item for upstream's change to a workflow file the sync left as the fork has it."""
    return ReviewItem(
        id="", kind=ItemKind.MANUAL, path=path, upstream_path=upstream_path, tier=Tier.DECIDE,
        reason="forksync may not change workflow files: the App has no Workflows permission, "
               "so GitHub would refuse the push. The file stays as the fork has it; "
               "upstream's change is below, to port by hand",
        theirs=diff,
        question="Port upstream's change to this workflow file by hand (your own push may "
                 "change it), then answer `done`; or `skip` to leave it out.",
        choices=["done", "skip"])


__all__ = ["WORKFLOWS_DIR", "WORKFLOWS_POLICY", "WORKFLOW_NOTE", "is_workflow", "workflow_item"]
