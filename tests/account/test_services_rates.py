from __future__ import annotations

import sqlite3
from decimal import Decimal
from pathlib import Path

import pytest

from marketing_cli.errors import MktError
from marketing_cli.services.account import rates, workspaces


def prices(value: dict) -> dict[str, str | None]:
    return {r["country_code"]: r["price_per_segment"] for r in value["rates"]}


def test_default_list_is_published(conn: sqlite3.Connection) -> None:
    public = rates.list_rates(conn)
    assert public["currency"] == "USD"
    listed = prices(public)
    assert listed["US"] == "0.00830" and listed["IN"] is None
    assert list(listed) == sorted(listed)
    assert all(p is None or (len(p.split(".")[1]) == 5) for p in listed.values())


def test_workspace_markup_applies_with_half_up_rounding(conn: sqlite3.Connection, workspace: dict) -> None:
    rates.set_rate(conn, "us", "0.00835")
    workspaces.update_operator_settings(conn, workspace["id"], sms_markup="1.5")
    assert prices(rates.list_rates(conn))["US"] == "0.00835"
    # 0.00835 * 1.5 = 0.012525 -> 0.01253 (half up, Decimal arithmetic)
    assert prices(rates.list_rates(conn, workspace["id"]))["US"] == "0.01253"
    assert rates.customer_price(Decimal("0.1"), Decimal("3")) == Decimal("0.30000")


def test_set_rate_checks_country_and_price(conn: sqlite3.Connection) -> None:
    assert rates.set_rate(conn, "DE", "0.1") == {"country_code": "DE", "price_per_segment": "0.10000"}
    assert rates.set_rate(conn, "DE", "none") == {"country_code": "DE", "price_per_segment": None}
    for country, price in [("XX", "0.1"), ("USA", "0.1"), ("DE", "-1"), ("DE", "abc"), ("DE", "0.000001"),
                           ("DE", "NaN"), ("DE", "1e9")]:
        with pytest.raises(MktError) as err:
            rates.set_rate(conn, country, price)
        assert err.value.status == 400


def test_remove_rate(conn: sqlite3.Connection) -> None:
    rates.remove_rate(conn, "FR")
    assert "FR" not in prices(rates.list_rates(conn))
    with pytest.raises(MktError) as err:
        rates.remove_rate(conn, "FR")
    assert err.value.status == 404


def test_import_is_all_or_nothing(conn: sqlite3.Connection, tmp_path: Path) -> None:
    good = tmp_path / "good.csv"
    good.write_text("country_code,price\nPT,0.05\nus,0.00900\nIN,none\n")
    assert rates.import_rates(conn, good) == {"imported": 3}
    listed = prices(rates.list_rates(conn))
    assert listed["PT"] == "0.05000" and listed["US"] == "0.00900"

    bad = tmp_path / "bad.csv"
    bad.write_text("country,price\nPL,0.04\nZZ,0.1\nGR,oops\n")
    with pytest.raises(MktError) as err:
        rates.import_rates(conn, bad)
    assert "line 3" in err.value.message and "line 4" in err.value.message
    assert "PL" not in prices(rates.list_rates(conn))

    headerless = tmp_path / "h.csv"
    headerless.write_text("a,b\n1,2\n")
    with pytest.raises(MktError, match="country_code and price"):
        rates.import_rates(conn, headerless)
    with pytest.raises(MktError, match="Cannot read"):
        rates.import_rates(conn, tmp_path / "missing.csv")
