"""A contact's time zone, resolved in SQL over a whole audience, and the plan of a
local-time send (docs/campaigns.md "Local-time delivery").

A contact's zone comes from the first of these that answers, and the answer records which:

    field       the built-in `timezone` field (an IANA name, checked when written)
    phone       the zone of the phone number (phonenumbers.timezone), only when every zone
                phonenumbers gives for it has the same UTC offset at the moment of sending
                (+1 212: New York; +1 208: Boise and Los Angeles differ, no answer; +1 800:
                42 zones; `Etc/Unknown`: none)
    location    the zone of the city of the contact's last human open or click
                (`contacts.located_timezone`, GeoLite2-City's location.time_zone)
    workspace   the workspace's own zone (`workspaces.timezone`, UTC unless set)

`Zones` puts that in SQL over the audience's own query (`contacts c`), so a snapshot of a
million recipients is one `INSERT ... SELECT` with no Python call and no JSON read per row.
Each contact keeps what does not depend on the moment of sending (schema step 25): the
field's value (`zone_field`) and the id of its phone's list of zones in phone_zone_sets
(`zone_phone_set`). They are kept at write time: every writer of a contact's phone or data
(the import's batches, create, upsert, an automation's field set) writes them in the same
statement (`PhoneSets` gives a number's list, one phonenumbers call per distinct prefix and
writer; `FRESH` / `KEEP` flip `zone_cached` between 1 and 2). `zone_cached` NULL means stale:
a write of phone or data that leaves `zone_cached` as it was (a writer that does not keep the
columns) clears it (the trigger), and so do databases from before step 25. That is the safety
net: `resolve()` fills every stale contact of the workspace in one UPDATE, then
checks each list of phone_zone_sets once for one offset at the sending instant (the `agree`
table). The audience query then reads the kept field value, the answer of the phone's list
(one integer-key join on that table) and the located zone as columns (`columns()`), and the
zone and its source are both read from those columns of it as a derived table (`select()`),
the workspace's zone a bound parameter.

The stale contacts' lists come from two small temporary tables filled once per number
prefix, as SMS pricing does (services/sms/pricing.py): phonenumbers' time zone data is keyed
by prefixes of up to nine digits, so each distinct first four digits (`+1208`, `+3361`) is
resolved once; where the data has longer prefixes below it (+1 208 201 is Denver alone), the
numbers under it are keyed by as many digits as the longest such prefix and each of those
keys is resolved once.
"""

from __future__ import annotations

import hashlib
import sqlite3
import uuid
from datetime import date, datetime, timedelta
from functools import lru_cache
from typing import Any, Self

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.localtime import canonical_zone, local_instant, offsets_agree
from marketing_cli.services.account.workspaces import workspace_timezone
from marketing_cli.services.contacts.segment_filters import Compiled
from marketing_cli.services.contacts.values import TIMEZONE_TAG
from marketing_cli.storage import field_sql
from marketing_cli.storage.db import transaction

SOURCES = ("field", "phone", "location", "workspace")
MISSED = ("next_day", "send_now", "skip")
COARSE = 5  # characters of a stored number keyed first: '+' and four digits
# SET terms of a write that keeps a contact's zone columns (schema step 25): FRESH when the
# statement writes both (the contact is current whatever it was), KEEP when it writes data
# that cannot change them (current stays current, stale stays stale). Either changes
# zone_cached, so the stale trigger leaves the row alone.
FRESH = "CASE {c}.zone_cached WHEN 1 THEN 2 ELSE 1 END"
KEEP = "CASE {c}.zone_cached WHEN 1 THEN 2 WHEN 2 THEN 1 END"
_SEEKS = 1_000  # index seeks for distinct keys allowed at least, before one pass over the numbers
_CHUNK = 5_000


@lru_cache(maxsize=1)
def _depths() -> dict[str, int]:
    """Four leading digits -> the longest prefix (in digits) of phonenumbers' time zone data
    below them, for the four-digit keys that have longer prefixes under them."""
    from phonenumbers.tzdata import TIMEZONE_DATA

    depths: dict[str, int] = {}
    for prefix in TIMEZONE_DATA:
        if len(prefix) > COARSE - 1:
            head = prefix[:COARSE - 1]
            depths[head] = max(depths.get(head, 0), len(prefix))
    return depths


