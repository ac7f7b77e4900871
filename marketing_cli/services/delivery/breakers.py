"""Circuit breakers: a campaign (or a flow's email step, which sends as a campaign of its own:
services/email/automated.py) pauses itself when its last deliveries say the list is bad.

Over the campaign's last WINDOW answered messages (delivered, failed or bounced; at least
MIN_DELIVERIES of them), three rates are read:

    complaints      messages the recipient reported as spam (ARF reports, POST /v1/bounces)
    unknown users   bounce class unknown_user (a 550 5.1.1 refusal, or its bounce report)
    blocks          bounce classes policy_block, reputation_block and authentication_failure:
                    the receiver refused the sender, not the address (an authentication
                    failure mid-send means the domain's records changed: as urgent)

When one reaches its threshold (the workspace's, `mkt workspace breakers`; by default 0.3 %,
5 % and 10 %) the campaign goes to PAUSED, its `status_detail` naming the rate, the threshold
and what to check. `mkt campaigns resume ID --force` (POST /v1/campaigns/{id}/resume with
{"force": true}) sends the rest; from then on only the messages answered after the resume
count (`campaigns.breaker_after`: the highest id answered then), so the same window does not
trip it again at once.

When it is read (`check`): after a round whose answers include a permanent refusal, after
every CHECK_EVERY answers of a send job (a window that only reached its minimum), and when a
bounce or complaint report about one of the campaign's messages is recorded (bounces.py). The
window is read from indexes (WINDOW_SQL): at most WINDOW entries per answered status, and the
refused and complained rows within it, whatever the campaign's size.
"""

from __future__ import annotations

import sqlite3
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.services.email import campaigns
from marketing_cli.services.email.schedule import BREAKER_PAUSED
from marketing_cli.storage.db import transaction

WINDOW = 1000         # the last answered messages a campaign's rates are read over
MIN_DELIVERIES = 200  # no rate is read over fewer
CHECK_EVERY = 100     # a send job reads the rates after this many answers even without a refusal
BLOCKS = ("policy_block", "reputation_block", "authentication_failure")
COUNTED = ("unknown_user", *BLOCKS)  # the refusals after which a round reads the rates
RATES = ("complaints", "unknown_users", "blocks")
DEFAULTS = {"complaints": Decimal("0.3"), "unknown_users": Decimal("5"), "blocks": Decimal("10")}
NAMES = {"complaints": "complaints", "unknown_users": "unknown users", "blocks": "blocks"}
ADVICE = {
    "complaints": "check where the list came from, that its contacts opted in, and that the unsubscribe link works",
    "unknown_users": "check the list's source and clean it (`mkt suppressions`, a verification service)",
    "blocks": "check the sending domain's authentication (`mkt domains check`) and the receivers' refusals "
              "(`mkt deliverability`)",
}
DETAIL = (BREAKER_PAUSED + ": {name} {rate}% of the last {n:,} deliveries (threshold {threshold}%): {advice}; "
          "`mkt campaigns resume {id} --force` (POST /v1/campaigns/{id}/resume with {{\"force\": true}}) continues.")
BAD_THRESHOLD = "The {name} threshold must be a percentage above 0 and at most 100, not '{value}'."

_ANSWERED = ("delivered", "failed", "bounced")
_ARM = ("SELECT id FROM (SELECT id FROM email_messages WHERE campaign_id = :c AND status = '{status}' AND id > :after"
        " ORDER BY id DESC LIMIT {limit}) AS {alias}")
# Read from indexes only but for the few refused or complained rows: the window's ids from
# email_messages_status (campaign_id, status, id), then its refusals from the bounce class
# index and its complaints from email_messages_complained (schema step 39).
WINDOW_SQL = (
    "WITH w AS (SELECT id FROM (" + " UNION ALL ".join(_ARM.format(status=s, limit=WINDOW, alias=f"a{i}")
                                                      for i, s in enumerate(_ANSWERED))
    + f") AS arms ORDER BY id DESC LIMIT {WINDOW}),"
    " b AS (SELECT count(*) AS n, coalesce(min(id), 0) AS low FROM w)"
    " SELECT b.n,"
    " (SELECT count(*) FROM email_messages WHERE campaign_id = :c AND complained_at IS NOT NULL AND id >= b.low"
    " AND id > :after) AS complaints,"
    " (SELECT count(*) FROM email_messages WHERE campaign_id = :c AND bounce_class = 'unknown_user' AND id >= b.low"
    " AND id > :after) AS unknown_users,"
    f" (SELECT count(*) FROM email_messages WHERE campaign_id = :c AND bounce_class IN ({', '.join(repr(c) for c in BLOCKS)})"
    " AND id >= b.low AND id > :after) AS blocks"
    " FROM b")


