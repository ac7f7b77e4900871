"""A backfill keeps a cooldown flow's re-entry policy: a contact that entered less than the
cooldown ago is neither counted nor enrolled, as for an event or a contact added by hand.
Regression: the backfill enrolled it again at once (its entry key is new each time), so a
weekly backfill from cron re-ran a cooldown flow for everyone who had just been through it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.automations import triggers
from tests import factories as f


def test_backfill_waits_for_the_cooldown(conn: Any, workspace: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    now = f.FixedClock(datetime(2026, 11, 25, 9, 0, tzinfo=UTC))
    monkeypatch.setattr(clock, "utcnow", now)
    ws = workspace["id"]
    ann = f.contact(conn, ws, "ann@example.com")["id"]
    flow = f.automation(conn, ws, {"name": "Cooling", "reentry": "cooldown", "cooldown": {"days": 7},
                                   "triggers": [{"type": "manual"}],
                                   "steps": [{"id": "w", "type": "wait", "duration": {"hours": 1}}]})
    assert triggers.backfill(conn, ws, flow["id"], {})["enrolled"] == 1
    now.advance(hours=2)
    f.run_automations(conn)  # Ann has completed the flow
    bob = f.contact(conn, ws, "bob@example.com")["id"]

    counted = triggers.backfill(conn, ws, flow["id"], {"dry_run": True})
    assert counted["count"] == 1  # Bob only: Ann entered 2 hours ago
    assert triggers.backfill(conn, ws, flow["id"], {})["enrolled"] == 1
    entered = conn.execute("SELECT contact_id FROM automation_enrollments ORDER BY id").fetchall()
    assert [r[0] for r in entered] == [ann, bob]
    with pytest.raises(MktError) as refused:  # by hand, the same rule
        triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": ann})
    assert refused.value.status == 409

    now.advance(days=7)  # the cooldown is over for both
    f.run_automations(conn)
    assert triggers.backfill(conn, ws, flow["id"], {})["enrolled"] == 2
