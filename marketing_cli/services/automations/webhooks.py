"""The webhook step: an outbox row written with the step, delivered by a job, signed.

The step writes `automation_webhooks` (status pending) and queues `automations.webhook` in
its own transaction, so a step that ran has exactly one webhook to deliver. The job POSTs
the JSON body with

    X-Mkt-Timestamp: <unix seconds>
    X-Mkt-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>", keyed with the flow's webhook_secret>

(the flow's secret is shown by `mkt automations show` / GET /v1/automations/:id) through
the outbound helper (kernel/outbound.py): TIMEOUT_SECONDS in all for resolving, connecting,
sending and the whole answer (a receiver that sends its answer a byte at a time is cut off
there, so one slow receiver cannot hold the job runner), at most ANSWER_BYTES of the
answer's body read (its status is what counts), no redirects followed, and the connection
made to the very address that was checked (a name that resolves to a public address, then
to 127.0.0.1, still reaches the first). A 2xx answer delivers it; anything else (another
status, a timeout, a refused connection) is retried by the job queue with its backoff
(5 s, 10 s, 20 s, 40 s) up to MAX_ATTEMPTS, then the row is marked failed by the job's
gave-up hook. A receiver may see a call twice (a runner that died between the answer and
its record): the body's `id` is the same each time, for deduplication. Addresses on
private networks are refused for good unless MKT_ALLOW_PRIVATE_URLS=1, as for templates
fetched by URL.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sqlite3
import time
from typing import Any

from marketing_cli import jobs
from marketing_cli.errors import MktError
from marketing_cli.kernel import clock, outbound
from marketing_cli.storage.db import transaction

TIMEOUT_SECONDS = 10.0
ANSWER_BYTES = 64 * 1024
# a failure another attempt cannot mend: the address is not one mkt may call
FINAL = ("invalid", "unresolved", "private", "redirect")
MAX_ATTEMPTS = 5
JOB = "automations.webhook"


def signature(secret: str, timestamp: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


def queue_webhook(conn: sqlite3.Connection, enrollment: sqlite3.Row, flow: dict[str, Any], step: dict[str, Any]) -> int:
    """The outbox row and its delivery job (inside the step's transaction); the row's id."""
    contact = conn.execute("SELECT id, email, phone, status FROM contacts WHERE id = ?",
                           (enrollment["contact_id"],)).fetchone()
    now = clock.now()
    webhook_id = conn.execute(
        "INSERT INTO automation_webhooks (workspace_id, automation_id, enrollment_id, step_id, url, body, created_at)"
        " VALUES (?, ?, ?, ?, ?, '{}', ?)",
        (enrollment["workspace_id"], enrollment["automation_id"], enrollment["id"], step["id"], step["url"].strip(),
         now)).lastrowid
    body = {"id": webhook_id, "automation_id": enrollment["automation_id"], "automation": flow["name"],
            "step_id": step["id"], "enrollment_id": enrollment["id"],
            "contact": {"id": contact["id"], "email_address": contact["email"], "phone_number": contact["phone"],
                        "status": contact["status"]},
            "payload": step.get("payload") or {}, "created_at": now}
    conn.execute("UPDATE automation_webhooks SET body = ? WHERE id = ?",
                 (json.dumps(body, ensure_ascii=False, separators=(",", ":")), webhook_id))
    jobs.enqueue(conn, JOB, {"webhook_id": webhook_id}, workspace_id=enrollment["workspace_id"],
                 max_attempts=MAX_ATTEMPTS)
    return webhook_id


@jobs.handler(JOB)
def deliver(conn: sqlite3.Connection, payload: dict[str, Any]) -> None:
    row = conn.execute("SELECT w.*, a.webhook_secret FROM automation_webhooks w JOIN automations a"
                       " ON a.id = w.automation_id WHERE w.id = ?", (payload["webhook_id"],)).fetchone()
    if row is None or row["status"] != "pending":
        return
    with transaction(conn):
        conn.execute("UPDATE automation_webhooks SET attempts = attempts + 1 WHERE id = ?", (row["id"],))
    body = row["body"].encode()
    stamp = str(int(time.time()))
    headers = {"Content-Type": "application/json", "User-Agent": "mkt-automations",
               "X-Mkt-Timestamp": stamp, "X-Mkt-Signature": signature(row["webhook_secret"], stamp, body)}
    try:
        answer = outbound.request("POST", row["url"], content=body, headers=headers, deadline=TIMEOUT_SECONDS,
                                  max_bytes=ANSWER_BYTES, size="64 KB", cut=True)
    except outbound.OutboundError as exc:
        reason = (f"no complete answer within {TIMEOUT_SECONDS:g} s" if exc.kind == "timeout" else exc.reason)
        _record_error(conn, row["id"], reason, None)
        # a 400 fails the job for good: the address will not change
        raise MktError(400 if exc.kind in FINAL else 503, f"The webhook could not be delivered: {reason}.") from None
    if not 200 <= answer.status < 300:
        _record_error(conn, row["id"], f"HTTP {answer.status}", answer.status)
        raise MktError(503, f"The webhook answered HTTP {answer.status}.")
    with transaction(conn):
        conn.execute("UPDATE automation_webhooks SET status = 'delivered', delivered_at = ?, response_status = ?,"
                     " last_error = NULL WHERE id = ?", (clock.now(), answer.status, row["id"]))


def _record_error(conn: sqlite3.Connection, webhook_id: int, error: str, status: int | None) -> None:
    with transaction(conn):
        conn.execute("UPDATE automation_webhooks SET last_error = ?, response_status = ? WHERE id = ?",
                     (error[:500], status, webhook_id))


@jobs.gave_up(JOB)
def deliver_gave_up(conn: sqlite3.Connection, job: dict[str, Any], error: str) -> None:
    conn.execute("UPDATE automation_webhooks SET status = 'failed', last_error = ? WHERE id = ? AND status = 'pending'",
                 (error[:500], job["webhook_id"]))
