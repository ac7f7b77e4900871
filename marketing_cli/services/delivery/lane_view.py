"""What a campaign's messages wait for in the provider lanes, and why (docs/deliverability.md
"What waits and why"): `held_back` lists, per lane suspended or slowed by the relay's push-back
(shaping.py), how many of the campaign's queued messages it holds, until when, and the reply
that caused it:

    1,204 messages held back by the Gmail lane until 14:05 UTC: 421 4.7.28 ... from the relay

`with_held_back` adds `held_back` to a campaign's view while a lane holds some of its
messages, and makes the progress's ETA no earlier than the last of them: the campaign view
of services/estimates/views.py (GET /v1/campaigns/:id, `mkt campaigns show` and `watch`)
calls it. A lane whose warm-up cap is used up today (warmup_gate.py) is listed too:

    1,800 messages wait for the Gmail lane's warm-up cap until 2026-11-30 00:00 UTC (day 3 of 14: 1,000 a day)
"""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from typing import Any

from marketing_cli.kernel import clock
from marketing_cli.services.delivery import warmup_gate
from marketing_cli.services.delivery.lanes import NAMES
from marketing_cli.services.delivery.shaping import Shaper


def with_held_back(conn: sqlite3.Connection, workspace_id: int, view: dict[str, Any]) -> dict[str, Any]:
    """A campaign's view with `held_back` while a provider lane holds some of its messages, its
    ETA no earlier than the last of them (services/estimates/views.py calls it after the estimate)."""
    if view.get("status") != "SENDING":
        return view
    items = held_back(conn, workspace_id, view["id"]) + warmup_gate.held_back(conn, view["id"])
    if items:
        view["held_back"] = items
        progress = view.get("progress")
        if progress and progress.get("eta_seconds") is not None:
            last = max(clock.parse_ts(item["until"]) for item in items) - clock.utcnow()
            progress["eta_seconds"] = max(progress["eta_seconds"], round(last.total_seconds()))
    return view


def held_back(conn: sqlite3.Connection, workspace_id: int, campaign_id: str) -> list[dict[str, Any]]:
    """What the workspace's held lanes hold of a campaign's queued messages, and why: one item
    per lane suspended or slowed that has some; `opens_at` when a suspension ends (null for a
    slowed lane), `until` when they should all be out at the lane's rate (RFC 3339 UTC)."""
    states = Shaper(workspace_id).states(conn)
    if not states:
        return []
    counts = dict(conn.execute("SELECT coalesce(lane, 'other'), count(*) FROM email_messages WHERE campaign_id = ?"
                               " AND status = 'queued' GROUP BY coalesce(lane, 'other')", (campaign_id,)).fetchall())
    moment = clock.utcnow()
    now = clock.format_ts(moment)
    items = []
    for lane in sorted(states):
        state, count = states[lane], counts.get(lane, 0)
        if not count:
            continue
        suspended = state.suspended_until if state.suspended_until and state.suspended_until > now else None
        opens = clock.parse_ts(suspended) if suspended else moment
        until = opens + timedelta(seconds=count / state.rate) if state.rate > 0 else opens
        items.append({"lane": lane, "messages": count, "state": "suspended" if suspended else "slowed",
                      "opens_at": suspended, "until": clock.format_ts(until), "rate": round(state.rate, 3),
                      "reason": state.reason,
                      "line": held_back_line(lane, count, opens if suspended else until, state.reason,
                                             None if suspended else state.rate)})
    return items


def held_back_line(lane: str, count: int, until: Any, reason: str | None, rate: float | None) -> str:
    """"1,204 messages held back by the Gmail lane until 14:05 UTC: 421 4.7.28 from the relay"."""
    pace = f" at {rate:g}/s" if rate else ""
    why = f": {reason} from the relay" if reason else ""
    return (f"{count:,} message{'s' if count != 1 else ''} held back by the {NAMES.get(lane, lane)} lane{pace}"
            f" until {until:%H:%M} UTC{why}")
