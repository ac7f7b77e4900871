"""The terminal views of a timeline: the block chart fits 80 columns on a terminal, and is
plain text (one line per busy hour) when stdout is not one; `stats` shows it with the funnel
and the variants side by side, while `stats --json` stays the statistics alone."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from rich.console import Console

from marketing_cli.cli.campaign_stats import CHART_SERIES, render
from marketing_cli.cli.charts import BLOCKS, TimelineChart
from marketing_cli.services.email import report
from tests import factories


def draw(renderable: Any, *, width: int = 80, terminal: bool = True) -> str:
    # (a height too: with a width alone, rich sizes a terminal whose TERM is dumb, as conftest sets it, 80 wide)
    console = Console(width=width, height=25, force_terminal=terminal, color_system=None, record=True,
                      file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def test_the_chart_fits_80_columns_with_a_column_per_hour(conn: Any, workspace: dict) -> None:
    world = factories.email_timeline_world(conn, workspace["id"], factories.timeline_start(100))
    data = report.campaign_report(conn, workspace["id"], world["id"])
    text = draw(render(data["statistics"], data["timeline"], data["campaign"]))
    assert max(len(line) for line in text.splitlines()) <= 80
    chart = draw(TimelineChart(data["timeline"], CHART_SERIES)).splitlines()
    assert "1 hour per column" in chart[0]
    opens, clicks = chart[1:4], chart[4:7]
    assert opens[0].startswith("opens") and clicks[0].startswith("clicks") and "max 2" in clicks[1]
    columns = [line[8:] for line in opens]
    busy = [i for i in range(72) if any(c[i:i + 1] not in ("", " ") for c in columns)]
    assert busy == [1, 2]  # an open in hours 1 and 2
    assert all(set(line[8:]) <= set(BLOCKS) for line in (*opens, *clicks))
    assert chart[7].strip().startswith("0h") and "24h" in chart[7] and "48h" in chart[7]


def test_a_narrow_terminal_sums_hours_into_columns(conn: Any, workspace: dict) -> None:
    world = factories.email_timeline_world(conn, workspace["id"], factories.timeline_start(100))
    timeline = report.campaign_report(conn, workspace["id"], world["id"])["timeline"]
    text = draw(TimelineChart(timeline, CHART_SERIES), width=60)
    assert "2 hours per column" in text and max(len(line) for line in text.splitlines()) <= 60


def test_not_a_terminal_is_plain_text(conn: Any, workspace: dict) -> None:
    world = factories.email_timeline_world(conn, workspace["id"], factories.timeline_start(100))
    timeline = report.campaign_report(conn, workspace["id"], world["id"])["timeline"]
    lines = draw(TimelineChart(timeline, CHART_SERIES), terminal=False).splitlines()
    first = timeline["hours"][0]["start"]
    assert lines[0] == "per hour since the send started (UTC)"
    assert lines[1:] == [f"{timeline['hours'][1]['start']}  opens 1  clicks 0",
                         f"{timeline['hours'][2]['start']}  opens 1  clicks 2"]
    assert not set("".join(lines)) & set(BLOCKS[1:]) and first


def test_a_send_in_progress_draws_its_hours_from_the_left(conn: Any, workspace: dict) -> None:
    world = factories.email_timeline_world(conn, workspace["id"], factories.timeline_start(5))
    timeline = report.campaign_report(conn, workspace["id"], world["id"])["timeline"]
    assert len(timeline["hours"]) == 6
    chart = draw(TimelineChart(timeline, CHART_SERIES)).splitlines()
    assert len(chart[1].rstrip()) <= 8 + 6


def test_the_stats_command(cli: Any, cli_json: Any, conn: Any, workspace: dict) -> None:
    world = factories.email_timeline_world(conn, workspace["id"], factories.timeline_start(100))
    from marketing_cli.services.estimates import views

    assert cli_json("campaigns", "stats", world["id"]) == views.email_statistics(conn, workspace["id"], world["id"])
    out = cli("campaigns", "stats", world["id"]).stdout  # CliRunner: not a terminal
    assert "Opens and clicks per hour" in out and "opens 1  clicks 2" in out
    assert "Sent" in out and "Variants" in out and "1 (33.3%)" in out and "1 (100.0%)" in out


def test_the_timeline_command(cli: Any, conn: Any, workspace: dict) -> None:
    world = factories.email_timeline_world(conn, workspace["id"], factories.timeline_start(100))
    out = cli("campaigns", "timeline", world["id"]).stdout
    assert "72 hourly and 2 daily buckets" in out and "total_clicks" in out
    draft = factories.email_campaign(conn, workspace["id"], "Draft")
    assert "the send has not started" in cli("campaigns", "timeline", draft["id"]).stdout
    assert json.loads(cli("campaigns", "timeline", draft["id"], "--json").stdout)["hours"] == []


def test_watch_draws_the_chart_on_a_terminal_only(conn: Any, workspace: dict, db_path: Any) -> None:
    from marketing_cli.cli import campaign_sending
    from marketing_cli.cli.state import State
    from marketing_cli.services.email import campaigns

    world = factories.email_timeline_world(conn, workspace["id"], factories.timeline_start(100))
    view = campaigns.get_campaign(conn, workspace["id"], world["id"])
    state = State(db_option=str(db_path))
    try:
        on_terminal = draw(campaign_sending._with_chart(state, view))
        piped = draw(campaign_sending._with_chart(state, view), terminal=False)
    finally:
        state.close()
    assert on_terminal.startswith("SENT: 5/5 sent") and "1 hour per column" in on_terminal
    assert piped.strip() == campaign_sending.watch_report(view)


def test_watch_in_a_pipe_prints_a_line_per_tick(conn: Any, workspace: dict, cli: Any, db_path: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A pipe (CliRunner's stdout is one) gets one progress line per tick while the send runs,
    then the last line: a live bar printed nothing until the send ended."""
    import threading

    from marketing_cli.cli import campaign_sending

    world = factories.email_timeline_world(conn, workspace["id"], factories.timeline_start(100))
    conn.execute("UPDATE campaigns SET status = 'SENDING' WHERE id = ?", (world["id"],))
    conn.commit()
    monkeypatch.setattr(campaign_sending, "POLL_SECONDS", 0.05)
    ticks = threading.Event()

    def finish() -> None:
        ticks.wait(0.4)
        from marketing_cli.storage.db import connect

        other = connect(db_path)
        other.execute("UPDATE campaigns SET status = 'SENT' WHERE id = ?", (world["id"],))
        other.commit()
        other.close()

    worker = threading.Thread(target=finish)
    worker.start()
    out = cli("campaigns", "watch", world["id"]).stdout.splitlines()
    worker.join()
    assert len(out) >= 3 and all(line.startswith("SENDING: 5/5 sent") for line in out[:-1])
    assert out[-1].startswith("SENT: 5/5 sent")
