"""The SQL that differs between the engines, as small functions of the connection.

Most statements are written once, in SQLite's spelling, and translated for PostgreSQL by
`postgres.translate` (placeholders, INSERT OR IGNORE, IS / IS NOT, BEGIN IMMEDIATE) or served by
the SQL functions that schema.postgresql.sql creates (json_extract, json_each, json_patch,
instr, two-argument max/min). What cannot be translated word for word (a typed JSON value,
a bulk path, a function SQLite calls back into Python for) is chosen here, per engine, so
the services keep one code path and name no engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any


def postgresql(conn: Any) -> bool:
    """Whether the connection is PostgreSQL's (marketing_cli/storage/postgres/connection.py: Connection)."""
    return getattr(conn, "engine", "sqlite") == "postgresql"


def in_byte_order(conn: Any, expr: str) -> str:
    """`expr` for an ORDER BY that sorts text as SQLite does (BINARY: by code point, "US" before
    "unknown", "Outlook" before "iPhone"), whatever the database's collation: PostgreSQL's
    default is the locale's, which a database created with en_US.UTF-8 sorts by dictionary rules."""
    return f'({expr}) COLLATE "C"' if postgresql(conn) else expr


def table_names(conn: Any) -> set[str]:
    """The names of the database's tables, read from its catalog (a service that serves a table
    only when a later schema step has made it, such as the personal-data export's sections)."""
    sql = ("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()" if postgresql(conn)
           else "SELECT name FROM sqlite_master WHERE type = 'table'")
    return {row[0] for row in conn.execute(sql)}


# --- platform (jobs, leases, serve) -----------------------------------------------------------


def skip_locked(conn: Any, of: str | None = None) -> str:
    """What ends a claim's SELECT: PostgreSQL locks the rows it returns and passes over those
    another worker's open claim holds (` FOR UPDATE [OF t] SKIP LOCKED`); SQLite's one writer
    at a time (BEGIN IMMEDIATE) already keeps two claims apart."""
    if not postgresql(conn):
        return ""
    return f" FOR UPDATE OF {of} SKIP LOCKED" if of else " FOR UPDATE SKIP LOCKED"


def for_update(conn: Any) -> str:
    """` FOR UPDATE` on PostgreSQL (the rows read stay ours until the transaction ends); nothing on SQLite."""
    return " FOR UPDATE" if postgresql(conn) else ""


@contextmanager
def row_claim(conn: Any) -> Iterator[Any]:
    """The transaction of a claim of rows: on PostgreSQL READ COMMITTED without the advisory
    write lock (the rows are kept apart by FOR UPDATE SKIP LOCKED, so workers claiming do
    not queue behind every other writer); on SQLite BEGIN IMMEDIATE, as any write (db.transaction).
    Inside a transaction already open, it joins that one."""
    with begun(conn, "BEGIN READ COMMITTED" if postgresql(conn) else "BEGIN IMMEDIATE"):
        yield conn


@contextmanager
def begun(conn: Any, begin: str) -> Iterator[Any]:
    """A transaction opened by the statement `begin`, committed at the end of the block and
    rolled back by an error; inside a transaction already open, it joins that one."""
    if conn.in_transaction:
        yield conn
        return
    conn.execute(begin)
    try:
        yield conn
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


# --- contacts (a field's typed value and its index: field_sql.typed_value_expr, index_expr) --


def contacts_stored_as(conn: Any, value: str, kinds: tuple[str, ...]) -> str:
    """A condition: a field's value (field_sql.typed_value_expr) is stored as one of `kinds` (SQLite's
    typeof names: 'integer', 'real', 'text'), of the field's own type. SQLite asks typeof();
    on PostgreSQL the typed value is NULL for any other stored type, so it is IS NOT NULL."""
    if postgresql(conn):
        return f"{value} IS NOT NULL"
    names = ", ".join(f"'{kind}'" for kind in kinds)
    return f"typeof({value}) IN ({names})"


def contacts_ascii_lower(conn: Any, expr: str) -> str:
    """lower() of ASCII letters only, as SQLite's lower() (PostgreSQL's follows the locale)."""
    return f'lower(({expr}) COLLATE "C")' if postgresql(conn) else f"lower({expr})"


def contacts_like(conn: Any, expr: str) -> str:
    """`expr LIKE ? ESCAPE '\\'`, case-insensitive for ASCII letters only, as SQLite's LIKE."""
    if postgresql(conn):
        return f"({expr}) COLLATE \"C\" ILIKE ? ESCAPE '\\'"
    return f"{expr} LIKE ? ESCAPE '\\'"


