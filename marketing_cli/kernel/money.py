"""Money as tables, reports and the dashboard show it: in cents, rounded half up.

The API and `--json` answer amounts as exact decimal strings (an SMS charge is priced to 1/1000
of a cent, `0.00830`); a person reads a balance of `$24.99170` as `$24.99`. Prices per segment
keep their digits wherever they are shown (they are the exact rate, not a total). Messages that
quote an amount (the SMS balance errors) write it the same way.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

CENTS = Decimal("0.01")


def cents(amount: str | Decimal | None) -> str:
    """`24.99170` -> `24.99`, `25.5` -> `25.50`; None -> ''."""
    if amount is None:
        return ""
    return f"{Decimal(amount).quantize(CENTS, rounding=ROUND_HALF_UP):.2f}"
