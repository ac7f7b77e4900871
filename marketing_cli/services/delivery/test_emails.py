"""Send Test Email: one variant, rendered for one address, through the mail transport.

Checks run in the specification's order; then the send is counted against the
workspace's limits (default 5 a minute (429), 30 an hour, 100 a day; the operator setting
MKT_TEST_EMAIL_LIMITS="MINUTE,HOUR,DAY" changes them) in `test_email_sends`, inside one
transaction, so two requests at once cannot both pass the last free place. The message is
sent outside that transaction (an SMTP conversation must not hold the write lock); when
the transport fails, the place is given back and the answer is 502. The transport is the
workspace's (services/delivery/transport_settings.py); when it is the outbox folder the answer
says the message was written there, not sent.

Merge tags are rendered for the workspace's contact with the recipient's address when
there is one, else with the fields' default values. The action links
({{unsubscribe_url}} ...) of a test email point at inert `/test-email/...` pages of the
public URL: a test recipient is not on the campaign's list.

{{view_online_url}} is the exception: it is `{tracking base}/t/v/{token}`, like a sent
message's, and that page (services/delivery/view_online.py) shows the test rendering. A test
email has no message row, so its token names what the rendering needs instead: the
variant id and the id of the contact it was rendered for (12 zero bytes for none),
packed into one 24-byte number and signed under its own kind (`test-view`), so
it can never be read as a message's token, nor one of those as it. Nothing is stored:
the link works for as long as the variant exists, and shows the variant as it is then.
"""

from __future__ import annotations

import os
import sqlite3
from datetime import timedelta
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.merge_contexts import Values
from marketing_cli.kernel.numbers import parse_digits
from marketing_cli.kernel.tokens import make_token, read_token
from marketing_cli.services.contacts.values import normalize_email
from marketing_cli.services.email.campaigns import (
    INVALID_BODY,
    campaign_row,
    check_campaign_id,
    check_variant_type,
    sender_identity,
    variant_row,
)
from marketing_cli.services.email.domains import domain_names
from marketing_cli.services.email.schedule import unknown_tags_problem
from marketing_cli.storage.db import instance_secret, transaction

RECIPIENT_INVALID = "Please provide a valid recipient email address."
NO_SENDER = "Please configure a sender identity before sending test emails."
NO_SUBJECT = "The variant must have a subject before sending test emails."
NO_CONTENT = "The variant must have email content before sending test emails."
PER_MINUTE = "You are sending test emails too quickly. Please wait a moment and try again."
PER_HOUR = "You have exceeded the hourly test email limit. Please try again later."
PER_DAY = "You have exceeded the daily test email limit. Please try again tomorrow."
SEND_FAILED = "The test email could not be sent: {reason}."
SENT = "A test email of variant {type} was sent to {recipient}."
WRITTEN = ("A test email of variant {type} for {recipient} was written to the outbox at {folder}: "
           "nothing was sent.")
DEFAULT_LIMITS = (5, 30, 100)  # per minute, per hour, per day
LIMITS_ENV = "MKT_TEST_EMAIL_LIMITS"
VIEW_KIND = "test-view"  # the token kind of a test email's view-online link
_ID_BYTES = 12           # a 24-hex id (kernel/ids.py)
_NO_CONTACT = "00" * _ID_BYTES


def limits() -> tuple[int, int, int]:
    """(per minute, per hour, per day): MKT_TEST_EMAIL_LIMITS="5,30,100", else the defaults."""
    raw = os.environ.get(LIMITS_ENV, "")
    parts = [p.strip() for p in raw.split(",")]
    numbers = [parse_digits(p) for p in parts]
    if len(numbers) == 3 and None not in numbers:
        return numbers[0], numbers[1], numbers[2]
    return DEFAULT_LIMITS


def record_test_send(conn: sqlite3.Connection, workspace_id: int, recipient: str, *,
                     campaign_id: str | None = None, at: str | None = None) -> int:
    """Count one test send (at `at`, default now); prunes rows older than a day."""
    now = clock.utcnow()
    with transaction(conn):
        conn.execute("DELETE FROM test_email_sends WHERE workspace_id = ? AND sent_at < ?",
                     (workspace_id, clock.format_ts(now - timedelta(days=1))))
        return conn.execute("INSERT INTO test_email_sends (workspace_id, campaign_id, recipient, sent_at)"
                            " VALUES (?, ?, ?, ?)", (workspace_id, campaign_id, recipient,
                                                     at or clock.format_ts(now))).lastrowid


def _check_limits(conn: sqlite3.Connection, workspace_id: int) -> None:
    now = clock.utcnow()
    per_minute, per_hour, per_day = limits()
    for window, limit, status, message in ((timedelta(minutes=1), per_minute, 429, PER_MINUTE),
                                           (timedelta(hours=1), per_hour, 400, PER_HOUR),
                                           (timedelta(days=1), per_day, 400, PER_DAY)):
        used = conn.execute("SELECT COUNT(*) FROM test_email_sends WHERE workspace_id = ? AND sent_at > ?",
                            (workspace_id, clock.format_ts(now - window))).fetchone()[0]
        if used >= limit:
            raise MktError(status, message)


def _recipient(conn: sqlite3.Connection, workspace_id: int, body: dict[str, Any]) -> str:
    """The specification's message, and what is wrong with the address in the error's detail."""
    try:
        return normalize_email(body.get("recipient"), own_domains=lambda: domain_names(conn, workspace_id))
    except ValueError as exc:
        raise MktError(400, RECIPIENT_INVALID, detail=str(exc)) from None


