"""The time zone columns a contact keeps (schema step 25), and the SET terms of the writers
that keep them (zones.py reads them over an audience).

Each contact keeps what does not depend on the moment of sending: the `timezone` field's
value (`zone_field`) and the id of its phone's list of zones in phone_zone_sets
(`zone_phone_set`, found by phone_zones.PhoneSets). They are kept at write time: every
writer of a contact's phone or data (the import's batches, create, upsert, an automation's
field set) writes them in the same statement (`FRESH` / `KEEP` flip `zone_cached` between 1
and 2). `zone_cached` NULL means stale: a write of phone or data that leaves `zone_cached` as
it was (a writer that does not keep the columns) clears it (the trigger), and so do
databases from before step 25; `Zones.resolve()` then fills them (the safety net).

The `location` source is kept too: `located_timezone`, the zone of the city of the
contact's last human open or click (`remember_location`).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from marketing_cli.services.contacts.values import TIMEZONE_TAG
from marketing_cli.storage.db import transaction

# SET terms of a write that keeps a contact's zone columns (schema step 25): FRESH when the
# statement writes both (the contact is current whatever it was), KEEP when it writes data
# that cannot change them (current stays current, stale stays stale). Either changes
# zone_cached, so the stale trigger leaves the row alone.
FRESH = "CASE {c}.zone_cached WHEN 1 THEN 2 ELSE 1 END"
KEEP = "CASE {c}.zone_cached WHEN 1 THEN 2 WHEN 2 THEN 1 END"


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


def remember_location(conn: sqlite3.Connection, contact_id: str | None, zone: str | None) -> None:
    """A human open or click located in `zone` (GeoLite2-City): the contact's `location` zone."""
    if contact_id is None or zone is None:
        return
    with transaction(conn):
        conn.execute("UPDATE contacts SET located_timezone = ? WHERE id = ? AND located_timezone IS NOT ?",
                     (zone, contact_id, zone))
