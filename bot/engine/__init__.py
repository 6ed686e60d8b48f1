"""The engine: local git repositories in, data out.

Everything under ``bot.engine`` is pure apart from running git on local repositories:
no network, no GitHub, no store, no settings. ``tests/test_layout.py`` keeps it so.
``pipeline.plan()`` computes one sync as a ``model.Plan``; ``pipeline.sync()`` also
writes commit 1 onto a local branch.
"""
