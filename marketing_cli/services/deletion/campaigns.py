"""Deleting what was sent or would send: email campaigns, SMS campaigns and automations
(DELETE /v1/campaigns|sms-campaigns|automations/{id}).

A campaign in flight is refused (cancel it first), and so is one that sent anything until it is
archived: a two-step delete, so that a campaign's report is never lost by one mistyped id.
What goes: its variants, messages (and their clicks, links, outbox rows), counters, hourly and
breakdown rows, previews, A/B hold-outs, a stopped series that sent it, and its queued jobs, as
the schema's foreign keys cascade. What stays (docs/privacy.md): the workspace's usage counters
(monthly_emails counts what was sent this month whatever happens to the campaign), the SMS
ledger's charges and refunds (the balance and `spent` do not move), each contact's engagement
totals and the automation event log. A message a worker has claimed but not yet recorded
(status `sending`, a minute at most) holds a reservation of the month's and hour's allowance:
the delete waits for it (409) rather than leave that reservation held for good. And an email's
unsubscribe link must keep working for 30 days after it went out (CAN-SPAM): a campaign whose
last message was delivered more recently is refused until then.

An automation must be DRAFT or ARCHIVED; it goes with its versions, enrollments and their step
runs, webhook outbox, and the hidden campaigns that carried its email and SMS steps.
"""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.ids import parse_hex_id, parse_int_id
from marketing_cli.services.automations import flows
from marketing_cli.services.deletion import Removal, deleted, in_use, not_found, plural
from marketing_cli.services.deletion.uses import EMAIL_IN_FLIGHT, SERIES_LIVE, SMS_IN_FLIGHT, WAIT_OR_CANCEL, listed
from marketing_cli.services.email import campaigns as email_campaigns
from marketing_cli.services.sms import campaigns as sms_campaigns
from marketing_cli.storage.db import transaction

HANDING_OVER = "Messages of this {what} are being handed over right now: try again in a minute."
ARCHIVE_FIRST = "This {what} sent messages ({status}): archive it first."
AUTOMATION_STEP = "This {what} carries a step of automation {automation_id}: it is deleted with the automation."
SERIES_FIRST = ("This campaign is the definition of series {id} ({status}): stop the series first"
                " (mkt campaigns series stop {id}).")
# CAN-SPAM (16 CFR 316.5): an email's opt-out must keep working for 30 days after it is sent; the
# unsubscribe link's token lives on the message row, which the delete would take with it.
UNSUBSCRIBE_DAYS = 30
UNSUBSCRIBE_WINDOW = ("This {what}'s last message went out at {last}: its unsubscribe links must keep working for"
                      " 30 days, until {until}. Delete it after that.")
AUTOMATION_LIVE = "This automation is {status}: archive it first (the contacts in it exit)."
EMAIL_HANDED = "SELECT 1 FROM email_messages WHERE campaign_id = ? AND status IN ('delivered', 'failed', 'bounced') LIMIT 1"
SMS_HANDED = "SELECT 1 FROM sms_messages WHERE campaign_id = ? AND handed_at IS NOT NULL LIMIT 1"
_QUEUED_JOBS = "DELETE FROM jobs WHERE status = 'queued' AND json_extract(payload, '$.campaign_id') IN "


def _hex_id(campaign_id: Any, required: str, not_found_message: str) -> str:
    """A campaign id as the channel's other endpoints read it: blank and malformed are their 400s."""
    if campaign_id is None or (isinstance(campaign_id, str) and not campaign_id.strip()):
        raise MktError(400, required)
    return parse_hex_id(campaign_id, not_found_message)


def _refuse(conn: sqlite3.Connection, row: Any, what: str, in_flight: tuple[str, ...], sent: str, handed: str,
            messages: str) -> None:
    """The rules both channels share, in the order a person fixes them."""
    if row["automation_id"] is not None:
        raise in_use(AUTOMATION_STEP.format(what=what, automation_id=row["automation_id"]))
    if row["status"] in in_flight:
        raise in_use(f"This {what} is {row['status']}: {WAIT_OR_CANCEL}")
    if row["status"] == sent or (row["status"] == "CANCELLED"
                                 and conn.execute(handed, (row["id"],)).fetchone() is not None):
        raise in_use(ARCHIVE_FIRST.format(what=what, status=row["status"]))
    if conn.execute(f"SELECT 1 FROM {messages} WHERE campaign_id = ? AND status = 'sending' LIMIT 1",
                    (row["id"],)).fetchone() is not None:
        raise in_use(HANDING_OVER.format(what=what))


def _unsubscribe_window(conn: sqlite3.Connection, what: str, campaigns_sql: str, params: tuple[Any, ...]) -> None:
    """409 while the last email delivered for these campaigns is under 30 days old."""
    last = conn.execute(f"SELECT max(delivered_at) FROM email_messages WHERE campaign_id IN {campaigns_sql}",
                        params).fetchone()[0]
    if last is None:
        return
    until = clock.parse_ts(last) + timedelta(days=UNSUBSCRIBE_DAYS)
    if until > clock.utcnow():
        raise in_use(UNSUBSCRIBE_WINDOW.format(what=what, last=last, until=clock.format_ts(until)))


