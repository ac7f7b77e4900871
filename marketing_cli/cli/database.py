"""`mkt db`: which database this is, its schema version, upgrading it, and copying it to the other engine (operator only)."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from marketing_cli.cli.output import JsonOption, emit
from marketing_cli.cli.registry import HELP
from marketing_cli.cli.state import state

app = typer.Typer(help=HELP["database"], no_args_is_help=True)


def _status(target: object, conn: object) -> dict:
    from marketing_cli.storage import db
    from marketing_cli.storage.copy.retire import retired_message

    version, latest = db.schema_version(conn), db.latest_version()
    return {"engine": "postgresql" if db.is_postgresql(conn) else "sqlite", "database": str(target),
            "schema_version": version, "latest_version": latest, "up_to_date": version >= latest,
            "retired": retired_message(conn)}


def _report(value: dict) -> str:
    engine = {"sqlite": "SQLite file", "postgresql": "PostgreSQL"}[value["engine"]]
    state_line = ("up to date" if value["up_to_date"] else
                  f"{value['latest_version'] - value['schema_version']} step(s) behind: run `mkt db upgrade`")
    retired = f"\n{value['retired']}" if value.get("retired") else ""
    return (f"{engine}: {value['database']}\n"
            f"Schema version {value['schema_version']} of {value['latest_version']} ({state_line}).{retired}")


@app.command("status")
def status(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Show the engine, the database (a URL without its password), its schema version, and whether
    `mkt db copy --retire-source` retired it (and where its data went). Changes nothing."""
    from marketing_cli.storage import db

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
    from marketing_cli.storage import db

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


