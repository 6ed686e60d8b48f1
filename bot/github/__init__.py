"""GitHub I/O: the REST client, App authentication and git over HTTP.

It may use the engine's git helpers; it never imports the App (``bot.app``) or the
sync jobs (``bot.sync``).
"""
