"""What the tracking URLs do (CONTRACT section 7): opens, clicks, unsubscribes.

    GET  {base}/t/o/{token}            the open pixel: a 1x1 GIF, counts the recipient's open
    GET  {base}/t/c/{token}/{link_id}  a tracked link: 302 to the original URL, counts the click
    GET  {base}/t/u/{token}            the unsubscribe page (a form that POSTs back)
    POST {base}/t/u/{token}            unsubscribes (RFC 8058 one-click body, or the page's form)
    GET  {base}/t/v/{token}            the message as its recipient got it (services/delivery/view_online.py)

A token is the message id and its MAC (kernel/tokens.py), of the path's own kind
(path_tokens.py: the pixel's token counts opens and nothing else); a forged or malformed
one, or one made for another path, changes nothing: the pixel is still answered (a mail
client shows no broken image and learns nothing), a link or unsubscribe URL answers 404.

An unsubscribe appends a row to the consent ledger (services/contacts/consents.py): source
`unsubscribe_page` when the page's own button sent the POST (its form names itself,
PAGE_FORM), else `unsubscribe_one_click` (RFC 8058's `List-Unsubscribe=One-Click`, which a
mail client sends without showing anything), with the campaign, the IP address and the
user agent of the request; the page's wording is the row's `consent_text`. The User-Agent gives
the device type, OS and whether a machine (a privacy proxy, a link scanner) made the
request (kernel/user_agents.py): machine opens and clicks are stored but do not count
in `opened` / `clicked`. The country comes from the GeoIP database named by MKT_GEOIP
(`mkt serve --geoip PATH`), "Unknown" without one.
"""

from __future__ import annotations

import sqlite3
from html import escape

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.geoip import country_of, time_zone_of
from marketing_cli.kernel.numbers import parse_digits
from marketing_cli.kernel.user_agents import classify
from marketing_cli.services.contacts import consents, events, zone_columns
from marketing_cli.services.delivery.path_tokens import CLICK, OPEN, UNSUBSCRIBE, read_message_token
from marketing_cli.services.email import stats
from marketing_cli.storage.db import transaction

PIXEL_GIF = (b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00"
             b",\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;")
LINK_NOT_FOUND = "This link is not valid."
UNSUBSCRIBE_EVENT = "CONTACT_UNSUBSCRIBED"
# The POST's body is RFC 8058's "List-Unsubscribe=One-Click" or the page's one-field form: a few
# dozen bytes, never read further. The route is public, so a larger body is a 413 (docs/reliability.md).
UNSUBSCRIBE_MAX_BYTES = 4 * 1024
# The page's form posts this field (RFC 8058's one-click POST carries List-Unsubscribe=One-Click):
# how the ledger tells the person's click on the page from a mail client's one-click.
PAGE_FORM = (b"unsubscribe", b"page")
# The page's wording, as the consent ledger keeps it (`<address>`: the address it shows).
PAGE_WORDING = "Unsubscribe. Stop sending emails to <address>? [Unsubscribe]"


def _message(conn: sqlite3.Connection, token: str, kind: str) -> sqlite3.Row | None:
    message_id = read_message_token(conn, kind, token)
    if message_id is None:
        return None
    return conn.execute("SELECT m.*, c.workspace_id FROM email_messages m JOIN campaigns c ON c.id = m.campaign_id"
                        " WHERE m.id = ?", (message_id,)).fetchone()


def track_open(conn: sqlite3.Connection, token: str, user_agent: str | None, ip: str | None = None) -> bytes:
    """The pixel's bytes; the open counts when the token is genuine."""
    message = _message(conn, token, OPEN)
    if message is not None:
        machine = classify(user_agent).machine
        stats.record_open(conn, message["id"], machine=machine)
        if not machine:
            zone_columns.remember_location(conn, message["contact_id"], time_zone_of(ip))
    return PIXEL_GIF


def track_click(conn: sqlite3.Connection, token: str, link_id: str, user_agent: str | None,
                ip: str | None) -> str:
    """The original URL to redirect to; the click counts. 404 for a forged token or link."""
    message = _message(conn, token, CLICK)
    number = parse_digits(link_id)
    if message is None or number is None:
        raise MktError(404, LINK_NOT_FOUND)
    link = conn.execute("SELECT url FROM email_links WHERE id = ? AND campaign_id = ? AND variant_id = ?",
                        (number, message["campaign_id"], message["variant_id"])).fetchone()
    if link is None:
        raise MktError(404, LINK_NOT_FOUND)
    kind = classify(user_agent)
    stats.record_click(conn, message["id"], int(link_id), kind.device_type, kind.os_family,
                                country_of(ip), machine=kind.machine)
    if not kind.machine:  # the city's zone (a City database): the contact's `location` zone
        zone_columns.remember_location(conn, message["contact_id"], time_zone_of(ip))
    return link["url"]


def unsubscribe_page(conn: sqlite3.Connection, token: str, *, done: bool = False) -> str:
    message = _message(conn, token, UNSUBSCRIBE)
    if message is None:
        raise MktError(404, LINK_NOT_FOUND)
    address = escape(message["email"])
    if done:
        body = f"<h1>You are unsubscribed</h1><p>{address} will not receive these emails any more.</p>"
    else:
        field, value = (part.decode("ascii") for part in PAGE_FORM)
        body = (f"<h1>Unsubscribe</h1><p>Stop sending emails to {address}?</p>"
                f'<form method="post"><input type="hidden" name="{field}" value="{value}">'
                '<button type="submit">Unsubscribe</button></form>')
    return ('<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" '
            'content="width=device-width,initial-scale=1"><title>Unsubscribe</title><style>body{font-family:'
            'system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem}button{font-size:1rem;'
            f'padding:.5rem 1rem}}</style></head><body>{body}</body></html>')


def _from_page(body: bytes) -> bool:
    """Whether the POST is the page's button (its form field), not a one-click POST."""
    field, value = PAGE_FORM
    return any(pair.strip() == field + b"=" + value for pair in body.split(b"&"))


def unsubscribe(conn: sqlite3.Connection, token: str, *, body: bytes = b"", ip: str | None = None,
                user_agent: str | None = None) -> str:
    """Set the contact UNSUBSCRIBED (once), count it in the campaign, log the event and the
    consent ledger's row (`body`: the POST's, which tells the page from one-click); the page."""
    message = _message(conn, token, UNSUBSCRIBE)
    if message is None:
        raise MktError(404, LINK_NOT_FOUND)
    page = _from_page(body)
    source = consents.Source("unsubscribe_page" if page else "unsubscribe_one_click",
                             consent_text=PAGE_WORDING if page else None, campaign_id=message["campaign_id"],
                             ip=ip, user_agent=user_agent)
    with transaction(conn):
        first = stats.record_unsubscribe(conn, message["id"])
        if first and message["contact_id"] is not None:
            now = clock.now()
            changed = conn.execute("UPDATE contacts SET status = 'UNSUBSCRIBED', updated_at = ? WHERE id = ?"
                                   " AND status != 'UNSUBSCRIBED'", (now, message["contact_id"])).rowcount
            if changed:
                events.append_events(conn, message["workspace_id"], message["contact_id"], [
                    (UNSUBSCRIBE_EVENT, {"campaign_id": message["campaign_id"], "channel": "email"})])
                consents.append(conn, message["workspace_id"], message["contact_id"],
                                [("email", "UNSUBSCRIBED")], source, at=now)
    return unsubscribe_page(conn, token, done=True)
