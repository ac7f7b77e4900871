"""Deliverability at a glance (`mkt deliverability`, GET /v1/deliverability; docs/deliverability.md
"Deliverability at a glance"): per sending domain and provider lane, over the last N days,
what the workspace's messages became, from one query grouped by domain, lane and bounce class.

A message counts in the window when it was answered (delivered or refused) or first
deferred within it; a campaign SENT before the window began is not read (its messages were
all answered before its `sent_at`). Per row:

    sent            messages handed to the transport: delivered + bounced + deferred
    delivered       accepted, and no bounce report since
    deferred        waiting for a retry now (a 4xx that was not a throttle: record.py)
    bounced         refused at once (5xx, or deferred past the give-up time) or bounced later
                    (a bounce report), with `bounced_by_class` (bounce_classes.py; messages
                    bounced without a class, by hand, count as `unclassified`)
    complained      reported as spam (ARF reports, POST /v1/bounces)
    *_rate          delivered, deferred and bounced over sent; complaints over what was
                    accepted (delivered + bounced later), as mailbox providers count them
    rate_now        the lane's rate now for the workspace (messages per second; null: no rate
                    of its own, as fast as the transport takes them) and `suspended_until`
                    (shaping.py)
    warmup_day, warmup_cap
                    the domain's warm-up day and today's cap in the lane (`_warmup`: a warm-up running now)

`compliance` (only when asked: it looks the domains' DNS records up, which can take seconds)
holds each domain's rows of the compliance gate (compliance.py), as `mkt domains check`.
"""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.numbers import parse_digits
from marketing_cli.services.delivery import compliance
from marketing_cli.services.delivery.shaping import Shaper

DEFAULT_DAYS = 7
MAX_DAYS = 90
DAYS_INVALID = f"days must be a whole number from 1 to {MAX_DAYS}."
COMPLIANCE_INVALID = "compliance must be true or false."
YES, NO = ("true", "1", "yes"), ("false", "0", "no", "")
UNCLASSIFIED = "unclassified"

SQL = (
    "SELECT d.id AS domain_id, d.domain_name, coalesce(m.lane, 'other') AS lane, m.bounce_class,"
    " sum(CASE WHEN m.status = 'delivered' THEN 1 ELSE 0 END) AS delivered,"
    " sum(CASE WHEN m.status = 'queued' THEN 1 ELSE 0 END) AS deferred,"
    " sum(CASE WHEN m.status IN ('failed', 'bounced') THEN 1 ELSE 0 END) AS bounced,"
    " sum(CASE WHEN m.delivered_at IS NOT NULL THEN 1 ELSE 0 END) AS accepted,"
    " sum(CASE WHEN m.complained_at IS NOT NULL THEN 1 ELSE 0 END) AS complained"
    " FROM campaigns c JOIN sender_identities s ON s.id = c.sender_identity_id"
    " JOIN domains d ON d.id = s.domain_id"
    " JOIN email_messages m ON m.campaign_id = c.id"
    " WHERE c.workspace_id = :ws{campaign} AND (c.sent_at IS NULL OR c.sent_at >= :since)"
    " AND m.status IN ('delivered', 'failed', 'bounced', 'queued')"
    " AND coalesce(m.delivered_at, m.failed_at, m.deferred_since) >= :since"
    " AND (m.status <> 'queued' OR m.deferred_since IS NOT NULL)"
    " GROUP BY d.id, d.domain_name, coalesce(m.lane, 'other'), m.bounce_class"
    " ORDER BY d.domain_name, lane")
# ('other' is lanes.OTHER, written as a literal: one expression that PostgreSQL groups by)


def parse_days(value: Any) -> int:
    """`--days` / `?days=`: a whole number of days from 1 to MAX_DAYS (default DEFAULT_DAYS)."""
    if value is None or value == "":
        return DEFAULT_DAYS
    days = value if isinstance(value, int) and not isinstance(value, bool) else parse_digits(value)
    if days is None or not 1 <= days <= MAX_DAYS:
        raise MktError(400, DAYS_INVALID)
    return days


