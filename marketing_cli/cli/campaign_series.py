"""`mkt campaigns series list / show / pause / resume / stop`: recurring campaigns (the twin of
/v1/campaign-series). A series is made with `mkt campaigns schedule ID --every RRULE`
(cli/campaign_sending.py); `register(app)` adds this group to the campaigns app."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from marketing_cli.cli.output import JsonOption, QuietOption, WideOption, emit, pairs, table
from marketing_cli.cli.state import state

app = typer.Typer(help="Recurring campaigns: list, show, pause, resume and stop a series.", no_args_is_help=True)
SeriesId = Annotated[str, typer.Argument(metavar="SERIES_ID", help="The series' id (see `mkt campaigns series list`).")]


def _when(value: dict[str, str] | None) -> str:
    return f"{value['at']} ({value['local']})" if value else "-"


def render_series(s: dict[str, Any]) -> Any:
    from rich.console import Group

    counts = ", ".join(f"{n} {status.lower()}" for status, n in s["counts"].items())
    head = {"id": s["id"], "campaign": s["campaign_id"], "name": s["name"], "rule": s["rrule"],
            "time zone": s["timezone"], "status": s["status"], "next": _when(s["next_occurrence"]),
            "occurrences": counts}
    if s["status_detail"]:
        head["status detail"] = s["status_detail"]
    if s["feed_url"]:
        head["feed"] = s["feed_url"]
    parts: list[Any] = [pairs(head, title="Series")]
    if s.get("upcoming"):
        parts.append(table(["next (UTC)", "local"], [(u["at"], u["local"]) for u in s["upcoming"]]))
    if s.get("occurrences"):
        parts.append(occurrence_table(s["occurrences"]))
    return Group(*parts)


def occurrence_table(rows: list[dict[str, Any]]) -> Any:
    return table(["occurrence (UTC)", "local", "status", "campaign", "reason"],
                 [(o["occurrence_at"], o["local"], o["status"], o["campaign_id"] or "", o["reason"] or "")
                  for o in rows], title="Occurrences", drop=("local", "reason"))


@app.command("list")
def series_list(
    ctx: typer.Context,
    status: Annotated[Optional[str], typer.Option(help="Only series in this status (ACTIVE, PAUSED, STOPPED, "
                                                       "FINISHED).")] = None,
    as_json: JsonOption = False,
    wide: WideOption = False,
    quiet: QuietOption = False,
) -> None:
    """List the recurring series, newest first, with their last occurrence (GET /v1/campaign-series)."""
    from marketing_cli.services.email import series

    s = state(ctx)
    emit(series.list_series(s.conn(), s.workspace_id(), status), as_json, lambda r: table(
        ["id", "campaign", "name", "rule", "status", "next", "last", "sent", "missed", "skipped", "failed"],
        [(x["id"], x["campaign_id"], x["name"], x["rrule"], x["status"], x["next_occurrence"]["at"] if x["next_occurrence"] else "-",
          (f"{x['last_occurrence']['status']}: {x['last_occurrence']['reason']}" if x["last_occurrence"] and
           x["last_occurrence"]["reason"] else (x["last_occurrence"] or {}).get("status", "-")),
          *x["counts"].values()) for x in r["series"]],
        title=f"{len(r['series'])} series", drop=("name", "rule", "last", "missed", "failed")), wide=wide,
        quiet=quiet)


@app.command("show")
def series_show(ctx: typer.Context, series_id: SeriesId, as_json: JsonOption = False) -> None:
    """Show a series: its rule, the next occurrences and what each past one did (GET /v1/campaign-series/:id)."""
    from marketing_cli.services.email import series

    s = state(ctx)
    emit(series.get_series(s.conn(), s.workspace_id(), series_id), as_json, render_series)


@app.command("pause")
def series_pause(ctx: typer.Context, series_id: SeriesId, as_json: JsonOption = False) -> None:
    """Pause a series: no copy is sent until it is resumed (POST /v1/campaign-series/:id/pause)."""
    from marketing_cli.services.email import series

    s = state(ctx)
    emit(series.pause_series(s.conn(), s.workspace_id(), series_id), as_json,
         lambda r: f"Series {r['id']} paused.")


@app.command("resume")
def series_resume(ctx: typer.Context, series_id: SeriesId, as_json: JsonOption = False) -> None:
    """Resume a paused series; occurrences that passed are skipped (POST /v1/campaign-series/:id/resume)."""
    from marketing_cli.services.email import series

    s = state(ctx)
    emit(series.resume_series(s.conn(), s.workspace_id(), series_id), as_json,
         lambda r: f"Series {r['id']} resumed; next occurrence {_when(r['next_occurrence'])}.")


@app.command("stop")
def series_stop(ctx: typer.Context, series_id: SeriesId, as_json: JsonOption = False) -> None:
    """Stop a series for good (POST /v1/campaign-series/:id/stop)."""
    from marketing_cli.services.email import series

    s = state(ctx)
    emit(series.stop_series(s.conn(), s.workspace_id(), series_id), as_json, lambda r: f"Series {r['id']} stopped.")


def register(parent: typer.Typer) -> None:
    parent.add_typer(app, name="series")
