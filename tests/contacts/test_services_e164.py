"""The phone fast path (services/contacts/e164.py) against phonenumbers: never another answer."""

from __future__ import annotations

import random

import phonenumbers
import pytest

from marketing_cli.services.contacts import e164 as fast
from marketing_cli.services.contacts.values import normalize_phone


def _reference(text: str) -> str | None:
    """What normalize_phone answers through phonenumbers alone (None: refused)."""
    try:
        number = phonenumbers.parse(text, None)
    except phonenumbers.NumberParseException:
        return None
    if not phonenumbers.is_valid_number(number):
        return None
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)


def _writings(code: int, national: str, rnd: random.Random) -> list[str]:
    spaced = " ".join(national[i:i + 3] for i in range(0, len(national), 3))
    return [f"+{code}{national}", f"+{code} {spaced}", f"+{code}-{national[:3]}-{national[3:]}",
            f"+{code}.{national[:2]}.{national[2:]}", f"+{code} 0{national}", f"+{code}{national[:-1]}",
            f"+{code}{national}{rnd.randrange(10)}", f"+{code}  {national}", f"+{code}{national} x12"]


def _numbers(rnd: random.Random) -> list[str]:
    """Example numbers of every region and type, their digits varied, written several ways."""
    out = []
    for code, regions in phonenumbers.COUNTRY_CODE_TO_REGION_CODE.items():
        for region in regions:
            for kind in (phonenumbers.PhoneNumberType.FIXED_LINE, phonenumbers.PhoneNumberType.MOBILE,
                         phonenumbers.PhoneNumberType.TOLL_FREE, phonenumbers.PhoneNumberType.VOIP):
                example = (phonenumbers.example_number_for_non_geo_entity(code) if region == "001"
                           else phonenumbers.example_number_for_type(region, kind))
                if example is None:
                    continue
                national = phonenumbers.national_significant_number(example)
                for _ in range(3):
                    keep = rnd.randrange(1, len(national) + 1)
                    varied = national[:keep] + "".join(rnd.choice("0123456789") for _ in national[keep:])
                    out.extend(_writings(code, varied, rnd))
    return out


def test_the_fast_path_gives_phonenumbers_answer_or_none() -> None:
    rnd = random.Random(164)
    numbers = _numbers(rnd)
    answered = 0
    for text in numbers:
        got = fast.e164(text)
        if got is not None:
            answered += 1
            assert got == _reference(text), text
            assert normalize_phone(text, None) == got
    valid = sum(1 for t in numbers if _reference(t) is not None)
    assert answered > 0.5 * valid  # it does answer for most valid numbers


@pytest.mark.parametrize("text", ["+447400123456", "+44 7400 123456", "+1 212-555-1234", "+33.6.12.34.56.78"])
def test_common_writings_take_the_fast_path(text: str) -> None:
    assert fast.e164(text) == _reference(text) is not None


@pytest.mark.parametrize("text", ["+44 07400 123456", "+390612345678", "+80012345678", "+1 212 555 1234 ext 5",
                                  "+1 (212) 555-1234", "0044 7400 123456", "+33 12", "+99912345678"])
def test_what_it_leaves_to_phonenumbers(text: str) -> None:
    assert fast.e164(text) is None
