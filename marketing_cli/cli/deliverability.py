"""`mkt deliverability`: per sending domain and provider lane, what the workspace's messages
became over the last days (the twin of GET /v1/deliverability; services/delivery/deliverability.py)."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from marketing_cli.cli.output import JsonOption, WideOption, emit, table
from marketing_cli.cli.registry import HELP
from marketing_cli.cli.state import state

app = typer.Typer(help=HELP["deliverability"])


def _pct(rate: float | None) -> str:
    return "-" if rate is None else f"{rate * 100:.1f}%"


def _classes(by_class: dict[str, int]) -> str:
    return ", ".join(f"{cls} {n:,}" for cls, n in by_class.items()) or "-"


def render(report: dict[str, Any]) -> Any:
    from rich.console import Group

    rows = [(r["domain"], r["lane"], f"{r['sent']:,}", f"{r['delivered']:,} ({_pct(r['delivered_rate'])})",
             f"{r['deferred']:,} ({_pct(r['deferred_rate'])})", f"{r['bounced']:,} ({_pct(r['bounce_rate'])})",
             f"{r['complained']:,} ({_pct(r['complaint_rate'])})",
             "-" if r["rate_now"] is None else f"{r['rate_now']:g}/s"
             + (f", suspended until {r['suspended_until']}" if r["suspended_until"] else ""),
             "-" if r["warmup_day"] is None else f"day {r['warmup_day']}, cap {r['warmup_cap']:,}",
             _classes(r["bounced_by_class"])) for r in report["rows"]]
    parts: list[Any] = [table(["domain", "lane", "sent", "delivered", "deferred", "bounced", "complaints", "rate now",
                               "warm-up", "bounced by class"], rows,
                              title=f"Deliverability over the last {report['days']} days (since {report['since']})",
                              drop=("warm-up", "bounced by class"))]
    if not rows:
        parts.append("No message was answered in that time.")
    for domain, checks in (report["compliance"] or {}).items():
        parts.append(table(["rule", "status", "found", "fix"],
                           [(c["rule"], c["status"], c["found"], c["fix"] or "") for c in checks],
                           title=f"Compliance of {domain}"))
    return Group(*parts)


@app.callback(invoke_without_command=True)
def deliverability(
    ctx: typer.Context,
    days: Annotated[Optional[int], typer.Option("--days", metavar="N", help="The last N days (1-90, default 7).")] = None,
    compliance: Annotated[bool, typer.Option("--compliance", help="Also check each sending domain's DNS records "
                                                                  "(the compliance gate's rows; takes seconds).")] = False,
    as_json: JsonOption = False,
    wide: WideOption = False,
) -> None:
    """Per sending domain and provider lane: sent, delivered, deferred, bounced by class, complaints,
    their rates, the lane's rate now and its warm-up (GET /v1/deliverability)."""
    from marketing_cli.services.delivery import deliverability as service

    s = state(ctx)
    emit(service.report(s.conn(), s.workspace_id(), days, compliance), as_json, render, wide=wide)
