"""Expansion renders, measures and prices every recipient's message in SQL (on PostgreSQL with
no call back into Python): the rows it writes hold exactly what the Python reference makes of
the same contact (email's Renderer and Template, segments.count_segments, the workspace's
price per segment), for texts chosen to catch each rule: GSM-7 extension characters, emoji
and surrogate pairs, clusters, CR LF, and lengths around the 160/153 and 70/67 boundaries."""

from __future__ import annotations

import json
import sqlite3
from decimal import Decimal
from typing import Any

import pytest

from marketing_cli import jobs
from marketing_cli.kernel.merge import compile_template
from marketing_cli.services.contacts import merge_tags
from marketing_cli.services.sms import ledger, schedule
from marketing_cli.services.sms.pricing import country_of, price_units
from marketing_cli.services.sms.segments import count_segments
from tests import factories as f

STOP = " Reply STOP to opt out."
GSM_EXTENSION = "\x0c^{}\\[~]|€"


def _values() -> list[str]:
    """First names and cities: every kind of text, and lengths that put the message on each side
    of a segment boundary (the message around them is ~60 characters)."""
    texts = ["Ann", "Chloé", "Zoë", "O'Hara", "Ñandú", "Ørsted", "Δημήτρης", "Жанна", "李雷", "😀", "🇮🇹🇫🇷",
             "👩‍👩‍👧", "e\u0301e\u0301", "A\r\nB", "tab\there", "`back`", "50% [off] {now} ~^| €5 \\o/",
             "\x0cfeed", "", " ", "x" * 300, "€" * 90, "😀" * 40, "Ж" * 100]
    for total in (70, 67, 134, 160, 153, 306, 459):  # GSM-7 and UCS-2 boundaries, each side
        for delta in (-2, -1, 0, 1, 2):
            size = max(total + delta - 60, 1)
            texts += ["a" * size, "é" * size, "a" * (size - 1) + "€", "€" + "b" * (size - 1),
                      "Ж" * size, "😀" + "Ж" * max(size - 2, 0), "Ж" * max(size - 1, 0) + "😀",
                      "a" * max(size - 2, 0) + "\r\n"]
    return texts


MESSAGES = [
    "Hi {{contact.first_name}}, from {{contact.city}} in {{workspace.name}}." + STOP,
    "{{ contact.first_name | friend }}! {{contact.city|your city}} sale {{contact.age}} [50%]." + STOP,
    "Привет {{contact.first_name|друг}} 😀 {{contact.city}}" + STOP,
    "{{contact.first_name}}",
    "{{contact.email_address}} {{contact.phone_number}} {{contact.city | ~€~}}",
]


@pytest.fixture
def ws(conn: sqlite3.Connection, workspace: dict[str, Any]) -> int:
    f.sms_ready(conn, workspace["id"], balance="100000")
    f.field(conn, workspace["id"], "city", "TEXT", default_value="Zürich")
    f.field(conn, workspace["id"], "age", "NUMBER")
    return workspace["id"]


def _contacts(conn: sqlite3.Connection, ws: int) -> None:
    values = _values()
    ages: list[Any] = [41, 2.5, 0, -3, 1e-07, 12345.678, None]
    for i, text in enumerate(values):
        phone = f"+1415555{i:04d}" if i % 7 else f"+447400{i:06d}"
        extra: dict[str, Any] = {"first_name": text, "city": values[-1 - i]}
        if ages[i % len(ages)] is not None:
            extra["age"] = ages[i % len(ages)]
        if i % 11 == 3:
            extra.pop("city")  # the field's default
        f.sms_contacts(conn, ws, [phone], **extra)


def _expected(conn: sqlite3.Connection, ws: int, message: str) -> dict[str, tuple[str, str, int, int]]:
    """phone -> (text, encoding, segments, price in 1/100000 USD) from the Python reference."""
    email = merge_tags.Renderer(conn, ws)
    template = compile_template(message)
    prices = price_units(conn, ws)
    out = {}
    for c in conn.execute("SELECT email, phone, data FROM contacts WHERE workspace_id = ?", (ws,)).fetchall():
        text = template.render(email.values_for(c))
        counted = count_segments(text)
        units = prices.get(country_of(c["phone"]) or "")
        out[c["phone"]] = (text, counted.encoding, counted.segments, (units or 0) * counted.segments)
    return out


@pytest.mark.parametrize("message", MESSAGES)
def test_expansion_writes_what_python_renders_measures_and_prices(conn: sqlite3.Connection, ws: int,
                                                                   message: str) -> None:
    _contacts(conn, ws)
    campaign = f.sms_campaign(conn, ws, message=message)
    assert schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})["status"] == "QUEUED"
    assert jobs.run_due(conn) == {"processed": 1, "failed": 0}
    rows = {r["phone"]: (r["text"], r["encoding"], r["segments"], r["price_units"]) for r in conn.execute(
        "SELECT phone, COALESCE(body, ?) AS text, encoding, segments, price_units FROM sms_messages"
        " WHERE campaign_id = ?", (message, campaign["id"]))}
    expected = _expected(conn, ws, message)
    assert len(rows) == len(expected) > 200
    for phone, want in expected.items():
        assert rows[phone] == want, (phone, want)
    # The charge is the exact sum of the prices, in Decimal.
    charged = -sum((Decimal(r[0]) for r in conn.execute("SELECT amount FROM sms_ledger WHERE campaign_id = ?",
                                                         (campaign["id"],))), Decimal(0))
    assert charged == ledger.from_units(sum(p for _, _, _, p in expected.values()))


@pytest.mark.postgresql_only  # SQLite's json_extract is the reference itself
def test_mkt_field_extract_answers_as_json_extract(conn: sqlite3.Connection) -> None:
    """schema step 24's inlinable json_extract of a top-level key: the same answer for every JSON value."""
    values: list[Any] = ["Ann", "", "O'Hara \"q\" \\ é 😀", "line\nbreak", 0, 7, -2.5, 1e-07, 1e20, 12345.678,
                         True, False, None, [1, "a"], {"x": {"y": 1}}, "true", "1"]
    for value in values:
        for doc in (json.dumps({"7": value}), json.dumps({"7": value, "8": 1}, ensure_ascii=False),
                    json.dumps({"8": value})):
            got = conn.execute("SELECT mkt_field_extract(?, '7'), json_extract(?, '$.\"7\"')", (doc, doc)).fetchone()
            assert got[0] == got[1], (doc, got)
