"""Recurring campaigns: a series sends a copy of a DRAFT campaign at each occurrence of a rule.

    POST /v1/campaigns/:id/series {rrule, feed_url?}  ->  series ACTIVE, its first tick job queued
    email.series_tick (due at the next occurrence)   ->  one copy of the campaign, scheduled NOW
                                                         (its own statistics; the audience as it
                                                         stands then), the next tick queued
    pause / resume / stop                                 ACTIVE <-> PAUSED; STOPPED; FINISHED when
                                                          the rule ends (COUNT, UNTIL)

The campaign stays a DRAFT and is the series' definition: editing it changes the copies
still to come; scheduling it on its own is refused while the series lives.

Occurrences. The rule is read in the workspace's zone (kernel/recurrence.py: DST gaps,
UNTIL in UTC, last day of the month). Each occurrence the runner handles is one row of
`campaign_series_occurrences`, UNIQUE (series, occurrence), written in the same
transaction as the copy: a replayed job, or two runners, find the row and make no second
copy. Outcomes: SENT (a copy was made and queued), MISSED (the runner was not running at
that time; see below), SKIPPED (a feed with nothing new, an audience with nobody in it, or
a pause), FAILED (the copy could not be scheduled, or the feed could not be fetched: the
reason is kept).

Outages. When a tick runs late, every occurrence from the series' `next_run_at` up to now
is due: only the latest is sent, the earlier ones are recorded MISSED (at most
MAX_MISSED_ROWS of them), so a runner that was down three weeks sends one weekly copy,
not three.

Jobs. One `email.series_tick` job per occurrence, its dedupe key naming the series and the
occurrence; services/email/occurrences.py runs it (copies, outages, feeds, retries).
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from typing import Any

from marketing_cli import jobs
from marketing_cli.errors import MktError
from marketing_cli.kernel import clock, recurrence
from marketing_cli.kernel.ids import parse_int_id
from marketing_cli.kernel.inputs import UNKNOWN_MEMBER, require_object, type_error
from marketing_cli.services.account import workspaces
from marketing_cli.services.email import campaigns, feeds, schedule, template_url
from marketing_cli.storage.db import transaction

JOB = "email.series_tick"
STATUSES = ("ACTIVE", "PAUSED", "STOPPED", "FINISHED")
OCCURRENCE_STATUSES = ("SENT", "MISSED", "SKIPPED", "FAILED")
BODY_MEMBERS = ("rrule", "feed_url")
PREVIEW_MEMBERS = ("rrule", "count")
DEFAULT_PREVIEW = 10
MAX_MISSED_ROWS = 1_000
SHOWN_OCCURRENCES = 100
UPCOMING = 5
FEED_SEEN_KEEP = 1_000
MAX_URL = 2_000

INVALID_BODY = "Invalid request body."
NOT_DRAFT = "Only draft campaigns can be made recurring."
ALREADY = "This campaign already has a recurring series ({id}): stop it first (mkt campaigns series stop {id})."
FEED_URL_LONG = f"The feed_url must be {MAX_URL} characters or less."
NOT_FOUND = "We could not find the series you are looking for."
STATUS_INVALID = "Invalid status '{value}'. Use ACTIVE, PAUSED, STOPPED or FINISHED."
ONLY_ACTIVE = "Only active series can be paused."
ONLY_PAUSED = "Only paused series can be resumed."
ENDED = "This series has already ended ({status})."
PAUSED_REASON = "The series was paused."


def workspace_zone(conn: sqlite3.Connection, workspace_id: int) -> str:
    """The workspace's time zone (an IANA name; `mkt workspace update --timezone`, UTC unless set),
    where a series' rule is read."""
    return workspaces.workspace_timezone(conn, workspace_id)


# --- input ---------------------------------------------------------------------------------

def _check_members(body: dict[str, Any], allowed: tuple[str, ...]) -> None:
    for name in body:
        if name not in allowed:
            raise MktError(400, UNKNOWN_MEMBER.format(member=str(name)[:100]))  # as the HTTP face's check says


def _feed_url(body: dict[str, Any]) -> str | None:
    value = body.get("feed_url")
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise type_error("feed_url", str)
    value = value.strip()
    if len(value) > MAX_URL:
        raise MktError(400, FEED_URL_LONG)
    if not template_url.has_http_scheme(value):
        raise MktError(400, template_url.BAD_SCHEME)
    return value


