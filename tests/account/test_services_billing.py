from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from decimal import Decimal

import pytest

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.account import billing


def resources(conn: sqlite3.Connection, ws: int) -> dict[str, tuple[int, int]]:
    return {r["name"]: (r["used"], r["allowed"]) for r in billing.get_billing(conn, ws)["resources"]}


def test_billing_shape(conn: sqlite3.Connection, workspace: dict) -> None:
    info = billing.get_billing(conn, workspace["id"])
    sub = info["subscription"]
    assert set(sub) == {"plan_id", "plan_name", "status", "current_period_start", "current_period_end",
                        "cancel_at_period_end", "next_invoice_total", "addons"}
    assert sub["plan_name"] == "free" and sub["status"] == "active" and sub["next_invoice_total"] == Decimal("0.00")
    assert [r["name"] for r in info["resources"]] == list(billing.RESOURCES)
    assert all(set(r) == {"name", "used", "allowed"} for r in info["resources"])


def test_plan_addons_and_invoice_total(conn: sqlite3.Connection, workspace: dict) -> None:
    ws = workspace["id"]
    info = billing.set_plan(conn, ws, "pro")
    assert info["subscription"]["plan_name"] == "pro"
    assert resources(conn, ws)["contacts"][1] == 100000
    info = billing.set_addon(conn, ws, "extra_contacts_10k", 2)
    info = billing.set_addon(conn, ws, "dedicated_ip", 1)
    sub = info["subscription"]
    assert sub["next_invoice_total"] == Decimal("49.00") + 2 * Decimal("15.00") + Decimal("30.00")
    assert [(a["name"], a["quantity"], a["price"]) for a in sub["addons"]] == [
        ("extra_contacts_10k", 2, Decimal("15.00")), ("dedicated_ip", 1, Decimal("30.00"))]
    assert resources(conn, ws)["contacts"][1] == 120000
    billing.set_addon(conn, ws, "extra_contacts_10k", 0)
    assert resources(conn, ws)["contacts"][1] == 100000
    with pytest.raises(MktError, match="no add-on named 'gold'"):
        billing.set_addon(conn, ws, "gold", 1)


def test_unknown_plan_and_resource(conn: sqlite3.Connection, workspace: dict) -> None:
    with pytest.raises(MktError, match=r"There is no plan named 'platinum'. Plans: free, pro."):
        billing.set_plan(conn, workspace["id"], "platinum")
    with pytest.raises(MktError, match="no resource named 'bananas'"):
        billing.set_allowance(conn, workspace["id"], "bananas", 3)
    with pytest.raises(MktError, match="0 or more"):
        billing.set_allowance(conn, workspace["id"], "contacts", -1)


def test_allowance_override_and_reset(conn: sqlite3.Connection, workspace: dict) -> None:
    ws = workspace["id"]
    billing.set_allowance(conn, ws, "segments", 42)
    assert resources(conn, ws)["segments"] == (0, 42)
    billing.set_plan(conn, ws, "pro")  # the override outlives a plan change
    assert resources(conn, ws)["segments"] == (0, 42)
    billing.set_allowance(conn, ws, "segments", None)
    assert resources(conn, ws)["segments"] == (0, 250)


def test_the_reservations_allowance_is_the_one_billing_shows(conn: sqlite3.Connection, workspace: dict) -> None:
    """billing.ALLOWANCE (read by `reserve` with the counter row it locks) gives every resource
    the allowance get_billing shows: the plan's, plus add-ons, unless overridden."""
    ws = workspace["id"]

    def allowance(resource: str) -> int:
        return conn.execute(f"SELECT {billing.ALLOWANCE}", {"ws": ws, "resource": resource}).fetchone()[0]

    for step in (lambda: None, lambda: billing.set_plan(conn, ws, "pro"),
                 lambda: billing.set_addon(conn, ws, "extra_contacts_10k", 3),
                 lambda: billing.set_allowance(conn, ws, "contacts", 7),
                 lambda: billing.set_allowance(conn, ws, "hourly_emails", 0)):
        step()
        shown = resources(conn, ws)
        assert {r: allowance(r) for r in billing.RESOURCES} == {r: shown[r][1] for r in billing.RESOURCES}
    assert allowance("contacts") == 7 and allowance("hourly_emails") == 0
    billing.set_allowance(conn, ws, "contacts", None)
    assert allowance("contacts") == resources(conn, ws)["contacts"][1] == 130000
    assert allowance("nonsense") == 0


