"""The occurrences of recurring series: the `email.series_tick` job (services/email/series.py
makes, shows and steers the series; docs/campaigns.md "Recurring campaigns" has the rules).

    tick (due at the series' next_run_at)
      every occurrence from next_run_at up to now is due:
        the earlier ones  -> MISSED (the runner was down; at most series.MAX_MISSED_ROWS rows)
        the latest        -> claimed (its row, UNIQUE per series and occurrence), then
                             feed with nothing new -> SKIPPED
                             a copy of the campaign scheduled NOW -> SENT
                             scheduling refused -> FAILED (SKIPPED for an empty audience)
      next_run_at moves to the next occurrence (FINISHED when the rule has none), its tick queued

Idempotent: the claim, the copy and the move happen in one transaction, and a tick that
finds next_run_at moved (another runner, a replay) does nothing. The feed is fetched before
that transaction; a fetch that fails records the occurrence FAILED and raises a 502, so the
queue retries it with backoff, and when the job gives up (`tick_gave_up`) the series moves
on. A scheduler re-queues the tick of an ACTIVE series that is due with none queued.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from typing import Any

from marketing_cli import jobs
from marketing_cli.errors import MktError
from marketing_cli.kernel import clock, recurrence
from marketing_cli.kernel.ids import new_id
from marketing_cli.services.email import feeds, schedule, series, variant_html
from marketing_cli.storage.db import transaction

MISSED = "The job runner was not running at this time; the occurrence of {latest} was sent instead."
NOTHING_NEW = "The feed has no item newer than the last send: nothing was sent."
FEED_FAILED = "The feed could not be fetched: {reason}"
GAVE_UP = "The occurrence was given up after its job failed for good: {error}"
RULE_FAILED = "The series ended: its next occurrence could not be computed ({error})"


def _handled(conn: sqlite3.Connection, series_id: int, moment: datetime) -> bool:
    row = conn.execute("SELECT status FROM campaign_series_occurrences WHERE series_id = ? AND occurrence_at = ?",
                       (series_id, clock.format_ts(moment))).fetchone()
    return row is not None and row["status"] != "FAILED"


def _due(row: sqlite3.Row, now: datetime) -> tuple[recurrence.Rule, list[datetime]]:
    rule = series.rule_of(row)
    return rule, list(rule.between(clock.parse_ts(row["next_run_at"]), now))


@jobs.handler(series.JOB)
def run_tick(conn: sqlite3.Connection, payload: dict[str, Any]) -> None:
    """Handle every due occurrence of one series: the latest sent, the earlier ones MISSED."""
    row = conn.execute("SELECT * FROM campaign_series WHERE id = ?", (payload["series_id"],)).fetchone()
    if row is None or row["status"] != "ACTIVE" or row["next_run_at"] is None:
        return  # paused, stopped or ended: resume queues a new tick
    now = clock.utcnow()
    try:
        rule, due = _due(row, now)
    except MktError as exc:  # a rule too costly to compute: end the series rather than fail every pass
        with transaction(conn):
            _end(conn, row["id"], exc.message)
        return
    if not due:
        if clock.parse_ts(row["next_run_at"]) > now:
            series.enqueue_tick(conn, row)  # early (a repaired or moved job): the right one is queued
            return
        due = []  # next_run_at is not an occurrence of the rule any more: move on below
    latest = due[-1] if due else None
    feed = None
    if latest is not None and row["feed_url"] and not _handled(conn, row["id"], latest):
        try:
            feed = feeds.fetch_feed(row["feed_url"])
        except MktError as exc:
            with transaction(conn):
                series.record_occurrence(conn, row["id"], latest, "FAILED",
                                         reason=FEED_FAILED.format(reason=exc.message), replace=True)
            raise MktError(502, FEED_FAILED.format(reason=exc.message)) from None
    with transaction(conn):
        current = conn.execute("SELECT * FROM campaign_series WHERE id = ?", (row["id"],)).fetchone()
        if current["status"] != "ACTIVE" or current["next_run_at"] != row["next_run_at"]:
            return  # paused, stopped or handled by another runner meanwhile
        if latest is not None:
            _record_missed(conn, current, rule, due[:-1], latest)
            _occur(conn, current, rule, latest, feed)
        _advance(conn, current, rule, latest or now)


def _end(conn: sqlite3.Connection, series_id: int, error: str) -> None:
    conn.execute("UPDATE campaign_series SET status = 'FINISHED', next_run_at = NULL, status_detail = ?,"
                 " updated_at = ? WHERE id = ?", (RULE_FAILED.format(error=error.rstrip(".")) + ".", clock.now(),
                                                  series_id))


def _record_missed(conn: sqlite3.Connection, row: sqlite3.Row, rule: recurrence.Rule, missed: list[datetime],
                   latest: datetime) -> None:
    reason = MISSED.format(latest=rule.local(latest))
    for moment in missed[-series.MAX_MISSED_ROWS:]:
        series.record_occurrence(conn, row["id"], moment, "MISSED", reason=reason)


def _advance(conn: sqlite3.Connection, row: sqlite3.Row, rule: recurrence.Rule, handled: datetime) -> None:
    """Point the series at the first occurrence after `handled` (FINISHED when the rule has none)."""
    upcoming = rule.after(handled)
    conn.execute("UPDATE campaign_series SET next_run_at = ?, status = ?, updated_at = ? WHERE id = ?",
                 (clock.format_ts(upcoming) if upcoming else None, "ACTIVE" if upcoming else "FINISHED", clock.now(),
                  row["id"]))
    series.enqueue_tick(conn, conn.execute("SELECT * FROM campaign_series WHERE id = ?", (row["id"],)).fetchone())


def _claim(conn: sqlite3.Connection, series_id: int, moment: datetime) -> bool:
    """Take the occurrence's row (UNIQUE per series and occurrence) before making anything;
    False when another runner, or an earlier run of this job, already handled it."""
    now = clock.now()
    return conn.execute(
        "INSERT INTO campaign_series_occurrences (series_id, occurrence_at, status, created_at, updated_at)"
        " VALUES (?, ?, 'SENT', ?, ?) ON CONFLICT (series_id, occurrence_at) DO UPDATE SET status = 'SENT',"
        " reason = NULL, updated_at = excluded.updated_at WHERE campaign_series_occurrences.status = 'FAILED'"
        " RETURNING id", (series_id, clock.format_ts(moment), now, now)).fetchone() is not None


def _occur(conn: sqlite3.Connection, row: sqlite3.Row, rule: recurrence.Rule, moment: datetime,
           feed: feeds.Feed | None) -> None:
    """One occurrence: SKIPPED when a feed has nothing new, else a copy scheduled NOW (SENT),
    or FAILED / SKIPPED with the reason scheduling refused it. Runs inside the caller's transaction."""
    if not _claim(conn, row["id"], moment):
        return
    items: list[feeds.Item] = []
    seen: list[str] = json.loads(row["feed_seen"] or "[]")
    cutoff = clock.parse_ts(row["feed_cutoff"]) if row["feed_cutoff"] else None
    if feed is not None:
        items = feeds.new_items(feed, set(seen), cutoff)
        if not items:
            _set_outcome(conn, row["id"], moment, "SKIPPED", reason=NOTHING_NEW)
            return
    conn.execute("SAVEPOINT series_copy")
    try:
        copy_id = _copy_campaign(conn, row, rule, moment, feed, items)
        schedule.schedule_campaign(conn, row["workspace_id"], copy_id, {"schedule_type": "NOW"})
    except MktError as exc:
        conn.execute("ROLLBACK TO series_copy")
        conn.execute("RELEASE series_copy")
        status = "SKIPPED" if exc.message == schedule.NO_RECIPIENTS else "FAILED"
        _set_outcome(conn, row["id"], moment, status, reason=exc.message)
        return
    conn.execute("RELEASE series_copy")
    _set_outcome(conn, row["id"], moment, "SENT", campaign_id=copy_id, item_count=len(items) if feed else None)
    if feed is not None:
        guids, new_cutoff = feeds.remember(items, seen, cutoff, series.FEED_SEEN_KEEP)
        conn.execute("UPDATE campaign_series SET feed_seen = ?, feed_cutoff = ? WHERE id = ?",
                     (json.dumps(guids), new_cutoff, row["id"]))


