"""PostgreSQL at scale, beside the floors PostgreSQL itself sets and beside SQLite (issue 22, item 7).

    python bench/run.py --only postgresql [--quick]    (--quick: 5,000 contacts and SMS
                                                        recipients; full: 1,000,000)

MKT_BENCH_CONTACTS sets the size; MKT_BENCH_PG_PARTS=import or =sms runs one half (both by
default). Each row is also written to stderr ("row: {...}") as soon as it is measured, so a
run stopped part way still shows what it finished.

A throwaway PostgreSQL server is started for the run (initdb and pg_ctl as the tests do,
tests/engines.py: fsync off, as a bench of mkt's own cost, not the disk's). Rows:

- import: `import_contacts` of the CSV on PostgreSQL against a bare `COPY ... FROM STDIN
  (FORMAT csv)` of the same file into a table of its seven text columns (the floor: no
  parsing, no validation, no index). Target 0.5x. An informational row sets the import
  against a bare COPY of the same rows, already parsed (bench_contacts.parsed_rows), into
  the contacts table with its indexes and trigger (what any loader of contacts pays).
- search at N contacts, three filters (email EQUALS, TEXT field EQUALS, NUMBER field
  GREATER_THAN): the search service on PostgreSQL against the hand-written SQL for the same
  page and total (target <= 5x, as bench_contacts sets SQLite's), and the service on
  PostgreSQL beside the same service on a SQLite file of the same contacts (informational).
- SMS expansion of a campaign to N recipients on PostgreSQL (plain message; a merge tag per
  recipient) against a bare `INSERT ... SELECT` of the same rows into a copy of sms_messages
  (`LIKE ... INCLUDING ALL`: the same indexes) on a bare psycopg connection. Target <= 3x.
- peak RSS of the import process on each engine (informational; this module's own process,
  VmHWM read after each engine's part, so the SQLite figure is measured first).
GET /v1/workspace with 1 and 4 serve processes on each engine is bench_serve_processes.py;
email send with 1, 2 and 4 workers is bench_email_workers.py.
Needs initdb and pg_ctl; without them the module has no rows and says so.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import load_average, median_seconds, postgres_server, row  # noqa: E402

CSV_COLUMNS = "email_address, first_name, city, age, signup, plan, country"


def _vm_hwm_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def _reset_hwm() -> None:
    """Reset this process's VmHWM to its current RSS (Linux: write 5 to clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
            refs.write("5")
    except OSError:
        pass


def _workspace(conn: Any) -> tuple[int, dict[str, int]]:
    """A workspace with its allowance raised and bench_contacts' five custom fields."""
    from bench_contacts import FIELDS

    from marketing_cli.services.account import billing, workspaces
    from marketing_cli.services.contacts import fields

    ws = workspaces.create_workspace(conn, "Bench")["workspace"]["id"]
    billing.set_allowance(conn, ws, "contacts", 100_000_000)
    ids = {body["merge_tag"]: fields.create_field(conn, ws, dict(body))["id"] for body in FIELDS}
    ids["first_name"] = conn.execute(
        "SELECT id FROM fields WHERE workspace_id = ? AND merge_tag = 'first_name'", (ws,)).fetchone()[0]
    return ws, ids


def _import(conn: Any, ws: int, csv_path: Path) -> float:
    from marketing_cli.services.contacts import bulk

    started = time.perf_counter()
    with open(csv_path, newline="", encoding="utf-8") as handle:
        summary = bulk.import_contacts(conn, ws, handle, batch_size=bulk.BATCH_SIZE)
    elapsed = time.perf_counter() - started
    assert summary["skipped"] == 0 and summary["created"] > 0, summary
    return elapsed


def _bare_copy_file(url: str, csv_path: Path) -> float:
    import psycopg

    with psycopg.connect(url, autocommit=True) as bare:
        bare.execute("CREATE TABLE bare_csv (" + ", ".join(f"{c.strip()} TEXT" for c in CSV_COLUMNS.split(",")) + ")")
        started = time.perf_counter()
        with bare.transaction():
            with bare.cursor().copy(f"COPY bare_csv ({CSV_COLUMNS}) FROM STDIN (FORMAT csv, HEADER true)") as copy:
                with open(csv_path, "rb") as handle:
                    while chunk := handle.read(1 << 20):
                        copy.write(chunk)
        elapsed = time.perf_counter() - started
        bare.execute("DROP TABLE bare_csv")
    return elapsed


