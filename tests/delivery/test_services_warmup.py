"""Warm-up of a sending domain (issue 39 section 3; CONTRACT section 11): daily caps per provider
lane held for all the workers together, the most engaged recipients first, what is over today's
cap waiting for tomorrow (the campaign stays SENDING and says why), status and stop, and the
schedule file checked with clear errors."""

from __future__ import annotations

import sqlite3
import threading
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.ids import new_id
from marketing_cli.services.account import billing
from marketing_cli.services.delivery import sender, warmup, warmup_gate
from marketing_cli.services.email import domains, preparation
from marketing_cli.services.email import schedule as email_schedule
from marketing_cli.storage import db
from tests import factories

HTML = '<p>Hi {{contact.first_name|there}}, <a href="{{unsubscribe_url}}">unsubscribe</a></p>'
SCHEDULE = "day,lane,cap\n1,gmail,10\n1,other,15\n2,gmail,20\n3,gmail,1000\n"


@pytest.fixture
def verified_dns(monkeypatch: pytest.MonkeyPatch) -> None:
    from marketing_cli.services.email import dns_check

    monkeypatch.setattr(dns_check, "check_records", lambda records: [
        {"purpose": r["purpose"], "type": r["type"], "host": r["host"], "found": [r["value"]], "verified": True,
         "error": None} for r in records])


