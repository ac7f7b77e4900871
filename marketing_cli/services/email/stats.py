"""Email campaign statistics: the read (GET /v1/campaigns/:id/statistics) and the writes
that sending, tracking and bounce handling make per recipient.

Every number is kept as it happens, so reading the statistics of a campaign of ten million
messages reads a few small rows (docs/statistics.md):

- `email_messages` has one row per recipient; each event column (`delivered_at`,
  `opened_at`, `clicked_at`, `unsubscribed_at`, `bounced_at`, `complained_at`, `failed_at`)
  is set once, by the first event of its kind. Triggers (schema step 9) count a column in
  `email_campaign_counters` (per campaign and variant) when it goes from NULL to a value,
  and count the delivery under the recipient's provider in `email_campaign_breakdowns`.
- The first human click of a recipient counts its country, device type and OS in
  `email_campaign_breakdowns` (written here, since those come from the click).
- `email_links` counts every human click of a link and the recipients who clicked it.

Machine events (privacy proxies that fetch every image, link scanners that follow every
link) are stored with their flag but count in no statistic; a later human open or click
of the same recipient counts as usual. The writers take the message's integer id (what a
tracking token decodes to); an id with no message records nothing and returns False.
Each writer is one transaction and returns True when it recorded a first event.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.ids import parse_hex_id
from marketing_cli.storage import dialect
from marketing_cli.storage.db import marks, read_snapshot, transaction

DELIVERY_BATCH = 500  # messages per statement of record_deliveries (a round is `concurrency` of them)

ID_REQUIRED = "Please provide a campaign ID."
NOT_FOUND = "We could not find the campaign you are looking for."
BOUNCE_KIND_INVALID = "A bounce is 'hard' or 'soft'."
LINK_NOT_FOUND = "The link does not belong to this message's campaign."

BREAKDOWN_LIMIT = 10
DEVICE_TYPES = ("desktop", "mobile", "tablet", "other")
UNKNOWN_COUNTRY = "Unknown"
OTHER = "Other"
COUNTERS = ("delivered", "opened", "clicked", "bounced", "unsubscribed", "complained")

# Mailbox providers by the recipient's mail domain (lower case). A domain not listed is
# "Other": companies' own domains hosted by Google or Microsoft cannot be told from the
# address alone.
PROVIDERS: dict[str, tuple[str, ...]] = {
    "Gmail": ("gmail.com", "googlemail.com"),
    "Outlook": ("outlook.com", "hotmail.com", "live.com", "msn.com", "hotmail.co.uk", "hotmail.fr",
                "hotmail.de", "hotmail.it", "hotmail.es", "live.co.uk", "live.fr", "outlook.fr", "outlook.de"),
    "Yahoo": ("yahoo.com", "ymail.com", "rocketmail.com", "aol.com", "yahoo.co.uk", "yahoo.fr", "yahoo.de",
              "yahoo.it", "yahoo.es", "yahoo.co.jp", "yahoo.com.br", "aim.com"),
    "iCloud": ("icloud.com", "me.com", "mac.com"),
    "Proton": ("proton.me", "protonmail.com", "protonmail.ch", "pm.me"),
    "GMX": ("gmx.com", "gmx.net", "gmx.de", "gmx.at", "gmx.ch", "gmx.fr"),
    "Yandex": ("yandex.ru", "yandex.com", "ya.ru", "yandex.ua", "yandex.by", "yandex.kz"),
    "Zoho": ("zoho.com", "zohomail.com", "zoho.eu"),
    "Fastmail": ("fastmail.com", "fastmail.fm"),
}
_PROVIDER_OF = {domain: name for name, domains in PROVIDERS.items() for domain in domains}


def provider_of(domain: str) -> str:
    """The mailbox provider of a mail domain (PROVIDERS), or "Other"."""
    return _PROVIDER_OF.get(domain.strip().rstrip(".").lower(), OTHER)


def provider_sql(conn: sqlite3.Connection, domain: str) -> str:
    """SQL of the provider of the mail domain `domain` (an SQL expression), as provider_of answers."""
    return dialect.email_provider(conn, domain, _PROVIDER_OF, OTHER, provider_of)


def domain_of(email: str) -> str:
    return email.rpartition("@")[2].strip().rstrip(".").lower()


# ---------------------------------------------------------------- reading


def check_campaign_id(campaign_id: Any) -> str:
    """The path's campaign id: blank is `Please provide a campaign ID.`, malformed is not found."""
    if campaign_id is None or (isinstance(campaign_id, str) and not campaign_id.strip()):
        raise MktError(400, ID_REQUIRED)
    return parse_hex_id(campaign_id, NOT_FOUND)