def remove_campaign(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> Removal:
    campaign_id = _hex_id(campaign_id, email_campaigns.ID_REQUIRED, email_campaigns.NOT_FOUND)
    with transaction(conn):
        row = conn.execute("SELECT id, name, status, automation_id FROM campaigns WHERE id = ? AND workspace_id = ?",
                           (campaign_id, workspace_id)).fetchone()
        if row is None:
            raise not_found()
        series = conn.execute(f"SELECT id, status FROM campaign_series WHERE campaign_id = ? AND status IN"
                              f" ({listed(SERIES_LIVE)})", (campaign_id,)).fetchone()
        if series is not None and row["automation_id"] is None:
            raise in_use(SERIES_FIRST.format(id=series["id"], status=series["status"]))
        _refuse(conn, row, "campaign", EMAIL_IN_FLIGHT, "SENT", EMAIL_HANDED, "email_messages")
        _unsubscribe_window(conn, "campaign", "(?)", (campaign_id,))
        messages = conn.execute("DELETE FROM email_messages WHERE campaign_id = ?", (campaign_id,)).rowcount
        conn.execute(_QUEUED_JOBS + "(?)", (campaign_id,))
        conn.execute("DELETE FROM campaigns WHERE id = ?", (campaign_id,))
    effects = [f"Campaign {row['name']} deleted with {plural(messages, 'message')}, their clicks and statistics."]
    if messages:
        effects.append("The workspace's usage counters keep what it sent.")
    return deleted(campaign_id, *effects)


def delete_campaign(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """DELETE /v1/campaigns/{id}."""
    return remove_campaign(conn, workspace_id, campaign_id).data


def remove_sms_campaign(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> Removal:
    campaign_id = _hex_id(campaign_id, sms_campaigns.ID_REQUIRED, sms_campaigns.NOT_FOUND)
    with transaction(conn):
        row = conn.execute("SELECT id, name, status, automation_id FROM sms_campaigns WHERE id = ? AND workspace_id = ?",
                           (campaign_id, workspace_id)).fetchone()
        if row is None:
            raise not_found()
        _refuse(conn, row, "SMS campaign", SMS_IN_FLIGHT, "COMPLETED", SMS_HANDED, "sms_messages")
        messages = conn.execute("DELETE FROM sms_messages WHERE campaign_id = ?", (campaign_id,)).rowcount
        conn.execute(_QUEUED_JOBS + "(?)", (campaign_id,))
        conn.execute("DELETE FROM sms_campaigns WHERE id = ?", (campaign_id,))
    effects = [f"SMS campaign {row['name']} deleted with {plural(messages, 'message')}."]
    if messages:
        effects.append("The SMS ledger keeps its charges and refunds: the balance does not change.")
    return deleted(campaign_id, *effects)


def delete_sms_campaign(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """DELETE /v1/sms-campaigns/{id}."""
    return remove_sms_campaign(conn, workspace_id, campaign_id).data


def remove_automation(conn: sqlite3.Connection, workspace_id: int, automation_id: Any) -> Removal:
    automation_id = parse_int_id(automation_id, flows.NOT_FOUND, 404)
    with transaction(conn):
        row = conn.execute("SELECT id, name, status FROM automations WHERE id = ? AND workspace_id = ?",
                           (automation_id, workspace_id)).fetchone()
        if row is None:
            raise not_found()
        if row["status"] in ("ACTIVE", "PAUSED"):
            raise in_use(AUTOMATION_LIVE.format(status=row["status"]))
        email = "(SELECT id FROM campaigns WHERE workspace_id = ? AND automation_id = ?)"
        sms = "(SELECT id FROM sms_campaigns WHERE workspace_id = ? AND automation_id = ?)"
        ids = (workspace_id, automation_id)
        if conn.execute(f"SELECT 1 FROM email_messages WHERE campaign_id IN {email} AND status = 'sending'"
                        f" UNION ALL SELECT 1 FROM sms_messages WHERE campaign_id IN {sms} AND status = 'sending'",
                        ids * 2).fetchone() is not None:
            raise in_use(HANDING_OVER.format(what="automation"))
        _unsubscribe_window(conn, "automation", email, ids)
        messages = conn.execute(f"DELETE FROM email_messages WHERE campaign_id IN {email}", ids).rowcount
        messages += conn.execute(f"DELETE FROM sms_messages WHERE campaign_id IN {sms}", ids).rowcount
        conn.execute(f"{_QUEUED_JOBS}{email}", ids)
        conn.execute(f"{_QUEUED_JOBS}{sms}", ids)
        conn.execute("DELETE FROM campaigns WHERE workspace_id = ? AND automation_id = ?", ids)
        conn.execute("DELETE FROM sms_campaigns WHERE workspace_id = ? AND automation_id = ?", ids)
        versions = conn.execute("SELECT count(*) FROM automation_versions WHERE automation_id = ?",
                                (automation_id,)).fetchone()[0]
        enrollments = conn.execute("DELETE FROM automation_enrollments WHERE automation_id = ?",
                                   (automation_id,)).rowcount
        conn.execute("DELETE FROM automations WHERE id = ?", (automation_id,))
    return deleted(automation_id, f"Automation {row['name']} deleted with {plural(versions, 'version')},"
                                  f" {plural(enrollments, 'enrollment')} and {plural(messages, 'message')} of its steps.")


def delete_automation(conn: sqlite3.Connection, workspace_id: int, automation_id: Any) -> dict[str, Any]:
    """DELETE /v1/automations/{id}."""
    return remove_automation(conn, workspace_id, automation_id).data
