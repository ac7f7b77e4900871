"""The `X-Error-Detail` header is one line of printable ASCII whatever the detail holds: a test
email to the recipient "\\b" put a backspace in it, and uvicorn, refusing the header value,
dropped the connection without an answer (found by tests/platform/test_api_fuzz.py)."""

from __future__ import annotations

import pytest

from marketing_cli.api.responses import detail_header


@pytest.mark.engine_neutral
@pytest.mark.parametrize("detail", ["\b", "a\x00b", "\x7f", "é\u2019\U0001f600", "\ud800", "line\nbreak\ttab",
                                    "\x1c\x85", "C:\\path"])
def test_the_detail_header_is_printable_ascii(detail: str) -> None:
    value = detail_header(f"The address '{detail}' is not valid.")
    assert all(" " <= ch <= "~" for ch in value), value
    assert value.startswith("The address '") and value.endswith("' is not valid.")


@pytest.mark.engine_neutral
def test_printable_ascii_is_kept_as_it_is() -> None:
    assert detail_header("Allows 5 this month;  5 are used\n(mkt billing allowance set)") == (
        "Allows 5 this month; 5 are used (mkt billing allowance set)")