def contacts_json_merge(conn: Any, target: str, patch: str) -> str:
    """json_patch(target, patch) for a contact's data, answering the target's own text when the
    patch changes nothing (SQLite's json_patch does: both are compact; PostgreSQL's answers
    jsonb's text, so there mkt_json_merge keeps the stored text), so `<merge> IS NOT data`
    tells whether the data changed on both engines."""
    function = "mkt_json_merge" if postgresql(conn) else "json_patch"
    return f"{function}({target}, {patch})"


def _encoded(rows: Iterable[tuple[Any, ...]], i: int, dumps: Callable[[Any], str]) -> Iterator[tuple[Any, ...]]:
    return ((*r[:i], dumps(r[i]), *r[i + 1:]) for r in rows)


def contacts_batch_source(conn: Any, table: str, columns: tuple[tuple[str, str], ...], rows: list[tuple[Any, ...]],
                          dumps: Callable[[Any], str]) -> tuple[str, list[Any]]:
    """One import batch's rows as a SQL source (`SELECT <columns> FROM ...`) and its parameters,
    for one set-based INSERT ... SELECT. `columns`: (name, PostgreSQL type), where JSON marks a
    cell that is a dict (JSON text in the source).

    The rows go into a temporary table of this connection (`table`, our own name, never user
    text), and the source reads that table. SQLite: one executemany into a TEMP table (no
    index, no trigger), made again for each batch. It replaced one JSON array parameter read
    by json_each, which parsed every row's array once per column (`value->>i`) and held the
    batch's text several times over (Python's, SQLite's copy, its parse). A batch of 20,000
    new contacts (issue 42's list, CPU): the upsert 0.33 s that way, 0.22 s + 0.04 s to fill
    the table this way; its consent rows 0.10 s, now 0.056 s + 0.026 s. PostgreSQL: COPY into a temporary table dropped at the end of the
    batch's transaction (no session state outlives it)."""
    if not postgresql(conn):
        names = ", ".join(name for name, _ in columns)
        cells: Iterable[tuple[Any, ...]] = rows
        for i in (i for i, (_, kind) in enumerate(columns) if kind == "JSON"):
            cells = _encoded(cells, i, dumps)  # as they are written, not a second list
        conn.execute(f"DROP TABLE IF EXISTS temp.{table}")  # the previous batch's
        conn.execute(f"CREATE TEMP TABLE {table} ({names})")
        conn.executemany(f"INSERT INTO temp.{table} VALUES ({', '.join('?' * len(columns))})", cells)
        return f"SELECT {names} FROM temp.{table}", []
    if not conn.in_transaction:
        raise RuntimeError("a batch is loaded inside its transaction (its table is dropped at COMMIT)")
    names = ", ".join(name for name, _ in columns)
    types = ", ".join(f"{name} {'TEXT' if kind == 'JSON' else kind}" for name, kind in columns)
    conn.execute(f"DROP TABLE IF EXISTS pg_temp.{table}")  # a second batch in the same transaction
    conn.execute(f"CREATE TEMP TABLE {table} ({types}) ON COMMIT DROP")
    encode = [i for i, (_, kind) in enumerate(columns) if kind == "JSON"]
    with conn.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
        for row in rows:
            if encode:
                row = list(row)
                for i in encode:
                    row[i] = dumps(row[i])
            copy.write_row(row)
    return f"SELECT {names} FROM {table}", []


def contacts_keys_in(conn: Any, keys: list[str], dumps: Callable[[Any], str]) -> tuple[str, Any]:
    """`IN (<the batch's keys>)` for an import batch's lookup, and its one parameter: a JSON array
    of the keys. SQLite reads it with json_each. On PostgreSQL json_each is a SQL function of ours
    that rewrites each element through json_extract (100-110 ms of server CPU for 20,000 keys),
    so there jsonb_array_elements_text reads it (30-50 ms); a text[] parameter costs as little on
    the server but 30 ms of the client's CPU to write (psycopg's list dumper, element by element,
    in Python) against 5-6 ms for the JSON text."""
    among = "IN (SELECT jsonb_array_elements_text(CAST(? AS jsonb)))" if postgresql(conn) else \
        "IN (SELECT value FROM json_each(?))"
    return among, dumps(keys)


def may_skip_row_triggers(conn: Any) -> bool:
    """PostgreSQL: whether this role may set `session_replication_role` (a superuser, or, from
    PostgreSQL 15, one granted SET on it), which turns off a statement's ordinary triggers (the
    foreign keys' per-row checks among them; a trigger made ALWAYS still fires). A bulk write
    that takes the one lock those checks would each take may then skip them (the SMS
    expansion's batches, the import's). Answered once per connection."""
    if not postgresql(conn):
        return False
    known = getattr(conn, "mkt_may_skip_row_triggers", None)
    if known is None:
        superuser, version = conn.execute("SELECT current_setting('is_superuser'),"
                                          " current_setting('server_version_num')::int").fetchone()
        known = superuser == "on" or (version >= 150000 and bool(conn.execute(
            "SELECT has_parameter_privilege('session_replication_role', 'SET')").fetchone()[0]))
        try:
            conn.mkt_may_skip_row_triggers = known
        except AttributeError:  # a wrapper that takes no attributes: asked again next time
            pass
    return known


