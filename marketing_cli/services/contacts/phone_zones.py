"""A phone number's candidate time zones (phonenumbers' data) and the ids of their lists in
phone_zone_sets: the `phone` source of a contact's zone (zones.py).

The zone of a phone number is phonenumbers.timezone's, only when every zone it gives for
the number has the same UTC offset at the moment of sending (+1 212: New York; +1 208: Boise
and Los Angeles differ, no answer; +1 800: 42 zones; `Etc/Unknown`: none). What does not
depend on that moment, the number's list of candidate zones, is kept on the contact as the
id of a row of phone_zone_sets (`zone_phone_set`, schema step 25): `PhoneSets` finds it for
the writers of contacts, one phonenumbers call per distinct prefix and writer.

phonenumbers' time zone data is keyed by prefixes of up to nine digits, so each distinct
first four digits (`+1208`, `+3361`) is resolved once; where the data has longer prefixes
below it (+1 208 201 is Denver alone), the numbers under it are keyed by as many digits as
the longest such prefix (`prefix_depths`) and each of those keys is resolved once.
"""

from __future__ import annotations

import hashlib
import sqlite3
from datetime import datetime
from functools import lru_cache

from marketing_cli.kernel.localtime import offsets_agree

COARSE = 5  # characters of a stored number keyed first: '+' and four digits


@lru_cache(maxsize=1)
def prefix_depths() -> dict[str, int]:
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
    names, _ = number_zones(number)
    return offsets_agree(names, at)


def number_zones(number: str) -> tuple[tuple[str, ...], bool]:
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


def prefix_zones(key: str) -> tuple[str, ...]:
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
    key), with the rules of `Zones._prefixes` (zones.py): a four-digit key's first number
    stands for it (phonenumbers parses it); under a four-digit key whose first number is
    geographic (all of NANP), a finer key's zones are its longest prefix's in phonenumbers'
    data, read without parsing. One per import (or per write); `batch()` at the start of each write transaction,
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
        depth = prefix_depths().get(head[1:], 0)
        if depth:
            names, geographic = number_zones(phone)
            depth = depth if geographic else -depth
        self.depth[head] = depth
        return depth

    def _resolve(self, key: str, phone: str, depth: int) -> int | None:
        names = prefix_zones(key) if depth > 0 else number_zones(phone)[0]
        found = set_id(names) if names else None
        if found is not None:
            self.lists[found] = names
        self.keys[key] = found
        return found
