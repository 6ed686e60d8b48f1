"""Webhook handlers: upstream."""

from gidgethub import routing

router = routing.Router()
