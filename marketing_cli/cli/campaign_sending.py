"""`mkt campaigns schedule / unschedule / cancel / resume / archive / delete / watch`: sending an email
campaign, and what ends it.

`register(app)` adds the commands to the `campaigns` typer app (cli/campaigns.py calls it).
`watch` polls GET /v1/campaigns/:id's service and draws a progress bar until the send ends,
with the opens and clicks per hour of GET /v1/campaigns/:id/timeline below it (cli/charts.py),
which grows a column per hour.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Optional

import typer

from marketing_cli.cli.deletes import delete_command
from marketing_cli.cli.local_time import (
    AtOption,
    LocalTimeOption,
    MissedOption,
    YesOption,
    confirm_zones,
    schedule_body,
    understood,
)
from marketing_cli.cli.output import JsonOption, emit, usage_error
from marketing_cli.cli.state import state

CampaignId = Annotated[str, typer.Argument(metavar="ID", help="The campaign's id (see `mkt campaigns list`).")]
FINAL = ("SENT", "CANCELLED", "DRAFT", "PAUSED", "ARCHIVED")
POLL_SECONDS = 1.0


def campaigns_schedule(
    ctx: typer.Context,
    campaign_id: CampaignId,
    now: Annotated[bool, typer.Option("--now", help="Send as soon as the job worker runs.")] = False,
    at: AtOption = None,
    every: Annotated[Optional[str], typer.Option(
        "--every", metavar="RRULE", help="Send a copy at each occurrence of this RFC 5545 rule, read in the "
                                         "workspace's time zone, e.g. \"FREQ=WEEKLY;BYDAY=MO;BYHOUR=9\".")] = None,
    feed: Annotated[Optional[str], typer.Option(
        "--feed", metavar="URL", help="With --every: fill each copy with the new items of this RSS or Atom feed; "
                                      "nothing new, nothing sent.")] = None,
    preview: Annotated[Optional[int], typer.Option(
        "--preview", metavar="N", help="With --every: list the next N occurrences (UTC and local) and change "
                                       "nothing.")] = None,
    test_percentage: Annotated[Optional[int], typer.Option(
        "--test-percentage", help="A/B: the share (1-100) that gets the test, split evenly between A and B.")] = None,
    winner_criterion: Annotated[Optional[str], typer.Option(
        "--winner-criterion", metavar="OPENS|CLICKS", help="A/B: how the winner is chosen.")] = None,
    wait_minutes: Annotated[Optional[int], typer.Option(
        "--wait-minutes", help="A/B: minutes between the test and the winner's send to the rest.")] = None,
    local_time: LocalTimeOption = None,
    missed: MissedOption = None,
    yes: YesOption = False,
    override_compliance: Annotated[bool, typer.Option(
        "--override-compliance", help="Operator only: schedule although the sender's domain fails the compliance "
                                      "gate (`mkt domains check`); recorded in the operator log.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Queue a DRAFT campaign for sending, now, later or every time a rule recurs (POST
    /v1/campaigns/:id/schedule; --every: POST /v1/campaigns/:id/series)."""
    from marketing_cli.services.delivery import sender_gate
    from marketing_cli.services.estimates import views

    if sum((now, at is not None, every is not None)) != 1:
        raise usage_error("Give exactly one of --now or --at TIME (or --every RRULE for a recurring campaign).")
    if every is None and (feed is not None or preview is not None):
        raise usage_error("--feed and --preview go with --every RRULE.")
    ab = {k: v for k, v in {"test_percentage": test_percentage, "winner_criterion": winner_criterion,
                            "wait_minutes": wait_minutes}.items() if v is not None}
    if every is not None:
        if override_compliance:
            raise usage_error("--override-compliance goes with --now or --at: a series is not scheduled around the "
                              "compliance gate.")
        if ab:
            raise usage_error("The A/B options go with --now or --at: the copies of a series use the default test.")
        if local_time is not None or missed is not None:
            raise usage_error("--local-time and --missed go with --now or --at: a series sends at its rule's times.")
        _schedule_every(ctx, campaign_id, every, feed, preview, as_json)
        return
    s = state(ctx)
    conn, workspace_id = s.conn(), s.workspace_id()
    body = schedule_body(conn, workspace_id, now, at, local_time, missed)
    if ab:
        body["ab_test"] = ab
    if local_time is not None:
        confirm_zones(lambda: views.email_schedule_preview(conn, workspace_id, campaign_id, body), yes)
    result = sender_gate.schedule_campaign(conn, workspace_id, campaign_id, body, override=override_compliance)
    if result.get("compliance_override"):
        from marketing_cli.cli.output import err_console

        err_console.print(f"Warning: scheduled with --override-compliance although the sender's domain fails "
                          f"{', '.join(result['compliance_override'])}: recorded in the operator log.", markup=False)
    if result.get("warnings"):
        from marketing_cli.cli.output import err_console

        for warning in result["warnings"]:
            err_console.print(f"Warning: {warning}", markup=False)
    emit(result, as_json,
         lambda r: understood(r, views.email_estimate(conn, workspace_id, r["id"]))
         + ("" if r.get("scheduled_at") or r.get("local_time") else " `mkt jobs run` (or `mkt serve`'s worker) sends it."))


