"""Expansion: the `sms.expand` job that turns a QUEUED campaign into charged messages and
hands them to the provider (docs/sms.md "Expansion and crash safety").

It runs in two phases, each in batches (batches.py):

1. Recipients (recipients.py): the audience becomes message rows, and each batch's charge
   is written to the ledger in the same transaction: no recipient is ever charged twice.
2. Hand-off (handoff.py): pending messages go to the workspace's provider, each claimed
   batch through the quiet-hours gate first (gate.py): messages that may not be
   texted now wait as 'held', and the job is queued again for the instant the first may go.

Then, once no message is pending or held, the campaign is COMPLETED. The job checks the
campaign's status inside every batch's transaction, so a cancel stops it at the next batch.

This module is the job itself: its handlers (`sms.expand`; `sms.send_helper`, the siblings
that share a large campaign's hand-off), its return for held messages and zones not yet
due, the campaign's end, and what a job that gives up leaves (expand_gave_up).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from marketing_cli import jobs
from marketing_cli.kernel import clock
from marketing_cli.services.sms import campaigns
from marketing_cli.services.sms.batches import batch_size
from marketing_cli.services.sms.handoff import hand_off
from marketing_cli.services.sms.recipients import expand_recipients
from marketing_cli.storage.db import transaction

JOB_TYPE = "sms.expand"  # queued by schedule.py, one per campaign (campaigns.job_key)
HELPER_JOB = "sms.send_helper"  # its siblings on a large campaign (MKT_SEND_WORKERS)


@jobs.handler(JOB_TYPE)
def expand_job(conn: sqlite3.Connection, job: dict[str, Any]) -> None:
    """Expand a QUEUED campaign and hand its messages over; idempotent (a re-run resumes)."""
    campaign = conn.execute("SELECT * FROM sms_campaigns WHERE id = ?", (job["campaign_id"],)).fetchone()
    if campaign is None or campaign["status"] != "QUEUED":
        return  # cancelled (or deleted) meanwhile: nothing to do
    if campaign["expanded_at"] is None and not expand_recipients(conn, campaign):
        return
    _call_helpers(conn, campaign)
    _hand_off_and_finish(conn, campaign, helper=False)


@jobs.handler(HELPER_JOB)
def help_hand_off(conn: sqlite3.Connection, job: dict[str, Any]) -> None:
    """A sibling of a campaign's sms.expand job once it is expanded: claims batches from the same
    pending messages, and ends when it finds none (the expand job waits for held ones and zones)."""
    campaign = conn.execute("SELECT * FROM sms_campaigns WHERE id = ?", (job["campaign_id"],)).fetchone()
    if campaign is None or campaign["status"] != "QUEUED" or campaign["expanded_at"] is None:
        return
    _hand_off_and_finish(conn, campaign, helper=True)


def _call_helpers(conn: sqlite3.Connection, campaign: sqlite3.Row) -> None:
    """Queue the hand-off's helpers (MKT_SEND_WORKERS - 1, jobs.send_workers) when more messages
    are pending than one batch, and at least jobs.HELPERS_FROM."""
    workers = jobs.send_workers(conn)
    if workers <= 1 or campaign["automation_id"] is not None:
        return
    enough = max(jobs.HELPERS_FROM, batch_size() + 1)
    pending = conn.execute("SELECT count(*) FROM (SELECT 1 FROM sms_messages WHERE campaign_id = ?"
                           " AND status = 'pending' LIMIT ?) p", (campaign["id"], enough)).fetchone()[0]
    if pending < enough:
        return
    with transaction(conn):
        for n in range(1, workers):
            jobs.enqueue(conn, HELPER_JOB, {"campaign_id": campaign["id"]}, workspace_id=campaign["workspace_id"],
                         dedupe_key=f"{HELPER_JOB}:{campaign['id']}:{n}", max_attempts=1)


def _hand_off_and_finish(conn: sqlite3.Connection, campaign: sqlite3.Row, *, helper: bool) -> None:
    handed = hand_off(conn, campaign)
    if handed is False:
        return
    with transaction(conn):
        # Messages held by quiet hours, waiting for their zone's local time, or claimed by
        # another worker: the expand job comes back when the first of them may go (the campaign
        # stays QUEUED and cancellable); a helper just ends. Whichever job finds none finishes
        # the campaign, once: the status is read and changed in this one transaction.
        held_until = handed if isinstance(handed, str) else None
        now = clock.now()
        claimed = conn.execute("SELECT min(coalesce(claim_expires_at, '')) FROM sms_messages WHERE campaign_id = ?"
                               " AND status = 'sending'", (campaign["id"],)).fetchone()[0]
        ready = conn.execute("SELECT 1 FROM sms_messages WHERE campaign_id = ? AND status = 'pending'"
                             " AND (due_at IS NULL OR due_at <= ?) LIMIT 1", (campaign["id"], now)).fetchone()
        at = min(filter(None, (held_until, _next_zone(conn, campaign), None if claimed is None else claimed or now,
                               now if ready else None)), default=None)
        if at is not None:
            if not helper:
                _come_back(conn, campaign, at)
            return
        conn.execute("UPDATE sms_campaigns SET status = 'COMPLETED', completed_at = ?, updated_at = ?"
                     " WHERE id = ? AND status = 'QUEUED'", (now, now, campaign["id"]))


def _next_zone(conn: sqlite3.Connection, campaign: sqlite3.Row) -> str | None:
    """A local-time campaign's next zone instant: its earliest message still waiting for its
    zone's time (written and charged, refunded on cancel). None when nothing waits."""
    if not campaign["local_time"]:
        return None
    return conn.execute("SELECT min(due_at) FROM sms_messages WHERE campaign_id = ? AND status = 'pending'"
                        " AND due_at IS NOT NULL", (campaign["id"],)).fetchone()[0]


def _come_back(conn: sqlite3.Connection, campaign: sqlite3.Row, at: str | None) -> bool:
    """The campaign's job again at `at` while the campaign is still QUEUED; False when there is
    nothing to wait for."""
    if at is None or conn.execute("SELECT status FROM sms_campaigns WHERE id = ?",
                                  (campaign["id"],)).fetchone()[0] != "QUEUED":
        return False
    jobs.enqueue(conn, JOB_TYPE, {"campaign_id": campaign["id"]}, workspace_id=campaign["workspace_id"],
                 dedupe_key=campaigns.job_key(campaign["id"]), run_at=at, max_attempts=10)
    return True


@jobs.gave_up(JOB_TYPE)
def expand_gave_up(conn: sqlite3.Connection, job: dict[str, Any], error: str) -> None:
    """The job failed for good (a permanent error such as a bad MKT_SMS_RATE or a merge tag the
    workspace no longer defines, or its last attempt): no run will come to finish the campaign,
    which would wait in QUEUED forever holding its reservation. It is CANCELLED with the error
    in `status_detail`, and what was charged but never handed to a provider is refunded."""
    row = conn.execute("SELECT * FROM sms_campaigns WHERE id = ?", (job["campaign_id"],)).fetchone()
    if row is None or row["status"] != "QUEUED":
        return
    detail = campaigns.JOB_FAILED.format(error=error if error.endswith(".") else error + ".")
    campaigns.stop_queued(conn, row, "stopped (its job failed)", detail)
