"""Value checks: one stored form per field type, email and phone normalisation."""

from __future__ import annotations

import random
from datetime import date

import pytest

from marketing_cli.services.contacts import values
from marketing_cli.services.contacts.values import Field, normalize_email, normalize_phone, normalize_value


def make(type_: str, definition: str | None = None, tag: str = "thing") -> Field:
    return Field(id=9, label="Thing", merge_tag=tag, type=type_, options=values.parse_options(definition),
                 default_value=None, required=False, immutable=False, default_region=None, order=1)


@pytest.mark.parametrize("raw", [None, "", "   ", []])
@pytest.mark.parametrize("type_", values.FIELD_TYPES)
def test_empty_is_no_value(type_: str, raw: object) -> None:
    assert normalize_value(make(type_, "a,b"), raw) is None


def test_text() -> None:
    f = make("TEXT")
    assert normalize_value(f, "Paris") == "Paris"
    assert normalize_value(f, 42) == "42"
    with pytest.raises(ValueError, match="Field 'thing' must be text."):
        normalize_value(f, {"a": 1})
    with pytest.raises(ValueError, match="must be text"):
        normalize_value(f, True)


@pytest.mark.parametrize("raw,expected", [(3, 3), (2.5, 2.5), ("42", 42), (" -7 ", -7), ("3.25", 3.25),
                                          ("1e3", 1000.0), (".5", 0.5)])
def test_number_accepts(raw: object, expected: object) -> None:
    got = normalize_value(make("NUMBER", tag="age"), raw)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize("raw", ["abc", "1,5", True, "nan", "inf", float("nan"), [1], "1.2.3"])
def test_number_refuses(raw: object) -> None:
    with pytest.raises(ValueError, match=r"^Field 'age' must be a number\.$"):
        normalize_value(make("NUMBER", tag="age"), raw)


@pytest.mark.parametrize("raw,expected", [(True, True), (False, False), ("true", True), ("FALSE", False),
                                          ("1", True), ("0", False), ("yes", True), ("No", False), (1, True),
                                          (0, False)])
def test_boolean_accepts(raw: object, expected: bool) -> None:
    assert normalize_value(make("BOOLEAN"), raw) is expected


@pytest.mark.parametrize("raw", ["maybe", 2, 1.5, ["true"]])
def test_boolean_refuses(raw: object) -> None:
    with pytest.raises(ValueError, match="Field 'thing' must be true or false."):
        normalize_value(make("BOOLEAN"), raw)


@pytest.mark.parametrize("raw,expected", [
    ("2024-02-29", "2024-02-29"),
    ("2024-03-01T10:00:00Z", "2024-03-01"),
    ("2024-03-01T23:30:00-02:00", "2024-03-02"),  # UTC date
    (date(2020, 1, 2), "2020-01-02"),
])
def test_date_accepts(raw: object, expected: str) -> None:
    assert normalize_value(make("DATE"), raw) == expected


@pytest.mark.parametrize("raw", ["2023-02-29", "01/02/2024", "2024-1-2", 20240101, "2024-03-01Tnope"])
def test_date_refuses(raw: object) -> None:
    with pytest.raises(ValueError, match="Field 'thing' must be a date"):
        normalize_value(make("DATE"), raw)


def test_dropdown_single() -> None:
    f = make("DROPDOWN_SINGLE", "Free, Pro ,Team")
    assert f.options == ("Free", "Pro", "Team")
    assert normalize_value(f, "Pro") == "Pro"
    assert normalize_value(f, " pro ") == "Pro"  # matched case-insensitively, stored as defined
    with pytest.raises(ValueError, match=r"^Field 'thing' must be one of: Free, Pro, Team\.$"):
        normalize_value(f, "Gold")
    with pytest.raises(ValueError, match="must be one of"):
        normalize_value(f, ["Pro"])


def test_dropdown_multiple() -> None:
    f = make("DROPDOWN_MULTIPLE", "red,green,blue")
    assert normalize_value(f, ["blue", "red"]) == ["blue", "red"]
    assert normalize_value(f, "red, blue,red") == ["red", "blue"]
    assert normalize_value(f, ",") is None
    with pytest.raises(ValueError, match="must be one of: red, green, blue"):
        normalize_value(f, ["red", "pink"])
    with pytest.raises(ValueError, match="must be a list of"):
        normalize_value(f, 3)


def test_country() -> None:
    f = make("COUNTRY", tag="country")
    assert normalize_value(f, "fr") == "FR"
    assert normalize_value(f, " AQ ") == "AQ"
    for bad in ("XX", "FRA", "France", 33):
        with pytest.raises(ValueError, match="Field 'country' must be an ISO 3166-1 alpha-2 country code"):
            normalize_value(f, bad)
    assert len(values.COUNTRY_CODES) == 249


