"""The jobs that join the engine to GitHub: publish a sync PR, follow it up, run slash commands."""
