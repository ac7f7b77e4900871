"""Test sends, POST /v1/automations/:id/test {"to", "sms_to"?, "contact_id"?}: each message of
the flow (newest version, else the checked draft: walk.flow_for) sent once to a test
address, the email steps through the workspace's transport as a campaign's test email goes,
the SMS steps through the workspace's SMS provider (docs/automations.md "Test sends"). No
campaign, message row or enrollment of the flow is written; the test email limits count
each email.
"""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.ids import parse_hex_id
from marketing_cli.services.automations.flows import automation_row
from marketing_cli.services.automations.simulate.steps import sms_body
from marketing_cli.services.automations.simulate.walk import CONTACT_NOT_FOUND, flow_for
from marketing_cli.storage.db import transaction

NO_ADDRESS = ("Give the test address in 'to': an email address for the email steps, or a phone number in"
              " E.164 form (+15551234567) for the SMS steps; 'sms_to' adds a phone number beside an email address.")


def _test_targets(conn: sqlite3.Connection, workspace_id: int, body: Any) -> tuple[str | None, str | None]:
    """(email, phone) from {"to", "sms_to"?}: `to` holding an @ is an email address, `to` starting
    with + is a phone number; `sms_to` is a phone number for the SMS steps."""
    from marketing_cli.services.contacts.values import normalize_email, normalize_phone

    to, sms_to = body.get("to"), body.get("sms_to")
    if not isinstance(to, str) or not to.strip():
        raise MktError(400, NO_ADDRESS)
    email = phone = None
    try:
        if "@" in to:
            email = normalize_email(to)
        elif to.strip().startswith("+"):
            phone = normalize_phone(to, None)
        else:
            raise ValueError(to)
    except ValueError:
        raise MktError(400, f"'{to}' is neither an email address nor a phone number in E.164 form. "
                            + NO_ADDRESS) from None
    if sms_to is not None:
        if not isinstance(sms_to, str) or phone is not None:
            raise MktError(400, "The member 'sms_to' is a phone number beside an email address in 'to'.")
        try:
            phone = normalize_phone(sms_to, None)
        except ValueError:
            raise MktError(400, f"The member 'sms_to' ('{sms_to}') is not a phone number.") from None
    return email, phone


def _check_test_room(conn: sqlite3.Connection, workspace_id: int, count: int) -> None:
    """The test email limits (services/delivery/test_emails.py) must leave room for all `count` emails."""
    from marketing_cli.services.delivery import test_emails

    now = clock.utcnow()
    per_minute, per_hour, per_day = test_emails.limits()
    for window, limit, status, message in ((timedelta(minutes=1), per_minute, 429, test_emails.PER_MINUTE),
                                           (timedelta(hours=1), per_hour, 400, test_emails.PER_HOUR),
                                           (timedelta(days=1), per_day, 400, test_emails.PER_DAY)):
        used = conn.execute("SELECT COUNT(*) FROM test_email_sends WHERE workspace_id = ? AND sent_at > ?",
                            (workspace_id, clock.format_ts(now - window))).fetchone()[0]
        if used + count > limit:
            raise MktError(status, message if count == 1 else
                           f"{message} This flow has {count} emails and the limit is {limit}.")


def _test_message(conn: sqlite3.Connection, workspace_id: int, step: dict[str, Any], contact: Any,
                  recipient: str) -> tuple[Any, str]:
    """(the MIME test message of a send_email step, its sender address), merge tags rendered."""
    from marketing_cli.services.contacts.merge_tags import Renderer
    from marketing_cli.services.delivery.message import CompiledEmail, address, build_message
    from marketing_cli.services.email.senders import get_sender_identity
    from marketing_cli.services.email.variant_html import public_url

    sender = get_sender_identity(conn, workspace_id, step["sender_id"])
    if sender is None:
        raise MktError(400, f"Step '{step['id']}' names the sender {step['sender_id']}, which the workspace does not"
                            " have.")
    base = public_url()
    links = {"unsubscribe_url": f"{base}/test-email/unsubscribe", "view_online_url": f"{base}/test-email/view-online",
             "preferences_url": f"{base}/test-email/preferences", "confirmation_url": f"{base}/test-email/confirm"}
    values = Renderer(conn, workspace_id, preview_text=step.get("preview_text") or "").values_for(
        contact, actions=links, extra={"confirmation_url": links["confirmation_url"]})
    subject, html, text = CompiledEmail(step["subject"], step["body_html"]).render(values)
    message = build_message(sender=address(sender["display_name"], sender["local_part"], sender["domain_name"]),
                            to=recipient, subject=subject, html=html, text=text,
                            headers={"X-Mkt-Test": "1", "X-Mkt-Automation": str(step.get("_automation_id", ""))})
    return message, f"{sender['local_part']}@{sender['domain_name']}"


