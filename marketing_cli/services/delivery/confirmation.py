"""Double opt-in: the confirmation link of a message (`{{confirmation_url}}`).

    GET  {base}/t/confirm/{token}   a page with one button (mail scanners fetch links; a GET
                                    changes nothing, so a scanner confirms nobody)
    POST {base}/t/confirm/{token}   UNCONFIRMED -> SUBSCRIBED, and a CONTACT_SUBSCRIBED event

The token is the message's confirmation token (kernel/tokens.py: the message id and a MAC
of kind `confirm`, path_tokens.py), carried by {{confirmation_url}} alone: the pixel's,
a tracked link's, the unsubscribe link's or the view-online page's token of the same
message answers 404 here, so nothing an image proxy, a link scanner or a forwarded page
holds can confirm anyone, and a link cannot be forged or guessed. (A message sent before
schema step 32 carried one "m" token everywhere; it still confirms that message's contact.)
Only an UNCONFIRMED contact moves; confirming twice, or a contact that unsubscribed since,
changes nothing and says so. The event feeds automations (trigger `contact_subscribed`);
the consent ledger gets a row (source `confirmation`) with the page's wording, the
campaign, and the IP address and user agent of the POST. A confirmation is the person asking
again: it takes their email address and phone number off the workspace's suppression list
(services/contacts/suppressions.py).
"""

from __future__ import annotations

import sqlite3
from html import escape

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.contacts import consents, events, suppressions
from marketing_cli.services.delivery.path_tokens import CONFIRM, read_message_token
from marketing_cli.storage.db import transaction

LINK_NOT_FOUND = "This link is not valid."
SUBSCRIBED_EVENT = "CONTACT_SUBSCRIBED"
CONFIRM_MAX_BYTES = 4 * 1024
# The page's wording, as the consent ledger keeps it (`<address>`: the address it shows).
WORDING = "Confirm your subscription. Subscribe <address>? [Confirm]"


def _message(conn: sqlite3.Connection, token: str) -> sqlite3.Row:
    message_id = read_message_token(conn, CONFIRM, token)
    row = None if message_id is None else conn.execute(
        "SELECT m.id, m.email, m.contact_id, m.campaign_id, c.workspace_id FROM email_messages m"
        " JOIN campaigns c ON c.id = m.campaign_id WHERE m.id = ?", (message_id,)).fetchone()
    if row is None or row["contact_id"] is None:
        raise MktError(404, LINK_NOT_FOUND)
    return row


def _page(title: str, body: str) -> str:
    return ('<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" '
            f'content="width=device-width,initial-scale=1"><title>{title}</title><style>body{{font-family:'
            'system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem}button{font-size:1rem;'
            f'padding:.5rem 1rem}}</style></head><body>{body}</body></html>')


def confirmation_page(conn: sqlite3.Connection, token: str) -> str:
    message = _message(conn, token)
    address = escape(message["email"])
    return _page("Confirm your subscription", f"<h1>Confirm your subscription</h1><p>Subscribe {address}?</p>"
                 '<form method="post"><button type="submit">Confirm</button></form>')


def confirm(conn: sqlite3.Connection, token: str, *, body: bytes = b"", ip: str | None = None,
            user_agent: str | None = None) -> str:
    """Move the message's contact from UNCONFIRMED to SUBSCRIBED (once); the page that says so.
    `ip`, `user_agent`: the POST's, kept in the consent ledger (`body`, the form's, says nothing)."""
    message = _message(conn, token)
    source = consents.Source("confirmation", consent_text=WORDING, campaign_id=message["campaign_id"], ip=ip,
                             user_agent=user_agent)
    with transaction(conn):
        status = conn.execute("SELECT status, email, phone FROM contacts WHERE id = ?",
                              (message["contact_id"],)).fetchone()
        if status is None:
            raise MktError(404, LINK_NOT_FOUND)
        if status[0] == "UNCONFIRMED":
            now = clock.now()
            conn.execute("UPDATE contacts SET status = 'SUBSCRIBED', updated_at = ? WHERE id = ?",
                         (now, message["contact_id"]))
            # the person asked again: off the suppression list, if an erase had put them there
            suppressions.lift(conn, message["workspace_id"], status["email"], status["phone"])
            events.append_event(conn, message["workspace_id"], message["contact_id"], SUBSCRIBED_EVENT,
                                {"via": "confirmation", "campaign_id": message["campaign_id"]})
            consents.append(conn, message["workspace_id"], message["contact_id"], [("email", "SUBSCRIBED")], source,
                            at=now)
            text = "Thank you: your subscription is confirmed."
        elif status[0] == "SUBSCRIBED":
            text = "Your subscription was already confirmed."
        else:
            text = "This address is not subscribed any more; nothing was changed."
    return _page("Subscription", f"<h1>Subscription</h1><p>{escape(text)}</p>")
