"""The view-online page: `GET {base}/t/v/{token}` shows the message as its recipient got it.

    {{view_online_url}} of a sent message   -> that message's HTML part, for that contact
    {{view_online_url}} of a test email     -> that test's HTML part (services/delivery/test_emails.py)

The message itself is not stored (the sender renders it and hands it over), so the page is
rendered again from what is: the message row (campaign, variant, contact), the variant's
HTML and the contact's values as they are now, with the same code as the sender
(`compose.rewrite_links`, `compose.add_pixel`, `compose.message_urls`, the workspace's
`Renderer`). Its tracked links, open pixel and unsubscribe link are the message's own, so
a click or an open from the page counts as one from the email. `{{server_time}}` and
`{{current_date}}` are the time the message was delivered.

The token is the message's view token (kind `view`, path_tokens.py; a message sent before
schema step 32 carried one "m" token on every path, which still opens its page). The page's
own links carry the message's tokens of their kinds, made again from the message id, so a
click or an unsubscribe from the page is one from the email; the page shows nothing that
the message does not already give to whoever holds it. A test email's token is of its own
kind. A forged or malformed token, or a genuine token of another kind (the pixel's, an SMS
link's), answers 404 and changes nothing; a message whose contact was deleted since answers
410 with a page that says so (the contact's values are gone with it).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel.merge import compile_template
from marketing_cli.services.account.workspaces import tracking_base_url
from marketing_cli.services.contacts.merge_tags import Renderer
from marketing_cli.services.delivery import test_emails
from marketing_cli.services.delivery.compose import add_pixel, message_urls, rewrite_links
from marketing_cli.services.delivery.path_tokens import VIEW, MessageTokens, read_message_token
from marketing_cli.services.delivery.tracking import LINK_NOT_FOUND
from marketing_cli.storage.db import instance_secret

GONE = "This email is no longer available: its recipient is no longer on the list."

_MESSAGE = ("SELECT m.id, m.campaign_id, m.variant_id, m.contact_id, m.delivered_at, c.workspace_id,"
            " v.body_html, v.preview_text, p.id AS contact, p.email, p.phone, p.data"
            " FROM email_messages m JOIN campaigns c ON c.id = m.campaign_id"
            " JOIN campaign_variants v ON v.id = m.variant_id"
            " LEFT JOIN contacts p ON p.id = m.contact_id AND p.workspace_id = c.workspace_id"
            " WHERE m.id = ?")


def view_online_page(conn: sqlite3.Connection, token: str) -> str:
    """The HTML of the message (or test email) a view-online token names; 404 / 410 as above."""
    secret = instance_secret(conn)
    message_id = read_message_token(conn, VIEW, token, secret)
    if message_id is not None:
        return _message_page(conn, message_id, MessageTokens.make(secret, message_id))
    test = test_emails.read_view_token(secret, token)
    if test is not None:
        return _test_page(conn, *test)
    raise MktError(404, LINK_NOT_FOUND)


def _message_page(conn: sqlite3.Connection, message_id: int, tokens: MessageTokens) -> str:
    row = conn.execute(_MESSAGE, (message_id,)).fetchone()
    if row is None:  # the campaign was deleted, and its messages with it
        raise MktError(404, LINK_NOT_FOUND)
    if row["contact"] is None:  # the contact was deleted (contact_id is set NULL)
        raise MktError(410, GONE)
    ws = row["workspace_id"]
    html = row["body_html"] or ""
    if conn.execute("SELECT interaction_tracking FROM workspaces WHERE id = ?", (ws,)).fetchone()[0]:
        links = dict(conn.execute("SELECT url, id FROM email_links WHERE campaign_id = ? AND variant_id = ?",
                                  (row["campaign_id"], row["variant_id"])).fetchall())
        html = add_pixel(rewrite_links(html, links))
    renderer = Renderer(conn, ws, preview_text=row["preview_text"] or "", now=row["delivered_at"])
    values = renderer.values_for(row, extra=message_urls(tracking_base_url(conn, ws), tokens))
    return compile_template(html, html=True).render(values)


def _test_page(conn: sqlite3.Connection, variant_id: str, contact_id: str | None) -> str:
    variant = conn.execute("SELECT v.*, c.workspace_id FROM campaign_variants v JOIN campaigns c"
                           " ON c.id = v.campaign_id WHERE v.id = ?", (variant_id,)).fetchone()
    if variant is None:
        raise MktError(404, LINK_NOT_FOUND)
    ws = variant["workspace_id"]
    contact: Any = None
    if contact_id is not None:
        contact = conn.execute("SELECT id, email, phone, data FROM contacts WHERE id = ? AND workspace_id = ?",
                               (contact_id, ws)).fetchone()
        if contact is None:
            raise MktError(410, GONE)
    values = test_emails.rendering_values(conn, ws, variant, contact)
    return compile_template(variant["body_html"] or "", html=True).render(values)
