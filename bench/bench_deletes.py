"""Deleting a tag and a field on many contacts: 50,000 (--quick) or 500,000 (full), SQLite.

One temporary database per run; its contacts are written set-based (one INSERT ... SELECT).
Each repetition tags every contact with a fresh tag (and gives every contact a value of a fresh
field, with its index), untimed, then times:

- `services.deletion.audience.remove_tag` (find the tag, the in-use checks over campaigns,
  SMS campaigns, flows and segments, one DELETE of its contact_tags rows, the tag's row, all in
  one transaction) against a bare `DELETE FROM contact_tags WHERE tag_id = ?` plus the tag's
  row in one transaction. Target: ratio <= 1.5 (the checks are a few indexed reads).
- `remove_field` (the checks, including the merge-tag search of templates, campaigns and
  flows, one UPDATE of every contact's data through the field's partial index, the index
  dropped) against the bare UPDATE with json_remove and the DROP INDEX. Target: ratio <= 1.5.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import row  # noqa: E402

from marketing_cli.kernel import clock  # noqa: E402
from marketing_cli.storage import field_sql  # noqa: E402
from marketing_cli.storage.db import connect, transaction  # noqa: E402

INSERT_CONTACTS = (
    "INSERT INTO contacts (id, workspace_id, email, status, data, created_at, updated_at)"
    " WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < :n)"
    " SELECT printf('%024x', i), :ws, 'person' || i || '@example.com', 'SUBSCRIBED', '{}', :now, :now FROM seq")


def _timed(fn) -> float:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def _tag_everyone(conn, ws: int, name: str) -> int:  # type: ignore[no-untyped-def]
    with transaction(conn):
        tag = conn.execute("INSERT INTO tags (workspace_id, name, created_at) VALUES (?, ?, ?)",
                           (ws, name, clock.now())).lastrowid
        conn.execute("INSERT INTO contact_tags (contact_id, tag_id) SELECT id, ? FROM contacts WHERE workspace_id = ?",
                     (tag, ws))
    return tag


def _field_everyone(conn, ws: int, merge_tag: str) -> int:  # type: ignore[no-untyped-def]
    from marketing_cli.services.contacts import fields

    field = fields.create_field(conn, ws, {"label": merge_tag, "merge_tag": merge_tag, "type": "TEXT"})["id"]
    with transaction(conn):
        conn.execute(f"UPDATE contacts SET data = json_set(data, {field_sql.path(field)}, 'x') WHERE workspace_id = ?",
                     (ws,))
    return field


def _bare_tag(conn, tag: int) -> None:  # type: ignore[no-untyped-def]
    with transaction(conn):
        conn.execute("DELETE FROM contact_tags WHERE tag_id = ?", (tag,))
        conn.execute("DELETE FROM tags WHERE id = ?", (tag,))


def _bare_field(conn, ws: int, field: int) -> None:  # type: ignore[no-untyped-def]
    with transaction(conn):
        conn.execute(f"UPDATE contacts SET data = json_remove(data, {field_sql.path(field)}) WHERE workspace_id = ?"
                     f" AND {field_sql.value_expr(field)} IS NOT NULL", (ws,))
        conn.execute(f"DROP INDEX {field_sql.index_name(field)}")
        conn.execute("DELETE FROM fields WHERE id = ?", (field,))


def run(quick: bool) -> list[dict]:
    from statistics import median

    from marketing_cli.services.account import workspaces
    from marketing_cli.services.deletion import audience

    n = 50_000 if quick else 500_000
    repeat = 3
    label = f"{n:,} contacts"
    with tempfile.TemporaryDirectory() as tmp:
        conn = connect(Path(tmp) / "bench.db")
        ws = workspaces.create_workspace(conn, "Bench")["workspace"]["id"]
        with transaction(conn):
            conn.execute(INSERT_CONTACTS, {"n": n, "ws": ws, "now": clock.now()})
        conn.execute("ANALYZE")
        t_tag, t_bare_tag, t_field, t_bare_field = [], [], [], []
        for i in range(repeat):
            tag = _tag_everyone(conn, ws, f"bare{i}")
            t_bare_tag.append(_timed(lambda: _bare_tag(conn, tag)))
            tag = _tag_everyone(conn, ws, f"mkt{i}")
            t_tag.append(_timed(lambda: audience.remove_tag(conn, ws, tag)))
            field = _field_everyone(conn, ws, f"bare_{'abcdefgh'[i]}")
            t_bare_field.append(_timed(lambda: _bare_field(conn, ws, field)))
            field = _field_everyone(conn, ws, f"mkt_{'abcdefgh'[i]}")
            t_field.append(_timed(lambda: audience.remove_field(conn, ws, field)))
        conn.close()
    rows = []
    for name, mine, bare, baseline in (
            (f"delete a tag on {label}", t_tag, t_bare_tag, "bare DELETE of its contact_tags rows"),
            (f"delete a field on {label}", t_field, t_bare_field, "bare UPDATE json_remove + DROP INDEX")):
        value, base = median(mine), median(bare)
        ratio = value / base
        rows.append(row(name, value * 1000, "ms", baseline, base * 1000, ratio, "<= 1.5", ratio <= 1.5))
    return rows


if __name__ == "__main__":
    for r in run("--quick" in sys.argv):
        print(r)
