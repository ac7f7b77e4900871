"""SMS click tracking: per-recipient short links replace every URL (price and segments on the text as
sent), 302 to the original, first clicks in `clicked` and the breakdowns, link_activity totals."""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from typing import Any

import pytest

from marketing_cli import jobs
from marketing_cli.services.sms import links as sms_links
from marketing_cli.services.sms import schedule, stats
from marketing_cli.services.sms.segments import count_segments
from tests import factories as f

US = ["+14155550101", "+14155550102"]
BASE = "https://t.example.com"
TEXT = "Sale: https://shop.example.com/autumn?x=1, more at http://example.org/more. Reply STOP to opt out."
IPHONE = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 Version/17.0 Mobile/15E148 Safari/604.1"
DESKTOP = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36"


def expand(conn: sqlite3.Connection, ws: int, message: str = TEXT) -> dict[str, Any]:
    campaign = f.sms_campaign(conn, ws, message=message)
    schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})
    assert jobs.run_due(conn) == {"processed": 1, "failed": 0}
    return campaign


@pytest.fixture
def ws(conn: sqlite3.Connection, workspace: dict[str, Any]) -> int:
    f.sms_ready(conn, workspace["id"])
    conn.execute("UPDATE workspaces SET tracking_url = ? WHERE id = ?", (BASE, workspace["id"]))
    f.sms_contacts(conn, workspace["id"], US)
    return workspace["id"]


def bodies(conn: sqlite3.Connection, cid: str) -> list[sqlite3.Row]:
    return conn.execute("SELECT id, body, segments, price_units FROM sms_messages WHERE campaign_id = ? ORDER BY id",
                        (cid,)).fetchall()


def short_paths(body: str) -> list[str]:
    return [url[len(BASE):] for _, _, url in sms_links.find_urls(body)]


def test_links_are_replaced_per_recipient_and_priced_as_sent(conn: sqlite3.Connection, ws: int) -> None:
    campaign = expand(conn, ws)
    rows = bodies(conn, campaign["id"])
    paths = [short_paths(r["body"]) for r in rows]
    assert all(len(p) == 2 and all(x.startswith("/s/") and len(x) == 3 + 15 for x in p) for p in paths)
    assert paths[0] != paths[1]  # per recipient
    assert rows[0]["body"].endswith(". Reply STOP to opt out.") and ", more at " in rows[0]["body"]
    assert all(r["segments"] == count_segments(r["body"]).segments for r in rows)
    charged = -sum((Decimal(r[0]) for r in conn.execute("SELECT amount FROM sms_ledger WHERE campaign_id = ?",
                                                         (campaign["id"],))), Decimal(0))
    assert charged == Decimal(sum(r["price_units"] for r in rows)).scaleb(-5)


def test_links_in_a_message_with_merge_tags_are_replaced_and_charged_as_sent(conn: sqlite3.Connection,
                                                                            ws: int) -> None:
    """A message with a merge tag is rendered per recipient: PostgreSQL's batch statement looks for
    "http" in each text it wrote (recipients._summary); a plain message's text is looked at once."""
    campaign = expand(conn, ws, "Hi {{contact.email_address}}: " + TEXT)
    rows = bodies(conn, campaign["id"])
    paths = [short_paths(r["body"]) for r in rows]
    assert len(rows) == 2 and all(len(p) == 2 for p in paths) and paths[0] != paths[1]
    assert all(r["segments"] == count_segments(r["body"]).segments for r in rows)
    charged = -sum((Decimal(r[0]) for r in conn.execute("SELECT amount FROM sms_ledger WHERE campaign_id = ?",
                                                         (campaign["id"],))), Decimal(0))
    assert charged == Decimal(sum(r["price_units"] for r in rows)).scaleb(-5) > 0


def test_without_interaction_tracking_links_stay_as_written(conn: sqlite3.Connection, ws: int) -> None:
    conn.execute("UPDATE workspaces SET interaction_tracking = 0 WHERE id = ?", (ws,))
    campaign = expand(conn, ws)
    assert {r["body"] or TEXT for r in bodies(conn, campaign["id"])} == {TEXT}


def test_clicks_redirect_and_count(client: Any, conn: sqlite3.Connection, ws: int) -> None:
    campaign = expand(conn, ws)
    rows = bodies(conn, campaign["id"])
    first, second = short_paths(rows[0]["body"]), short_paths(rows[1]["body"])
    response = client.get(first[0], headers={"User-Agent": IPHONE}, follow_redirects=False)
    assert response.status_code == 302 and response.headers["location"] == "https://shop.example.com/autumn?x=1"
    client.get(first[0], headers={"User-Agent": IPHONE}, follow_redirects=False)
    client.get(first[1], headers={"User-Agent": DESKTOP}, follow_redirects=False)
    assert client.get("/mkt" + second[0], headers={"User-Agent": DESKTOP},
                      follow_redirects=False).headers["location"] == "https://shop.example.com/autumn?x=1"
    bot = client.get(second[1], headers={"User-Agent": "curl/8.0"}, follow_redirects=False)
    assert bot.status_code == 302  # redirected, not counted
    figures = stats.campaign_statistics(conn, ws, campaign["id"])
    assert figures["aggregate"]["clicked"] == 2
    assert figures["link_activity"] == [
        {"url": "https://shop.example.com/autumn?x=1", "total_clicks": 3, "unique_clicks": 2},
        {"url": "http://example.org/more", "total_clicks": 1, "unique_clicks": 1}]
    assert sorted((d["device_type"], d["click_count"]) for d in figures["clicks_by_device_type"]) == [
        ("desktop", 1), ("mobile", 1)]
    assert sorted(d["operating_system"] for d in figures["clicks_by_os"]) == ["Windows", "iOS"]
    assert sum(c["click_count"] for c in figures["clicks_by_country"]) == 2


@pytest.mark.parametrize("path", ["/s/AAAAAAAAAAAAAAAAAAAA", "/s/x", "/s/" + "A" * 40])
def test_a_forged_short_link_is_404(client: Any, conn: sqlite3.Connection, ws: int, path: str) -> None:
    expand(conn, ws)
    response = client.get(path, follow_redirects=False)
    assert response.status_code == 404 and "This link is not valid." in response.text
    assert conn.execute("SELECT COUNT(*) FROM sms_clicks").fetchone()[0] == 0
