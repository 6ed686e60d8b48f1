"""``forksync db upgrade`` and ``forksync jobs``, on both backends, through the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.app.store import DEAD, QUEUED, Store
from bot.cli import main
from tests.pgserver import PostgresServer

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def cli(store_location: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """Runs ``forksync ARGS`` against this test's store; no GitHub credentials are set."""
    for name in ("FORKSYNC_APP_ID", "FORKSYNC_TOKEN", "GITHUB_TOKEN", "FORKSYNC_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    if store_location.startswith("postgresql://"):
        monkeypatch.setenv("FORKSYNC_DATABASE_URL", store_location)
    else:
        monkeypatch.setenv("FORKSYNC_DATA_DIR", str(Path(store_location).parent))

    def run(*args: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as exited:
            main(list(args))
        out, err = capsys.readouterr()
        return int(exited.value.code or 0), out, err

    return run


def test_db_upgrade_applies_the_migrations_once(cli: Callable[..., tuple[int, str, str]],
                                                backend: str) -> None:
    if backend == "postgres":
        code, _, err = cli("jobs")
        assert code == 1 and err == ("forksync: error: the PostgreSQL database schema is at "
                                     "version 0, this forksync needs 1: run `forksync db "
                                     "upgrade`\n")
    code, out, err = cli("db", "upgrade")
    assert code == 0 and err == ""
    assert out.endswith(": applied migration 1; the schema is at version 1\n")
    code, out, _ = cli("db", "upgrade")
    assert code == 0 and out.endswith(": the schema is already at version 1; nothing to do\n")
    code, out, _ = cli("jobs")
    assert code == 0 and out == "0 queued, 0 running, 0 done, 0 dead\n"


def test_dead_jobs_are_listed_and_retried(cli: Callable[..., tuple[int, str, str]],
                                          make_store: Callable[..., Store]) -> None:
    store = make_store()
    alive = store.enqueue("sync", "vime-org/vime", {"n": 1}, now=0)
    dead = store.enqueue("sync", "vime-org/other", {"n": 2}, now=0)
    assert dead is not None and alive is not None
    for _ in range(2):
        job = store.claim("w")
        assert job is not None
        if job.id == dead:
            store.kill(dead, ".github/forksync.yml:3: upstream: expected owner/repo\nmore",
                       worker_id="w", now=86400.0)

    code, out, _ = cli("jobs")
    assert code == 0 and out.startswith("0 queued, 1 running, 0 done, 1 dead\n")
    assert "forksync jobs --dead" in out
    code, out, _ = cli("jobs", "--dead")
    header, row = out.splitlines()
    assert header.split() == ["ID", "KIND", "REPOSITORY", "ATTEMPTS", "DIED", "(UTC)", "ERROR"]
    assert row.split()[:6] == [str(dead), "sync", "vime-org/other", "1", "1970-01-02",
                               "00:00:00"]
    assert row.endswith(".github/forksync.yml:3: upstream: expected owner/repo")

    code, out, _ = cli("jobs", "retry", str(dead))
    assert code == 0 and out == f"job {dead} (sync vime-org/other) is queued again\n"
    assert store.job_state(dead) == QUEUED
    code, _, err = cli("jobs", "retry", str(dead))
    assert code == 1 and err == (f"forksync: error: job {dead} is queued, not dead: only dead "
                                 "jobs can be retried\n")
    code, _, err = cli("jobs", "retry", "999999")
    assert code == 1 and "no job 999999" in err and "Traceback" not in err
    code, out, _ = cli("jobs", "--dead")
    assert out == "no dead jobs\n" and store.list_jobs(state=DEAD) == []


def test_a_database_that_cannot_be_reached_is_one_line_on_stderr(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FORKSYNC_DATABASE_URL", "postgresql://bot:hunter2@127.0.0.1:9/forksync")
    with pytest.raises(SystemExit) as exited:
        main(["jobs", "--dead"])
    err = capsys.readouterr().err
    assert exited.value.code == 1 and err.count("\n") == 1
    assert err.startswith("forksync: error: FORKSYNC_DATABASE_URL: cannot connect to the "
                          "PostgreSQL database forksync on 127.0.0.1:9: ")
    assert "hunter2" not in err


def test_serve_refuses_a_postgres_database_that_was_not_upgraded(
        postgres_server: PostgresServer, tmp_path: Path) -> None:
    url = postgres_server.create_database()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FORKSYNC_", "GITHUB_"))}
        env.update(FORKSYNC_DATABASE_URL=url, FORKSYNC_TOKEN="t", FORKSYNC_WEBHOOK_SECRET="s",
                   FORKSYNC_HOST="127.0.0.1", FORKSYNC_PORT="0",
                   FORKSYNC_DATA_DIR=str(tmp_path))
        proc = subprocess.run([sys.executable, "-m", "bot.cli", "serve"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=60)
    finally:
        postgres_server.drop_database(url)
    assert proc.returncode == 1
    assert proc.stderr == ("forksync: error: the PostgreSQL database schema is at version 0, "
                           "this forksync needs 1: run `forksync db upgrade`\n")
