"""A contact's time zone (services/contacts/zones.py): the `timezone` field, the phone
number's zone when its zones agree, the city of the last open or click, the workspace's."""

from __future__ import annotations

import io
import sqlite3
from datetime import datetime, timezone
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.services.contacts import bulk, local_time, phone_zones, records, zone_columns, zones
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
    assert phone_zones.phone_zone(number, WINTER) == expected


def test_resolution_order_and_source_in_sql(conn: sqlite3.Connection, ws: int) -> None:
    f.contact(conn, ws, "field@example.com", timezone="Asia/Tokyo", phone_number="+12125550100")
    f.contact(conn, ws, "ny@example.com", phone_number="+12125550101")
    f.contact(conn, ws, "denver@example.com", phone_number="+12082015555")
    f.contact(conn, ws, "boise@example.com", phone_number="+12085550100")
    located = f.contact(conn, ws, "located@example.com", phone_number="+18005550100")
    f.contact(conn, ws, "nothing@example.com")
    zone_columns.remember_location(conn, located["id"], "Europe/Berlin")
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
    text = "email_address,timezone\nok@example.com,Europe/Paris\nbad@example.com,Mars/Base\n"
    result = bulk.import_contacts(conn, ws, io.StringIO(text), bad_cells="reject-row")
    assert [e["line"] for e in result["errors"]] == [3]
    assert "must be an IANA time zone name" in result["errors"][0]["reason"]
    assert conn.execute("SELECT count(*) FROM contacts WHERE email = 'bad@example.com'").fetchone()[0] == 0
    result = bulk.import_contacts(conn, ws, io.StringIO(text))  # by default the zone is left out
    assert [c["line"] for c in result["left_out"]] == [3] and result["created"] == 1
    assert conn.execute("SELECT zone_field FROM contacts WHERE email = 'bad@example.com'").fetchone()[0] is None


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
    plan = local_time.zone_plan(conn, ws, {"type": "TAGS", "include_tag_ids": [vip]}, "email", date(2027, 1, 12),
                                "09:00", "next_day", WINTER)
    assert {p["zone"]: p["recipients"] for p in plan} == {"America/New_York": 1, "America/Chicago": 1}


def test_the_kept_candidates_follow_phone_and_field_writes(conn: sqlite3.Connection, ws: int) -> None:
    """A contact keeps its field value and its phone's zone list (schema step 25); writing its
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



# ---------------------------------------------------------------------- kept at write time

def _kept(conn: sqlite3.Connection, ws: int) -> dict[str, tuple[Any, Any]]:
    """Each contact's kept (zone_field, zone_phone_set), by email; asserts none is stale."""
    rows = conn.execute("SELECT email, zone_field, zone_phone_set, zone_cached FROM contacts WHERE workspace_id = ?"
                        " ORDER BY email", (ws,)).fetchall()
    assert [r[0] for r in rows if r[3] is None] == []  # every writer kept them: nothing for the safety net
    return {r[0]: (r[1], r[2]) for r in rows}


def _refreshed(conn: sqlite3.Connection, ws: int) -> dict[str, tuple[Any, Any]]:
    """The same columns as the safety net (a resolution's one UPDATE of stale rows) computes them."""
    conn.execute("UPDATE contacts SET zone_cached = NULL WHERE workspace_id = ?", (ws,))
    with zones.Zones(conn, ws, WINTER) as found:
        found.resolve()
    return _kept(conn, ws)


def _zones_text(conn: sqlite3.Connection, set_id: int | None) -> str | None:
    if set_id is None:
        return None
    return conn.execute("SELECT zones FROM phone_zone_sets WHERE id = ?", (set_id,)).fetchone()[0]


def test_an_import_keeps_the_zone_columns_of_new_and_updated_contacts(conn: sqlite3.Connection, ws: int) -> None:
    f.contact(conn, ws, "old@example.com", phone_number="+33612345678", timezone="Asia/Tokyo")
    result = bulk.import_contacts(conn, ws, io.StringIO(
        "email_address,phone_number,timezone\n"
        "ny@example.com,+12125550100,\n"
        "denver@example.com,+12082015555,\n"
        "boise@example.com,+12085550100,Europe/Rome\n"
        "nophone@example.com,,Europe/Paris\n"
        "old@example.com,+12125550199,\n"))  # an update: the phone changes, the field stays
    assert result["created"] == 4 and result["updated"] == 1
    kept = _kept(conn, ws)
    assert {e: (z, _zones_text(conn, s)) for e, (z, s) in kept.items()} == {
        "boise@example.com": ("Europe/Rome", "America/Boise America/Los_Angeles"),
        "denver@example.com": (None, "America/Denver"),
        "nophone@example.com": ("Europe/Paris", None),
        "ny@example.com": (None, "America/New_York"),
        "old@example.com": ("Asia/Tokyo", "America/New_York"),
    }
    # A second import: a field value only (the phone kept), then a phone only.
    bulk.import_contacts(conn, ws, io.StringIO("email_address,phone_number,timezone\n"
                                               "ny@example.com,,America/Chicago\n"
                                               "nophone@example.com,+33612345678,\n"))
    kept = _kept(conn, ws)
    assert kept["ny@example.com"][0] == "America/Chicago"
    assert _zones_text(conn, kept["ny@example.com"][1]) == "America/New_York"
    assert kept["nophone@example.com"][0] == "Europe/Paris"
    assert _zones_text(conn, kept["nophone@example.com"][1]) == "Europe/Paris"
    assert _refreshed(conn, ws) == kept
    assert _zones_of(conn, ws, WINTER)["denver@example.com"] == ("America/Denver", "phone")


