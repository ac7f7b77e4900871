"""The quiet-hours gate: the last check before an SMS goes to a provider, and the workspace's
switch (docs/sms.md "Quiet hours").

Any sender calls `hold_closed` on the rows it has just claimed (status 'sending'), in the
claim's transaction, right before the provider call: campaign batches, a batch handed over
again after a crash, and (later) automation steps alike. Rows whose number may not be texted
now become 'held' with `held_until` (UTC, when the window opens) and `held_reason`; the rest
go on, each with the instant its window closes (`Gate.closes_at`), so a network provider that
is still retrying at that instant stops and puts the message back (providers.py).

Set-based: one GROUP BY over the claimed rows by gate key (the digits that fix a number's
country, state and zones), one verdict per distinct place, one UPDATE ... FROM for the held
ones. A held message keeps its charge (it was charged once, at expansion) and is neither
charged again nor refunded; `release_due` puts it back to 'pending' when its window opens,
and the sms.expand job is queued again for that instant.
"""

from __future__ import annotations

import logging
import sqlite3
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.account.operator_log import record as operator_log_entry
from marketing_cli.services.sms import places, quiet_hours
from marketing_cli.storage.db import transaction

log = logging.getLogger("mkt.sms")

OVERRIDE_FLAG = "--override-quiet-hours"
OFF_NEEDS_FLAG = ("SMS quiet hours keep marketing texts out of the hours the law forbids (in the US 8 a.m.-9 p.m. "
                  "at the recipient's location, 47 CFR 64.1200(c)(1), and stricter state rules). Turning them off "
                  f"sends at any hour: confirm with {OVERRIDE_FLAG}.")


@dataclass
class Gate:
    """What the gate decided for one claimed batch."""

    held: int = 0
    closes: dict[str, datetime | None] = field(default_factory=dict)  # gate key -> when its window closes

    def closes_at(self, phone: str) -> str | None:
        """When the window of `phone` closes (RFC 3339 UTC), None when it never does (no rule, or gate off)."""
        moment = self.closes.get(places.gate_key(phone))
        return clock.format_ts(moment) if moment is not None else None


def enabled(conn: sqlite3.Connection, workspace_id: int) -> bool:
    row = conn.execute("SELECT sms_quiet_hours_off_at FROM workspaces WHERE id = ?", (workspace_id,)).fetchone()
    return row is None or row[0] is None


def hold_closed(conn: sqlite3.Connection, workspace_id: int, where: str, params: Any) -> Gate:
    """Hold every sms_messages row matching `where` (claimed rows of one sender) whose window is
    closed now; answers the closing instant of the others. Runs in the caller's transaction."""
    if not enabled(conn, workspace_id):
        return Gate()
    now, table = clock.utcnow(), quiet_hours.current_table()
    key = places.gate_key_sql("phone")
    gate, closed, verdicts = Gate(), [], {}
    for k, phone in conn.execute(f"SELECT {key} AS k, MIN(phone) FROM sms_messages WHERE {where} GROUP BY k", params):
        place = places.place_of(phone)
        verdict = verdicts.get(place)
        if verdict is None:
            verdict = verdicts[place] = quiet_hours.verdict(place, now, table)
        if verdict.open:
            gate.closes[k] = verdict.until
        else:
            closed.append((k, clock.format_ts(verdict.until), verdict.reason))
    if closed:
        held = f"sms_held_{uuid.uuid4().hex}"  # our own name, never user text
        conn.execute(f"CREATE TEMP TABLE {held} (gk TEXT PRIMARY KEY, g_until TEXT NOT NULL, g_reason TEXT NOT NULL)")
        try:
            conn.executemany(f"INSERT INTO {held} VALUES (?, ?, ?)", closed)
            gate.held = conn.execute(
                f"UPDATE sms_messages SET status = 'held', held_until = h.g_until, held_reason = h.g_reason"
                f" FROM {held} h WHERE {where} AND h.gk = {key}",
                params).rowcount
        finally:
            conn.execute(f"DROP TABLE IF EXISTS {held}")
    return gate


