"""The prepaid SMS balance, the SMS sender ID and the scheduling minimum.

The balance is an append-only ledger (`sms_ledger`): top-ups (operator, `mkt sms balance
add`), charges (one per expansion batch of a campaign, negative) and refunds (messages of
a cancelled campaign that never reached a provider). Every entry names its reason and,
for charges and refunds, its campaign. The balance is the sum of the entries, computed
with Decimal; amounts are stored as decimal strings. Nothing updates or deletes an entry
(a trigger refuses it).

Scheduling a campaign needs an available balance (the balance less what queued campaigns
have reserved, `reserved`) of at least the scheduling minimum: USD 5.00 by default, set with
the `MKT_SMS_MINIMUM_BALANCE` environment variable (a decimal > 0), and of at least the
campaign's estimated cost, which it then reserves in the same transaction.
"""

from __future__ import annotations

import os
import re
import sqlite3
from decimal import Decimal, InvalidOperation
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.storage.db import transaction

DEFAULT_MINIMUM = Decimal("5.00")
MINIMUM_ENV = "MKT_SMS_MINIMUM_BALANCE"
UNITS = Decimal("0.00001")       # message charges are integers of this (price_units)
MAX_TOP_UP = Decimal("1000000")
KINDS = ("top_up", "charge", "refund")

_ALPHANUMERIC_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ]{0,10}")


def money(value: Decimal) -> str:
    """A ledger amount as text: at least two decimals, at most five, no exponent."""
    value = value.quantize(UNITS)
    text = f"{value:.5f}".rstrip("0")
    whole, _, frac = text.partition(".")
    return f"{whole}.{frac.ljust(2, '0')}"


def from_units(units: int) -> Decimal:
    return Decimal(units).scaleb(-5)


def scheduling_minimum() -> Decimal:
    """The minimum balance to schedule a campaign (MKT_SMS_MINIMUM_BALANCE, default 5.00)."""
    raw = os.environ.get(MINIMUM_ENV, "").strip()
    if not raw:
        return DEFAULT_MINIMUM
    try:
        value = Decimal(raw)
    except InvalidOperation:
        value = Decimal("NaN")
    if not value.is_finite() or value <= 0:
        raise MktError(500, f"{MINIMUM_ENV} must be a decimal amount greater than 0, not '{raw}'.")
    return value


def balance(conn: sqlite3.Connection, workspace_id: int) -> Decimal:
    """The sum of the ledger (Decimal; the entries are few: one per batch, not per message)."""
    total = Decimal(0)
    for (amount,) in conn.execute("SELECT amount FROM sms_ledger WHERE workspace_id = ?", (workspace_id,)):
        total += Decimal(amount)
    return total


def reserved(conn: sqlite3.Connection, workspace_id: int) -> Decimal:
    """What the workspace's QUEUED campaigns still hold of the balance: each one's estimated
    cost (set when it was scheduled) less what its batches have charged so far, until its
    expansion is done. A campaign that leaves QUEUED holds nothing (cancelled: refunded;
    completed: charged for real)."""
    total = Decimal(0)
    for campaign_id, estimate in conn.execute(
            "SELECT id, estimated_cost FROM sms_campaigns WHERE workspace_id = ? AND status = 'QUEUED'"
            " AND expanded_at IS NULL AND estimated_cost IS NOT NULL", (workspace_id,)).fetchall():
        charged = Decimal(0)
        for (amount,) in conn.execute("SELECT amount FROM sms_ledger WHERE campaign_id = ? AND kind = 'charge'",
                                      (campaign_id,)):
            charged -= Decimal(amount)
        total += max(Decimal(0), Decimal(estimate) - charged)
    return total


def show_balance(conn: sqlite3.Connection, workspace_id: int) -> dict[str, Any]:
    """`mkt sms balance show`: {"balance": "<decimal string>"}."""
    return {"balance": money(balance(conn, workspace_id))}


def append(conn: sqlite3.Connection, workspace_id: int, kind: str, amount: Decimal, reason: str, *,
           campaign_id: str | None = None, batch: int | None = None) -> dict[str, Any]:
    """Add one ledger entry (joins the caller's transaction)."""
    assert kind in KINDS
    now = clock.now()
    entry_id = conn.execute(
        "INSERT INTO sms_ledger (workspace_id, kind, amount, campaign_id, batch, reason, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (workspace_id, kind, money(amount), campaign_id, batch, reason, now),
    ).lastrowid
    return {"id": entry_id, "kind": kind, "amount": money(amount), "campaign_id": campaign_id, "batch": batch,
            "reason": reason, "created_at": now}


