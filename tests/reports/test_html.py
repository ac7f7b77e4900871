"""reports/html.py: the page is self-contained (nothing a browser would fetch), every value
is escaped, and the charts have one bar per bucket with events (tests/reports/test_chart.py
has the buckets)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from marketing_cli.kernel.money import cents
from marketing_cli.reports import html
from marketing_cli.services.email import report as email_report
from marketing_cli.services.sms import report as sms_report
from tests import factories

NAME = '<script>alert("x")</script>'


class Page(HTMLParser):
    """Every start tag with its attributes, and the text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(page: str) -> Page:
    parser = Page()
    parser.feed(page)
    return parser


def assert_self_contained(page: str) -> Page:
    parsed = parse(page)
    tags = {t for t, _ in parsed.tags}
    assert not tags & {"script", "link", "img", "iframe", "object", "embed", "image", "use", "base", "form"}
    for tag, attrs in parsed.tags:
        for name in ("src", "href", "xlink:href", "srcset", "action", "style"):
            assert name not in attrs, (tag, name, attrs)
    assert not re.search(r"url\(|@import", page)  # nothing fetched from the stylesheet either
    assert "http" not in "".join(re.findall(r"<style>.*?</style>", page, re.DOTALL))
    return parsed


@pytest.fixture
def email_page(conn: Any, workspace: dict) -> tuple[str, dict[str, Any]]:
    world = factories.email_timeline_world(conn, workspace["id"], factories.timeline_start(100), name=NAME)
    data = email_report.campaign_report(conn, workspace["id"], world["id"])
    return html.render(data), data


def test_the_email_report_is_self_contained_and_escapes_the_name(email_page: tuple[str, dict[str, Any]]) -> None:
    page, _ = email_page
    parsed = assert_self_contained(page)
    assert "<script" not in page
    assert NAME in "".join(parsed.text)  # shown as text, in the title and the heading
    assert page.count("&lt;script&gt;") == 2
    for heading in ("Funnel", "Timeline", "Variants", "Top links", "Providers, devices and countries"):
        assert f"<h2>{heading}</h2>" in page
    assert "https://shop.example/a" in "".join(parsed.text)


def test_each_chart_has_a_bar_per_bucket_with_events(email_page: tuple[str, dict[str, Any]]) -> None:
    page, data = email_page
    charts = [attrs for tag, attrs in parse(page).tags if tag == "svg" and attrs.get("class") == "timeline"]
    bars = [attrs for tag, attrs in parse(page).tags if tag == "rect" and attrs.get("class") == "bar"]
    # events from 0.5 h to 97 h after the first hour: hourly buckets, 98 of them
    assert (data["chart"]["minutes"], len(data["chart"]["buckets"])) == (60, 98)
    assert [(a["data-series"], a["data-buckets"]) for a in charts] == [
        ("First opens", "98"), ("Clicks", "98"), ("Unsubscribes", "98")]
    # the first opens in hours 1 and 80, the clicks in 2 (two) and 97, the unsubscribe in 3
    assert [b["data-count"] for b in bars] == ["1", "1", "2", "1", "1"]
    assert [b["unique_opens"] for b in data["chart"]["buckets"]].index(1) == 1
    funnel = [attrs["data-count"] for tag, attrs in parse(page).tags if tag == "rect" and attrs.get("class") == "step"]
    assert funnel == ["5", "4", "2", "2"]  # sent, delivered, opened, clicked


def test_a_campaign_not_sent_yet_renders_without_charts(conn: Any, workspace: dict) -> None:
    campaign = factories.email_campaign(conn, workspace["id"], "Draft")
    page = html.render(email_report.campaign_report(conn, workspace["id"], campaign["id"]))
    assert_self_contained(page)
    assert "The send has not started." in page and 'class="bar"' not in page


def test_the_sms_report(conn: Any, workspace: dict) -> None:
    cid = factories.sms_timeline_world(conn, workspace["id"], factories.timeline_start(100), name=NAME)
    data = sms_report.campaign_report(conn, workspace["id"], cid)
    page = html.render(data)
    parsed = assert_self_contained(page)
    assert "<script" not in page and NAME in "".join(parsed.text)
    assert data["by_country"] == [{"country": "US", "messages": 3, "sent": 3, "delivered": 2,
                                   "charged": data["statistics"]["total_cost"]}]
    assert data["by_provider"] == [{"provider": "outbox", "messages": 3}]
    charts = [attrs for tag, attrs in parsed.tags if tag == "svg" and attrs.get("class") == "timeline"]
    assert [a["data-buckets"] for a in charts] == ["76"] * 3  # hourly, from the start hour to the click at 75 h
    assert f"Cost: ${cents(data['statistics']['total_cost'])}." in page  # in cents: the data keeps every digit


def test_values_from_the_data_are_escaped_everywhere() -> None:
    evil = '"><svg onload=alert(1)>'
    row = {"url": evil, "total_clicks": 1, "unique_clicks": 1}
    data = {"kind": "email", "generated_at": evil,
            "campaign": {"id": evil, "name": evil, "status": evil, "variants": []},
            "statistics": {"aggregate": dict.fromkeys(("delivered", "opened", "clicked", "bounced", "unsubscribed",
                                                       "complained"), 1),
                           "link_activity": [row], "variant_stats": [],
                           "delivered_by_provider": [{"service_provider": evil, "delivery_count": 1}],
                           "clicks_by_device_type": [{"device_type": evil, "click_count": 1}],
                           "clicks_by_os": [{"operating_system": evil, "click_count": 1}],
                           "clicks_by_country": [{"country": evil, "click_count": 1}]},
            "timeline": {"started_at": evil, "hours": [], "days": [], "totals": {"sent": 1}}}
    page = html.render(data)
    assert "<svg onload" not in page and "onload=alert(1)&gt;" in page
    assert_self_contained(page)


def test_the_stylesheet_hash_in_the_policy_is_the_pages() -> None:
    import base64
    import hashlib

    digest = base64.b64encode(hashlib.sha256(html.STYLESHEET.encode()).digest()).decode()
    assert f"'sha256-{digest}'" in html.CONTENT_SECURITY_POLICY


def test_the_cli_writes_one_file(cli: Any, conn: Any, workspace: dict, tmp_path: Path) -> None:
    world = factories.email_timeline_world(conn, workspace["id"], factories.timeline_start(100), name=NAME)
    out = tmp_path / "report.html"
    result = cli("campaigns", "report", world["id"], "--html", str(out))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"Wrote the report of {world['id']} to {out}")
    assert_self_contained(out.read_text(encoding="utf-8"))
    assert list(tmp_path.glob("*.html")) == [out]
    stdout = cli("campaigns", "report", world["id"], "--html", "-")
    assert stdout.exit_code == 0 and stdout.stdout.startswith("<!doctype html>")
    missing = cli("campaigns", "report", world["id"], "--html", str(tmp_path / "no" / "such" / "dir.html"))
    assert missing.exit_code == 1 and "Could not write" in missing.stderr
