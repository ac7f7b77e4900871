"""A phone number's place for SMS quiet hours: its country, its US state and its candidate time
zones, from phonenumbers (docs/sms.md "Quiet hours", "A number's place").

Worked out once per gate key (the digits that fix all three: as many as phonenumbers'
time-zone data reads), never per message. Fails closed: a number whose zone phonenumbers
cannot tell (Etc/Unknown, or a non-geographic number whose calling code several countries
share, +1 800) gets every zone of its country, flagged `zone_known=False`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

REGIONS = Path(__file__).with_name("regions.csv")


@dataclass(frozen=True)
class Place:
    country: str | None
    region: str | None              # US-FL, or None when no subdivision is known
    zones: tuple[str, ...]          # candidate zones; the country's zones when zone_known is False
    zone_known: bool


@lru_cache(maxsize=1)
def _region_names() -> dict[str, str]:
    """'florida' -> 'US-FL' (regions.csv)."""
    rows = [r for r in REGIONS.read_text(encoding="utf-8").splitlines() if r and not r.startswith("#")]
    return {name.strip().lower(): code for code, name in (r.split(",", 1) for r in rows[1:])}


def _subdivision(country: str, description: str) -> str | None:
    m = re.search(r",\s*([A-Z]{2})$", description)
    if m:
        return f"{country}-{m.group(1)}"
    code = _region_names().get(description.strip().lower())
    return code if code and code.startswith(country + "-") else None


@lru_cache(maxsize=1)
def _nanp_digits() -> int:
    from phonenumbers.tzdata import TIMEZONE_DATA

    return max(len(k) for k in TIMEZONE_DATA if k.startswith("1"))


def gate_key_sql(number: str) -> str:
    """The characters of a stored E.164 number that fix its place: as many digits as phonenumbers'
    time-zone data reads (7 under +1, 9 elsewhere), so one evaluation serves every number of a key."""
    from phonenumbers.tzdata import TIMEZONE_LONGEST_PREFIX

    return (f"CASE WHEN substr({number}, 1, 2) = '+1' THEN substr({number}, 1, {1 + _nanp_digits()})"
            f" ELSE substr({number}, 1, {1 + TIMEZONE_LONGEST_PREFIX}) END")


def gate_key(number: str) -> str:
    from phonenumbers.tzdata import TIMEZONE_LONGEST_PREFIX

    return number[: 1 + (_nanp_digits() if number.startswith("+1") else TIMEZONE_LONGEST_PREFIX)]


_HEADS: dict[str, tuple[str | None, str | None, bool, int]] = {}
_PLACES: dict[str, Place] = {}
_MAX_CACHED = 200_000


def _parsed_head(number: str) -> tuple[str | None, str | None, bool, int]:
    """(country, subdivision, geographic, calling code) of a number's head (the area code under +1,
    else its first 9 digits: pricing's key), from the first number of it seen."""
    from marketing_cli.services.sms.pricing import phone_key

    head = phone_key(number)
    found = _HEADS.get(head)
    if found is None:
        import phonenumbers
        from phonenumbers import geocoder

        from marketing_cli.services.sms.pricing import country_of

        try:
            parsed = phonenumbers.parse(number, None)
        except phonenumbers.NumberParseException:
            return None, None, False, 0
        country = country_of(number)
        description = geocoder.description_for_number(parsed, "en") if country else ""
        found = (country, _subdivision(country, description) if country else None,
                 phonenumbers.is_number_geographical(parsed), parsed.country_code)
        if len(_HEADS) >= _MAX_CACHED:
            _HEADS.clear()
        _HEADS[head] = found
    return found


def place_of(number: str) -> Place:
    """The place of an E.164 number; worked out once per gate key (gate_key) and remembered."""
    key = gate_key(number)
    place = _PLACES.get(key)
    if place is None:
        place = _place(number)
        if len(_PLACES) >= _MAX_CACHED:
            _PLACES.clear()
        _PLACES[key] = place
    return place


def _place(number: str) -> Place:
    from phonenumbers import COUNTRY_CODE_TO_REGION_CODE
    from phonenumbers.tzdata import TIMEZONE_DATA

    from marketing_cli.services.contacts.phone_zones import longest_prefix_zones

    country, region, geographic, code = _parsed_head(number)
    if country is None:
        return Place(None, None, (), False)
    cc = str(code)
    shared = len(COUNTRY_CODE_TO_REGION_CODE.get(code, ())) > 1
    zones: tuple[str, ...] = ()
    if geographic:  # as phonenumbers' time_zones_for_geographical_number: the longest known prefix
        size, zones = longest_prefix_zones(number[1:])
        if size <= len(cc) and shared:
            zones = ()  # the bare calling code of several countries (+1's 42 zones) says nothing of the number
    elif not shared:
        # the calling code is the country's alone: its zones are the country's
        zones = tuple(z for z in TIMEZONE_DATA.get(cc, ()) if z != "Etc/Unknown")
    if zones:
        return Place(country, region, tuple(sorted(zones)), True)
    return Place(country, region, country_zones(country), False)


@lru_cache(maxsize=256)
def country_zones(country: str) -> tuple[str, ...]:
    """Every zone of `country`: the tz database's own list (zone.tab, beside the zone files that
    zoneinfo reads). Without one, every zone phonenumbers gives the country's calling code: a
    superset, which only narrows the window (fail closed)."""
    import zoneinfo

    for folder in zoneinfo.TZPATH:
        table = Path(folder) / "zone.tab"
        if table.is_file():
            rows = (line.split("\t") for line in table.read_text(encoding="utf-8").splitlines()
                    if line and not line.startswith("#"))
            found = tuple(sorted(r[2].strip() for r in rows if len(r) > 2 and r[0] == country))
            if found:
                return found
    from phonenumbers import COUNTRY_CODE_TO_REGION_CODE
    from phonenumbers.tzdata import TIMEZONE_DATA

    codes = [str(c) for c, regions in COUNTRY_CODE_TO_REGION_CODE.items() if country in regions]
    return tuple(sorted({z for prefix, zones in TIMEZONE_DATA.items() for z in zones
                         if z != "Etc/Unknown" and any(prefix.startswith(c) for c in codes)}))
