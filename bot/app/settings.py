"""The App's settings: read once from the environment at startup, never at import time.

Two modes share one ``Settings``:

* **App mode** (``FORKSYNC_APP_ID`` + a private key): the server authenticates as a
  GitHub App and mints an installation token per repository.
* **Token mode** (``FORKSYNC_TOKEN``, or ``GITHUB_TOKEN`` inside GitHub Actions): one
  static token for everything; this is how ``forksync sync --publish`` runs in a
  scheduled workflow.

Every problem ends as a :class:`SettingsError` that names the variable and what was
expected; secrets are never echoed back.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from bot.engine.git import DEFAULT_TIMEOUT
from bot.errors import ForksyncError

DEFAULT_API_URL = "https://api.github.com"
DEFAULT_MAX_BODY_BYTES = 25 * 1024 * 1024  # GitHub caps webhook payloads at 25 MiB
# An App usually cannot be installed on the upstream (someone else's repository), so no
# webhook says when it moves: polling is what notices. One ls-remote per fork per 15 min.
DEFAULT_POLL_INTERVAL = 900
_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class SettingsError(ForksyncError):
    """A setting is missing or malformed: names the variable and what was expected."""

    exit_code = 2


@dataclass(frozen=True)
class Settings:
    """Everything ``forksync serve`` (and ``sync --publish``) needs to talk to GitHub."""

    webhook_secret: str = field(default="", repr=False)
    app_id: int | None = None
    private_key: str | None = field(default=None, repr=False)  # PEM
    token: str | None = field(default=None, repr=False)  # token mode
    api_url: str = DEFAULT_API_URL
    git_url: str | None = None  # base for clone URLs; None: use the API's clone_url
    data_dir: Path = Path("/var/lib/forksync")
    host: str = "0.0.0.0"
    port: int = 8080
    poll_interval: int = DEFAULT_POLL_INTERVAL  # seconds; 0 turns the scheduler off
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    workers: int = 2
    log_level: str = "INFO"
    # A killed replica's job is taken over once its lease runs out: at most this long
    # after its last heartbeat (heartbeats come every third of it).
    job_lease_seconds: float = 20.0
    retry_backoff_seconds: float = 30.0  # first retry delay; doubles per attempt
    retry_backoff_cap_seconds: float = 3600.0
    # The time limit of one git process (or one cat-file request) in a job: past it git is
    # stopped and the job fails with a clear error, so a stuck git never holds a lease.
    git_timeout_seconds: float = DEFAULT_TIMEOUT
    # postgresql://… puts the deliveries, the queue and the per-fork state in PostgreSQL,
    # shared by every replica; None keeps them in SQLite under data_dir (one machine).
    database_url: str | None = field(default=None, repr=False)
    # Token mode only: the token may change workflow files (a PAT with the `workflow`
    # scope). An App's installation says so itself; GITHUB_TOKEN never can.
    token_writes_workflows: bool = False
    # The git caches' bound (None: unbounded); past it the least recently used go.
    cache_max_bytes: int | None = None
    cache_gc_hours: float = 24.0  # how often the caches are repacked (0: never)
    # What keeps bad clients from exhausting the server (bot/app/limits.py).
    max_connections: int = 8192  # open at once; past it the longest-idle one is closed
    header_timeout: float = 10.0  # seconds to send a request's headers
    keepalive_timeout: float = 15.0  # seconds a kept-alive connection may wait idle
    body_timeout: float = 10.0  # seconds to send a body (GitHub gives up after 10 s)
    max_buffered_bytes: int = 64 * 1024 * 1024  # request bodies held in memory at once

    @property
    def mode(self) -> Literal["app", "token"]:
        return "app" if self.app_id is not None else "token"

    @property
    def db_path(self) -> Path:
        return self.data_dir / "forksync.sqlite3"

    @property
    def store_location(self) -> str:
        """Where the store lives: the PostgreSQL URL, or the SQLite file's path."""
        return self.database_url or str(self.db_path)

    @property
    def cache_dir(self) -> Path:
        """Bare mirrors, one per upstream/fork (see ``bot.github.remote.ensure_mirror``)."""
        return self.data_dir / "git"

    @property
    def work_dir(self) -> Path:
        """The engine's ``workdir`` (its scratch repositories are in ``work/`` below it)."""
        return self.data_dir / "work"

    @property
    def cache_roots(self) -> tuple[Path, Path]:
        """Where cache repositories are: the mirrors, and the engine's scratch repositories."""
        return self.cache_dir, self.work_dir / "work"

    def clone_url(self, full_name: str, api_clone_url: str | None = None) -> str:
        """The HTTPS URL to fetch/push ``owner/repo``.

        ``git_url`` wins when set (or derived for github.com); otherwise the
        ``clone_url`` that the API reported for the repository, which is right for
        GitHub Enterprise Server and for the test simulator.
        """
        if self.git_url:
            return f"{self.git_url.rstrip('/')}/{full_name}.git"
        if api_clone_url:
            return api_clone_url
        raise SettingsError(
            f"FORKSYNC_GIT_URL: no clone URL known for {full_name}; set FORKSYNC_GIT_URL "
            "to the git server's base URL (e.g. https://github.example.com)"
        )

    def prepare_data_dir(self) -> None:
        """Create the data directory, or say in one line why it cannot be used."""
        path = self.data_dir
        try:
            path.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise SettingsError(f"FORKSYNC_DATA_DIR: {path} is a file; expected a directory "
                                "(or a path where one can be created)") from None
        except OSError as exc:
            raise SettingsError(f"FORKSYNC_DATA_DIR: cannot create {path}: "
                                f"{exc.strerror or exc}") from None
        if not os.access(path, os.W_OK | os.X_OK):
            raise SettingsError(f"FORKSYNC_DATA_DIR: {path} is not writable by this user "
                                f"(uid {os.getuid()})")

    def require_server(self) -> None:
        """Check what only ``forksync serve`` needs, so token-mode CLI runs need less."""
        if not self.webhook_secret:
            raise SettingsError(
                "FORKSYNC_WEBHOOK_SECRET: required to serve webhooks; expected the secret "
                "configured on the GitHub App (unsigned deliveries are never accepted)"
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str], *, credentials: bool = True) -> Settings:
        """Build settings from an environment mapping (pass ``os.environ`` at startup).

        ``credentials=False`` is for commands that only touch the database
        (``forksync db``, ``forksync jobs``): no App ID or token is required then.
        """
        env = {k: v.strip() for k, v in environ.items()}

        def get(name: str, *fallbacks: str) -> str | None:
            for key in (name, *fallbacks):
                if env.get(key):
                    return env[key]
            return None

        app_id = _optional_int(env, "FORKSYNC_APP_ID", minimum=1)
        private_key = _private_key(environ)
        token = get("FORKSYNC_TOKEN", "GITHUB_TOKEN")
        if app_id is not None and private_key is None:
            raise SettingsError(
                "FORKSYNC_PRIVATE_KEY: App mode (FORKSYNC_APP_ID is set) needs the App's "
                "private key: set FORKSYNC_PRIVATE_KEY to the PEM text or "
                "FORKSYNC_PRIVATE_KEY_FILE to its path"
            )
        if private_key is not None and app_id is None:
            raise SettingsError(
                "FORKSYNC_APP_ID: a private key is set, so the App's numeric ID is needed too"
            )
        if app_id is None and token is None and credentials:
            raise SettingsError(
                "FORKSYNC_APP_ID: no credentials; expected FORKSYNC_APP_ID with "
                "FORKSYNC_PRIVATE_KEY(_FILE) (App mode) or FORKSYNC_TOKEN (token mode)"
            )

        api_url = (get("FORKSYNC_API_URL", "GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/")
        if not api_url.startswith(("http://", "https://")):
            raise SettingsError(
                f"FORKSYNC_API_URL: expected an http(s) URL such as {DEFAULT_API_URL}, "
                f"got {api_url!r}"
            )
        git_url = get("FORKSYNC_GIT_URL")
        if git_url is None and api_url == DEFAULT_API_URL:
            git_url = "https://github.com"
        if git_url is None and get("GITHUB_SERVER_URL") and "GITHUB_API_URL" in env:
            git_url = get("GITHUB_SERVER_URL")  # inside GitHub Actions on GHES
        if git_url is not None and not git_url.startswith(("http://", "https://", "file://")):
            raise SettingsError(
                f"FORKSYNC_GIT_URL: expected an http(s) base URL such as https://github.com, "
                f"got {git_url!r}"
            )

        log_level = (get("FORKSYNC_LOG_LEVEL") or "INFO").upper()
        if log_level not in _LOG_LEVELS:
            raise SettingsError(
                f"FORKSYNC_LOG_LEVEL: expected one of {', '.join(_LOG_LEVELS)}, got {log_level!r}"
            )
        data_dir = Path(get("FORKSYNC_DATA_DIR") or cls.data_dir).expanduser()
        database_url = get("FORKSYNC_DATABASE_URL")
        if database_url is not None and not database_url.startswith(
                ("postgresql://", "postgres://")):
            scheme = database_url.split(":", 1)[0] if ":" in database_url else "?"
            raise SettingsError(
                f"FORKSYNC_DATABASE_URL: expected a postgresql:// URL, got a {scheme!r} URL "
                "(leave it unset to keep the state in SQLite under FORKSYNC_DATA_DIR)")
        workflows = (get("FORKSYNC_WORKFLOWS") or "none").lower()
        if workflows not in ("write", "none"):
            raise SettingsError(f"FORKSYNC_WORKFLOWS: expected `write` (the token may change "
                                f"workflow files) or `none`, got {workflows!r}")

        return cls(
            app_id=app_id,
            private_key=private_key,
            webhook_secret=env.get("FORKSYNC_WEBHOOK_SECRET", ""),
            token=token if app_id is None else None,
            api_url=api_url,
            git_url=git_url.rstrip("/") if git_url else None,
            data_dir=data_dir,
            host=get("FORKSYNC_HOST") or cls.host,
            port=_int(env, "FORKSYNC_PORT", cls.port, minimum=0, maximum=65535),
            poll_interval=_int(env, "FORKSYNC_POLL_INTERVAL", cls.poll_interval, minimum=0),
            max_body_bytes=_int(env, "FORKSYNC_MAX_BODY_BYTES", cls.max_body_bytes, minimum=1024),
            workers=_int(env, "FORKSYNC_WORKERS", cls.workers, minimum=1, maximum=64),
            log_level=log_level,
            job_lease_seconds=_float(env, "FORKSYNC_JOB_LEASE_SECONDS", cls.job_lease_seconds,
                                     minimum=1.0),
            retry_backoff_seconds=_float(env, "FORKSYNC_RETRY_BACKOFF_SECONDS",
                                         cls.retry_backoff_seconds, minimum=0.1),
            retry_backoff_cap_seconds=_float(env, "FORKSYNC_RETRY_BACKOFF_CAP_SECONDS",
                                             cls.retry_backoff_cap_seconds, minimum=0.1),
            git_timeout_seconds=_float(env, "FORKSYNC_GIT_TIMEOUT_SECONDS",
                                       cls.git_timeout_seconds, minimum=0.1),
            database_url=database_url,
            token_writes_workflows=workflows == "write",
            cache_max_bytes=_gigabytes(env, "FORKSYNC_CACHE_MAX_GB"),
            cache_gc_hours=_float(env, "FORKSYNC_CACHE_GC_HOURS", cls.cache_gc_hours,
                                  minimum=0.0, unit="hours"),
            max_connections=_int(env, "FORKSYNC_MAX_CONNECTIONS", cls.max_connections,
                                 minimum=16),
            header_timeout=_float(env, "FORKSYNC_HEADER_TIMEOUT", cls.header_timeout,
                                  minimum=0.1),
            keepalive_timeout=_float(env, "FORKSYNC_KEEPALIVE_TIMEOUT", cls.keepalive_timeout,
                                     minimum=0.1),
            body_timeout=_float(env, "FORKSYNC_BODY_TIMEOUT", cls.body_timeout, minimum=0.1),
            max_buffered_bytes=_int(env, "FORKSYNC_MAX_BUFFERED_BYTES", cls.max_buffered_bytes,
                                    minimum=1024 * 1024),
        )


@dataclass(frozen=True)
class EnvVar:
    """One environment variable ``forksync serve`` reads: for ``serve --help`` and the docs."""

    name: str
    default: str  # as a person would write it; "" when there is none
    meaning: str


_D = Settings()
# Every variable Settings.from_env reads, in the order the docs list them.
ENV_VARS: tuple[EnvVar, ...] = (
    EnvVar("FORKSYNC_APP_ID", "", "App mode: the App's numeric ID"),
    EnvVar("FORKSYNC_PRIVATE_KEY", "", "App mode: the App's private key (PEM text)"),
    EnvVar("FORKSYNC_PRIVATE_KEY_FILE", "", "App mode: the path of the private key "
           "(instead of FORKSYNC_PRIVATE_KEY)"),
    EnvVar("FORKSYNC_WEBHOOK_SECRET", "", "the App's webhook secret; required by serve"),
    EnvVar("FORKSYNC_TOKEN", "$GITHUB_TOKEN", "token mode, when FORKSYNC_APP_ID is unset"),
    EnvVar("FORKSYNC_API_URL", f"$GITHUB_API_URL or {DEFAULT_API_URL}",
           "the REST API base; GitHub Enterprise Server: https://HOST/api/v3"),
    EnvVar("FORKSYNC_GIT_URL", "https://github.com for github.com",
           "base of clone URLs; otherwise each repository's clone_url"),
    EnvVar("FORKSYNC_DATA_DIR", str(_D.data_dir),
           "the git caches, and the SQLite database unless FORKSYNC_DATABASE_URL is set"),
    EnvVar("FORKSYNC_DATABASE_URL", "", "postgresql://user:password@host:5432/db: the "
           "deliveries, the queue and the per-fork state in PostgreSQL, shared by every "
           "replica (run `forksync db upgrade` first); unset: SQLite in FORKSYNC_DATA_DIR"),
    EnvVar("FORKSYNC_HOST", _D.host, "the address to listen on"),
    EnvVar("FORKSYNC_PORT", str(_D.port), "the port to listen on"),
    EnvVar("FORKSYNC_POLL_INTERVAL", str(_D.poll_interval),
           "seconds between polls of each fork's upstream; 0 turns polling off"),
    EnvVar("FORKSYNC_JOB_LEASE_SECONDS", f"{_D.job_lease_seconds:g}",
           "a crashed process's job is taken again after this long (by any replica)"),
    EnvVar("FORKSYNC_RETRY_BACKOFF_SECONDS", f"{_D.retry_backoff_seconds:g}",
           "the first retry delay of a failed job; doubles per attempt"),
    EnvVar("FORKSYNC_RETRY_BACKOFF_CAP_SECONDS", f"{_D.retry_backoff_cap_seconds:g}",
           "the longest retry delay"),
    EnvVar("FORKSYNC_GIT_TIMEOUT_SECONDS", f"{_D.git_timeout_seconds:g}",
           "the time limit of one local git process of a job; past it the job fails"),
    EnvVar("FORKSYNC_WORKFLOWS", "none",
           "token mode: write if the token may change .github/workflows/ (an App's token "
           "says so itself)"),
    EnvVar("FORKSYNC_CACHE_MAX_GB", "", "bounds the git caches, in GB; past it the least "
           "recently used are deleted (never one in use); unset: no bound"),
    EnvVar("FORKSYNC_CACHE_GC_HOURS", f"{_D.cache_gc_hours:g}",
           "how often the git caches are repacked (git gc); 0 never"),
    EnvVar("FORKSYNC_MAX_BODY_BYTES", str(_D.max_body_bytes),
           "larger webhook bodies are refused with 413"),
    EnvVar("FORKSYNC_MAX_BUFFERED_BYTES", str(_D.max_buffered_bytes),
           "webhook bodies held in memory at once; past it a delivery gets 503 + Retry-After"),
    EnvVar("FORKSYNC_MAX_CONNECTIONS", str(_D.max_connections),
           "connections open at once; past it the longest-idle one is closed"),
    EnvVar("FORKSYNC_HEADER_TIMEOUT", f"{_D.header_timeout:g}",
           "seconds a connection has to send a request's headers"),
    EnvVar("FORKSYNC_KEEPALIVE_TIMEOUT", f"{_D.keepalive_timeout:g}",
           "seconds a kept-alive connection may stay idle"),
    EnvVar("FORKSYNC_BODY_TIMEOUT", f"{_D.body_timeout:g}",
           "seconds a webhook body has to arrive (408 after)"),
    EnvVar("FORKSYNC_WORKERS", str(_D.workers), "jobs run at once (one per repository)"),
    EnvVar("FORKSYNC_LOG_LEVEL", _D.log_level, "DEBUG, INFO, WARNING, ERROR or CRITICAL"),
)
del _D


def env_help() -> str:
    """The environment variables as ``serve --help`` lists them, each with its default."""
    lines = ["environment variables (read once at startup; docs/APP.md explains them):"]
    for v in ENV_VARS:
        default = f"default: {v.default}" if v.default else "no default"
        lines += [f"  {v.name} ({default})", f"      {v.meaning}"]
    return "\n".join(lines)


def _int(env: Mapping[str, str], name: str, default: int, *, minimum: int,
         maximum: int | None = None) -> int:
    value = _optional_int(env, name, minimum=minimum, maximum=maximum)
    return default if value is None else value


def _float(env: Mapping[str, str], name: str, default: float, *, minimum: float,
           unit: str = "seconds") -> float:
    raw = env.get(name, "")
    if raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value >= minimum or value == float("inf"):
        raise SettingsError(f"{name}: expected a number of {unit} >= {minimum:g}, got {raw!r}")
    return value


def _gigabytes(env: Mapping[str, str], name: str) -> int | None:
    """A size in GB (decimal, fractions allowed) as bytes; unset: None."""
    raw = env.get(name, "")
    if raw == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise SettingsError(f"{name}: expected a size in GB greater than 0 (e.g. 50 or 0.5), "
                            f"got {raw!r}")
    return int(value * 1e9)


def _optional_int(env: Mapping[str, str], name: str, *, minimum: int,
                  maximum: int | None = None) -> int | None:
    raw = env.get(name, "")
    if raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        value = None
    if value is None or value < minimum or (maximum is not None and value > maximum):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
        raise SettingsError(f"{name}: expected an integer {bound}, got {raw!r}")
    return value


def _private_key(environ: Mapping[str, str]) -> str | None:
    text = environ.get("FORKSYNC_PRIVATE_KEY", "").strip()
    source = "FORKSYNC_PRIVATE_KEY"
    path = environ.get("FORKSYNC_PRIVATE_KEY_FILE", "").strip()
    if text and path:
        raise SettingsError(
            "FORKSYNC_PRIVATE_KEY_FILE: set either FORKSYNC_PRIVATE_KEY or "
            "FORKSYNC_PRIVATE_KEY_FILE, not both"
        )
    if path:
        source = "FORKSYNC_PRIVATE_KEY_FILE"
        try:
            text = Path(os.path.expanduser(path)).read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not ASCII"
            raise SettingsError(
                f"FORKSYNC_PRIVATE_KEY_FILE: cannot read the private key at {path}: {reason}"
            ) from None
    if not text:
        return None
    # .env files and CI secret stores often flatten the PEM onto one line.
    text = text.replace("\\n", "\n")
    if "-----BEGIN" not in text or "PRIVATE KEY-----" not in text:
        raise SettingsError(
            f"{source}: expected a PEM private key (-----BEGIN RSA PRIVATE KEY----- ...), "
            "as downloaded from the GitHub App's settings page"
        )
    return text + "\n"
