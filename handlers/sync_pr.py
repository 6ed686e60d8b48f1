"""Webhook handlers: sync_pr."""

from gidgethub import routing

router = routing.Router()
