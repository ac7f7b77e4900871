"""A flow's SMS step: one message written in the step's transaction, then handed over by the
SMS campaign path (docs/automations.md "SMS steps").

Like an email step, each SMS step has a hidden SMS campaign of its own per round
(`automation_sms_campaigns`, `sms_campaigns.automation_id`, left out of the campaign list):
sms_messages is unique on (campaign, contact), so a contact's second pass through the step
(reentry every_time) uses the next round. The campaign is QUEUED with `expanded_at` set from
the start, so it reserves nothing of the balance and has no audience to expand.

`queue_sms` writes, inside the step's transaction:

- the message row, rendered with the SMS campaigns' merge rules (services/sms/render.py),
  priced per segment by the workspace's price for the number's country (pricing.py), its
  links shortened when link tracking is on (links.py), `capped = 1` (it counts toward the
  frequency cap);
- its charge: one `charge` entry in the ledger (ledger.py) for the campaign and the
  message's own batch, so the unique (campaign, batch) key refuses a second charge;
- the `automations.sms` job (deduplicated per campaign), which hands the campaign's pending
  messages to the workspace's provider through `handoff.hand_off`: the quiet-hours gate
  (gate.py) holds those that may not be texted now and the job comes back when the first
  may go; a message the provider refuses is refunded, as a campaign's.

A contact without a number, unsubscribed from SMS, in a country without a price, or a
workspace whose available balance (balance less what queued campaigns reserve) is below the
message's price: the step is skipped with that reason (counted), and nothing is written.
"""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from typing import Any

from marketing_cli import jobs
from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.ids import new_id

JOB = "automations.sms"
CHECKPOINT_EVERY = 100  # ledger entries summed past the checkpoint before it moves forward
NO_PHONE = "the contact has no phone number"
NO_BALANCE = "insufficient SMS balance"


def _campaign(conn: sqlite3.Connection, ws: int, x: sqlite3.Row, flow: dict[str, Any], step: dict[str, Any],
              contact_id: str) -> str:
    """The first round of this step's SMS campaigns without a message for the contact (created if none).
    A round whose campaign is no longer QUEUED (cancelled by its id) takes no more messages."""
    found = conn.execute(
        "SELECT ac.campaign_id FROM automation_sms_campaigns ac JOIN sms_campaigns s ON s.id = ac.campaign_id"
        " AND s.status = 'QUEUED' WHERE ac.version_id = ? AND ac.step_id = ?"
        " AND NOT EXISTS (SELECT 1 FROM sms_messages m WHERE m.campaign_id = ac.campaign_id AND m.contact_id = ?)"
        " ORDER BY ac.round LIMIT 1", (x["version_id"], step["id"], contact_id)).fetchone()
    if found is not None:
        return found[0]
    round_ = conn.execute("SELECT coalesce(max(round), 0) + 1 FROM automation_sms_campaigns WHERE version_id = ?"
                          " AND step_id = ?", (x["version_id"], step["id"])).fetchone()[0]
    version = conn.execute("SELECT version FROM automation_versions WHERE id = ?", (x["version_id"],)).fetchone()[0]
    name = f"{flow['name']} v{version} / {step['id']}" + (f" ({round_})" if round_ > 1 else "")
    now, campaign_id = clock.now(), new_id()
    conn.execute("INSERT INTO sms_campaigns (id, workspace_id, name, message, audience, status, queued_at, expanded_at,"
                 " created_at, updated_at, automation_id) VALUES (?, ?, ?, ?, '[]', 'QUEUED', ?, ?, ?, ?, ?)",
                 (campaign_id, ws, name[:255], step["body"], now, now, now, now, x["automation_id"]))
    conn.execute("INSERT INTO automation_sms_campaigns (version_id, step_id, round, campaign_id) VALUES (?, ?, ?, ?)",
                 (x["version_id"], step["id"], round_, campaign_id))
    return campaign_id


def balance(conn: sqlite3.Connection, ws: int) -> Decimal:
    """ledger.balance, read from the checkpoint (sms_ledger_checkpoints) plus the entries after
    it, so a step's check does not grow with the ledger (one charge per automated text). The
    checkpoint moves forward, in the caller's transaction, once CHECKPOINT_EVERY entries follow it."""
    row = conn.execute("SELECT last_entry_id, total FROM sms_ledger_checkpoints WHERE workspace_id = ?",
                       (ws,)).fetchone()
    last, total = (row[0], Decimal(row[1])) if row is not None else (0, Decimal(0))
    newest, count = last, 0
    for entry_id, amount in conn.execute("SELECT id, amount FROM sms_ledger WHERE workspace_id = ? AND id > ?"
                                         " ORDER BY id", (ws, last)):
        total += Decimal(amount)
        newest, count = entry_id, count + 1
    if count >= CHECKPOINT_EVERY:
        from marketing_cli.services.sms.ledger import money

        conn.execute("INSERT INTO sms_ledger_checkpoints (workspace_id, last_entry_id, total) VALUES (?, ?, ?)"
                     " ON CONFLICT (workspace_id) DO UPDATE SET last_entry_id = excluded.last_entry_id,"
                     " total = excluded.total", (ws, newest, money(total)))
    return total


def unreachable(contact: sqlite3.Row) -> str | None:
    """Why the contact cannot get a text at all (as an SMS campaign's audience rule), or None."""
    if not contact["phone"]:
        return NO_PHONE
    if contact["sms_status"] not in (None, "SUBSCRIBED"):
        return f"the contact is {contact['sms_status']} for SMS"
    return None


