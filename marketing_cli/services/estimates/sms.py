"""The estimate of an SMS campaign (groups.py says what an estimate is).

Before expansion (a DRAFT, a QUEUED campaign not yet expanded, a schedule preview) the
estimate reads the whole audience in ONE grouped query: each contact falls into the first
of reach.py's reasons to be skipped (no phone number, its SMS status, no published rate),
else it is counted under its number's gate key (the digits that fix its place for quiet
hours, places.py) and, for a local-time send, its zone; the cost is each recipient's price
times the segments of the message rendered for it, in SQL as expansion and the schedule's
estimate compute it. Once expanded it reads the messages still to go the same way (one
GROUP BY over the campaign's rows by status, gate key and due instant).

Then, per group and not per recipient: a local-time zone's instant (local_time.py), and the
quiet-hours verdict of the gate key's place at the instant the message would go
(quiet_hours.py, the table the gate applies at the last moment): closed, the group is
`held` until the window opens, with the rule that closes it.
"""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import date, datetime
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.estimates import cache
from marketing_cli.services.estimates.email import LOCAL_SKIPPED, local_reason
from marketing_cli.services.estimates.groups import Part, estimate
from marketing_cli.services.sms import ledger
from marketing_cli.services.sms.reach import WHY

FINAL = ("COMPLETED", "CANCELLED", "ARCHIVED")
_REASON = ("CASE WHEN a.phone IS NULL OR a.phone = '' THEN 'no_phone_number'"
           " WHEN a.sms_status IN ('UNSUBSCRIBED', 'CLEANED', 'BLOCKED') THEN lower(a.sms_status)"
           " WHEN ({units}) IS NULL THEN 'no_published_rate' ELSE NULL END")


def money(units: int) -> str:
    return ledger.money(ledger.from_units(units))


def campaign_estimate(conn: sqlite3.Connection, row: sqlite3.Row, *,
                      budget: cache.Budget | None = None) -> dict[str, Any]:
    """The estimate of a stored SMS campaign in its present state; `budget` as email.py's."""
    if row["status"] in FINAL:
        return estimate([], money)
    if row["status"] == "QUEUED" and row["expanded_at"]:
        return estimate(_message_parts(conn, row), money)
    audience = json.loads(row["audience"] or "[]")
    if not audience:
        return estimate([], money)
    local = None
    if row["local_time"] and row["status"] != "DRAFT":
        local = {"time": row["local_time"], "date": row["local_date"], "missed": row["local_time_missed"] or "next_day",
                 "starts_at": row["local_starts_at"] or clock.now()}
    mark = budget.mark if budget else cache.contacts_mark(conn, row["workspace_id"])
    state = cache.state_of(row, row["message"], mark)
    return estimate(cache.parts(conn, "sms_campaigns", row, state, budget, lambda: audience_parts(
        conn, row["workspace_id"], row["message"] or "", audience, row["scheduled_at"], local)), money)


def preview_estimate(conn: sqlite3.Connection, workspace_id: int, message: str, audience: Any,
                     scheduled_at: str | None, local: dict[str, str] | None) -> dict[str, Any]:
    """The estimate of sending `message` to `audience` at `scheduled_at` (None: now), or in
    each recipient's local time (`local`, as the schedule call reads it)."""
    return estimate(audience_parts(conn, workspace_id, message, audience, scheduled_at, local), money)


def audience_parts(conn: sqlite3.Connection, workspace_id: int, message: str, audience: Any,
                   scheduled_at: str | None, local: dict[str, str] | None) -> list[Part]:
    rows, due = _audience_groups(conn, workspace_id, message, audience, local)
    now = clock.utcnow()
    start = clock.parse_ts(scheduled_at) if scheduled_at else now
    parts: list[Part] = []
    timed = []
    for reason, country, phone, zone, count, units in rows:
        if reason is not None:
            why = WHY[reason] + (f" ({country or 'unknown'})" if reason == "no_published_rate" else "")
            parts.append(Part("skipped", count, reason=why))
            continue
        at = due.get(zone) if local else clock.format_ts(start)
        if at is None:
            parts.append(Part("skipped", count, reason=LOCAL_SKIPPED))
            continue
        timed.append((phone, zone, count, units, clock.parse_ts(at)))
    return parts + _gated(conn, workspace_id, timed, local["time"] if local else None, now)


