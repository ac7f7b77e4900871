"""A fast path for the common phone number, `+` then digits: the same answer as phonenumbers, or none.

`values.normalize_phone` reads a number with phonenumbers (`parse`, `is_valid_number`,
`format_number`): about 30 us a number on the import's 2-core machine, which was half of
the import's CPU on a list where 85% of rows have a phone. Most of that is generic work
that a number written `+<country code><digits>` (spaces, dashes or dots between the digits)
does not need: no extension, no letters, no national prefix, no IDD. `e164` reads such a
number with the same steps phonenumbers takes on it, over the same metadata, with each
region's patterns compiled once (about 3 us a number), and answers None whenever it is
not sure to give phonenumbers' answer; the caller then asks phonenumbers, which also
writes every refusal's reason. It never answers for a number phonenumbers would refuse:

- the country code is the first 1 to 3 digits that are a calling code
  (`_extract_country_code`); codes of non-geographic entities (region 001) are left to
  phonenumbers;
- a national number starting with 0 (Italy's leading zero) or matching the region's
  national prefix for parsing (a trunk 0 written after the country code, which phonenumbers
  may strip) is left to phonenumbers;
- valid is phonenumbers' `_number_type_helper(...) != UNKNOWN` for the region that
  `region_code_for_number` picks: the general description and then one of the types
  (premium rate ... mobile), each by its possible lengths and its full pattern.

tests/contacts/test_services_e164.py holds the two to the same answer on numbers of every
calling code, valid and not, written each way.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

_SHAPE = re.compile(r"\+[1-9](?:[ .\-]?[0-9]){5,18}")
_TYPES = ("premium_rate", "toll_free", "shared_cost", "voip", "personal_number", "pager", "uan", "voicemail",
          "fixed_line", "mobile")
_Desc = tuple[frozenset[int], "re.Pattern[str]"]


def _desc(desc: Any) -> _Desc | None:
    """(possible lengths, full pattern) of a PhoneNumberDesc; None when it matches nothing."""
    if desc is None or not desc.national_number_pattern:
        return None
    return frozenset(desc.possible_length or ()), re.compile(desc.national_number_pattern)


def _pattern(metadata: Any) -> dict[int, re.Pattern[str]]:
    """One pattern per length of national number: it matches a number of that length exactly
    when the general description and one of the types (premium rate ... mobile) match it,
    each by its possible lengths and its full pattern (`_is_number_matching_desc`)."""
    general = _desc(metadata.general_desc)
    types = [d for d in (_desc(getattr(metadata, name)) for name in _TYPES) if d is not None]
    if general is None:
        return {}
    out = {}
    for size in range(2, 18):
        if general[0] and size not in general[0]:
            continue
        fitting = [p.pattern for lengths, p in types if not lengths or size in lengths]
        if fitting:
            either = "|".join(f"(?:{p})" for p in fitting)
            out[size] = re.compile(f"(?=(?:{general[1].pattern})\\Z)(?:{either})")
    return out


class _Region:
    __slots__ = ("by_length", "leading")

    def __init__(self, metadata: Any) -> None:
        self.by_length = _pattern(metadata)
        self.leading = re.compile(metadata.leading_digits) if metadata.leading_digits is not None else None

    def valid(self, number: str) -> bool:
        """phonenumbers' `_number_type_helper(number, metadata) != UNKNOWN`."""
        pattern = self.by_length.get(len(number))
        return pattern is not None and pattern.fullmatch(number) is not None


class _Code:
    """What one calling code needs: its main region's national prefix for parsing, its regions."""

    __slots__ = ("prefix", "regions", "single")

    def __init__(self, code: int, region_codes: list[str]) -> None:
        from phonenumbers import PhoneMetadata

        main = PhoneMetadata.metadata_for_region_or_calling_code(code, region_codes[0])
        prefix = main.national_prefix_for_parsing if main is not None else None
        self.prefix = re.compile(prefix) if prefix else None
        self.regions = [_Region(m) for m in (PhoneMetadata.metadata_for_region(r.upper(), None)
                                             for r in region_codes) if m is not None]
        self.single = self.regions[0] if len(self.regions) == 1 else None

    def valid(self, number: str) -> bool:
        """is_valid_number: the region region_code_for_number picks, then its patterns."""
        if self.single is not None:
            return self.single.valid(number)
        for region in self.regions:
            if region.leading is not None:
                if region.leading.match(number):
                    return region.valid(number)
            elif region.valid(number):
                return True
        return False


@lru_cache(maxsize=None)
def _code(code: int) -> _Code | None:
    from phonenumbers import COUNTRY_CODE_TO_REGION_CODE

    regions = COUNTRY_CODE_TO_REGION_CODE.get(code)
    if not regions or "001" in regions:
        return None
    return _Code(code, list(regions))


def _calling_codes() -> frozenset[int]:
    from phonenumbers import COUNTRY_CODE_TO_REGION_CODE

    return frozenset(COUNTRY_CODE_TO_REGION_CODE)


_codes: frozenset[int] | None = None
# a calling code's digits -> its _Code, or False when phonenumbers reads its numbers (region 001)
_by_code: dict[str, _Code | bool] = {}


def e164(text: str) -> str | None:
    """`text` (stripped) in E.164 when it is `+` and digits and phonenumbers would take it as a
    valid number; None when phonenumbers must be asked (a refusal included)."""
    global _codes
    if _SHAPE.fullmatch(text) is None:
        return None
    digits = text[1:].replace(" ", "").replace("-", "").replace(".", "")
    if _codes is None:
        _codes = _calling_codes()
    for size in (1, 2, 3):
        found = _by_code.get(digits[:size])
        if found is None and int(digits[:size]) in _codes:
            found = _by_code[digits[:size]] = _code(int(digits[:size])) or False
        if found is not None:
            break
    else:
        return None
    national = digits[size:]
    if not found or not 2 <= len(national) <= 17 or national[0] == "0":
        return None
    if found.prefix is not None and found.prefix.match(national):
        return None
    return f"+{digits}" if found.valid(national) else None