def send_tests(conn: sqlite3.Connection, workspace_id: int, automation_id: Any, body: Any, *,
               transport: Any = None, smtp_url: str | None = None) -> dict[str, Any]:
    """POST /v1/automations/:id/test {"to", "sms_to"?, "contact_id"?}: each message of the flow
    (newest version, else the checked draft) sent once to the test address.

    Email steps go to `to` when it is an email address, through the workspace's transport as
    a campaign's test email goes (the test email limits count each one; the subject as the
    step writes it, the X-Mkt-Test header marks it; action links inert). SMS steps go to `to` when it is a phone number, or to
    `sms_to`, through the workspace's SMS provider. Merge tags are rendered for `contact_id`,
    else the workspace's contact with the test address, else the fields' defaults. A step of
    a channel without a test address is listed as not sent."""
    from marketing_cli.services.delivery import test_emails, transport_settings
    from marketing_cli.services.delivery.transport import OutboxTransport, TransportError

    if not isinstance(body, dict):
        raise MktError(400, "The body must be a JSON object with 'to'.")
    for key in body:
        if key not in ("to", "sms_to", "contact_id"):
            raise MktError(400, f"Unknown member '{key}'")
    email, phone = _test_targets(conn, workspace_id, body)
    row = automation_row(conn, workspace_id, automation_id)
    flow, version = flow_for(conn, workspace_id, row)
    contact = None
    if body.get("contact_id") is not None:
        contact_id = parse_hex_id(body["contact_id"], "The contact ID you provided is not valid.")
        contact = conn.execute("SELECT * FROM contacts WHERE id = ? AND workspace_id = ?",
                               (contact_id, workspace_id)).fetchone()
        if contact is None:
            raise MktError(404, CONTACT_NOT_FOUND)
    elif email or phone:
        column, value = ("email", email) if email else ("phone", phone)
        contact = conn.execute(f"SELECT * FROM contacts WHERE workspace_id = ? AND {column} = ?",
                               (workspace_id, value)).fetchone()
    mails = [s for s in flow["steps"] if s["type"] == "send_email"]
    texts = [s for s in flow["steps"] if s["type"] == "send_sms"]
    if not mails and not texts:
        raise MktError(400, "This automation has no send step: there is nothing to test.")
    results: list[dict[str, Any]] = []
    if email and mails:
        built = [(s, *_test_message(conn, workspace_id, {**s, "_automation_id": row["id"]}, contact, email))
                 for s in mails]
        with transaction(conn):
            _check_test_room(conn, workspace_id, len(built))
            places_ = [test_emails.record_test_send(conn, workspace_id, email) for _ in built]
        own = transport is None
        sent = 0
        try:
            if own:
                transport = transport_settings.selection(conn, workspace_id, smtp_url=smtp_url).open()
            for step, message, sender in built:
                transport.send(message, sender, [email])
                sent += 1
                results.append({"step_id": step["id"], "channel": "email", "to": email,
                                "status": "written to the outbox" if isinstance(transport, OutboxTransport)
                                else "sent", "message_id": message["Message-ID"], "subject": message["Subject"]})
        except (TransportError, ValueError) as exc:
            with transaction(conn):
                conn.executemany("DELETE FROM test_email_sends WHERE id = ?", [(p,) for p in places_[sent:]])
            raise MktError(502, test_emails.SEND_FAILED.format(reason=exc)) from None
        finally:
            if own and transport is not None:
                transport.close()
    else:
        results += [{"step_id": s["id"], "channel": "email", "to": None, "status": "not sent: no test email address",
                     "message_id": None} for s in mails]
    results += _send_test_texts(conn, workspace_id, row["id"], texts, phone, contact)
    order = {s["id"]: i for i, s in enumerate(flow["steps"])}
    results.sort(key=lambda r: order[r["step_id"]])
    return {"automation_id": row["id"], "version": version, "to": body["to"], "sms_to": phone, "sent": results}


def _send_test_texts(conn: sqlite3.Connection, workspace_id: int, automation_id: int, texts: list[dict[str, Any]],
                     phone: str | None, contact: Any) -> list[dict[str, Any]]:
    """Each SMS step once to `phone` through the workspace's provider (Twilio). The outbox provider
    keeps campaign messages only: there the text is rendered and shown, not stored."""
    from marketing_cli.services.sms.ledger import get_sender_id
    from marketing_cli.services.sms.providers import Outgoing, get_provider
    from marketing_cli.services.sms.segments import count_segments

    if not texts:
        return []
    if phone is None:
        return [{"step_id": s["id"], "channel": "sms", "to": None, "status": "not sent: no test phone number",
                 "message_id": None} for s in texts]
    shown = contact if contact is not None else {"email": None, "phone": phone, "data": "{}"}
    sender = get_sender_id(conn, workspace_id)["sms_sender_id"]
    provider = get_provider(conn, workspace_id)
    out = []
    for step in texts:
        body = sms_body(conn, workspace_id, step, shown)
        entry = {"step_id": step["id"], "channel": "sms", "to": phone, "body": body, "message_id": None}
        if provider.in_database:
            entry["status"] = "not sent: the workspace's SMS provider is the outbox (mkt sms provider set twilio)"
        elif not sender:
            entry["status"] = "not sent: the workspace has no SMS sender ID (mkt sms sender-id set)"
        else:
            receipt = provider.send(conn, workspace_id, [Outgoing(0, f"automation-{automation_id}-test", sender,
                                                                  phone, body, count_segments(body).segments)])[0]
            entry["status"] = "sent" if receipt.accepted else f"failed: {receipt.error}"
            entry["message_id"] = receipt.reference
        out.append(entry)
    return out
