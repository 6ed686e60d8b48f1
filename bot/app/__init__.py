"""The running App: settings, the durable store and job queue, the job context, the server.

The App knows how to receive webhooks and run jobs, not what the jobs do: the
composition root (``bot.cli serve``) hands it ``handlers.router`` and ``bot.sync.jobs.JOBS``.
"""
