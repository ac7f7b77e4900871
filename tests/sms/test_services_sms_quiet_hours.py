"""SMS quiet hours on a fixed clock: the built-in table's rules (US federal and state, France with
its public holidays), several zones and unknown zones failing closed, the gate holding campaign
messages and releasing them once, charged once; the operator's switch and table."""

from __future__ import annotations

import logging
import sqlite3
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from marketing_cli import jobs
from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.sms import campaigns, gate, messages, places, quiet_hours, schedule, stats
from marketing_cli.services.sms import providers as sms_providers
from tests import factories as f

FLORIDA, IDAHO, TOLL_FREE, TEXAS, CONNECTICUT = "+13055550100", "+12085550100", "+18005550100", "+15125550100", \
    "+12035550100"
FRANCE, LONDON = "+33612345678", "+442071234567"
SYDNEY = "+61291234567"  # AU: a rate, no rows of its own; 08:00-21:00 AEDT is 21:00-10:00 UTC in December


class Clock:
    """clock.utcnow() fixed at a moment that the test moves."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.moment = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
        monkeypatch.setattr(clock, "utcnow", lambda: self.moment)

    def set(self, text: str) -> None:
        self.moment = clock.parse_ts(text)


@pytest.fixture(autouse=True)
def _built_in_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(quiet_hours.TABLE_ENV, raising=False)  # the suite's default table has no rules


@pytest.fixture
def fixed(monkeypatch: pytest.MonkeyPatch) -> Clock:
    return Clock(monkeypatch)


def verdict(number: str, at: str) -> quiet_hours.Verdict:
    return quiet_hours.verdict(places.place_of(number), clock.parse_ts(at))


def ts(v: datetime | None) -> str | None:
    return None if v is None else v.strftime("%Y-%m-%dT%H:%M:%SZ")


# --- the rules, on their own -------------------------------------------------------------------

def test_a_florida_number_at_2030_local_time_is_held_until_0800_the_next_morning() -> None:
    v = verdict(FLORIDA, "2026-12-02T01:30:00Z")  # Tuesday 20:30 in Miami (EST)
    assert (v.open, ts(v.until)) == (False, "2026-12-02T13:00:00Z")  # Wednesday 08:00 EST
    assert v.reason == "quiet hours: US-FL 08:00-20:00 America/New_York"
    assert verdict(FLORIDA, "2026-12-02T00:59:00Z").open  # 19:59: still open, until 20:00
    assert ts(verdict(FLORIDA, "2026-12-02T00:59:00Z").until) == "2026-12-02T01:00:00Z"


def test_a_number_in_two_zones_gets_only_the_hours_allowed_in_both() -> None:
    place = places.place_of(IDAHO)
    assert place.zones == ("America/Boise", "America/Los_Angeles") and place.zone_known
    # 07:30 in Los Angeles is 08:30 in Boise: Boise may, Los Angeles may not.
    v = verdict(IDAHO, "2026-12-02T15:30:00Z")
    assert (v.open, ts(v.until)) == (False, "2026-12-02T16:00:00Z")
    assert v.reason == "quiet hours: US 08:00-21:00 America/Los_Angeles"
    # 20:30 in Los Angeles is 21:30 in Boise: the other way round.
    v = verdict(IDAHO, "2026-12-03T04:30:00Z")
    assert (v.open, ts(v.until)) == (False, "2026-12-03T16:00:00Z")
    assert v.reason == "quiet hours: US 08:00-21:00 America/Boise"
    v = verdict(IDAHO, "2026-12-02T16:00:00Z")  # 08:00 LA, 09:00 Boise: both may, until 21:00 Boise
    assert (v.open, ts(v.until)) == (True, "2026-12-03T04:00:00Z")


def test_a_french_number_is_held_from_sunday_to_monday_0800() -> None:
    v = verdict(FRANCE, "2026-12-06T10:00:00Z")  # Sunday 11:00 in Paris
    assert (v.open, ts(v.until)) == (False, "2026-12-07T07:00:00Z")  # Monday 08:00 CET
    assert v.reason == "quiet hours: FR closed on Sunday Europe/Paris"
    v = verdict(FRANCE, "2026-12-05T21:30:00Z")  # Saturday 22:30: past 22:00, and Sunday is closed
    assert (v.open, ts(v.until)) == (False, "2026-12-07T07:00:00Z")
    assert verdict(FRANCE, "2026-12-05T20:59:00Z").open  # Saturday 21:59


@pytest.mark.parametrize(("at", "opens", "why"), [
    ("2026-05-14T10:00:00Z", "2026-05-15T06:00:00Z", "2026-05-14 (Ascension)"),           # Ascension, a Thursday
    ("2026-05-25T10:00:00Z", "2026-05-26T06:00:00Z", "2026-05-25 (Lundi de Pentecôte (Whit Monday))"),
    ("2027-03-29T10:00:00Z", "2027-03-30T06:00:00Z", "2027-03-29 (Lundi de Pâques (Easter Monday))"),
    ("2030-04-22T10:00:00Z", "2030-04-23T06:00:00Z", "2030-04-22 (Lundi de Pâques (Easter Monday))"),
    ("2026-07-14T10:00:00Z", "2026-07-15T06:00:00Z", "2026-07-14 (Fête nationale)"),     # a fixed date
    ("2026-11-11T10:00:00Z", "2026-11-12T07:00:00Z", "2026-11-11 (Armistice 1918)"),
])
def test_french_public_holidays_are_computed_from_rules_not_listed_by_year(at: str, opens: str, why: str) -> None:
    v = verdict(FRANCE, at)
    assert (v.open, ts(v.until)) == (False, opens)
    assert v.reason == f"quiet hours: FR closed on {why} Europe/Paris"


def test_a_holiday_on_saturday_holds_until_monday() -> None:
    v = verdict(FRANCE, "2026-08-15T09:00:00Z")  # Assomption, a Saturday; then Sunday
    assert (v.open, ts(v.until)) == (False, "2026-08-17T06:00:00Z")


def test_an_unknown_zone_gets_the_hours_allowed_everywhere_in_its_country() -> None:
    place = places.place_of(TOLL_FREE)
    assert (place.country, place.region, place.zone_known) == ("US", None, False)
    assert {"America/New_York", "Pacific/Honolulu", "America/Anchorage"} <= set(place.zones)
    # Derived, not written down: CT's 09:00 in Honolulu to Florida's 20:00 in New York, i.e.
    # 14:00-20:00 Eastern (winter) on a weekday.
    v = verdict(TOLL_FREE, "2026-12-02T18:59:00Z")  # 13:59 EST
    assert (v.open, ts(v.until)) == (False, "2026-12-02T19:00:00Z")
    assert v.reason.endswith("(time zone unknown: every US zone counts)")
    v = verdict(TOLL_FREE, "2026-12-02T19:00:00Z")  # 14:00 EST
    assert (v.open, ts(v.until)) == (True, "2026-12-03T01:00:00Z")  # 20:00 EST
    # Sunday: Texas' noon in Honolulu is 17:00 Eastern.
    v = verdict(TOLL_FREE, "2026-12-06T19:30:00Z")
    assert (v.open, ts(v.until)) == (False, "2026-12-06T22:00:00Z")


def test_etc_unknown_fails_closed_to_the_country_window(monkeypatch: pytest.MonkeyPatch) -> None:
    from phonenumbers import tzdata

    data = dict(tzdata.TIMEZONE_DATA)
    data["1305"] = ("Etc/Unknown",)
    monkeypatch.setattr(tzdata, "TIMEZONE_DATA", data)
    monkeypatch.setattr(places, "_PLACES", {})
    place = places.place_of("+13055550177")
    assert (place.region, place.zone_known) == ("US-FL", False)
    assert set(place.zones) == set(places.country_zones("US"))
    v = quiet_hours.verdict(place, clock.parse_ts("2026-12-02T18:00:00Z"))  # 13:00 EST: 08:00 in Honolulu
    assert (v.open, ts(v.until)) == (True, "2026-12-03T01:00:00Z")  # Florida's 20:00 in New York
    assert not quiet_hours.verdict(place, clock.parse_ts("2026-12-02T17:59:00Z")).open


@pytest.mark.parametrize(("number", "at", "open_", "until"), [
    (TEXAS, "2026-12-06T17:59:00Z", False, "2026-12-06T18:00:00Z"),     # Sunday 11:59 in Austin: noon on Sundays
    (TEXAS, "2026-12-05T14:59:00Z", False, "2026-12-05T15:00:00Z"),     # Saturday 08:59: 09:00 the rest of the week
    (TEXAS, "2026-12-06T18:00:00Z", True, "2026-12-07T03:00:00Z"),
    (CONNECTICUT, "2026-12-02T13:30:00Z", False, "2026-12-02T14:00:00Z"),  # 08:30 in Hartford: 09:00
    (CONNECTICUT, "2026-12-03T01:00:00Z", False, "2026-12-03T14:00:00Z"),  # 20:00 in Hartford: closed
    ("+14055550100", "2026-12-03T02:30:00Z", False, "2026-12-03T14:00:00Z"),  # Oklahoma 20:30 CST
    (LONDON, "2026-12-06T03:00:00Z", False, "2026-12-06T08:00:00Z"),     # no rule for GB: the default, 08:00-21:00
    (SYDNEY, "2026-12-06T03:00:00Z", True, "2026-12-06T10:00:00Z"),      # 14:00 in Sydney: open until 21:00
])
def test_state_rules(number: str, at: str, open_: bool, until: str | None) -> None:
    v = verdict(number, at)
    assert (v.open, ts(v.until)) == (open_, until)


def test_a_dst_change_moves_the_window_with_local_time() -> None:
    # Florida 08:00 is 13:00 UTC in winter and 12:00 UTC in summer (DST began 2026-03-08).
    assert ts(verdict(FLORIDA, "2026-03-07T02:00:00Z").until) == "2026-03-07T13:00:00Z"
    assert ts(verdict(FLORIDA, "2026-03-09T02:00:00Z").until) == "2026-03-09T12:00:00Z"


# --- the table is data an operator can replace -------------------------------------------------

def test_the_built_in_table_cites_a_source_for_every_rule() -> None:
    table = quiet_hours.current_table()
    assert table.origin == "built-in"
    assert {"US", "US-FL", "US-OK", "US-MD", "US-MS", "US-WA", "US-CT", "US-TX", "FR"} <= set(table.by_region)
    assert all(rule.source for rule in table.rules)
    assert any("64.1200(c)(1)" in r.source for r in table.by_region["US"])


def test_an_operator_table_replaces_the_built_in_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = tmp_path / "quiet.csv"
    mine.write_text("region,days,hours,source\nUS,Mon-Fri,10:00-13:00 14:00-18:00,our counsel\n", encoding="utf-8")
    monkeypatch.setenv(quiet_hours.TABLE_ENV, str(mine))
    v = verdict(FLORIDA, "2026-12-02T18:30:00Z")  # Wednesday 13:30 EST: the lunch break
    assert (v.open, ts(v.until)) == (False, "2026-12-02T19:00:00Z")
    assert v.reason == "quiet hours: US 10:00-13:00 14:00-18:00 America/New_York"
    assert ts(verdict(FLORIDA, "2026-12-05T15:00:00Z").until) == "2026-12-07T15:00:00Z"  # Saturday: Monday 10:00
    assert verdict(FRANCE, "2026-12-06T10:00:00Z").open  # FR has no rows in this table
    mine.write_text("region,days,hours,source\n", encoding="utf-8")  # an edit is read without a restart
    assert verdict(FLORIDA, "2026-12-02T18:30:00Z").open


SINGAPORE = "+6591234567"  # no rows of its own: a text went out there at 02:00 local time


def test_where_the_law_is_silent_the_default_row_holds_the_night() -> None:
    """`*`: every country without rows of its own (neither the country nor a subdivision)."""
    v = verdict(SINGAPORE, "2026-12-02T18:00:00Z")  # 02:00 in Singapore
    assert (v.open, ts(v.until)) == (False, "2026-12-03T00:00:00Z")  # 08:00 there
    assert v.reason == "quiet hours: the default (*) 08:00-21:00 Asia/Singapore"
    assert verdict(SINGAPORE, "2026-12-03T02:00:00Z").open  # 10:00 there
    assert [r.region for r in quiet_hours.current_table().rules].count("*") == 1
    # A country with rows keeps them: France closed on Sunday, whatever the default says.
    assert not verdict(FRANCE, "2026-12-06T10:00:00Z").open
    assert "FR closed on Sunday" in verdict(FRANCE, "2026-12-06T10:00:00Z").reason


def test_the_default_row_is_data_an_operator_replaces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = tmp_path / "quiet.csv"
    mine.write_text("region,days,hours,source\n*,Mon-Sun,10:00-18:00,our counsel\n", encoding="utf-8")
    monkeypatch.setenv(quiet_hours.TABLE_ENV, str(mine))
    assert ts(verdict(SINGAPORE, "2026-12-03T01:00:00Z").until) == "2026-12-03T02:00:00Z"  # 09:00: held to 10:00
    mine.write_text("region,days,hours,source\nUS,Mon-Sun,08:00-21:00,federal\n", encoding="utf-8")
    assert verdict(SINGAPORE, "2026-12-02T18:00:00Z").open  # no * row: no quiet hours where no row applies


@pytest.mark.parametrize(("text", "message"), [
    ("days,hours\n", "first row must be the header"),
    ("region,days,hours\nUSA,Mon,08:00-20:00\n", "line 2: 'USA' is not a region"),
    ("region,days,hours\nUS,Funday,08:00-20:00\n", "line 2: 'Funday' is not weekdays"),
    ("region,days,hours\nUS,Mon,20:00-08:00\n", "line 2: '20:00-08:00' is not closed or HH:MM-HH:MM"),
    ("region,days,hours\nUS,Mon,8-20\n", "line 2: '8-20' is not closed"),
    ("region,days,hours\nFR,02-30,closed\n", "line 2: '02-30' is not a day of the year"),
])
def test_a_broken_table_is_refused_with_its_line(text: str, message: str) -> None:
    with pytest.raises(MktError) as err:
        quiet_hours.parse_table(text, "mine.csv")
    assert err.value.status == 400 and message in err.value.message


def test_an_unreadable_operator_table_stops_sending(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(quiet_hours.TABLE_ENV, str(tmp_path / "missing.csv"))
    with pytest.raises(MktError) as err:
        quiet_hours.current_table()
    assert err.value.status == 500 and "MKT_SMS_QUIET_HOURS" in err.value.message


# --- the gate on campaigns -----------------------------------------------------------------------

@pytest.fixture
def ws(conn: sqlite3.Connection, workspace: dict[str, Any]) -> int:
    f.sms_ready(conn, workspace["id"])
    return workspace["id"]


def start(conn: sqlite3.Connection, ws: int, phones: list[str]) -> dict[str, Any]:
    f.sms_contacts(conn, ws, phones)
    campaign = f.sms_campaign(conn, ws, message="Our autumn sale starts today. Reply STOP to opt out.")
    schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})
    assert jobs.run_due(conn) == {"processed": 1, "failed": 0}
    return campaign


def rows(conn: sqlite3.Connection, campaign_id: str) -> dict[str, tuple[Any, ...]]:
    return {r[0]: tuple(r[1:]) for r in conn.execute(
        "SELECT phone, status, held_until, held_reason FROM sms_messages WHERE campaign_id = ?", (campaign_id,))}


def ledger(conn: sqlite3.Connection, campaign_id: str) -> list[tuple[str, Decimal]]:
    return [(r[0], Decimal(r[1])) for r in conn.execute(
        "SELECT kind, amount FROM sms_ledger WHERE campaign_id = ? ORDER BY id", (campaign_id,))]


def test_a_held_florida_text_leaves_at_0800_and_is_sent_once_and_charged_once(
        conn: sqlite3.Connection, ws: int, fixed: Clock) -> None:
    fixed.set("2026-12-02T01:30:00Z")  # 20:30 in Miami
    campaign = start(conn, ws, [FLORIDA, SYDNEY])
    cid = campaign["id"]
    assert rows(conn, cid) == {
        FLORIDA: ("held", "2026-12-02T13:00:00.000Z", "quiet hours: US-FL 08:00-20:00 America/New_York"),
        SYDNEY: ("sent", None, None)}
    charged = ledger(conn, cid)
    assert [k for k, _ in charged] == ["charge"]  # both charged once, at expansion
    view = campaigns.get_campaign(conn, ws, cid)
    assert view["status"] == "QUEUED"
    assert view["quiet_hours"] == {"held": 1, "next_release_at": "2026-12-02T13:00:00.000Z"}
    assert stats.campaign_statistics(conn, ws, cid)["quiet_hours"]["held"] == 1
    queued = jobs.list_jobs(conn, status="queued")
    assert [(j["type"], j["run_at"]) for j in queued] == [("sms.expand", "2026-12-02T13:00:00.000Z")]
    assert jobs.run_due(conn) == {"processed": 0, "failed": 0}  # not due before 08:00
    fixed.set("2026-12-02T12:59:59Z")
    assert jobs.run_due(conn) == {"processed": 0, "failed": 0}
    fixed.set("2026-12-02T13:00:00Z")
    assert jobs.run_due(conn) == {"processed": 1, "failed": 0}
    assert rows(conn, cid)[FLORIDA] == ("sent", "2026-12-02T13:00:00.000Z",
                                        "quiet hours: US-FL 08:00-20:00 America/New_York")  # the record stays
    outbox = conn.execute("SELECT recipient, created_at FROM sms_outbox WHERE campaign_id = ?", (cid,)).fetchall()
    assert sorted(r[0] for r in outbox) == [FLORIDA, SYDNEY]
    assert ledger(conn, cid) == charged  # no second charge, no refund
    final = campaigns.get_campaign(conn, ws, cid)
    assert final["status"] == "COMPLETED" and final["statistics"]["sent"] == 2
    assert final["quiet_hours"] == {"held": 0, "next_release_at": None}
    assert jobs.run_due(conn) == {"processed": 0, "failed": 0}


def test_a_208_number_gets_its_text_only_when_boise_and_los_angeles_both_allow(
        conn: sqlite3.Connection, ws: int, fixed: Clock) -> None:
    fixed.set("2026-12-02T15:30:00Z")  # 08:30 in Boise, 07:30 in Los Angeles
    cid = start(conn, ws, [IDAHO])["id"]
    assert rows(conn, cid)[IDAHO][:2] == ("held", "2026-12-02T16:00:00.000Z")
    fixed.set("2026-12-02T16:00:00Z")
    jobs.run_due(conn)
    assert rows(conn, cid)[IDAHO][0] == "sent"


def test_a_french_text_on_sunday_waits_for_monday_0800(conn: sqlite3.Connection, ws: int, fixed: Clock) -> None:
    fixed.set("2026-12-06T10:00:00Z")
    cid = start(conn, ws, [FRANCE])["id"]
    assert rows(conn, cid)[FRANCE] == ("held", "2026-12-07T07:00:00.000Z",
                                       "quiet hours: FR closed on Sunday Europe/Paris")
    fixed.set("2026-12-07T07:00:00Z")
    jobs.run_due(conn)
    assert rows(conn, cid)[FRANCE][0] == "sent"
    assert [k for k, _ in ledger(conn, cid)] == ["charge"]


def test_an_unknown_zone_waits_for_the_country_wide_window(conn: sqlite3.Connection, ws: int, fixed: Clock) -> None:
    fixed.set("2026-12-02T16:00:00Z")  # 11:00 EST: open for New York, not for every US zone
    cid = start(conn, ws, [TOLL_FREE, "+12125550100"])["id"]
    got = rows(conn, cid)
    assert got["+12125550100"][0] == "sent"
    assert got[TOLL_FREE][:2] == ("held", "2026-12-02T19:00:00.000Z")  # 14:00 EST
    assert got[TOLL_FREE][2].endswith("(time zone unknown: every US zone counts)")


def test_cancelling_refunds_held_messages(conn: sqlite3.Connection, ws: int, fixed: Clock) -> None:
    fixed.set("2026-12-02T01:30:00Z")
    cid = start(conn, ws, [FLORIDA])["id"]
    result = campaigns.cancel_campaign(conn, ws, cid)
    assert (result["status"], result["refunded_messages"]) == ("CANCELLED", 1)
    assert sum(a for _, a in ledger(conn, cid)) == 0
    assert rows(conn, cid)[FLORIDA][0] == "cancelled"
    assert jobs.list_jobs(conn, status="queued") == []


def test_a_batch_is_gated_set_based_one_verdict_per_place(conn: sqlite3.Connection, ws: int, fixed: Clock,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    real = quiet_hours.verdict
    monkeypatch.setattr(quiet_hours, "verdict", lambda place, now, table=None: calls.append(place) or real(place, now, table))
    fixed.set("2026-12-02T01:30:00Z")
    phones = [f"+1305555{n:04d}" for n in range(40)] + [f"+1415555{n:04d}" for n in range(40)]
    cid = start(conn, ws, phones)["id"]
    statuses = {p: s for p, (s, _, _) in rows(conn, cid).items()}
    assert {statuses[p] for p in phones[:40]} == {"held"} and {statuses[p] for p in phones[40:]} == {"sent"}
    assert len(calls) == 2  # Miami and San Francisco: one verdict each, not one per message


def test_twilio_stops_retrying_when_the_window_closes_and_the_message_goes_back_in_line(
        conn: sqlite3.Connection, ws: int, fixed: Clock) -> None:
    provider = sms_providers.TwilioProvider(f.TWILIO_SID, f.TWILIO_TOKEN, "http://127.0.0.1:9", None)
    message = sms_providers.Outgoing(1, "c" * 24, "ACME", FLORIDA, "Hi", 1, closes_at="2026-12-02T12:00:00.000Z")
    fixed.set("2026-12-02T12:00:00Z")
    [receipt] = provider.send(conn, ws, [message])
    assert receipt.held and not receipt.accepted  # never tried: no request went out


# --- the operator's switch -----------------------------------------------------------------------

def test_quiet_hours_are_on_by_default_and_off_needs_the_override(conn: sqlite3.Connection, ws: int,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    assert gate.show_settings(conn, ws)["enabled"] is True
    with pytest.raises(MktError) as err:
        gate.set_enabled(conn, ws, False)
    assert err.value.status == 400 and "--override-quiet-hours" in err.value.message
    assert gate.enabled(conn, ws) and gate.operator_log(conn, ws) == []
    with caplog.at_level(logging.WARNING, logger="mkt.sms"):
        shown = gate.set_enabled(conn, ws, False, override=True)
    assert shown["enabled"] is False and shown["off_since"]
    assert "SMS quiet hours turned OFF" in caplog.text
    [entry] = gate.operator_log(conn, ws)
    assert entry["action"] == "sms.quiet_hours.off" and entry["actor"]
    gate.set_enabled(conn, ws, True)
    assert gate.enabled(conn, ws)
    assert [e["action"] for e in gate.operator_log(conn, ws)] == ["sms.quiet_hours.on", "sms.quiet_hours.off"]


def test_with_quiet_hours_off_a_text_goes_at_night(conn: sqlite3.Connection, ws: int, fixed: Clock) -> None:
    gate.set_enabled(conn, ws, False, override=True)
    fixed.set("2026-12-02T06:00:00Z")  # 01:00 in Miami
    cid = start(conn, ws, [FLORIDA])["id"]
    assert rows(conn, cid)[FLORIDA][0] == "sent"


def test_the_messages_listing_filters_held(conn: sqlite3.Connection, ws: int, fixed: Clock) -> None:
    fixed.set("2026-12-02T01:30:00Z")
    cid = start(conn, ws, [FLORIDA, SYDNEY])["id"]
    listed = messages.list_messages(conn, ws, cid, status="HELD")
    [m] = listed["messages"]
    assert (m["phone"], m["status"], m["held_until"]) == (FLORIDA, "held", "2026-12-02T13:00:00.000Z")
    assert m["held_reason"] == "quiet hours: US-FL 08:00-20:00 America/New_York"


def test_a_window_longer_than_the_horizon_holds_to_its_end() -> None:
    table = quiet_hours.parse_table("region,days,hours\nUS,Mon-Sun,closed\n", "closed.csv")
    now = datetime(2026, 12, 2, 12, tzinfo=UTC)
    v = quiet_hours.verdict(places.place_of(FLORIDA), now, table)
    assert not v.open and v.until is not None and v.until - now > timedelta(days=10)


def test_through_twilio_a_held_number_is_not_requested_until_its_window_opens(
        conn: sqlite3.Connection, ws: int, fixed: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sms_providers, "BACKOFF_SECONDS", 0.01)
    fixed.set("2026-12-02T01:30:00Z")
    with f.TwilioStandIn() as server:
        sms_providers.set_provider(conn, ws, "twilio", account_sid=f.TWILIO_SID, auth_token=f.TWILIO_TOKEN,
                                   base_url=server.base_url)
        cid = start(conn, ws, [FLORIDA, SYDNEY])["id"]
        assert [r["form"]["To"] for r in server.received] == [SYDNEY]
        fixed.set("2026-12-02T13:00:00Z")
        assert jobs.run_due(conn) == {"processed": 1, "failed": 0}
        assert [r["form"]["To"] for r in server.received] == [SYDNEY, FLORIDA]
        fixed.set("2026-12-03T13:00:00Z")
        assert jobs.run_due(conn) == {"processed": 0, "failed": 0}
    assert {p: s for p, (s, _, _) in rows(conn, cid).items()} == {FLORIDA: "sent", SYDNEY: "sent"}
    assert [k for k, _ in ledger(conn, cid)] == ["charge"]
    assert campaigns.get_campaign(conn, ws, cid)["status"] == "COMPLETED"


def test_a_window_that_closes_during_twilio_retries_puts_the_message_back_and_the_gate_holds_it(
        conn: sqlite3.Connection, ws: int, fixed: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    import time as time_module

    monkeypatch.setattr(sms_providers, "BACKOFF_SECONDS", 0.01)
    fixed.set("2026-12-02T00:59:59Z")  # 19:59:59 in Miami: one second of Florida's window left
    real_sleep = time_module.sleep

    def sleep_and_tick(seconds: float) -> None:  # a backoff that outlasts the window
        fixed.set("2026-12-02T01:00:30Z")
        real_sleep(min(seconds, 0.01))

    monkeypatch.setattr(time_module, "sleep", sleep_and_tick)
    with f.TwilioStandIn({FLORIDA: [(503, 20500), (201, None)]}) as server:
        sms_providers.set_provider(conn, ws, "twilio", account_sid=f.TWILIO_SID, auth_token=f.TWILIO_TOKEN,
                                   base_url=server.base_url)
        cid = start(conn, ws, [FLORIDA])["id"]
        assert len(server.received) == 1  # the 503; the retry came after 20:00 and was not made
    assert rows(conn, cid)[FLORIDA] == ("held", "2026-12-02T13:00:00.000Z",
                                        "quiet hours: US-FL 08:00-20:00 America/New_York")
    assert [k for k, _ in ledger(conn, cid)] == ["charge"]  # charged once, not refunded