def get_campaign_statistics(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """GET /v1/campaigns/:id/statistics: the email campaign statistics object."""
    campaign_id = check_campaign_id(campaign_id)
    with read_snapshot(conn):
        found = conn.execute("SELECT outbox_delivered, outbox_path, local_time FROM campaigns"
                             " WHERE id = ? AND workspace_id = ?", (campaign_id, workspace_id)).fetchone()
        if found is None:
            raise MktError(400, NOT_FOUND)
        variants = conn.execute(
            "SELECT v.id, " + ", ".join(f"coalesce(c.{name}, 0) AS {name}" for name in COUNTERS) +
            " FROM campaign_variants v LEFT JOIN email_campaign_counters c"
            " ON c.campaign_id = v.campaign_id AND c.variant_id = v.id"
            " WHERE v.campaign_id = ? ORDER BY v.type", (campaign_id,)).fetchall()
        breakdowns: dict[str, list[tuple[str, int]]] = {"country": [], "device_type": [], "os": [], "provider": []}
        for row in conn.execute(
                "SELECT dimension, key, count FROM ("
                " SELECT dimension, key, count, row_number() OVER"
                f"  (PARTITION BY dimension ORDER BY count DESC, {dialect.in_byte_order(conn, 'key')}) AS rank"
                " FROM email_campaign_breakdowns WHERE campaign_id = ? AND count > 0) ranked"
                " WHERE rank <= ? ORDER BY dimension, rank", (campaign_id, BREAKDOWN_LIMIT)):
            breakdowns[row["dimension"]].append((row["key"], row["count"]))
        links = conn.execute(
            "SELECT url, sum(total_clicks) AS total, sum(unique_clicks) AS uniq FROM email_links"
            f" WHERE campaign_id = ? GROUP BY url ORDER BY total DESC, uniq DESC, {dialect.in_byte_order(conn, 'url')}",
            (campaign_id,)).fetchall()
        waiting = _waiting(conn, campaign_id) if found["local_time"] else None
    answer = {
        "aggregate": {name: sum(v[name] for v in variants) for name in COUNTERS},
        "clicks_by_country": [{"country": k, "click_count": n} for k, n in breakdowns["country"]],
        "clicks_by_device_type": [{"device_type": k, "click_count": n} for k, n in breakdowns["device_type"]],
        "clicks_by_os": [{"operating_system": k, "click_count": n} for k, n in breakdowns["os"]],
        "delivered_by_provider": [{"service_provider": k, "delivery_count": n} for k, n in breakdowns["provider"]],
        "link_activity": [{"url": r["url"], "total_clicks": r["total"], "unique_clicks": r["uniq"]} for r in links],
        "variant_stats": [{"variant_id": v["id"], **{name: v[name] for name in COUNTERS}} for v in variants],
        "outbox": outbox_deliveries(found),
    }
    if waiting is not None:  # extension: a local-time send's messages still waiting for their zone
        answer["waiting_for_local_time"] = waiting
    return answer


def _waiting(conn: sqlite3.Connection, campaign_id: str) -> int:
    return conn.execute("SELECT count(*) FROM email_messages WHERE campaign_id = ? AND status = 'queued'"
                        " AND due_at > ?", (campaign_id, clock.now())).fetchone()[0]


def campaign_counters(conn: sqlite3.Connection, campaign_id: str) -> dict[str, int]:
    """The sender's progress without counting rows: recipients, failed and the six numbers."""
    names = ("recipients", *COUNTERS, "failed")
    row = conn.execute("SELECT " + ", ".join(f"coalesce(sum({n}), 0)" for n in names) +
                       " FROM email_campaign_counters WHERE campaign_id = ?", (campaign_id,)).fetchone()
    return dict(zip(names, row))


# ---------------------------------------------------------------- writing: messages and links


def add_messages(conn: sqlite3.Connection, campaign_id: str, variant_id: str,
                 recipients: Iterable[tuple[str | None, str]]) -> list[int]:
    """One queued message per (contact_id, email); returns their ids in order.

    A contact already in the campaign keeps its message (and its id is returned)."""
    created = clock.now()
    ids = []
    with transaction(conn):
        for contact_id, email in recipients:
            domain = domain_of(email)
            row = conn.execute(
                "INSERT INTO email_messages (campaign_id, variant_id, contact_id, email, domain, provider, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (campaign_id, contact_id) DO NOTHING RETURNING id",
                (campaign_id, variant_id, contact_id, email, domain, provider_of(domain), created)).fetchone()
            if row is None:
                row = conn.execute("SELECT id FROM email_messages WHERE campaign_id = ? AND contact_id = ?",
                                   (campaign_id, contact_id)).fetchone()
            ids.append(row[0])
    return ids


def register_links(conn: sqlite3.Connection, campaign_id: str, variant_id: str,
                   urls: Iterable[str]) -> dict[str, int]:
    """The link id of each original URL of a variant (made on first use): {url: id}."""
    result = {}
    with transaction(conn):
        for url in urls:
            conn.execute("INSERT INTO email_links (campaign_id, variant_id, url) VALUES (?, ?, ?)"
                         " ON CONFLICT (campaign_id, variant_id, url) DO NOTHING", (campaign_id, variant_id, url))
            result[url] = conn.execute("SELECT id FROM email_links WHERE campaign_id = ? AND variant_id = ?"
                                       " AND url = ?", (campaign_id, variant_id, url)).fetchone()[0]
    return result


def message_for_token(conn: sqlite3.Connection, token: str) -> int | None:
    row = conn.execute("SELECT id FROM email_messages WHERE token = ?", (token,)).fetchone()
    return None if row is None else row[0]


def message_for_smtp_id(conn: sqlite3.Connection, smtp_message_id: str) -> int | None:
    """The message a bounce or complaint report refers to (its Message-ID, brackets optional)."""
    key = smtp_message_id.strip().removeprefix("<").removesuffix(">")
    row = conn.execute("SELECT id FROM email_messages WHERE smtp_message_id = ?", (key,)).fetchone()
    return None if row is None else row[0]


def last_message_to(conn: sqlite3.Connection, workspace_id: int, email: str) -> int | None:
    """The newest delivered message to a workspace's contact (a bounce that names no campaign)."""
    row = conn.execute(
        "SELECT m.id FROM contacts c JOIN email_messages m ON m.contact_id = c.id"
        " WHERE c.workspace_id = ? AND c.email = ? AND m.delivered_at IS NOT NULL ORDER BY m.id DESC LIMIT 1",
        (workspace_id, email.strip().lower())).fetchone()
    return None if row is None else row[0]


# ---------------------------------------------------------------- writing: events


def _message(conn: sqlite3.Connection, message_id: int) -> sqlite3.Row | None:
    return conn.execute("SELECT contact_id, campaign_id, variant_id FROM email_messages WHERE id = ?",
                        (message_id,)).fetchone()


def record_delivery(conn: sqlite3.Connection, message_id: int, provider: str | None = None, *,
                    smtp_message_id: str | None = None, at: str | None = None) -> bool:
    """The transport accepted the message (SMTP 250 or the outbox): counts once in delivered
    and under its provider (the stored one unless `provider` is given)."""
    with transaction(conn):
        return _deliver(conn, message_id, provider, smtp_message_id, at or clock.now())


def record_deliveries(conn: sqlite3.Connection, message_ids: Iterable[int], *, at: str | None = None,
                      smtp_ids: Mapping[int, str] | None = None, release: bool = False) -> int:
    """record_delivery for a batch in one transaction (the sender's hot path, `smtp_ids` its
    Message-IDs); how many were first. Two statements for a batch of up to DELIVERY_BATCH
    messages, each written for all of them at once (the contacts' counts by an UPDATE ...
    FROM their grouped messages, the messages by an UPDATE ... FROM a VALUES list of ids and
    Message-IDs): PostgreSQL parses and plans one statement for the round, not one per
    message (0.27 ms of its CPU a message as executemany), and the counter rows the
    delivered trigger updates are held for the shortest time by concurrent senders.
    `release`: the delivered messages' hourly_emails reservations (reserved_hour) are
    cleared in the same UPDATE (the sender settles them in the same transaction)."""
    at = at or clock.now()
    ids = list(dict.fromkeys(message_ids))
    smtp_ids = smtp_ids or {}
    first = 0
    with transaction(conn):
        for start in range(0, len(ids), DELIVERY_BATCH):
            batch = ids[start:start + DELIVERY_BATCH]
            conn.execute("UPDATE contacts SET total_delivered = total_delivered + d.n FROM (SELECT contact_id,"
                         f" count(*) AS n FROM email_messages WHERE id IN ({marks(batch)}) AND delivered_at IS NULL"
                         " AND failed_at IS NULL AND contact_id IS NOT NULL GROUP BY contact_id) AS d"
                         " WHERE contacts.id = d.contact_id", batch)
            first += conn.execute(
                "UPDATE email_messages SET delivered_at = ?, status = 'delivered',"
                " smtp_message_id = coalesce(v.column2, email_messages.smtp_message_id), failure_reason = NULL"
                f"{', reserved_hour = NULL' if release else ''}"
                f" FROM (VALUES {', '.join(['(?, ?)'] * len(batch))}) AS v"
                " WHERE email_messages.id = v.column1 AND email_messages.delivered_at IS NULL"
                " AND email_messages.failed_at IS NULL",
                (at, *(x for message_id in batch for x in (message_id, smtp_ids.get(message_id))))).rowcount
    return first


def _deliver(conn: sqlite3.Connection, message_id: int, provider: str | None, smtp_message_id: str | None,
             at: str) -> bool:
    first = conn.execute(
        "UPDATE email_messages SET delivered_at = ?, status = 'delivered', provider = coalesce(?, provider),"
        " smtp_message_id = coalesce(?, smtp_message_id), failure_reason = NULL"
        " WHERE id = ? AND delivered_at IS NULL AND failed_at IS NULL RETURNING contact_id",
        (at, provider, smtp_message_id, message_id)).fetchone()
    if first is None:
        return False
    conn.execute("UPDATE contacts SET total_delivered = total_delivered + 1 WHERE id = ?", (first[0],))
    return True


def record_failure(conn: sqlite3.Connection, message_id: int, reason: str, *, at: str | None = None,
                   bounce_class: str | None = None) -> bool:
    """The transport refused the message for good (5xx): failed, never delivered; `bounce_class`
    is what the refusal says (services/delivery/bounce_classes.py)."""
    with transaction(conn):
        cursor = conn.execute(
            "UPDATE email_messages SET failed_at = ?, status = 'failed', failure_reason = ?, bounce_class = ?"
            " WHERE id = ? AND delivered_at IS NULL AND failed_at IS NULL",
            (at or clock.now(), reason, bounce_class, message_id))
    return cursor.rowcount == 1


def record_open(conn: sqlite3.Connection, message_id: int, *, machine: bool = False, at: str | None = None) -> bool:
    """The open pixel was fetched; True on the recipient's first human open."""
    at = at or clock.now()
    with transaction(conn):
        if machine:
            conn.execute("UPDATE email_messages SET machine_opened_at = coalesce(machine_opened_at, ?)"
                         " WHERE id = ?", (at, message_id))
            return False
        row = conn.execute(
            "UPDATE email_messages SET open_count = open_count + 1, opened_at = coalesce(opened_at, ?)"
            " WHERE id = ? RETURNING contact_id, open_count = 1, campaign_id, variant_id", (at, message_id)).fetchone()
        if row is None:
            return False
        first = bool(row[1])
        # The timeline's total opens (schema step 16): the message keeps only its first open's time.
        conn.execute("INSERT INTO email_campaign_hours (campaign_id, hour, variant_id, total_opens)"
                     " VALUES (?, substr(?, 1, 13), ?, 1) ON CONFLICT (campaign_id, hour, variant_id)"
                     " DO UPDATE SET total_opens = email_campaign_hours.total_opens + 1", (row[2], at, row[3]))
        conn.execute("UPDATE contacts SET total_opens = total_opens + 1, unique_opens = unique_opens + ?,"
                     " last_opened_at = max(coalesce(last_opened_at, ''), ?) WHERE id = ?", (int(first), at, row[0]))
    return first


def record_click(conn: sqlite3.Connection, message_id: int, link_id: int, device_type: str, os: str,
                 country: str | None, *, machine: bool = False, at: str | None = None) -> bool:
    """A tracked link was followed; True on the recipient's first human click.

    Every click is stored. A human click counts in the link's total_clicks, once per
    recipient in its unique_clicks, and the recipient's first one counts in `clicked` and
    in the country, device type and OS breakdowns."""
    at = at or clock.now()
    device_type = device_type if device_type in DEVICE_TYPES else "other"
    os = os.strip() if isinstance(os, str) and os.strip() else OTHER
    country = country.strip() if isinstance(country, str) and country.strip() else UNKNOWN_COUNTRY
    with transaction(conn):
        message = _message(conn, message_id)
        if message is None:
            return False
        link = conn.execute("SELECT 1 FROM email_links WHERE id = ? AND campaign_id = ? AND variant_id = ?",
                            (link_id, message["campaign_id"], message["variant_id"])).fetchone()
        if link is None:
            raise MktError(404, LINK_NOT_FOUND)
        if machine:
            conn.execute("INSERT INTO email_clicks (message_id, link_id, clicked_at, device_type, os, country, machine)"
                         " VALUES (?, ?, ?, ?, ?, ?, 1)", (message_id, link_id, at, device_type, os, country))
            return False
        clicked_link_before = conn.execute(
            "SELECT 1 FROM email_clicks WHERE message_id = ? AND link_id = ? AND machine = 0",
            (message_id, link_id)).fetchone() is not None
        conn.execute("INSERT INTO email_clicks (message_id, link_id, clicked_at, device_type, os, country)"
                     " VALUES (?, ?, ?, ?, ?, ?)", (message_id, link_id, at, device_type, os, country))
        conn.execute("UPDATE email_links SET total_clicks = total_clicks + 1, unique_clicks = unique_clicks + ?"
                     " WHERE id = ?", (0 if clicked_link_before else 1, link_id))
        first = conn.execute("UPDATE email_messages SET clicked_at = ? WHERE id = ? AND clicked_at IS NULL",
                             (at, message_id)).rowcount == 1
        if first:
            conn.executemany(
                "INSERT INTO email_campaign_breakdowns (campaign_id, dimension, key, count) VALUES (?, ?, ?, 1)"
                " ON CONFLICT (campaign_id, dimension, key) DO UPDATE SET count = email_campaign_breakdowns.count + 1",
                [(message["campaign_id"], "country", country), (message["campaign_id"], "device_type", device_type),
                 (message["campaign_id"], "os", os)])
        conn.execute("UPDATE contacts SET total_clicks = total_clicks + 1, unique_clicks = unique_clicks + ?,"
                     " last_clicked_at = max(coalesce(last_clicked_at, ''), ?) WHERE id = ?",
                     (int(first), at, message["contact_id"]))
    return first


def _first(conn: sqlite3.Connection, column: str, message_id: int, at: str | None,
           also: str = "", params: tuple[Any, ...] = ()) -> str | None:
    """Set `column` (and the `also` assignments; fixed SQL of ours) if `column` is unset;
    the contact id ('' for none) when it was set, None when it was not."""
    row = conn.execute(f"UPDATE email_messages SET {column} = ?{also} WHERE id = ? AND {column} IS NULL"
                       " RETURNING coalesce(contact_id, '')", (at or clock.now(), *params, message_id)).fetchone()
    return None if row is None else row[0]


def record_unsubscribe(conn: sqlite3.Connection, message_id: int, *, at: str | None = None) -> bool:
    """The recipient unsubscribed through this message (counts once in unsubscribed)."""
    with transaction(conn):
        return _first(conn, "unsubscribed_at", message_id, at) is not None


def record_bounce(conn: sqlite3.Connection, message_id: int, kind: str, *, at: str | None = None,
                  bounce_class: str | None = None, recipient: bool = True) -> bool:
    """A bounce report for the message: counts once in bounced; a hard bounce after a soft
    one turns the message's bounce_type to hard without counting again. `bounce_class` (None:
    recorded by hand, unclassified) is kept on the message, the latest report's; a bounce that
    says nothing about the recipient (`recipient` False: a block, an authentication failure)
    is not added to the contact's total_bounces."""
    if kind not in ("hard", "soft"):
        raise MktError(400, BOUNCE_KIND_INVALID)
    with transaction(conn):
        contact = _first(conn, "bounced_at", message_id, at, ", status = 'bounced', bounce_type = ?, bounce_class = ?",
                         (kind, bounce_class))
        if contact is None:
            conn.execute("UPDATE email_messages SET bounce_type = CASE WHEN ? = 'hard' THEN 'hard' ELSE bounce_type END,"
                         " bounce_class = coalesce(?, bounce_class) WHERE id = ?", (kind, bounce_class, message_id))
            return False
        if recipient:
            conn.execute("UPDATE contacts SET total_bounces = total_bounces + 1 WHERE id = ?", (contact,))
    return True


def record_complaint(conn: sqlite3.Connection, message_id: int, *, at: str | None = None) -> bool:
    """The recipient reported the message as spam (counts once in complained)."""
    with transaction(conn):
        return _first(conn, "complained_at", message_id, at) is not None


def campaign_progress(conn: sqlite3.Connection, row: sqlite3.Row) -> dict[str, Any] | None:
    """The `progress` member of GET /v1/campaigns/:id once a send began (None before)."""
    if row["send_started_at"] is None:
        return None
    totals = conn.execute("SELECT coalesce(sum(recipients), 0), coalesce(sum(delivered), 0), coalesce(sum(failed), 0)"
                          " FROM email_campaign_counters WHERE campaign_id = ?", (row["id"],)).fetchone()
    held = conn.execute("SELECT count(*) FROM email_ab_holdout WHERE campaign_id = ?", (row["id"],)).fetchone()[0]
    total, delivered, failed = totals[0] + held, totals[1], totals[2]
    end = clock.parse_ts(row["sent_at"]) if row["sent_at"] else clock.utcnow()
    seconds = max(0.001, (end - clock.parse_ts(row["send_started_at"])).total_seconds())
    rate = (delivered + failed) / seconds
    left = max(0, total - delivered - failed)
    # A local-time send's messages waiting for their zone (services/contacts/zones.py); 0 otherwise.
    waiting = _waiting(conn, row["id"]) if row["local_time"] else 0
    return {"total": total, "sent": delivered + failed, "delivered": delivered, "failed": failed,
            "remaining": left, "waiting_for_local_time": waiting, "rate_per_second": round(rate, 1),
            "eta_seconds": None if rate == 0 or row["status"] != "SENDING" else round(left / rate),
            "outbox": outbox_deliveries(row)}


# ---------------------------------------------------------------- deliveries to an outbox folder


def outbox_deliveries(row: sqlite3.Row) -> dict[str, Any] | None:
    """The `outbox` member of statistics and progress: {"delivered", "path"} of the campaign's
    messages that were written to an outbox folder rather than sent (they count in
    `delivered` too), or None when none was."""
    if not row["outbox_delivered"]:
        return None
    return {"delivered": row["outbox_delivered"], "path": row["outbox_path"]}


def count_outbox_deliveries(conn: sqlite3.Connection, campaign_id: str, count: int, folder: str) -> None:
    """`count` more of the campaign's messages went to the outbox `folder` (in the sender's transaction)."""
    conn.execute("UPDATE campaigns SET outbox_delivered = outbox_delivered + ?, outbox_path = ? WHERE id = ?",
                 (count, folder, campaign_id))