def test_parse_options_dedupes_and_trims() -> None:
    assert values.parse_options(" a, b,,a ,c ") == ("a", "b", "c")
    assert values.parse_options(None) == ()


def test_load_fields(conn, workspace) -> None:
    fields = values.load_fields(conn, workspace["id"])
    assert set(fields.by_tag) == {"email_address", "first_name", "last_name"}
    assert fields.by_tag["email_address"].immutable and fields.by_tag["email_address"].required
    assert fields.phone is None
    assert fields.by_id[fields.by_tag["first_name"].id].merge_tag == "first_name"


# --- email ---------------------------------------------------------------------------

@pytest.mark.parametrize("raw,expected", [
    ("Ann@Example.COM", "ann@example.com"),
    ("  bob.smith+news@mail.example.org ", "bob.smith+news@mail.example.org"),
    ("josé@exämple.com", "josé@exämple.com"),  # not ASCII: email-validator's own path
])
def test_normalize_email(raw: str, expected: str) -> None:
    assert normalize_email(raw) == expected


@pytest.mark.parametrize("raw", ["", "ann", "ann@", "@example.com", "a..b@example.com", "ann@localhost",
                                 "ann@example", "ann@ex ample.com", None, 5])
def test_normalize_email_refuses(raw: object) -> None:
    with pytest.raises(ValueError):
        normalize_email(raw)


def test_email_fast_path_agrees_with_email_validator() -> None:
    """The fast path must accept only what email-validator accepts, with the same result."""
    from email_validator import EmailNotValidError, validate_email

    rng = random.Random(7)
    alphabet = "aZ09._-+!#$%&'*/=?^`{|}~@"
    samples = ["a@b.co", "x@mail.test", "x@foo.local", "x@xn--bcher-kva.com", "x@ab--c.com", "x@a.b.c.d.ef",
               "-a@b.com", "a.@b.com", "a@-b.com", "a@b-.com", "a@b.c1m", "a" * 64 + "@b.com", "a" * 65 + "@b.com",
               "a@" + "b" * 63 + ".com", "a@" + "b" * 64 + ".com", "a@" + ("b" * 60 + ".") * 5 + "com",
               "x@onion", "x@a.onion", "x@arpa.com", "x@in-addr.arpa"]
    for _ in range(3000):
        local = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8)))
        domain = "".join(rng.choice("ab-.9") for _ in range(rng.randint(1, 10)))
        samples.append(f"{local}@{domain}{rng.choice(['', '.com', '.io', '.t'])}")
    fast_hits = 0
    for sample in samples:
        fast = values._fast_email(sample)
        if fast is None:
            continue
        fast_hits += 1
        try:
            expected = validate_email(sample, check_deliverability=False).normalized.lower()
        except EmailNotValidError as exc:
            pytest.fail(f"fast path accepted {sample!r}, email-validator refuses: {exc}")
        assert fast == expected, sample
    assert fast_hits > 100


# --- phone ---------------------------------------------------------------------------

@pytest.mark.parametrize("raw,region", [("+1 415-555-2671", None), ("(415) 555-2671", "US"), ("4155552671", "US"),
                                        ("+14155552671", "FR"), ("001 415 555 2671", "FR"), (14155552671, "US")])
def test_normalize_phone_any_format_same_number(raw: object, region: str | None) -> None:
    assert normalize_phone(raw, region) == "+14155552671"


def test_normalize_phone_national_uses_region() -> None:
    assert normalize_phone("06 12 34 56 78", "FR") == "+33612345678"


@pytest.mark.parametrize("raw,region", [("4155552671", None), ("not a number", "US"), ("+1 555", None),
                                        ("+15555550123", None), ("", "US"), (None, "US")])
def test_normalize_phone_refuses(raw: object, region: str | None) -> None:
    with pytest.raises(ValueError):
        normalize_phone(raw, region)


def test_is_phone_region() -> None:
    assert values.is_phone_region("GB")
    assert not values.is_phone_region("gb")
    assert not values.is_phone_region("AQ")  # ISO, but no telephone numbering plan in phonenumbers
    assert not values.is_phone_region("XK")


def test_numbers_beyond_64_bits_become_doubles() -> None:
    import pytest

    from marketing_cli.services.contacts.values import Field, normalize_value

    field = Field(id=9, label="Big", merge_tag="big", type="NUMBER", options=(), default_value=None,
                  required=False, immutable=False, default_region=None, order=9)
    assert normalize_value(field, 2**63 - 1) == 2**63 - 1
    assert normalize_value(field, str(-(2**63))) == -(2**63)
    for raw in (2**63, 2**70, str(2**70), -(2**63) - 1):
        value = normalize_value(field, raw)
        assert isinstance(value, float) and value == float(int(raw))
    with pytest.raises(ValueError, match="must be a number"):
        normalize_value(field, 10**400)
