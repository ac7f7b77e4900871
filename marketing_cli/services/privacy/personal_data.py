"""The personal-data export: one JSON document with everything held about a person (GDPR
Art. 15 and 20; docs/privacy.md "The personal-data export").

    GET /v1/contacts/{id}/personal-data        mkt contacts export-person ID|EMAIL|PHONE

The document is the contact as GET /v1/contacts/{id} shows it (fields, tags, statistics),
then one member per kind of row that names the person, each a list of plain objects (the
rows' own columns, JSON columns decoded): events, email messages with their states and
clicks, SMS messages with the text as sent and their clicks, flow enrollments with their
step runs and the webhook calls made about the person, test emails sent to the address,
the suppression-list entries for the address (a person asking again), and consents. It is
read in one snapshot, so the sections agree with each other.

A kind of row that a later schema step adds is one line in SECTIONS (a section whose table
the database does not have yet is left out), the same way erase.py's PERSON_ROWS is.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from marketing_cli.kernel import clock
from marketing_cli.services.contacts import suppressions
from marketing_cli.services.contacts.records import get_contact
from marketing_cli.services.privacy.person import contact_id_of
from marketing_cli.storage import dialect
from marketing_cli.storage.db import read_snapshot

FORMAT = "mkt.personal-data"
VERSION = 1


@dataclass(frozen=True)
class Section:
    name: str  # the document's member
    table: str  # left out when the database has no such table
    sql: str  # parameters :ws, :contact, :email, :phone
    json: tuple[str, ...] = ()  # columns holding JSON text, decoded


_SMS_OF_PERSON = ("m.campaign_id IN (SELECT id FROM sms_campaigns WHERE workspace_id = :ws)"
                  " AND m.contact_id = :contact")
_ENROLLMENTS = "SELECT id FROM automation_enrollments WHERE contact_id = :contact"

SECTIONS: tuple[Section, ...] = (
    Section("events", "contact_events",
            "SELECT id, type, payload, created_at FROM contact_events"
            " WHERE contact_id = :contact AND workspace_id = :ws ORDER BY id", ("payload",)),
    Section("email_messages", "email_messages",
            "SELECT m.id, m.campaign_id, c.name AS campaign_name, m.variant_id, m.email, m.status, m.created_at,"
            " m.delivered_at, m.opened_at, m.open_count, m.machine_opened_at, m.clicked_at, m.unsubscribed_at,"
            " m.bounced_at, m.bounce_type, m.complained_at, m.failed_at, m.failure_reason, m.zone, m.due_at"
            " FROM email_messages m JOIN campaigns c ON c.id = m.campaign_id WHERE m.contact_id = :contact"
            " ORDER BY m.id"),
    Section("email_clicks", "email_clicks",
            "SELECT k.message_id, l.url, k.clicked_at, k.device_type, k.os, k.country, k.machine"
            " FROM email_clicks k JOIN email_messages m ON m.id = k.message_id JOIN email_links l ON l.id = k.link_id"
            " WHERE m.contact_id = :contact ORDER BY k.id"),
    Section("sms_messages", "sms_messages",
            "SELECT m.id, m.campaign_id, c.name AS campaign_name, m.phone, m.country, COALESCE(m.body, c.message)"
            " AS body, m.encoding, m.segments, m.price_units, m.status, m.provider, m.provider_ref, m.handed_at,"
            " m.delivered_at, m.failed_at, m.error_code, m.error_message, m.unsubscribed_at, m.held_until,"
            " m.held_reason, m.zone, m.created_at"
            f" FROM sms_messages m JOIN sms_campaigns c ON c.id = m.campaign_id WHERE {_SMS_OF_PERSON} ORDER BY m.id"),
    Section("sms_clicks", "sms_clicks",
            "SELECT k.message_id, k.url, k.clicked_at, k.device_type, k.operating_system, k.country"
            f" FROM sms_clicks k JOIN sms_messages m ON m.id = k.message_id WHERE {_SMS_OF_PERSON} ORDER BY k.id"),
    Section("automation_enrollments", "automation_enrollments",
            "SELECT e.id, e.automation_id, a.name AS automation_name, v.version, e.status, e.step_id, e.entered_at,"
            " e.next_run_at, e.exit_reason, e.goal_reached_at, e.updated_at FROM automation_enrollments e"
            " JOIN automations a ON a.id = e.automation_id JOIN automation_versions v ON v.id = e.version_id"
            " WHERE e.contact_id = :contact ORDER BY e.id"),
    Section("automation_step_runs", "automation_step_runs",
            "SELECT enrollment_id, seq, step_id, outcome, detail, email_message_id, sms_message_id, ran_at"
            f" FROM automation_step_runs WHERE enrollment_id IN ({_ENROLLMENTS}) ORDER BY enrollment_id, seq"),
    Section("automation_webhooks", "automation_webhooks",
            "SELECT id, automation_id, enrollment_id, step_id, url, body, status, response_status, created_at,"
            f" delivered_at FROM automation_webhooks WHERE enrollment_id IN ({_ENROLLMENTS}) ORDER BY id", ("body",)),
    Section("test_emails", "test_email_sends",
            "SELECT campaign_id, recipient, sent_at FROM test_email_sends WHERE workspace_id = :ws"
            " AND lower(recipient) = :email ORDER BY id"),
    Section("consents", "contact_consents", "SELECT * FROM contact_consents WHERE contact_id = :contact ORDER BY id"),
    Section("sms_replies", "sms_replies",
            "SELECT id, phone, body, action, rule, changed, confirmation_id, received_at FROM sms_replies"
            " WHERE workspace_id = :ws AND (contact_id = :contact OR phone = :phone) ORDER BY id"),
)


def _rows(conn: sqlite3.Connection, section: Section, params: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for row in conn.execute(section.sql, params):
        item = {key: row[key] for key in row.keys()}
        for column in section.json:
            if isinstance(item.get(column), str):
                item[column] = json.loads(item[column])
        out.append(item)
    return out


def export_person(conn: sqlite3.Connection, workspace_id: int, who: Any) -> dict[str, Any]:
    """The document for the contact `who` names (an id on the API; an id, email address or phone
    number on the command line); 404 when the workspace has no such contact."""
    contact_id = contact_id_of(conn, workspace_id, who)
    with read_snapshot(conn):
        contact = get_contact(conn, workspace_id, contact_id)
        row = conn.execute("SELECT email, phone FROM contacts WHERE id = ?", (contact_id,)).fetchone()
        params = {"ws": workspace_id, "contact": contact_id, "email": row["email"], "phone": row["phone"]}
        tables = dialect.table_names(conn)
        document: dict[str, Any] = {"format": FORMAT, "version": VERSION, "exported_at": clock.now(),
                                    "workspace_id": workspace_id, "contact": contact}
        for section in SECTIONS:
            if section.table in tables:
                document[section.name] = _rows(conn, section, params)
        document["suppressions"] = suppressions.suppressions_of(conn, workspace_id, row["email"], row["phone"])
    return document
