"""The drain: a batch of due send_email steps run set-based, in ONE transaction.

When many contacts reach a flow's email step at once (a backfill, a bulk tag, a broadcast
trigger), running each step in its own transaction (steps.run_step) costs a dozen statements
and a COMMIT a contact, and those commits starve the sender of the write lock it needs to
deliver what they write. `run_batch` runs the batch's plain email steps together:

    BEGIN IMMEDIATE
      read the batch's enrollments (still active, still due), their flows once a version
      read their contacts (one statement)
      per (version, step): the round's campaign (made once), the messages (one INSERT ...
        SELECT: automated.queue_automated_messages, the send job queued once), the step runs
        with their message ids (one INSERT ... SELECT), the enrollments moved on (one UPDATE)
    COMMIT

Each enrollment gets exactly what steps.run_step would write for it: the step run (outcome
`sent`, or `skipped` with the same reason for a contact without an address or not
subscribed), the message (capped = 1, counted by the frequency caps) and the move to the
next step. The crash rule is the one of docs/reliability.md, for the batch: a crash before
the COMMIT leaves no step run and no message, and the steps run once later.

Everything else is left to the per-enrollment path, in due order, after the COMMIT: other
step types, a wait for an event timing out, a confirmation email (never capped), an
enrollment of a workspace with an email frequency cap (each contact's count read one by
one), a contact already sent this step's first round (re-entry: a later round) or enrolled
twice in the batch, and, when the email step leads to a step due at once, the rest of the
enrollment's steps (steps.run_enrollment). When the batch's transaction fails, the whole
batch goes that way (which puts a failing contact back alone).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from marketing_cli.kernel import clock
from marketing_cli.storage.db import transaction

_ENROLLMENTS = ("SELECT id, seq, automation_id, version_id, workspace_id, contact_id, step_id, waiting"
                " FROM automation_enrollments WHERE id IN ({marks}) AND status = 'active' AND next_run_at <= ?")

# The step runs of the messages just written: each enrollment's message found by its unique (campaign, contact).
_SENT_RUNS = ("INSERT INTO automation_step_runs (enrollment_id, seq, automation_id, version_id, step_id, outcome,"
              " email_message_id, ran_at) SELECT x.id, x.seq, x.automation_id, x.version_id, ?, 'sent', m.id, ?"
              " FROM automation_enrollments x JOIN email_messages m ON m.campaign_id = ? AND m.contact_id = x.contact_id"
              " WHERE x.id IN ({marks})")
_SKIPPED_RUNS = ("INSERT INTO automation_step_runs (enrollment_id, seq, automation_id, version_id, step_id, outcome,"
                 " detail, ran_at) VALUES (?, ?, ?, ?, ?, 'skipped', ?, ?)")

_END = ("UPDATE automation_enrollments SET seq = seq + 1, status = 'completed', step_id = NULL, next_run_at = NULL,"
        " waiting = 0, exit_reason = 'completed', goal_reached_at = NULL, updated_at = ? WHERE id IN ({marks})")
_NEXT = ("UPDATE automation_enrollments SET seq = seq + 1, step_id = ?, next_run_at = ?, waiting = 0,"
         " wait_event_type = NULL, wait_matcher = NULL, wait_from_event_id = NULL, wait_next = NULL,"
         " wait_timeout_next = NULL, updated_at = ? WHERE id IN ({marks})")


def new_round_campaign(conn: sqlite3.Connection, workspace_id: int, automation_id: int, version_id: int,
                       flow: dict[str, Any], step: dict[str, Any]) -> str:
    """A send step's next round: its automated campaign (services/email/automated.py), recorded
    in automation_campaigns; its id."""
    from marketing_cli.services.email.automated import create_automated_campaign

    round_ = conn.execute("SELECT coalesce(max(round), 0) + 1 FROM automation_campaigns WHERE version_id = ?"
                          " AND step_id = ?", (version_id, step["id"])).fetchone()[0]
    version = conn.execute("SELECT version FROM automation_versions WHERE id = ?", (version_id,)).fetchone()[0]
    campaign_id = create_automated_campaign(
        conn, workspace_id, automation_id=automation_id,
        name=f"{flow['name']} v{version} / {step['id']}" + (f" ({round_})" if round_ > 1 else ""),
        sender_id=step["sender_id"], subject=step["subject"], preview_text=step.get("preview_text") or "",
        html=step["body_html"])
    conn.execute("INSERT INTO automation_campaigns (version_id, step_id, round, campaign_id) VALUES (?, ?, ?, ?)",
                 (version_id, step["id"], round_, campaign_id))
    return campaign_id


def _marks(values: list[Any]) -> str:
    return ", ".join("?" * len(values))


def run_batch(conn: sqlite3.Connection, ids: list[int]) -> list[int]:
    """Run the plain email steps among these due enrollments in one transaction; the ids left to
    the per-enrollment path (steps.run_enrollment), in due order."""
    if not ids:
        return []
    later: list[int] = []  # after the COMMIT: the rest of an enrollment's steps due at once
    with transaction(conn):
        now = clock.now()
        rows = conn.execute(_ENROLLMENTS.format(marks=_marks(ids)), (*ids, now)).fetchall()
        versions = sorted({r["version_id"] for r in rows})
        flows = {v: json.loads(f) for v, f in conn.execute(
            f"SELECT id, flow FROM automation_versions WHERE id IN ({_marks(versions)})", versions)} if rows else {}
        capped = {r[0] for r in conn.execute("SELECT workspace_id FROM automation_caps WHERE channel = 'email'")}
        groups: dict[tuple[int, str], list[sqlite3.Row]] = {}
        fast: set[int] = set()
        for r in rows:
            step = _step(flows[r["version_id"]], r["step_id"])
            if r["waiting"] or step is None or step["type"] != "send_email" or step.get("confirmation") or \
                    r["workspace_id"] in capped:
                continue
            groups.setdefault((r["version_id"], r["step_id"]), []).append(r)
            fast.add(r["id"])
        if groups:
            contact_ids = sorted({r["contact_id"] for group in groups.values() for r in group})
            contacts = {c[0]: (c[1], c[2]) for c in conn.execute(
                f"SELECT id, email, status FROM contacts WHERE id IN ({_marks(contact_ids)})", contact_ids)}
        for (version_id, step_id), group in groups.items():
            flow = flows[version_id]
            left, again = _send_group(conn, now, flow, _step(flow, step_id), group, contacts)
            fast.difference_update(left)
            later.extend(again)
    rest = [i for i in ids if i not in fast]
    return rest + later


def _step(flow: dict[str, Any], step_id: str | None) -> dict[str, Any] | None:
    steps_by_id = flow.get("_by_id")
    if steps_by_id is None:
        steps_by_id = flow["_by_id"] = {s["id"]: s for s in flow["steps"]}
    return steps_by_id.get(step_id) if step_id is not None else None


def _send_group(conn: sqlite3.Connection, now: str, flow: dict[str, Any], step: dict[str, Any],
                group: list[sqlite3.Row], contacts: dict[str, tuple[str | None, str]]) -> tuple[set[int], list[int]]:
    """One email step's enrollments of the batch: (ids left to the per-enrollment path, ids
    whose next step is due at once)."""
    from marketing_cli.services.email.automated import queue_automated_messages

    first = group[0]
    rounds = [r[0] for r in conn.execute("SELECT campaign_id FROM automation_campaigns WHERE version_id = ?"
                                         " AND step_id = ? ORDER BY round", (first["version_id"], step["id"]))]
    left: set[int] = set()
    seen: set[str] = set()
    sending: list[sqlite3.Row] = []
    skipped: list[tuple[sqlite3.Row, str]] = []
    for r in group:
        email, status = contacts.get(r["contact_id"], (None, None))
        if r["contact_id"] in seen:  # enrolled twice in this batch: the second takes a later round
            left.add(r["id"])
        elif not email:
            skipped.append((r, "the contact has no email address"))
        elif status != "SUBSCRIBED":
            skipped.append((r, f"the contact is {status}, not SUBSCRIBED"))
        else:
            sending.append(r)
        seen.add(r["contact_id"])
    if sending and rounds:  # a contact the first round already has (re-entry) goes to a later round
        ids = [r["contact_id"] for r in sending]
        taken = {c[0] for c in conn.execute(f"SELECT contact_id FROM email_messages WHERE campaign_id = ?"
                                            f" AND contact_id IN ({_marks(ids)})", (rounds[0], *ids))}
        if taken:
            left.update(r["id"] for r in sending if r["contact_id"] in taken)
            sending = [r for r in sending if r["contact_id"] not in taken]
    campaign_id = None
    if sending:
        campaign_id = rounds[0] if rounds else new_round_campaign(
            conn, first["workspace_id"], first["automation_id"], first["version_id"], flow, step)
        queue_automated_messages(conn, campaign_id, [r["contact_id"] for r in sending])
        sent = [r["id"] for r in sending]
        conn.execute(_SENT_RUNS.format(marks=_marks(sent)), (step["id"], now, campaign_id, *sent))
    if skipped:
        conn.executemany(_SKIPPED_RUNS, [(r["id"], r["seq"], r["automation_id"], r["version_id"], step["id"], why,
                                          now) for r, why in skipped])
    moved = [r["id"] for r in sending] + [r["id"] for r, _ in skipped]
    if not moved:
        return left, []
    following = step.get("next")
    if following is None:
        conn.execute(_END.format(marks=_marks(moved)), (now, *moved))
        return left, []
    conn.execute(_NEXT.format(marks=_marks(moved)), (following, now, now, *moved))
    return left, moved
