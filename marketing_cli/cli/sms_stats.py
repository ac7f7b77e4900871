"""`mkt sms stats / timeline / report ID`: an SMS campaign's statistics
(GET /v1/sms-campaigns/:id/statistics), its timeline (.../timeline) and its HTML report
(.../report). `register(app)` adds them to the `sms` typer app (cli/sms.py calls it).

For a person, `stats` shows the funnel, the messages delivered and clicks per hour
(cli/charts.py) and the breakdowns, so it reads the timeline too; `--json` prints the
statistics alone, exactly the API's `data`.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from marketing_cli.cli.charts import HtmlOption, TimelineChart, render_timeline, write_report
from marketing_cli.cli.output import JsonOption, emit, table
from marketing_cli.cli.state import state

CampaignId = Annotated[str, typer.Argument(help="The campaign's id (24 hex characters).")]
# What the terminal chart draws per hour (an SMS has no opens).
CHART_SERIES = (("delivered", "deliv."), ("total_clicks", "clicks"))


def render_stats(r: dict[str, Any], timeline: dict[str, Any] | None = None) -> Any:
    from rich.console import Group
    from rich.rule import Rule
    from rich.text import Text

    from marketing_cli.kernel.money import cents

    agg = r["aggregate"]
    base = agg["sent"] or 0
    lines: list[Any] = [Text("SMS campaign statistics", style="bold")]
    for key in ("sent", "delivered", "clicked", "failed", "unsubscribed", "suppressed"):
        value = agg[key]
        share = value / base if base and key != "sent" and key != "suppressed" else (1.0 if key == "sent" and base
                                                                                      else 0.0)
        bar = "█" * round(share * 30)
        pct = f"{share * 100:5.1f}%" if key not in ("sent", "suppressed") else "      "
        lines.append(Text(f"{key:<13}{value:>10,}  {pct}  {bar}"))
    lines.append(Text(f"{'total cost':<13}{'$' + cents(r['total_cost']):>10}"))
    if r["quiet_hours"]["held"]:
        lines.append(Text(f"{'held':<13}{r['quiet_hours']['held']:>10,}  by quiet hours, the first until "
                          f"{r['quiet_hours']['next_release_at']}"))
    if r.get("estimate") and r["estimate"]["groups"]:
        from marketing_cli.cli.estimates import estimate_table, next_line, summary

        following = next_line(r["estimate"])
        lines.append(estimate_table(r["estimate"], "Still to come: " + summary(r["estimate"])
                                    + (f" {following[0].upper()}{following[1:]}." if following else "")))
    if timeline is not None:
        lines += [Rule("Deliveries and clicks per hour", align="left"), TimelineChart(timeline, CHART_SERIES)]
    for name, key, label in (("clicks_by_country", "country", "Clicks by country"),
                             ("clicks_by_device_type", "device_type", "Clicks by device"),
                             ("clicks_by_os", "operating_system", "Clicks by OS")):
        if r[name]:
            lines.append(table([key, "clicks"], [(e[key], e["click_count"]) for e in r[name]], title=label))
    if r["link_activity"]:
        lines.append(table(["url", "total", "unique"],
                           [(e["url"], e["total_clicks"], e["unique_clicks"]) for e in r["link_activity"]],
                           title="Links"))
    return Group(*lines)


def sms_stats(ctx: typer.Context, campaign_id: CampaignId, as_json: JsonOption = False) -> None:
    """A campaign's statistics and real cost, with its deliveries and clicks per hour (GET /v1/sms-campaigns/:id/statistics)."""
    from marketing_cli.services.estimates import views

    s = state(ctx)
    figures = views.sms_statistics(s.conn(), s.workspace_id(), campaign_id)
    if as_json:
        emit(figures, True)
        return
    from marketing_cli.services.sms import timeline

    # Not the report's data: its recipients per country scan the messages, which this view does not show.
    line = timeline.campaign_timeline(s.conn(), s.workspace_id(), campaign_id)
    emit(figures, False, lambda r: render_stats(r, line))


def sms_timeline(ctx: typer.Context, campaign_id: CampaignId, as_json: JsonOption = False) -> None:
    """A campaign's messages, clicks, STOP replies and cost per hour for 72 hours, then per day."""
    from marketing_cli.services.sms import timeline

    s = state(ctx)
    emit(timeline.campaign_timeline(s.conn(), s.workspace_id(), campaign_id), as_json,
         lambda data: render_timeline(data, CHART_SERIES))


def sms_report(ctx: typer.Context, campaign_id: CampaignId, html_path: HtmlOption) -> None:
    """Write an SMS campaign's report as one self-contained HTML file (charts inline, nothing fetched)."""
    from marketing_cli.services.sms import report

    s = state(ctx)
    write_report(report.campaign_report(s.conn(), s.workspace_id(), campaign_id), html_path)


def register(app: typer.Typer) -> None:
    """Add `stats`, `timeline` and `report` to the sms app."""
    app.command("stats")(sms_stats)
    app.command("timeline")(sms_timeline)
    app.command("report")(sms_report)