def _rule_text(body: dict[str, Any]) -> str:
    value = body.get("rrule")
    if value is not None and not isinstance(value, str):
        raise type_error("rrule", str)
    return recurrence.normalize_rule(value)


def rule_of(row: sqlite3.Row) -> recurrence.Rule:
    return recurrence.Rule(row["rrule"], row["timezone"], clock.parse_ts(row["dtstart"]))


# --- views -----------------------------------------------------------------------------------

def _when(rule: recurrence.Rule, moment: datetime | str | None) -> dict[str, str] | None:
    if moment is None:
        return None
    instant = clock.parse_ts(moment) if isinstance(moment, str) else moment
    return {"at": clock.format_ts(instant), "local": rule.local(instant)}


def _occurrence_view(rule: recurrence.Rule, row: sqlite3.Row) -> dict[str, Any]:
    return {"occurrence_at": row["occurrence_at"], "local": rule.local(clock.parse_ts(row["occurrence_at"])),
            "status": row["status"], "campaign_id": row["campaign_id"], "reason": row["reason"],
            "item_count": row["item_count"], "recorded_at": row["updated_at"]}


def series_view(conn: sqlite3.Connection, row: sqlite3.Row, *, detail: bool = False) -> dict[str, Any]:
    """A series: its rule, zone, status, next occurrence (UTC and local), counts per outcome
    and the last occurrence; with `detail`, also the occurrences (newest first) and the next ones."""
    rule = rule_of(row)
    name = conn.execute("SELECT name FROM campaigns WHERE id = ?", (row["campaign_id"],)).fetchone()
    counts = dict.fromkeys(OCCURRENCE_STATUSES, 0)
    for status, n in conn.execute("SELECT status, count(*) FROM campaign_series_occurrences WHERE series_id = ?"
                                  " GROUP BY status", (row["id"],)):
        counts[status] = n
    occurrences = conn.execute(
        "SELECT * FROM campaign_series_occurrences WHERE series_id = ? ORDER BY occurrence_at DESC LIMIT ?",
        (row["id"], SHOWN_OCCURRENCES if detail else 1)).fetchall()
    next_run = _when(rule, row["next_run_at"]) if row["status"] in ("ACTIVE", "PAUSED") else None
    view: dict[str, Any] = {
        "id": row["id"], "campaign_id": row["campaign_id"], "name": name["name"] if name else None,
        "rrule": row["rrule"], "timezone": row["timezone"], "feed_url": row["feed_url"], "status": row["status"],
        "status_detail": row["status_detail"], "next_occurrence": next_run, "counts": counts,
        "last_occurrence": _occurrence_view(rule, occurrences[0]) if occurrences else None,
        "created_at": row["created_at"], "updated_at": row["updated_at"],
    }
    if detail:
        view["occurrences"] = [_occurrence_view(rule, r) for r in occurrences]
        start = clock.parse_ts(row["next_run_at"]) if next_run else None
        view["upcoming"] = ([_when(rule, start)] + [_when(rule, m) for m in rule.upcoming(start, UPCOMING - 1)]
                            if start else [])
    return view


def series_row(conn: sqlite3.Connection, workspace_id: int, series_id: Any) -> sqlite3.Row:
    series_id = parse_int_id(series_id, NOT_FOUND, 404)
    row = conn.execute("SELECT * FROM campaign_series WHERE id = ? AND workspace_id = ?",
                       (series_id, workspace_id)).fetchone()
    if row is None:
        raise MktError(404, NOT_FOUND)
    return row


# --- create and preview ----------------------------------------------------------------------

def preview_series(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any, body: Any) -> dict[str, Any]:
    """POST /v1/campaigns/:id/series/preview {rrule, count?}: the next occurrences, UTC and local; writes nothing."""
    campaigns.campaign_row(conn, workspace_id, campaign_id)
    body = require_object(body, INVALID_BODY)
    _check_members(body, PREVIEW_MEMBERS)
    text = _rule_text(body)
    count = recurrence.preview_count(body["count"] if body.get("count") is not None else DEFAULT_PREVIEW)
    now = clock.utcnow()
    zone = workspace_zone(conn, workspace_id)
    rule = recurrence.Rule(text, zone, recurrence.start_after(now))
    rule.check_spacing(now)
    return {"rrule": text, "timezone": zone,
            "occurrences": [_when(rule, m) for m in rule.upcoming(now, count)]}


