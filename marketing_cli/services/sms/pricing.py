"""Where an SMS goes and what it costs: a number's country, the workspace's price per
segment, and `Pricing`, the SQL twin that prices a whole audience without a Python call
per recipient (docs/sms.md "Prices and charges")."""

from __future__ import annotations

import sqlite3
import uuid
from decimal import Decimal
from functools import lru_cache
from typing import Any, Self

from marketing_cli.storage import dialect


def _parse_country(number: str) -> str | None:
    import phonenumbers

    try:
        parsed = phonenumbers.parse(number, None)
    except phonenumbers.NumberParseException:
        return None
    if not phonenumbers.is_valid_number(parsed):
        return None
    return phonenumbers.region_code_for_number(parsed)


@lru_cache(maxsize=1)
def _single_region_codes() -> dict[str, str]:
    """Calling code ('+33') -> its one region, for the codes that belong to one region only."""
    from phonenumbers import COUNTRY_CODE_TO_REGION_CODE

    return {f"+{code}": regions[0] for code, regions in COUNTRY_CODE_TO_REGION_CODE.items()
            if len(regions) == 1 and regions[0] != "001"}


# The SQL twin of country_of's memo: the characters of a stored number that fix its country
# (the area code under +1, else the first 10). Expansion and the estimate resolve each
# distinct key once in Python and join on it, instead of calling Python per recipient.
PHONE_KEY = "CASE WHEN substr({number}, 1, 2) = '+1' THEN substr({number}, 1, 5) ELSE substr({number}, 1, 10) END"
_KEYS_CHUNK = 10_000
KEY_SEEKS = 1_000  # seeks for distinct prefixes allowed at least, before one pass over the snapshot


def phone_key(number: str) -> str:
    """PHONE_KEY in Python (the same characters)."""
    return number[:5] if number.startswith("+1") else number[:10]


_PREFIXES: dict[str, str] = {}  # '+1415' -> 'US', '+447911123' -> 'GG': learnt from valid numbers
_MAX_PREFIXES = 100_000


def country_of(number: str | None) -> str | None:
    """The ISO country of a stored E.164 number (contacts' numbers are validated on input).

    A calling code of one region answers at once. A shared calling code (+1, +44 with
    Guernsey, +7, +39 ...) is told apart by the number's leading digits: phonenumbers
    parses the first number seen, and the answer is memoised for its NANP area code (+1:
    an area code belongs to one country) or for its first 7 national digits (the finest
    block numbering plans allocate), so a million recipients cost a few thousand parses.
    """
    if not number or number[0] != "+":
        return None
    region = _PREFIXES.get(number[:5]) or _PREFIXES.get(number[:10])  # seen before: the common case
    if region is not None:
        return region
    single = _single_region_codes()
    for size in (2, 3, 4):
        region = single.get(number[:size])
        if region is not None:
            _remember(number[:5], region)  # 5 characters hold any calling code whole
            return region
    region = _parse_country(number)
    if region is not None:
        _remember(phone_key(number), region)
    return region


def _remember(key: str, region: str) -> None:
    if len(_PREFIXES) >= _MAX_PREFIXES:
        _PREFIXES.clear()
    _PREFIXES[key] = region


