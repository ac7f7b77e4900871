"""The estimate of an email campaign (groups.py says what an estimate is).

Before its audience is frozen (a DRAFT, a QUEUED campaign, a series' next occurrence, a
schedule preview) the estimate reads the audience: its count (or, for a local-time send,
its count per zone, services/contacts/local_time.py's `zone_plan`, each zone's instant
computed once). Once frozen it reads the messages still to go, one GROUP BY over the
campaign's queued rows by due instant and zone (the index email_messages_due), with the
A/B test's held-back recipients waiting for the winner. The allowances (caps.py) move the
latest of them over the month's or the hour's room to `over_cap`. Nothing is read per
recipient in Python.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import date, datetime
from typing import Any

from marketing_cli.kernel import clock
from marketing_cli.services.estimates import cache, caps
from marketing_cli.services.estimates.groups import Part, estimate, zone_list

FINAL = ("SENT", "CANCELLED", "ARCHIVED")
FROZEN = ("IN_REVIEW", "SENDING", "PAUSED")
LOCAL_SKIPPED = "their local time had passed (local_time_missed: skip)"
PAUSED = "the campaign is paused: `mkt campaigns resume {id}` sends them"
AB_WAIT = "held back for the A/B test's winner"


def local_reason(hhmm: str, zones: list[str]) -> str:
    return f"{hhmm} local time in {zone_list(zones)}"


def campaign_estimate(conn: sqlite3.Connection, row: sqlite3.Row, series_next: str | None = None, *,
                      budget: cache.Budget | None = None) -> dict[str, Any]:
    """The estimate of a stored campaign in its present state; `series_next`: the next
    occurrence of the live series it defines (a copy of it goes then). `budget`: a list's
    (cache.py), which may use a kept estimate; None computes afresh."""
    if row["status"] in FINAL:
        return estimate([])
    if row["status"] in FROZEN:
        parts = _message_parts(conn, row)
    elif not row["audience"]:
        return estimate([])
    else:
        at = series_next or row["scheduled_at"]
        local = None
        if row["local_time"] and row["status"] != "DRAFT":
            local = {"time": row["local_time"], "date": row["local_date"],
                     "missed": row["local_time_missed"] or "next_day",
                     "starts_at": row["local_starts_at"] or clock.now()}
        mark = budget.mark if budget else cache.contacts_mark(conn, row["workspace_id"])
        state = cache.state_of(row, series_next, mark)
        parts = cache.parts(conn, "campaigns", row, state, budget, lambda: audience_parts(
            conn, row["workspace_id"], json.loads(row["audience"]), at, local))
    return estimate(caps.apply(parts, caps.caps_for(conn, row["workspace_id"], "email")
                               + caps.campaign_caps(conn, row, parts)))


def preview_estimate(conn: sqlite3.Connection, workspace_id: int, audience: Any, scheduled_at: str | None,
                     local: dict[str, str] | None, row: sqlite3.Row | None = None) -> dict[str, Any]:
    """The estimate of scheduling `audience` with a schedule body (read into `scheduled_at` and
    `local`); `row`: the campaign, for its sending domain's warm-up."""
    parts = audience_parts(conn, workspace_id, audience, scheduled_at, local)
    return estimate(caps.apply(parts, caps.caps_for(conn, workspace_id, "email") + caps.campaign_caps(conn, row, parts)))


def audience_parts(conn: sqlite3.Connection, workspace_id: int, audience: Any, at: str | None,
                   local: dict[str, str] | None) -> list[Part]:
    from marketing_cli.services.contacts import local_time
    from marketing_cli.services.contacts.audience import count_audience

    now = clock.utcnow()
    if local is None:
        moment = clock.parse_ts(at) if at else None
        return [Part("now", count_audience(conn, workspace_id, audience, "email"),
                     moment if moment and moment > now else None)]
    plan = local_time.zone_plan(conn, workspace_id, audience, "email", date.fromisoformat(local["date"]),
                                local["time"], local["missed"], clock.parse_ts(local["starts_at"]))
    return zone_parts([(p["zone"], p["recipients"], p["send_at"]) for p in plan], local["time"], now)


def zone_parts(rows: list[tuple[str | None, int, str | None]], hhmm: str | None, now: datetime,
               skipped_reason: str = LOCAL_SKIPPED) -> list[Part]:
    """Parts from (zone, count, instant or None: skipped) rows: one per instant, naming its zones."""
    by_time: dict[datetime | None, tuple[int, list[str]]] = {}
    skipped = 0
    for zone, count, at in rows:
        if at is None:
            skipped += count
            continue
        moment = clock.parse_ts(at)
        key = moment if moment > now else None
        n, zones = by_time.get(key, (0, []))
        by_time[key] = (n + count, zones + ([zone] if zone else []))
    parts = [Part("skipped", skipped, reason=skipped_reason)] if skipped else []
    for moment, (count, zones) in by_time.items():
        if moment is None:
            parts.append(Part("now", count))
        else:
            parts.append(Part("waiting", count, moment, local_reason(hhmm, zones) if hhmm and zones else None))
    return parts


def _message_parts(conn: sqlite3.Connection, row: sqlite3.Row) -> list[Part]:
    """The messages still to go: queued ones by due instant and zone, those being sent, the
    A/B test's held-back recipients, and the local-time send's skipped ones."""
    now = clock.utcnow()
    rows = conn.execute("SELECT due_at, zone, count(*) FROM email_messages WHERE campaign_id = ? AND status = 'queued'"
                        " GROUP BY due_at, zone", (row["id"],)).fetchall()
    sending = conn.execute("SELECT count(*) FROM email_messages WHERE campaign_id = ? AND status = 'sending'",
                           (row["id"],)).fetchone()[0]
    parts = zone_parts([(zone, count, due or clock.format_ts(now)) for due, zone, count in rows],
                       row["local_time"], now)
    parts.append(Part("now", sending))
    if row["local_time_skipped"]:
        parts.append(Part("skipped", row["local_time_skipped"], reason=LOCAL_SKIPPED))
    held = conn.execute("SELECT count(*) FROM email_ab_holdout WHERE campaign_id = ?", (row["id"],)).fetchone()[0]
    if held:
        decision = conn.execute("SELECT min(run_at) FROM jobs WHERE dedupe_key = ? AND status IN ('queued', 'running')",
                                (f"email.ab_winner:{row['id']}",)).fetchone()[0]
        parts.append(Part("waiting", held, clock.parse_ts(decision) if decision else None, AB_WAIT))
    if row["status"] == "PAUSED":
        reason = PAUSED.format(id=row["id"])
        parts = [Part(p.state, p.recipients, p.until, p.reason or reason, p.units) if p.state == "now" else p
                 for p in parts]
    return parts