def _set_outcome(conn: sqlite3.Connection, series_id: int, moment: datetime, status: str, *,
                 reason: str | None = None, campaign_id: str | None = None, item_count: int | None = None) -> None:
    conn.execute("UPDATE campaign_series_occurrences SET status = ?, reason = ?, campaign_id = ?, item_count = ?,"
                 " updated_at = ? WHERE series_id = ? AND occurrence_at = ?",
                 (status, reason, campaign_id, item_count, clock.now(), series_id, clock.format_ts(moment)))


def _copy_campaign(conn: sqlite3.Connection, row: sqlite3.Row, rule: recurrence.Rule, moment: datetime,
                   feed: feeds.Feed | None, items: list[feeds.Item]) -> str:
    """A DRAFT copy of the series' campaign for one occurrence, feed rendered in; its id."""
    source = conn.execute("SELECT * FROM campaigns WHERE id = ?", (row["campaign_id"],)).fetchone()
    copy_id, now = new_id(), clock.now()
    local = moment.astimezone(rule.zone).strftime("%Y-%m-%d %H:%M")
    name = f"{source['name']} ({local})"
    conn.execute("INSERT INTO campaigns (id, workspace_id, name, type, status, sender_identity_id, reply_to, audience,"
                 " created_at, updated_at) VALUES (?, ?, ?, ?, 'DRAFT', ?, ?, ?, ?, ?)",
                 (copy_id, row["workspace_id"], name[:255], source["type"], source["sender_identity_id"],
                  source["reply_to"], source["audience"], now, now))
    for variant in conn.execute("SELECT * FROM campaign_variants WHERE campaign_id = ? ORDER BY type",
                                (source["id"],)).fetchall():
        copy = series.variant_copy(variant, feed, items)
        variant_id = new_id()
        conn.execute("INSERT INTO campaign_variants (id, campaign_id, type, subject, preview_text, template_type,"
                     " body_json, body_html, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     (variant_id, copy_id, copy["type"], copy["subject"], copy["preview_text"], copy["template_type"],
                      copy["body_json"], copy["body_html"], now, now))
        if copy["body_html"]:
            variant_html.queue_preview(conn, row["workspace_id"], copy_id, variant_id)
    return copy_id


