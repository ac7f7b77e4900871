"""The one JSON encoder of both faces: what `--json` prints is what the API answers.

Money is Decimal everywhere inside mkt. Amounts the specification types as strings are
formatted by their services; a Decimal that reaches this encoder is an amount the
specification types as a number (billing's next_invoice_total, add-on price), already
rounded to cents by its service, and is written as a JSON number here, at the boundary.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any


def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def dumps(value: Any, *, pretty: bool = False) -> str:
    if pretty:
        return json.dumps(value, default=_default, ensure_ascii=False, indent=2)
    return json.dumps(value, default=_default, ensure_ascii=False, separators=(",", ":"))


def dumps_bytes(value: Any) -> bytes:
    return dumps(value).encode("utf-8")