def test_an_import_makes_a_stale_contact_current_only_when_it_knows_both_columns(
        conn: sqlite3.Connection, ws: int) -> None:
    f.contact(conn, ws, "a@example.com", phone_number="+12125550100", timezone="Asia/Tokyo")
    f.contact(conn, ws, "b@example.com", phone_number="+12125550101")
    conn.execute("UPDATE contacts SET zone_cached = NULL, zone_field = NULL, zone_phone_set = NULL"
                 " WHERE workspace_id = ?", (ws,))  # as a database from before step 25 has them
    bulk.import_contacts(conn, ws, io.StringIO("email_address,phone_number,timezone\n"
                                               "a@example.com,+33612345678,\n"   # phone given: current
                                               "b@example.com,,Europe/Rome\n"))  # phone not: stays stale
    rows = {r[0]: tuple(r[1:]) for r in conn.execute(
        "SELECT email, zone_field, zone_cached IS NOT NULL FROM contacts WHERE workspace_id = ?", (ws,))}
    assert rows == {"a@example.com": ("Asia/Tokyo", 1), "b@example.com": ("Europe/Rome", 0)}
    assert _zones_of(conn, ws, WINTER) == {"a@example.com": ("Asia/Tokyo", "field"),
                                           "b@example.com": ("Europe/Rome", "field")}


def test_an_import_of_contacts_without_email_keeps_their_zone_columns(conn: sqlite3.Connection, ws: int) -> None:
    conn.execute("UPDATE workspaces SET allow_contacts_without_email = 1 WHERE id = ?", (ws,))
    bulk.import_contacts(conn, ws, io.StringIO("phone_number,timezone\n+12125550100,\n"))
    bulk.import_contacts(conn, ws, io.StringIO("phone_number,timezone\n+12125550100,Europe/Rome\n"))  # by phone
    row = conn.execute("SELECT zone_field, zone_phone_set, zone_cached FROM contacts WHERE workspace_id = ?",
                       (ws,)).fetchone()
    assert (row[0], _zones_text(conn, row[1])) == ("Europe/Rome", "America/New_York") and row[2] is not None


def test_a_dry_run_import_writes_no_zone_list(conn: sqlite3.Connection, ws: int) -> None:
    before = conn.execute("SELECT count(*) FROM phone_zone_sets").fetchone()[0]
    bulk.import_contacts(conn, ws, io.StringIO("email_address,phone_number\nx@example.com,+61412345678\n"),
                         dry_run=True)
    assert conn.execute("SELECT count(*) FROM phone_zone_sets").fetchone()[0] == before


def test_create_and_upsert_keep_the_zone_columns(conn: sqlite3.Connection, ws: int) -> None:
    records.create_contact(conn, ws, {"status": "SUBSCRIBED", "fields": {
        "email_address": "new@example.com", "phone_number": "+12082015555", "timezone": "Europe/Rome"}})
    f.contact(conn, ws, "up@example.com", phone_number="+12125550100")
    records.upsert_contact(conn, ws, {"email_address": "up@example.com", "phone_number": "+33612345678",
                                      "partial_update": True})
    f.contact(conn, ws, "full@example.com", phone_number="+12125550101", timezone="Asia/Tokyo")
    records.upsert_contact(conn, ws, {"email_address": "full@example.com", "fields": {}})  # full replace
    kept = _kept(conn, ws)
    assert {e: (z, _zones_text(conn, s)) for e, (z, s) in kept.items()} == {
        "full@example.com": (None, None),
        "new@example.com": ("Europe/Rome", "America/Denver"),
        "up@example.com": (None, "Europe/Paris"),
    }
    assert _refreshed(conn, ws) == kept


def test_a_field_set_by_an_automation_keeps_the_zone_columns(conn: sqlite3.Connection, ws: int) -> None:
    f.field(conn, ws, "city")
    made = f.contact(conn, ws, "ann@example.com", phone_number="+12125550100")
    from marketing_cli.services.automations import triggers

    for step in ({"id": "tz", "type": "set_field", "field": "timezone", "value": "Europe/Rome"},
                 {"id": "city", "type": "set_field", "field": "city", "value": "Rome"}):
        flow = f.automation(conn, ws, {"name": f"Flow {step['id']}", "triggers": [{"type": "manual"}],
                                       "steps": [step]})
        triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": made["id"]})
        f.run_automations(conn)
        kept = _kept(conn, ws)
        assert kept["ann@example.com"][0] == "Europe/Rome"
    assert records.get_contact(conn, ws, made["id"])["data"]["city"] == "Rome"
    assert _refreshed(conn, ws) == kept


def test_the_list_ids_are_the_same_on_every_database() -> None:
    assert phone_zones.set_id(("America/New_York",)) == phone_zones.set_id(("America/New_York",))
    assert phone_zones.set_id(("America/New_York",)) != phone_zones.set_id(("America/Boise", "America/Los_Angeles"))
    assert 0 < phone_zones.set_id(("Europe/Paris",)) < 2 ** 56
