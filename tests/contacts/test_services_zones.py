"""A contact's time zone (services/contacts/zones.py): the `timezone` field, the phone
number's zone when its zones agree, the city of the last open or click, the workspace's."""

from __future__ import annotations

import io
import sqlite3
from datetime import datetime, timezone
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.services.contacts import bulk, records, zones
from marketing_cli.services.contacts.segment_filters import Compiled
from tests import factories as f

WINTER = datetime(2027, 1, 12, 14, tzinfo=timezone.utc)
SUMMER = datetime(2027, 7, 12, 14, tzinfo=timezone.utc)


@pytest.fixture
def ws(conn: sqlite3.Connection, workspace: dict[str, Any]) -> int:
    f.field(conn, workspace["id"], "phone_number")
    f.field(conn, workspace["id"], "timezone")
    return workspace["id"]


def _zones_of(conn: sqlite3.Connection, ws: int, at: datetime) -> dict[str, tuple[str, str]]:
    with zones.Zones(conn, ws, at) as found:
        found.resolve()
        query = Compiled(f"SELECT c.email, {found.columns('c')} FROM contacts c{found.join('c')}"
                         " WHERE c.workspace_id = ?", [ws])
        return {r[0]: (r[1], r[2]) for r in conn.execute(*found.select(query, "a.email"))}


@pytest.mark.parametrize(("number", "expected"), [
    ("+12125550100", "America/New_York"),   # +1 212: New York alone
    ("+12085550100", None),                 # +1 208: Boise and Los Angeles, different offsets
    ("+12082015555", "America/Denver"),     # +1 208 201: a longer prefix of its own, Denver alone
    ("+18005550100", None),                 # +1 800: 42 zones
    ("+80012345678", None),                 # Etc/Unknown
    ("+33612345678", "Europe/Paris"),
    ("+442079460000", "Europe/London"),
    ("+61412345678", None),                 # Australian mobiles: 8 zones
])
def test_the_zone_of_a_phone_number(number: str, expected: str | None) -> None:
    assert zones.phone_zone(number, WINTER) == expected


def test_resolution_order_and_source_in_sql(conn: sqlite3.Connection, ws: int) -> None:
    f.contact(conn, ws, "field@example.com", timezone="Asia/Tokyo", phone_number="+12125550100")
    f.contact(conn, ws, "ny@example.com", phone_number="+12125550101")
    f.contact(conn, ws, "denver@example.com", phone_number="+12082015555")
    f.contact(conn, ws, "boise@example.com", phone_number="+12085550100")
    located = f.contact(conn, ws, "located@example.com", phone_number="+18005550100")
    f.contact(conn, ws, "nothing@example.com")
    zones.remember_location(conn, located["id"], "Europe/Berlin")
    conn.execute("UPDATE workspaces SET timezone = 'America/Chicago' WHERE id = ?", (ws,))
    assert _zones_of(conn, ws, WINTER) == {
        "field@example.com": ("Asia/Tokyo", "field"),
        "ny@example.com": ("America/New_York", "phone"),
        "denver@example.com": ("America/Denver", "phone"),
        "boise@example.com": ("America/Chicago", "workspace"),
        "located@example.com": ("Europe/Berlin", "location"),
        "nothing@example.com": ("America/Chicago", "workspace"),
    }


def test_many_prefixes_past_the_seek_budget_take_one_pass(conn: sqlite3.Connection, ws: int,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zones, "_SEEKS", 1)
    for i, number in enumerate(("+12082015555", "+12082155555", "+12085550100", "+12125550100")):
        f.contact(conn, ws, f"c{i}@example.com", phone_number=number)
    found = _zones_of(conn, ws, WINTER)
    assert found["c0@example.com"] == ("America/Denver", "phone")
    assert found["c2@example.com"] == ("UTC", "workspace")
    assert found["c3@example.com"] == ("America/New_York", "phone")