def _feed_baseline(row: sqlite3.Row, feed_url: str, conn: sqlite3.Connection,
                   workspace_id: int) -> tuple[list[str], str | None]:
    """Fetch the feed once (it must be one), check the variants as a copy would carry them;
    the items it holds now count as sent (the first occurrence sends what comes after)."""
    feed = feeds.fetch_feed(feed_url)
    variants = conn.execute("SELECT * FROM campaign_variants WHERE campaign_id = ? ORDER BY type",
                            (row["id"],)).fetchall()
    if not any(feeds.has_block(v["body_html"] or "") for v in variants):
        raise MktError(400, feeds.NO_BLOCK)
    sample = feeds.new_items(feed, set(), None)
    schedule.check_ready(conn, workspace_id, row, [variant_copy(v, feed, sample) for v in variants])
    return feeds.remember(feed.items, [], None, FEED_SEEN_KEEP)


def create_series(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any, body: Any) -> dict[str, Any]:
    """POST /v1/campaigns/:id/series {rrule, feed_url?}: the DRAFT campaign recurs; the first tick is queued."""
    row = campaigns.campaign_row(conn, workspace_id, campaign_id)
    body = require_object(body, INVALID_BODY)
    _check_members(body, BODY_MEMBERS)
    text = _rule_text(body)
    feed_url = _feed_url(body)
    now = clock.utcnow()
    zone = workspace_zone(conn, workspace_id)
    dtstart = recurrence.start_after(now)
    rule = recurrence.Rule(text, zone, dtstart)
    rule.check_spacing(now)
    if row["status"] != "DRAFT":
        raise MktError(400, NOT_DRAFT)
    _check_no_series(conn, row["id"])
    seen, cutoff = _feed_baseline(row, feed_url, conn, workspace_id) if feed_url else ([], None)
    with transaction(conn):
        row = campaigns.campaign_row(conn, workspace_id, row["id"])
        if row["status"] != "DRAFT":
            raise MktError(400, NOT_DRAFT)
        _check_no_series(conn, row["id"])
        if not feed_url:
            schedule.check_ready(conn, workspace_id, row)
        first = rule.after(now)
        stamp = clock.format_ts(now)
        series_id = conn.execute(
            "INSERT INTO campaign_series (workspace_id, campaign_id, rrule, timezone, dtstart, feed_url, feed_seen,"
            " feed_cutoff, status, next_run_at, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'ACTIVE', ?, ?, ?)",
            (workspace_id, row["id"], text, zone, clock.format_ts(dtstart), feed_url,
             json.dumps(seen) if feed_url else None, cutoff, clock.format_ts(first), stamp, stamp)).lastrowid
        created = conn.execute("SELECT * FROM campaign_series WHERE id = ?", (series_id,)).fetchone()
        enqueue_tick(conn, created)
        return series_view(conn, created, detail=True)


def _check_no_series(conn: sqlite3.Connection, campaign_id: str) -> None:
    live = conn.execute("SELECT id FROM campaign_series WHERE campaign_id = ? AND status IN ('ACTIVE', 'PAUSED')",
                        (campaign_id,)).fetchone()
    if live is not None:
        raise MktError(400, ALREADY.format(id=live["id"]))


# --- list, show, pause, resume, stop ---------------------------------------------------------

def list_series(conn: sqlite3.Connection, workspace_id: int, status: Any = None) -> dict[str, Any]:
    """GET /v1/campaign-series: the workspace's series, newest first (optionally of one status)."""
    where, params = "workspace_id = ?", [workspace_id]
    if status is not None and status != "":
        if not isinstance(status, str) or status.strip().upper() not in STATUSES:
            raise MktError(400, STATUS_INVALID.format(value=str(status)[:50]))
        where += " AND status = ?"
        params.append(status.strip().upper())
    rows = conn.execute(f"SELECT * FROM campaign_series WHERE {where} ORDER BY id DESC", params).fetchall()
    return {"series": [series_view(conn, r) for r in rows]}


def get_series(conn: sqlite3.Connection, workspace_id: int, series_id: Any) -> dict[str, Any]:
    """GET /v1/campaign-series/:id: the series with its occurrences and the next ones."""
    return series_view(conn, series_row(conn, workspace_id, series_id), detail=True)


def pause_series(conn: sqlite3.Connection, workspace_id: int, series_id: Any) -> dict[str, Any]:
    """POST /v1/campaign-series/:id/pause: no copy is made until it is resumed."""
    with transaction(conn):
        row = series_row(conn, workspace_id, series_id)
        if row["status"] in ("STOPPED", "FINISHED"):
            raise MktError(400, ENDED.format(status=row["status"]))
        if row["status"] != "ACTIVE":
            raise MktError(400, ONLY_ACTIVE)
        now = clock.now()
        conn.execute("UPDATE campaign_series SET status = 'PAUSED', paused_at = ?, updated_at = ? WHERE id = ?",
                     (now, now, row["id"]))
        return get_series(conn, workspace_id, row["id"])


