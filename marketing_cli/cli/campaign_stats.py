"""`mkt campaigns stats ID`: an email campaign's statistics (GET /v1/campaigns/:id/statistics).

The command lives here, beside its rich view; `register(app)` adds it as `stats` to the
`campaigns` typer app (cli/campaigns.py calls `campaign_stats.register(app)`).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from marketing_cli.cli.output import JsonOption, emit
from marketing_cli.cli.state import state

BAR_WIDTH = 30
RATES = (("opened", "Opened"), ("clicked", "Clicked"), ("bounced", "Bounced"),
         ("unsubscribed", "Unsubscribed"), ("complained", "Complained"))
BREAKDOWNS = (
    ("clicks_by_country", "country", "click_count", "Clicks by country"),
    ("clicks_by_device_type", "device_type", "click_count", "Clicks by device"),
    ("clicks_by_os", "operating_system", "click_count", "Clicks by operating system"),
    ("delivered_by_provider", "service_provider", "delivery_count", "Deliveries by provider"),
)


def campaigns_stats(
    ctx: typer.Context,
    campaign_id: Annotated[str, typer.Argument(help="The campaign's id (24 hex characters).")],
    as_json: JsonOption = False,
) -> None:
    """Show an email campaign's statistics: rates, breakdowns, links and variants."""
    from marketing_cli.services.email import stats as campaign_stats

    s = state(ctx)
    emit(campaign_stats.get_campaign_statistics(s.conn(), s.workspace_id(), campaign_id), as_json, render)


def register(app: typer.Typer) -> None:
    """Add `stats` to the campaigns app."""
    app.command("stats")(campaigns_stats)


def percent(part: int, whole: int) -> str:
    return f"{part * 100 / whole:.1f}%" if whole else "-"


def bar(part: int, whole: int) -> Any:
    from rich.progress_bar import ProgressBar

    return ProgressBar(total=max(whole, 1), completed=min(part, max(whole, 1)), width=BAR_WIDTH)


def render(data: dict[str, Any]) -> Any:
    """Panels for a person: the aggregate as rates of delivered, each breakdown, links, variants."""
    from rich.console import Group
    from rich.panel import Panel

    parts = [Panel(_aggregate(data["aggregate"]), title="Campaign statistics", expand=False)]
    if data.get("outbox"):
        parts.append(outbox_note(data["outbox"]))
    for key, label_key, count_key, title in BREAKDOWNS:
        rows = data[key]
        if rows:
            total = sum(r[count_key] for r in rows)
            parts.append(Panel(_shares([(r[label_key], r[count_key]) for r in rows], total),
                               title=title, expand=False))
    if data["link_activity"]:
        parts.append(Panel(_links(data["link_activity"]), title="Links", expand=False))
    if len(data["variant_stats"]) > 1:
        parts.append(Panel(_variants(data["variant_stats"]), title="Variants", expand=False))
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


def _aggregate(aggregate: dict[str, int]) -> Any:
    delivered = aggregate["delivered"]
    t = _grid()
    t.add_row("Delivered", f"{delivered:,}", "", "")
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


def _variants(variants: list[dict[str, Any]]) -> Any:
    from rich.console import Group
    from rich.text import Text

    from marketing_cli.cli.output import table

    best_open = max(v["opened"] / v["delivered"] if v["delivered"] else 0 for v in variants)
    rows = []
    for letter, v in zip("ABCDEFGH", variants):
        open_rate = v["opened"] / v["delivered"] if v["delivered"] else 0
        mark = " *" if best_open and open_rate == best_open else ""
        rows.append((letter + mark, v["variant_id"], f"{v['delivered']:,}",
                     *(f"{v[k]:,} ({percent(v[k], v['delivered'])})"
                       for k in ("opened", "clicked", "bounced", "unsubscribed", "complained"))))
    columns = ["variant", "id", "delivered", "opened", "clicked", "bounced", "unsubscribed", "complained"]
    return Group(table(columns, rows, key=1, hint="--json"), Text("* the best open rate", style="dim"))
