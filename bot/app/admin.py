"""Operator commands on the store: ``forksync db upgrade``, ``forksync jobs [--dead]``,
``forksync jobs retry ID``. Each returns the text to print; a problem is a one-line
``ForksyncError``.
"""

from __future__ import annotations

import time

from bot.app.settings import Settings
from bot.app.store import DEAD, JOB_STATES, Job, Store, store_for
from bot.errors import ForksyncError


def db_upgrade(settings: Settings) -> str:
    """Apply the missing migrations to the configured database (safe to run twice)."""
    store = store_for(settings, schema="none")
    try:
        applied = store.upgrade()
        version, where = store.schema_version(), store.where
    finally:
        store.close()
    if not applied:
        return f"{where}: the schema is already at version {version}; nothing to do"
    return (f"{where}: applied migration{'s' if len(applied) > 1 else ''} "
            f"{', '.join(map(str, applied))}; the schema is at version {version}")


def jobs_summary(store: Store) -> str:
    """Jobs per state, and where to look next when some are dead."""
    counts = store.job_counts()
    text = ", ".join(f"{counts[state]} {state}" for state in JOB_STATES)
    if counts[DEAD]:
        text += "\n(`forksync jobs --dead` lists the dead jobs; `forksync jobs retry ID` " \
                "runs one again)"
    return text


def dead_jobs(store: Store) -> str:
    """A table of the dead jobs: what, where, how often tried, when and why they died."""
    jobs = store.list_jobs(state=DEAD)
    if not jobs:
        return "no dead jobs"
    rows = [("ID", "KIND", "REPOSITORY", "ATTEMPTS", "DIED (UTC)", "ERROR")]
    rows += [(str(j.id), j.kind, j.key, str(j.attempts), _when(j.finished_at), _first_line(j))
             for j in jobs]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join("  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)),
                                row[-1]]).rstrip() for row in rows)


def retry_job(store: Store, job_id: int) -> str:
    """Queue a dead job again, with fresh attempts."""
    job = store.get_job(job_id)
    if job is None:
        raise ForksyncError(f"no job {job_id} (`forksync jobs --dead` lists the dead jobs)")
    if not store.retry_dead(job_id):
        raise ForksyncError(f"job {job_id} is {job.state}, not dead: only dead jobs can be "
                            "retried")
    return f"job {job_id} ({job.kind} {job.key}) is queued again"


def _when(epoch: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(epoch)) if epoch else "-"


def _first_line(job: Job, width: int = 120) -> str:
    line = (job.last_error or "").strip().splitlines()[0] if job.last_error else "-"
    return line if len(line) <= width else line[:width - 1] + "…"
