"""One workspace story: serve's first start and init make one workspace between them; a
remembered default workspace (`mkt workspace use`); global options before or after the
subcommand; the serve banner's lines to paste."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from marketing_cli.cli.output import global_options_first
from marketing_cli.cli.serve import banner_lines
from marketing_cli.services.account import workspaces
from marketing_cli.storage.db import connect


def _invoke(runner: Any, *args: str) -> Any:
    from marketing_cli.cli.main import app

    return runner.invoke(app, list(args), catch_exceptions=False)


def test_init_names_the_workspace_serve_made_on_its_first_start(runner: Any, tmp_path: Path) -> None:
    db = tmp_path / "fresh.db"
    from marketing_cli.storage.db import create_database_file

    create_database_file(db)
    lines = banner_lines(db, "http://127.0.0.1:8000", True)
    serve_key = next(line.split("=", 1)[1] for line in lines if "export MKT_KEY=" in line)
    result = _invoke(runner, "--db", str(db), "init", "--name", "Acme", "--json")
    assert result.exit_code == 0, result.stderr
    made = json.loads(result.stdout)
    assert set(made) == {"workspace", "api_key"} and made["workspace"]["id"] == 1
    assert made["workspace"]["name"] == "Acme" and made["api_key"] != serve_key
    conn = connect(db)
    assert [w["name"] for w in workspaces.list_workspaces(conn)] == ["Acme"]
    from marketing_cli.services.account import keys

    assert keys.authenticate(conn, f"Bearer {serve_key}") == 1
    assert keys.authenticate(conn, f"Bearer {made['api_key']}") == 1
    conn.close()
    # A second init is a second workspace, as the contract has it; serve then makes none.
    second = json.loads(_invoke(runner, "--db", str(db), "init", "--name", "Beta", "--json").stdout)
    assert second["workspace"]["id"] == 2
    assert not any("export MKT_KEY=mkt_" in line for line in banner_lines(db, "http://127.0.0.1:8000", True))


def test_init_says_where_things_are(runner: Any, tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    first = _invoke(runner, "--db", str(db), "init", "--name", "Acme")
    assert first.exit_code == 0 and str(db) in first.stdout and "created" in first.stdout
    second = _invoke(runner, "--db", str(db), "init", "--name", "Beta")
    assert "2 workspaces" in second.stdout and "mkt workspace use 2" in second.stdout


def test_workspace_use_is_remembered_per_database(runner: Any, tmp_path: Path) -> None:
    db, other = tmp_path / "a.db", tmp_path / "b.db"
    for name in ("Acme", "Beta"):
        _invoke(runner, "--db", str(db), "init", "--name", name)
    _invoke(runner, "--db", str(other), "init", "--name", "Other")
    refused = _invoke(runner, "--db", str(db), "workspace", "show")
    assert refused.exit_code == 1
    assert "1 (Acme), 2 (Beta)" in refused.stderr and "mkt workspace use ID" in refused.stderr
    used = _invoke(runner, "--db", str(db), "workspace", "use", "2", "--json")
    assert used.exit_code == 0 and json.loads(used.stdout)["name"] == "Beta"
    shown = json.loads(_invoke(runner, "--db", str(db), "workspace", "show", "--json").stdout)
    assert shown["workspace"]["name"] == "Beta"
    assert json.loads(_invoke(runner, "--db", str(db), "--workspace", "1", "workspace", "show", "--json").stdout
                      )["workspace"]["name"] == "Acme"  # --workspace still wins
    assert json.loads(_invoke(runner, "--db", str(other), "workspace", "show", "--json").stdout
                      )["workspace"]["name"] == "Other"  # another database: its own story
    listed = _invoke(runner, "--db", str(db), "workspace", "list").stdout
    assert "yes" in listed
    missing = _invoke(runner, "--db", str(db), "workspace", "use", "9")
    assert missing.exit_code == 1 and workspaces.NOT_FOUND in missing.stderr
    assert _invoke(runner, "--db", str(db), "workspace", "use", "--forget").exit_code == 0
    assert _invoke(runner, "--db", str(db), "workspace", "show").exit_code == 1
    assert _invoke(runner, "--db", str(db), "workspace", "use").exit_code == 2


@pytest.mark.parametrize("args", [
    ["--db", "{db}", "--workspace", "1", "--json", "workspace", "show"],
    ["workspace", "show", "--db", "{db}", "--workspace", "1", "--json"],
    ["--json", "workspace", "show", "--db={db}", "--workspace=1"],
    ["workspace", "--db", "{db}", "show", "--json", "--workspace", "1"],
])
def test_global_options_before_or_after_the_subcommand(runner: Any, tmp_path: Path, args: list[str]) -> None:
    db = tmp_path / "g.db"
    _invoke(runner, "--db", str(db), "init", "--name", "Acme")
    _invoke(runner, "--db", str(db), "init", "--name", "Beta")
    result = _invoke(runner, *[a.replace("{db}", str(db)) for a in args])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["workspace"]["name"] == "Acme"


def test_nothing_after_a_double_dash_moves() -> None:
    assert global_options_first(["contacts", "upsert", "--", "--db", "x"]) == ["contacts", "upsert", "--", "--db", "x"]
    assert global_options_first(["tags", "create", "vip", "--db", "x.db"]) == ["--db", "x.db", "tags", "create", "vip"]


def test_the_banner_of_a_served_database_names_its_workspaces(tmp_path: Path, runner: Any) -> None:
    db = tmp_path / "s.db"
    _invoke(runner, "--db", str(db), "init", "--name", "Acme")
    lines = banner_lines(db, "http://127.0.0.1:8000", True)
    assert "Acme (id 1)" in lines[0] and not any("mkt_" in line for line in lines)
    assert '  curl -H "Authorization: Bearer $MKT_KEY" http://127.0.0.1:8000/v1/workspace' in lines
    assert all(len(line) <= 80 for line in lines if line.startswith("  "))
