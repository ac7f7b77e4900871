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
