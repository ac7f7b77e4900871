"""A contact's time zone, resolved in SQL over a whole audience (docs/campaigns.md
"Local-time delivery"; local_time.py plans the send by it).

A contact's zone comes from the first of these that answers, and the answer records which:

    field       the built-in `timezone` field (an IANA name, checked when written)
    phone       the zone of the phone number (phonenumbers.timezone), only when every zone
                phonenumbers gives for it has the same UTC offset at the moment of sending
                (+1 212: New York; +1 208: Boise and Los Angeles differ, no answer; +1 800:
                42 zones; `Etc/Unknown`: none; phone_zones.py)
    location    the zone of the city of the contact's last human open or click
                (`contacts.located_timezone`, GeoLite2-City's location.time_zone)
    workspace   the workspace's own zone (`workspaces.timezone`, UTC unless set)

`Zones` puts that in SQL over the audience's own query (`contacts c`), so a snapshot of a
million recipients is one `INSERT ... SELECT` with no Python call and no JSON read per row.
Each contact keeps what does not depend on the moment of sending (schema step 25): the
field's value (`zone_field`) and the id of its phone's list of zones in phone_zone_sets
(`zone_phone_set`), kept at write time by every writer of a contact's phone or data
(zone_columns.py). `zone_cached` NULL means stale, and that is the safety net: `resolve()`
fills every stale contact of the workspace in one UPDATE, then checks each list of
phone_zone_sets once for one offset at the sending instant (the `agree` table). The
audience query then reads the kept field value, the answer of the phone's list (one
integer-key join on that table) and the located zone as columns (`columns()`), and the zone
and its source are both read from those columns of it as a derived table (`select()`), the
workspace's zone a bound parameter.

The stale contacts' lists come from two small temporary tables filled once per number
prefix, as SMS pricing does (services/sms/pricing.py): phonenumbers' time zone data is keyed
by prefixes of up to nine digits, so each distinct first four digits (`+1208`, `+3361`) is
resolved once; where the data has longer prefixes below it (+1 208 201 is Denver alone), the
numbers under it are keyed by as many digits as the longest such prefix and each of those
keys is resolved once.
"""

from __future__ import annotations

import sqlite3
import uuid
from datetime import datetime
from typing import Any, Self

from marketing_cli.kernel.localtime import canonical_zone, offsets_agree
from marketing_cli.services.account.workspaces import workspace_timezone
from marketing_cli.services.contacts.phone_zones import (
    COARSE,
    number_zones,
    phone_zone,
    prefix_depths,
    prefix_zones,
    store_sets,
)
from marketing_cli.services.contacts.segment_filters import Compiled
from marketing_cli.services.contacts.values import TIMEZONE_TAG
from marketing_cli.services.contacts.zone_columns import timezone_field
from marketing_cli.storage import field_sql
from marketing_cli.storage.db import transaction

_SEEKS = 1_000  # index seeks for distinct keys allowed at least, before one pass over the numbers
_CHUNK = 5_000


