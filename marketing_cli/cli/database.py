"""`mkt db`: which database this is, its schema version, and upgrading it (operator only)."""

from __future__ import annotations

import typer

from marketing_cli.cli.output import JsonOption, emit
from marketing_cli.cli.registry import HELP
from marketing_cli.cli.state import state

app = typer.Typer(help=HELP["database"], no_args_is_help=True)


def _status(target: object, conn: object) -> dict:
    from marketing_cli import db

    version, latest = db.schema_version(conn), db.latest_version()
    return {"engine": "postgresql" if db.is_postgresql(conn) else "sqlite", "database": str(target),
            "schema_version": version, "latest_version": latest, "up_to_date": version >= latest}


def _report(value: dict) -> str:
    engine = {"sqlite": "SQLite file", "postgresql": "PostgreSQL"}[value["engine"]]
    state_line = ("up to date" if value["up_to_date"] else
                  f"{value['latest_version'] - value['schema_version']} step(s) behind: run `mkt db upgrade`")
    return (f"{engine}: {value['database']}\n"
            f"Schema version {value['schema_version']} of {value['latest_version']} ({state_line}).")


@app.command("status")
def status(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Show the engine, the database (a URL without its password) and its schema version. Changes nothing."""
    from marketing_cli import db

    target = state(ctx).db_path
    conn = db.connect(target, upgrade=False, create=False)
    try:
        value = _status(target, conn)
    finally:
        conn.close()
    emit(value, as_json, _report)


@app.command("upgrade")
def upgrade(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Apply the schema steps the database lacks (every command also does this on first use). Safe to run
    while `mkt serve` and `mkt jobs run` work on the same database: the steps run in one transaction."""
    from marketing_cli import db

    target = state(ctx).db_path
    conn = db.connect(target, upgrade=False, create=False)
    try:
        before = db.schema_version(conn)
        db.migrate(conn)
        value = {**_status(target, conn), "upgraded_from": before}
    finally:
        conn.close()
    emit(value, as_json, lambda v: (f"Upgraded from version {v['upgraded_from']} to {v['schema_version']}."
                                    if v["upgraded_from"] < v["schema_version"] else "Already up to date.")
         + "\n" + _report(v))