def _bare_copy_contacts(url: str, rows: list[tuple]) -> float:
    """The parsed rows COPYed into contacts (its indexes, its counter trigger), in the import's batches."""
    import psycopg

    from marketing_cli.services.contacts.bulk import BATCH_SIZE

    columns = "id, workspace_id, email, phone, status, sms_status, data, created_at, updated_at"
    with psycopg.connect(url, autocommit=True) as bare:
        started = time.perf_counter()
        for start in range(0, len(rows), BATCH_SIZE):
            with bare.transaction():
                with bare.cursor().copy(f"COPY contacts ({columns}) FROM STDIN") as copy:
                    for values in rows[start:start + BATCH_SIZE]:
                        copy.write_row(values)
        return time.perf_counter() - started


def _import_rows(server: Any, csv_path: Path, n: int) -> tuple[list[dict], Any, int, dict[str, int], int]:
    """The import rows, the connection, workspace and fields the search reads, and this process's
    VmHWM (KiB) right after the import: before the floor's parsed rows (a list of every row)
    are built, which are the bench's memory, not the import's."""
    from bench_contacts import parsed_rows

    from marketing_cli.storage import db

    url = server.fresh()
    conn = db.connect(url)
    ws, ids = _workspace(conn)
    seconds = _import(conn, ws, csv_path)
    import_hwm = _vm_hwm_kib()
    count = conn.execute("SELECT count(*) FROM contacts WHERE workspace_id = ?", (ws,)).fetchone()[0]
    assert count == n, (count, n)
    bare_url = server.fresh()
    bare = min(_bare_copy_file(bare_url, csv_path) for _ in range(2))
    bare_conn = db.connect(bare_url)
    bare_ws, bare_ids = _workspace(bare_conn)
    bare_conn.close()
    floor = _bare_copy_contacts(bare_url, parsed_rows(csv_path, bare_ws, bare_ids))
    server.drop(bare_url)
    rate = n / seconds
    out = [
        row(f"PostgreSQL: contacts import, {n:,} rows x 5 custom fields", rate, "rows/s",
            "bare COPY of the same CSV file (text columns, no index)", n / bare, rate / (n / bare), "ratio >= 0.50",
            rate / (n / bare) >= 0.50),
        row(f"PostgreSQL: contacts import, {n:,} rows (same run)", rate, "rows/s",
            "bare COPY of the parsed rows into contacts (its indexes and trigger)", n / floor, rate / (n / floor),
            "informational", True),
    ]
    return out, conn, ws, ids, import_hwm


def _search_cases(n: int, ids: dict[str, int]) -> list[tuple[str, dict, str, tuple]]:
    from bench_contacts import DOMAINS

    target_email = f"user{n // 2}@{DOMAINS[(n // 2) % len(DOMAINS)]}"
    return [
        ("email EQUALS", {"merge_tag": "email_address", "operator": "EQUALS", "value": target_email},
         "email = %s", (target_email,)),
        ("TEXT field EQUALS", {"merge_tag": "city", "operator": "EQUALS", "value": "City 17"},
         f"mkt_field_text(data_doc, '{ids['city']}') = %s", ("City 17",)),
        ("NUMBER field GREATER_THAN", {"merge_tag": "age", "operator": "GREATER_THAN", "value": 88},
         f"mkt_field_number(data_doc, '{ids['age']}') > %s", (88,)),
    ]


def _search_rows(url: str, conn: Any, ws: int, ids: dict[str, int], sqlite: tuple[Any, int] | None, n: int,
                 repeat: int) -> list[dict]:
    """The search service on PostgreSQL against hand-written SQL on a bare psycopg connection,
    and beside the same service on SQLite (`sqlite`: its connection and workspace)."""
    import psycopg

    from marketing_cli.services.contacts.search import search_contacts

    limit = 50
    out = []
    conn.execute("ANALYZE contacts")
    with psycopg.connect(url, autocommit=True, prepare_threshold=None) as bare:
        bare.execute("SET jit = off")  # as mkt's own sessions (postgres.configure)
        for name, filt, where, params in _search_cases(n, ids):
            body = {"fields": [filt], "limit": limit}

            def service() -> Any:
                return search_contacts(conn, ws, body)

            def hand() -> Any:
                total = bare.execute(f"SELECT count(*) FROM contacts WHERE workspace_id = %s AND {where}",
                                     (ws, *params)).fetchone()[0]
                page = bare.execute(f"SELECT * FROM contacts WHERE workspace_id = %s AND {where}"
                                    " ORDER BY created_at, id LIMIT %s", (ws, *params, limit)).fetchall()
                tags = bare.execute("SELECT ct.contact_id, t.id, t.name FROM contact_tags ct JOIN tags t"
                                    " ON t.id = ct.tag_id WHERE ct.contact_id = ANY(%s)",
                                    ([r[0] for r in page],)).fetchall()
                return total, page, tags

            result = service()
            total, page, _ = hand()
            assert result["pagination"]["total"] == total, (name, result["pagination"], total)
            assert [c["id"] for c in result["contacts"]] == [r[0] for r in page], name
            service_ms = median_seconds(service, repeat) * 1000
            hand_ms = median_seconds(hand, repeat) * 1000
            ratio = service_ms / hand_ms
            out.append(row(f"PostgreSQL: search at {n:,}: {name} ({total:,} hits)", service_ms, "ms",
                           "hand-written SQL, bare psycopg", hand_ms, ratio, "ratio <= 5", ratio <= 5))
            if sqlite is not None:
                lite_conn, lite_ws = sqlite
                lite_body = body
                if name == "TEXT field EQUALS" or name == "NUMBER field GREATER_THAN":
                    lite_body = {"fields": [filt], "limit": limit}  # fields by merge tag: the same on both
                lite = search_contacts(lite_conn, lite_ws, lite_body)
                assert lite["pagination"]["total"] == total, (name, lite["pagination"], total)
                lite_ms = median_seconds(lambda: search_contacts(lite_conn, lite_ws, lite_body), repeat) * 1000
                out.append(row(f"search at {n:,}: {name}, PostgreSQL vs SQLite", service_ms, "ms",
                               "the same service on a SQLite file", lite_ms, service_ms / lite_ms, "informational",
                               True))
    return out


