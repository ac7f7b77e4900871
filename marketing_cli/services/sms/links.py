"""SMS click tracking (CONTRACT section 8): short per-recipient links and their clicks.

With the workspace's `interaction_tracking` on, every http(s) URL of a message is replaced,
per recipient, by `{tracking base}/s/{token}`: the token (tracking_tokens, kind "s", 48-bit
MAC) carries `message_id * 16 + position`, so at most 16 links per message are shortened
(later ones stay as written). A token is 15 characters; with a base of
`https://t.example.com` a short link is 39 characters. The segment count and the price of
the message are computed on the text as sent, before it is charged.
"""

from __future__ import annotations

import re
import sqlite3

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.tokens import SMS_MAC_BYTES, make_token, read_token
from marketing_cli.services.sms.segments import count_segments
from marketing_cli.storage import dialect
from marketing_cli.storage.db import instance_secret, transaction

KIND = "s"
MAX_LINKS = 16
LINK_NOT_FOUND = "This link is not valid."
URL = re.compile(r"https?://[^\s<>\"']+", re.IGNORECASE)
_TRAILING = ".,;:!?)]}'\""


def find_urls(text: str) -> list[tuple[int, int, str]]:
    """(start, end, url) of each http(s) URL, trailing punctuation left out."""
    found = []
    for match in URL.finditer(text):
        url = match.group(0).rstrip(_TRAILING)
        if len(url) > len("https://"):
            found.append((match.start(), match.start() + len(url), url))
    return found


def tracking_on(conn: sqlite3.Connection, workspace_id: int) -> bool:
    row = conn.execute("SELECT interaction_tracking FROM workspaces WHERE id = ?", (workspace_id,)).fetchone()
    return bool(row and row[0])


def shorten_batch(conn: sqlite3.Connection, workspace_id: int, campaign_id: str, batch: int, message: str,
                  prices: dict[str, int]) -> None:
    """Replace the links of a batch's pending messages (inside expansion's transaction, before the
    charge): body, encoding, segments and price as sent, and the links kept in `sms_links`."""
    from marketing_cli.services.account.workspaces import tracking_base_url

    # LIKE (ASCII case-insensitive) keeps the texts without "http" in SQL: no Python per recipient.
    # The status is tested inside the CASE, not as `status = 'pending'`, so that PostgreSQL reads
    # the batch by sms_messages_batch, not every pending row of the campaign by sms_messages_pending.
    rows = conn.execute("SELECT id, COALESCE(body, ?1) AS body, country FROM sms_messages WHERE campaign_id = ?2"
                        " AND batch = ?3 AND CASE WHEN status = 'pending' THEN COALESCE(body, ?1) END"
                        f" {dialect.sms_like_any_case(conn)} '%http%' ORDER BY id",
                        (message, campaign_id, batch)).fetchall()
    if not any(URL.search(r["body"]) for r in rows):
        return
    base = tracking_base_url(conn, workspace_id)
    secret = instance_secret(conn)
    updates, links = [], []
    for row in rows:
        text, parts, last = row["body"], [], 0
        urls = find_urls(text)[:MAX_LINKS]
        if not urls:
            continue
        for position, (start, end, url) in enumerate(urls):
            token = make_token(secret, KIND, row["id"] * MAX_LINKS + position, SMS_MAC_BYTES)
            parts += [text[last:start], f"{base}/s/{token}"]
            links.append((row["id"], position, url))
            last = end
        body = "".join(parts) + text[last:]
        measure = count_segments(body)
        units = prices.get(row["country"] or "", 0) * measure.segments
        updates.append((body, measure.encoding, measure.segments, units, row["id"]))
    conn.executemany("UPDATE sms_messages SET body = ?, encoding = ?, segments = ?, price_units = ? WHERE id = ?",
                     updates)
    conn.executemany("INSERT OR IGNORE INTO sms_links (message_id, position, url) VALUES (?, ?, ?)", links)


def track_click(conn: sqlite3.Connection, token: str, user_agent: str | None, ip: str | None) -> str:
    """GET {base}/s/{token}: the original URL (302); the click is recorded. 404 for a forged token."""
    from marketing_cli.kernel.geoip import country_of, time_zone_of
    from marketing_cli.kernel.user_agents import classify
    from marketing_cli.services.contacts.zone_columns import remember_location

    number = read_token(instance_secret(conn), KIND, token, SMS_MAC_BYTES) if len(token) <= 32 else None
    if number is None:
        raise MktError(404, LINK_NOT_FOUND)
    link = conn.execute("SELECT url FROM sms_links WHERE message_id = ? AND position = ?",
                        (number // MAX_LINKS, number % MAX_LINKS)).fetchone()
    if link is None:
        raise MktError(404, LINK_NOT_FOUND)
    kind = classify(user_agent)
    if not kind.machine:  # link scanners and previews open links too: they do not count
        with transaction(conn):
            conn.execute("INSERT INTO sms_clicks (message_id, url, country, device_type, operating_system, clicked_at)"
                         " VALUES (?, ?, ?, ?, ?, ?)", (number // MAX_LINKS, link["url"], country_of(ip),
                                                        kind.device_type, kind.os_family, clock.now()))
        contact = conn.execute("SELECT contact_id FROM sms_messages WHERE id = ?", (number // MAX_LINKS,)).fetchone()
        remember_location(conn, contact and contact[0], time_zone_of(ip))
    return str(link["url"])
