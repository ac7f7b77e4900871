"""The local-time plans both channels send by (docs/campaigns.md "Local-time delivery"):
a campaign scheduled at a time of day in each recipient's own zone (zones.py resolves it).

The schedule call's `local_time` and `local_time_missed` members are read and checked here
(`read_local_time`): the date is the scheduled day in the workspace's zone, and sending
starts when the first zone on Earth (UTC+14) reaches the time that day. Each zone's instant
is computed once per zone (`due_at`, `fill_due_table`): a time already passed when the zone
is reached is the next day's (next_day, the default), now (send_now), or not at all (skip).
A schedule preview counts the audience per zone with each zone's instant (`zone_plan`,
`schedule_preview`).
"""

from __future__ import annotations

import sqlite3
from datetime import date, datetime, timedelta
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.localtime import canonical_zone, local_instant
from marketing_cli.services.account.workspaces import workspace_timezone
from marketing_cli.services.contacts.zones import Zones

MISSED = ("next_day", "send_now", "skip")


def check_missed(value: Any) -> str:
    """'next_day' (the default), 'send_now' or 'skip'; also accepts next-day / now."""
    if value is None:
        return "next_day"
    text = value.strip().lower().replace("-", "_") if isinstance(value, str) else None
    text = {"now": "send_now"}.get(text or "", text)
    if text not in MISSED:
        raise ValueError(f"local_time_missed must be one of next_day, send_now or skip, not '{value}'.")
    return text


def due_at(zone: str, day: date, hhmm: str, missed: str, now: datetime) -> str | None:
    """When a recipient in `zone` gets a message read at `hhmm` on `day`, in UTC; None: skipped.

    A time already passed when the zone is reached is the next day's (next_day), now
    (send_now), or not at all (skip)."""
    name = canonical_zone(zone) or "UTC"
    moment = local_instant(day, hhmm, name)
    if moment < now:
        if missed == "skip":
            return None
        moment = now if missed == "send_now" else local_instant(day + timedelta(days=1), hhmm, name)
    return clock.format_ts(moment)


def fill_due_table(conn: sqlite3.Connection, table: str, zones: list[str], day: date, hhmm: str, missed: str,
                   now: datetime) -> None:
    """A temporary table `table` (zone PRIMARY KEY, due_at): each zone's instant, once per zone."""
    conn.execute(f"CREATE TEMP TABLE {table} (zone TEXT PRIMARY KEY, due_at TEXT) WITHOUT ROWID")
    conn.executemany(f"INSERT INTO {table} (zone, due_at) VALUES (?, ?)",
                     [(z, due_at(z, day, hhmm, missed, now)) for z in zones])


def zone_plan(conn: sqlite3.Connection, workspace_id: int, audience: Any, channel: str, day: date, hhmm: str,
              missed: str, now: datetime) -> list[dict[str, Any]]:
    """The count per zone of a campaign's audience on `channel`, with each zone's instant (null:
    skipped), earliest first; the preview a person sees before confirming."""
    from marketing_cli.services.contacts.audience import resolve_audience

    with Zones(conn, workspace_id, local_instant(day, hhmm, "UTC")) as zones:
        zones.resolve()
        query = resolve_audience(conn, workspace_id, audience, channel, zones.columns("c"), zones.join("c"))
        sql, params = zones.select(query, "1")
        rows = conn.execute(f"SELECT zone, count(*) AS n FROM ({sql}) AS z GROUP BY zone", params).fetchall()
    plan = [{"zone": r["zone"], "recipients": r["n"], "send_at": due_at(r["zone"], day, hhmm, missed, now)}
            for r in rows]
    return sorted(plan, key=lambda p: (p["send_at"] is None, p["send_at"] or "", p["zone"]))


# ---------------------------------------------------------------------- the schedule members


def read_local_time(conn: sqlite3.Connection, workspace_id: int, body: dict[str, Any],
                    scheduled_at: str | None) -> dict[str, str] | None:
    """The schedule call's local-time members, checked: {time, date, missed, starts_at}, or
    None without `local_time`. The date is the scheduled day (`scheduled_at`, else today) in
    the workspace's zone; sending starts when the first zone on Earth (UTC+14) reaches the
    time that day, or now if that has passed. 400 with a message naming the member."""
    from marketing_cli.kernel.localtime import first_instant, local_date, parse_local_time

    raw, missed_raw = body.get("local_time"), body.get("local_time_missed")
    if raw is None:
        if missed_raw is not None:
            raise MktError(400, "local_time_missed needs local_time.")
        return None
    try:
        hhmm = parse_local_time(raw)
        missed = check_missed(missed_raw)
    except ValueError as exc:
        raise MktError(400, str(exc)) from None
    now = clock.utcnow()
    day = local_date(clock.parse_ts(scheduled_at) if scheduled_at else now, workspace_timezone(conn, workspace_id))
    starts = max(now, first_instant(day, hhmm))
    return {"time": hhmm, "date": day.isoformat(), "missed": missed, "starts_at": clock.format_ts(starts)}


def local_time_view(row: sqlite3.Row, waiting: int | None) -> dict[str, Any] | None:
    """The `local_time` member of a campaign (email or SMS) scheduled in its recipients' time."""
    if not row["local_time"]:
        return None
    return {"time": row["local_time"], "date": row["local_date"], "missed": row["local_time_missed"],
            "waiting": waiting, "skipped": row["local_time_skipped"]}


def plan_day(row: sqlite3.Row) -> tuple[date, str, str, datetime]:
    """(date, 'HH:MM', missed, planned start) of a local-time campaign row. A time is missed
    when it came before the planned start: a runner that starts late (cron each minute)
    sends the zones that came due meanwhile at once, never a day late."""
    start = clock.parse_ts(row["local_starts_at"]) if row["local_starts_at"] else clock.utcnow()
    return date.fromisoformat(row["local_date"]), row["local_time"], row["local_time_missed"] or "next_day", start


def schedule_preview(conn: sqlite3.Connection, workspace_id: int, audience: Any, channel: str,
                     scheduled_at: str | None, local: dict[str, str] | None) -> dict[str, Any]:
    """The schedule preview of both channels: the instant understood, the recipients of the
    campaign's `audience` on `channel` and, for a local-time send, the count per zone with
    each zone's instant (null: skipped)."""
    from marketing_cli.services.contacts.audience import count_audience

    answer: dict[str, Any] = {"scheduled_at": scheduled_at, "local_time": local}
    if local is None:
        answer["recipients"] = count_audience(conn, workspace_id, audience, channel)
        answer["zones"] = None
        return answer
    plan = zone_plan(conn, workspace_id, audience, channel, date.fromisoformat(local["date"]), local["time"],
                     local["missed"], clock.parse_ts(local["starts_at"]))
    answer["recipients"] = sum(p["recipients"] for p in plan)
    answer["zones"] = plan
    return answer
