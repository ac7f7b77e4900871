"""SMS campaigns: the specification's messages, the campaign view, create, list, read,
update, archive and cancel.

States (spec part 3): DRAFT -> QUEUED (schedule.py) -> COMPLETED (expansion.py: every
recipient expanded and handed to the provider); QUEUED -> CANCELLED (cancel: what was never
handed over is refunded); QUEUED -> DRAFT (unschedule, before expansion begins); DRAFT,
COMPLETED or CANCELLED -> ARCHIVED. Duplicate copies any campaign as a new DRAFT.

The rest of a campaign's life has a module each: `schedule` (quote, cost estimate, review,
schedule), `expansion` (the `sms.expand` job) with its phases `recipients` (message rows,
charges) and `handoff` (to the provider), `stats` (GET .../statistics), with `pricing` and
`render` under expansion and the estimate.
"""

from __future__ import annotations

import json
import math
import sqlite3
from typing import Any

from marketing_cli import jobs
from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.ids import new_id, parse_hex_id
from marketing_cli.kernel.inputs import require_object, required_text
from marketing_cli.services.sms import ledger
from marketing_cli.services.sms.render import check_message
from marketing_cli.storage.db import transaction

STATUSES = ("DRAFT", "QUEUED", "COMPLETED", "CANCELLED", "ARCHIVED")
MAX_NAME = 255
MAX_MESSAGE = 1600
DEFAULT_LIMIT, MAX_LIMIT = 50, 100

# Specification messages (part 7).
INVALID_BODY = "Please provide a valid request body."
NAME_REQUIRED = "Please provide a name for this campaign."
NAME_TOO_LONG = "The campaign name must be 255 characters or less."
INVALID_STATUS = "Invalid status '{value}'."
ID_REQUIRED = "Please provide a campaign ID."
NOT_FOUND = "We could not find the campaign you are looking for."
SCHEDULE_INVALID_BODY = "Invalid request body."
INVALID_SCHEDULE_TYPE = "Invalid schedule type. Must be 'NOW' or 'LATER'."
SCHEDULED_AT_REQUIRED = "Scheduled date and time is required when schedule type is 'LATER'."
SCHEDULED_AT_FORMAT = "Invalid scheduled date format. Please provide a valid ISO 8601 UTC timestamp."
SCHEDULED_AT_PAST = "Scheduled date must be in the future."
SCHEDULED_AT_UNUSABLE = "Please enter a valid date and time."
ONLY_DRAFT = "Only draft campaigns can be scheduled."
NAME_BEFORE_SCHEDULING = "Please provide a name for this campaign before scheduling."
MESSAGE_BEFORE_SCHEDULING = "Please provide a message for this campaign before scheduling."
AUDIENCE_BEFORE_SCHEDULING = "Please configure an audience for this campaign before scheduling."
NO_SENDER_ID = "Please add an SMS sender ID under SMS Marketing before scheduling this campaign."
BALANCE_CHECK_FAILED = "We could not check your SMS balance. Please try again later."
BALANCE_BELOW_MINIMUM = ("Your available SMS balance is ${available}, but at least ${minimum} is required to start a "
                         "campaign. Please visit Billing to top up your SMS balance.")
REVIEW_FAILED = "We couldn't complete the automated review of this campaign. Please try again in a few minutes."
REVIEW_FLAGGED = "This campaign was flagged by automated review. Please contact support if you believe this is a mistake."
QUEUE_FAILED = "Failed to queue SMS campaign for processing."

# The project's own messages (extensions, docs/sms.md).
BALANCE_BELOW_ESTIMATE = ("Your available SMS balance is ${available}{reserved}, but this campaign is estimated to "
                          "cost ${estimate} ({recipients}). Add to the balance with `mkt sms balance add AMOUNT`.")
# The specification's balance message sends people to a billing page mkt does not have: its
# detail (X-Error-Detail, the CLI's second line) names the command that tops the balance up.
TOP_UP = "mkt has no billing page: an operator adds to the prepaid SMS balance with `mkt sms balance add AMOUNT`."
RESERVED = " (${reserved} of your ${balance} is reserved by campaigns already queued)"
ONLY_DRAFT_UPDATE = "Only draft campaigns can be updated."
MESSAGE_TOO_LONG = f"The message must be {MAX_MESSAGE} characters or less."
ONLY_QUEUED_CANCEL = "Only queued campaigns can be cancelled."
NOT_UNSCHEDULABLE = "Only queued campaigns can be unscheduled; this one is {status}."
ALREADY_SENDING = ("This campaign has started sending ({count:,} messages prepared): cancel it with "
                   "`mkt sms cancel {id}` instead (messages never handed to a provider are refunded).")
