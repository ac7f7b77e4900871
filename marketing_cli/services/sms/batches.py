"""The batches of the `sms.expand` job (expansion.py), in both of its phases (recipients.py,
handoff.py): their size (MKT_SMS_BATCH_SIZE), the crash tests' pause between them
(MKT_SMS_BATCH_PAUSE), and the check each batch's transaction starts with: the campaign is
still QUEUED, so that a cancel stops the job at the next batch.
"""

from __future__ import annotations

import os
import sqlite3
import time

BATCH_SIZE = 5000


def batch_size() -> int:
    try:
        return max(1, int(os.environ.get("MKT_SMS_BATCH_SIZE", BATCH_SIZE)))
    except ValueError:
        return BATCH_SIZE


def batch_pause() -> None:
    """A test hook: MKT_SMS_BATCH_PAUSE seconds between batches (crash tests)."""
    pause = os.environ.get("MKT_SMS_BATCH_PAUSE")
    if pause:
        time.sleep(float(pause))


def still_queued(conn: sqlite3.Connection, campaign_id: str, lock: bool = False) -> bool:
    """`lock` (PostgreSQL): the campaign row is locked FOR KEY SHARE till the transaction ends, the
    lock each row's foreign key check takes (nobody deletes the campaign meanwhile)."""
    row = conn.execute("SELECT status FROM sms_campaigns WHERE id = ?" + (" FOR KEY SHARE" if lock else ""),
                       (campaign_id,)).fetchone()
    return row is not None and row["status"] == "QUEUED"



def next_batch(conn: sqlite3.Connection, campaign_id: str, lock: bool = False) -> int | None:
    """still_queued and the number of the campaign's next expansion batch (one more than its
    messages' highest) in one read; None when the campaign is no longer QUEUED. `lock` as
    still_queued's."""
    row = conn.execute("SELECT status, (SELECT MAX(batch) FROM sms_messages WHERE campaign_id = ?) FROM sms_campaigns"
                       " WHERE id = ?" + (" FOR KEY SHARE" if lock else ""), (campaign_id, campaign_id)).fetchone()
    return (row[1] or 0) + 1 if row is not None and row[0] == "QUEUED" else None