def release_due(conn: sqlite3.Connection, campaign_id: str) -> int:
    """Held messages whose window has opened go back to 'pending' (held_until and held_reason stay,
    as the record of the wait). In the caller's transaction."""
    return conn.execute("UPDATE sms_messages SET status = 'pending' WHERE campaign_id = ? AND status = 'held'"
                        " AND held_until <= ?", (campaign_id, clock.now())).rowcount


def next_release(conn: sqlite3.Connection, campaign_id: str) -> str | None:
    return conn.execute("SELECT MIN(held_until) FROM sms_messages WHERE campaign_id = ? AND status = 'held'",
                        (campaign_id,)).fetchone()[0]


def held_counts(conn: sqlite3.Connection, ids: list[str]) -> dict[str, dict[str, Any]]:
    """campaign id -> {"held", "next_release_at"}: the campaign view's `quiet_hours` member."""
    out: dict[str, dict[str, Any]] = {i: {"held": 0, "next_release_at": None} for i in ids}
    if ids:
        marks = ", ".join("?" * len(ids))
        for cid, count, first in conn.execute(
                f"SELECT campaign_id, COUNT(*), MIN(held_until) FROM sms_messages WHERE campaign_id IN ({marks})"
                " AND status = 'held' GROUP BY campaign_id", ids):
            out[cid] = {"held": count, "next_release_at": first}
    return out


# --- the operator's switch and the table in effect ------------------------------------------

def show_settings(conn: sqlite3.Connection, workspace_id: int) -> dict[str, Any]:
    """`mkt sms quiet-hours show`: the workspace's switch and the table in effect for this process."""
    row = conn.execute("SELECT sms_quiet_hours_off_at FROM workspaces WHERE id = ?", (workspace_id,)).fetchone()
    table = quiet_hours.current_table()
    return {"enabled": row is None or row[0] is None, "off_since": row[0] if row else None,
            "table": table.origin,
            "rules": [{"region": r.region, "days": r.days, "hours": r.hours, "source": r.source} for r in table.rules],
            "changes": operator_log(conn, workspace_id, action="sms.quiet_hours.%", limit=10)}


def set_enabled(conn: sqlite3.Connection, workspace_id: int, on: bool, *, override: bool = False) -> dict[str, Any]:
    """`mkt sms quiet-hours on|off` (operator only, CLI only). Off needs the explicit override; each
    change is logged and recorded in operator_log (who, when, what)."""
    if not on and not override:
        raise MktError(400, OFF_NEEDS_FLAG)
    now = clock.now()
    with transaction(conn):
        current = enabled(conn, workspace_id)
        if current != on:
            conn.execute("UPDATE workspaces SET sms_quiet_hours_off_at = ? WHERE id = ?",
                         (None if on else now, workspace_id))
            action = "sms.quiet_hours.on" if on else "sms.quiet_hours.off"
            detail = ("SMS quiet hours turned back on" if on else
                      f"SMS quiet hours turned OFF with {OVERRIDE_FLAG}: texts go out at any hour")
            actor = operator_log_entry(conn, workspace_id, action, detail, at=now)
            log.warning("workspace %s: %s (by %s)", workspace_id, detail, actor)
    return show_settings(conn, workspace_id)


def operator_log(conn: sqlite3.Connection, workspace_id: int, *, action: str = "%",
                 limit: int = 50) -> list[dict[str, Any]]:
    """The workspace's operator log (actions matching the LIKE pattern `action`), newest first."""
    return [{"id": r["id"], "actor": r["actor"], "action": r["action"], "detail": r["detail"],
             "created_at": r["created_at"]}
            for r in conn.execute("SELECT * FROM operator_log WHERE workspace_id = ? AND action LIKE ?"
                                  " ORDER BY id DESC LIMIT ?", (workspace_id, action, limit))]
