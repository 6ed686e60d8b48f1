"""Publishing a sync: a window's plan becomes a branch, a draft PR, one review and a check run.

``run`` orders the steps; each step is a module that owns its keys in the fork's state:
``fetch``, ``prepare``, ``branch``, ``pr``, ``review``, ``check``, and ``behind`` while
the PR is open. ``cli`` runs the same from a workflow.
"""

from bot.sync.publish.context import PublishResult
from bot.sync.publish.run import publish_sync

__all__ = ["PublishResult", "publish_sync"]
