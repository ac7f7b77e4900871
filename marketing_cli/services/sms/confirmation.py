"""The one text that confirms a revocation (47 CFR 64.1200(a)(12): a single confirmation, sent
within 5 minutes, that says the person will get no more texts; docs/sms.md "Replies and revocation").

A confirmation goes the way an automation step's text goes (services/automations/sms.py), so it
is priced, charged, handed over and reported like any other text:

- `queue_confirmation`, in the reply's transaction, writes the message row (pending, its own
  body, priced per segment at the workspace's price for the number's country), its charge on
  the ledger (one `charge` entry for the message's own batch: the unique (campaign, batch) key
  refuses a second one), and the `sms.confirmation` job (deduplicated per campaign);
- right after that transaction, the inbound webhook hands it over itself (`send_now`), so a
  confirmation never waits for a worker busy with a long campaign (the job queue runs one job
  per worker at a time); the job is the durable path: it hands over whatever is still pending
  (the webhook's attempt failed, or its process died), through `handoff.hand_off` as a
  campaign's messages go: a message the provider refuses is refunded.

The messages live in hidden campaigns of the workspace (`sms_campaigns.purpose` =
'confirmation', QUEUED and expanded from the start, left out of the campaign list). As
sms_messages is unique on (campaign, contact), a contact's second confirmation (STOP, START,
then STOP again) goes into the next round's campaign. Two things set a confirmation apart from
marketing in the hand-off: the quiet-hours gate lets it through at any hour (it answers the
person's own text and is due within 5 minutes), MKT_SMS_RATE does not space it (it would wait
behind the starts a running campaign has booked), and the check that drops messages to
contacts who revoked does not apply (it is sent because they did).

Only a reply that changed a contact's SMS status earns one, so a number already unsubscribed
never gets a second. A number in a country without a price gets none (nothing can be charged
for it; logged). Through Twilio, a reply that is exactly one of Twilio's own opt-out keywords
is confirmed by Twilio itself, which then refuses mkt's text (error 21610): that message is
recorded failed and refunded, and the person still gets exactly one confirmation.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any

from marketing_cli import jobs
from marketing_cli.kernel import clock
from marketing_cli.kernel.ids import new_id
from marketing_cli.services.sms import ledger, revocation

log = logging.getLogger("mkt.sms")

JOB = "sms.confirmation"
PURPOSE = "confirmation"
CAMPAIGN_NAME = "Revocation confirmations"
MAX_NAME = 40  # of the workspace's name in the text: the confirmation stays one segment


def _campaign(conn: sqlite3.Connection, workspace_id: int, contact_id: str) -> str:
    """The first confirmation campaign of the workspace without a message for the contact (created if none)."""
    found = conn.execute(
        "SELECT s.id FROM sms_campaigns s WHERE s.workspace_id = ? AND s.purpose = ? AND s.status = 'QUEUED'"
        " AND NOT EXISTS (SELECT 1 FROM sms_messages m WHERE m.campaign_id = s.id AND m.contact_id = ?)"
        " ORDER BY s.created_at, s.id LIMIT 1", (workspace_id, PURPOSE, contact_id)).fetchone()
    if found is not None:
        return found[0]
    rounds = conn.execute("SELECT count(*) FROM sms_campaigns WHERE workspace_id = ? AND purpose = ?",
                          (workspace_id, PURPOSE)).fetchone()[0]
    now, campaign_id = clock.now(), new_id()
    name = CAMPAIGN_NAME + (f" ({rounds + 1})" if rounds else "")
    conn.execute("INSERT INTO sms_campaigns (id, workspace_id, name, message, audience, status, queued_at, expanded_at,"
                 " created_at, updated_at, purpose) VALUES (?, ?, ?, '', '[]', 'QUEUED', ?, ?, ?, ?, ?)",
                 (campaign_id, workspace_id, name, now, now, now, now, PURPOSE))
    return campaign_id


def wording(conn: sqlite3.Connection, workspace_id: int, language: str | None) -> str:
    """The confirmation's text for a reply read in `language`, naming the workspace."""
    name = conn.execute("SELECT name FROM workspaces WHERE id = ?", (workspace_id,)).fetchone()[0] or ""
    name = name if len(name) <= MAX_NAME else name[:MAX_NAME - 1].rstrip() + "…"
    return revocation.confirmation_text(revocation.table_for_replies(), language, name)


