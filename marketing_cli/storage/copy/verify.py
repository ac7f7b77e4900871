"""Verifying: the checksums of the rows, computed by the check pass over the source (check.py) and
again over the target inside the publish's transaction (publish.py), before it commits.

Each row's values in one canonical text form (the repr of the tuple of its values: both engines
return int, str, bytes or None here, so the text is the same whichever read it), its md5 as a
128-bit number, summed mod 2^128: the same figure on both engines, whatever order each returns
the rows in. A table whose count or checksum differs fails the publish: nothing is published.
The instance-wide rows (merged, not copied) are checked one by one instead (`verify_instance`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.storage.copy.tables import Table

MOD = 1 << 128


def row_digest(row: Sequence[Any]) -> int:
    """A row's md5 as a number: of the repr of its values (int, str, bytes or None on both engines, so
    the same text whichever returned it; a str's repr escapes what it must, an undecodable byte included)."""
    return int.from_bytes(hashlib.md5(repr(tuple(row)).encode("utf-8", "surrogateescape")).digest(), "big")


def hexsum(total: int) -> str:
    """A sum of row digests as the report shows it: 32 hex digits, mod 2^128."""
    return f"{total % MOD:032x}"


def compare(table: Table, source: tuple[int, str], target: tuple[int, str]) -> None:
    """(count, checksum) of a table's copied rows in the source and in the target: equal, or the publish fails."""
    if tuple(source) != tuple(target):
        raise MktError(500, f"Verification failed for {table.name}: the source has {source[0]} row(s), checksum "
                            f"{source[1]}; the target {target[0]}, checksum {target[1]}. Nothing was published.")


def verify_instance(table: Table, rows: list[tuple[Any, ...]], fetch: Callable[..., Any], notes: list[str]) -> None:
    """Every instance-wide row of the source is in the target (`fetch(table, key)`); one the target kept
    in its own version is a note, not a failure."""
    missing = differ = 0
    for row in rows:
        got = fetch(table, table.key_of(row))
        if got is None:
            missing += 1
        elif row_digest(got) != row_digest(row):
            differ += 1
    if missing:
        raise MktError(500, f"Verification failed for {table.name}: {missing} instance row(s) are missing in the "
                            "target. Nothing was published.")
    if differ:
        notes.append(f"{table.name}: the target kept its own version of {differ} row(s)")


def verify(tables: list[Table], instance_rows: dict[str, list[tuple[Any, ...]]], sums: dict[str, tuple[int, str]],
           notes: list[str], copied: Callable[[Table], Iterable[Sequence[Any]]],
           instance_row: Callable[..., Any]) -> int:
    """Each table's rows in the target (`copied(table)`: the copy's rows as published) against the source's
    (count, checksum) in `sums`, the instance-wide rows one by one; the number of tables verified."""
    verified = 0
    for table in tables:
        if table.instance:
            verify_instance(table, instance_rows.get(table.name, []), instance_row, notes)
            continue
        total, count = 0, 0
        for row in copied(table):
            total += row_digest(row)
            count += 1
        compare(table, sums[table.name], (count, hexsum(total)))
        verified += 1
    return verified
