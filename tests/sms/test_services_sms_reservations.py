"""Money under concurrency: scheduling checks the balance and reserves the campaign's estimate
in one write transaction, so campaigns scheduled at once never commit more than the balance."""

from __future__ import annotations

import sqlite3
import threading
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from marketing_cli import jobs
from marketing_cli.errors import MktError
from marketing_cli.services.sms import campaigns, ledger, schedule
from marketing_cli.storage.db import connect
from tests import factories as f

US = ["+14155550101", "+14155550102", "+14155550103"]
NOW = {"schedule_type": "NOW"}


@pytest.fixture
def ws(conn: sqlite3.Connection, workspace: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> int:
    """A balance of $0.03 (the minimum lowered to $0.001), three US numbers: one campaign to
    them is estimated at $0.0249, so the balance covers one and not two."""
    monkeypatch.setenv("MKT_SMS_MINIMUM_BALANCE", "0.001")
    f.sms_ready(conn, workspace["id"], balance="0.03")
    f.sms_contacts(conn, workspace["id"], US, first_name="Ann")
    return workspace["id"]


def running_balances(conn: sqlite3.Connection, ws: int) -> list[Decimal]:
    return [Decimal(h["balance_after"]) for h in ledger.ledger_history(conn, ws)]


def test_two_campaigns_scheduled_at_once_cannot_spend_the_same_balance(
        conn: sqlite3.Connection, ws: int, db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = (f.sms_campaign(conn, ws, name) for name in ("First", "Second"))
    assert schedule.estimate_cost(conn, ws, first["message"], first["audience"]) == (Decimal("0.0249"), 3)
    real = schedule.estimate_cost

    def slow_estimate(*args: Any) -> Any:  # widen the window between the balance read and the write
        result = real(*args)
        time.sleep(0.2)
        return result

    monkeypatch.setattr(schedule, "estimate_cost", slow_estimate)
    barrier = threading.Barrier(2)
    outcomes: dict[str, Any] = {}

    def schedule_from_another_process(campaign_id: str) -> None:
        own = connect(db_path)  # a connection of its own, as the CLI and the API each have
        try:
            barrier.wait()
            outcomes[campaign_id] = schedule.schedule_campaign(own, ws, campaign_id, NOW)["status"]
        except MktError as error:
            outcomes[campaign_id] = error.message
        finally:
            own.close()

    threads = [threading.Thread(target=schedule_from_another_process, args=(c["id"],)) for c in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(outcomes.values()) == sorted([
        "QUEUED",
        "Your available SMS balance is $0.01 ($0.02 of your $0.03 is reserved by campaigns already queued), but"
        " this campaign is estimated to cost $0.02 (3 recipients). Add to the balance with `mkt sms balance add AMOUNT`.",
    ])
    winner = next(cid for cid, outcome in outcomes.items() if outcome == "QUEUED")
    loser = first["id"] if winner == second["id"] else second["id"]
    assert campaigns.get_campaign(conn, ws, loser)["status"] == "DRAFT"
    assert conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == 1
    assert ledger.reserved(conn, ws) == Decimal("0.0249")
    assert jobs.run_due(conn) == {"processed": 1, "failed": 0}
    assert campaigns.get_campaign(conn, ws, winner)["status"] == "COMPLETED"
    assert ledger.reserved(conn, ws) == 0  # charged for real now
    assert min(running_balances(conn, ws)) >= 0
    assert ledger.balance(conn, ws) == Decimal("0.0051")


def test_a_reservation_lasts_until_the_campaign_is_charged_or_cancelled(conn: sqlite3.Connection, ws: int,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from marketing_cli.services.sms import recipients

    monkeypatch.setenv("MKT_SMS_BATCH_SIZE", "2")
    campaign = f.sms_campaign(conn, ws)
    schedule.schedule_campaign(conn, ws, campaign["id"], NOW)
    assert ledger.reserved(conn, ws) == Decimal("0.0249")
    other = f.sms_campaign(conn, ws, "Other")
    with pytest.raises(MktError) as err:
        schedule.schedule_campaign(conn, ws, other["id"], NOW)
    assert "is reserved by campaigns already queued" in err.value.message
    real, calls = jobs.heartbeat, {"n": 0}

    def die_after_the_first_batch(c: sqlite3.Connection) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("worker killed")
        real(c)

    monkeypatch.setattr(jobs, "heartbeat", die_after_the_first_batch)
    assert jobs.run_due(conn) == {"processed": 1, "failed": 1}
    # Two of three recipients charged: what they cost left the balance, the rest stays reserved.
    assert ledger.balance(conn, ws) == Decimal("0.03") - Decimal("0.0166")
    assert ledger.reserved(conn, ws) == Decimal("0.0083")
    campaigns.cancel_campaign(conn, ws, campaign["id"])  # refunds the two pending messages
    assert ledger.reserved(conn, ws) == 0 and ledger.balance(conn, ws) == Decimal("0.03")
    assert schedule.schedule_campaign(conn, ws, other["id"], NOW)["status"] == "QUEUED"
    monkeypatch.setattr(jobs, "heartbeat", real)
    row = conn.execute("SELECT * FROM sms_campaigns WHERE id = ?", (other["id"],)).fetchone()
    assert recipients.expand_recipients(conn, row) is True
    assert ledger.reserved(conn, ws) == 0 and ledger.balance(conn, ws) == Decimal("0.0051")


def test_the_minimum_is_checked_against_the_available_balance(conn: sqlite3.Connection, ws: int,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    schedule.schedule_campaign(conn, ws, f.sms_campaign(conn, ws)["id"], NOW)
    monkeypatch.setenv("MKT_SMS_MINIMUM_BALANCE", "0.02")
    with pytest.raises(MktError) as err:
        schedule.schedule_campaign(conn, ws, f.sms_campaign(conn, ws, "Other")["id"], NOW)
    assert err.value.message == ("Your available SMS balance is $0.01, but at least $0.02 is required to start a"
                                 " campaign. Please visit Billing to top up your SMS balance.")