class Clock:
    """The clock the test moves: stopped (claims never expire), a day on at a time."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.moment = datetime.fromisoformat("2026-11-28T10:00:00+00:00")
        monkeypatch.setattr(clock, "utcnow", lambda: self.moment)

    def next_day(self) -> None:
        self.moment += timedelta(days=1)


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> Clock:
    return Clock(monkeypatch)


def _contacts(conn: sqlite3.Connection, ws: int, emails: list[str], **columns: str) -> list[str]:
    now = clock.now()
    created = columns.pop("created_at", now)
    ids = [new_id() for _ in emails]
    names = "".join(f", {c}" for c in columns)
    with db.transaction(conn):
        conn.executemany(f"INSERT INTO contacts (id, workspace_id, email, status, data, created_at, updated_at{names})"
                         f" VALUES (?, ?, ?, 'SUBSCRIBED', '{{}}', ?, ?{', ?' * len(columns)})",
                         [(i, ws, e, created, now, *columns.values())
                          for i, e in zip(ids, emails, strict=True)])
    return ids


def _campaign(conn: sqlite3.Connection, ws: int) -> str:
    for resource in ("contacts", "monthly_emails", "hourly_emails"):
        billing.set_allowance(conn, ws, resource, 1000)
    campaign = factories.ready_campaign(conn, ws, html=HTML)
    for d in domains.list_domains(conn, ws):
        domains.verify_domain(conn, ws, d["id"])
    email_schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})
    preparation.preprocess(conn, {"campaign_id": campaign["id"]})
    return campaign["id"]


def _domain_id(conn: sqlite3.Connection, campaign_id: str) -> int:
    domain_id = warmup_gate.domain_of(conn, campaign_id)
    assert domain_id is not None
    return domain_id


def _workers(db_path: Any, campaign_id: str) -> None:
    """The send job and a helper at once, each on its own connection (two workers)."""
    errors: list[BaseException] = []
    ranked = threading.Event()

    def work(handler: Any) -> None:
        conn = db.connect(db_path)
        try:
            if handler is sender.help_send:
                ranked.wait(30)
            handler(conn, {"campaign_id": campaign_id})
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            ranked.set()
            conn.close()

    original = warmup_gate.rank

    def rank_then_go(conn: sqlite3.Connection, cid: str) -> int:
        try:
            return original(conn, cid)
        finally:
            ranked.set()  # (the helper claims once the send job ranked the messages, as _call_helpers does)

    warmup_gate.rank = rank_then_go  # type: ignore[assignment]
    try:
        threads = [threading.Thread(target=work, args=(h,)) for h in (sender.send, sender.help_send)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    finally:
        warmup_gate.rank = original  # type: ignore[assignment]
    assert not errors, errors


def _by_lane(conn: sqlite3.Connection, campaign_id: str) -> dict[tuple[str, str], int]:
    return {(r[0], r[1]): r[2] for r in conn.execute(
        "SELECT coalesce(lane, 'other'), status, count(*) FROM email_messages WHERE campaign_id = ?"
        " GROUP BY coalesce(lane, 'other'), status", (campaign_id,))}


# --- the schedule -----------------------------------------------------------------------------------


def test_the_shipped_schedule_reads_and_says_where_its_numbers_come_from() -> None:
    schedule = warmup.TABLE.shipped()
    assert schedule.days == 14
    assert schedule.caps(1) == {lane: 200 for lane in ("gmail", "yahoo", "microsoft", "apple", "other")}
    assert schedule.caps(14)["gmail"] == 250_000
    text = warmup.BUILT_IN.read_text()
    assert all("adcrux" in line for line in text.splitlines()[8:] if line)  # a source on every row


@pytest.mark.parametrize(("text", "says"), [
    ("day,lane\n1,gmail\n", "line 1: the header must be day,lane,cap"),
    ("day,lane,cap\n1,hotmail,10\n", "line 2: 'hotmail' is not a lane (gmail, yahoo, microsoft, apple, other)"),
    ("day,lane,cap\n0,gmail,10\n", "line 2: day 0 is out of range (1 to 365)"),
    ("day,lane,cap\nfirst,gmail,10\n", "line 2: day 'first' is not a whole number"),
    ("day,lane,cap\n1,gmail,-5\n", "line 2: cap -5 is out of range"),
    ("day,lane,cap\n1,gmail,lots\n", "line 2: cap 'lots' is not a whole number of messages"),
    ("day,lane,cap\n1,gmail,10\n1,gmail,20\n", "day 1 gives the gmail lane two caps"),
    ("day,lane,cap\n", "the schedule has no rows"),
    ("", "no header line"),
])
def test_a_bad_schedule_file_is_refused_with_its_line(text: str, says: str) -> None:
    with pytest.raises(MktError) as caught:
        warmup.parse_schedule(text, "mine.csv")
    assert caught.value.status == 400
    assert says in caught.value.message, caught.value.message


def test_start_status_stop(conn: sqlite3.Connection, workspace: dict[str, Any], frozen: Clock) -> None:
    ws = workspace["id"]
    domain = domains.add_domain(conn, ws, "news.example.com")
    assert warmup.warmup_status(conn, ws, domain["id"])["status"] == "none"
    started = warmup.start_warmup(conn, ws, domain["id"], warmup.parse_schedule(SCHEDULE, "mine.csv"))
    assert (started["status"], started["day"], started["days"], started["origin"]) == ("active", 1, 3, "mine.csv")
    assert started["ends_on"] == "2026-12-01"
    assert {r["lane"]: (r["cap"], r["left"]) for r in started["today"]}["gmail"] == (10, 10)
    assert {r["lane"]: r["cap"] for r in started["today"]}["yahoo"] is None  # missing from the day: no cap
    frozen.next_day()
    assert warmup.warmup_status(conn, ws, domain["id"])["day"] == 2
    stopped = warmup.stop_warmup(conn, ws, domain["id"])
    assert stopped["status"] == "stopped" and stopped["stopped_at"]
    with pytest.raises(MktError) as caught:
        warmup.stop_warmup(conn, ws, domain["id"])
    assert caught.value.status == 409
    frozen.next_day()
    frozen.next_day()
    again = warmup.start_warmup(conn, ws, domain["id"])  # the shipped schedule
    assert (again["status"], again["day"], again["days"], again["origin"]) == ("active", 1, 14, "built-in")
    for _ in range(14):
        frozen.next_day()
    assert warmup.warmup_status(conn, ws, domain["id"])["status"] == "finished"
    with pytest.raises(MktError) as caught:
        warmup.warmup_status(conn, ws, 999999)
    assert caught.value.status == 404


# --- the caps, two workers -------------------------------------------------------------------------------


def test_two_workers_hold_each_lanes_cap_and_the_rest_waits_for_tomorrow(
        conn: sqlite3.Connection, workspace: dict[str, Any], db_path: Any, verified_dns: None, frozen: Clock,
        monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace["id"]
    monkeypatch.setenv("MKT_SEND_CONCURRENCY", "4")
    _contacts(conn, ws, [f"g{i}@gmail.com" for i in range(40)] + [f"o{i}@example.org" for i in range(30)]
              + [f"y{i}@yahoo.com" for i in range(5)])
    campaign_id = _campaign(conn, ws)
    warmup.start_warmup(conn, ws, _domain_id(conn, campaign_id), warmup.parse_schedule(SCHEDULE, "mine.csv"))
    with db.transaction(conn):
        conn.execute("DELETE FROM jobs WHERE type = 'email.send'")  # (the workers below are that job)

    _workers(db_path, campaign_id)
    assert _by_lane(conn, campaign_id) == {("gmail", "delivered"): 10, ("gmail", "queued"): 30,
                                           ("other", "delivered"): 15, ("other", "queued"): 15,
                                           ("yahoo", "delivered"): 5}  # no cap for yahoo that day
    row = conn.execute("SELECT status, status_detail FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()
    assert row["status"] == "SENDING"
    assert ("30 messages wait for the Gmail lane's warm-up cap until 2026-11-29 00:00 UTC (day 1 of 3: 10 a day)"
            in row["status_detail"]), row["status_detail"]
    assert "15 messages wait for the other lane's warm-up cap" in row["status_detail"]

    status = warmup.warmup_status(conn, ws, _domain_id(conn, campaign_id))
    assert {r["lane"]: (r["used"], r["left"]) for r in status["today"] if r["cap"] is not None} == {
        "gmail": (10, 0), "other": (15, 0)}

    # Another worker today sends nothing more, and the send comes back tomorrow, not before. (The
    # first pair's job may be due when the other worker's claims would have expired.)
    with db.transaction(conn):
        conn.execute("DELETE FROM jobs WHERE type = 'email.send'")
    _workers(db_path, campaign_id)
    assert _by_lane(conn, campaign_id)[("gmail", "delivered")] == 10
    job = conn.execute("SELECT run_at FROM jobs WHERE type = 'email.send' AND status = 'queued'").fetchone()
    assert job is not None and job[0] == "2026-11-29T00:00:00.000Z", job

    frozen.next_day()  # day 2: gmail 20, no cap for other
    _workers(db_path, campaign_id)
    assert _by_lane(conn, campaign_id) == {("gmail", "delivered"): 30, ("gmail", "queued"): 10,
                                           ("other", "delivered"): 30, ("yahoo", "delivered"): 5}
    detail = conn.execute("SELECT status_detail FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()[0]
    assert detail == ("10 messages wait for the Gmail lane's warm-up cap until 2026-11-30 00:00 UTC "
                      "(day 2 of 3: 20 a day).")
    frozen.next_day()  # day 3: 1,000
    _workers(db_path, campaign_id)
    assert conn.execute("SELECT status, status_detail FROM campaigns WHERE id = ?",
                        (campaign_id,)).fetchone()[:] == ("SENT", None)


def test_the_most_engaged_recipients_go_first(conn: sqlite3.Connection, workspace: dict[str, Any], db_path: Any,
                                              verified_dns: None, frozen: Clock) -> None:
    ws = workspace["id"]
    now = clock.utcnow()
    old = clock.format_ts(now - timedelta(days=400))
    rest = _contacts(conn, ws, [f"rest{i}@gmail.com" for i in range(5)], created_at=old)
    signed_up = _contacts(conn, ws, [f"new{i}@gmail.com" for i in range(2)],
                          created_at=clock.format_ts(now - timedelta(days=3)))
    ninety = _contacts(conn, ws, [f"ninety{i}@gmail.com" for i in range(2)], created_at=old,
                       last_clicked_at=clock.format_ts(now - timedelta(days=60)))
    thirty = _contacts(conn, ws, [f"thirty{i}@gmail.com" for i in range(2)], created_at=old,
                       last_opened_at=clock.format_ts(now - timedelta(days=2)))
    campaign_id = _campaign(conn, ws)
    warmup.start_warmup(conn, ws, _domain_id(conn, campaign_id),
                        warmup.parse_schedule("day,lane,cap\n1,gmail,2\n2,gmail,2\n3,gmail,2\n", "t"))

    def delivered() -> set[str]:
        return {r[0] for r in conn.execute("SELECT contact_id FROM email_messages WHERE campaign_id = ?"
                                           " AND status = 'delivered'", (campaign_id,))}

    sent: list[set[str]] = []
    for _ in range(3):
        _workers(db_path, campaign_id)
        sent.append(delivered() - set().union(*sent))
        frozen.next_day()
    assert sent == [set(thirty), set(ninety), set(signed_up)]
    assert not delivered() & set(rest)


def test_no_warm_up_claims_as_before(conn: sqlite3.Connection, workspace: dict[str, Any], db_path: Any,
                                     verified_dns: None, frozen: Clock) -> None:
    ws = workspace["id"]
    _contacts(conn, ws, [f"g{i}@gmail.com" for i in range(12)])
    campaign_id = _campaign(conn, ws)
    domain_id = _domain_id(conn, campaign_id)
    warmup.start_warmup(conn, ws, domain_id, warmup.parse_schedule("day,lane,cap\n1,gmail,1\n", "t"))
    warmup.stop_warmup(conn, ws, domain_id)
    _workers(db_path, campaign_id)
    assert _by_lane(conn, campaign_id) == {("gmail", "delivered"): 12}
    assert conn.execute("SELECT count(*) FROM email_messages WHERE warm_rank IS NOT NULL").fetchone()[0] == 0
    assert conn.execute("SELECT status FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()[0] == "SENT"


def test_an_operators_schedule_replaces_the_shipped_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = tmp_path / "warmup.csv"
    mine.write_text("day,lane,cap,source\n1,gmail,50,ours\n")
    monkeypatch.setenv(warmup.TABLE_ENV, str(mine))
    assert warmup.TABLE.current().caps(1) == {"gmail": 50}


# --- the estimate and the campaign view -------------------------------------------------------------


def _over_cap(est: dict[str, Any]) -> list[tuple[int, str | None, str]]:
    return [(g["recipients"], g["until"], g["reason"]) for g in est["groups"] if g["state"] == "over_cap"]


def test_the_estimate_and_the_view_say_what_waits_for_the_warm_up(
        conn: sqlite3.Connection, workspace: dict[str, Any], db_path: Any, verified_dns: None, frozen: Clock) -> None:
    from marketing_cli.services.estimates import views

    ws = workspace["id"]
    _contacts(conn, ws, [f"g{i}@gmail.com" for i in range(25)] + [f"o{i}@example.org" for i in range(5)])
    campaign_id = _campaign(conn, ws)
    warmup.start_warmup(conn, ws, _domain_id(conn, campaign_id),
                        warmup.parse_schedule("day,lane,cap\n1,gmail,10\n2,gmail,10\n", "t"))
    _workers(db_path, campaign_id)
    view = views.email_campaign(conn, ws, campaign_id)
    assert view["status"] == "SENDING"
    assert _over_cap(view["estimate"]) == [
        (15, "2026-11-29T00:00:00.000Z",
         "the sending domain's warm-up (day 1 of 2): the Gmail lane's cap of 10 a day")]
    [item] = view["held_back"]
    assert (item["lane"], item["messages"], item["state"], item["opens_at"]) == (
        "gmail", 15, "warmup", "2026-11-29T00:00:00.000Z")
    assert item["until"] == "2026-11-30T00:00:00.000Z"  # 15 at 10 a day: the second day
    assert item["line"] == ("15 messages wait for the Gmail lane's warm-up cap until 2026-11-29 00:00 UTC "
                            "(day 1 of 2: 10 a day)")


def test_a_preview_with_every_lane_capped_moves_the_excess_over_cap(
        conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None, frozen: Clock) -> None:
    from marketing_cli.services.estimates import views

    ws = workspace["id"]
    for resource in ("contacts", "monthly_emails", "hourly_emails"):
        billing.set_allowance(conn, ws, resource, 1000)
    _contacts(conn, ws, [f"c{i}@example.org" for i in range(300)])
    campaign = factories.ready_campaign(conn, ws, html=HTML)
    warmup.start_warmup(conn, ws, _domain_id(conn, campaign["id"]))  # the shipped schedule: 200 a lane on day 1
    preview = views.email_schedule_preview(conn, ws, campaign["id"], {"schedule_type": "NOW"})
    assert preview["estimate"]["groups"][0]["state"] == "now"
    assert sum(g["recipients"] for g in preview["estimate"]["groups"]) == 300
    assert _over_cap(preview["estimate"]) == []  # 5 lanes x 200: room for 1,000
    more = _contacts(conn, ws, [f"d{i}@example.org" for i in range(800)])
    assert more
    billing.set_allowance(conn, ws, "monthly_emails", 5000)
    billing.set_allowance(conn, ws, "hourly_emails", 5000)
    preview = views.email_schedule_preview(conn, ws, campaign["id"], {"schedule_type": "NOW"})
    assert _over_cap(preview["estimate"]) == [
        (100, "2026-11-29T00:00:00.000Z", "the sending domain's warm-up (day 1 of 14): every lane's cap")]


def test_every_campaign_of_the_domain_shares_the_days_cap(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                         db_path: Any, verified_dns: None, frozen: Clock) -> None:
    """One cap per domain, lane and day, whatever sends: two campaigns here, as an automation's
    email steps (their campaign is sent by the same email.send job, services/email/automated.py)."""
    from marketing_cli.services.email import campaigns, variant_html

    ws = workspace["id"]
    _contacts(conn, ws, [f"g{i}@gmail.com" for i in range(20)])
    first = _campaign(conn, ws)
    sender_id = conn.execute("SELECT sender_identity_id FROM campaigns WHERE id = ?", (first,)).fetchone()[0]
    second = factories.campaign(conn, ws)["id"]
    campaigns.configure_campaign(conn, ws, second, {"sender": {"sender_identity_id": sender_id},
                                                    "audience": {"type": "ENTIRE_AUDIENCE"},
                                                    "variants": [{"type": "A", "subject": "Hello"}]})
    variant_html.set_variant_html(conn, ws, second, "A", {"html": HTML})
    email_schedule.schedule_campaign(conn, ws, second, {"schedule_type": "NOW"})
    preparation.preprocess(conn, {"campaign_id": second})
    warmup.start_warmup(conn, ws, _domain_id(conn, first), warmup.parse_schedule("day,lane,cap\n1,gmail,12\n", "t"))
    _workers(db_path, first)
    _workers(db_path, second)
    sent = [_by_lane(conn, c).get(("gmail", "delivered"), 0) for c in (first, second)]
    assert sum(sent) == 12 and sent[1] == 0, sent  # the first took the day's cap
    assert warmup.used_today(conn, _domain_id(conn, first)) == {"gmail": 12}
