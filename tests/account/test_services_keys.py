from __future__ import annotations

import hashlib
import sqlite3

import pytest

from marketing_cli.errors import MktError
from marketing_cli.services.account import keys, workspaces
from tests import engines


def test_keys_are_stored_only_as_hashes(conn: sqlite3.Connection, workspace: dict) -> None:
    created = keys.create_key(conn, workspace["id"], "ci")
    assert set(created) == {"id", "name", "key", "created_at"}
    secret = created["key"]
    dump = engines.dump(conn)
    assert secret not in dump and workspace["api_key"] not in dump
    row = conn.execute("SELECT key_hash, prefix FROM api_keys WHERE id = ?", (created["id"],)).fetchone()
    assert row["key_hash"] == hashlib.sha256(secret.encode()).hexdigest()
    assert secret.startswith(row["prefix"]) and len(row["prefix"]) < len(secret) // 2


def test_authenticate_answers(conn: sqlite3.Connection, workspace: dict) -> None:
    ws = workspace["id"]
    assert keys.authenticate(conn, f"Bearer {workspace['api_key']}") == ws
    assert keys.authenticate(conn, f"bearer   {workspace['api_key']} ") == ws
    cases = [
        (None, "Please provide an API key."),
        ("", "Please provide an API key."),
        ("Bearer", "The API key you provided is invalid or has been revoked."),
        ("Bearer nope", "The API key you provided is invalid or has been revoked."),
        (f"Basic {workspace['api_key']}", "The API key you provided is invalid or has been revoked."),
    ]
    for header, message in cases:
        with pytest.raises(MktError) as err:
            keys.authenticate(conn, header)
        assert (err.value.status, err.value.message) == (401, message)


def test_revoked_key_fails_at_once(conn: sqlite3.Connection, workspace: dict) -> None:
    created = keys.create_key(conn, workspace["id"], "temp")
    assert keys.authenticate(conn, f"Bearer {created['key']}") == workspace["id"]
    revoked = keys.revoke_key(conn, workspace["id"], created["id"])
    assert revoked["revoked_at"] is not None
    with pytest.raises(MktError) as err:
        keys.authenticate(conn, f"Bearer {created['key']}")
    assert err.value.status == 401
    listed = {k["id"]: k for k in keys.list_keys(conn, workspace["id"])}
    assert listed[created["id"]]["revoked_at"] == revoked["revoked_at"]
    assert all("key" not in k for k in listed.values())


def test_a_key_reaches_only_its_workspace(conn: sqlite3.Connection, workspace: dict) -> None:
    other = workspaces.create_workspace(conn, "Other")
    assert keys.authenticate(conn, f"Bearer {other['api_key']}") == other["workspace"]["id"]
    with pytest.raises(MktError) as err:  # revoking another workspace's key is not possible
        keys.revoke_key(conn, workspace["id"], 2)
    assert err.value.status == 404
    assert keys.authenticate(conn, f"Bearer {other['api_key']}") == other["workspace"]["id"]


def test_users_usage_counts_active_keys(conn: sqlite3.Connection, workspace: dict) -> None:
    from marketing_cli.services.account import billing

    assert billing.usage(conn, workspace["id"], "users") == 1
    extra = keys.create_key(conn, workspace["id"])
    assert billing.usage(conn, workspace["id"], "users") == 2
    keys.revoke_key(conn, workspace["id"], extra["id"])
    keys.revoke_key(conn, workspace["id"], extra["id"])  # twice: counted once
    assert billing.usage(conn, workspace["id"], "users") == 1


def test_last_used_at_is_stamped_at_most_once_a_minute(conn: sqlite3.Connection, workspace: dict,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import datetime, timezone

    from marketing_cli.kernel import clock

    moments = iter([datetime(2026, 11, 22, 10, 0, 0, tzinfo=timezone.utc),
                    datetime(2026, 11, 22, 10, 0, 30, tzinfo=timezone.utc),
                    datetime(2026, 11, 22, 10, 1, 30, tzinfo=timezone.utc)])
    monkeypatch.setattr(clock, "utcnow", lambda: next(moments))
    header = f"Bearer {workspace['api_key']}"

    def stamp() -> str | None:
        return keys.list_keys(conn, workspace["id"])[0]["last_used_at"]

    assert stamp() is None
    keys.authenticate(conn, header)
    assert stamp() == "2026-11-22T10:00:00.000Z"
    keys.authenticate(conn, header)  # 30 s later: unchanged
    assert stamp() == "2026-11-22T10:00:00.000Z"
    keys.authenticate(conn, header)
    assert stamp() == "2026-11-22T10:01:30.000Z"


@pytest.mark.sqlite_only  # a busy SQLite file (PostgreSQL has no file lock)
def test_stamping_never_waits_for_a_busy_file(db_path: object, conn: sqlite3.Connection, workspace: dict) -> None:
    import time

    from marketing_cli.storage.db import connect

    other = connect(db_path)
    other.execute("BEGIN IMMEDIATE")
    try:
        started = time.perf_counter()
        assert keys.authenticate(conn, f"Bearer {workspace['api_key']}") == workspace["id"]
        assert time.perf_counter() - started < 1
    finally:
        other.execute("ROLLBACK")
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] > 0
