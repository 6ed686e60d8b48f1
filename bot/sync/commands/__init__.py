"""Slash commands (``/sync ...``): parsing, and the jobs that carry them out.

``parse`` turns a comment into commands (pure); ``request`` is the job's payload and its
one reply (pure); ``jobs`` is the ``"command"`` job, which runs each command through the
shared ``runner`` (state, sync branch, PR). One module per command: ``status``,
``answer``, ``resolve``, and ``rebuild`` (extend and refresh). Git-level helpers sit in
``gitops`` (reads and commits) and ``replay`` (recording and replaying people's work).
"""
