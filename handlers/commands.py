"""Webhook handlers: commands."""

from gidgethub import routing

router = routing.Router()
