"""Webhook event handlers: one gidgethub Router per module, combined in handlers.router."""
