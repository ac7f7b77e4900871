"""What `mkt campaigns schedule` and `mkt sms schedule` share: the typed `--at`, the
local-time options, and the count per zone shown before a local-time send is confirmed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Optional

import typer

AtOption = Annotated[Optional[str], typer.Option(
    "--at", metavar="TIME",
    help="Send later: '2026-12-01 09:00' (in the workspace's time zone, `mkt workspace update --timezone`), "
         "'2026-12-01T09:00+01:00' or an RFC 3339 UTC time. The UTC instant understood is printed.")]
LocalTimeOption = Annotated[Optional[str], typer.Option(
    "--local-time", metavar="HH:MM",
    help="Deliver when the clock in each recipient's time zone reads HH:MM on the scheduled date "
         "(--at's date, else today); the first zone (UTC+14) goes first.")]
MissedOption = Annotated[Optional[str], typer.Option(
    "--missed", metavar="next-day|now|skip",
    help="With --local-time: recipients whose time had passed get it the next day (default), now, or not at all.")]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="With --local-time: schedule without asking.")]


def schedule_body(conn: Any, workspace_id: int, now: bool, at: str | None, local_time: str | None,
                  missed: str | None) -> dict[str, Any]:
    """The schedule call's body: --at read as a person types it, into the UTC instant."""
    from marketing_cli.services.account.workspaces import read_typed_time

    body: dict[str, Any] = ({"schedule_type": "NOW"} if now else
                            {"schedule_type": "LATER", "scheduled_at": read_typed_time(conn, workspace_id, at or "")})
    if local_time is not None:
        body["local_time"] = local_time
    if missed is not None:
        body["local_time_missed"] = missed
    return body


def confirm_zones(preview: Callable[[], dict[str, Any]], yes: bool) -> None:
    """Show the preview's estimate (on stderr: stdout is --json's): who goes now, who waits for
    their zone (until when), who quiet hours hold, who is skipped and why; ask unless `yes`."""
    from marketing_cli.cli.estimates import estimate_table, summary
    from marketing_cli.cli.output import err_console

    plan = preview()
    local, est = plan["local_time"], plan["estimate"]
    title = summary(est)
    if local:
        title = f"At {local['time']} local time on {local['date']}: " + title
    err_console.print(estimate_table(est, title))
    if not yes and not typer.confirm("Schedule it?", err=True):
        err_console.print("Not scheduled.")
        raise typer.Exit(1)


def understood(result: dict[str, Any], estimate: dict[str, Any] | None = None) -> str:
    """The sentence a person reads after scheduling: the UTC instant, the local-time plan, and
    the estimate's summary (the same numbers as the preview, `show` and the API)."""
    text = f"Campaign {result['id']} queued"
    if result.get("scheduled_at"):
        text += f" for {result['scheduled_at']} (UTC)"
    local = result.get("local_time")
    if local:
        text += (f", each recipient at {local['time']} their time on {local['date']}; sending starts "
                 f"{local['starts_at']} (UTC)")
    if estimate is not None:
        from marketing_cli.cli.estimates import summary

        text += ". " + summary(estimate)[:-1]
    return text + "."
