"""`mkt campaigns stats / timeline / report ID`: an email campaign's statistics
(GET /v1/campaigns/:id/statistics), its timeline (.../timeline) and its HTML report (.../report).

The commands live here, beside their rich views; `register(app)` adds them to the
`campaigns` typer app (cli/campaigns.py calls `campaign_stats.register(app)`). For a person,
`stats` shows the funnel, the opens and clicks per hour (cli/charts.py) and the variants side
by side, so it reads the report's data (statistics and timeline at once); `--json` prints the
statistics alone, exactly the API's `data`.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from marketing_cli.cli.charts import HtmlOption, render_timeline, write_report
from marketing_cli.cli.output import JsonOption, emit
from marketing_cli.cli.state import state

CampaignId = Annotated[str, typer.Argument(help="The campaign's id (24 hex characters).")]
# What the terminal chart draws per hour: every open and every click.
CHART_SERIES = (("total_opens", "opens"), ("total_clicks", "clicks"))

BAR_WIDTH = 30
RATES = (("opened", "Opened"), ("clicked", "Clicked"), ("bounced", "Bounced"),
         ("unsubscribed", "Unsubscribed"), ("complained", "Complained"))
BREAKDOWNS = (
    ("clicks_by_country", "country", "click_count", "Clicks by country"),
    ("clicks_by_device_type", "device_type", "click_count", "Clicks by device"),
    ("clicks_by_os", "operating_system", "click_count", "Clicks by operating system"),
    ("delivered_by_provider", "service_provider", "delivery_count", "Deliveries by provider"),
)


def campaigns_stats(ctx: typer.Context, campaign_id: CampaignId, as_json: JsonOption = False) -> None:
    """Show an email campaign's statistics: funnel, opens and clicks per hour, breakdowns, links, variants."""
    s = state(ctx)
    from marketing_cli.services.estimates import views

    if as_json:
        emit(views.email_statistics(s.conn(), s.workspace_id(), campaign_id), True)
        return
    data = views.email_report(s.conn(), s.workspace_id(), campaign_id)
    emit(data, False, lambda r: render(r["statistics"], r["timeline"], r["campaign"]))


def campaigns_timeline(ctx: typer.Context, campaign_id: CampaignId, as_json: JsonOption = False) -> None:
    """Show an email campaign's events per hour for 72 hours after the send started, then per day."""
    from marketing_cli.services.email import timeline

    s = state(ctx)
    emit(timeline.get_campaign_timeline(s.conn(), s.workspace_id(), campaign_id), as_json,
         lambda data: render_timeline(data, CHART_SERIES))


def campaigns_report(ctx: typer.Context, campaign_id: CampaignId, html_path: HtmlOption) -> None:
    """Write an email campaign's report as one self-contained HTML file (charts inline, nothing fetched)."""
    from marketing_cli.reports import email as report

    s = state(ctx)
    write_report(report.campaign_report(s.conn(), s.workspace_id(), campaign_id), html_path)


def register(app: typer.Typer) -> None:
    """Add `stats`, `timeline` and `report` to the campaigns app."""
    app.command("stats")(campaigns_stats)
    app.command("timeline")(campaigns_timeline)
    app.command("report")(campaigns_report)


def percent(part: int, whole: int) -> str:
    return f"{part * 100 / whole:.1f}%" if whole else "-"


def bar(part: int, whole: int) -> Any:
    from rich.progress_bar import ProgressBar

    return ProgressBar(total=max(whole, 1), completed=min(part, max(whole, 1)), width=BAR_WIDTH)


