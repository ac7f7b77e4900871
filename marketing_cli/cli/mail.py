"""`mkt mail transport set|show`: where a workspace's mail goes (operator only: no HTTP twin).

Also the transport lines that `mkt serve` and `mkt jobs run` print when they start, so the
output of a run names where mail and SMS go (services/delivery/transport_settings.py).
"""

from __future__ import annotations

import sqlite3
from typing import Annotated, Any

import typer

from marketing_cli.cli.output import JsonOption, emit, pairs
from marketing_cli.cli.registry import HELP
from marketing_cli.cli.state import state

app = typer.Typer(help=HELP["mail"], no_args_is_help=True)
transport_app = typer.Typer(help="Where the workspace's mail goes: an SMTP server or the outbox folder "
                                 "(operator only).", no_args_is_help=True)
app.add_typer(transport_app, name="transport")

SOURCE_NAMES = {"MKT_SMTP_URL": "MKT_SMTP_URL or --smtp-url", "MKT_OUTBOX": "MKT_OUTBOX or --outbox",
                "workspace": "the workspace's setting", "default": "the default"}
LISTED_WORKSPACES = 10  # a banner line names at most this many workspaces


def describe_mail(view: dict[str, Any]) -> str:
    """`outbox at PATH (nothing leaves this machine)` or `SMTP URL` (password masked)."""
    if view["transport"] == "outbox":
        return f"outbox at {view['path']} (nothing leaves this machine)"
    return f"SMTP {view['url']}"


def describe_sms(view: dict[str, Any]) -> str:
    if view["provider"] == "outbox":
        return "outbox (`mkt sms outbox` lists the messages; nothing leaves this machine)"
    return f"Twilio account {view['account_sid']} at {view['base_url'] or 'https://api.twilio.com'}"


def render_transport(view: dict[str, Any]) -> Any:
    rows = {"in use": describe_mail(view), "source": SOURCE_NAMES[view["source"]], "why": view["reason"]}
    stored = view["stored"]
    if stored is not None and view["source"] == "MKT_SMTP_URL":  # overridden by a flag or a variable
        rows["stored"] = f"{describe_mail(stored)}, not used while {SOURCE_NAMES[view['source']]} is set"
    return pairs(rows, title="Mail transport")


@transport_app.command("set")
def transport_set(
    ctx: typer.Context,
    transport: Annotated[str, typer.Argument(
        metavar="URL|outbox", help="smtp://[user:password@]host[:port][?starttls=1], smtps://..., or outbox.")],
    path: Annotated[str | None, typer.Option(
        "--path", metavar="DIR", help="outbox: the folder for the .eml files (default outbox/ beside the database).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Choose the workspace's mail transport (operator only; the password is never shown)."""
    from marketing_cli.services.delivery import transport_settings

    s = state(ctx)
    emit(transport_settings.set_transport(s.conn(), s.workspace_id(), transport, path=path), as_json,
         render_transport)


@transport_app.command("show")
def transport_show(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Show the mail transport in use, which setting chose it and why (the password masked)."""
    from marketing_cli.services.delivery import transport_settings

    s = state(ctx)
    emit(transport_settings.show_transport(s.conn(), s.workspace_id()), as_json, render_transport)


def _grouped(channel: str, described: list[tuple[int, str]]) -> list[str]:
    """One line per distinct description; the workspaces named when they do not all agree."""
    groups: dict[str, list[int]] = {}
    for workspace_id, text in described:
        groups.setdefault(text, []).append(workspace_id)
    if len(groups) == 1:
        return [f"{channel}: {next(iter(groups))}"]
    lines = []
    for text, ids in groups.items():
        named = ", ".join(str(i) for i in ids[:LISTED_WORKSPACES])
        more = f" and {len(ids) - LISTED_WORKSPACES} more" if len(ids) > LISTED_WORKSPACES else ""
        lines.append(f"{channel} (workspace{'s' if len(ids) > 1 else ''} {named}{more}): {text}")
    return lines


def transport_lines(conn: sqlite3.Connection) -> list[str]:
    """`mail: ...` and `sms: ...` lines: where each workspace's messages go from this process."""
    from marketing_cli.services.account import workspaces
    from marketing_cli.services.delivery import transport_settings
    from marketing_cli.services.sms import providers

    ids = [w["id"] for w in workspaces.list_workspaces(conn)]
    if not ids:
        return [f"mail: {describe_mail(transport_settings.show_transport(conn, None))}"]

    def mail(workspace_id: int) -> str:
        view = transport_settings.show_transport(conn, workspace_id)
        text = describe_mail(view)
        return f"{text} [{SOURCE_NAMES[view['source']]}]" if view["source"] in ("MKT_SMTP_URL", "MKT_OUTBOX") else text

    return [*_grouped("mail", [(i, mail(i)) for i in ids]),
            *_grouped("sms", [(i, describe_sms(providers.show_provider(conn, i))) for i in ids])]