@pytest.mark.parametrize("value", ["Mars/Base", "Etc/Unknown", "UTC+2", "Paris"])
def test_an_invalid_timezone_is_refused_on_create_and_update(conn: sqlite3.Connection, ws: int, value: str) -> None:
    message = (f"Field 'timezone' must be an IANA time zone name (for example Europe/Paris or America/New_York), "
               f"not '{value}'.")
    with pytest.raises(MktError) as err:
        records.upsert_contact(conn, ws, {"email_address": "a@example.com", "fields": {"timezone": value}})
    assert err.value.status == 400 and message in (err.value.message, err.value.detail)
    assert conn.execute("SELECT count(*) FROM contacts").fetchone()[0] == 0
    f.contact(conn, ws, "b@example.com", timezone="Europe/Paris")
    with pytest.raises(MktError):
        records.upsert_contact(conn, ws, {"email_address": "b@example.com", "fields": {"timezone": value},
                                          "partial_update": True})
    data = conn.execute("SELECT data FROM contacts WHERE email = 'b@example.com'").fetchone()[0]
    assert "Europe/Paris" in data


def test_a_timezone_is_stored_in_its_iana_spelling_and_checked_on_import(conn: sqlite3.Connection, ws: int) -> None:
    made = f.contact(conn, ws, "a@example.com", timezone=" america/new_york ")
    assert made["fields"]["timezone"] == "America/New_York" if "fields" in made else True
    result = bulk.import_contacts(conn, ws, io.StringIO(
        "email_address,timezone\nok@example.com,Europe/Paris\nbad@example.com,Mars/Base\n"))
    assert [e["line"] for e in result["errors"]] == [3]
    assert "must be an IANA time zone name" in result["errors"][0]["reason"]
    assert conn.execute("SELECT count(*) FROM contacts WHERE email = 'bad@example.com'").fetchone()[0] == 0


def test_the_timezone_field_must_be_text(conn: sqlite3.Connection, workspace: dict[str, Any]) -> None:
    with pytest.raises(MktError) as err:
        f.field(conn, workspace["id"], "timezone", "NUMBER")
    assert err.value.detail == "The timezone field must be of type TEXT."


def test_the_workspace_zone_is_a_bound_parameter_and_the_audience_query_keeps_its_filter(
        conn: sqlite3.Connection, ws: int) -> None:
    from datetime import date

    vip = f.tag(conn, ws, "vip")
    f.contact(conn, ws, "tagged@example.com", phone_number="+12125550100", tags=[vip])
    f.contact(conn, ws, "other@example.com", phone_number="+33612345678")
    f.contact(conn, ws, "nophone@example.com", tags=[vip])
    conn.execute("UPDATE workspaces SET timezone = 'America/Chicago' WHERE id = ?", (ws,))
    with zones.Zones(conn, ws, WINTER) as found:
        found.resolve()
        sql, params = found.select(Compiled("SELECT c.id FROM contacts c WHERE 0", []), "a.id")
        assert "America/Chicago" not in sql and params == ["America/Chicago"]
    plan = zones.zone_plan(conn, ws, {"type": "TAGS", "include_tag_ids": [vip]}, "email", date(2027, 1, 12), "09:00",
                           "next_day", WINTER)
    assert {p["zone"]: p["recipients"] for p in plan} == {"America/New_York": 1, "America/Chicago": 1}


def test_the_kept_candidates_follow_phone_and_field_writes(conn: sqlite3.Connection, ws: int) -> None:
    """A contact keeps its field value and its phone's zone list (schema step 23); writing its
    phone or data marks them stale (the trigger) and the next resolution reads them anew."""
    f.contact(conn, ws, "a@example.com", phone_number="+12125550100")
    f.contact(conn, ws, "b@example.com", timezone="Asia/Tokyo")
    assert _zones_of(conn, ws, WINTER) == {"a@example.com": ("America/New_York", "phone"),
                                           "b@example.com": ("Asia/Tokyo", "field")}
    assert conn.execute("SELECT count(*) FROM contacts WHERE workspace_id = ? AND zone_cached IS NULL",
                        (ws,)).fetchone()[0] == 0
    field_id = conn.execute("SELECT id FROM fields WHERE workspace_id = ? AND merge_tag = 'timezone'",
                            (ws,)).fetchone()[0]
    conn.execute("UPDATE contacts SET phone = '+33612345678' WHERE email = 'a@example.com'")
    conn.execute("UPDATE contacts SET data = ? WHERE email = 'b@example.com'", (f'{{"{field_id}": "Europe/Rome"}}',))
    assert conn.execute("SELECT count(*) FROM contacts WHERE workspace_id = ? AND zone_cached IS NULL",
                        (ws,)).fetchone()[0] == 2
    assert _zones_of(conn, ws, WINTER) == {"a@example.com": ("Europe/Paris", "phone"),
                                           "b@example.com": ("Europe/Rome", "field")}