COPY_NAME = "Copy of {name}"
CANNOT_ARCHIVE = "Only draft, completed or cancelled campaigns can be archived."
JOB_FAILED = ("Cancelled because the job sending it failed for good: {error} Messages never handed to a provider "
              "were refunded.")
QUOTE_MESSAGE_REQUIRED = "Please provide a message to quote."
INVALID_NUMBER = "'{value}' is not a valid phone number in E.164 form (+14155550100)."


def job_key(campaign_id: str) -> str:
    """The dedupe key of a campaign's expansion job (one queued job per campaign)."""
    return f"sms-campaign:{campaign_id}"


# --- views --------------------------------------------------------------------------

_ZERO_STATS = {"sent": 0, "delivered": 0, "clicked": 0, "failed": 0, "unsubscribed": 0, "suppressed": 0}
_STATS_SQL = """
SELECT m.campaign_id,
       SUM(CASE WHEN m.handed_at IS NOT NULL THEN 1 ELSE 0 END) AS sent,
       SUM(CASE WHEN m.status = 'delivered' THEN 1 ELSE 0 END) AS delivered,
       SUM(CASE WHEN m.status IN ('failed', 'undelivered') THEN 1 ELSE 0 END) AS failed,
       SUM(CASE WHEN m.unsubscribed_at IS NOT NULL THEN 1 ELSE 0 END) AS unsubscribed,
       SUM(CASE WHEN m.status = 'suppressed' THEN 1 ELSE 0 END) AS suppressed,
       SUM(CASE WHEN EXISTS (SELECT 1 FROM sms_clicks k WHERE k.message_id = m.id) THEN 1 ELSE 0 END) AS clicked
FROM sms_messages m WHERE m.campaign_id IN ({marks}) GROUP BY m.campaign_id
"""


def message_counts(conn: sqlite3.Connection, ids: list[str]) -> dict[str, dict[str, int]]:
    out = {i: dict(_ZERO_STATS) for i in ids}
    if ids:
        for row in conn.execute(_STATS_SQL.format(marks=", ".join("?" * len(ids))), ids):
            out[row["campaign_id"]] = {k: int(row[k] or 0) for k in _ZERO_STATS}
    return out


def campaign_view(row: sqlite3.Row, stats: dict[str, int], *, with_workspace: bool = True,
                  held: dict[str, Any] | None = None) -> dict[str, Any]:
    view: dict[str, Any] = {"id": row["id"]}
    if with_workspace:
        view["workspace_id"] = row["workspace_id"]
    view.update({
        "name": row["name"],
        "message": row["message"],
        "audience": json.loads(row["audience"]),
        "status": row["status"],
        "status_detail": row["status_detail"],
        "scheduled_at": row["scheduled_at"],
        "statistics": stats,
        # Extension: messages waiting for their recipients' quiet hours to end (gate.py).
        "quiet_hours": held or {"held": 0, "next_release_at": None},
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    })
    return view