def _warmup(conn: sqlite3.Connection, workspace_id: int) -> dict[tuple[int, str], tuple[int | None, int | None]]:
    """The warm-up day and today's cap per (domain id, lane) of the workspace's domains warming
    up now: the one place a deliverability report reads warm-up from (a lane without a cap today
    has the day and a null cap; a domain with no warm-up running has no entry: null for both)."""
    from marketing_cli.services.delivery import warmup as warmups

    out: dict[tuple[int, str], tuple[int | None, int | None]] = {}
    for row in conn.execute("SELECT * FROM domain_warmups WHERE workspace_id = ? AND stopped_at IS NULL",
                            (workspace_id,)).fetchall():
        warm = warmups.load(row)
        if warm.state != "active":
            continue
        caps = warm.caps_today()
        for lane in warmups.LANES:
            out[(warm.domain_id, lane)] = (warm.day, caps.get(lane))
    return out


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _flag(value: Any) -> bool:
    if value is None or isinstance(value, bool):
        return bool(value)
    if str(value).strip().lower() not in YES + NO:
        raise MktError(400, COMPLIANCE_INVALID)
    return str(value).strip().lower() in YES


def report(conn: sqlite3.Connection, workspace_id: int, days: Any = None, compliance_rows: Any = None) -> dict[str, Any]:
    """GET /v1/deliverability?days=N&compliance=true: {"days", "since", "rows": [...], "compliance":
    {domain: rows} when asked, else null}."""
    days = parse_days(days)
    with_compliance = _flag(compliance_rows)
    since = clock.format_ts(clock.utcnow() - timedelta(days=days))
    out = _rows(conn, workspace_id, since)
    checks = None
    if with_compliance:
        domains = dict(conn.execute("SELECT id, domain_name FROM domains WHERE workspace_id = ? ORDER BY id",
                                    (workspace_id,)).fetchall())
        checks = {name: compliance.check_domain(conn, workspace_id, domain_id) for domain_id, name in domains.items()}
    return {"days": days, "since": since, "rows": out, "compliance": checks}


def campaign_rows(conn: sqlite3.Connection, workspace_id: int, campaign_id: str) -> list[dict[str, Any]]:
    """The rows of one campaign's messages, whenever they were answered (the campaign report's section)."""
    return _rows(conn, workspace_id, "", campaign_id)


def _rows(conn: sqlite3.Connection, workspace_id: int, since: str, campaign_id: str | None = None) -> list[dict[str, Any]]:
    rows: dict[tuple[int, str], dict[str, Any]] = {}
    sql = SQL.format(campaign="" if campaign_id is None else " AND c.id = :campaign")
    params = {"ws": workspace_id, "since": since, "campaign": campaign_id}
    for r in conn.execute(sql, params).fetchall():
        row = rows.setdefault((r["domain_id"], r["lane"]), {
            "domain_id": r["domain_id"], "domain": r["domain_name"], "lane": r["lane"], "sent": 0, "delivered": 0,
            "deferred": 0, "bounced": 0, "bounced_by_class": {}, "complained": 0, "accepted": 0})
        for key in ("delivered", "deferred", "bounced", "complained", "accepted"):
            row[key] += r[key]
        if r["bounced"]:
            cls = r["bounce_class"] or UNCLASSIFIED
            row["bounced_by_class"][cls] = row["bounced_by_class"].get(cls, 0) + r["bounced"]
    states = Shaper(workspace_id).states(conn)
    warmup = _warmup(conn, workspace_id)
    out = []
    for key, row in rows.items():
        accepted = row.pop("accepted")
        row["sent"] = row["delivered"] + row["deferred"] + row["bounced"]
        row["bounced_by_class"] = dict(sorted(row["bounced_by_class"].items(), key=lambda kv: (-kv[1], kv[0])))
        state = states.get(row["lane"])
        day, cap = warmup.get(key, (None, None))
        out.append({**row, "delivered_rate": _rate(row["delivered"], row["sent"]),
                    "deferred_rate": _rate(row["deferred"], row["sent"]),
                    "bounce_rate": _rate(row["bounced"], row["sent"]),
                    "complaint_rate": _rate(row["complained"], accepted),
                    "rate_now": state.rate if state is not None and state.rate > 0 else None,
                    "suspended_until": state.suspended_until if state is not None else None,
                    "warmup_day": day, "warmup_cap": cap})
    return out
