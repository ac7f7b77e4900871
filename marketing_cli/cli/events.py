"""`mkt events`: track custom events and read the automation event log."""

from __future__ import annotations

import json
import sys
import time
from typing import Annotated, Any, Optional

import typer

from marketing_cli.cli.output import JsonOption, console, emit, json_option, table
from marketing_cli.cli.references import contact_id
from marketing_cli.cli.registry import HELP
from marketing_cli.cli.state import state

app = typer.Typer(help=HELP["events"], no_args_is_help=True)

POLL_SECONDS = 0.5
_sleep = time.sleep  # tests replace it to stop --follow


@app.command("track")
def events_track(
    ctx: typer.Context,
    name: Annotated[Optional[str], typer.Option("--name", help="The event name (event_name).")] = None,
    email: Annotated[Optional[str], typer.Option("--email", help="The contact's email address.")] = None,
    phone: Annotated[Optional[str], typer.Option("--phone",
                                                 help="The contact's phone number (instead of --email).")] = None,
    properties: Annotated[Optional[str], typer.Option("--properties", metavar="JSON",
                                                      help="A JSON object of event properties.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Record a custom event for a contact (like POST /v1/events)."""
    from marketing_cli.services.contacts import events

    body: dict[str, Any] = {"event_name": name}
    if email is not None:
        body["email_address"] = email
    if phone is not None:
        body["phone_number"] = phone
    if properties is not None:
        body["properties"] = json_option(properties, "--properties", member="properties")
    s = state(ctx)
    result = events.track_event(s.conn(), s.workspace_id(), body)
    emit(result, as_json, lambda _: f"Event '{name}' recorded for {email or phone}.")


def _event_line(event: dict[str, Any]) -> str:
    payload = json.dumps(event["payload"], ensure_ascii=False, separators=(",", ":"))
    return f"{event['id']:>6}  {event['created_at']}  {event['type']:<26}  {event['contact_id']}  {payload}"


@app.command("log")
def events_log(
    ctx: typer.Context,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new events until Ctrl+C.")] = False,
    limit: Annotated[int, typer.Option("--limit", "-n", help="How many of the newest events to show first.")] = 50,
    type: Annotated[Optional[str], typer.Option("--type", help="Only events of this type (e.g. CUSTOM_EVENT).")] = None,
    contact: Annotated[Optional[str], typer.Option("--contact", metavar="CONTACT",
                                                   help="Only events of this contact: id, email or phone.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Show the automation event log, newest last; --follow keeps watching."""
    from marketing_cli.services.contacts import events

    s = state(ctx)
    conn, workspace_id = s.conn(), s.workspace_id()
    if contact is not None:
        contact = contact_id(s, contact)
    rows = events.list_events(conn, workspace_id, limit=limit, type=type, contact_id=contact)
    if not follow:
        emit(rows, as_json, lambda value: table(
            ["id", "created", "type", "contact", "payload"],
            [(e["id"], e["created_at"], e["type"], e["contact_id"],
              json.dumps(e["payload"], ensure_ascii=False)) for e in value],
            title=f"{len(value)} event(s), newest last",
        ))
        return

    def show(batch: list[dict[str, Any]]) -> None:
        for event in batch:
            if as_json:
                sys.stdout.write(json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n")
            else:
                console.print(_event_line(event), markup=False, highlight=False, soft_wrap=True)
        sys.stdout.flush()

    last_id = rows[-1]["id"] if rows else events.latest_event_id(conn, workspace_id)
    show(rows)
    try:
        full = False
        while True:
            if not full:  # a full batch means more are waiting: fetch them at once
                _sleep(POLL_SECONDS)
            batch = events.list_events(conn, workspace_id, after_id=last_id, limit=events.MAX_LOG_LIMIT,
                                       type=type, contact_id=contact)
            full = len(batch) == events.MAX_LOG_LIMIT
            if batch:
                last_id = batch[-1]["id"]
                show(batch)
    except KeyboardInterrupt:
        pass
