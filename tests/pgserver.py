"""A throwaway PostgreSQL server for one test session, started by the tests themselves.

``initdb`` in a temporary directory (as the ``postgres`` user when we are root, since
PostgreSQL refuses to run as root), listening on a Unix socket in that directory
only, with ``fsync`` off: nothing here has to survive a power cut. Each test gets a
fresh database and drops it afterwards. ``scripts/setup.sh`` installs the server
(Debian's ``postgresql`` package).
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict

SERVER_OPTIONS = "-c listen_addresses='' -c max_connections=300"
# Tests: nothing has to survive a power cut. Benchmarks pass durable=True instead.
FAST_OPTIONS = " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"


def find_bindir() -> Path:
    """The directory holding ``initdb`` and ``pg_ctl``: $FORKSYNC_PG_BIN, PATH, or Debian's."""
    candidates = [os.environ.get("FORKSYNC_PG_BIN", "")]
    if (on_path := shutil.which("initdb")) is not None:
        candidates.append(str(Path(on_path).resolve().parent))
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                         key=lambda p: int(Path(p).parent.name), reverse=True)
    for candidate in candidates:
        if candidate and (Path(candidate) / "initdb").exists():
            return Path(candidate)
    raise RuntimeError("PostgreSQL's server programs (initdb, pg_ctl) are not installed: "
                       "run scripts/setup.sh, which installs Debian's postgresql package")


class PostgresServer:
    """``start()``, then ``create_database()`` per test; ``stop()`` removes everything."""

    def __init__(self, *, durable: bool = False) -> None:
        self.durable = durable
        self.bindir = find_bindir()
        # Short and under /tmp: a Unix socket path must fit in ~100 bytes, and the
        # postgres user must be able to reach it (pytest's tmp dirs are root-only).
        self.root = Path(tempfile.mkdtemp(prefix="forksync-pg-"))
        self.data = self.root / "data"
        self.as_root = os.geteuid() == 0
        self._names = itertools.count(1)
        if self.as_root:
            owner = pwd.getpwnam("postgres")
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
        os.chmod(self.root, 0o700)

    def _run(self, *args: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if self.as_root else []
        proc = subprocess.run([*prefix, *args], capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"{Path(args[0]).name} failed: {proc.stderr.strip()[-2000:]}")

    def start(self) -> PostgresServer:
        self._run(str(self.bindir / "initdb"), "-D", str(self.data), "--auth=trust",
                  "--username=postgres", "--encoding=UTF8", "--no-sync", "--no-instructions")
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-w", "-t", "60",
                  "-l", str(self.root / "server.log"),
                  "-o", f"{SERVER_OPTIONS}{'' if self.durable else FAST_OPTIONS} "
                        f"-k {self.root}", "start")
        return self

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                      "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@/{dbname}?host={self.root}"

    def create_database(self) -> str:
        name = f"t{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, url: str) -> None:
        name = conninfo_to_dict(url)["dbname"]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