def test_leaving_pro_turns_conversion_tracking_off(conn: sqlite3.Connection, workspace: dict) -> None:
    from marketing_cli.services.account import workspaces

    billing.set_plan(conn, workspace["id"], "pro")
    workspaces.update_workspace(conn, workspace["id"], {"name": "Shop", "conversion_tracking": True})
    billing.set_plan(conn, workspace["id"], "free")
    assert workspaces.get_workspace_info(conn, workspace["id"])["workspace"]["conversion_tracking"] is False


def test_usage_counters_follow_the_data(conn: sqlite3.Connection, workspace: dict) -> None:
    ws = workspace["id"]
    now = clock.now()
    conn.executemany(
        "INSERT INTO contacts (id, workspace_id, email, status, created_at, updated_at) VALUES (?, ?, ?, 'SUBSCRIBED', ?, ?)",
        [(f"{i:024x}", ws, f"c{i}@example.com", now, now) for i in range(5)],
    )
    assert resources(conn, ws)["contacts"][0] == 5
    conn.execute("DELETE FROM contacts WHERE id = ?", (f"{0:024x}",))
    assert resources(conn, ws)["contacts"][0] == 4
    assert billing.remaining(conn, ws, "contacts") == 1000 - 4


def test_hourly_emails_count_only_the_current_hour(conn: sqlite3.Connection, workspace: dict,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace["id"]
    first = datetime(2026, 11, 22, 10, 59, tzinfo=timezone.utc)
    monkeypatch.setattr(clock, "utcnow", lambda: first)
    billing.bump_usage(conn, ws, "hourly_emails", 7)
    billing.bump_usage(conn, ws, "monthly_emails", 7)
    assert resources(conn, ws)["hourly_emails"][0] == 7
    monkeypatch.setattr(clock, "utcnow", lambda: datetime(2026, 11, 22, 11, 0, tzinfo=timezone.utc))
    assert resources(conn, ws)["hourly_emails"][0] == 0
    assert resources(conn, ws)["monthly_emails"][0] == 7
    monkeypatch.setattr(clock, "utcnow", lambda: datetime(2026, 12, 1, 0, 0, tzinfo=timezone.utc))
    assert resources(conn, ws)["monthly_emails"][0] == 0


@pytest.mark.sqlite_only  # SQLite's query plan
def test_usage_is_read_by_seeks_whatever_the_past_periods(conn: sqlite3.Connection, workspace: dict,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A year of hourly counters (one row per hour of sending) is never read: one seek per resource."""
    ws = workspace["id"]
    monkeypatch.setattr(clock, "utcnow", lambda: datetime(2026, 11, 22, 10, 30, tzinfo=timezone.utc))
    past = [(ws, "hourly_emails", f"2026-{m:02d}-{d:02d}T{h:02d}", 5) for m in range(1, 11) for d in range(1, 29)
            for h in range(24)]
    past += [(ws, r, f"2026-{m:02d}", 9) for r in ("monthly_emails", "events") for m in range(1, 11)]
    conn.executemany("INSERT INTO usage_counters (workspace_id, resource, period, used) VALUES (?, ?, ?, ?)", past)
    billing.bump_usage(conn, ws, "hourly_emails", 3)
    billing.bump_usage(conn, ws, "monthly_emails", 4)
    assert resources(conn, ws)["hourly_emails"][0] == 3
    assert resources(conn, ws)["monthly_emails"][0] == 4
    assert resources(conn, ws)["events"][0] == 0
    plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + billing.LIMITS_AND_USAGE, billing.limits_params(ws))]
    seeks = [step for step in plan if step.startswith("SEARCH usage_counters")]
    assert seeks == ["SEARCH usage_counters USING PRIMARY KEY (workspace_id=? AND resource=? AND period=?)"] * 3, plan
    assert not any(step.startswith("SCAN") for step in plan), plan


def test_plan_catalog(conn: sqlite3.Connection) -> None:
    plans = {p["name"]: p for p in billing.list_plans(conn)}
    assert plans["free"]["conversion_tracking"] is False and plans["pro"]["conversion_tracking"] is True
    assert set(plans["free"]["allowances"]) == set(billing.RESOURCES)
