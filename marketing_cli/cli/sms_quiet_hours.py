"""`mkt sms quiet-hours show|check|on|off`: the SMS quiet-hours rules in effect and the
operator's switch (services/sms/quiet_hours.py, gate.py; docs/sms.md "Quiet hours").
`register(app)` adds the group to the `sms` typer app (cli/sms.py calls it). Operator only:
no endpoint turns quiet hours off.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from marketing_cli.cli.output import JsonOption, emit, table
from marketing_cli.cli.state import state

quiet_app = typer.Typer(help="SMS quiet hours: the hours a marketing text may reach each number (operator only).",
                        no_args_is_help=True)


def _render_quiet_hours(r: dict[str, Any]) -> Any:
    from rich.console import Group

    state_line = ("SMS quiet hours: on" if r["enabled"] else
                  f"SMS quiet hours: OFF since {r['off_since']} (texts go out at any hour)")
    parts: list[Any] = [state_line, f"Table: {r['table']}",
                        table(["region", "days", "hours", "source"],
                              [(x["region"], x["days"], x["hours"], x["source"]) for x in r["rules"]])]
    if r["changes"]:
        parts.append(table(["when", "who", "change"], [(c["created_at"], c["actor"], c["detail"])
                                                       for c in r["changes"]], title="Changes (operator log)"))
    return Group(*parts)


@quiet_app.command("show")
def quiet_hours_show(
    ctx: typer.Context,
    as_csv: Annotated[bool, typer.Option("--csv", help="Print the table in effect as CSV (a copy to edit).")] = False,
    as_json: JsonOption = False,
) -> None:
    """Show whether SMS quiet hours are on for the workspace, and the rules in effect."""
    from marketing_cli.services.sms import gate, quiet_hours

    if as_csv:
        typer.echo(quiet_hours.table_text(), nl=False)
        return
    s = state(ctx)
    emit(gate.show_settings(s.conn(), s.workspace_id()), as_json, _render_quiet_hours)


@quiet_app.command("check")
def quiet_hours_check(
    path: Annotated[str, typer.Argument(help="A quiet-hours CSV to check before pointing MKT_SMS_QUIET_HOURS at it.")],
    as_json: JsonOption = False,
) -> None:
    """Check a quiet-hours table file (exit 1 with the first bad line)."""
    from pathlib import Path

    from marketing_cli.errors import MktError
    from marketing_cli.services.sms import quiet_hours

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MktError(400, f"Cannot read {path}: {exc}.") from None
    table = quiet_hours.parse_table(text, path)
    emit({"rules": len(table.rules), "regions": sorted(table.by_region)}, as_json,
         lambda r: f"{path}: {r['rules']} rules for {', '.join(r['regions']) or 'no region'}")


@quiet_app.command("on")
def quiet_hours_on(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Turn SMS quiet hours back on for the workspace (operator only; the default)."""
    from marketing_cli.services.sms import gate

    s = state(ctx)
    emit(gate.set_enabled(s.conn(), s.workspace_id(), True), as_json, _render_quiet_hours)


@quiet_app.command("off")
def quiet_hours_off(
    ctx: typer.Context,
    override: Annotated[bool, typer.Option("--override-quiet-hours",
                                           help="Required: you take responsibility for texts sent at any hour.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Turn SMS quiet hours off for the workspace (operator only; needs --override-quiet-hours; logged)."""
    from marketing_cli.cli.output import err_console
    from marketing_cli.services.sms import gate

    s = state(ctx)
    result = gate.set_enabled(s.conn(), s.workspace_id(), False, override=override)
    err_console.print(f"Warning: SMS quiet hours are OFF for workspace {s.workspace_id()}: texts go out at any "
                      "hour. Recorded in the operator log; `mkt sms quiet-hours on` turns them back on.", markup=False)
    emit(result, as_json, _render_quiet_hours)


def register(app: typer.Typer) -> None:
    """Add the `quiet-hours` group to the sms app."""
    app.add_typer(quiet_app, name="quiet-hours")