def thresholds(conn: sqlite3.Connection, workspace_id: int) -> dict[str, Decimal]:
    """The workspace's thresholds in percent (the defaults where none is set)."""
    row = conn.execute("SELECT complaints, unknown_users, blocks FROM breaker_settings WHERE workspace_id = ?",
                       (workspace_id,)).fetchone()
    return {rate: Decimal(row[rate]) if row is not None and row[rate] else DEFAULTS[rate] for rate in RATES}


def settings_view(conn: sqlite3.Connection, workspace_id: int) -> dict[str, Any]:
    """What `mkt workspace breakers` shows: each threshold in percent, the window and its minimum."""
    return {**{rate: str(value) for rate, value in thresholds(conn, workspace_id).items()},
            "window": WINDOW, "min_deliveries": MIN_DELIVERIES}


def _percent(name: str, value: Any) -> Decimal:
    try:
        pct = Decimal(str(value).strip().rstrip("%"))
    except InvalidOperation:
        pct = Decimal("NaN")
    if not pct.is_finite() or not Decimal(0) < pct <= Decimal(100):
        raise MktError(400, BAD_THRESHOLD.format(name=NAMES[name], value=value))
    return pct.normalize() if pct == pct.to_integral() else pct


def configure(conn: sqlite3.Connection, workspace_id: int, **changes: Any) -> dict[str, Any]:
    """`mkt workspace breakers --complaints PCT --unknown-users PCT --blocks PCT` (operator only:
    no endpoint reaches it). Options left out keep their values; one bad value writes nothing."""
    parsed = {rate: _percent(rate, value) for rate, value in changes.items() if rate in RATES and value is not None}
    with transaction(conn):
        if conn.execute("SELECT 1 FROM workspaces WHERE id = ?", (workspace_id,)).fetchone() is None:
            raise MktError(404, "Workspace not found.")
        conn.execute("INSERT INTO breaker_settings (workspace_id) VALUES (?) ON CONFLICT (workspace_id) DO NOTHING",
                     (workspace_id,))
        for rate, pct in parsed.items():  # (the column names are ours: RATES)
            conn.execute(f"UPDATE breaker_settings SET {rate} = ? WHERE workspace_id = ?",
                         (format(pct, "f"), workspace_id))
        return settings_view(conn, workspace_id)


def window(conn: sqlite3.Connection, campaign_id: str, after: int | None) -> dict[str, int]:
    """The campaign's last answered messages (at most WINDOW, of those whose id is above `after`):
    {"n", "complaints", "unknown_users", "blocks"}. A message is placed by its id (the order
    the send claims them in): a retried message answered late counts where its id stands."""
    row = conn.execute(WINDOW_SQL, {"c": campaign_id, "after": after or 0}).fetchone()
    return {key: int(row[key]) for key in ("n", *RATES)}


def _tripped(counts: dict[str, int], limits: dict[str, Decimal]) -> tuple[str, Decimal, Decimal] | None:
    """The first rate at or above its threshold: (rate, its value in percent, the threshold)."""
    n = counts["n"]
    if n < MIN_DELIVERIES:
        return None
    for rate in RATES:
        pct = Decimal(counts[rate] * 100) / n
        if counts[rate] and pct >= limits[rate]:
            return rate, pct, limits[rate]
    return None


def check(conn: sqlite3.Connection, campaign_id: str) -> str | None:
    """Read the campaign's rates; when one reached its threshold and the campaign is SENDING,
    pause it with the reason. Returns the `status_detail` it wrote (None: nothing tripped).
    The rates are read outside any write transaction (the send's hot path); only a trip writes."""
    row = conn.execute("SELECT workspace_id, status, breaker_after FROM campaigns WHERE id = ?",
                       (campaign_id,)).fetchone()
    if row is None or row["status"] != "SENDING":
        return None
    counts = window(conn, campaign_id, row["breaker_after"])
    hit = _tripped(counts, thresholds(conn, row["workspace_id"]))
    if hit is None:
        return None
    rate, pct, threshold = hit
    detail = DETAIL.format(name=NAMES[rate], rate=_shown(pct), n=counts["n"], threshold=_shown(threshold), advice=ADVICE[rate], id=campaign_id)
    with transaction(conn):
        current = conn.execute("SELECT status FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()
        if current is None or current[0] != "SENDING":  # (another worker paused it first)
            return None
        campaigns.set_campaign_status(conn, campaign_id, "PAUSED", detail=detail)
    return detail


def _shown(pct: Decimal) -> str:
    """A percentage with one decimal (0.3, 6.1, 10)."""
    text = format(pct.quantize(Decimal("0.1"), rounding=ROUND_HALF_UP), "f")
    return text[:-2] if text.endswith(".0") else text

