"""The A/B test's winner, as a job (services/delivery/sender.py sends both shares).

    email.ab_winner    after the test share went out and `wait_minutes` passed (finish.py
                       queues it): the variant with the higher unique open (or click) rate,
                       ties A, goes to the rest

The rest (the holdout, email_ab_holdout) becomes messages of the winning variant in one
transaction, with the decision (winner, rates, when) kept in the campaign's `ab_test`, and
the send job is queued again to send them. A winner job that fails for good pauses the
campaign like a send job (sender.py's `send_gave_up`).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from marketing_cli import jobs
from marketing_cli.kernel import clock
from marketing_cli.services.delivery.finish import again_at
from marketing_cli.services.email import stats
from marketing_cli.services.email.preparation import load_campaign, load_variants
from marketing_cli.storage.db import transaction


def winner_rates(conn: sqlite3.Connection, campaign_id: str, criterion: str) -> dict[str, float]:
    """Each variant's unique open (or click) rate among its delivered messages."""
    column = "opened" if criterion == "OPENS" else "clicked"  # one of two fixed names of ours
    rates = {}
    for r in conn.execute(f"SELECT v.type, coalesce(k.delivered, 0) AS delivered, coalesce(k.{column}, 0) AS hits"
                          " FROM campaign_variants v LEFT JOIN email_campaign_counters k"
                          " ON k.campaign_id = v.campaign_id AND k.variant_id = v.id"
                          " WHERE v.campaign_id = ? ORDER BY v.type", (campaign_id,)):
        rates[r["type"]] = r["hits"] / r["delivered"] if r["delivered"] else 0.0
    return rates


@jobs.handler("email.ab_winner")
def pick_winner(conn: sqlite3.Connection, payload: dict[str, Any]) -> None:
    row = load_campaign(conn, payload["campaign_id"])
    if row is None or row["status"] != "SENDING" or not row["ab_test"]:
        return
    settings = json.loads(row["ab_test"])
    rates = winner_rates(conn, row["id"], settings["winner_criterion"])
    winner = "B" if rates.get("B", 0.0) > rates.get("A", 0.0) else "A"
    variant_id = load_variants(conn, row["id"])[winner]["id"]
    domain = "lower(substr(email, instr(email, '@') + 1))"
    with transaction(conn):
        conn.execute(  # in contact_id order, the holdout's key order (the message ids are the same on both engines)
            "INSERT OR IGNORE INTO email_messages (campaign_id, variant_id, contact_id, email, domain, provider,"
            f" created_at) SELECT campaign_id, ?, contact_id, email, {domain}, {stats.provider_sql(conn, domain)},"
            " ? FROM email_ab_holdout WHERE campaign_id = ? ORDER BY contact_id", (variant_id, clock.now(), row["id"]))
        conn.execute("DELETE FROM email_ab_holdout WHERE campaign_id = ?", (row["id"],))
        decision = {**settings, "winner": winner, "rates": rates, "decided_at": clock.now()}
        conn.execute("UPDATE campaigns SET ab_test = ? WHERE id = ?", (json.dumps(decision), row["id"]))
        again_at(conn, row, clock.now())
