"""Segments: dynamic groups of contacts defined by filter rules.

A segment stores its filters (validated and normalised by `segment_filters`) and the
last member count. Members are never materialised: `segment_members` and the audience
resolver evaluate the compiled filters live, so what a campaign sends to is who matches
at send time. `contact_count` is 0 at creation and kept by the `segment.count` job:
queued on creation, on `refresh`, and by a scheduler for every segment whose count is
older than STALE_AFTER (15 minutes). The job is idempotent: it counts and stores.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta
from typing import Any

from marketing_cli import jobs
from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.ids import parse_int_id
from marketing_cli.kernel.inputs import require_object, required_text
from marketing_cli.kernel.numbers import parse_signed
from marketing_cli.services.account import billing
from marketing_cli.services.contacts.segment_filters import (
    count_matching,
    filters_json,
    member_query,
    validate_filters,
)
from marketing_cli.services.contacts.view import render_contacts
from marketing_cli.storage.db import transaction

INVALID_BODY = "Invalid request body."
NAME_MISSING = "Please provide a name for this segment"
NAME_TOO_LONG = "Segment name must be 64 characters or less"
BILLING_LIMIT = "Billing limit error"
INVALID_ID = "Please provide a valid segment ID."
NOT_FOUND = "We were unable to find the segment."
COUNT_JOB = "segment.count"
STALE_AFTER = timedelta(minutes=15)
MAX_PAGE_SIZE = 250
MAX_PAGE = 1_000_000_000  # as contact search's: the offset of any page fits 64 bits


def count_key(segment_id: int) -> str:
    return f"{COUNT_JOB}:{segment_id}"


def segment_view(row: sqlite3.Row, counting: bool = False) -> dict[str, Any]:
    """The specification's segment, plus two extension members that say how fresh
    `contact_count` is: `counted_at` (when it was counted; null before the first count) and
    `counting` (a recount is queued or running)."""
    return {
        "id": row["id"],
        "name": row["name"],
        "filters": json.loads(row["filters"]),
        "contact_count": row["contact_count"],
        "counted_at": row["counted_at"],
        "counting": counting,
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }


def _counting(conn: sqlite3.Connection, segment_ids: list[int]) -> set[int]:
    """Which of these segments have a count job queued or running."""
    if not segment_ids:
        return set()
    keys = [count_key(i) for i in segment_ids]
    marks = ", ".join("?" * len(keys))
    found = conn.execute(f"SELECT dedupe_key FROM jobs WHERE dedupe_key IN ({marks}) AND status IN ('queued', 'running')",
                         keys).fetchall()
    return {int(row[0].rsplit(":", 1)[1]) for row in found}


def _views(conn: sqlite3.Connection, rows: list[sqlite3.Row]) -> list[dict[str, Any]]:
    counting = _counting(conn, [r["id"] for r in rows])
    return [segment_view(r, r["id"] in counting) for r in rows]


def parse_segment_id(value: Any) -> int:
    """A segment id from a path or an option: a positive integer, else 400."""
    return parse_int_id(value, INVALID_ID)


def _row(conn: sqlite3.Connection, workspace_id: int, segment_id: Any) -> sqlite3.Row:
    segment_id = parse_segment_id(segment_id)
    row = conn.execute("SELECT * FROM segments WHERE id = ? AND workspace_id = ?",
                       (segment_id, workspace_id)).fetchone()
    if row is None:
        raise MktError(404, NOT_FOUND)
    return row


def _check_name(name: Any) -> str:
    return required_text(name, "name", missing=NAME_MISSING, too_long=NAME_TOO_LONG, max_length=64)


def create_segment(conn: sqlite3.Connection, workspace_id: int, body: Any) -> dict[str, Any]:
    """POST /v1/segments: validate, check the plan's allowance, store, queue the count."""
    body = require_object(body, INVALID_BODY)
    name = _check_name(body.get("name"))
    now = clock.now()
    with transaction(conn):
        filters = validate_filters(conn, workspace_id, body.get("filters"))
        if billing.remaining(conn, workspace_id, "segments") == 0:
            raise billing.limit_error(conn, workspace_id, "segments", BILLING_LIMIT)
        segment_id = conn.execute(
            "INSERT INTO segments (workspace_id, name, filters, contact_count, created_at, updated_at)"
            " VALUES (?, ?, ?, 0, ?, ?)",
            (workspace_id, name, filters_json(filters), now, now),
        ).lastrowid
        enqueue_count(conn, workspace_id, segment_id)
        return _views(conn, [_row(conn, workspace_id, segment_id)])[0]


def update_segment(conn: sqlite3.Connection, workspace_id: int, segment_id: Any, body: Any) -> dict[str, Any]:
    """PATCH /v1/segments/:id: `name` and `filters` as create checks them (its messages); a member
    left out is kept. New filters queue a recount, as creation does; `counting` says so until it
    has run (the count shown is the old one meanwhile)."""
    body = require_object(body, INVALID_BODY)
    with transaction(conn):
        row = _row(conn, workspace_id, segment_id)
        # A member left out or null (docs/api.md: an optional member sent as null is left out) is kept.
        name = _check_name(body["name"]) if body.get("name") is not None else row["name"]
        filters = filters_json(validate_filters(conn, workspace_id, body["filters"])) \
            if body.get("filters") is not None else row["filters"]
        conn.execute("UPDATE segments SET name = ?, filters = ?, updated_at = ? WHERE id = ?",
                     (name, filters, clock.now(), row["id"]))
        if filters != row["filters"]:
            enqueue_count(conn, workspace_id, row["id"])
        return _views(conn, [_row(conn, workspace_id, row["id"])])[0]


