"""One rate and one hourly and monthly allowance for a workspace, however many workers send
(issue 22 item 4).

Each worker here is a thread with a connection of its own (db.connect) running the send
helper job's handler on one campaign, as `mkt jobs run` processes on several machines do:
MKT_SEND_RATE holds for them together (services/account/pace.py books the starts in the
database), and the hourly_emails and monthly_emails allowances are reserved in each claim's
transaction, so together they deliver exactly the allowance, and a message not delivered
gives its reservation back (usage counts delivered messages only).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from marketing_cli import jobs
from marketing_cli.kernel import clock
from marketing_cli.kernel.ids import new_id
from marketing_cli.services.account import billing
from marketing_cli.services.delivery import claim, handoff, record, reservations, sender, shaping
from marketing_cli.services.email import domains, preparation
from marketing_cli.services.email import schedule as email_schedule
from marketing_cli.storage import db
from tests import factories

HTML = '<p>Hi {{contact.first_name|there}}, <a href="{{unsubscribe_url}}">unsubscribe</a></p>'


@pytest.fixture
def verified_dns(monkeypatch: pytest.MonkeyPatch) -> None:
    from marketing_cli.services.email import dns_check

    monkeypatch.setattr(dns_check, "check_records", lambda records: [
        {"purpose": r["purpose"], "type": r["type"], "host": r["host"], "found": [r["value"]], "verified": True,
         "error": None} for r in records])


def _sending_campaign(conn: sqlite3.Connection, ws: int, count: int, *, new_contacts: bool = True,
                      domain: str = "example.com") -> str:
    """A campaign to `count` contacts (made here, or the ones an earlier call made, with a
    sender on another `domain`), frozen and SENDING (its messages queued)."""
    for resource in ("contacts", "monthly_emails"):
        billing.set_allowance(conn, ws, resource, count * 2)
    now = clock.now()
    if new_contacts:
        with db.transaction(conn):
            conn.executemany("INSERT INTO contacts (id, workspace_id, email, status, data, created_at, updated_at)"
                             " VALUES (?, ?, ?, 'SUBSCRIBED', '{}', ?, ?)",
                             [(new_id(), ws, f"r{i:04d}@example.org", now, now) for i in range(count)])
    campaign = factories.ready_campaign(conn, ws, html=HTML, domain=domain)
    for d in domains.list_domains(conn, ws):
        domains.verify_domain(conn, ws, d["id"])
    email_schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})
    preparation.preprocess(conn, {"campaign_id": campaign["id"]})
    assert conn.execute("SELECT status FROM campaigns WHERE id = ?", (campaign["id"],)).fetchone()[0] == "SENDING"
    return campaign["id"]


def _workers(db_path: Any, campaign_id: str | list[str], n: int = 1) -> float:
    """Run `n` send helpers at once (on each of the campaigns a list gives), each on its own
    connection; the seconds they took together."""
    errors: list[BaseException] = []
    campaign_ids = [campaign_id] if isinstance(campaign_id, str) else campaign_id

    def work(campaign_id: str) -> None:
        conn = db.connect(db_path)
        try:
            sender.help_send(conn, {"campaign_id": campaign_id})
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            conn.close()

    threads = [threading.Thread(target=work, args=(c,)) for c in campaign_ids for _ in range(n)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    return time.monotonic() - started


def _counts(conn: sqlite3.Connection, campaign_id: str) -> dict[str, int]:
    return {r[0]: r[1] for r in conn.execute("SELECT status, count(*) FROM email_messages WHERE campaign_id = ?"
                                            " GROUP BY status", (campaign_id,))}


def _hour(conn: sqlite3.Connection, ws: int, hour: str, resource: str = "hourly_emails") -> tuple[int, int]:
    """(used, held) of the workspace's counter of `resource` for the period `hour`."""
    row = conn.execute("SELECT used, held FROM usage_counters WHERE workspace_id = ? AND resource = ?"
                       " AND period = ?", (ws, resource, hour)).fetchone()
    return (row[0], row[1]) if row else (0, 0)


