"""Webhook handlers: installation."""

from gidgethub import routing

router = routing.Router()