def contacts_import_reads_ahead(conn: Any) -> bool:
    """Whether an import parses its next batch in a thread while one is written (importer._read_ahead).
    PostgreSQL: the writer mostly waits on the server, GIL released, so the parse is hidden
    (100,000 rows: 80-84 us a row against 104-152 in turns). SQLite: the write runs in this
    process and is mostly Python, holding the GIL, so the overlap bought nothing measurable,
    while the batches held ahead raised the import's peak memory by a third (200,000 rows:
    138-149 MiB against 107-109, measured before the import let a written batch go before
    reading the next), which the bench holds within 10%."""
    return postgresql(conn)


def contacts_temp_table(conn: Any, name: str) -> str:
    """A temporary table of this connection, by its qualified name (`temp.` / `pg_temp.`)."""
    return f"pg_temp.{name}" if postgresql(conn) else f"temp.{name}"


def contacts_serial_key(conn: Any, column: str) -> str:
    """A column numbering a table's rows in insertion order: SQLite's rowid under a name (INTEGER
    PRIMARY KEY), an identity column on PostgreSQL."""
    if postgresql(conn):
        return f"{column} BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
    return f"{column} INTEGER PRIMARY KEY"


def contacts_indexed_by(conn: Any, index: str) -> str:
    """SQLite's `INDEXED BY <index>` (a plan forced on the planner); PostgreSQL has no such clause."""
    return "" if postgresql(conn) else f" INDEXED BY {index}"


# --- email ----------------------------------------------------------------------------------


def email_rank(conn: Any, salt: str, column: str) -> tuple[str, tuple[Any, ...]]:
    """SQL (and its parameters) of a recipient's place in a send's fixed shuffle: the first 60
    bits of md5(salt || id) as an integer, the same on both engines (so the A/B split and the
    message ids are too). SQLite computes it in Python (`mkt_rank`, hashlib's md5), PostgreSQL
    with its own md5()."""
    if postgresql(conn):
        return f"('x' || substr(md5(? || {column}), 1, 15))::bit(60)::bigint", (salt,)
    import hashlib

    def rank(contact_id: str) -> int:
        return int.from_bytes(hashlib.md5((salt + contact_id).encode()).digest()[:8], "big") >> 4

    conn.create_function("mkt_rank", 1, rank, deterministic=True)
    return f"mkt_rank({column})", ()


def email_provider(conn: Any, domain: str, providers: dict[str, str], default: str, of: Any) -> str:
    """SQL of the mailbox provider of the mail domain `domain` (an SQL expression, lower case):
    `providers` maps each known domain to its provider (`default` for the others), `of` is the
    same lookup in Python. SQLite calls `of` back (`mkt_provider`);
    PostgreSQL, which cannot call Python, gets the mapping compiled into one CASE."""
    if not postgresql(conn):
        conn.create_function("mkt_provider", 1, of, deterministic=True)
        return f"mkt_provider({domain})"
    quoted = (lambda text: "'" + text.replace("'", "''") + "'")
    whens = " ".join(f"WHEN {quoted(key)} THEN {quoted(name)}" for key, name in sorted(providers.items()))
    return f"(CASE rtrim(btrim({domain}), '.') {whens} ELSE {quoted(default)} END)"


def position_column(conn: Any) -> str:
    """The type of a temporary table's `position` column that numbers rows in insertion order
    (1, 2, ...): SQLite's rowid alias, PostgreSQL's identity column."""
    return "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY" if postgresql(conn) else "INTEGER PRIMARY KEY"



# --- automations ----------------------------------------------------------------------------


def automations_seconds_before(conn: Any, moment: str, seconds: str) -> str:
    """SQL of the UTC timestamp (clock.format_ts's text) `seconds` (an SQL expression, a JSON
    number's text) before the timestamp text `moment`, for a text comparison with stored ones."""
    if postgresql(conn):
        return (f"to_char((({moment})::text::timestamptz - make_interval(secs => ({seconds})::float8)) AT TIME ZONE 'UTC',"
                f" 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')")
    return f"strftime('%Y-%m-%dT%H:%M:%fZ', {moment}, '-' || ({seconds}) || ' seconds')"