@pytest.fixture
def frozen_hour(monkeypatch: pytest.MonkeyPatch) -> datetime:
    """The clock stopped (the test cannot cross an hour, and claims never expire)."""
    moment = clock.utcnow()
    monkeypatch.setattr(clock, "utcnow", lambda: moment)
    return moment


def test_the_send_rate_holds_for_three_workers_together(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                        db_path: Any, verified_dns: None,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    rate, count, size = 200, 120, 4
    campaign_id = _sending_campaign(conn, workspace["id"], count)
    monkeypatch.setenv("MKT_SEND_RATE", str(rate))
    monkeypatch.setenv("MKT_SEND_CONCURRENCY", str(size))  # a round books the starts of its 4 messages
    elapsed = _workers(db_path, campaign_id, 3)
    assert _counts(conn, campaign_id) == {"delivered": count}
    # The last round's first start is 116 / 200 s after the first round's for the workspace, not
    # for each worker (three pacers of their own would have taken a third of that).
    assert elapsed >= (count - size) / rate, elapsed
    workers = conn.execute("SELECT count(DISTINCT claim_token) FROM email_messages WHERE campaign_id = ?",
                           (campaign_id,)).fetchone()[0]
    assert workers >= 2  # they did share the work
    assert [tuple(r) for r in conn.execute("SELECT channel FROM pace_slots WHERE workspace_id = ?",
                                           (workspace["id"],))] == [("email",)]


def test_rate_zero_books_nothing(conn: sqlite3.Connection, workspace: dict[str, Any], db_path: Any,
                                 verified_dns: None, monkeypatch: pytest.MonkeyPatch) -> None:
    campaign_id = _sending_campaign(conn, workspace["id"], 30)
    monkeypatch.setenv("MKT_SEND_RATE", "0")
    _workers(db_path, campaign_id, 2)
    assert _counts(conn, campaign_id) == {"delivered": 30}
    assert conn.execute("SELECT count(*) FROM pace_slots").fetchone()[0] == 0


def test_three_workers_deliver_exactly_the_hourly_allowance(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                            db_path: Any, verified_dns: None, frozen_hour: datetime,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace["id"]
    campaign_id = _sending_campaign(conn, ws, 200)
    billing.set_allowance(conn, ws, "hourly_emails", 50)
    monkeypatch.setenv("MKT_SEND_CONCURRENCY", "8")  # 3 workers x 2 rounds x 8 in flight: 48 at once
    _workers(db_path, campaign_id, 3)
    assert _counts(conn, campaign_id) == {"delivered": 50, "queued": 150}
    hour = billing.period_of("hourly_emails")
    assert _hour(conn, ws, hour) == (50, 0)  # used = delivered, nothing held
    assert billing.usage(conn, ws, "monthly_emails") == 50
    assert {r["name"]: r["used"] for r in billing.resources(conn, ws)}["hourly_emails"] == 50
    assert conn.execute("SELECT count(*) FROM email_messages WHERE reserved_hour IS NOT NULL").fetchone()[0] == 0
    # The rest waits for the next hour: another worker in this hour sends nothing.
    _workers(db_path, campaign_id, 1)
    assert _counts(conn, campaign_id) == {"delivered": 50, "queued": 150}
    assert _hour(conn, ws, hour) == (50, 0)


def test_a_message_not_delivered_gives_its_reservation_back(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                            db_path: Any, verified_dns: None, frozen_hour: datetime,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace["id"]
    campaign_id = _sending_campaign(conn, ws, 200)
    billing.set_allowance(conn, ws, "hourly_emails", 50)
    monkeypatch.setenv("MKT_SEND_CONCURRENCY", "5")
    first = conn.execute("SELECT min(id) FROM email_messages WHERE campaign_id = ?", (campaign_id,)).fetchone()[0]
    failing = {first + k for k in range(0, 40, 4)}  # 10 of the first 40 claimed: a 4xx, tried later
    permanent = {first + 1}  # a 5xx: failed for good
    real = handoff.Send.deliver

    def deliver(run: Any, message: Any) -> tuple[int, str | None, bool]:
        if message["id"] in failing:
            return message["id"], "451 try again later", False
        if message["id"] in permanent:
            return message["id"], "550 no such user", True
        return real(run, message)

    monkeypatch.setattr(handoff.Send, "deliver", deliver)
    _workers(db_path, campaign_id, 3)
    hour = billing.period_of("hourly_emails")
    counts = _counts(conn, campaign_id)
    used, held = _hour(conn, ws, hour)
    assert held == 0 and used == counts["delivered"] <= 50  # the failures' reservations came back
    assert counts["failed"] == 1
    assert conn.execute("SELECT count(*) FROM email_messages WHERE campaign_id = ? AND status = 'queued'"
                        " AND retry_at IS NOT NULL", (campaign_id,)).fetchone()[0] == 10
    # What came back is the hour's to use: one more worker, with the transport well again,
    # fills the allowance exactly.
    monkeypatch.setattr(handoff.Send, "deliver", real)
    conn.execute("UPDATE email_messages SET retry_at = NULL WHERE retry_at IS NOT NULL")
    _workers(db_path, campaign_id, 1)
    assert _hour(conn, ws, hour) == (50, 0)
    assert _counts(conn, campaign_id)["delivered"] == 50


def test_a_taken_over_claim_keeps_one_reservation_and_the_late_answer_settles_nothing(
        conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None, frozen_hour: datetime,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Fencing: worker A claims a round and is paused past its claim; B takes the rows over (their
    reservation with them, not a second one) and delivers them; A's late answer is refused and
    neither counts nor gives back anything."""
    ws = workspace["id"]
    campaign_id = _sending_campaign(conn, ws, 6)
    billing.set_allowance(conn, ws, "hourly_emails", 10)
    hour = billing.period_of("hourly_emails")
    a, b = jobs.Run("worker-a", 60), jobs.Run("worker-b", 60)
    claimed = claim._claim(conn, campaign_id, 4, claim=a, workspace_id=ws)
    assert len(claimed) == 4 and _hour(conn, ws, hour) == (0, 4)
    conn.execute("UPDATE email_messages SET claim_expires_at = ? WHERE claim_token = 'worker-a'",
                 (clock.format_ts(frozen_hour.replace(year=frozen_hour.year - 1)),))  # A's claim lapsed
    taken, spent = claim.claim_round(conn, campaign_id, 10, claim=b, workspace_id=ws)
    assert [m["id"] for m in taken[:4]] == [m["id"] for m in claimed] and len(taken) == 6 and not spent
    assert _hour(conn, ws, hour) == (0, 6)  # 4 carried over + 2 new, not 4 twice

    def run(token: str) -> Any:
        return SimpleNamespace(claim=SimpleNamespace(token=token), campaign_id=campaign_id, outbox=None,
                               smtp_id=lambda m: f"<{m['id']}@example.com>", shaper=shaping.Shaper(ws), answered=0)

    late = record.record_round(conn, run("worker-a"), {m["id"]: m for m in claimed},
                               [(m["id"], None, False) for m in claimed], ws)
    assert late == 0 and _hour(conn, ws, hour) == (0, 6)  # refused: nothing counted, nothing given back
    answers = [(m["id"], None, False) for m in taken[:5]] + [(taken[5]["id"], "451 later", False)]
    record.record_round(conn, run("worker-b"), {m["id"]: m for m in taken}, answers, ws)
    assert _hour(conn, ws, hour) == (5, 0)
    assert billing.usage(conn, ws, "monthly_emails") == 5


def test_a_claim_of_an_earlier_hour_gives_that_hours_reservation_back(
        conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A message claimed at 10:59 by a worker that died, taken over at 11:00: 10 o'clock's
    reservation is given back and 11 o'clock's taken; the delivery counts at 11."""
    ws = workspace["id"]
    campaign_id = _sending_campaign(conn, ws, 3)
    ten = datetime.fromisoformat("2031-05-06T10:59:00+00:00")
    monkeypatch.setattr(clock, "utcnow", lambda: ten)
    first = claim._claim(conn, campaign_id, 3, claim=jobs.Run("dead", 30), workspace_id=ws)
    assert len(first) == 3 and _hour(conn, ws, "2031-05-06T10") == (0, 3)
    eleven = datetime.fromisoformat("2031-05-06T11:00:30+00:00")
    monkeypatch.setattr(clock, "utcnow", lambda: eleven)
    taken = claim._claim(conn, campaign_id, 3, claim=jobs.Run("alive", 30), workspace_id=ws)
    assert len(taken) == 3
    assert _hour(conn, ws, "2031-05-06T10") == (0, 0) and _hour(conn, ws, "2031-05-06T11") == (0, 3)
    run = SimpleNamespace(claim=SimpleNamespace(token="alive"), campaign_id=campaign_id, outbox=None,
                          smtp_id=lambda m: f"<{m['id']}@example.com>", shaper=shaping.Shaper(ws), answered=0)
    record.record_round(conn, run, {m["id"]: m for m in taken}, [(m["id"], None, False) for m in taken], ws)
    assert _hour(conn, ws, "2031-05-06T11") == (3, 0)


def test_expired_claims_are_looked_for_first_or_when_the_queue_runs_short(
        conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The send loop asks for expired claims first once a second (`expired=True`); in between
    (`expired=False`) a round of queued messages is claimed without looking for them, and they
    fill a round the queue leaves short: a dead worker's messages are never left behind."""
    ws = workspace["id"]
    campaign_id = _sending_campaign(conn, ws, 6)
    ten = datetime.fromisoformat("2031-05-06T10:00:00+00:00")
    monkeypatch.setattr(clock, "utcnow", lambda: ten)
    dead = [m["id"] for m in claim._claim(conn, campaign_id, 2, claim=jobs.Run("dead", 30), workspace_id=ws)]
    monkeypatch.setattr(clock, "utcnow", lambda: ten + timedelta(minutes=1))  # the dead worker's claim expired
    alive = jobs.Run("alive", 30)
    first, _ = claim.claim_round(conn, campaign_id, 2, claim=alive, workspace_id=ws, expired=False)
    assert [m["status"] for m in first] == ["queued", "queued"] and not set(dead) & {m["id"] for m in first}
    second, _ = claim.claim_round(conn, campaign_id, 3, claim=alive, workspace_id=ws, expired=False)
    assert [m["status"] for m in second] == ["queued", "queued", "sending"]  # the queue's last two, then one expired
    third, _ = claim.claim_round(conn, campaign_id, 3, claim=alive, workspace_id=ws, expired=True)
    assert [m["id"] for m in second[2:] + third] == dead
    uncertain = conn.execute("SELECT id FROM email_messages WHERE campaign_id = ? AND uncertain = 1 ORDER BY id",
                             (campaign_id,)).fetchall()
    assert [r[0] for r in uncertain] == dead


@pytest.mark.postgresql_only
def test_a_machine_whose_clock_runs_ahead_delays_no_other_machine(conn: sqlite3.Connection,
                                                                  workspace: dict[str, Any],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The pacer's clock is the database's on PostgreSQL: a worker whose machine runs 10 minutes
    ahead books the next start at the database's now, so a worker on a machine in step is not
    sent to sleep for those 10 minutes (with each machine's own clock it would have been)."""
    from marketing_cli.services.account import pace

    pacer = pace.SharedPacer(workspace["id"], pace.EMAIL, 100)  # starts 10 ms apart
    in_step = clock.utcnow
    monkeypatch.setattr(clock, "utcnow", lambda: in_step() + timedelta(minutes=10))
    assert pacer.book(conn, 1) < 1
    monkeypatch.setattr(clock, "utcnow", in_step)
    assert pacer.book(conn, 1) < 1
    monkeypatch.setattr(clock, "utcnow", lambda: in_step() - timedelta(minutes=10))  # and one behind
    assert pacer.book(conn, 1) < 1


def test_campaigns_sending_at_once_deliver_exactly_the_months_allowance_then_pause(
        conn: sqlite3.Connection, workspace: dict[str, Any], db_path: Any, verified_dns: None,
        frozen_hour: datetime, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two campaigns of 40 that each fitted the month when scheduled, then the allowance
    lowered to 50: four workers on both deliver exactly 50 (each message reserves one of the
    month's allowance in its claim, as of the hour's), and a campaign the month stops is
    PAUSED with the reason, its other messages queued, not failed. Resume is refused while the
    month is used up (and changes nothing); with the allowance raised it sends the rest."""
    from marketing_cli.errors import MktError

    ws = workspace["id"]
    billing.set_allowance(conn, ws, "domains", 2)  # (a sender of its own for each campaign)
    campaign_ids = [_sending_campaign(conn, ws, 40), _sending_campaign(conn, ws, 40, new_contacts=False,
                                                                           domain="example.net")]
    billing.set_allowance(conn, ws, "monthly_emails", 50)
    monkeypatch.setenv("MKT_SEND_CONCURRENCY", "4")
    _workers(db_path, campaign_ids, 2)
    # A worker that found the month used up while the other campaign's workers held some of it
    # (whose messages might not be delivered) left its send job to look again a little later:
    # the look (the clock is stopped here, so the job is run rather than waited for).
    for campaign_id in campaign_ids:
        if conn.execute("SELECT status FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()[0] == "SENDING":
            sender.send(conn, {"campaign_id": campaign_id})
    month, hour = billing.period_of("monthly_emails"), billing.period_of("hourly_emails")
    counts = [_counts(conn, c) for c in campaign_ids]
    assert sum(c.get("delivered", 0) for c in counts) == 50, counts
    assert _hour(conn, ws, month, "monthly_emails") == (50, 0) and _hour(conn, ws, hour) == (50, 0)
    assert conn.execute("SELECT count(*) FROM email_messages WHERE reserved_hour IS NOT NULL").fetchone()[0] == 0
    statuses = {}
    for campaign_id, count in zip(campaign_ids, counts):
        row = conn.execute("SELECT status, status_detail FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()
        statuses[campaign_id] = row[0]
        if row[0] == "PAUSED":  # what the month left out waits, queued
            assert set(count) <= {"delivered", "queued"} and count["queued"] > 0, count
            assert row[1].startswith("Paused: the workspace's monthly email allowance is used up. monthly_emails: "
                                     "the free plan (with the operator's override) allows 50 this month and 50 are"
                                     " used. An operator raises it with `mkt billing allowance set monthly_emails N`"
                                     ), row[1]
            assert row[1].endswith(f"Then `mkt campaigns resume {campaign_id}` (POST /v1/campaigns/{campaign_id}"
                                   "/resume) sends the rest.")
        else:
            assert row[0] == "SENT" and count == {"delivered": 40}, (row[0], count)
    paused = [c for c in campaign_ids if statuses[c] == "PAUSED"]
    assert paused
    with pytest.raises(MktError) as refused:
        email_schedule.resume_campaign(conn, ws, paused[0])
    assert refused.value.status == 400 and refused.value.message == email_schedule.MONTH_USED_UP
    assert "allows 50 this month and 50 are used" in refused.value.detail
    assert conn.execute("SELECT status FROM campaigns WHERE id = ?", (paused[0],)).fetchone()[0] == "PAUSED"
    billing.set_allowance(conn, ws, "monthly_emails", 80)
    for campaign_id in paused:
        assert email_schedule.resume_campaign(conn, ws, campaign_id) == {"id": campaign_id, "status": "SENDING"}
    _workers(db_path, paused, 2)
    assert [_counts(conn, c) for c in campaign_ids] == [{"delivered": 40}, {"delivered": 40}]
    assert _hour(conn, ws, month, "monthly_emails") == (80, 0)


def test_a_campaign_paused_for_the_month_through_both_faces(
        conn: sqlite3.Connection, workspace: dict[str, Any], db_path: Any, verified_dns: None,
        frozen_hour: datetime, client: Any, auth: dict[str, str], cli: Any) -> None:
    """GET /v1/campaigns/:id and `mkt campaigns show` say why the send paused; resume, over
    HTTP and from the CLI, is refused with the allowance while the month is used up (the
    campaign stays PAUSED); raised by the operator, resume sends the rest."""
    ws = workspace["id"]
    campaign_id = _sending_campaign(conn, ws, 12)
    billing.set_allowance(conn, ws, "monthly_emails", 5)
    sender.send(conn, {"campaign_id": campaign_id})
    assert _counts(conn, campaign_id) == {"delivered": 5, "queued": 7}
    shown = client.get(f"/v1/campaigns/{campaign_id}", headers=auth).json()["data"]
    assert shown["status"] == "PAUSED"
    assert shown["status_detail"].startswith("Paused: the workspace's monthly email allowance is used up. "
                                             "monthly_emails: the free plan (with the operator's override) allows 5 "
                                             "this month and 5 are used.")
    assert "Paused: the workspace's monthly email allowance is used up." in cli("campaigns", "show", campaign_id).stdout
    refused = client.post(f"/v1/campaigns/{campaign_id}/resume", headers=auth)
    assert refused.status_code == 400 and refused.json() == {
        "error": {"message": email_schedule.MONTH_USED_UP, "status": 400}, "data": None}
    assert "allows 5 this month and 5 are used" in refused.headers["X-Error-Detail"]
    again = cli("campaigns", "resume", campaign_id)
    assert again.exit_code == 1 and again.stderr.startswith(email_schedule.MONTH_USED_UP)
    assert "mkt billing allowance set monthly_emails N" in again.stderr
    assert client.get(f"/v1/campaigns/{campaign_id}", headers=auth).json()["data"]["status"] == "PAUSED"
    assert cli("billing", "allowance", "set", "monthly_emails", "12").exit_code == 0
    resumed = client.post(f"/v1/campaigns/{campaign_id}/resume", headers=auth)
    assert resumed.status_code == 200 and resumed.json()["data"] == {"id": campaign_id, "status": "SENDING"}
    sender.send(conn, {"campaign_id": campaign_id})
    assert _counts(conn, campaign_id) == {"delivered": 12}
    assert client.get(f"/v1/campaigns/{campaign_id}", headers=auth).json()["data"]["status"] == "SENT"


def test_with_the_month_left_and_the_hour_used_up_the_send_waits_for_the_next_hour(
        conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None, frozen_hour: datetime) -> None:
    """The allowance that stops a claim is the one that bound it: the hour's (3) is used up
    while the month (10) has room, so the campaign stays SENDING and its send job comes back
    at the next hour; it is not paused for the month."""
    ws = workspace["id"]
    campaign_id = _sending_campaign(conn, ws, 12)
    billing.set_allowance(conn, ws, "hourly_emails", 3)
    billing.set_allowance(conn, ws, "monthly_emails", 10)
    conn.execute("DELETE FROM jobs WHERE type = 'email.send'")  # (run here, not from the queue)
    sender.send(conn, {"campaign_id": campaign_id})
    assert _counts(conn, campaign_id) == {"delivered": 3, "queued": 9}
    assert conn.execute("SELECT status FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()[0] == "SENDING"
    next_hour = clock.format_ts(frozen_hour.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1))
    assert [tuple(r) for r in conn.execute("SELECT type, run_at FROM jobs WHERE status = 'queued' AND type LIKE"
                                           " 'email.send%'")] == [("email.send", next_hour)]
    assert billing.reserve(conn, ws, reservations.ALLOWANCES, 4) == (0, "hourly_emails")  # (nothing reserved)
