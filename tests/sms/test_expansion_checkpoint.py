"""The expansion turns SQLite's automatic checkpoint off for its batches and restores the
connection's limit afterwards, whether it finished or was cancelled (storage/db.checkpoint_after)."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from marketing_cli.services.sms import recipients, schedule
from marketing_cli.storage import db
from tests import factories as f


def _queued(conn: sqlite3.Connection, ws: int) -> sqlite3.Row:
    f.sms_contacts(conn, ws, [f"+1415555{i:04d}" for i in range(1, 8)])
    campaign = f.sms_campaign(conn, ws)
    assert schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})["status"] == "QUEUED"
    return conn.execute("SELECT * FROM sms_campaigns WHERE id = ?", (campaign["id"],)).fetchone()


def _limit(conn: Any) -> int | None:
    if not isinstance(conn, sqlite3.Connection):
        return None
    return conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]


def test_no_checkpoint_between_batches_and_the_limit_back_after(conn: Any, workspace: dict,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    f.sms_ready(conn, workspace["id"])
    monkeypatch.setenv("MKT_SMS_BATCH_SIZE", "2")
    row = _queued(conn, workspace["id"])
    before = _limit(conn)
    seen: list[int | None] = []
    real = recipients.ledger.append

    def append(c: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(_limit(c))
        return real(c, *args, **kwargs)

    monkeypatch.setattr(recipients.ledger, "append", append)
    assert recipients.expand_recipients(conn, row) is True
    assert len(seen) == 4  # 7 recipients, batches of 2: each charged
    assert seen == [0 if before is not None else None] * 4  # SQLite: no automatic checkpoint meanwhile
    assert _limit(conn) == before
    assert conn.execute("SELECT count(*) FROM sms_messages WHERE campaign_id = ?", (row["id"],)).fetchone()[0] == 7
    if before is not None:  # the log file is cut back when it next starts over
        assert conn.execute("PRAGMA journal_size_limit").fetchone()[0] == db.LOG_LIMIT_BYTES


def test_a_cancelled_expansion_restores_the_limit(conn: Any, workspace: dict,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    f.sms_ready(conn, workspace["id"])
    monkeypatch.setenv("MKT_SMS_BATCH_SIZE", "2")
    row = _queued(conn, workspace["id"])
    before = _limit(conn)
    real = recipients.ledger.append

    def append_then_cancel(c: Any, *args: Any, **kwargs: Any) -> Any:
        result = real(c, *args, **kwargs)
        c.execute("UPDATE sms_campaigns SET status = 'CANCELLED' WHERE id = ?", (row["id"],))
        return result

    monkeypatch.setattr(recipients.ledger, "append", append_then_cancel)
    assert recipients.expand_recipients(conn, row) is False
    assert _limit(conn) == before
    assert conn.execute("SELECT count(*) FROM sms_messages WHERE campaign_id = ?", (row["id"],)).fetchone()[0] == 2
