"""The one reader of whole numbers written as text by someone else: path segments, query
strings, form fields, headers, environment variables and remote answers.

    parse_digits("42") -> 42        parse_digits("²") -> None      parse_digits("9" * 40) -> None
    parse_signed("-3") -> -3

`str.isdigit()` is true for characters that `int()` refuses (superscript and circled
digits, `"²".isdigit()`) and `int()` takes characters `isdigit()` does not know (Arabic-Indic
digits, `"٣"`), so the pair answered a 500 to a tracking URL whose link id was `¹`. Here
a number is ASCII digits only, at most `max_digits` of them (the default, 18, always fits
SQLite's 64-bit integers), after surrounding blanks are dropped; anything else is None,
and the caller answers with its own 4xx or default. tests/platform/test_structure.py keeps
`isdigit()` out of the rest of the package.
"""

from __future__ import annotations

import re

MAX_DIGITS = 18  # 10**18 - 1 < 2**63 - 1: every value fits a SQLite INTEGER
_SIGNED = re.compile(r"[+-]?[0-9]+", re.ASCII)


def parse_digits(text: object, max_digits: int = MAX_DIGITS) -> int | None:
    """A non-negative whole number written in 1..max_digits ASCII digits, else None."""
    if not isinstance(text, str):
        return None
    text = text.strip()
    if not 0 < len(text) <= max_digits or not text.isascii() or not text.isdecimal():
        return None
    return int(text)


def parse_signed(text: object, max_digits: int = MAX_DIGITS) -> int | None:
    """A whole number with an optional sign and 1..max_digits ASCII digits, else None."""
    if not isinstance(text, str):
        return None
    text = text.strip()
    if _SIGNED.fullmatch(text) is None or len(text.lstrip("+-")) > max_digits:
        return None
    return int(text)