def _schedule_every(ctx: typer.Context, campaign_id: str, every: str, feed: str | None, preview: int | None,
                    as_json: bool) -> None:
    from marketing_cli.cli.campaign_series import render_series
    from marketing_cli.cli.output import table
    from marketing_cli.services.delivery import sender_gate
    from marketing_cli.services.email import series

    s = state(ctx)
    if preview is not None:
        emit(series.preview_series(s.conn(), s.workspace_id(), campaign_id, {"rrule": every, "count": preview}),
             as_json, lambda r: table(["UTC", f"local ({r['timezone']})"],
                                      [(o["at"], o["local"]) for o in r["occurrences"]],
                                      title=f"Next {len(r['occurrences'])} occurrence(s) of {r['rrule']}"))
        return
    body: dict[str, Any] = {"rrule": every, **({"feed_url": feed} if feed is not None else {})}
    emit(sender_gate.create_series(s.conn(), s.workspace_id(), campaign_id, body), as_json, render_series)


def campaigns_cancel(ctx: typer.Context, campaign_id: CampaignId, as_json: JsonOption = False) -> None:
    """Stop a queued or sending campaign: nothing more goes out (POST /v1/campaigns/:id/cancel)."""
    from marketing_cli.services.email import schedule as email_schedule

    s = state(ctx)
    emit(email_schedule.cancel_campaign(s.conn(), s.workspace_id(), campaign_id), as_json,
         lambda r: f"Campaign {r['id']} cancelled.")


def campaigns_archive(ctx: typer.Context, campaign_id: CampaignId, as_json: JsonOption = False) -> None:
    """Archive a SENT or CANCELLED campaign; its statistics stay, and it may then be deleted (POST /v1/campaigns/:id/archive)."""
    from marketing_cli.services.email import schedule as email_schedule

    s = state(ctx)
    emit(email_schedule.archive_campaign(s.conn(), s.workspace_id(), campaign_id), as_json,
         lambda r: f"Campaign {r['id']} archived: `mkt campaigns delete {r['id']}` now deletes it.")


def campaigns_unschedule(ctx: typer.Context, campaign_id: CampaignId, as_json: JsonOption = False) -> None:
    """Return a QUEUED campaign to DRAFT before it starts sending (POST /v1/campaigns/:id/unschedule)."""
    from marketing_cli.services.email import schedule as email_schedule

    s = state(ctx)
    emit(email_schedule.unschedule_campaign(s.conn(), s.workspace_id(), campaign_id), as_json,
         lambda r: f"Campaign {r['id']} is a DRAFT again: change it, then `mkt campaigns schedule {r['id']}`.")


def campaigns_resume(
    ctx: typer.Context, campaign_id: CampaignId,
    force: Annotated[bool, typer.Option("--force", help="Resume a campaign the circuit breaker paused (after "
                                                        "checking what its status_detail names).")] = False,
    as_json: JsonOption = False,
) -> None:
    """Send a paused campaign again (POST /v1/campaigns/:id/resume)."""
    from marketing_cli.services.email import schedule as email_schedule

    s = state(ctx)
    emit(email_schedule.resume_campaign(s.conn(), s.workspace_id(), campaign_id, {"force": force}), as_json,
         lambda r: f"Campaign {r['id']} is sending again.")


def progress_line(view: dict[str, Any]) -> str:
    """The send's progress and, from the campaign's estimate, what is still to come: the
    messages waiting for their zone or held by quiet hours, and the next release."""
    from marketing_cli.cli.estimates import estimate_lines

    p = view.get("progress")
    coming = estimate_lines(view.get("estimate"))
    more = f"\n{coming}" if coming else ""
    if not p:
        return f"{view['status']}: not started." + more
    eta = f", about {p['eta_seconds']:,} s left" if p.get("eta_seconds") is not None else ""
    outbox = p.get("outbox")
    where = f" ({outbox['delivered']:,} of them to the outbox at {outbox['path']}, not to recipients)" if outbox else ""
    return (f"{view['status']}: {p['sent']:,}/{p['total']:,} sent ({p['delivered']:,} delivered{where}, "
            f"{p['failed']:,} failed), {p['rate_per_second']}/s{eta}." + more)