@jobs.gave_up(series.JOB)
def tick_gave_up(conn: sqlite3.Connection, job: dict[str, Any], error: str) -> None:
    """The tick failed for good (a feed down through every retry): the due occurrences are
    recorded (the latest FAILED with the reason) and the series moves on to its next one."""
    row = conn.execute("SELECT * FROM campaign_series WHERE id = ?", (job["series_id"],)).fetchone()
    if row is None or row["status"] != "ACTIVE" or row["next_run_at"] is None:
        return
    now = clock.utcnow()
    try:
        rule, due = _due(row, now)
    except MktError as exc:
        _end(conn, row["id"], exc.message)
        return
    if due:
        _record_missed(conn, row, rule, due[:-1], due[-1])
        series.record_occurrence(conn, row["id"], due[-1], "FAILED", reason=GAVE_UP.format(error=error),
                                 replace=True)
    _advance(conn, row, rule, due[-1] if due else now)


@jobs.scheduler
def requeue_stalled(conn: sqlite3.Connection) -> None:
    """An ACTIVE series that is due with no tick queued or running gets one (a lost job never stalls it)."""
    stalled = conn.execute(
        "SELECT s.* FROM campaign_series s WHERE s.status = 'ACTIVE' AND s.next_run_at <= ? AND NOT EXISTS"
        " (SELECT 1 FROM jobs j WHERE j.type = ? AND j.status IN ('queued', 'running')"
        " AND j.dedupe_key = ? || s.id || ':' || s.next_run_at)",
        (clock.now(), series.JOB, f"{series.JOB}:")).fetchall()
    for row in stalled:
        with transaction(conn):
            series.enqueue_tick(conn, row)
