"""Automated email: the messages a flow's send step writes, sent by the normal sender.

A flow's email step (services/automations/) gets a campaign of its own, marked with
`campaigns.automation_id` and created in status SENDING: the sender (sender.py) then
renders, DKIM-signs, tracks and records its messages exactly as a campaign's, and its
statistics are a campaign's. Such a campaign never ends SENT (more messages come as
contacts reach the step) and is left out of the campaign list. A message is queued in the
caller's transaction together with the `email.send` job (deduplicated per campaign), so
the step that wrote it and the message commit or vanish together. `queue_automated_messages`
writes a batch of them (the drain of many due steps, services/automations/drain.py) in one
statement execution and queues the send job once.
"""

from __future__ import annotations

import sqlite3

from marketing_cli import jobs
from marketing_cli.kernel import clock
from marketing_cli.kernel.ids import new_id
from marketing_cli.services.email import stats


def create_automated_campaign(conn: sqlite3.Connection, workspace_id: int, *, automation_id: int, name: str,
                              sender_id: int, subject: str, preview_text: str, html: str) -> str:
    """A SENDING campaign with one variant holding the (already cleaned) HTML; its id."""
    now = clock.now()
    campaign_id = new_id()
    conn.execute("INSERT INTO campaigns (id, workspace_id, name, type, status, sender_identity_id, created_at,"
                 " updated_at, send_started_at, automation_id) VALUES (?, ?, ?, 'SINGLE_VARIANT', 'SENDING', ?, ?, ?,"
                 " ?, ?)", (campaign_id, workspace_id, name[:255], sender_id, now, now, now, automation_id))
    conn.execute("INSERT INTO campaign_variants (id, campaign_id, type, subject, preview_text, template_type,"
                 " body_html, created_at, updated_at) VALUES (?, ?, 'A', ?, ?, 'CODE', ?, ?, ?)",
                 (new_id(), campaign_id, subject, preview_text, html, now, now))
    return campaign_id


def queue_automated_message(conn: sqlite3.Connection, campaign_id: str, contact_id: str, email: str) -> int:
    """One queued message of an automated campaign and its send job (inside the caller's transaction)."""
    row = conn.execute("SELECT c.workspace_id, c.status, v.id AS variant_id FROM campaigns c"
                       " JOIN campaign_variants v ON v.campaign_id = c.id AND v.type = 'A' WHERE c.id = ?",
                       (campaign_id,)).fetchone()
    domain = email.rsplit("@", 1)[-1].lower()
    message_id = conn.execute(
        "INSERT INTO email_messages (campaign_id, variant_id, contact_id, email, domain, provider, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (campaign_id, row["variant_id"], contact_id, email, domain, stats.provider_of(domain), clock.now())).lastrowid
    if row["status"] == "SENDING":  # a PAUSED one (transport errors) waits for `mkt campaigns resume`
        jobs.enqueue(conn, "email.send", {"campaign_id": campaign_id}, workspace_id=row["workspace_id"],
                     dedupe_key=f"email.send:{campaign_id}")
    return message_id


def queue_automated_messages(conn: sqlite3.Connection, campaign_id: str, contact_ids: list[str]) -> None:
    """Queued messages of an automated campaign to these contacts (their addresses read in the
    same statement), counted against the frequency caps (`capped` = 1), and the campaign's send
    job once, inside the caller's transaction: queue_automated_message's rows for many contacts
    in one INSERT ... SELECT, the domain and provider as the campaign's freeze writes them
    (preparation.py). The caller finds each message by (campaign, contact), which is unique."""
    from marketing_cli.services.email.preparation import DOMAIN

    if not contact_ids:
        return
    row = conn.execute("SELECT c.workspace_id, c.status, v.id AS variant_id FROM campaigns c"
                       " JOIN campaign_variants v ON v.campaign_id = c.id AND v.type = 'A' WHERE c.id = ?",
                       (campaign_id,)).fetchone()
    marks = ", ".join("?" * len(contact_ids))
    conn.execute("INSERT INTO email_messages (campaign_id, variant_id, contact_id, email, domain, provider,"
                 f" created_at, capped) SELECT ?, ?, id, email, {DOMAIN}, {stats.provider_sql(conn, DOMAIN)}, ?, 1"
                 f" FROM contacts WHERE id IN ({marks})", (campaign_id, row["variant_id"], clock.now(), *contact_ids))
    if row["status"] == "SENDING":  # a PAUSED one (transport errors) waits for `mkt campaigns resume`
        jobs.enqueue(conn, "email.send", {"campaign_id": campaign_id}, workspace_id=row["workspace_id"],
                     dedupe_key=f"email.send:{campaign_id}")
