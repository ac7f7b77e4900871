"""Bounces and complaints: POST /v1/bounces and `mkt bounces import` (CONTRACT section 7).

    hard bounce   the contact's status becomes CLEANED when its class says the address is gone
    soft bounce   counted; the SOFT_BOUNCE_LIMIT-th in a row of campaigns cleans it too, when
                  it is a full mailbox (or unclassified: recorded by hand)
    complaint     the contact's status becomes COMPLAINED

The class (services/delivery/bounce_classes.py: a report's Diagnostic-Code and Status; none
for a bounce recorded by hand, which only says hard or soft) decides the cleaning:

    unknown_user, unknown_domain        CLEANED at once
    mailbox_full                        CLEANED at the SOFT_BOUNCE_LIMIT-th in a row, hard or soft
    policy_block, reputation_block,     never: they say the sending domain was refused, not that
    authentication_failure, rate_limit  the address is bad; counted against the domain
                                        (domain_bounce_classes) and not in the contact's
                                        total_bounces
    message_too_large, other_*          never (the next campaign may go through)
    none (by hand)                      as the caller says: hard cleans; soft counts in a row

Each counts in the campaign's `bounced` / `complained` (and its variant's) when it can be
attributed to a message: by the original Message-ID or the `X-Mkt-Message` token of a
report, by `campaign_id` and address, or else the last campaign sent to the address.

Report files are untrusted (anyone can mail the return-path mailbox): each is read and
parsed on its own, within bounce_reports' limits, before the one transaction that applies
them; a file that fails (unreadable, too large, too deeply nested, too many parts) is
listed with its reason and the others are imported.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.inputs import member, require_object
from marketing_cli.services.contacts import consents
from marketing_cli.services.delivery import breakers
from marketing_cli.services.delivery.bounce_classes import AGAINST_DOMAIN, CLEANS, REPEATED
from marketing_cli.services.delivery.path_tokens import REPORT, read_message_token
from marketing_cli.services.email import campaigns, stats
from marketing_cli.storage.db import instance_secret, transaction

INVALID_BODY = "Invalid request body."
EMAIL_REQUIRED = "Please provide the email_address that bounced."
TYPE_INVALID = "The bounce type must be 'hard', 'soft' or 'complaint'."
NO_CONTACT = "We couldn't find a contact with the email address '{email}'."
SOFT_BOUNCE_LIMIT = 3
TYPES = ("hard", "soft", "complaint")


def _contact(conn: sqlite3.Connection, workspace_id: int, email: str) -> sqlite3.Row | None:
    return conn.execute("SELECT id, status FROM contacts WHERE workspace_id = ? AND email = ?",
                        (workspace_id, email.strip().lower())).fetchone()


def _message_for(conn: sqlite3.Connection, workspace_id: int, contact_id: str, campaign_id: str | None) -> int | None:
    sql = ("SELECT m.id FROM email_messages m JOIN campaigns c ON c.id = m.campaign_id"
           " WHERE m.contact_id = ? AND c.workspace_id = ?")
    params: list[Any] = [contact_id, workspace_id]
    if campaign_id is not None:
        sql += " AND m.campaign_id = ?"
        params.append(campaign_id)
    row = conn.execute(sql + " ORDER BY m.id DESC LIMIT 1", params).fetchone()
    return None if row is None else row[0]


def _new_status(conn: sqlite3.Connection, contact_id: str, kind: str, bounce_class: str | None) -> str | None:
    """The status the bounce gives the contact (the table of the module docstring), None: unchanged."""
    if kind == "complaint":
        return "COMPLAINED"
    if bounce_class is None:
        if kind == "hard":
            return "CLEANED"
    elif bounce_class in CLEANS:
        return "CLEANED"
    elif bounce_class not in REPEATED:
        return None
    return "CLEANED" if _repeated_in_a_row(conn, contact_id) >= SOFT_BOUNCE_LIMIT else None


def apply_bounce(conn: sqlite3.Connection, workspace_id: int, contact: sqlite3.Row, kind: str,
                 message_id: int | None, bounce_class: str | None = None) -> dict[str, Any]:
    """Record one bounce or complaint (inside the caller's transaction); the answer of POST /v1/bounces."""
    counted = False
    if message_id is not None:
        counted = (stats.record_complaint(conn, message_id) if kind == "complaint"
                   else stats.record_bounce(conn, message_id, kind, bounce_class=bounce_class,
                                            recipient=bounce_class not in AGAINST_DOMAIN))
    new_status = _new_status(conn, contact["id"], kind, bounce_class)
    campaign = None if message_id is None else conn.execute(
        "SELECT campaign_id FROM email_messages WHERE id = ?", (message_id,)).fetchone()[0]
    if new_status and contact["status"] != new_status:
        now = clock.now()
        conn.execute("UPDATE contacts SET status = ?, updated_at = ? WHERE id = ?", (new_status, now, contact["id"]))
        source = consents.Source("complaint" if kind == "complaint" else "bounce", campaign_id=campaign)
        consents.append(conn, workspace_id, contact["id"], [("email", new_status)], source, at=now)
    if counted and (kind == "complaint" or bounce_class in breakers.COUNTED):  # a rate of the campaign's breaker rose
        breakers.check(conn, campaign)
    status = new_status or contact["status"]
    return {"contact_id": contact["id"], "type": kind, "contact_status": status, "campaign_id": campaign,
            "counted": counted}


def _repeated_in_a_row(conn: sqlite3.Connection, contact_id: str) -> int:
    """Bounces that count in a row (a full mailbox, or a soft bounce recorded by hand) of the
    contact's latest messages, up to the first one that did not bounce so."""
    count = 0
    for row in conn.execute("SELECT bounce_type, bounce_class FROM email_messages WHERE contact_id = ?"
                            " ORDER BY id DESC LIMIT ?", (contact_id, SOFT_BOUNCE_LIMIT)):
        if not (row["bounce_class"] in REPEATED or (row["bounce_class"] is None and row["bounce_type"] == "soft")):
            break
        count += 1
    return count


def record_bounce(conn: sqlite3.Connection, workspace_id: int, body: Any) -> dict[str, Any]:
    """POST /v1/bounces: {email_address, type: hard|soft|complaint, campaign_id?}."""
    body = require_object(body, INVALID_BODY)
    email = member(body, "email_address", str)
    if not email or not email.strip():
        raise MktError(400, EMAIL_REQUIRED)
    kind = body.get("type")
    if kind not in TYPES:
        raise MktError(400, TYPE_INVALID)
    campaign_id = body.get("campaign_id")
    with transaction(conn):
        if campaign_id is not None:
            campaign_id = campaigns.campaign_row(conn, workspace_id, campaign_id)["id"]
        contact = _contact(conn, workspace_id, email)
        if contact is None:
            raise MktError(404, NO_CONTACT.format(email=email.strip()))
        return apply_bounce(conn, workspace_id, contact, kind, _message_for(conn, workspace_id, contact["id"],
                                                                            campaign_id))


def import_report_files(conn: sqlite3.Connection, workspace_id: int,
                        paths: Sequence[str | os.PathLike[str]]) -> dict[str, Any]:
    """`mkt bounces import FILE...`: import_reports of the files, each read on its own (at most
    MAX_REPORT_BYTES + 1 bytes of it) and parsed before the next is read."""
    from marketing_cli.services.delivery.bounce_reports import read_report

    def parsed(path: str | os.PathLike[str]) -> dict[str, Any]:
        try:
            data = read_report(path)
        except MktError as exc:
            return _failed(exc.message)
        return _parse(data)

    return _apply(conn, workspace_id, [(os.fsdecode(path), parsed(path)) for path in paths])


def import_reports(conn: sqlite3.Connection, workspace_id: int, files: Sequence[tuple[str, bytes]]) -> dict[str, Any]:
    """Every report of every file, applied in one transaction; a summary per file.

    A file that fails (MktError from bounce_reports: too large, nested too deep, too many
    parts; or unreadable) is listed with `"failed": true` and its reason in `error`, the
    result gets `"failed": <count>`, and the other files are imported. Without a failed file
    the answer has neither member (docs/cli.md, "mkt bounces import")."""
    return _apply(conn, workspace_id, [(name, _parse(data)) for name, data in files])


def _parse(data: bytes) -> dict[str, Any]:
    from marketing_cli.services.delivery.bounce_reports import parse_report

    try:
        return parse_report(data)
    except MktError as exc:
        return _failed(exc.message)
    except Exception as exc:  # noqa: BLE001 - untrusted bytes: an unforeseen parser error fails this file only
        return _failed(f"The file could not be read as a report ({type(exc).__name__}).")


def _failed(reason: str) -> dict[str, Any]:
    return {"report_type": None, "bounces": [], "error": reason, "failed": True}


def _apply(conn: sqlite3.Connection, workspace_id: int, parsed: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    results = []
    secret = instance_secret(conn)
    with transaction(conn):
        for name, report in parsed:
            entries = [_import_entry(conn, workspace_id, secret, entry) for entry in report["bounces"]]
            result = {"file": name, "report_type": report["report_type"], "error": report["error"], "entries": entries}
            if report.get("failed"):
                result["failed"] = True
            results.append(result)
    applied = [e for r in results for e in r["entries"] if e.get("applied")]
    summary: dict[str, Any] = {
        "files": results, "applied": len(applied),
        "hard": sum(e["type"] == "hard" for e in applied), "soft": sum(e["type"] == "soft" for e in applied),
        "complaints": sum(e["type"] == "complaint" for e in applied)}
    failed = sum(1 for r in results if r.get("failed"))
    if failed:
        summary["failed"] = failed
    return summary


def _import_entry(conn: sqlite3.Connection, workspace_id: int, secret: bytes, entry: dict[str, Any]) -> dict[str, Any]:
    """Apply one report entry: to the message it names (token, then Message-ID), else to the
    contact with its address (and the last campaign sent to it)."""
    token = entry.get("mkt_message_token")
    message_id = read_message_token(conn, REPORT, token, secret) if token else None
    if message_id is None and entry.get("original_message_id"):
        message_id = stats.message_for_smtp_id(conn, entry["original_message_id"])
    message = None if message_id is None else conn.execute(
        "SELECT m.contact_id, m.email FROM email_messages m JOIN campaigns c ON c.id = m.campaign_id"
        " WHERE m.id = ? AND c.workspace_id = ?", (message_id, workspace_id)).fetchone()
    if message is not None and message["contact_id"] is not None:
        email = message["email"]
        contact = conn.execute("SELECT id, status FROM contacts WHERE id = ?", (message["contact_id"],)).fetchone()
    else:
        email = entry.get("email_address")
        contact = _contact(conn, workspace_id, email) if email else None
        message_id = None if contact is None else _message_for(conn, workspace_id, contact["id"], None)
    if contact is None:
        return {"email_address": email, "type": entry["type"], "bounce_class": entry.get("bounce_class"),
                "applied": False, "reason": "no contact with this address in the workspace"}
    return {"email_address": email, "applied": True, "bounce_class": entry.get("bounce_class"),
            **apply_bounce(conn, workspace_id, contact, entry["type"], message_id, entry.get("bounce_class"))}


def domain_bounce_classes(conn: sqlite3.Connection, workspace_id: int, since: str | None = None) -> list[dict[str, Any]]:
    """Failures and bounces of the workspace's messages by sending domain and class (since
    `since`, RFC 3339, when given): [{"domain_id", "domain_name", "bounce_class", "messages",
    "against_domain"}], what a deliverability report reads. `against_domain` marks the
    classes that say the domain was refused (blocks, authentication, rate), not the address."""
    params: list[Any] = [workspace_id]
    window = ""
    if since is not None:
        window = " AND coalesce(m.bounced_at, m.failed_at) >= ?"
        params.append(since)
    rows = conn.execute(
        "SELECT d.id AS domain_id, d.domain_name, m.bounce_class, count(*) AS messages"
        " FROM email_messages m JOIN campaigns c ON c.id = m.campaign_id"
        " JOIN sender_identities s ON s.id = c.sender_identity_id JOIN domains d ON d.id = s.domain_id"
        f" WHERE c.workspace_id = ? AND m.bounce_class IS NOT NULL{window}"
        " GROUP BY d.id, d.domain_name, m.bounce_class ORDER BY d.id, m.bounce_class", params).fetchall()
    return [{"domain_id": r["domain_id"], "domain_name": r["domain_name"], "bounce_class": r["bounce_class"],
             "messages": r["messages"], "against_domain": r["bounce_class"] in AGAINST_DOMAIN} for r in rows]