def _audience_groups(conn: sqlite3.Connection, workspace_id: int, message: str, audience: Any,
                     local: dict[str, str] | None) -> tuple[list[Any], dict[str, str | None]]:
    """(rows of (reason, country, a phone, zone, count, cost units), each zone's instant)."""
    from marketing_cli.kernel.localtime import local_instant
    from marketing_cli.services.contacts import local_time
    from marketing_cli.services.contacts.audience import resolve_whole_audience
    from marketing_cli.services.contacts.zones import Zones
    from marketing_cli.services.sms.pricing import Pricing, price_units
    from marketing_cli.services.sms.render import Renderer, register_renderer
    from marketing_cli.storage import field_sql

    try:
        renderer = Renderer(conn, workspace_id, message)
    except MktError:  # a tag the workspace no longer has (scheduling refuses it): priced without its tags
        renderer = Renderer(conn, workspace_id, re.sub(r"\{\{[^{}]*\}\}", "", message))
    columns = f"c.phone, c.email, c.sms_status, {field_sql.data_columns(conn, 'c')}"
    due: dict[str, str | None] = {}
    if local is None:
        everyone = resolve_whole_audience(conn, workspace_id, audience, columns)
        return _grouped(conn, workspace_id, renderer, everyone.sql, everyone.params, "NULL", register_renderer,
                        Pricing, price_units), due
    day, hhmm = date.fromisoformat(local["date"]), local["time"]
    with Zones(conn, workspace_id, local_instant(day, hhmm, "UTC")) as zones:
        zones.resolve()
        everyone = resolve_whole_audience(conn, workspace_id, audience, f"{columns}, {zones.columns('c')}",
                                          zones.join("c"))
        sql, params = zones.select(everyone, "a.phone, a.email, a.sms_status, a.data"
                                   + (", a.data_doc" if "data_doc" in columns else ""))
        rows = _grouped(conn, workspace_id, renderer, sql, params, "a.zone", register_renderer, Pricing, price_units)
    start = clock.parse_ts(local["starts_at"])
    for zone in {r[3] for r in rows if r[3] is not None}:
        due[zone] = local_time.due_at(zone, day, hhmm, local["missed"], start)
    return rows, due


def _grouped(conn: sqlite3.Connection, workspace_id: int, renderer: Any, sql: str, params: Any, zone: str,
             register_renderer: Any, pricing_class: Any, price_units: Any) -> list[Any]:
    from marketing_cli.services.sms.places import gate_key_sql
    from marketing_cli.services.sms.segments import count_segments

    with pricing_class(conn, workspace_id, price_units(conn, workspace_id)) as pricing:
        pricing.resolve(f"SELECT e.phone FROM ({sql}) e", params)
        units, country = pricing.units("a.phone"), pricing.country("a.phone")
        texts = ""
        measure = str(int(count_segments(renderer.text).segments) * 2)
        if renderer.has_tags:
            register_renderer(conn, renderer)
            texts = ", " + renderer.texts_sql("a")
            measure = renderer.rendered_sql("b")[1]
        reason = _REASON.format(units=units)
        found = conn.execute(
            f"WITH b AS MATERIALIZED (SELECT {reason} AS reason, {country} AS country, {units} AS units,"
            f" {gate_key_sql('a.phone')} AS gk, a.phone AS phone, {zone} AS zone{texts}"
            f" FROM ({sql}) a{pricing.join('a.phone')}),"
            f" r AS (SELECT b.reason, CASE WHEN b.reason = 'no_published_rate' THEN b.country END AS country,"
            " CASE WHEN b.reason IS NULL THEN b.gk END AS gk, CASE WHEN b.reason IS NULL THEN b.zone END AS zone,"
            f" b.phone, CASE WHEN b.reason IS NULL THEN b.units * (({measure}) >> 1) ELSE 0 END AS cost FROM b)"
            " SELECT r.reason, r.country, min(r.phone), r.zone, count(*), coalesce(sum(r.cost), 0) FROM r"
            " GROUP BY r.reason, r.country, r.gk, r.zone", params).fetchall()
    return [tuple(row) for row in found]


