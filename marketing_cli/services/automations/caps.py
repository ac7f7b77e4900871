"""Frequency caps: at most N automated messages per contact per rolling window, per channel.

The workspace's setting (`mkt automations caps`, GET/PUT /v1/automations/caps) holds one
optional cap for email and one for SMS: {"max_messages": N, "window": {"days": 1}}. A send
step of a flow (send_email, send_sms) asks `capped_until` before it writes its message: the
messages counted are the contact's automated messages of that channel written within the
window (`created_at` after now - window), read from the message rows through the partial
index on (contact_id, created_at) WHERE capped = 1 - never a counter that could drift. A
message marked `capped = 1` is a flow's message that is not exempt; exempt ones (the double
opt-in confirmation email) are neither capped nor counted, and neither are campaign messages
or the answers to STOP and HELP (they are no flow's messages).

When the contact has N or more in the window, the step is skipped or deferred (its
`when_capped`, default `defer`): a deferred step runs again when enough messages have left
the window, i.e. at created_at + window of the (count - N + 1)-th oldest message in it.
"""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.automations.format import duration_seconds
from marketing_cli.storage.db import transaction

CHANNELS = ("email", "sms")
MAX_MESSAGES = 1000
_TABLES = {"email": "email_messages", "sms": "sms_messages"}
BAD_BODY = ("Send an object with 'email' and/or 'sms', each {\"max_messages\": N, \"window\": {\"days\": 1}} "
            "or null to remove the cap.")


def _window(seconds: int) -> dict[str, int]:
    """Seconds as the document's duration object, largest units first."""
    out: dict[str, int] = {}
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60), ("seconds", 1)):
        if seconds >= size:
            out[unit], seconds = divmod(seconds, size)
    return out


def get_caps(conn: sqlite3.Connection, workspace_id: int) -> dict[str, Any]:
    """{"email": cap or None, "sms": cap or None}; a cap is {max_messages, window, window_seconds}."""
    out: dict[str, Any] = dict.fromkeys(CHANNELS)
    for row in conn.execute("SELECT channel, max_messages, window_seconds FROM automation_caps WHERE workspace_id = ?",
                            (workspace_id,)):
        out[row["channel"]] = {"max_messages": row["max_messages"], "window": _window(row["window_seconds"]),
                               "window_seconds": row["window_seconds"]}
    return out


def _check_cap(value: Any, channel: str) -> tuple[int, int] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise MktError(400, f"The member '{channel}' must be an object or null. {BAD_BODY}")
    for key in value:
        if key not in ("max_messages", "window"):
            raise MktError(400, f"Unknown member '{channel}.{key}'")
    count = value.get("max_messages")
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_MESSAGES:
        raise MktError(400, f"The member '{channel}.max_messages' must be a whole number from 1 to {MAX_MESSAGES}.")
    return count, duration_seconds(value.get("window"), f"{channel}.window")


def set_caps(conn: sqlite3.Connection, workspace_id: int, body: Any) -> dict[str, Any]:
    """PUT /v1/automations/caps: each channel given is set (null removes its cap); channels left
    out keep theirs. At least one channel. Answers every cap after the change."""
    if not isinstance(body, dict) or not body:
        raise MktError(400, BAD_BODY)
    for key in body:
        if key not in CHANNELS:
            raise MktError(400, f"Unknown member '{key}'")  # the channels are email and sms
    checked = {channel: _check_cap(body[channel], channel) for channel in CHANNELS if channel in body}
    with transaction(conn):
        for channel, cap in checked.items():
            if cap is None:
                conn.execute("DELETE FROM automation_caps WHERE workspace_id = ? AND channel = ?",
                             (workspace_id, channel))
            else:
                conn.execute("INSERT INTO automation_caps (workspace_id, channel, max_messages, window_seconds,"
                             " updated_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (workspace_id, channel) DO UPDATE SET"
                             " max_messages = excluded.max_messages, window_seconds = excluded.window_seconds,"
                             " updated_at = excluded.updated_at", (workspace_id, channel, *cap, clock.now()))
    return get_caps(conn, workspace_id)


COUNT_SQL = "SELECT created_at FROM {table} WHERE contact_id = ? AND capped = 1 AND created_at > ? ORDER BY created_at"


def caps_for(conn: sqlite3.Connection, workspace_id: int, channel: str) -> list[tuple[int, int]]:
    """The workspace's cap of a channel as [(max_messages, window_seconds)]: empty when it has none."""
    return [(row[0], row[1]) for row in conn.execute(
        "SELECT max_messages, window_seconds FROM automation_caps WHERE workspace_id = ? AND channel = ?",
        (workspace_id, channel))]


def counted_since(conn: sqlite3.Connection, contact_id: str, channel: str, since: str) -> list[str]:
    """When the contact's counted automated messages of the channel were written after `since`, oldest
    first (read from the partial index on (contact_id, created_at) WHERE capped = 1)."""
    return [r[0] for r in conn.execute(COUNT_SQL.format(table=_TABLES[channel]), (contact_id, since))]


def capped_until(conn: sqlite3.Connection, workspace_id: int, contact_id: str, channel: str) -> str | None:
    """None when the contact may get one more automated message of `channel` now; else the UTC
    instant at which enough of its messages have left the window (a deferred step's due time)."""
    row = conn.execute("SELECT max_messages, window_seconds FROM automation_caps WHERE workspace_id = ?"
                       " AND channel = ?", (workspace_id, channel)).fetchone()
    if row is None:
        return None
    window = timedelta(seconds=row["window_seconds"])
    since = clock.format_ts(clock.utcnow() - window)
    # At most the window's messages of one contact, read from the partial index (contact_id, created_at).
    times = counted_since(conn, contact_id, channel, since)
    if len(times) < row["max_messages"]:
        return None
    leaving = times[len(times) - row["max_messages"]]
    return clock.format_ts(clock.parse_ts(leaving) + window)


def reason(channel: str) -> str:
    """The counted reason of a capped step (stable, so the statistics group by it)."""
    return f"frequency cap ({channel})"
