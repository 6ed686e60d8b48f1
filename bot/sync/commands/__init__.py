"""Slash commands (``/sync ...``): parsing, and the jobs that carry them out."""
