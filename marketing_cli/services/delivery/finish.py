"""When an email send has no round left to claim: come back later, pause, or end
(services/delivery/sender.py calls these once the rounds in flight are recorded).

- Nothing due now (`finish_or_wait`): wait for retries, for the next zone of a local-time
  send, for messages other workers hold (until their claim would expire), for the A/B
  winner (email.ab_winner after `wait_minutes`, ab_winner.py), or end the send: SENT, once,
  by whichever job finds nothing queued or claimed. An automation's campaign stays SENDING.
  Messages of a provider lane held for longer than the worker waits (shaping.py: suspended,
  or slowed) are due when their lane opens, not before (`_lanes_instant`).
- The hour's allowance used up (hourly_emails): the send waits for the next hour.
- The month's allowance used up (monthly_emails), and none of it still reserved (a
  reservation given back makes room again): the campaign is PAUSED, its `status_detail`
  says why and how to raise the allowance, and `mkt campaigns resume` sends the rest.
  (Scheduling checks the audience against the month's allowance, but two campaigns
  scheduled together, an audience that grew before its freeze, or a lowered allowance can
  still find it used up mid-send.)

A campaign SENT with failed messages says how many and why in `status_detail`
(`failure_summary`); each message keeps its own `failure_reason`.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from datetime import timedelta

from marketing_cli import jobs
from marketing_cli.kernel import clock
from marketing_cli.services.account import billing
from marketing_cli.services.email import campaigns
from marketing_cli.storage.db import transaction

FAILED_SUMMARY = "{failed:,} of {total:,} messages failed: {reasons}."
SHOWN_REASONS = 3
MONTH_USED_UP = ("Paused: the workspace's monthly email allowance is used up. {detail} Then `mkt campaigns resume {id}`"
                 " (POST /v1/campaigns/{id}/resume) sends the rest.")
MONTH_RECHECK = 5.0  # seconds: the month's allowance is used up while reservations are out; look again then

log = logging.getLogger("mkt.email.send")


def month_used_up(conn: sqlite3.Connection, row: sqlite3.Row) -> None:
    """The month's allowance had no room for a claim. While some of it is reserved by messages
    being sent (by any campaign's workers), those may still come back (not delivered), so the
    send looks again in MONTH_RECHECK seconds; once all of it is used, the campaign is PAUSED
    with the reason (once, by whichever of its workers found it first; the others then see it
    no longer SENDING)."""
    ws = row["workspace_id"]
    with transaction(conn):
        current = conn.execute("SELECT status FROM campaigns WHERE id = ?", (row["id"],)).fetchone()
        if current is None or current[0] != "SENDING":
            return
        held = conn.execute("SELECT held FROM usage_counters WHERE workspace_id = ? AND resource = 'monthly_emails'"
                            " AND period = ?", (ws, billing.period_of("monthly_emails"))).fetchone()
        if held is not None and held[0] > 0:
            again_at(conn, row, clock.format_ts(clock.utcnow() + timedelta(seconds=MONTH_RECHECK)))
            return
        detail = MONTH_USED_UP.format(detail=billing.limit_detail(conn, ws, "monthly_emails"), id=row["id"])
        campaigns.set_campaign_status(conn, row["id"], "PAUSED", detail=detail)
    log.warning("campaign %s paused: the monthly_emails allowance of workspace %s is used up", row["id"], ws)


def next_hour() -> str:
    now = clock.utcnow()
    return clock.format_ts(now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1))


def again_at(conn: sqlite3.Connection, row: sqlite3.Row, run_at: str, job: str = "email.send") -> None:
    jobs.enqueue(conn, job, {"campaign_id": row["id"]}, workspace_id=row["workspace_id"],
                 dedupe_key=f"{job}:{row['id']}", run_at=run_at)


def finish_or_wait(conn: sqlite3.Connection, row: sqlite3.Row, *, helper: bool = False,
                   held: dict[str, float] | None = None, detail: str | None = None) -> None:
    """No message is due now: wait for retries, for the next zone of a local-time send, for
    messages other workers hold, for the A/B winner, or end the send (SENT). Checked in the
    finishing transaction, so whichever job finds nothing queued or claimed finishes the
    campaign, exactly once (the status is read under the write lock). A helper that finds
    work left ends without queueing anything: the send job waits for it. `held`: the provider
    lanes held now (lane -> seconds until it opens, shaping.py, or the next UTC midnight for a
    lane whose warm-up cap is used up today); their messages wait for them. `detail`: what waits
    for a warm-up cap, written to the campaign's status_detail while it waits (it stays SENDING)."""
    with transaction(conn):
        current = conn.execute("SELECT status, automation_id FROM campaigns WHERE id = ?", (row["id"],)).fetchone()
        if current is None or current["status"] != "SENDING":
            return
        retry = _lanes_instant(conn, row, held) if held else _next_instant(conn, row)
        claimed = conn.execute("SELECT min(coalesce(claim_expires_at, '')) FROM email_messages WHERE campaign_id = ?"
                               " AND status = 'sending'", (row["id"],)).fetchone()[0]
        if retry is not None or claimed is not None:  # claimed by another worker: back when its claim would expire
            if detail is not None:
                conn.execute("UPDATE campaigns SET status_detail = ? WHERE id = ?", (detail, row["id"]))
            if not helper:  # ('' is now)
                again_at(conn, row, min(at or clock.now() for at in (retry, claimed) if at is not None))
            return
        if conn.execute("SELECT 1 FROM email_ab_holdout WHERE campaign_id = ? LIMIT 1", (row["id"],)).fetchone():
            wait = json.loads(row["ab_test"])["wait_minutes"]
            again_at(conn, row, clock.format_ts(clock.utcnow() + timedelta(minutes=wait)), "email.ab_winner")
            return
        # An automation's campaign (services/email/automated.py) stays SENDING: more messages come.
        if current["automation_id"] is None:
            campaigns.set_campaign_status(conn, row["id"], "SENT", detail=failure_summary(conn, row["id"]))
            conn.execute("UPDATE campaigns SET sent_at = ? WHERE id = ?", (clock.now(), row["id"]))


def _next_instant(conn: sqlite3.Connection, row: sqlite3.Row) -> str | None:
    """When a queued message of the campaign may next be claimed ('' for now), None when none is queued.

    A local-time campaign reads it from email_messages_due: the earliest due time of a message
    not waiting for a retry (the next zone), and the retries of messages due before it; a
    retrying message due later cannot come earlier than that zone."""
    if not row["local_time"]:
        return conn.execute("SELECT min(max(coalesce(retry_at, ''), coalesce(due_at, ''))) FROM email_messages"
                            " WHERE campaign_id = ? AND status = 'queued'", (row["id"],)).fetchone()[0]
    zone = conn.execute("SELECT due_at FROM email_messages WHERE campaign_id = ?"
                        " AND status = 'queued' AND due_at IS NOT NULL AND retry_at IS NULL ORDER BY due_at LIMIT 1",
                        (row["id"],)).fetchone()
    before = " AND due_at < ?" if zone else ""
    retry = conn.execute("SELECT min(max(retry_at, due_at)) FROM email_messages WHERE campaign_id = ?"
                         f" AND status = 'queued' AND due_at IS NOT NULL{before} AND retry_at IS NOT NULL",
                         (row["id"], *(zone or ()))).fetchone()[0]
    return min(filter(None, (zone and zone[0], retry)), default=None)


def _lanes_instant(conn: sqlite3.Connection, row: sqlite3.Row, held: dict[str, float]) -> str | None:
    """`_next_instant` when some provider lanes are held: a held lane's messages not before it opens."""
    moment = clock.utcnow()
    instants = []
    for lane, at in conn.execute("SELECT coalesce(lane, 'other'), min(max(coalesce(retry_at, ''), coalesce(due_at, '')))"
                                 " FROM email_messages WHERE campaign_id = ? AND status = 'queued'"
                                 " GROUP BY coalesce(lane, 'other')", (row["id"],)).fetchall():
        if lane in held:
            at = max(at, clock.format_ts(moment + timedelta(seconds=held[lane])))
        instants.append(at)
    return min(instants, default=None)


def failure_summary(conn: sqlite3.Connection, campaign_id: str) -> str | None:
    """The `status_detail` of a campaign sent with failed messages: how many, and the most
    common reasons with their counts (each message keeps its own in `failure_reason`)."""
    reasons = conn.execute("SELECT failure_reason, count(*) AS n FROM email_messages"
                           " WHERE campaign_id = ? AND status = 'failed' GROUP BY failure_reason"
                           " ORDER BY n DESC, failure_reason", (campaign_id,)).fetchall()
    if not reasons:
        return None
    failed = sum(r["n"] for r in reasons)
    total = conn.execute("SELECT count(*) FROM email_messages WHERE campaign_id = ?", (campaign_id,)).fetchone()[0]
    shown = [f"{(r['failure_reason'] or 'no reason given').rstrip('.')} ({r['n']:,})" for r in reasons[:SHOWN_REASONS]]
    if len(reasons) > SHOWN_REASONS:
        shown.append(f"{len(reasons) - SHOWN_REASONS:,} other reasons")
    return FAILED_SUMMARY.format(failed=failed, total=total, reasons="; ".join(shown))
