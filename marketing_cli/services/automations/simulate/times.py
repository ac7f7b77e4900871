"""The simulated clock: the instants a request gives (`until`, an event's `at`), the
contact's zone, and the next instant the contact's wall clock reads a time of day.

The clock starts now and stops at `until`; waits move it (steps.py). Each step is listed
with its UTC time and its local time in the contact's zone (walk.Walk.local), found as the
resolver of local-time campaigns finds it: the `timezone` field, the phone number's zone,
the located zone, the workspace's zone (services/contacts/zones.py), here for one contact in
Python rather than over an audience in SQL.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def read_instant(value: Any, member: str, *, end_of_day: bool = False) -> datetime:
    """RFC 3339 UTC, or a date (YYYY-MM-DD: its start, or its end with `end_of_day`)."""
    if isinstance(value, str):
        try:
            return clock.parse_ts(value)
        except ValueError:
            pass
        try:
            day = date.fromisoformat(value.strip())
        except ValueError:
            pass
        else:
            moment = datetime.combine(day, time(), UTC)
            return moment + timedelta(days=1, microseconds=-1000) if end_of_day else moment
    raise MktError(400, f"The member '{member}' must be a date (YYYY-MM-DD) or an RFC 3339 time such as "
                        "2026-01-31T09:00:00Z.")


def contact_zone(conn: sqlite3.Connection, workspace_id: int, contact: sqlite3.Row, at: datetime) -> tuple[str, str]:
    """(zone, source) of one contact at `at`, in the order of zones.Zones (field, phone,
    location, workspace), for one contact in Python rather than over an audience in SQL."""
    from marketing_cli.kernel.localtime import canonical_zone
    from marketing_cli.services.account.workspaces import workspace_timezone
    from marketing_cli.services.contacts.phone_zones import phone_zone
    from marketing_cli.services.contacts.values import TIMEZONE_TAG

    row = conn.execute("SELECT id FROM fields WHERE workspace_id = ? AND merge_tag = ?",
                       (workspace_id, TIMEZONE_TAG)).fetchone()
    if row is not None:
        value = json.loads(contact["data"] or "{}").get(str(row[0]))
        if isinstance(value, str) and canonical_zone(value):
            return value, "field"
    if contact["phone"]:
        found = phone_zone(contact["phone"], at)
        if found:
            return found, "phone"
    if contact["located_timezone"]:
        return contact["located_timezone"], "location"
    return workspace_timezone(conn, workspace_id), "workspace"


def next_local_time(at: datetime, zone_name: str, hhmm: str, weekdays: list[str] | None) -> datetime:
    """The first instant at or after `at` when the clock in the zone reads `hhmm` on one of the weekdays."""
    from marketing_cli.kernel.localtime import local_date, local_instant

    allowed = {WEEKDAYS.index(d[:3].lower()) for d in weekdays or WEEKDAYS if d[:3].lower() in WEEKDAYS}
    day = local_date(at, zone_name)
    for offset in range(0, 15):
        candidate_day = day + timedelta(days=offset)
        if allowed and candidate_day.weekday() not in allowed:
            continue
        candidate = local_instant(candidate_day, hhmm, zone_name)
        if candidate >= at:
            return candidate
    return at
