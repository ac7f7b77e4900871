"""The two engines' cost per statement, and what SQLAlchemy Core would add (docs/architecture.md, "Two engines").

    python bench/run.py --only engines [--quick]

Rows (each the median of several alternated rounds of N point reads by primary key, the
statement the API's hot paths are made of: one workspace row):
- mkt on SQLite (sqlite3, as the services run it) against SQLAlchemy Core 2 on the same file
  (a compiled `select()` and a `text()` statement): what choosing SQLAlchemy would cost SQLite.
- mkt on PostgreSQL (postgres.Connection: the statement translated once, then cached) against
  bare psycopg 3 on the same database: what the translation layer costs. Both without
  server-side prepared statements, which mkt does not use (they do not survive PgBouncer's
  transaction mode), and so does the SQLAlchemy row.
- SQLAlchemy Core on PostgreSQL (psycopg driver) against bare psycopg 3.
The PostgreSQL rows need initdb and pg_ctl (a throwaway server is started, as the tests do);
the SQLAlchemy rows need SQLAlchemy installed (it is not a dependency of mkt: this bench is
why). Missing either, those rows are left out and the run says so.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import row  # noqa: E402

SQL = "SELECT id, name, created_at FROM workspaces WHERE id = ?"


def _per_call(fn: Callable[[], Any], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6  # microseconds


def _paired(a: Callable[[], Any], b: Callable[[], Any], n: int, rounds: int) -> tuple[float, float]:
    first, second = [], []
    for _ in range(rounds):
        first.append(_per_call(a, n))
        second.append(_per_call(b, n))
    return statistics.median(first), statistics.median(second)


def _sqlalchemy() -> Any:
    try:
        import sqlalchemy
    except ImportError:
        print("engines: SQLAlchemy is not installed: its rows are left out (pip install sqlalchemy)", file=sys.stderr)
        return None
    return sqlalchemy


def run(quick: bool) -> list[dict]:
    from marketing_cli.services.account import workspaces
    from marketing_cli.storage import db

    n, rounds = (300, 3) if quick else (5000, 7)
    rows: list[dict] = []
    sa = _sqlalchemy()
    with tempfile.TemporaryDirectory(prefix="mkt-bench-engines-") as tmp:
        path = Path(tmp) / "bench.db"
        conn = db.connect(path)
        ws = workspaces.create_workspace(conn, "Bench")["workspace"]["id"]
        mkt_sqlite = lambda: conn.execute(SQL, (ws,)).fetchone()  # noqa: E731
        if sa is not None:
            engine = sa.create_engine(f"sqlite:///{path}")
            table = sa.Table("workspaces", sa.MetaData(), autoload_with=engine)
            query = sa.select(table.c.id, table.c.name, table.c.created_at).where(table.c.id == sa.bindparam("id"))
            text = sa.text(SQL.replace("?", ":id"))
            with engine.connect() as sa_conn:
                core = lambda: sa_conn.execute(query, {"id": ws}).fetchone()  # noqa: E731
                raw, compiled = _paired(mkt_sqlite, core, n, rounds)
                rows.append(row("point read, SQLAlchemy Core select() on SQLite", compiled, "us", "mkt on sqlite3", raw,
                                compiled / raw, "informs the choice (the issue: no SQLite row >10% slower)", True))
                by_text = lambda: sa_conn.execute(text, {"id": ws}).fetchone()  # noqa: E731
                raw, texted = _paired(mkt_sqlite, by_text, n, rounds)
                rows.append(row("point read, SQLAlchemy Core text() on SQLite", texted, "us", "mkt on sqlite3", raw,
                                texted / raw, "informs the choice", True))
            engine.dispose()
        conn.close()
    rows += _postgresql(n, rounds, sa)
    return rows


def _postgresql(n: int, rounds: int, sa: Any) -> list[dict]:
    try:
        from tests.engines import PostgresServer

        server = PostgresServer()
    except BaseException as exc:  # noqa: BLE001 - pytest.skip's exception when the binaries are missing
        print(f"engines: no PostgreSQL ({exc}): its rows are left out", file=sys.stderr)
        return []
    import psycopg

    from marketing_cli.services.account import workspaces
    from marketing_cli.storage import db

    rows: list[dict] = []
    try:
        url = server.fresh()
        conn = db.connect(url)
        ws = workspaces.create_workspace(conn, "Bench")["workspace"]["id"]
        bare = psycopg.connect(url, autocommit=True, prepare_threshold=None)  # as mkt: no prepared statements (PgBouncer)
        pg_sql = SQL.replace("?", "%s")
        bare_read = lambda: bare.execute(pg_sql, (ws,)).fetchone()  # noqa: E731
        mkt_read = lambda: conn.execute(SQL, (ws,)).fetchone()  # noqa: E731
        base, mkt = _paired(bare_read, mkt_read, n, rounds)
        rows.append(row("point read, mkt on PostgreSQL (translated, cached)", mkt, "us", "bare psycopg 3", base,
                        mkt / base, "<= 1.3x", mkt / base <= 1.3))
        if sa is not None:
            engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"),
                                       connect_args={"prepare_threshold": None})
            table = sa.Table("workspaces", sa.MetaData(), autoload_with=engine)
            query = sa.select(table.c.id, table.c.name, table.c.created_at).where(table.c.id == sa.bindparam("id"))
            with engine.connect() as sa_conn:
                core = lambda: sa_conn.execute(query, {"id": ws}).fetchone()  # noqa: E731
                base, compiled = _paired(bare_read, core, n, rounds)
                rows.append(row("point read, SQLAlchemy Core select() on PostgreSQL", compiled, "us", "bare psycopg 3",
                                base, compiled / base, "informs the choice", True))
            engine.dispose()
        bare.close()
        conn.close()
    finally:
        server.stop()
    return rows