def resume_series(conn: sqlite3.Connection, workspace_id: int, series_id: Any) -> dict[str, Any]:
    """POST /v1/campaign-series/:id/resume: occurrences that passed while paused are recorded
    SKIPPED (none is sent late); the series goes on from its next occurrence."""
    with transaction(conn):
        row = series_row(conn, workspace_id, series_id)
        if row["status"] in ("STOPPED", "FINISHED"):
            raise MktError(400, ENDED.format(status=row["status"]))
        if row["status"] != "PAUSED":
            raise MktError(400, ONLY_PAUSED)
        now = clock.utcnow()
        rule = rule_of(row)
        passed = list(rule.between(clock.parse_ts(row["next_run_at"]), now)) if row["next_run_at"] else []
        for moment in passed[-MAX_MISSED_ROWS:]:
            record_occurrence(conn, row["id"], moment, "SKIPPED", reason=PAUSED_REASON)
        upcoming = rule.after(now)
        conn.execute("UPDATE campaign_series SET status = ?, paused_at = NULL, next_run_at = ?, updated_at = ?"
                     " WHERE id = ?", ("ACTIVE" if upcoming else "FINISHED",
                                       clock.format_ts(upcoming) if upcoming else None, clock.format_ts(now),
                                       row["id"]))
        row = conn.execute("SELECT * FROM campaign_series WHERE id = ?", (row["id"],)).fetchone()
        enqueue_tick(conn, row)
        return series_view(conn, row, detail=True)


def stop_series(conn: sqlite3.Connection, workspace_id: int, series_id: Any) -> dict[str, Any]:
    """POST /v1/campaign-series/:id/stop: no further copy; final. Copies already made are
    campaigns of their own (cancel them with `mkt campaigns cancel`)."""
    with transaction(conn):
        row = series_row(conn, workspace_id, series_id)
        if row["status"] not in ("ACTIVE", "PAUSED"):
            raise MktError(400, ENDED.format(status=row["status"]))
        conn.execute("UPDATE campaign_series SET status = 'STOPPED', next_run_at = NULL, updated_at = ?"
                     " WHERE id = ?", (clock.now(), row["id"]))
        return get_series(conn, workspace_id, row["id"])


# --- shared with the tick (services/email/occurrences.py) ----------------------------------------

def enqueue_tick(conn: sqlite3.Connection, row: sqlite3.Row) -> None:
    if row["status"] != "ACTIVE" or row["next_run_at"] is None:
        return
    jobs.enqueue(conn, JOB, {"series_id": row["id"]}, workspace_id=row["workspace_id"],
                 dedupe_key=f"{JOB}:{row['id']}:{row['next_run_at']}", run_at=row["next_run_at"])


def record_occurrence(conn: sqlite3.Connection, series_id: int, moment: datetime, status: str, *,
            reason: str | None = None, campaign_id: str | None = None, item_count: int | None = None,
            replace: bool = False) -> None:
    """One occurrence's outcome. An existing row is kept, unless `replace` and it is FAILED
    (a retried feed fetch that now succeeds, or fails again with a newer reason)."""
    now = clock.now()
    conn.execute(
        "INSERT INTO campaign_series_occurrences (series_id, occurrence_at, status, campaign_id, reason, item_count,"
        " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (series_id, occurrence_at) DO UPDATE SET status = excluded.status,"
        " campaign_id = excluded.campaign_id, reason = excluded.reason, item_count = excluded.item_count,"
        " updated_at = excluded.updated_at WHERE ? = 1 AND campaign_series_occurrences.status = 'FAILED'",
        (series_id, clock.format_ts(moment), status, campaign_id, reason, item_count, now, now, int(replace)))


def variant_copy(variant: sqlite3.Row, feed: feeds.Feed | None, items: list[feeds.Item]) -> dict[str, Any]:
    copy = dict(variant)
    if feed is not None:
        copy["body_html"] = feeds.render_html(copy["body_html"] or "", feed, items)
        for key in ("subject", "preview_text"):
            if copy[key]:
                copy[key] = feeds.render_text(copy[key], feed, items)
        if copy["subject"]:
            copy["subject"] = copy["subject"][:90]
    return copy


