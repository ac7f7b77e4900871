"""`mkt db copy` of a workspace of 1M contacts, both ways (issue 22: "moves a 1M-contact workspace and verifies it").

    python bench/run.py --only db_copy [--quick]     (--quick: 20,000 contacts)

Rows (the whole copy: check pass, staging load, publish, verification; a throwaway PostgreSQL
server is started, as the tests do):
- SQLite file -> PostgreSQL against a bare COPY of the same contacts rows, read from the same
  file, into an empty contacts table of the same database (what the copy's load cannot beat).
- PostgreSQL -> a new SQLite file against a bare executemany INSERT of the same rows into a new
  file (the reverse's floor).
Needs initdb and pg_ctl; without them the module has no rows and says so.
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import postgres_server, row  # noqa: E402

COLUMNS = "id, workspace_id, email, status, data, created_at, updated_at"


def _source(path: Path, n: int) -> int:
    from marketing_cli.services.account import workspaces
    from marketing_cli.storage import db

    conn = db.connect(path)
    ws = workspaces.create_workspace(conn, "Bench")["workspace"]["id"]
    times = ("2024-01-02T03:04:05Z", "2024-01-02 03:04:05", "2024-01-02T03:04:05.123456+00:00")
    conn.execute("BEGIN")
    conn.executemany(f"INSERT INTO contacts ({COLUMNS}) VALUES (?, ?, ?, 'SUBSCRIBED', ?, ?, ?)",
                     ((f"{i:024x}", ws, f"person{i}@example.com", '{"1": "Ann"}', times[i % 3], times[(i + 1) % 3])
                      for i in range(n)))
    conn.execute("COMMIT")
    conn.close()
    return ws


def _bare_copy(source: Path, url: str) -> float:
    import psycopg

    start = time.perf_counter()
    src = sqlite3.connect(source)
    every = ", ".join(r[1] for r in src.execute("PRAGMA table_info(contacts)"))
    with psycopg.connect(url, autocommit=True) as conn:
        with conn.transaction():
            conn.execute("CREATE TEMP TABLE bare (LIKE contacts)")
            with conn.cursor().copy(f"COPY bare ({every}) FROM STDIN") as copy:
                for values in src.execute(f"SELECT {every} FROM contacts"):
                    copy.write_row(values)
    src.close()
    return time.perf_counter() - start


def _bare_insert(url: str, target: Path) -> float:
    import psycopg

    from marketing_cli.storage import db

    db.connect(target).close()
    start = time.perf_counter()
    out = sqlite3.connect(target, isolation_level=None)
    every = [r[1] for r in out.execute("PRAGMA table_info(contacts)")]
    out.execute("INSERT INTO workspaces (id, name, created_at) VALUES (1, 'Bare', '2024-01-01T00:00:00Z')")
    with psycopg.connect(url) as conn:
        rows = conn.execute(f"SELECT {', '.join(every)} FROM contacts").fetchall()
    out.execute("BEGIN")
    out.executemany(f"INSERT INTO contacts ({', '.join(every)}) VALUES ({', '.join('?' * len(every))})", rows)
    out.execute("ROLLBACK")
    out.close()
    return time.perf_counter() - start


def run(quick: bool) -> list[dict]:
    server = postgres_server("db_copy")
    if server is None:
        return []
    from marketing_cli.storage import copy as dbcopy

    n = 20_000 if quick else 1_000_000
    rows: list[dict] = []
    try:
        with tempfile.TemporaryDirectory(prefix="mkt-bench-copy-") as tmp:
            source = Path(tmp) / "source.db"
            ws = _source(source, n)
            url = server.fresh()
            start = time.perf_counter()
            copied = dbcopy.copy(source, url, workspace_ids=[ws], fixes={})
            forward = time.perf_counter() - start
            assert copied["rows"] >= n
            bare = _bare_copy(source, server.fresh())
            rows.append(row(f"db copy SQLite -> PostgreSQL, {n:,} contacts (checked, staged, verified)", forward, "s",
                            "bare COPY of the contacts rows", bare, forward / bare, "informational (issue: moves and "
                            "verifies a 1M-contact workspace)", True))
            back = Path(tmp) / "back.db"
            start = time.perf_counter()
            dbcopy.copy(url, str(back), workspace_ids=[ws], fixes={})
            reverse = time.perf_counter() - start
            bare = _bare_insert(url, Path(tmp) / "bare.db")
            rows.append(row(f"db copy PostgreSQL -> SQLite, {n:,} contacts (checked, verified)", reverse, "s",
                            "bare executemany INSERT of the contacts rows", bare, reverse / bare, "informational",
                            True))
    finally:
        server.stop()
    return rows