def watch_report(view: dict[str, Any]) -> str:
    """The progress line, then the status_detail (why the send paused or went back to DRAFT,
    what failed) on a line of its own when the campaign has one."""
    detail = view.get("status_detail")
    return progress_line(view) + held_lines(view) + (f"\n{detail}" if detail else "")


def held_lines(view: dict[str, Any]) -> str:
    """What the provider lanes hold back and why, a line each after a newline (services/delivery/lane_view.py)."""
    return "".join(f"\n{item['line']}" for item in view.get("held_back") or ())


def campaigns_watch(ctx: typer.Context, campaign_id: CampaignId,
                    once: Annotated[bool, typer.Option("--once", help="Print the progress once and exit.")] = False,
                    as_json: JsonOption = False) -> None:
    """Follow a send with a progress bar (sent / total, rate, ETA, errors) and the opens and clicks per hour until it ends."""
    from marketing_cli.services.estimates import views

    s = state(ctx)
    view = views.email_campaign(s.conn(), s.workspace_id(), campaign_id)
    if once or as_json or view["status"] in FINAL:
        emit(view.get("progress"), as_json, lambda _: _with_chart(s, view))
        return
    from marketing_cli.cli.output import console

    if not console.is_terminal:
        _watch_lines(s, campaign_id, view)
        return
    from rich.console import Group
    from rich.live import Live
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
    from rich.text import Text

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[rate]}/s, {task.fields[failed]} failed"), TimeRemainingColumn())
    bar = Progress(*columns)
    task = bar.add_task(view["status"], total=None, rate=0, failed=0)
    with Live(bar, refresh_per_second=4) as live:
        while True:
            p = view.get("progress") or {"sent": 0, "total": None, "rate_per_second": 0, "failed": 0}
            where = " to the outbox, not to recipients" if p.get("outbox") else ""
            bar.update(task, description=view["status"] + where, completed=p["sent"], total=p["total"],
                       rate=p["rate_per_second"], failed=p["failed"])
            held = held_lines(view)
            live.update(_chart_below(s, view, Group(bar, Text(held.lstrip("\n"))) if held else bar))
            if view["status"] in FINAL:
                break
            time.sleep(POLL_SECONDS)
            view = views.email_campaign(s.conn(), s.workspace_id(), campaign_id)
    typer.echo(watch_report(view))


def _watch_lines(s: Any, campaign_id: str, view: dict[str, Any]) -> None:
    """`watch` in a pipe or a log: one progress line per tick (a live bar would print nothing
    until the end), then the last line and the status detail once the send ends."""
    from marketing_cli.services.estimates import views

    while view["status"] not in FINAL:
        typer.echo(progress_line(view) + held_lines(view))
        time.sleep(POLL_SECONDS)
        view = views.email_campaign(s.conn(), s.workspace_id(), campaign_id)
    typer.echo(watch_report(view))


def _chart_below(s: Any, view: dict[str, Any], top: Any) -> Any:
    """`top` (the progress) and, once the send started and on a terminal, the opens and clicks
    per hour so far (a pipe gets the progress alone: scripts read its lines)."""
    from rich.console import Group

    from marketing_cli.cli.campaign_stats import CHART_SERIES
    from marketing_cli.cli.charts import TimelineChart
    from marketing_cli.services.email import timeline

    if not view.get("progress"):
        return top
    chart = TimelineChart(timeline.get_campaign_timeline(s.conn(), s.workspace_id(), view["id"]), CHART_SERIES,
                          plain=False)
    return Group(top, chart)


def _with_chart(s: Any, view: dict[str, Any]) -> Any:
    from rich.text import Text

    return _chart_below(s, view, Text(watch_report(view)))  # Text: no markup in a reason


def register(app: typer.Typer) -> None:
    """Add schedule, unschedule, cancel, resume, archive, delete and watch to the campaigns app."""
    app.command("schedule")(campaigns_schedule)
    app.command("unschedule")(campaigns_unschedule)
    app.command("cancel")(campaigns_cancel)
    app.command("resume")(campaigns_resume)
    app.command("archive")(campaigns_archive)
    delete_command(app, CampaignId, "marketing_cli.services.deletion.campaigns:remove_campaign",
                   "Delete campaign {id} with its messages and statistics?",
                   "Delete an email campaign; one that sent messages once archived (DELETE /v1/campaigns/:id).")
    app.command("watch")(campaigns_watch)
