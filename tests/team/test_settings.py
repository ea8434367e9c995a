"""The team configuration (its DSN masked wherever it is shown, bad values reported) and the project rules."""

from __future__ import annotations

from pathlib import Path

from ctxd.redact import redact
from ctxd.service.config import config_from_json, load_cli_config
from ctxd.team.projects import Projects
from ctxd.team.settings import TeamSettings, masked_dsn


def test_a_password_in_the_dsn_is_masked_and_kept_secret() -> None:
    assert masked_dsn("postgresql://alice:s3cr3t-Pass-99@db:5432/team") == "postgresql://alice:***@db:5432/team"
    assert masked_dsn("host=db user=alice password='it s3cret' dbname=t") == "host=db user=alice password=*** dbname=t"
    assert masked_dsn("postgresql://alice@db/team?password=Q-77-Zz") == "postgresql://alice@db/team?password=***"
    problems: list[str] = []
    cfg = config_from_json({"team": {"dsn": "postgresql://alice:Hunter2-Long-Pw@db/team", "projects": "*"}}, problems)
    assert problems == [] and cfg.team.projects == ["*"]
    assert cfg.to_json()["team"]["dsn"] == "postgresql://alice:***@db/team"
    assert "Hunter2-Long-Pw" not in redact("connecting with Hunter2-Long-Pw")  # a secret from now on


def test_bad_team_values_are_reported_and_skipped() -> None:
    problems: list[str] = []
    team = config_from_json(
        {"team": {"dsn": 5, "projects": [1], "user": "", "batchRows": 0, "connections": "4", "colour": "red"}},
        problems,
    ).team
    assert team.dsn == "" and team.projects == [] and team.batch_rows == 5000 and not team.enabled
    assert team.connections == 2 and any(p.startswith("initializationOptions: team.connections: ") for p in problems)
    assert len(problems) == 6 and "initializationOptions: team.colour: unknown option, ignored" in problems
    assert config_from_json({"team": {"connections": 3}}, []).team.connections == 3
    problems = []
    assert not config_from_json({"team": "postgresql://x"}, problems).team.enabled
    assert problems == ['initializationOptions: team: expected an object, got "postgresql://x"; ignored']


def test_the_environment_sets_the_dsn_and_projects(tmp_path: Path) -> None:
    env = {"CTXD_TEAM_DSN": "postgresql://ci@db/team", "CTXD_TEAM_PROJECTS": "parser:web"}
    cfg, _ = load_cli_config(str(tmp_path / "none.json"), env)
    assert (cfg.team.dsn, cfg.team.projects) == ("postgresql://ci@db/team", ["parser", "web"])


def test_a_session_belongs_to_a_listed_folder_else_its_git_work_tree_else_its_folder(tmp_path: Path) -> None:
    repo = tmp_path / "src" / "parser"
    (repo / ".git").mkdir(parents=True)
    (repo / "lib" / "deep").mkdir(parents=True)
    web = tmp_path / "clients" / "acme-web"
    rules = Projects(TeamSettings(projects=["parser", str(web)]))
    assert rules.published(str(repo / "lib" / "deep")) == "parser"
    assert rules.published(str(web / "frontend")) == "acme-web"
    assert rules.published(str(tmp_path / "other")) is None
    assert rules.published("") is None
    everything = Projects(TeamSettings(projects=["*"]))
    assert everything.published(str(tmp_path / "other")) == "other"
    assert Projects(TeamSettings(projects=[])).published(str(repo)) is None