def queue_confirmation(conn: sqlite3.Connection, workspace_id: int, contact_id: str, phone: str,
                       language: str | None) -> int | None:
    """The confirmation's message id, charged and queued, or None when the number's country has no
    price. In the caller's transaction (the reply's)."""
    from marketing_cli.services.sms.pricing import country_of, price_units
    from marketing_cli.services.sms.segments import count_segments

    text = wording(conn, workspace_id, language)
    country = country_of(phone)
    price = price_units(conn, workspace_id).get(country or "")
    if price is None:
        log.warning("workspace %s: no confirmation text for a revocation from a number of %s: no SMS price for that "
                    "country", workspace_id, country or "an unknown country")
        return None
    measure = count_segments(text)
    campaign_id = _campaign(conn, workspace_id, contact_id)
    batch = (conn.execute("SELECT max(batch) FROM sms_messages WHERE campaign_id = ?",
                          (campaign_id,)).fetchone()[0] or 0) + 1
    units = price * measure.segments
    message_id = conn.execute(
        "INSERT INTO sms_messages (campaign_id, contact_id, batch, phone, country, body, encoding, segments,"
        " price_units, status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?)",
        (campaign_id, contact_id, batch, phone, country, text, measure.encoding, measure.segments, units,
         clock.now())).lastrowid
    ledger.append(conn, workspace_id, "charge", -ledger.from_units(units), "Revocation confirmation: 1 message",
                  campaign_id=campaign_id, batch=batch)
    jobs.enqueue(conn, JOB, {"campaign_id": campaign_id}, workspace_id=workspace_id, dedupe_key=f"{JOB}:{campaign_id}",
                 max_attempts=10)
    return message_id


def send_now(conn: sqlite3.Connection, message_id: int) -> None:
    """Hand the confirmation over at once, right after the reply's transaction (the inbound
    webhook): a worker busy with a long send must not hold it past 5 minutes. Whatever goes
    wrong is logged and left to the queued job, which hands over what is still pending."""
    row = conn.execute("SELECT campaign_id FROM sms_messages WHERE id = ?", (message_id,)).fetchone()
    if row is None:
        return
    try:
        hand_over(conn, {"campaign_id": row[0]})
    except Exception:  # noqa: BLE001 - the revocation is committed; the job tries again
        log.exception("confirmation %s: handing it over at once failed; its job will try again", message_id)
        if conn.in_transaction:
            conn.execute("ROLLBACK")


@jobs.handler(JOB)
def hand_over(conn: sqlite3.Connection, payload: dict[str, Any]) -> None:
    """The campaign's pending confirmations to the provider (no quiet hours, no pacing: handoff.py)."""
    from marketing_cli.services.sms.handoff import hand_off

    campaign = conn.execute("SELECT * FROM sms_campaigns WHERE id = ?", (payload["campaign_id"],)).fetchone()
    if campaign is None or campaign["status"] != "QUEUED" or campaign["purpose"] != PURPOSE:
        return
    hand_off(conn, campaign)


@jobs.gave_up(JOB)
def hand_over_gave_up(conn: sqlite3.Connection, payload: dict[str, Any], error: str) -> None:
    """The hand-over failed for good: as an SMS campaign's job that gives up, the campaign is
    CANCELLED with the error and what it never handed over is refunded; the next confirmation
    opens a new round."""
    from marketing_cli.services.sms import campaigns

    row = conn.execute("SELECT * FROM sms_campaigns WHERE id = ?", (payload["campaign_id"],)).fetchone()
    if row is None or row["status"] != "QUEUED" or row["purpose"] != PURPOSE:
        return
    detail = campaigns.JOB_FAILED.format(error=error if error.endswith(".") else error + ".")
    campaigns.stop_queued(conn, row, "stopped (its job failed)", detail)