def _raw_sms_insert(url: str, ws: int, body: str) -> tuple[float, float]:
    """The baseline: the expansion's rows into a copy of sms_messages (its indexes) in one INSERT ...
    SELECT. (wall seconds, CPU seconds: the server process's and this process's)."""
    import psycopg

    from marketing_cli.kernel import clock

    with psycopg.connect(url, autocommit=True, prepare_threshold=None) as bare:
        bare.execute("SET jit = off")  # as mkt's own sessions (postgres.configure)
        bare.execute("DROP TABLE IF EXISTS raw_messages")
        bare.execute("CREATE TABLE raw_messages (LIKE sms_messages INCLUDING ALL)")
        cpu = _cpu(bare.execute("SELECT pg_backend_pid()").fetchone()[0])
        started = time.perf_counter()
        with bare.transaction():
            bare.execute(
                "INSERT INTO raw_messages (campaign_id, contact_id, batch, phone, country, body, encoding, segments,"
                f" price_units, status, created_at) SELECT 'raw', c.id, 1, c.phone, 'US', {body}, 'GSM-7', 1, 830,"
                " 'pending', %s FROM contacts c WHERE c.workspace_id = %s AND (c.sms_status IS NULL"
                " OR c.sms_status = 'SUBSCRIBED') AND c.phone IS NOT NULL AND c.phone <> ''", (clock.now(), ws))
        elapsed, cpu = time.perf_counter() - started, cpu()
        bare.execute("DROP TABLE raw_messages")
    return elapsed, cpu


def _cpu(server_pid: int) -> Any:
    """A clock of the CPU seconds the server process `server_pid` (on this machine) and this process
    spend from now: call it for the time so far. Both sides of the SMS rows are timed by it."""
    from common import cpu_seconds

    server, here = cpu_seconds(server_pid), time.process_time()
    return lambda: cpu_seconds(server_pid) - server + time.process_time() - here