def automations_comparable(conn: Any) -> str:
    """The SQL function whose answers for two JSON values are equal exactly when SQLite's
    json_extract answers are (IS): by JSON type, numbers by value, true and false as 1 and 0,
    null and missing alike. SQLite's own json_extract; PostgreSQL's json_extract returns text
    (5 and "5" alike), so there mkt_json_comparable (schema step 29)."""
    return "mkt_json_comparable" if postgresql(conn) else "json_extract"


# --- sms ------------------------------------------------------------------------------------


def sms_work_table(conn: Any) -> str:
    """What makes a job's own work table (a unique name of ours, dropped when the work ends) that
    its batches read, one transaction each: SQLite's `TEMP TABLE`; on PostgreSQL an `UNLOGGED
    TABLE`, visible to whichever session a pooler in transaction mode (PgBouncer) gives the
    next transaction, where a temporary table would be missing (a worker killed mid-work leaves
    one behind, named sms_*_<hex>)."""
    return "UNLOGGED TABLE" if postgresql(conn) else "TEMP TABLE"



def sms_python_in_sql(conn: Any) -> bool:
    """Whether SQL may call the Python functions SMS registers (`create_function`: SQLite only).
    Without them the SMS SQL uses the PostgreSQL functions of the same job (schema.postgresql.sql,
    `-- sms`) and lookup tables filled before the statement (pricing.Pricing)."""
    return not postgresql(conn)


def sms_row_locator(conn: Any) -> tuple[str, str]:
    """(column, type) that finds a contacts row fastest, and whose order is the contacts' order:
    SQLite's rowid; PostgreSQL's primary key (ids sort in the order they were made)."""
    return ("id", "TEXT") if postgresql(conn) else ("rowid", "INTEGER")


def sms_serial_key(conn: Any) -> str:
    """A work table's numbering column, assigned in insertion order (SQLite: the rowid). On
    PostgreSQL it is indexed once the rows are in (sms_serial_index): one sort of the numbers
    instead of an index entry per row as they come (0.4 s of server CPU at 1,000,000 rows)."""
    return "BIGINT GENERATED BY DEFAULT AS IDENTITY" if postgresql(conn) else "INTEGER PRIMARY KEY"


def sms_serial_index(conn: Any, table: str, column: str = "n") -> None:
    """The index of a work table's numbering column (sms_serial_key), made after its rows are in:
    PostgreSQL only (SQLite's rowid is its key)."""
    if postgresql(conn):
        conn.execute(f"CREATE UNIQUE INDEX {table}_{column} ON {table} ({column})")


def sms_keyed_table(conn: Any) -> str:
    """What follows a keyed temporary table's columns: SQLite stores it by its key."""
    return "" if postgresql(conn) else " WITHOUT ROWID"


def sms_may_skip_row_triggers(conn: Any) -> bool:
    """may_skip_row_triggers, for the SMS expansion (services/sms/recipients._rows_of_one_campaign
    checks its rows' campaign once per batch instead of per row)."""
    return may_skip_row_triggers(conn)


def sms_like_any_case(conn: Any) -> str:
    """SQLite's LIKE (ASCII case-insensitive), as PostgreSQL spells it."""
    return "ILIKE" if postgresql(conn) else "LIKE"


def sms_number_text(conn: Any, extracted: str) -> str:
    """A NUMBER field's value (json_extract's answer) as text, as format_value writes it: whole
    numbers without a fraction, the others as Python writes a float."""
    if postgresql(conn):
        return f"mkt_sms_number({extracted})"
    return f"CASE WHEN typeof({extracted}) = 'real' THEN mkt_sms_number({extracted}) ELSE CAST({extracted} AS TEXT) END"


def sms_fits_fast_class(conn: Any, value: str, fast_class: str) -> str:
    """Whether the text `value` holds only characters of the bracket class `fast_class`."""
    if postgresql(conn):
        return f"{value} !~ '[^{fast_class}]'"
    return f"{value} NOT GLOB '*[^{fast_class}]*'"


def sms_value_text(conn: Any, kind: str, doc: str, path: str) -> str:
    """A BOOLEAN or multiple-choice value as format_value writes it (true/false; the options joined
    with ", "), in SQL: where SQL cannot call Python (SQLite renders these through mkt_sms_render)."""
    assert postgresql(conn)
    kind_of, value = f"json_type({doc}, {path})", f"json_extract({doc}, {path})"
    if kind == "BOOLEAN":
        return f"CASE WHEN {kind_of} IN ('true', 'false') THEN {kind_of} ELSE {value} END"
    return (f"CASE WHEN {kind_of} = 'array' THEN (SELECT string_agg(e.value, ', ' ORDER BY e.key::bigint)"
            f" FROM json_each({doc}, {path}) e) ELSE {value} END")
