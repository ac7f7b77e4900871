"""`mkt db status` and `mkt db upgrade`, on both engines."""

from __future__ import annotations

import json
from typing import Any

import pytest

from marketing_cli.storage import db


def test_status_names_the_engine_and_the_version(cli: Any, conn: Any, engine: str) -> None:
    result = cli("db", "status", "--json")
    assert result.exit_code == 0, result.output
    value = json.loads(result.stdout)
    assert value["engine"] == engine
    assert value["schema_version"] == value["latest_version"] == db.latest_version()
    assert value["up_to_date"] is True
    assert value["retired"] is None  # `mkt db copy --retire-source`: tests/platform/test_db_copy_live.py
    human = cli("db", "status")
    assert f"Schema version {db.latest_version()} of {db.latest_version()} (up to date)." in human.stdout


@pytest.mark.sqlite_only  # a PostgreSQL database starts at the baseline: there is no older one to make
def test_upgrade_applies_the_missing_steps(cli: Any, db_path: Any) -> None:
    conn = db.connect(db_path, upgrade=False)
    db.migrate(conn, db.latest_version() - 1)
    conn.close()
    status = json.loads(cli("db", "status", "--json").stdout)
    assert (status["schema_version"], status["up_to_date"]) == (db.latest_version() - 1, False)
    assert "1 step(s) behind: run `mkt db upgrade`" in cli("db", "status").stdout
    upgraded = json.loads(cli("db", "upgrade", "--json").stdout)
    assert upgraded["upgraded_from"] == db.latest_version() - 1
    assert upgraded["schema_version"] == db.latest_version()
    assert "Already up to date." in cli("db", "upgrade").stdout


def test_a_missing_database_is_an_error(runner: Any, tmp_path: Any) -> None:
    from marketing_cli.cli.main import app

    result = runner.invoke(app, ["--db", str(tmp_path / "none.db"), "db", "status"])
    assert result.exit_code == 1
    assert "No database at" in result.output and not (tmp_path / "none.db").exists()


@pytest.mark.postgresql_only
def test_the_password_never_shows(runner: Any, db_path: str) -> None:
    from marketing_cli.cli.main import app

    url = db_path.replace("postgres@", "postgres:s3cret-pw@")
    for args in (["db", "status"], ["db", "status", "--json"], ["db", "upgrade"]):
        result = runner.invoke(app, ["--db", url, *args])
        assert result.exit_code == 0, result.output
        assert "s3cret-pw" not in result.output and "postgres:***@" in result.output
    wrong = "postgresql://postgres:s3cret-pw@127.0.0.1:1/none"  # nothing listens on port 1
    result = runner.invoke(app, ["--db", wrong, "db", "status"])
    assert result.exit_code != 0 and "s3cret-pw" not in result.output
    assert "Cannot connect to the database" in result.output