def phone_zone(number: str, at: datetime) -> str | None:
    """The zone of one E.164 number at `at`, or None (several offsets, unknown, unparsable)."""
    names, _ = _phone_zones(number)
    return offsets_agree(names, at)


def _phone_zones(number: str) -> tuple[tuple[str, ...], bool]:
    """phonenumbers' zones of a number, and whether they came from its geographic prefix."""
    import phonenumbers
    from phonenumbers import timezone as phone_timezones

    try:
        parsed = phonenumbers.parse(number, None)
    except phonenumbers.NumberParseException:
        return (), False
    kind = phonenumbers.number_type(parsed)
    geographic = phonenumbers.is_number_type_geographical(kind, parsed.country_code)
    names = tuple(n for n in phone_timezones.time_zones_for_number(parsed) if n != "Etc/Unknown")
    return names, geographic


def _prefix_zones(key: str) -> tuple[str, ...]:
    """The zones of the longest prefix of `key` ('+1208201') in phonenumbers' time zone data:
    what phonenumbers answers for a geographic number (timezone.time_zones_for_geographical_number)."""
    return longest_prefix_zones(key.lstrip("+"))[1]


def longest_prefix_zones(digits: str) -> tuple[int, tuple[str, ...]]:
    """(its length, its zones without `Etc/Unknown`) of the longest prefix of `digits` in
    phonenumbers' time zone data; (0, ()) when none is. SMS quiet hours (sms/places.py) read
    a number's candidate zones through it too."""
    from phonenumbers.tzdata import TIMEZONE_DATA

    for size in range(len(digits), 0, -1):
        names = TIMEZONE_DATA.get(digits[:size])
        if names is not None:
            return size, tuple(n for n in names if n != "Etc/Unknown")
    return 0, ()


def set_id(names: tuple[str, ...]) -> int:
    """phone_zone_sets' id of a list of zones: 56 bits of the BLAKE2b of its text, the same on
    every database (so `mkt db copy` can carry contacts' ids of lists between them)."""
    digest = hashlib.blake2b(" ".join(names).encode(), digest_size=7).digest()
    return int.from_bytes(digest, "big")


def store_sets(conn: sqlite3.Connection, lists: set[tuple[str, ...]]) -> dict[tuple[str, ...], int]:
    """Each non-empty list's id, its row of phone_zone_sets added when new."""
    ids = {names: set_id(names) for names in lists if names}
    conn.executemany("INSERT INTO phone_zone_sets (id, zones) VALUES (?, ?) ON CONFLICT (id) DO NOTHING",
                     [(i, " ".join(names)) for names, i in ids.items()])
    return ids


class PhoneSets:
    """The id of a number's list of candidate zones, for a writer of contacts: one lookup per
    distinct key (the four-digit prefix, or under the prefixes that have longer ones the finer
    key), with the rules of `Zones._prefixes`: a four-digit key's first number stands for it
    (phonenumbers parses it); under a four-digit key whose first number is geographic (all of
    NANP), a finer key's zones are its longest prefix's in phonenumbers' data, read without
    parsing. One per import (or per write); `batch()` at the start of each write transaction,
    so the rows of phone_zone_sets it refers to are written in it."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        # four-digit key -> the finer key's digits (0: none), negative when its numbers are
        # not geographic (each finer key then parses its first number)
        self.depth: dict[str, int] = {}
        self.keys: dict[str, int | None] = {}  # key -> the list's id (None: no zone)
        self.lists: dict[int, tuple[str, ...]] = {}
        self.stored: set[int] = set()  # ids whose row this transaction has written

    def batch(self) -> None:
        self.stored.clear()

    def __call__(self, phone: str | None) -> int | None:
        if phone is None:
            return None
        head = phone[:COARSE]
        depth = self.depth.get(head)
        if depth is None:
            depth = self._head(head, phone)
        key = phone[:abs(depth) + 1] if depth else head
        found = self.keys[key] if key in self.keys else self._resolve(key, phone, depth)
        if found is not None and found not in self.stored:
            store_sets(self.conn, {self.lists[found]})
            self.stored.add(found)
        return found

    def _head(self, head: str, phone: str) -> int:
        depth = _depths().get(head[1:], 0)
        if depth:
            names, geographic = _phone_zones(phone)
            depth = depth if geographic else -depth
        self.depth[head] = depth
        return depth

    def _resolve(self, key: str, phone: str, depth: int) -> int | None:
        names = _prefix_zones(key) if depth > 0 else _phone_zones(phone)[0]
        found = set_id(names) if names else None
        if found is not None:
            self.lists[found] = names
        self.keys[key] = found
        return found


def field_value(data: dict[str, Any], field_id: int | None) -> Any:
    """A contact's kept `timezone` field value (zone_field) from its data, as json_extract reads it."""
    if field_id is None:
        return None
    return _kept_text(data.get(str(field_id)))


