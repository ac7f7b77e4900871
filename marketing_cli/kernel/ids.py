"""Ids: the one generator and the one parser of every kind of id a user sends.

Contact, campaign and variant ids are 24 lowercase hex characters: 4 bytes of seconds
and a 2-byte sequence within the second (so ids sort in the order one process made
them, and inserts land at the right edge of the primary-key B-tree), then 6 random bytes
from the OS: 48 bits that no id seen before tells anything about, so an id cannot be
guessed from its neighbours.

Workspace, tag, segment, field, domain and sender ids are positive integers that fit
SQLite's 64 bits. `parse_hex_id` and `parse_int_id` are the only places that read ids
from users: path parameters, JSON members and CLI arguments all go through them.
"""

from __future__ import annotations

import os
import re
import threading
import time
from typing import Any

from marketing_cli.errors import MktError

HEX24_PATTERN = "[0-9a-f]{24}"  # also what the OpenAPI document publishes (api/schemas/common.py)
_HEX24 = re.compile(HEX24_PATTERN)
_DIGITS = re.compile(r"[0-9]{1,19}")
MAX_INT_ID = 2**63 - 1
_lock = threading.Lock()
_clock = [0, 0]  # [second, sequence within it]


def new_id() -> str:
    second = int(time.time())
    with _lock:
        if _clock[0] != second:
            _clock[:] = [second, 0]
        else:
            _clock[1] = (_clock[1] + 1) & 0xFFFF
        sequence = _clock[1]
    return (second.to_bytes(4, "big") + sequence.to_bytes(2, "big") + os.urandom(6)).hex()


def is_id(value: object) -> bool:
    return isinstance(value, str) and _HEX24.fullmatch(value) is not None


def parse_hex_id(value: Any, message: str, status: int = 400) -> str:
    """A 24-hex id, or MktError(status, message) (the endpoint's own "not found" text)."""
    if not is_id(value):
        raise MktError(status, message)
    return value


def parse_int_id(value: Any, message: str, status: int = 400) -> int:
    """A positive integer id from an int or a string of digits, or MktError(status, message)."""
    if isinstance(value, str) and value.isascii() and _DIGITS.fullmatch(value.strip()):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_INT_ID:
        raise MktError(status, message)
    return value