def campaign_row(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> sqlite3.Row:
    if campaign_id is None or (isinstance(campaign_id, str) and not campaign_id.strip()):
        raise MktError(400, ID_REQUIRED)
    cid = parse_hex_id(campaign_id, NOT_FOUND)
    row = conn.execute("SELECT * FROM sms_campaigns WHERE id = ? AND workspace_id = ?", (cid, workspace_id)).fetchone()
    if row is None:
        raise MktError(400, NOT_FOUND)
    return row


def _view(conn: sqlite3.Connection, row: sqlite3.Row, *, with_workspace: bool = True) -> dict[str, Any]:
    from marketing_cli.services.sms.gate import held_counts

    view = campaign_view(row, message_counts(conn, [row["id"]])[row["id"]], with_workspace=with_workspace,
                         held=held_counts(conn, [row["id"]])[row["id"]])
    if row["local_time"]:  # extension (docs/sms.md "Local-time delivery")
        from marketing_cli.services.contacts.local_time import local_time_view

        view["local_time"] = local_time_view(row, waiting_for_zone(conn, row))
    return view


def waiting_for_zone(conn: sqlite3.Connection, row: sqlite3.Row) -> int:
    """Messages of a local-time campaign written and charged, waiting for their zone's time."""
    if not row["local_time"]:
        return 0
    return conn.execute("SELECT count(*) FROM sms_messages WHERE campaign_id = ? AND status = 'pending'"
                        " AND due_at > ?", (row["id"], clock.now())).fetchone()[0]


# --- create, list, read, update --------------------------------------------------------

def _check_name(value: Any, *, path: str = "name") -> str:
    return required_text(value, path, missing=NAME_REQUIRED, too_long=NAME_TOO_LONG, max_length=MAX_NAME)


def create_campaign(conn: sqlite3.Connection, workspace_id: int, body: Any) -> dict[str, Any]:
    """POST /v1/sms-campaigns: a DRAFT with an empty message and audience."""
    body = require_object(body, INVALID_BODY)
    name = _check_name(body.get("name"))
    now = clock.now()
    cid = new_id()
    with transaction(conn):
        conn.execute("INSERT INTO sms_campaigns (id, workspace_id, name, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
                     (cid, workspace_id, name, now, now))
        return _view(conn, campaign_row(conn, workspace_id, cid))


def _page_arg(value: Any, default: int, high: int | None) -> int:
    try:
        number = int(str(value).strip()) if value is not None and str(value).strip() else default
    except ValueError:
        number = default
    number = max(1, number)
    return min(number, high) if high is not None else number


def list_campaigns(conn: sqlite3.Connection, workspace_id: int, *, page: Any = None, limit: Any = None,
                   status: Any = None) -> dict[str, Any]:
    """GET /v1/sms-campaigns: newest first; page and limit sanitised (limit 1-100, default 50)."""
    where, params = "workspace_id = ? AND automation_id IS NULL AND purpose IS NULL", [workspace_id]  # not hidden
    if status is not None and str(status) != "":
        if not isinstance(status, str) or status.strip().upper() not in STATUSES:
            raise MktError(400, INVALID_STATUS.format(value=status))
        where += " AND status = ?"
        params.append(status.strip().upper())
    page_number = min(_page_arg(page, 1, None), 10**12)
    per_page = _page_arg(limit, DEFAULT_LIMIT, MAX_LIMIT)
    total = conn.execute(f"SELECT COUNT(*) FROM sms_campaigns WHERE {where}", params).fetchone()[0]
    rows = conn.execute(f"SELECT * FROM sms_campaigns WHERE {where} ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
                        (*params, per_page, (page_number - 1) * per_page)).fetchall()
    from marketing_cli.services.sms.gate import held_counts

    stats = message_counts(conn, [r["id"] for r in rows])
    held = held_counts(conn, [r["id"] for r in rows])
    return {
        "campaigns": [campaign_view(r, stats[r["id"]], with_workspace=False, held=held[r["id"]]) for r in rows],
        "pagination": {"current_page": page_number, "per_page": per_page,
                       "total_pages": math.ceil(total / per_page), "total_count": total},
    }


def get_campaign(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """GET /v1/sms-campaigns/:id."""
    return _view(conn, campaign_row(conn, workspace_id, campaign_id))


def _check_message(conn: sqlite3.Connection, workspace_id: int, value: Any) -> str:
    if not isinstance(value, str):
        raise MktError(400, "The member 'message' must be a string.")
    if len(value) > MAX_MESSAGE:
        raise MktError(400, MESSAGE_TOO_LONG)
    check_message(conn, workspace_id, value)
    return value


def update_campaign(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any, body: Any) -> dict[str, Any]:
    """PATCH /v1/sms-campaigns/:id: name, message, audience (members left out keep their values)."""
    from marketing_cli.services.contacts.audience import validate_audience

    row = campaign_row(conn, workspace_id, campaign_id)
    body = require_object(body, INVALID_BODY)
    changes: dict[str, Any] = {}
    if body.get("name") is not None:  # null is left out (docs/api.md), as for every optional member
        changes["name"] = _check_name(body["name"])
    if "message" in body:
        changes["message"] = _check_message(conn, workspace_id, body["message"] if body["message"] is not None else "")
    if "audience" in body:
        audience = body["audience"]
        changes["audience"] = json.dumps([] if audience is None or audience == []
                                         else validate_audience(conn, workspace_id, audience))
    with transaction(conn):
        row = campaign_row(conn, workspace_id, row["id"])
        if row["status"] != "DRAFT":
            raise MktError(400, ONLY_DRAFT_UPDATE)
        if changes:
            sets = ", ".join(f"{k} = ?" for k in changes)
            conn.execute(f"UPDATE sms_campaigns SET {sets}, updated_at = ? WHERE id = ?",
                         (*changes.values(), clock.now(), row["id"]))
        return _view(conn, campaign_row(conn, workspace_id, row["id"]))


def archive_campaign(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """POST /v1/sms-campaigns/:id/archive: DRAFT, COMPLETED or CANCELLED -> ARCHIVED."""
    with transaction(conn):
        row = campaign_row(conn, workspace_id, campaign_id)
        if row["status"] not in ("DRAFT", "COMPLETED", "CANCELLED"):
            raise MktError(400, CANNOT_ARCHIVE)
        conn.execute("UPDATE sms_campaigns SET status = 'ARCHIVED', updated_at = ? WHERE id = ?", (clock.now(), row["id"]))
        return {"id": row["id"], "status": "ARCHIVED"}



# --- unschedule and duplicate ---------------------------------------------------------------

def unschedule_campaign(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """POST /v1/sms-campaigns/:id/unschedule: a QUEUED campaign whose expansion has not begun
    goes back to DRAFT; its job is removed and its reservation of the balance ends."""
    with transaction(conn):
        row = campaign_row(conn, workspace_id, campaign_id)
        if row["status"] != "QUEUED":
            raise MktError(400, NOT_UNSCHEDULABLE.format(status=row["status"]))
        prepared = conn.execute("SELECT COUNT(*) FROM sms_messages WHERE campaign_id = ?", (row["id"],)).fetchone()[0]
        if prepared or row["expanded_at"]:
            raise MktError(400, ALREADY_SENDING.format(count=prepared, id=row["id"]))
        conn.execute("UPDATE sms_campaigns SET status = 'DRAFT', scheduled_at = NULL, queued_at = NULL,"
                     " estimated_cost = NULL, status_detail = NULL, local_time = NULL, local_date = NULL,"
                     " local_time_missed = NULL, local_starts_at = NULL, local_time_skipped = 0, updated_at = ?"
                     " WHERE id = ?",
                     (clock.now(), row["id"]))
        jobs.drop_queued(conn, "campaign_id", row["id"])
        return _view(conn, campaign_row(conn, workspace_id, row["id"]))


def copy_name(name: str, max_length: int = MAX_NAME) -> str:
    """`Copy of <name>`, cut to fit the name limit."""
    return COPY_NAME.format(name=name)[:max_length]


def duplicate_campaign(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """POST /v1/sms-campaigns/:id/duplicate: a new DRAFT with the name `Copy of <name>`, the same
    message and audience; no schedule, no messages, zero statistics. 201."""
    with transaction(conn):
        row = campaign_row(conn, workspace_id, campaign_id)
        now = clock.now()
        cid = new_id()
        conn.execute("INSERT INTO sms_campaigns (id, workspace_id, name, message, audience, created_at, updated_at)"
                     " VALUES (?, ?, ?, ?, ?, ?, ?)",
                     (cid, workspace_id, copy_name(row["name"]), row["message"], row["audience"], now, now))
        return _view(conn, campaign_row(conn, workspace_id, cid))


# --- cancel ------------------------------------------------------------------------------

def cancel_campaign(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """POST /v1/sms-campaigns/:id/cancel: stop, refund every message never handed over."""
    with transaction(conn):
        row = campaign_row(conn, workspace_id, campaign_id)
        if row["status"] != "QUEUED":
            raise MktError(400, ONLY_QUEUED_CANCEL)
        count, units = stop_queued(conn, row, "cancelled")
        return {"id": row["id"], "status": "CANCELLED", "refunded": ledger.money(ledger.from_units(units)),
                "refunded_messages": count}


def stop_queued(conn: sqlite3.Connection, row: sqlite3.Row, why: str, detail: str | None = None) -> tuple[int, int]:
    """A QUEUED campaign to CANCELLED, in the caller's transaction: every message never handed to
    a provider is cancelled and refunded in one ledger entry, the queued job is dropped, and the
    campaign's reservation ends with its QUEUED state. (messages, units) refunded. Messages
    already handed over (`sent`, or `sending` to a network provider) stay charged."""
    # Held messages (quiet hours) were never handed over either.
    count, units = conn.execute("SELECT COUNT(*), COALESCE(SUM(price_units), 0) FROM sms_messages"
                                " WHERE campaign_id = ? AND status IN ('pending', 'held')", (row["id"],)).fetchone()
    conn.execute("UPDATE sms_messages SET status = 'cancelled' WHERE campaign_id = ? AND status IN ('pending', 'held')",
                 (row["id"],))
    if units > 0:
        ledger.append(conn, row["workspace_id"], "refund", ledger.from_units(units),
                      f"Campaign '{row['name']}' {why}: {count:,} messages never handed to a provider",
                      campaign_id=row["id"])
    now = clock.now()
    conn.execute("UPDATE sms_campaigns SET status = 'CANCELLED', status_detail = ?, cancelled_at = ?, updated_at = ?"
                 " WHERE id = ?", (detail, now, now, row["id"]))
    jobs.drop_queued(conn, "campaign_id", row["id"])
    return count, units