def list_segments(conn: sqlite3.Connection, workspace_id: int) -> list[dict[str, Any]]:
    """GET /v1/segments: every segment of the workspace, oldest first (the plan bounds how many)."""
    rows = conn.execute("SELECT * FROM segments WHERE workspace_id = ? ORDER BY id", (workspace_id,))
    return _views(conn, rows.fetchall())


def get_segment(conn: sqlite3.Connection, workspace_id: int, segment_id: Any) -> dict[str, Any]:
    """GET /v1/segments/:id."""
    return _views(conn, [_row(conn, workspace_id, segment_id)])[0]


def enqueue_count(conn: sqlite3.Connection, workspace_id: int, segment_id: int) -> int:
    """Queue a member count of the segment (one queued count per segment at most)."""
    return jobs.enqueue(conn, COUNT_JOB, {"segment_id": segment_id}, workspace_id=workspace_id,
                        dedupe_key=count_key(segment_id))


def refresh_segment(conn: sqlite3.Connection, workspace_id: int, segment_id: Any) -> dict[str, Any]:
    """Queue a recount now; answers {"segment_id", "job_id"} (the job runs in the worker)."""
    with transaction(conn):
        row = _row(conn, workspace_id, segment_id)
        job_id = enqueue_count(conn, workspace_id, row["id"])
    return {"segment_id": row["id"], "job_id": job_id}


def recount_segment(conn: sqlite3.Connection, workspace_id: int, segment_id: int) -> dict[str, Any] | None:
    """Count the members live and store the count; None when the segment no longer exists.

    The count is one read statement outside the write lock; only the store takes it.
    """
    row = conn.execute("SELECT * FROM segments WHERE id = ? AND workspace_id = ?",
                       (segment_id, workspace_id)).fetchone()
    if row is None:
        return None
    started = clock.now()
    count = count_matching(conn, workspace_id, json.loads(row["filters"]))
    with transaction(conn):
        conn.execute(
            "UPDATE segments SET contact_count = ?, counted_at = ? WHERE id = ? AND workspace_id = ?"
            " AND (counted_at IS NULL OR counted_at <= ?)",
            (count, started, segment_id, workspace_id, started),
        )
        row = conn.execute("SELECT * FROM segments WHERE id = ?", (segment_id,)).fetchone()
    return _views(conn, [row])[0] if row is not None else None


@jobs.handler(COUNT_JOB)
def _count_job(conn: sqlite3.Connection, job: dict[str, Any]) -> None:
    recount_segment(conn, job["workspace_id"], job["segment_id"])


@jobs.scheduler
def enqueue_stale_counts(conn: sqlite3.Connection) -> int:
    """Queue a recount of every segment counted over STALE_AFTER ago (and not tried since)."""
    cutoff = clock.format_ts(clock.utcnow() - STALE_AFTER)
    with transaction(conn):
        rows = conn.execute(
            "SELECT s.id, s.workspace_id FROM segments s WHERE COALESCE(s.counted_at, s.created_at) < ?"
            " AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.dedupe_key = ? || s.id AND j.updated_at >= ?)"
            " ORDER BY s.id LIMIT 1000",
            (cutoff, f"{COUNT_JOB}:", cutoff),
        ).fetchall()
        for row in rows:
            enqueue_count(conn, row["workspace_id"], row["id"])
    return len(rows)


def _page_number(value: Any, name: str, low: int, high: int | None) -> int:
    if isinstance(value, str):
        value = parse_signed(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"{low} or more"
        raise MktError(400, f"The {name} must be an integer {bound}.")
    return value


def segment_members(conn: sqlite3.Connection, workspace_id: int, segment_id: Any, *, page: Any = 1,
                    limit: Any = 50) -> dict[str, Any]:
    """The segment's current members (filters evaluated live), a page at a time, oldest first.

    Contacts have the search result shape (POST /v1/contacts/search), as does pagination.
    """
    page = _page_number(page, "page", 1, MAX_PAGE)
    limit = _page_number(limit, "limit", 1, MAX_PAGE_SIZE)
    row = _row(conn, workspace_id, segment_id)
    filters = json.loads(row["filters"])
    query = member_query(conn, workspace_id, filters, "c.*")
    rows = conn.execute(f"{query.sql} ORDER BY c.id LIMIT ? OFFSET ?",
                        (*query.params, limit, (page - 1) * limit)).fetchall()
    total = count_matching(conn, workspace_id, filters)
    return {
        "contacts": render_contacts(conn, workspace_id, rows, "search"),
        "pagination": {"page": page, "limit": limit, "total": total},
    }
