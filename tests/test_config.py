"""The configuration read from its three sources (a config file, the environment, ``initializationOptions``):
every invalid value and unknown key is reported naming its source and key path, and the value in effect before
it (the default, or a lower layer's) stays; nothing stops the daemon. The effective configuration written back
(``Config.to_json``) keeps its camelCase keys and masks its secrets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctxd.service.config import Config, OpenSessions, config_from_json, load_cli_config

ENV = {"HOME": "/nonexistent-home"}


def from_file(tmp_path: Path, content: object, env: dict[str, str] | None = None) -> tuple[Config, list[str], str]:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(content))
    config, problems = load_cli_config(str(path), {**ENV, **(env or {})})
    return config, problems, str(path)


def test_a_file_s_bad_nested_value_names_the_file_and_the_key(tmp_path: Path) -> None:
    config, problems, path = from_file(tmp_path, {"compaction": {"reserveTokens": "x", "keepRecentTokens": 4_000}})
    assert problems == [f'{path}: compaction.reserveTokens: expected an integer, 0 or more, got "x"; using 16384']
    assert config.compaction.reserve_tokens == 16_384  # the default won
    assert config.compaction.keep_recent_tokens == 4_000  # the good value beside it was taken


def test_initialization_options_are_named_as_the_source() -> None:
    problems: list[str] = []
    config = config_from_json({"openSessions": {"maxCount": 2.5, "idleSeconds": 60}}, problems)
    assert problems == ["initializationOptions: openSessions.maxCount: expected a positive integer, got 2.5; using 16"]
    assert config.open_sessions == OpenSessions(idle_seconds=60.0)


def test_an_environment_variable_is_named_as_the_source(tmp_path: Path) -> None:
    env = {"CTXD_DURABILITY": "sometimes", "CTXD_TOOL_OUTPUT_SHARE": "lots", "CTXD_TEAM_PROJECTS": "web"}
    config, problems, _ = from_file(tmp_path, {"durability": "fsync", "toolOutputShare": 0.5}, env)
    assert problems == [
        'CTXD_DURABILITY: durability: expected flush, fsync or fsync-batch, got "sometimes"; using "fsync"',
        'CTXD_TOOL_OUTPUT_SHARE: toolOutputShare: expected a number above 0, at most 1, got "lots"; using 0.5',
    ]
    assert (config.durability, config.tool_output_share, config.team.projects) == ("fsync", 0.5, ["web"])


def test_the_environment_overrides_the_file_and_options_override_both(tmp_path: Path) -> None:
    content = {"compaction": {"reserveTokens": 1_000, "model": "openai/file"}, "watch": False}
    base, problems, _ = from_file(tmp_path, content, {"CTXD_MODEL": "openai/env", "CTXD_WATCH": "1"})
    assert problems == [] and base.compaction.model == "openai/env" and base.watch is True
    options = {"compaction": {"reserveTokens": -3, "maxAttempts": 4}}
    config = config_from_json(options, problems, base=base)
    # the file's 1,000 stays (not the default): an invalid option never undoes a lower layer
    assert problems == [
        "initializationOptions: compaction.reserveTokens: expected an integer, 0 or more, got -3; using 1000"
    ]
    assert (config.compaction.reserve_tokens, config.compaction.max_attempts) == (1_000, 4)
    assert config.compaction.model == "openai/env" and base.compaction.max_attempts == 2  # the base is not changed


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"bogus": 1}, "initializationOptions: bogus: unknown option, ignored"),
        ({"compaction": {"keepRecent": 5}}, "initializationOptions: compaction.keepRecent: unknown option, ignored"),
        ({"openSessions": {"what": 1}}, "initializationOptions: openSessions.what: unknown option, ignored"),
        ({"team": {"colour": "red"}}, "initializationOptions: team.colour: unknown option, ignored"),
    ],
)
def test_unknown_keys_are_reported_with_their_path(options: dict[str, object], expected: str) -> None:
    problems: list[str] = []
    assert config_from_json(options, problems).to_json() == config_from_json({}).to_json()
    assert problems == [expected]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"watch": "yes"}, 'watch: expected true or false, got "yes"; using true'),
        ({"transcriptRoots": "abc"}, 'transcriptRoots: expected a list of paths, got "abc"'),
        ({"roots": []}, "roots: expected a path or a non-empty list of paths, got []"),
        ({"compaction": 5}, "compaction: expected an object, got 5; ignored"),
        ({"compaction": {"model": 3}}, "compaction.model: expected a string or null, got 3; using null"),
        ({"compaction": {"apiKey": 7}}, "compaction.apiKey: expected a string or null, got 7; ignored"),
        ({"compaction": {"triggerPercent": 3}}, "compaction.triggerPercent: expected a number above 0, at most 1"),
        ({"team": {"batchRows": True}}, "team.batchRows: expected a positive integer, got true; using 5000"),
        ({"team": {"dsn": ["x"]}}, 'team.dsn: expected a connection string, got ["x"]; ignored'),
        ({"team": "postgresql://x"}, 'team: expected an object, got "postgresql://x"; ignored'),
        ({"openSessions": []}, "openSessions: expected an object, got []; ignored"),
    ],
)
def test_a_wrong_type_is_named_and_the_default_kept(options: dict[str, object], expected: str) -> None:
    problems: list[str] = []
    assert config_from_json(options, problems).to_json() == config_from_json({}).to_json()
    assert len(problems) == 1 and problems[0].startswith("initializationOptions: " + expected), problems


def test_every_bad_value_of_a_source_is_reported_at_once(tmp_path: Path) -> None:
    content = {"compaction": {"reserveTokens": -5, "maxAttempts": 0, "keepRecentTokens": "x", "nope": 1}, "watch": 1}
    config, problems, path = from_file(tmp_path, content)
    keys = [p.split(": ")[1] for p in problems]
    assert keys == ["watch", *(f"compaction.{k}" for k in ("reserveTokens", "keepRecentTokens", "maxAttempts", "nope"))]
    assert all(p.startswith(path + ": ") for p in problems)
    assert config.to_json() == Config(roots=config.roots).to_json()


def test_a_file_that_is_not_an_object_is_named(tmp_path: Path) -> None:
    config, problems, path = from_file(tmp_path, ["roots"])
    assert problems == [f'{path}: expected an object, got ["roots"]; ignored']
    assert config.watch is True


def test_the_effective_configuration_keeps_its_keys_and_masks_secrets() -> None:
    """What Config.to_json gave before its attributes were snake_case (measured on 6224f31)."""
    options = {
        "roots": ["/r"],
        "transcriptRoots": ["/t"],
        "archiveRoots": [],
        "opencodeDatabases": ["/o.db"],
        "durability": "fsync",
        "promptCacheTtlSeconds": 300.0,
        "compaction": {"model": "openai/x", "apiKey": "sk-secret-123456", "reserveTokens": 1000},
        "team": {"dsn": "postgresql://a:pw-Secret-99@db/t", "projects": ["*"], "user": "u", "machine": "m"},
        "openSessions": {"maxCount": 3},
    }
    problems: list[str] = []
    out = config_from_json(options, problems).to_json()
    assert problems == []
    assert json.dumps(out) == (
        '{"roots": ["/r"], "transcriptRoots": ["/t"], "archiveRoots": [], "watch": true, "durability": "fsync", '
        '"autoCompact": true, "autoCompactExternal": false, "promptCacheTtlSeconds": 300.0, "compaction": '
        '{"enabled": true, "reserveTokens": 1000, "keepRecentTokens": 20000, "contextWindow": null, '
        '"triggerPercent": null, "targetPercent": null, "keepLastTurns": 6, "maxAttempts": 2, "model": "openai/x", '
        '"apiBase": null, "apiKey": "***", "timeoutSeconds": 120.0, "maxOutputTokens": null, '
        '"customInstructions": null, "summaryMaxTokens": 5000}, "watchStepMs": 10, "appendLockTimeout": 10.0, '
        '"openSessions": {"idleSeconds": 300.0, "maxCount": 3, "maxBytes": 67108864}, "opencodeDatabases": '
        '["/o.db"], "team": {"dsn": "postgresql://a:***@db/t", "projects": ["*"], "user": "u", "machine": "m", '
        '"publish": true, "batchRows": 5000, "connections": 2, "connectTimeout": 10}, "toolOutputShare": 0.3}'
    )


def test_doctor_names_each_problem_of_the_configuration(tmp_path: Path) -> None:
    """``ctxd doctor`` fails a ``config`` check for each value of the file or the environment it did not take."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"compaction": {"reserveTokens": "x"}, "colour": "red"}))
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXD_")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), CTXD_CONFIG=str(path), CTXD_WATCH="0")
    env["CTXD_DURABILITY"] = "often"
    done = subprocess.run(
        [sys.executable, "-m", "ctxd", "doctor", "--json"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1, done.stderr
    checks = [c for c in json.loads(done.stdout)["checks"] if c["integration"] == "config"]
    assert [(c["ok"], c["detail"]) for c in checks] == [
        (False, f'{path}: compaction.reserveTokens: expected an integer, 0 or more, got "x"; using 16384'),
        (False, f"{path}: colour: unknown option, ignored"),
        (False, 'CTXD_DURABILITY: durability: expected flush, fsync or fsync-batch, got "often"; using "flush"'),
    ]
    assert all(c["fix"] for c in checks)
    del env["CTXD_DURABILITY"]
    path.write_text(json.dumps({"compaction": {"reserveTokens": 1_000}}))
    done = subprocess.run([sys.executable, "-m", "ctxd", "doctor", "--json"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout
    assert not [c for c in json.loads(done.stdout)["checks"] if c["integration"] == "config"]