class Pricing:
    """A number's country and price per segment in SQL, for one workspace (a context manager).

    Two temporary tables: the workspace's prices, and each distinct PHONE_KEY with one number
    of it as its example, that number's country and its price (NULL: no price there), each
    resolved once in Python (`resolve`). A query joins `join(number)` and reads
    `country(number)` and `units(number)`; a number whose prefix has no country there (it
    changed since, or its prefix's example did not parse) is resolved on its own: by a Python
    function that SQL calls (SQLite), else from a third table that `resolve` fills with each
    such number (PostgreSQL, where SQL cannot call Python).
    """

    def __init__(self, conn: sqlite3.Connection, workspace_id: int, prices: dict[str, int]) -> None:
        self.conn, self.workspace_id, self.prices = conn, workspace_id, prices
        suffix = uuid.uuid4().hex  # our own names, never user text
        self.keys, self.price_table = f"sms_keys_{suffix}", f"sms_prices_{suffix}"
        self.numbers = f"sms_numbers_{suffix}"
        self.python = dialect.sms_python_in_sql(conn)
        if self.python:
            conn.create_function("mkt_sms_country", 1, country_of, deterministic=True)

    def __enter__(self) -> Self:
        keyed, work = dialect.sms_keyed_table(self.conn), dialect.sms_work_table(self.conn)
        self.conn.execute(f"CREATE {work} {self.keys} (key TEXT PRIMARY KEY, phone TEXT NOT NULL, country TEXT,"
                          f" units INTEGER){keyed}")
        self.conn.execute(f"CREATE {work} {self.price_table} (country TEXT PRIMARY KEY, units INTEGER NOT NULL)"
                          f"{keyed}")
        if not self.python:
            self.conn.execute(f"CREATE {work} {self.numbers} (phone TEXT PRIMARY KEY, country TEXT, units INTEGER)")
        self.conn.executemany(f"INSERT INTO {self.price_table} VALUES (?, ?)", self.prices.items())
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        for table in (self.keys, self.price_table) if self.python else (self.keys, self.price_table, self.numbers):
            try:
                self.conn.execute(f"DROP TABLE IF EXISTS {table}")
            except sqlite3.Error:
                if kind is None:
                    raise
                # The statement that failed aborted PostgreSQL's transaction (its rollback drops
                # the tables made in it): the first error is the one to report.

    def resolve(self, numbers: str, params: Any = (), size: int = 0) -> None:
        """Fill the keys table for the numbers that the SELECT `numbers` yields (one column).

        The workspace's numbers are indexed (contacts_phone), so its distinct keys are found by
        one seek each past the last key: a few thousand seeks for most workspaces instead of a
        pass over the numbers (0.4 s at 1,000,000). Keys of numbers outside them are harmless.
        Past max(KEY_SEEKS, size // 50) seeks (numbers spread over many prefixes), the seeks
        stop and one pass over `numbers` finds the rest. Python sees each key once, in chunks:
        memory stays flat.
        """
        conn, keys = self.conn, self.keys
        budget = max(KEY_SEEKS, size // 50)
        found = self._seek_keys(budget)
        conn.executemany(f"INSERT OR IGNORE INTO {keys} (key, phone) VALUES (?, ?)", found)
        if len(found) >= budget:
            conn.execute(f"WITH n(phone) AS ({numbers}) INSERT INTO {keys} (key, phone)"
                         f" SELECT {PHONE_KEY.format(number='n.phone')}, n.phone FROM n WHERE n.phone IS NOT NULL"
                         " ON CONFLICT DO NOTHING",
                         params)
        after = ""
        while True:
            chunk = conn.execute(f"SELECT key, phone FROM {keys} WHERE key > ? ORDER BY key LIMIT {_KEYS_CHUNK}",
                                 (after,)).fetchall()
            if not chunk:
                break
            updates = []
            for key, phone in chunk:
                country = country_of(phone)
                updates.append((country, self.prices.get(country or ""), key))
            conn.executemany(f"UPDATE {keys} SET country = ?, units = ? WHERE key = ?", updates)
            after = chunk[-1][0]
        self.resolve_numbers(numbers, params)

    def _seek_keys(self, budget: int) -> list[tuple[str, str]]:
        """Up to `budget` (key, example number) of the workspace's numbers, one seek past each key.
        SQLite seeks from here (a call in this process); PostgreSQL in one recursive statement,
        where a round trip per seek cost 0.5-1.1 s at 1,000,000 recipients (1,111 keys)."""
        conn, found, after = self.conn, [], ""
        if dialect.postgresql(conn):
            past = PHONE_KEY.format(number="s.phone") + " || chr(1114111)"  # U+10FFFF, as below
            rows = conn.execute(
                "WITH RECURSIVE s(phone) AS ((SELECT phone FROM contacts WHERE workspace_id = ? AND phone > ''"
                " ORDER BY phone LIMIT 1) UNION ALL SELECT (SELECT c.phone FROM contacts c WHERE c.workspace_id = ?"
                f" AND c.phone > {past} ORDER BY c.phone LIMIT 1) FROM s WHERE s.phone IS NOT NULL)"
                " SELECT phone FROM s WHERE phone IS NOT NULL LIMIT ?",
                (self.workspace_id, self.workspace_id, budget)).fetchall()
            return [(phone_key(phone), phone) for (phone,) in rows]
        while len(found) < budget:
            row = conn.execute("SELECT phone FROM contacts WHERE workspace_id = ? AND phone > ? ORDER BY phone"
                               " LIMIT 1", (self.workspace_id, after)).fetchone()
            if row is None:
                break
            key = phone_key(row[0])
            found.append((key, row[0]))
            after = key + "\U0010ffff"  # past every number that starts with the key
        return found

    def resolve_numbers(self, numbers: str, params: Any = (), *, all_keyed: bool = True) -> None:
        """Where SQL cannot call Python: each number of `numbers` whose prefix has no country (its
        example did not parse, or it is not in the keys table) resolved on its own, once.
        `all_keyed`: every number's prefix is in the keys table (`resolve` has just seen them)."""
        if self.python:
            return
        conn = self.conn
        if all_keyed and conn.execute(f"SELECT 1 FROM {self.keys} WHERE country IS NULL LIMIT 1").fetchone() is None:
            return  # every number of `numbers` has a prefix with a country
        rows = conn.execute(
            f"WITH n(phone) AS ({numbers}) SELECT DISTINCT n.phone FROM n LEFT JOIN {self.keys} k"
            f" ON k.key = {PHONE_KEY.format(number='n.phone')} WHERE n.phone IS NOT NULL AND k.country IS NULL"
            f" AND NOT EXISTS (SELECT 1 FROM {self.numbers} x WHERE x.phone = n.phone)", params).fetchall()
        resolved = [(phone, country_of(phone)) for (phone,) in rows]
        conn.executemany(f"INSERT INTO {self.numbers} (phone, country, units) VALUES (?, ?, ?)",
                         [(phone, country, self.prices.get(country or "")) for phone, country in resolved])

    def price_unresolved(self, campaign_id: str, batch: int) -> None:
        """Where SQL cannot call Python, after a batch's INSERT and before its charge: the batch's
        messages written without a country whose number was never resolved on its own (its
        prefix was not in the keys table: the contact's number changed since the snapshot)
        get the number's country and price, each number resolved once (kept in the numbers
        table). One indexed read of the batch's rows when there are none, where looking for
        them before the statement cost a join of the batch's contacts (0.8 s per 100,000
        recipients, measured)."""
        if self.python:
            return
        conn = self.conn
        rows = conn.execute(
            f"SELECT DISTINCT m.phone FROM sms_messages m WHERE m.campaign_id = ? AND m.batch = ? AND m.country IS NULL"
            f" AND NOT EXISTS (SELECT 1 FROM {self.numbers} x WHERE x.phone = m.phone)",
            (campaign_id, batch)).fetchall()
        if not rows:
            return
        resolved = [(phone, country_of(phone)) for (phone,) in rows]
        conn.executemany(f"INSERT INTO {self.numbers} (phone, country, units) VALUES (?, ?, ?)",
                         [(phone, country, self.prices.get(country or "")) for phone, country in resolved])
        conn.execute(
            f"UPDATE sms_messages SET country = x.country, price_units = COALESCE(x.units * sms_messages.segments, 0),"
            f" status = CASE WHEN x.units IS NULL THEN 'suppressed' ELSE 'pending' END FROM {self.numbers} x"
            " WHERE sms_messages.campaign_id = ? AND sms_messages.batch = ? AND sms_messages.country IS NULL"
            " AND x.phone = sms_messages.phone AND x.country IS NOT NULL", (campaign_id, batch))

    def join(self, number: str) -> str:
        return f" LEFT JOIN {self.keys} k ON k.key = {PHONE_KEY.format(number=number)}"

    def country(self, number: str) -> str:
        if not self.python:
            return (f"CASE WHEN k.country IS NULL THEN (SELECT x.country FROM {self.numbers} x WHERE x.phone = {number})"
                    " ELSE k.country END")
        return f"CASE WHEN k.country IS NULL THEN mkt_sms_country({number}) ELSE k.country END"

    def units(self, number: str) -> str:
        if not self.python:
            return (f"CASE WHEN k.country IS NULL THEN (SELECT x.units FROM {self.numbers} x WHERE x.phone = {number})"
                    " ELSE k.units END")
        return (f"CASE WHEN k.country IS NULL THEN (SELECT p.units FROM {self.price_table} p"
                f" WHERE p.country = mkt_sms_country({number})) ELSE k.units END")


def price_units(conn: sqlite3.Connection, workspace_id: int) -> dict[str, int]:
    """country -> the workspace's price per segment in 1/100000 USD (countries with a price only)."""
    from marketing_cli.services.account.rates import list_rates

    return {r["country_code"]: int(Decimal(r["price_per_segment"]).scaleb(5))
            for r in list_rates(conn, workspace_id)["rates"] if r["price_per_segment"] is not None}

