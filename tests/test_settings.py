"""Settings.from_env: App mode, token mode, defaults, and errors that name the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.app.settings import DEFAULT_MAX_BODY_BYTES, Settings, SettingsError
from bot.errors import ForksyncError

PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\n-----END RSA PRIVATE KEY-----"


def test_token_mode_defaults() -> None:
    s = Settings.from_env({"FORKSYNC_TOKEN": "ghp_x", "FORKSYNC_WEBHOOK_SECRET": "s"})
    assert s.mode == "token" and s.token == "ghp_x" and s.app_id is None
    assert s.api_url == "https://api.github.com" and s.git_url == "https://github.com"
    # Polling is on by default: an App seldom can be installed on someone else's upstream.
    assert (s.port, s.poll_interval, s.workers, s.log_level) == (8080, 900, 2, "INFO")
    assert s.max_body_bytes == DEFAULT_MAX_BODY_BYTES == 25 * 1024 * 1024
    assert s.clone_url("o/r") == "https://github.com/o/r.git"


def test_app_mode_with_key_file_and_everything_set(tmp_path: Path) -> None:
    key = tmp_path / "app.pem"
    key.write_text(PEM + "\n")
    s = Settings.from_env({
        "FORKSYNC_APP_ID": "123", "FORKSYNC_PRIVATE_KEY_FILE": str(key),
        "FORKSYNC_WEBHOOK_SECRET": "shh", "FORKSYNC_API_URL": "https://ghe.example/api/v3/",
        "FORKSYNC_DATA_DIR": str(tmp_path / "data"), "FORKSYNC_HOST": "127.0.0.1",
        "FORKSYNC_PORT": "9000", "FORKSYNC_POLL_INTERVAL": "600", "FORKSYNC_WORKERS": "4",
        "FORKSYNC_MAX_BODY_BYTES": "1048576", "FORKSYNC_LOG_LEVEL": "debug",
    })
    assert s.mode == "app" and s.app_id == 123 and s.private_key == PEM + "\n"
    assert s.api_url == "https://ghe.example/api/v3" and s.git_url is None
    assert s.clone_url("o/r", "https://ghe.example/o/r.git") == "https://ghe.example/o/r.git"
    assert (s.host, s.port, s.poll_interval, s.workers, s.max_body_bytes, s.log_level) == (
        "127.0.0.1", 9000, 600, 4, 1048576, "DEBUG")
    assert s.db_path == tmp_path / "data" / "forksync.sqlite3"
    assert "MIIE" not in repr(s) and "shh" not in repr(s)


def test_flattened_pem_in_env_is_restored() -> None:
    s = Settings.from_env({"FORKSYNC_APP_ID": "1",
                           "FORKSYNC_PRIVATE_KEY": PEM.replace("\n", "\\n")})
    assert s.private_key == PEM + "\n"


def test_github_actions_variables_are_understood() -> None:
    s = Settings.from_env({"GITHUB_TOKEN": "ghs_x", "GITHUB_API_URL": "https://ghe.example/api/v3",
                           "GITHUB_SERVER_URL": "https://ghe.example"})
    assert s.token == "ghs_x" and s.git_url == "https://ghe.example"


def test_reads_only_the_mapping_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORKSYNC_TOKEN", "from-process-env")
    with pytest.raises(SettingsError):
        Settings.from_env({})


@pytest.mark.parametrize(("env", "variable", "expected"), [
    ({}, "FORKSYNC_APP_ID", "no credentials"),
    ({"FORKSYNC_APP_ID": "1"}, "FORKSYNC_PRIVATE_KEY", "private key"),
    ({"FORKSYNC_PRIVATE_KEY": PEM}, "FORKSYNC_APP_ID", "numeric ID"),
    ({"FORKSYNC_APP_ID": "abc", "FORKSYNC_PRIVATE_KEY": PEM}, "FORKSYNC_APP_ID", "integer"),
    ({"FORKSYNC_APP_ID": "1", "FORKSYNC_PRIVATE_KEY": "not a key"},
     "FORKSYNC_PRIVATE_KEY", "PEM"),
    ({"FORKSYNC_APP_ID": "1", "FORKSYNC_PRIVATE_KEY_FILE": "/nonexistent/key.pem"},
     "FORKSYNC_PRIVATE_KEY_FILE", "cannot read"),
    ({"FORKSYNC_APP_ID": "1", "FORKSYNC_PRIVATE_KEY": PEM,
      "FORKSYNC_PRIVATE_KEY_FILE": "/x"}, "FORKSYNC_PRIVATE_KEY_FILE", "not both"),
    ({"FORKSYNC_TOKEN": "t", "FORKSYNC_PORT": "70000"}, "FORKSYNC_PORT", "between 0 and 65535"),
    ({"FORKSYNC_TOKEN": "t", "FORKSYNC_WORKERS": "0"}, "FORKSYNC_WORKERS", "between 1 and 64"),
    ({"FORKSYNC_TOKEN": "t", "FORKSYNC_POLL_INTERVAL": "-5"}, "FORKSYNC_POLL_INTERVAL", ">= 0"),
    ({"FORKSYNC_TOKEN": "t", "FORKSYNC_API_URL": "api.github.com"}, "FORKSYNC_API_URL",
     "http(s) URL"),
    ({"FORKSYNC_TOKEN": "t", "FORKSYNC_LOG_LEVEL": "loud"}, "FORKSYNC_LOG_LEVEL", "one of"),
])
def test_errors_name_the_variable_and_what_was_expected(env: dict[str, str], variable: str,
                                                        expected: str) -> None:
    with pytest.raises(SettingsError) as info:
        Settings.from_env(env)
    message = str(info.value)
    assert message.startswith(variable + ":") and expected in message
    assert isinstance(info.value, ForksyncError) and "MIIE" not in message


def test_server_needs_a_webhook_secret() -> None:
    s = Settings.from_env({"FORKSYNC_TOKEN": "t"})
    with pytest.raises(SettingsError, match=r"^FORKSYNC_WEBHOOK_SECRET:"):
        s.require_server()


def test_queue_timings_are_settings_with_clear_errors() -> None:
    from bot.app.settings import Settings, SettingsError

    base = {"FORKSYNC_WEBHOOK_SECRET": "s", "FORKSYNC_TOKEN": "t"}
    s = Settings.from_env({**base, "FORKSYNC_JOB_LEASE_SECONDS": "2.5",
                           "FORKSYNC_RETRY_BACKOFF_SECONDS": "0.5"})
    assert (s.job_lease_seconds, s.retry_backoff_seconds) == (2.5, 0.5)
    # Short enough that a killed replica's jobs are taken over within 30 s.
    assert Settings.from_env(base).job_lease_seconds == 20.0
    for bad in ("0", "soon", "nan", "inf"):
        with pytest.raises(SettingsError, match="FORKSYNC_JOB_LEASE_SECONDS"):
            Settings.from_env({**base, "FORKSYNC_JOB_LEASE_SECONDS": bad})


def test_the_git_time_limit_is_a_setting() -> None:
    from bot.app.settings import Settings, SettingsError

    base = {"FORKSYNC_WEBHOOK_SECRET": "s", "FORKSYNC_TOKEN": "t"}
    assert Settings.from_env(base).git_timeout_seconds == 600.0
    assert Settings.from_env({**base, "FORKSYNC_GIT_TIMEOUT_SECONDS": "90"}
                             ).git_timeout_seconds == 90.0
    for bad in ("0", "never", "inf"):
        with pytest.raises(SettingsError, match="FORKSYNC_GIT_TIMEOUT_SECONDS"):
            Settings.from_env({**base, "FORKSYNC_GIT_TIMEOUT_SECONDS": bad})


def test_the_data_dir_is_created_or_refused_in_one_line(tmp_path: Path) -> None:
    env = {"FORKSYNC_TOKEN": "t", "FORKSYNC_DATA_DIR": str(tmp_path / "a" / "b")}
    Settings.from_env(env).prepare_data_dir()
    assert (tmp_path / "a" / "b").is_dir()
    (tmp_path / "file").write_text("x")
    with pytest.raises(SettingsError, match=r"FORKSYNC_DATA_DIR: .* is a file"):
        Settings.from_env({**env, "FORKSYNC_DATA_DIR": str(tmp_path / "file")}).prepare_data_dir()
    with pytest.raises(SettingsError, match="FORKSYNC_DATA_DIR: cannot create"):
        Settings.from_env({**env, "FORKSYNC_DATA_DIR": str(tmp_path / "file" / "sub")}
                          ).prepare_data_dir()


def test_the_database_url_picks_postgresql_and_never_echoes_its_password() -> None:
    base = {"FORKSYNC_WEBHOOK_SECRET": "s", "FORKSYNC_TOKEN": "t", "FORKSYNC_DATA_DIR": "/d"}
    assert Settings.from_env(base).store_location == "/d/forksync.sqlite3"
    url = "postgresql://bot:hunter2@db:5432/forksync"
    s = Settings.from_env({**base, "FORKSYNC_DATABASE_URL": url})
    assert s.store_location == url and "hunter2" not in repr(s)
    with pytest.raises(SettingsError, match="FORKSYNC_DATABASE_URL: expected a postgresql:// "
                                            "URL, got a 'mysql' URL") as info:
        Settings.from_env({**base, "FORKSYNC_DATABASE_URL": "mysql://bot:hunter2@db/x"})
    assert "hunter2" not in str(info.value)


def test_database_commands_need_no_credentials() -> None:
    with pytest.raises(SettingsError, match="no credentials"):
        Settings.from_env({})
    s = Settings.from_env({"FORKSYNC_DATABASE_URL": "postgres://db/forksync"},
                          credentials=False)
    assert s.database_url == "postgres://db/forksync" and s.token is None


def test_token_mode_may_be_told_its_token_writes_workflow_files() -> None:
    from bot.app.settings import Settings, SettingsError

    base = {"FORKSYNC_TOKEN": "t"}
    assert Settings.from_env(base).token_writes_workflows is False  # GITHUB_TOKEN never can
    assert Settings.from_env({**base, "FORKSYNC_WORKFLOWS": "write"}).token_writes_workflows
    assert not Settings.from_env({**base, "FORKSYNC_WORKFLOWS": "none"}).token_writes_workflows
    with pytest.raises(SettingsError, match=r"^FORKSYNC_WORKFLOWS: expected `write`"):
        Settings.from_env({**base, "FORKSYNC_WORKFLOWS": "yes"})
