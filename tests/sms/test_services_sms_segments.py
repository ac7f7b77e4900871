"""The SMS segment counter against carrier rules and the 48 reference cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from marketing_cli.services.sms.segments import count_segments

CASES = json.loads((Path(__file__).parent.parent / "data" / "sms-segments-twilio.json").read_text(encoding="utf-8"))


def test_the_reference_file_holds_48_cases() -> None:
    assert len(CASES) == 48


@pytest.mark.parametrize("case", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_reference_case(case: dict) -> None:
    result = count_segments(case["message"])
    assert (result.encoding, result.segments) == (case["encoding"], case["segments"])


@pytest.mark.parametrize(("text", "encoding", "segments", "units"), [
    ("", "GSM-7", 0, 0),
    ("a" * 160, "GSM-7", 1, 160),
    ("a" * 161, "GSM-7", 2, 161),
    ("a" * 306, "GSM-7", 2, 306),
    ("a" * 307, "GSM-7", 3, 307),
    ("€" + "1" * 158, "GSM-7", 1, 160),
    ("€" + "1" * 159, "GSM-7", 2, 161),
    # an escape pair is never split: 152 septets, then '[' (2) does not fit the first 153
    ("a" * 152 + "[" + "b" * 10, "GSM-7", 2, 164),
    ("a" * 152 + "[" + "b" * 152, "GSM-7", 3, 306),
    ("é" * 70, "GSM-7", 1, 70),  # é is in the GSM basic table
    ("ê" * 70, "UCS-2", 1, 70),
    ("ê" * 71, "UCS-2", 2, 71),
    ("ê" * 134, "UCS-2", 2, 134),
    ("ê" * 135, "UCS-2", 3, 135),
    ("😀" * 35, "UCS-2", 1, 70),
    ("😀" * 36, "UCS-2", 2, 72),
])
def test_boundaries(text: str, encoding: str, segments: int, units: int) -> None:
    result = count_segments(text)
    assert (result.encoding, result.segments, result.units) == (encoding, segments, units)


def test_a_grapheme_cluster_is_never_split_across_segments() -> None:
    # 66 + 2 + 66 = 134 units = 2 x 67, but the emoji would straddle the boundary
    assert count_segments("a" * 66 + "😀" + "b" * 66).segments == 3
    # a flag (4 units) and a ZWJ family are clusters too
    assert count_segments("a" * 65 + "🇮🇹" + "b" * 65).segments == 3
    assert count_segments("a" * 64 + "🏳️‍🌈" + "b" * 64).segments == 3
    # a letter with a combining accent stays with its accent
    assert count_segments("a" * 66 + "e\u0301" + "b" * 66).segments == 3
    assert count_segments("a" * 65 + "e\u0301" + "b" * 66).segments == 2


def test_a_cluster_longer_than_a_segment_is_split_by_character() -> None:
    zalgo = "a" + "\u0301" * 100
    result = count_segments(zalgo)
    assert result.units == 101 and result.segments == 2


def test_the_characters_that_forced_ucs2_are_listed_once_in_order() -> None:
    result = count_segments("Hi 😀 ça va? 😀 ✓")
    assert result.encoding == "UCS-2"
    assert result.ucs2_characters == ["😀", "ç", "✓"]
    assert count_segments("Plain [text] €5").ucs2_characters == []


@pytest.mark.postgresql_only  # SQLite's SQL calls count_segments itself (render.register_renderer)
def test_postgresql_measures_and_writes_numbers_as_python_does(conn: object) -> None:
    """mkt_sms_measure and mkt_sms_number (schema.postgresql.sql): the segment counter's rules and
    format_value's text, where SQL cannot call Python."""
    import random

    from marketing_cli.kernel.merge import format_value

    rng = random.Random(7)
    texts = [case["message"] for case in CASES] + [
        "", "a", "€" * 80, "x" * 152 + "€" + "y" * 20, "x" * 152 + "\r\n" + "y" * 30, "😀" * 40, "🇮🇹" * 30,
        "a" + "🇮🇹" * 30, "e\u0301" * 60, "👩‍👩‍👧" * 12, "é" * 200, "ab\r\n" * 60, "x" * 66 + "🏳️‍🌈" * 10,
        "\u0301" * 100, "Ж" * 71, "x\x0c" * 90]
    texts += ["".join(rng.choice("a€😀🇮🇹\u0301\u200d\r\n é[") for _ in range(rng.randint(50, 250))) for _ in range(200)]
    for text in texts:
        counted = count_segments(text)
        measure = conn.execute("SELECT mkt_sms_measure(?)", (text,)).fetchone()[0]  # type: ignore[attr-defined]
        assert measure == counted.segments * 2 + (counted.encoding == "UCS-2"), text
    for number in (3.5, 3.0, 0.1 + 0.2, 1e-07, 1.5e-05, -2.25, 1e20, 12345.678, 0.0001, 1234567890123.5, -0.0, 7):
        written = conn.execute("SELECT mkt_sms_number(json_extract(?, '$.a'))",  # type: ignore[attr-defined]
                               (json.dumps({"a": number}),)).fetchone()[0]
        assert written == format_value(number), number