def view_token(secret: bytes, variant_id: str, contact_id: str | None) -> str:
    """The token of a test email's view-online link: the variant and the contact it was rendered for."""
    packed = bytes.fromhex(variant_id) + bytes.fromhex(contact_id or _NO_CONTACT)
    return make_token(secret, VIEW_KIND, int.from_bytes(packed, "big"))


def read_view_token(secret: bytes, token: str) -> tuple[str, str | None] | None:
    """(variant id, contact id or None) of a genuine test view token; None for anything else."""
    number = read_token(secret, VIEW_KIND, token)
    if number is None or number.bit_length() > 8 * 2 * _ID_BYTES:
        return None
    packed = number.to_bytes(2 * _ID_BYTES, "big").hex()
    variant_id, contact_id = packed[:2 * _ID_BYTES], packed[2 * _ID_BYTES:]
    return variant_id, None if contact_id == _NO_CONTACT else contact_id


def _action_links(conn: sqlite3.Connection, workspace_id: int, variant_id: str, contact_id: str | None
                  ) -> dict[str, str]:
    from marketing_cli.services.account.workspaces import tracking_base_url
    from marketing_cli.services.email.variant_html import public_url

    base = public_url()
    view = f"{tracking_base_url(conn, workspace_id)}/t/v/{view_token(instance_secret(conn), variant_id, contact_id)}"
    return {"unsubscribe_url": f"{base}/test-email/unsubscribe", "view_online_url": view,
            "preferences_url": f"{base}/test-email/preferences"}


def rendering_values(conn: sqlite3.Connection, workspace_id: int, variant: sqlite3.Row,
                     contact: sqlite3.Row | None) -> Values:
    """A test rendering's values: `contact` (a contacts row: id, email, phone, data) or the
    fields' defaults; the test action links. The view-online page renders with the same."""
    from marketing_cli.services.contacts.merge_tags import Renderer

    renderer = Renderer(conn, workspace_id, preview_text=variant["preview_text"] or "")
    links = _action_links(conn, workspace_id, variant["id"], contact["id"] if contact is not None else None)
    return renderer.values_for(contact, actions=links)


def build_test_message(conn: sqlite3.Connection, workspace_id: int, campaign: sqlite3.Row, variant: sqlite3.Row,
                       sender: dict[str, Any], recipient: str) -> Any:
    """The MIME message of a test email, merge tags rendered for the recipient."""
    import json

    from marketing_cli.services.delivery.message import CompiledEmail, address, build_message

    contact = conn.execute("SELECT id, email, phone, data FROM contacts WHERE workspace_id = ? AND email = ?",
                           (workspace_id, recipient)).fetchone()
    values = rendering_values(conn, workspace_id, variant, contact)
    subject, html, text = CompiledEmail(variant["subject"], variant["body_html"]).render(values)
    reply = json.loads(campaign["reply_to"]) if campaign["reply_to"] else None
    return build_message(
        sender=address(sender["display_name"], sender["local_part"], sender["domain_name"]),
        to=recipient, subject=subject, html=html, text=text,
        reply_to=address(reply["display_name"], reply["local_part"], reply["domain_name"]) if reply else None,
        headers={"X-Mkt-Test": "1", "X-Mkt-Campaign": campaign["id"]})


def send_test_email(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any, body: Any, *,
                    transport: Any = None, smtp_url: str | None = None) -> str:
    """POST /v1/campaigns/:id/test: {variant_type, recipient} -> a confirmation sentence.

    Through `transport` when given, else the workspace's (`smtp_url`: a command's --smtp-url)."""
    from marketing_cli.services.delivery import transport_settings
    from marketing_cli.services.delivery.transport import OutboxTransport, TransportError

    campaign_id = check_campaign_id(campaign_id)
    if not isinstance(body, dict):
        raise MktError(400, INVALID_BODY)
    variant_type = check_variant_type(body.get("variant_type"))
    recipient = _recipient(conn, workspace_id, body)
    campaign = campaign_row(conn, workspace_id, campaign_id)
    sender = sender_identity(conn, workspace_id, campaign["sender_identity_id"])
    if sender is None:
        raise MktError(400, NO_SENDER)
    variant = variant_row(conn, campaign_id, variant_type)
    if not (variant["subject"] or "").strip():
        raise MktError(400, NO_SUBJECT)
    if not (variant["body_html"] or "").strip():
        raise MktError(400, NO_CONTENT)
    unknown = unknown_tags_problem(conn, workspace_id, variant)
    if unknown is not None:  # refused as the campaign's schedule refuses it
        raise MktError(400, unknown)
    message = build_test_message(conn, workspace_id, campaign, variant, sender, recipient)
    with transaction(conn):
        _check_limits(conn, workspace_id)
        place = record_test_send(conn, workspace_id, recipient, campaign_id=campaign_id)
    own = transport is None
    try:
        if own:
            transport = transport_settings.selection(conn, workspace_id, smtp_url=smtp_url).open()
        transport.send(message, f"{sender['local_part']}@{sender['domain_name']}", [recipient])
    except (TransportError, ValueError) as exc:  # ValueError: MKT_SMTP_URL is not an SMTP URL
        with transaction(conn):
            conn.execute("DELETE FROM test_email_sends WHERE id = ?", (place,))
        raise MktError(502, SEND_FAILED.format(reason=exc)) from None
    finally:
        if own and transport is not None:
            transport.close()
    if isinstance(transport, OutboxTransport):
        return WRITTEN.format(type=variant_type, recipient=recipient, folder=transport.folder)
    return SENT.format(type=variant_type, recipient=recipient)