class Zones:
    """A contact's zone and its source as SQL over an audience's `contacts c` (a context manager).

    `resolve()` brings the workspace's contacts' kept candidates up to date and fills the
    `agree` table for the sending instant; the audience query then
    selects `columns(c)` with `join(c)` after `contacts c`, and `select()` wraps it:

        query = resolve_audience(conn, ws, audience, "email", f"c.id, c.email, {z.columns()}", z.join())
        conn.execute(*z.select(query, "a.id, a.email"))   # id, email, zone, zone_source
    """
    def __init__(self, conn: sqlite3.Connection, workspace_id: int, at: datetime) -> None:
        self.conn, self.workspace_id, self.at = conn, workspace_id, at
        self.default = workspace_timezone(conn, workspace_id)
        self.field_id = timezone_field(conn, workspace_id)
        suffix = uuid.uuid4().hex  # our own names, never user text
        self.coarse, self.fine = f"temp.tz_coarse_{suffix}", f"temp.tz_fine_{suffix}"
        self.agree = f"temp.tz_agree_{suffix}"

    def __enter__(self) -> Self:
        self.conn.execute(f"CREATE TABLE {self.agree} (id BIGINT PRIMARY KEY, zone TEXT NOT NULL) WITHOUT ROWID")
        return self

    def __exit__(self, *exc: object) -> None:
        for table in (self.coarse, self.fine, self.agree):
            self.conn.execute(f"DROP TABLE IF EXISTS {table}")

    # ------------------------------------------------------------------ the prefix tables

    def resolve(self, size: int = 0) -> None:
        """The contacts' kept candidates brought up to date, then each candidate zone set's
        answer at the moment of sending (the `agree` table, one row per set that has one).

        A contact whose `zone_cached` is NULL (new, or its phone or data written since: the
        trigger of schema step 25) gets its `timezone` field's value and its phone's candidate
        set written back, all such contacts of the workspace in one UPDATE (`_refresh`), in the
        caller's transaction or one of its own. Then every set of phone_zone_sets (a few
        hundred rows at most: phonenumbers' distinct zone lists) is checked once for one
        offset at the moment of sending, in Python."""
        stale = self.conn.execute("SELECT 1 FROM contacts WHERE workspace_id = ? AND zone_cached IS NULL LIMIT 1",
                                  (self.workspace_id,)).fetchone()
        if stale is not None:
            with transaction(self.conn):
                self._refresh(size)
        sets = self.conn.execute("SELECT id, zones FROM phone_zone_sets").fetchall()
        rows = [(r[0], zone) for r in sets if (zone := offsets_agree(tuple(r[1].split(" ")), self.at)) is not None]
        self.conn.execute(f"DELETE FROM {self.agree}")
        self.conn.executemany(f"INSERT INTO {self.agree} (id, zone) VALUES (?, ?)", rows)

    def _refresh(self, size: int) -> None:
        """The stale contacts' kept candidates: the prefix tables (`_prefixes`), then one UPDATE."""
        conn = self.conn
        conn.execute(f"CREATE TABLE {self.coarse} (key TEXT PRIMARY KEY, phone TEXT NOT NULL, set_id BIGINT,"
                     " depth INTEGER) WITHOUT ROWID")
        conn.execute(f"CREATE TABLE {self.fine} (key TEXT PRIMARY KEY, phone TEXT NOT NULL, set_id BIGINT)"
                     " WITHOUT ROWID")
        try:
            self._prefixes(size)
            field = "NULL" if self.field_id is None else field_sql.value_expr(self.field_id, "contacts")
            conn.execute(
                f"UPDATE contacts SET zone_field = {field}, zone_phone_set = CASE WHEN contacts.phone IS NULL"
                " THEN NULL ELSE (SELECT CASE WHEN zc.depth IS NULL THEN zc.set_id ELSE (SELECT zf.set_id"
                f" FROM {self.fine} zf WHERE zf.key = substr(contacts.phone, 1, zc.depth + 1)) END"
                f" FROM {self.coarse} zc WHERE zc.key = substr(contacts.phone, 1, {COARSE})) END,"
                # kept only when the number's prefix was among those resolved (a number written
                # meanwhile by a writer outside this transaction waits for the next resolution)
                " zone_cached = CASE WHEN contacts.phone IS NULL OR EXISTS (SELECT 1 FROM"
                f" {self.coarse} zk WHERE zk.key = substr(contacts.phone, 1, {COARSE})) THEN 1 END"
                " WHERE workspace_id = ? AND zone_cached IS NULL", (self.workspace_id,))
        finally:
            for table in (self.coarse, self.fine):
                conn.execute(f"DROP TABLE IF EXISTS {table}")

    def _set_ids(self, lists: set[tuple[str, ...]]) -> dict[tuple[str, ...], int]:
        """phone_zone_sets' id of each zone list (added when new; an empty list has none)."""
        return store_sets(self.conn, lists)

    def _prefixes(self, size: int = 0) -> None:
        """Each distinct prefix of the workspace's numbers, resolved once in Python.

        The distinct keys are found by one seek each past the last key on the workspace's
        phone index (contacts_phone), as Pricing.resolve does; past max(_SEEKS, size // 50)
        seeks of the finer keys, one pass over the workspace's numbers finds the rest.
        One read transaction holds it all (db.read_snapshot, joining the caller's when there is
        one): the prefix tables' rows are written in one transaction of the temporary tables, not
        one per statement, and every seek reads one snapshot. (A bare SAVEPOINT would do on
        SQLite, but PostgreSQL takes one only inside a transaction.)"""
        conn, depths = self.conn, prefix_depths()
        coarse = self._seek_keys("", "\U0010ffff", lambda phone: phone[:COARSE], None)
        found: list[tuple[str, str, tuple[str, ...], int | None]] = []
        geographic: set[str] = set()
        for key, phone in coarse:
            depth = depths.get(key[1:])
            names, on_prefix = number_zones(phone)
            found.append((key, phone, () if depth else names, depth))
            if depth and on_prefix:
                geographic.add(key)
        ids = self._set_ids({names for _, _, names, _ in found})
        rows = [(key, phone, ids.get(names), depth) for key, phone, names, depth in found]
        conn.executemany(f"INSERT OR IGNORE INTO {self.coarse} (key, phone, set_id, depth) VALUES (?, ?, ?, ?)", rows)
        budget = max(_SEEKS, size // 50)
        fine: list[tuple[str, str]] = []
        for key, _, _, depth in rows:
            if depth is None:
                continue
            found = self._seek_keys(key, key + "\U0010ffff", lambda phone, d=depth: phone[:d + 1], budget - len(fine))
            if found is None:
                fine = []
                conn.execute(
                    f"INSERT OR IGNORE INTO {self.fine} (key, phone) SELECT substr(c.phone, 1, k.depth + 1), c.phone"
                    f" FROM contacts c JOIN {self.coarse} k ON k.key = substr(c.phone, 1, {COARSE})"
                    " WHERE c.workspace_id = ? AND c.phone IS NOT NULL AND k.depth IS NOT NULL", (self.workspace_id,))
                break
            fine.extend(found)
        conn.executemany(f"INSERT OR IGNORE INTO {self.fine} (key, phone) VALUES (?, ?)", fine)
        after = ""
        while True:
            chunk = conn.execute(f"SELECT key, phone FROM {self.fine} WHERE key > ? ORDER BY key LIMIT {_CHUNK}",
                                 (after,)).fetchall()
            if not chunk:
                return
            # Under a geographic example (all of NANP), a finer key's zones are its longest
            # prefix's in the data, read without parsing a number; others are parsed.
            lists = [(prefix_zones(key) if key[:COARSE] in geographic else number_zones(phone)[0], key)
                     for key, phone in chunk]
            ids = self._set_ids({names for names, _ in lists})
            conn.executemany(f"UPDATE {self.fine} SET set_id = ? WHERE key = ?",
                             [(ids.get(names), key) for names, key in lists])
            after = chunk[-1][0]

    def _seek_keys(self, low: str, high: str, key_of: Any, budget: int | None) -> list[tuple[str, str]] | None:
        """(key, example number) of each distinct key of the numbers in (low, high), by index
        seeks; None when more than `budget` were needed."""
        found, after = [], low
        while budget is None or len(found) <= budget:
            row = self.conn.execute("SELECT phone FROM contacts WHERE workspace_id = ? AND phone > ? AND phone < ?"
                                    " ORDER BY phone LIMIT 1", (self.workspace_id, after, high)).fetchone()
            if row is None:
                return found
            key = key_of(row[0])
            found.append((key, row[0]))
            after = key + "\U0010ffff"  # past every number that starts with the key
        return None

    # ------------------------------------------------------------------ the SQL

    def join(self, c: str = "c") -> str:
        """The answers of the candidate sets, LEFT JOINed after `contacts {c}`: one seek by
        integer key in a table of a few rows per contact."""
        return f" LEFT JOIN {self.agree} za ON za.id = {c}.zone_phone_set"

    def columns(self, c: str = "c") -> str:
        """The audience query's columns that `select` reads: the `timezone` field's value and
        the phone's zone (both as `resolve()` left them on the contact), and the located zone."""
        return f"{c}.zone_field AS zone_field, za.zone AS zone_phone, {c}.located_timezone AS zone_located"

    def select(self, query: Compiled, keep: str) -> tuple[str, list[Any]]:
        """(sql, params): `SELECT <keep>, zone, zone_source FROM (<query>) a`, `query` an audience
        query that selects `columns()` with `join()`; `keep` names its other columns as `a.x`.
        The workspace's zone is the first parameter, the audience's follow."""
        sql = (f"SELECT {keep}, COALESCE(a.zone_field, a.zone_phone, a.zone_located, ?) AS zone,"
               " CASE WHEN a.zone_field IS NOT NULL THEN 'field' WHEN a.zone_phone IS NOT NULL THEN 'phone'"
               " WHEN a.zone_located IS NOT NULL THEN 'location' ELSE 'workspace' END AS zone_source"
               f" FROM ({query.sql}) a")
        return sql, [self.default, *query.params]


def contact_zone(conn: sqlite3.Connection, workspace_id: int, contact_id: str, at: datetime) -> tuple[str, str]:
    """(zone, source) of one contact, by the same rule as `Zones` (field, phone, location,
    workspace), without the prefix tables: an automation's wait until a local time asks it
    for one contact at a time."""
    row = conn.execute("SELECT id FROM fields WHERE workspace_id = ? AND merge_tag = ?",
                       (workspace_id, TIMEZONE_TAG)).fetchone()
    value = "NULL" if row is None else field_sql.value_expr(row[0], "c")
    contact = conn.execute(f"SELECT {value} AS tz, c.phone, c.located_timezone FROM contacts c WHERE c.id = ?",
                           (contact_id,)).fetchone()
    if contact is not None:
        if canonical_zone(contact["tz"]):
            return canonical_zone(contact["tz"]), "field"  # type: ignore[return-value]
        found = phone_zone(contact["phone"], at) if contact["phone"] else None
        if found is not None:
            return found, "phone"
        if canonical_zone(contact["located_timezone"]):
            return canonical_zone(contact["located_timezone"]), "location"  # type: ignore[return-value]
    return workspace_timezone(conn, workspace_id), "workspace"
