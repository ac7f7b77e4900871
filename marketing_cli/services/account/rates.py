"""The SMS price list.

The operator keeps one base price per segment per country (`sms_rates`, USD). A price a
customer sees is base x markup, rounded half-up to five decimals: the platform default
markup without a key, the workspace's own markup (`mkt workspace update --sms-markup`)
with one. A country with a NULL price is enabled but has no rate published (null in
the list); a country not in the table cannot be sent to.
"""

from __future__ import annotations

import csv
import sqlite3
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.storage.db import transaction

DEFAULT_MARKUP = Decimal("1.00")
FIVE_PLACES = Decimal("0.00001")


def customer_price(base: Decimal, markup: Decimal) -> Decimal:
    return (base * markup).quantize(FIVE_PLACES, rounding=ROUND_HALF_UP)


def markup_of(conn: sqlite3.Connection, workspace_id: int | None) -> Decimal:
    if workspace_id is None:
        return DEFAULT_MARKUP
    row = conn.execute("SELECT sms_markup FROM workspaces WHERE id = ?", (workspace_id,)).fetchone()
    return Decimal(row["sms_markup"]) if row and row["sms_markup"] else DEFAULT_MARKUP


def list_rates(conn: sqlite3.Connection, workspace_id: int | None = None) -> dict[str, Any]:
    """GET /v1/sms-rates: public prices without a workspace, the workspace's prices with one."""
    markup = markup_of(conn, workspace_id)
    rates = [
        {
            "country_code": row["country_code"],
            "price_per_segment": None if row["price"] is None else f"{customer_price(Decimal(row['price']), markup):.5f}",
        }
        for row in conn.execute("SELECT country_code, price FROM sms_rates ORDER BY country_code")
    ]
    return {"currency": "USD", "rates": rates}


def check_country(code: Any) -> str:
    from marketing_cli.kernel.countries import COUNTRY_CODES

    text = str(code).strip().upper() if code is not None else ""
    if text not in COUNTRY_CODES:
        raise MktError(400, f"'{code}' is not an ISO 3166-1 alpha-2 country code.")
    return text


def parse_price(value: Any) -> Decimal | None:
    """A base price: a decimal of at most five places, 0 or more; 'none' or '' for no rate."""
    text = "" if value is None else str(value).strip()
    if text.lower() in ("", "none", "null"):
        return None
    try:
        price = Decimal(text)
    except InvalidOperation:
        price = Decimal("NaN")
    if not price.is_finite() or price < 0 or price.as_tuple().exponent < -5 or price >= 1000:
        raise MktError(400, f"'{value}' is not a price: give USD per segment with at most five decimals, or 'none'.")
    return price


def _store(conn: sqlite3.Connection, country: str, price: Decimal | None) -> dict[str, Any]:
    stored = None if price is None else f"{price.quantize(FIVE_PLACES):.5f}"
    conn.execute(
        "INSERT INTO sms_rates (country_code, price, updated_at) VALUES (?, ?, ?)"
        " ON CONFLICT (country_code) DO UPDATE SET price = excluded.price, updated_at = excluded.updated_at",
        (country, stored, clock.now()),
    )
    return {"country_code": country, "price_per_segment": stored}


def set_rate(conn: sqlite3.Connection, country: Any, price: Any) -> dict[str, Any]:
    """`mkt rates set`: the base price of one country (None publishes no rate)."""
    code = check_country(country)
    value = parse_price(price)
    with transaction(conn):
        return _store(conn, code, value)


def remove_rate(conn: sqlite3.Connection, country: Any) -> dict[str, Any]:
    """Disable SMS to a country: it leaves the list."""
    code = check_country(country)
    with transaction(conn):
        if conn.execute("DELETE FROM sms_rates WHERE country_code = ?", (code,)).rowcount == 0:
            raise MktError(404, f"{code} is not on the price list.")
    return {"country_code": code, "removed": True}


def import_rates(conn: sqlite3.Connection, path: Path) -> dict[str, Any]:
    """`mkt rates import FILE.csv`: columns country_code (or country) and price.

    All or nothing: any bad line rejects the file, naming every bad line.
    """
    try:
        handle = open(path, newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise MktError(400, f"Cannot read {path}: {exc.strerror}.") from None
    with handle:
        reader = csv.DictReader(handle)
        headers = [h.strip().lower() for h in (reader.fieldnames or [])]
        country_col = "country_code" if "country_code" in headers else "country" if "country" in headers else None
        if country_col is None or "price" not in headers:
            raise MktError(400, "The CSV file needs the header columns country_code and price.")
        reader.fieldnames = headers
        entries, problems = {}, []
        for row in reader:
            line = reader.line_num
            try:
                entries[check_country(row.get(country_col))] = parse_price(row.get("price"))
            except MktError as exc:
                problems.append(f"line {line}: {exc.message}")
    if problems:
        raise MktError(400, "No rates were imported. " + " ".join(problems[:20]))
    with transaction(conn):
        for code, price in entries.items():
            _store(conn, code, price)
    return {"imported": len(entries)}
