"""One token kind per public path of a message, and the "m" tokens mailed before them.

    kind          where the token goes                what holding it lets one do
    open          the pixel      GET /t/o/{token}     count an open
    click         tracked links  GET /t/c/{token}/N   follow the link, count a click
    unsubscribe   {{unsubscribe_url}}, {{preferences_url}}, the List-Unsubscribe header:
                                 GET /t/u/{token}     see the page
                                 POST /t/u/{token}    unsubscribe (RFC 8058 one-click, or the page's button)
    view          {{view_online_url}}  GET /t/v/{token}   see the message as it was sent
    confirm       {{confirmation_url}} GET|POST /t/confirm/{token}   confirm a double opt-in (POST)
    report        the X-Mkt-Message header            attribute a bounce or complaint report

A token is the message id and a MAC over (kind, id) under the installation's secret
(kernel/tokens.py), so a token made for one path is refused on every other one: 404 (the
pixel answers its GIF and counts nothing), nothing changed. Why it matters: a consent must
come from the person. The pixel's URL is fetched and logged by image proxies and scanners,
the header travels with every bounce and complaint report, and the view page's URL is
shared by whoever forwards it; with one token for all of them, any of those copies could
confirm a double opt-in or unsubscribe the person. Now only the confirmation link confirms
and only the unsubscribe link unsubscribes.

The "m" tokens of messages sent before. Until schema step 32 a message carried one token of
kind "m" on all of these paths. Those messages are in inboxes: their links keep working
where they did. The step recorded the highest message id that existed (`token_cutovers`);
an "m" token is read for a message at or below it, on every path it served, and refused for
any message made since, which never carried one (a message still queued at the upgrade is
sent with the new kinds; its "m" token was never mailed, and only the secret can make it).

Cost: six HMAC-SHA256 per message where there was one (docs/performance.md "Sending email": a
few microseconds against the 0.3-0.7 ms of its DKIM signature; a sender copies one keyed HMAC
state, kernel/tokens.TokenMaker, rather than keying six); reading a token of the
wrong kind costs a second HMAC (the "m" check) and a primary-key read only when that one is
genuine.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from marketing_cli.kernel.tokens import TokenMaker, make_token, read_token
from marketing_cli.storage.db import instance_secret

OPEN, CLICK, UNSUBSCRIBE, VIEW, CONFIRM, REPORT = "open", "click", "unsubscribe", "view", "confirm", "report"
KINDS = (OPEN, CLICK, UNSUBSCRIBE, VIEW, CONFIRM, REPORT)
LEGACY = "m"  # every path's kind before schema step 32


@dataclass(frozen=True)
class MessageTokens:
    """The tokens of one message, one per kind."""

    open: str
    click: str
    unsubscribe: str
    view: str
    confirm: str
    report: str

    @classmethod
    def make(cls, secret: bytes | TokenMaker, message_id: int) -> MessageTokens:
        """The tokens of one message; a sender making many passes a `TokenMaker` of the secret."""
        if isinstance(secret, TokenMaker):
            return cls(*secret.make_all(KINDS, message_id))
        return cls(*(make_token(secret, kind, message_id) for kind in KINDS))


def legacy_last_id(conn: sqlite3.Connection) -> int:
    """The highest message id whose "m" token is honoured (schema step 32's cut-over)."""
    row = conn.execute("SELECT last_id FROM token_cutovers WHERE kind = ?", (LEGACY,)).fetchone()
    return 0 if row is None else row[0]


def read_message_token(conn: sqlite3.Connection, kind: str, token: str, secret: bytes | None = None) -> int | None:
    """The message id a token of `kind` names, or a pre-upgrade message's "m" token; else None."""
    secret = instance_secret(conn) if secret is None else secret
    message_id = read_token(secret, kind, token)
    if message_id is not None:
        return message_id
    legacy = read_token(secret, LEGACY, token)
    if legacy is not None and legacy <= legacy_last_id(conn):
        return legacy
    return None