def _sms_rows(server: Any, n: int) -> list[dict]:
    from bench_sms import RUNS, build, make_campaign

    from marketing_cli.services.sms import recipients

    url = server.fresh()
    conn, ws = build(url, n)  # build() takes a path or a URL: db.connect reads both
    try:
        first = conn.execute("SELECT id FROM fields WHERE workspace_id = ? AND merge_tag = 'first_name'",
                             (ws,)).fetchone()[0]
        rendered = (f"'Hi ' || COALESCE(mkt_field_text(c.data_doc, '{first}'), '') ||"
                    " ', our autumn sale starts today. Reply STOP to opt out.'")
        _raw_sms_insert(url, ws, "NULL")  # warm the cache the same way for both
        out = []
        for label, message, body in (
                ("plain message", "Our autumn sale starts today. Reply STOP to opt out.", "NULL"),
                ("merge tag per recipient",
                 "Hi {{contact.first_name}}, our autumn sale starts today. Reply STOP to opt out.", rendered)):
            runs = []  # RUNS alternated runs (bench_sms.RUNS): baseline, expansion, baseline; the median run counts
            server_pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
            for _ in range(RUNS):
                campaign = make_campaign(conn, ws, message)
                before = _raw_sms_insert(url, ws, body)
                started, cpu = time.perf_counter(), _cpu(server_pid)
                assert recipients.expand_recipients(conn, campaign)
                elapsed, cpu = time.perf_counter() - started, cpu()
                after = _raw_sms_insert(url, ws, body)
                base, base_cpu = min(before[0], after[0]), min(before[1], after[1])  # a shared machine
                written = conn.execute("SELECT COUNT(*) FROM sms_messages WHERE campaign_id = ?",
                                       (campaign["id"],)).fetchone()[0]
                assert written == n, (written, n)
                runs.append((elapsed / base, elapsed, base, load_average(), cpu / base_cpu, cpu, base_cpu))
                print(f"PostgreSQL SMS expansion, {n:,}, {label}: {elapsed:.2f} s (CPU {cpu:.2f} s), bare {base:.2f} s"
                      f" (CPU {base_cpu:.2f} s): {elapsed / base:.2f}x, CPU {cpu / base_cpu:.2f}x; load {runs[-1][3]:.1f}",
                      file=sys.stderr)
            ratio, elapsed, base, _, _, _, _ = sorted(runs)[len(runs) // 2]
            cpu_ratio, cpu, base_cpu = sorted(r[4:7] for r in runs)[len(runs) // 2]
            under = (f"median of {RUNS} alternated runs ({', '.join(f'{r[0]:.2f}' for r in runs)}),"
                     f" load {min(r[3] for r in runs):.1f}-{max(r[3] for r in runs):.1f}")
            baseline = "bare INSERT ... SELECT" + (" (texts in plain SQL)" if body != "NULL" else "")
            out += _said([row(f"PostgreSQL: SMS expansion, {n:,} recipients, {label} (rows, prices, ledger; {under})",
                              n / elapsed, "rows/s", baseline, n / base, ratio, "ratio <= 3", ratio <= 3),
                          row(f"PostgreSQL: SMS expansion, {n:,} recipients, {label}: CPU time, server and client"
                              f" (median of the {RUNS} runs, {', '.join(f'{r[4]:.2f}' for r in runs)})", cpu, "s",
                              baseline + ", CPU time", base_cpu, cpu_ratio, "ratio <= 3", cpu_ratio <= 3)])
        return out
    finally:
        conn.close()


def run(quick: bool) -> list[dict]:
    server = postgres_server("postgresql")
    if server is None:
        return []
    n = int(os.environ.get("MKT_BENCH_CONTACTS", 5_000 if quick else 1_000_000))
    # MKT_BENCH_PG_PARTS: which halves run, "import" (import and search) and/or "sms" (both by default).
    parts = set(os.environ.get("MKT_BENCH_PG_PARTS", "import,sms").split(","))
    rows: list[dict] = []
    try:
        if "import" in parts:
            rows += _import_half(server, n, 5 if quick else 9)
        if "sms" in parts:
            rows += _sms_rows(server, n)
    finally:
        server.stop()
    return rows


def _import_half(server: Any, n: int, repeat: int) -> list[dict]:
    """The import rows (SQLite first, then PostgreSQL), the RSS rows and the search rows."""
    from bench_contacts import write_csv

    from marketing_cli.storage import db

    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="mkt-bench-pg-") as tmp:
        csv_path = Path(tmp) / "contacts.csv"
        write_csv(csv_path, n)
        # SQLite first: the same import into a file (its RSS; the search's other side).
        _reset_hwm()
        base_rss = _vm_hwm_kib()
        lite = db.connect(Path(tmp) / "bench.db")
        lite_ws, _ = _workspace(lite)
        lite_seconds = _import(lite, lite_ws, csv_path)
        print(f"SQLite import: {n / lite_seconds:,.0f} rows/s", file=sys.stderr, flush=True)
        lite_rss = _vm_hwm_kib() - base_rss
        _reset_hwm()
        base_rss = _vm_hwm_kib()
        import_rows, conn, ws, ids, import_hwm = _import_rows(server, csv_path, n)
        pg_rss = import_hwm - base_rss
        rows += _said(import_rows)
        pg_seconds = n / import_rows[0]["value"]
        rows += _said([row(f"contacts import, {n:,} rows: PostgreSQL vs SQLite", n / pg_seconds, "rows/s",
                           "the same import into a SQLite file", n / lite_seconds, lite_seconds / pg_seconds,
                           "informational", True)])
        rows += _said([row(f"import process RSS growth, {n:,} rows: PostgreSQL", pg_rss / 1024, "MiB",
                           "the same import on SQLite", lite_rss / 1024, pg_rss / max(lite_rss, 1), "informational",
                           True)])
        try:
            rows += _said(_search_rows(server.url(_dbname(conn)), conn, ws, ids, (lite, lite_ws), n, repeat))
        finally:
            conn.close()
            lite.close()
    return rows


def _said(rows: list[dict]) -> list[dict]:
    """`rows`, each also written to stderr as soon as it is measured: a run stopped part way (a
    million rows on a busy machine takes long) still shows the rows it finished."""
    for r in rows:
        print("row: " + json.dumps(r), file=sys.stderr, flush=True)
    return rows


def _dbname(conn: Any) -> str:
    return conn.execute("SELECT current_database()").fetchone()[0]


if __name__ == "__main__":
    for r in run("--quick" in sys.argv):
        print(json.dumps(r))
