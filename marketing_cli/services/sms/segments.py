"""SMS segments, counted the way carriers bill them (GSM 03.38; CONTRACT section 6).

- GSM-7 when every character is in the GSM 03.38 basic or extension table, else UCS-2.
- GSM-7 counts septets: a basic character is 1, an extension character (`| ^ € { } [ ] ~ \\`
  and form feed) is 2 (an escape and the character, never split across segments).
- UCS-2 counts UTF-16 code units: most emoji are 2, a flag is 4, 🏳️‍🌈 is 6.
- One segment holds 160 septets or 70 units. A longer message is split into segments of
  153 septets or 67 units (the rest of each is the concatenation header), and a segment
  never ends inside a character, nor inside a grapheme cluster (an emoji with its
  modifiers, a letter with its combining accents): the cluster moves to the next segment,
  as Twilio's calculator does (docs/sms.md).

`count_segments` is called once per recipient during expansion, so the common cases take
a fast path: a message without extension characters or multi-unit clusters is
`ceil(units / 153)` (or 67) without walking it; otherwise only the characters around
each segment boundary are looked at (a boundary moves back to the start of the character
or cluster it would cut). Clusters follow UAX #29 closely enough for billing: Extend and
SpacingMark characters, emoji modifiers, tags, the zero-width joiner, CR LF and
regional-indicator pairs (flags); bench/bench_sms.py measures the speed.
"""

from __future__ import annotations

import re
import unicodedata
from typing import NamedTuple

GSM_BASIC = (
    "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞ\x1bÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
)
GSM_EXTENSION = "\x0c^{}\\[~]|€"
SINGLE_GSM, MULTI_GSM = 160, 153
SINGLE_UCS2, MULTI_UCS2 = 70, 67

_NOT_GSM = re.compile("[^" + re.escape(GSM_BASIC + GSM_EXTENSION) + "]")
_EXTENSION = re.compile("[" + re.escape(GSM_EXTENSION) + "]")
# UCS-2 text made only of these characters has no multi-unit character and no cluster of
# several characters (no surrogates, combining marks, joiners, variation selectors, CR):
# every unit is a cluster of its own.
_SIMPLE_UCS2 = re.compile(
    "[\x00-\x0c\x0e-\u02ff\u0370-\u0482\u048a-\u0590\u05d0-\u05ea\u0621-\u064a\u2010-\u20cf\u2100-\u2bff"
    "\u3000-\u3029\u3030-\u3098\u309b-\u9fff\uac00-\ud7a3]*"
)
_EMOJI_MODIFIERS = range(0x1F3FB, 0x1F400)
_TAGS = range(0xE0020, 0xE0080)
_REGIONAL = range(0x1F1E6, 0x1F200)


class SegmentCount(NamedTuple):
    encoding: str            # "GSM-7" or "UCS-2"
    segments: int
    units: int               # septets (GSM-7) or UTF-16 code units (UCS-2)
    ucs2_characters: list[str]  # the characters outside GSM-7, each once, in order


def _extends(code: int) -> bool:
    """Does this character join the cluster before it (UAX #29 Extend, SpacingMark, ZWJ)?"""
    if code == 0x200D or code in _EMOJI_MODIFIERS or code in _TAGS:
        return True
    return unicodedata.category(chr(code)) in ("Mn", "Me", "Mc")


def _ucs2_boundary(units: memoryview, at: int) -> bool:
    """May a segment end before the UTF-16 unit `at`? Not inside a character, not inside a
    cluster (before an extending character, after a joiner, between CR and LF, between the
    two regional indicators of a flag)."""
    unit = units[at]
    if 0xDC00 <= unit <= 0xDFFF:
        return False
    code = unit
    if 0xD800 <= unit <= 0xDBFF:
        code = 0x10000 + ((unit - 0xD800) << 10) + (units[at + 1] - 0xDC00)
    if _extends(code):
        return False
    before = units[at - 1]
    if before == 0x200D or (before == 0x0D and unit == 0x0A):
        return False
    if code in _REGIONAL:
        run, i = 0, at - 2  # count the regional indicators (2 units each) just before
        while i >= 0 and units[i] == 0xD83C and 0xDDE6 <= units[i + 1] <= 0xDDFF:
            run += 1
            i -= 2
        return run % 2 == 0
    return True


def count_segments(text: str) -> SegmentCount:
    """Encoding, segments, units and the characters that forced UCS-2, for one message."""
    if not _NOT_GSM.search(text):
        extension = len(_EXTENSION.findall(text))
        units = len(text) + extension
        if units <= SINGLE_GSM:
            return SegmentCount("GSM-7", 1 if text else 0, units, [])
        if not extension and "\r\n" not in text:
            return SegmentCount("GSM-7", -(-units // MULTI_GSM), units, [])
        septets = text  # each extension character as a marker and itself: one septet each
        for ch in GSM_EXTENSION:
            if ch in septets:
                septets = septets.replace(ch, "\x00" + ch)
        segments, start = 1, 0
        while units - start > MULTI_GSM:
            end = start + MULTI_GSM
            if septets[end - 1] == "\x00" or (septets[end - 1] == "\r" and septets[end] == "\n"):
                end -= 1  # never split an escape pair or a CR LF
            start = end
            segments += 1
        return SegmentCount("GSM-7", segments, units, [])
    forced = list(dict.fromkeys(_NOT_GSM.findall(text)))
    encoded = text.encode("utf-16-le")
    units = len(encoded) // 2
    if units <= SINGLE_UCS2:
        return SegmentCount("UCS-2", 1, units, forced)
    if _SIMPLE_UCS2.fullmatch(text):
        return SegmentCount("UCS-2", -(-units // MULTI_UCS2), units, forced)
    view = memoryview(encoded).cast("H")
    segments, start = 1, 0
    while units - start > MULTI_UCS2:
        end = start + MULTI_UCS2
        while end > start and not _ucs2_boundary(view, end):
            end -= 1
        if end == start:  # one cluster longer than a segment: split it, between characters
            end = start + MULTI_UCS2
            if 0xDC00 <= view[end] <= 0xDFFF:
                end -= 1
        start = end
        segments += 1
    return SegmentCount("UCS-2", segments, units, forced)