def queue_sms(conn: sqlite3.Connection, ws: int, x: sqlite3.Row, flow: dict[str, Any], step: dict[str, Any],
              contact: sqlite3.Row) -> tuple[int | None, str | None]:
    """(the message id, None), or (None, why it was skipped). In the caller's transaction."""
    from marketing_cli.services.sms import ledger, links
    from marketing_cli.services.sms.pricing import country_of, price_units
    from marketing_cli.services.sms.render import Renderer
    from marketing_cli.services.sms.segments import count_segments

    phone = contact["phone"]
    why = unreachable(contact)
    if why is not None:
        return None, why
    try:
        renderer = Renderer(conn, ws, step["body"])
    except MktError as exc:  # a field renamed or deleted since publishing
        return None, f"the message cannot be rendered: {exc.message}"
    text = renderer.render(contact["email"], phone, contact["data"]) if renderer.has_tags else renderer.text
    country = country_of(phone)
    prices = price_units(conn, ws)
    if prices.get(country or "") is None:
        return None, f"no SMS price for the country of the number ({country or 'unknown'})"
    measure = count_segments(text)
    available = balance(conn, ws) - ledger.reserved(conn, ws)
    conn.execute("SAVEPOINT automation_sms")
    campaign_id = _campaign(conn, ws, x, flow, step, contact["id"])
    batch = (conn.execute("SELECT max(batch) FROM sms_messages WHERE campaign_id = ?",
                          (campaign_id,)).fetchone()[0] or 0) + 1
    message_id = conn.execute(
        "INSERT INTO sms_messages (campaign_id, contact_id, batch, phone, country, body, encoding, segments,"
        " price_units, status, created_at, capped) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, 1)",
        (campaign_id, contact["id"], batch, phone, country, text, measure.encoding, measure.segments,
         prices[country] * measure.segments, clock.now())).lastrowid
    if links.tracking_on(conn, ws) and links.find_urls(text):  # the text as sent: before the charge
        links.shorten_batch(conn, ws, campaign_id, batch, text, prices)
    units = conn.execute("SELECT price_units FROM sms_messages WHERE id = ?", (message_id,)).fetchone()[0]
    price = ledger.from_units(units)
    if available < price:
        conn.execute("ROLLBACK TO automation_sms")
        conn.execute("RELEASE automation_sms")
        return None, NO_BALANCE
    conn.execute("RELEASE automation_sms")
    ledger.append(conn, ws, "charge", -price, f"Automation '{flow['name']}', step {step['id']}: 1 message",
                  campaign_id=campaign_id, batch=batch)
    jobs.enqueue(conn, JOB, {"campaign_id": campaign_id}, workspace_id=ws, dedupe_key=f"{JOB}:{campaign_id}",
                 max_attempts=10)
    return message_id, None


@jobs.handler(JOB)
def hand_over(conn: sqlite3.Connection, payload: dict[str, Any]) -> None:
    """The campaign's pending messages to the provider through the quiet-hours gate; again at
    the instant the first held one may go. The campaign stays QUEUED (more messages come)."""
    from marketing_cli.services.sms.handoff import hand_off
    from marketing_cli.storage.db import transaction

    campaign = conn.execute("SELECT * FROM sms_campaigns WHERE id = ?", (payload["campaign_id"],)).fetchone()
    if campaign is None or campaign["status"] != "QUEUED" or campaign["automation_id"] is None:
        return
    handed = hand_off(conn, campaign)
    if isinstance(handed, str):
        with transaction(conn):
            jobs.enqueue(conn, JOB, {"campaign_id": campaign["id"]}, workspace_id=campaign["workspace_id"],
                         dedupe_key=f"{JOB}:{campaign['id']}", run_at=handed, max_attempts=10)


@jobs.gave_up(JOB)
def hand_over_gave_up(conn: sqlite3.Connection, payload: dict[str, Any], error: str) -> None:
    """The hand-over failed for good (its last attempt): no run would come for the messages it
    holds, charged and waiting. As an SMS campaign's job that gives up: the step's campaign is
    CANCELLED with the error, its messages never handed over are refunded; the step's next
    messages go into a new round."""
    from marketing_cli.services.sms import campaigns

    row = conn.execute("SELECT * FROM sms_campaigns WHERE id = ?", (payload["campaign_id"],)).fetchone()
    if row is None or row["status"] != "QUEUED" or row["automation_id"] is None:
        return
    detail = campaigns.JOB_FAILED.format(error=error if error.endswith(".") else error + ".")
    campaigns.stop_queued(conn, row, "stopped (its job failed)", detail)


def step_counters(conn: sqlite3.Connection, version_id: int, step_id: str) -> dict[str, Any]:
    """An SMS step's messages: sent (handed to the provider), delivered, failed, held by quiet
    hours, pending, and what they cost (charges less refunds)."""
    from marketing_cli.services.sms import ledger

    totals = dict.fromkeys(("messages", "sent", "delivered", "failed", "held", "pending"), 0)
    cost = ledger.from_units(0)
    for (campaign_id,) in conn.execute("SELECT campaign_id FROM automation_sms_campaigns WHERE version_id = ?"
                                       " AND step_id = ?", (version_id, step_id)).fetchall():
        row = conn.execute(
            "SELECT count(*) messages, count(handed_at) sent, count(delivered_at) delivered, count(failed_at) failed,"
            " coalesce(sum(CASE WHEN status = 'held' THEN 1 ELSE 0 END), 0) held,"
            " coalesce(sum(CASE WHEN status IN ('pending', 'sending') THEN 1 ELSE 0 END), 0) pending"
            " FROM sms_messages WHERE campaign_id = ?", (campaign_id,)).fetchone()
        for key in totals:
            totals[key] += row[key]
        cost += ledger.campaign_cost(conn, campaign_id)
    return {**totals, "cost": ledger.money(cost)}