def spending(conn: sqlite3.Connection, workspace_id: int) -> dict[str, str]:
    """The dashboard's SMS money: {"balance", "reserved", "spent"} as decimal strings; `spent`
    is every campaign's charges less refunds (what `total_cost` sums to over the campaigns)."""
    spent = Decimal(0)
    for (amount,) in conn.execute("SELECT amount FROM sms_ledger WHERE workspace_id = ? AND kind IN ('charge', 'refund')",
                                  (workspace_id,)):
        spent -= Decimal(amount)
    return {"balance": money(balance(conn, workspace_id)), "reserved": money(reserved(conn, workspace_id)),
            "spent": money(spent)}


def parse_amount(value: Any) -> Decimal:
    text = str(value).strip().lstrip("$") if value is not None else ""
    try:
        amount = Decimal(text)
    except InvalidOperation:
        amount = Decimal("NaN")
    if not amount.is_finite() or amount <= 0 or amount > MAX_TOP_UP or amount.as_tuple().exponent < -2:
        raise MktError(400, f"'{value}' is not an amount: give USD greater than 0 and at most "
                            f"{MAX_TOP_UP:,}, with at most two decimals.")
    return amount


def add_balance(conn: sqlite3.Connection, workspace_id: int, amount: Any, reason: str | None = None) -> dict[str, Any]:
    """`mkt sms balance add AMOUNT` (operator only): a top-up entry; returns the new balance."""
    value = parse_amount(amount)
    note = (reason or "").strip() or "Top-up by the operator"
    with transaction(conn):
        append(conn, workspace_id, "top_up", value, note)
        return show_balance(conn, workspace_id)


def ledger_history(conn: sqlite3.Connection, workspace_id: int, *, campaign_id: str | None = None,
                   limit: int = 100) -> list[dict[str, Any]]:
    """`mkt sms balance history`: the newest entries first, each with the balance after it."""
    if not 1 <= limit <= 10_000:
        raise MktError(400, "The limit must be between 1 and 10000.")
    rows = conn.execute("SELECT * FROM sms_ledger WHERE workspace_id = ? ORDER BY id", (workspace_id,)).fetchall()
    running, out = Decimal(0), []
    for row in rows:
        running += Decimal(row["amount"])
        if campaign_id is None or row["campaign_id"] == campaign_id:
            out.append({"id": row["id"], "kind": row["kind"], "amount": row["amount"],
                        "campaign_id": row["campaign_id"], "batch": row["batch"], "reason": row["reason"],
                        "balance_after": money(running), "created_at": row["created_at"]})
    return out[::-1][:limit]


def campaign_cost(conn: sqlite3.Connection, campaign_id: str) -> Decimal:
    """Charges minus refunds of one campaign (a positive amount: what it really cost)."""
    total = Decimal(0)
    for (amount,) in conn.execute("SELECT amount FROM sms_ledger WHERE campaign_id = ? AND kind IN ('charge', 'refund')",
                                  (campaign_id,)):
        total -= Decimal(amount)
    return total


def check_sender_id(value: Any) -> str:
    """An alphanumeric sender ID (1-11 letters, digits or spaces, at least one letter) or an
    E.164 number."""
    text = str(value).strip() if value is not None else ""
    if text.startswith("+"):
        import phonenumbers

        try:
            number = phonenumbers.parse(text, None)
        except phonenumbers.NumberParseException:
            number = None
        if number is None or not phonenumbers.is_valid_number(number):
            raise MktError(400, f"'{value}' is not a valid E.164 phone number.")
        return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
    if not _ALPHANUMERIC_ID.fullmatch(text) or not any(ch.isalpha() for ch in text):
        raise MktError(400, f"'{value}' is not a valid SMS sender ID: use 1-11 letters, digits or spaces "
                            "with at least one letter, or a phone number in E.164 form (+14155550100).")
    return text


def set_sender_id(conn: sqlite3.Connection, workspace_id: int, value: Any) -> dict[str, Any]:
    """`mkt sms sender-id set VALUE` (operator only)."""
    sender = check_sender_id(value)
    with transaction(conn):
        if conn.execute("UPDATE workspaces SET sms_sender_id = ? WHERE id = ?", (sender, workspace_id)).rowcount != 1:
            raise MktError(404, "The workspace does not exist.")
    return {"sms_sender_id": sender}


def get_sender_id(conn: sqlite3.Connection, workspace_id: int) -> dict[str, Any]:
    row = conn.execute("SELECT sms_sender_id FROM workspaces WHERE id = ?", (workspace_id,)).fetchone()
    return {"sms_sender_id": row["sms_sender_id"] if row else None}