def _kept_text(value: Any) -> str | None:
    return value if value is None or isinstance(value, str) else str(value)


def kept_after_field_set(merge_tag: str, value: Any) -> tuple[str, tuple[Any, ...]]:
    """(SET terms, their parameters) that keep a contact's zone columns when one field's value
    is set (None: removed) by an UPDATE of `contacts`: the `timezone` field's value is the
    kept one; any other field's leaves them as they are."""
    keep = KEEP.format(c="contacts")
    if merge_tag != TIMEZONE_TAG:
        return f"zone_cached = {keep}", ()
    return f"zone_field = ?, zone_cached = {keep}", (_kept_text(value),)


def timezone_field(conn: sqlite3.Connection, workspace_id: int) -> int | None:
    """The id of the workspace's `timezone` field, or None."""
    row = conn.execute("SELECT id FROM fields WHERE workspace_id = ? AND merge_tag = ?",
                       (workspace_id, TIMEZONE_TAG)).fetchone()
    return row[0] if row is not None else None


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
        conn, depths = self.conn, _depths()
        coarse = self._seek_keys("", "\U0010ffff", lambda phone: phone[:COARSE], None)
        found: list[tuple[str, str, tuple[str, ...], int | None]] = []
        geographic: set[str] = set()
        for key, phone in coarse:
            depth = depths.get(key[1:])
            names, on_prefix = _phone_zones(phone)
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
            lists = [(_prefix_zones(key) if key[:COARSE] in geographic else _phone_zones(phone)[0], key)
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


# ---------------------------------------------------------------------- local-time plans

def check_missed(value: Any) -> str:
    """'next_day' (the default), 'send_now' or 'skip'; also accepts next-day / now."""
    if value is None:
        return "next_day"
    text = value.strip().lower().replace("-", "_") if isinstance(value, str) else None
    text = {"now": "send_now"}.get(text or "", text)
    if text not in MISSED:
        raise ValueError(f"local_time_missed must be one of next_day, send_now or skip, not '{value}'.")
    return text


def due_at(zone: str, day: date, hhmm: str, missed: str, now: datetime) -> str | None:
    """When a recipient in `zone` gets a message read at `hhmm` on `day`, in UTC; None: skipped.

    A time already passed when the zone is reached is the next day's (next_day), now
    (send_now), or not at all (skip)."""
    name = canonical_zone(zone) or "UTC"
    moment = local_instant(day, hhmm, name)
    if moment < now:
        if missed == "skip":
            return None
        moment = now if missed == "send_now" else local_instant(day + timedelta(days=1), hhmm, name)
    return clock.format_ts(moment)


def fill_due_table(conn: sqlite3.Connection, table: str, zones: list[str], day: date, hhmm: str, missed: str,
                   now: datetime) -> None:
    """A temporary table `table` (zone PRIMARY KEY, due_at): each zone's instant, once per zone."""
    conn.execute(f"CREATE TEMP TABLE {table} (zone TEXT PRIMARY KEY, due_at TEXT) WITHOUT ROWID")
    conn.executemany(f"INSERT INTO {table} (zone, due_at) VALUES (?, ?)",
                     [(z, due_at(z, day, hhmm, missed, now)) for z in zones])


def zone_plan(conn: sqlite3.Connection, workspace_id: int, audience: Any, channel: str, day: date, hhmm: str,
              missed: str, now: datetime) -> list[dict[str, Any]]:
    """The count per zone of a campaign's audience on `channel`, with each zone's instant (null:
    skipped), earliest first; the preview a person sees before confirming."""
    from marketing_cli.services.contacts.audience import resolve_audience

    with Zones(conn, workspace_id, local_instant(day, hhmm, "UTC")) as zones:
        zones.resolve()
        query = resolve_audience(conn, workspace_id, audience, channel, zones.columns("c"), zones.join("c"))
        sql, params = zones.select(query, "1")
        rows = conn.execute(f"SELECT zone, count(*) AS n FROM ({sql}) AS z GROUP BY zone", params).fetchall()
    plan = [{"zone": r["zone"], "recipients": r["n"], "send_at": due_at(r["zone"], day, hhmm, missed, now)}
            for r in rows]
    return sorted(plan, key=lambda p: (p["send_at"] is None, p["send_at"] or "", p["zone"]))


def remember_location(conn: sqlite3.Connection, contact_id: str | None, zone: str | None) -> None:
    """A human open or click located in `zone` (GeoLite2-City): the contact's `location` zone."""
    if contact_id is None or zone is None:
        return
    with transaction(conn):
        conn.execute("UPDATE contacts SET located_timezone = ? WHERE id = ? AND located_timezone IS NOT ?",
                     (zone, contact_id, zone))


# ---------------------------------------------------------------------- the schedule members

LOCAL_TIME_MEMBERS = ("local_time", "local_time_missed")


def read_local_time(conn: sqlite3.Connection, workspace_id: int, body: dict[str, Any],
                    scheduled_at: str | None) -> dict[str, str] | None:
    """The schedule call's local-time members, checked: {time, date, missed, starts_at}, or
    None without `local_time`. The date is the scheduled day (`scheduled_at`, else today) in
    the workspace's zone; sending starts when the first zone on Earth (UTC+14) reaches the
    time that day, or now if that has passed. 400 with a message naming the member."""
    from marketing_cli.kernel.localtime import first_instant, local_date, parse_local_time

    raw, missed_raw = body.get("local_time"), body.get("local_time_missed")
    if raw is None:
        if missed_raw is not None:
            raise MktError(400, "local_time_missed needs local_time.")
        return None
    try:
        hhmm = parse_local_time(raw)
        missed = check_missed(missed_raw)
    except ValueError as exc:
        raise MktError(400, str(exc)) from None
    now = clock.utcnow()
    day = local_date(clock.parse_ts(scheduled_at) if scheduled_at else now, workspace_timezone(conn, workspace_id))
    starts = max(now, first_instant(day, hhmm))
    return {"time": hhmm, "date": day.isoformat(), "missed": missed, "starts_at": clock.format_ts(starts)}


def local_time_view(row: sqlite3.Row, waiting: int | None) -> dict[str, Any] | None:
    """The `local_time` member of a campaign (email or SMS) scheduled in its recipients' time."""
    if not row["local_time"]:
        return None
    return {"time": row["local_time"], "date": row["local_date"], "missed": row["local_time_missed"],
            "waiting": waiting, "skipped": row["local_time_skipped"]}


def plan_day(row: sqlite3.Row) -> tuple[date, str, str, datetime]:
    """(date, 'HH:MM', missed, planned start) of a local-time campaign row. A time is missed
    when it came before the planned start: a runner that starts late (cron each minute)
    sends the zones that came due meanwhile at once, never a day late."""
    start = clock.parse_ts(row["local_starts_at"]) if row["local_starts_at"] else clock.utcnow()
    return date.fromisoformat(row["local_date"]), row["local_time"], row["local_time_missed"] or "next_day", start


def schedule_preview(conn: sqlite3.Connection, workspace_id: int, audience: Any, channel: str,
                     scheduled_at: str | None, local: dict[str, str] | None) -> dict[str, Any]:
    """The schedule preview of both channels: the instant understood, the recipients of the
    campaign's `audience` on `channel` and, for a local-time send, the count per zone with
    each zone's instant (null: skipped)."""
    from marketing_cli.services.contacts.audience import count_audience

    answer: dict[str, Any] = {"scheduled_at": scheduled_at, "local_time": local}
    if local is None:
        answer["recipients"] = count_audience(conn, workspace_id, audience, channel)
        answer["zones"] = None
        return answer
    plan = zone_plan(conn, workspace_id, audience, channel, date.fromisoformat(local["date"]), local["time"],
                     local["missed"], clock.parse_ts(local["starts_at"]))
    answer["recipients"] = sum(p["recipients"] for p in plan)
    answer["zones"] = plan
    return answer
