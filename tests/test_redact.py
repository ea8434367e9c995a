"""The redaction module: which values are secrets, and how text and JSON are scrubbed."""

from __future__ import annotations

import logging

import pytest

from ctxd import redact as r


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(r.os.environ):
        if r.is_credential_name(name):
            monkeypatch.delenv(name)


@pytest.mark.parametrize(
    "name",
    [
        "OPENAI_API_KEY",
        "ANTHROPIC_APIKEY",
        "MY_KEY",
        "GITHUB_TOKEN",
        "DB_PASSWORD",
        "CLIENT_SECRET",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_ACCESS_KEY_ID",
        "AWS_SESSION_TOKEN",
        "CTXD_API_KEY",
    ],
)
def test_credential_names(name: str) -> None:
    assert r.is_credential_name(name)


@pytest.mark.parametrize("name", ["HOME", "PATH", "TOKENIZERS_PARALLELISM", "KEYBOARD", "AWS_REGION", "LANG"])
def test_other_names(name: str) -> None:
    assert not r.is_credential_name(name)


def test_env_values_long_enough_are_secrets_short_ones_and_paths_are_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_API_KEY", "plainvalue123")
    monkeypatch.setenv("DEBUG_TOKEN", "1")
    monkeypatch.setenv("CREDENTIALS_FILE_SECRET", "/home/me/creds.json")
    assert "plainvalue123" in r.secrets()
    assert "1" not in r.secrets() and "/home/me/creds.json" not in r.secrets()
    assert r.redact("key plainvalue123 and 1 and /home/me/creds.json") == "key *** and 1 and /home/me/creds.json"


def test_configured_keys_and_patterns() -> None:
    r.add_secret("configuredkey-xyz-000")
    r.add_secret("short")  # too short to be redacted everywhere
    assert r.redact("a configuredkey-xyz-000 b short") == "a *** b short"
    assert r.redact("Authorization: Bearer abcdefghijk") == "Authorization: ***"
    assert r.redact("key sk-abcdef123456") == "key ***"


def test_json_is_scrubbed_of_known_secrets_only() -> None:
    r.add_secret("configuredkey-json-111")
    value = {"a": ["x configuredkey-json-111 y", 3, None], "path": "/tmp/sk-project12/s.jsonl"}
    assert r.redact_json(value) == {"a": ["x *** y", 3, None], "path": "/tmp/sk-project12/s.jsonl"}


def test_log_lines_and_tracebacks_are_scrubbed(caplog: pytest.LogCaptureFixture) -> None:
    r.add_secret("configuredkey-log-222")
    formatter = r.RedactingFormatter("%(message)s")
    try:
        raise ValueError("echo configuredkey-log-222")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "said %s", ("configuredkey-log-222",), None)
        import sys

        record.exc_info = sys.exc_info()
    line = formatter.format(record)
    assert "configuredkey-log-222" not in line and "said ***" in line and "echo ***" in line