def render(data: dict[str, Any], timeline: dict[str, Any] | None = None,
           campaign: dict[str, Any] | None = None) -> Any:
    """Panels for a person: the funnel as rates of delivered, the opens and clicks per hour
    (when the timeline is given), each breakdown, links, variants side by side."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.rule import Rule

    from marketing_cli.cli.charts import TimelineChart

    sent = timeline["totals"]["sent"] if timeline else None
    parts = [Panel(_aggregate(data["aggregate"], sent), title="Campaign statistics", expand=False)]
    if data.get("outbox"):
        parts.append(outbox_note(data["outbox"]))
    if data.get("estimate") and data["estimate"]["groups"]:
        from marketing_cli.cli.estimates import estimate_table, next_line, summary

        following = next_line(data["estimate"])
        parts.append(estimate_table(data["estimate"], "Still to come: " + summary(data["estimate"])
                                    + (f" {following[0].upper()}{following[1:]}." if following else "")))
    if timeline is not None:
        parts += [Rule("Opens and clicks per hour", align="left"), TimelineChart(timeline, CHART_SERIES)]
    for key, label_key, count_key, title in BREAKDOWNS:
        rows = data[key]
        if rows:
            total = sum(r[count_key] for r in rows)
            parts.append(Panel(_shares([(r[label_key], r[count_key]) for r in rows], total),
                               title=title, expand=False))
    if data["link_activity"]:
        parts.append(Panel(_links(data["link_activity"]), title="Links", expand=False))
    if len(data["variant_stats"]) > 1:
        types = {v["id"]: v["type"] for v in (campaign or {}).get("variants", [])}
        parts.append(Panel(_variants(data["variant_stats"], types), title="Variants", expand=False))
    return Group(*parts)


def outbox_note(outbox: dict[str, Any]) -> str:
    """Deliveries that were files, not mail: counted in delivered, but nobody received them."""
    return (f"{outbox['delivered']:,} of the delivered messages were delivered to the outbox at {outbox['path']}, "
            "not to recipients.")


def _grid() -> Any:
    from rich.table import Table

    t = Table(show_header=False, box=None, padding=(0, 2))
    t.add_column(style="bold")
    t.add_column(justify="right")
    t.add_column(justify="right")
    t.add_column()
    return t


def _aggregate(aggregate: dict[str, int], sent: int | None = None) -> Any:
    delivered = aggregate["delivered"]
    t = _grid()
    if sent is not None:
        t.add_row("Sent", f"{sent:,}", "", "")
    t.add_row("Delivered", f"{delivered:,}", percent(delivered, sent) if sent else "", bar(delivered, sent or 0)
              if sent else "")
    for key, label in RATES:
        t.add_row(label, f"{aggregate[key]:,}", percent(aggregate[key], delivered), bar(aggregate[key], delivered))
    t.caption = "rates are of delivered messages; opens and clicks count each recipient once"
    return t


def _shares(rows: list[tuple[str, int]], total: int) -> Any:
    t = _grid()
    for name, count in rows:
        t.add_row(name, f"{count:,}", percent(count, total), bar(count, total))
    return t


def _links(links: list[dict[str, Any]]) -> Any:
    from rich.table import Table

    t = Table(header_style="bold", box=None, padding=(0, 2))
    t.add_column("url", overflow="fold")
    t.add_column("clicks", justify="right")
    t.add_column("unique", justify="right")
    for link in links:
        t.add_row(link["url"], f"{link['total_clicks']:,}", f"{link['unique_clicks']:,}")
    return t


def _variants(variants: list[dict[str, Any]], types: dict[str, str] | None = None) -> Any:
    """The variants side by side: one column each, one row per number (count and rate of delivered)."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    names = [(types or {}).get(v["variant_id"], letter) for letter, v in zip("ABCDEFGH", variants)]
    best_open = max(v["opened"] / v["delivered"] if v["delivered"] else 0 for v in variants)
    t = Table(header_style="bold", box=None, padding=(0, 2))
    t.add_column("")
    for name, v in zip(names, variants):
        open_rate = v["opened"] / v["delivered"] if v["delivered"] else 0
        t.add_column(name + (" *" if best_open and open_rate == best_open else ""), justify="right", no_wrap=True)
    t.add_row("id", *(v["variant_id"] for v in variants))
    t.add_row("delivered", *(f"{v['delivered']:,}" for v in variants))
    for key in ("opened", "clicked", "bounced", "unsubscribed", "complained"):
        t.add_row(key, *(f"{v[key]:,} ({percent(v[key], v['delivered'])})" for v in variants))
    return Group(t, Text("* the best open rate", style="dim"))
