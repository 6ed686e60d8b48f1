"""Webhook event handlers: one gidgethub Router per module, combined here explicitly."""

from gidgethub import routing

from . import commands, installation, sync_pr, upstream

router = routing.Router(upstream.router, sync_pr.router, installation.router, commands.router)

__all__ = ["router"]