def _message_parts(conn: sqlite3.Connection, row: sqlite3.Row) -> list[Part]:
    """The expanded campaign's messages still to go: pending ones (by gate key and due instant,
    gated here as the sender's gate will), held ones (until their window opens), those being
    handed over, and the suppressed ones (no published rate)."""
    from marketing_cli.services.sms.places import gate_key_sql

    now = clock.utcnow()
    key = gate_key_sql("m.phone")
    rows = conn.execute(
        f"SELECT m.status, CASE WHEN m.status = 'held' THEN m.held_until END,"
        f" CASE WHEN m.status = 'held' THEN m.held_reason END, CASE WHEN m.status = 'pending' THEN {key} END,"
        " min(m.phone), CASE WHEN m.status = 'pending' THEN m.due_at END,"
        " CASE WHEN m.status = 'pending' THEN m.zone END,"
        " CASE WHEN m.status = 'suppressed' THEN m.country END, count(*), coalesce(sum(m.price_units), 0)"
        " FROM sms_messages m WHERE m.campaign_id = ? AND m.status IN ('pending', 'held', 'sending', 'suppressed')"
        " GROUP BY 1, 2, 3, 4, 6, 7, 8", (row["id"],)).fetchall()
    parts: list[Part] = []
    timed = []
    for status, held_until, held_reason, _, phone, due_at, zone, country, count, units in rows:
        if status == "suppressed":
            parts.append(Part("skipped", count, reason=f"{WHY['no_published_rate']} ({country or 'unknown'})"))
        elif status == "held":
            parts.append(Part("held", count, clock.parse_ts(held_until) if held_until else None, held_reason, units))
        elif status == "sending":
            parts.append(Part("now", count, units=units))
        else:
            timed.append((phone, zone, count, units, max(clock.parse_ts(due_at), now) if due_at else now))
    if row["local_time_skipped"]:
        parts.append(Part("skipped", row["local_time_skipped"], reason=LOCAL_SKIPPED))
    return parts + _gated(conn, row["workspace_id"], timed, row["local_time"], now)


def _gated(conn: sqlite3.Connection, workspace_id: int, timed: list[tuple[str, str | None, int, int, datetime]],
           hhmm: str | None, now: datetime) -> list[Part]:
    """Parts of (a phone, zone, count, units, instant) groups: held when the quiet-hours window
    of the phone's place is closed at the instant (one verdict per place and instant), else
    now or waiting; the waiting ones of one instant are one part naming their zones."""
    from marketing_cli.services.sms import gate, places, quiet_hours

    on = gate.enabled(conn, workspace_id)
    table = quiet_hours.current_table() if on else None
    verdicts: dict[tuple[Any, datetime], Any] = {}
    sums: dict[tuple[str, datetime | None, str | None], list[Any]] = {}  # summed here: one Part per group
    for phone, zone, count, units, at in timed:
        at = max(at, now)
        key: tuple[str, datetime | None, str | None]
        if on:
            place = places.place_of(phone)
            verdict = verdicts.get((place, at))
            if verdict is None:
                verdict = verdicts[(place, at)] = quiet_hours.verdict(place, at, table)
            if not verdict.open:
                key = ("held", verdict.until, verdict.reason)
        if not on or verdict.open:
            key = ("waiting", at, None) if at > now and hhmm else ("now", at if at > now else None, None)
        entry = sums.setdefault(key, [0, 0, set()])
        entry[0] += count
        entry[1] += units
        if zone:
            entry[2].add(zone)
    return [Part(state, count, until, local_reason(hhmm or "", list(zones)) if state == "waiting" else reason, units)
            for (state, until, reason), (count, units, zones) in sums.items()]