class _Bars:
    """The copy's rich progress bars on stderr: the phase overall, and the table at hand."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from marketing_cli.cli.output import err_console

        self.bars = Progress(TextColumn("{task.description:<40}"), BarColumn(), MofNCompleteColumn(),
                             TimeElapsedColumn(), console=err_console, transient=True)
        self.overall: Any = None
        self.current: Any = None

    def phase(self, text: str, total: int) -> None:
        for task in (self.overall, self.current):
            if task is not None:
                self.bars.remove_task(task)
        self.current = None
        self.overall = self.bars.add_task(f"{text} (all tables)", total=total or None)

    def table(self, name: str, total: int, done: int) -> None:
        if self.current is not None:
            self.bars.remove_task(self.current)
        self.current = self.bars.add_task(f"  {name}", total=total, completed=done)

    def advance(self, rows: int) -> None:
        if rows:
            self.bars.advance(self.overall, rows)
            if self.current is not None:
                self.bars.advance(self.current, rows)


def _copied(value: dict) -> str:
    lines = [f"Copied {len(value['workspaces'])} workspace(s), {value['rows']:,} rows in "
             f"{sum(1 for t in value['tables'] if t['scope'] == 'workspace')} tables, "
             f"from {value['source']} to {value['target']}."]
    if value.get("resumed"):
        lines.append(f"Resumed a copy that had stopped: {value['resumed_rows']:,} rows were already staged.")
    lines.append(f"Verified: every table's row count and checksum match the source; "
                 f"{value['sequences']} id sequence(s) set past the largest id.")
    for problem in value["problems"]:
        lines.append(f"  {problem['table']}.{problem['column'] or '(row)'}: {problem['problem']}: "
                     f"{problem['rows']} row(s) {problem['action']}")
    if value["problems"]:
        lines.append(f"{value['rows_touched']} row(s) touched" + (f", listed in {value['report']}."
                                                                   if value["report"] else "."))
    lines.extend(value["notes"])
    if value.get("source_retired"):
        lines.append(f"Retired the source: it refuses every write from now on, naming {value['target']}.")
    return "\n".join(lines)


def _check_live(source: Any, force: bool, interactive: bool) -> None:
    """Refuse (or ask, on a terminal) to copy a source that looks live (storage/copy/retire.py)."""
    import sys

    from marketing_cli.errors import MktError
    from marketing_cli.storage import copy as dbcopy

    if force:
        return
    reasons = dbcopy.live_reasons(source)
    if not reasons:
        return
    text = (f"The source {source} looks live: {'; '.join(reasons)}. What is written to it after the copy's "
            "snapshot will not be in the copy.")
    if interactive and sys.stdin.isatty():
        typer.confirm(text + " Copy anyway?", default=False, abort=True, err=True)
        return
    raise MktError(409, text + " Stop the `mkt serve` and `mkt jobs run` that use it (and wait a minute), "
                               "or give --force.")


@app.command("copy")
def copy(
    ctx: typer.Context,
    to: Annotated[str, typer.Option("--to", metavar="TARGET",
                                    help="A postgresql:// URL, or the path of a new SQLite file.")],
    all_: Annotated[bool, typer.Option("--all", help="Copy every workspace and the instance-wide rows.")] = False,
    fix: Annotated[Optional[list[str]], typer.Option(
        "--fix", metavar="KIND=HOW",
        help="What to do with the values the target refuses or changes (repeatable, or comma-separated): "
             "nul=strip|replace, utf8=replace, type=null|convert, case=keep|keep-first. "
             "Without it such values stop the copy before anything is written.")] = None,
    report: Annotated[Optional[str], typer.Option(
        "--report", metavar="FILE.csv", help="Write every problem found and every row touched here.")] = None,
    restart: Annotated[bool, typer.Option(
        "--restart", help="Drop the staging area a different, unfinished copy left in the target.")] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Copy without asking.")] = False,
    force: Annotated[bool, typer.Option(
        "--force", help="Copy even when the source looks live (a job lease, a write in the last minute).")] = False,
    retire_source: Annotated[bool, typer.Option(
        "--retire-source", help="Once the copy is verified, make the source refuse every write (naming the "
                                "target) and `mkt serve` refuse to start on it. Needs --all.")] = False,
    batch_size: Annotated[int, typer.Option("--batch-size", hidden=True, min=1)] = 20_000,
    as_json: JsonOption = False,
) -> None:
    """Copy one workspace (--workspace ID) or --all from this database (--db) to another engine: a SQLite
    file to a postgresql:// URL, or back to a new SQLite file. Checks first, loads into a staging area, publishes at
    once, verifies counts and checksums; a rerun after a kill goes on where it stopped. Refuses a source that
    looks live (a job lease, a write in the last minute) without --force; --retire-source then retires it."""
    from marketing_cli.errors import MktError
    from marketing_cli.storage import copy as dbcopy

    # --workspace is the root option (docs/cli.md: it may come before or after the command)
    workspace = state(ctx).workspace_option
    if (workspace is None) == (not all_):
        raise MktError(422, "Choose what to copy: --workspace ID or --all (not both).")
    if retire_source and not all_:
        raise MktError(422, "--retire-source needs --all: the source would keep workspaces the copy did not take.")
    fixes = dbcopy.parse_fixes(fix or [])
    source = state(ctx).db_path
    _check_live(source, force, interactive=not as_json)
    if not yes:
        if as_json:
            raise MktError(400, "A copy writes to the target: give --yes to go on.")
        what = "every workspace" if all_ else f"workspace {workspace}"
        from marketing_cli.storage import db

        typer.confirm(f"Copy {what} from {source} to {db.resolve_db_path(to)}?", abort=True)
    bars = None if as_json else _Bars()
    if bars is not None:
        bars.bars.start()
    try:
        value = dbcopy.copy(source, to, workspace_ids=None if all_ else [workspace], fixes=fixes,
                            report=report, restart=restart, batch=batch_size, progress=bars)
    finally:
        if bars is not None:
            bars.bars.stop()
    value["source_retired"] = False
    if retire_source:
        try:
            dbcopy.retire(source, value["target"])
        except MktError as exc:
            raise MktError(exc.status, f"The copy is published and verified, but the source was not retired: "
                                       f"{exc.message}") from None
        value["source_retired"] = True
    emit(value, as_json, _copied)
