"""Field definitions as the value checkers see them, and the checks themselves.

Every path that writes a contact value (create, upsert, CSV import) goes through here, so
a value is stored the same way whichever face it came from (HELPERS storage design):

    TEXT               JSON string
    NUMBER             JSON number (int when integral text was given, else float)
    BOOLEAN            true / false
    DATE               'YYYY-MM-DD'
    DROPDOWN_SINGLE    one of the field's options (string)
    DROPDOWN_MULTIPLE  JSON array of options
    COUNTRY            ISO 3166-1 alpha-2, upper case

The importer calls these per row for a million rows, so they are cheap: patterns are
compiled once, phonenumbers and email-validator are imported once on first use, and
ordinary ASCII addresses take a fast path that accepts exactly what email-validator
accepts (anything else is handed to email-validator itself; tests compare the two).
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from typing import Any

from marketing_cli.kernel.countries import COUNTRY_CODES
from marketing_cli.services.contacts.e164 import e164

FIELD_TYPES = ("TEXT", "NUMBER", "BOOLEAN", "DATE", "DROPDOWN_SINGLE", "DROPDOWN_MULTIPLE", "COUNTRY")
DROPDOWN_TYPES = ("DROPDOWN_SINGLE", "DROPDOWN_MULTIPLE")
EMAIL_TAG = "email_address"
PHONE_TAG = "phone_number"
TIMEZONE_TAG = "timezone"  # a built-in field: an IANA zone name (kernel/localtime.py)


_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TRUE = frozenset({"true", "1", "yes", "y", "on"})
_FALSE = frozenset({"false", "0", "no", "n", "off"})

# An ASCII dot-atom address on a domain of ordinary labels ending in a letter-only TLD:
# email-validator (check_deliverability=False) accepts every such address unless one of
# the extra checks in _fast_email refuses it, in which case email-validator decides.
_FAST_EMAIL = re.compile(
    r"([A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*)"
    r"@((?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63})"
)
_SPECIAL_USE = ("arpa", "invalid", "local", "localhost", "onion", "test")


@dataclass(frozen=True)
class Field:
    id: int
    label: str
    merge_tag: str
    type: str
    options: tuple[str, ...]
    default_value: str | None
    required: bool
    immutable: bool
    default_region: str | None
    order: int


@dataclass
class FieldMap:
    """A workspace's field definitions, by merge tag and by id."""

    by_tag: dict[str, Field] = field(default_factory=dict)
    by_id: dict[int, Field] = field(default_factory=dict)

    @property
    def phone(self) -> Field | None:
        return self.by_tag.get(PHONE_TAG)

    @property
    def email(self) -> Field | None:
        return self.by_tag.get(EMAIL_TAG)


def parse_options(definition: str | None) -> tuple[str, ...]:
    """The distinct, non-empty, trimmed options of a comma-separated definition, in order."""
    if not definition:
        return ()
    seen: dict[str, None] = {}
    for part in definition.split(","):
        option = part.strip()
        if option:
            seen.setdefault(option, None)
    return tuple(seen)


def field_from_row(row: sqlite3.Row) -> Field:
    return Field(
        id=row["id"],
        label=row["label"],
        merge_tag=row["merge_tag"],
        type=row["type"],
        options=parse_options(row["definition"]) if row["type"] in DROPDOWN_TYPES else (),
        default_value=row["default_value"],
        required=bool(row["required"]),
        immutable=bool(row["immutable"]),
        default_region=row["default_region"],
        order=row["order"],
    )


def load_fields(conn: sqlite3.Connection, workspace_id: int) -> FieldMap:
    fields = FieldMap()
    for row in conn.execute('SELECT * FROM fields WHERE workspace_id = ? ORDER BY "order", id', (workspace_id,)):
        f = field_from_row(row)
        fields.by_tag[f.merge_tag] = f
        fields.by_id[f.id] = f
    return fields


# --- values -------------------------------------------------------------------------

def _text(f: Field, raw: Any) -> Any:
    if isinstance(raw, str):
        return raw
    if isinstance(raw, (int, float)) and not isinstance(raw, bool) and math.isfinite(raw):
        return str(raw)
    raise ValueError(f"Field '{f.merge_tag}' must be text.")


_INT64 = range(-(2**63), 2**63)


def _integer(f: Field, value: int) -> int | float:
    # SQLite and the JSON encoder hold 64-bit integers: a larger whole number is kept as a
    # double (as most JSON readers would read it), so it still compares and sorts as a number.
    if value in _INT64:
        return value
    try:
        return float(value)
    except OverflowError:  # beyond a double too
        raise ValueError(f"Field '{f.merge_tag}' must be a number.") from None


def _number(f: Field, raw: Any) -> Any:
    if isinstance(raw, bool):
        raise ValueError(f"Field '{f.merge_tag}' must be a number.")
    if isinstance(raw, int):
        return _integer(f, raw)
    if isinstance(raw, float):
        if math.isfinite(raw):
            return raw
    elif isinstance(raw, str):
        text = raw.strip()
        if _INT.fullmatch(text):
            return _integer(f, int(text))
        if _FLOAT.fullmatch(text):
            value = float(text)
            if math.isfinite(value):
                return value
    raise ValueError(f"Field '{f.merge_tag}' must be a number.")


def _boolean(f: Field, raw: Any) -> Any:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, int) and raw in (0, 1):
        return bool(raw)
    if isinstance(raw, str):
        text = raw.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise ValueError(f"Field '{f.merge_tag}' must be true or false.")


def _date(f: Field, raw: Any) -> Any:
    if isinstance(raw, datetime):
        moment = raw if raw.tzinfo is None else raw.astimezone(timezone.utc)
        return moment.date().isoformat()
    if isinstance(raw, date):
        return raw.isoformat()
    if isinstance(raw, str):
        text = raw.strip()
        try:
            if len(text) == 10 and _DATE.fullmatch(text):
                return date.fromisoformat(text).isoformat()
            if len(text) > 10 and _DATE.match(text) and text[10] in "Tt ":
                moment = datetime.fromisoformat(text.replace("z", "Z").replace("Z", "+00:00"))
                if moment.tzinfo is not None:
                    moment = moment.astimezone(timezone.utc)
                return moment.date().isoformat()
        except ValueError:
            pass
    raise ValueError(f"Field '{f.merge_tag}' must be a date (YYYY-MM-DD) or an RFC 3339 timestamp.")


def _option(f: Field, raw: Any) -> str:
    if isinstance(raw, str):
        text = raw.strip()
        if text in f.options:
            return text
        folded = text.casefold()
        for option in f.options:
            if option.casefold() == folded:
                return option
    raise ValueError(f"Field '{f.merge_tag}' must be one of: {', '.join(f.options)}.")


def _dropdown_single(f: Field, raw: Any) -> Any:
    return _option(f, raw)


def _dropdown_multiple(f: Field, raw: Any) -> Any:
    if isinstance(raw, str):
        items: list[Any] = [part for part in raw.split(",") if part.strip()]
    elif isinstance(raw, list):
        items = raw
    else:
        raise ValueError(f"Field '{f.merge_tag}' must be a list of: {', '.join(f.options)}.")
    chosen: dict[str, None] = {}
    for item in items:
        chosen.setdefault(_option(f, item), None)
    return list(chosen) or None


def _country(f: Field, raw: Any) -> Any:
    if isinstance(raw, str):
        code = raw.strip().upper()
        if code in COUNTRY_CODES:
            return code
    raise ValueError(f"Field '{f.merge_tag}' must be an ISO 3166-1 alpha-2 country code (for example US).")


_CHECKS = {
    "TEXT": _text,
    "NUMBER": _number,
    "BOOLEAN": _boolean,
    "DATE": _date,
    "DROPDOWN_SINGLE": _dropdown_single,
    "DROPDOWN_MULTIPLE": _dropdown_multiple,
    "COUNTRY": _country,
}


def is_empty(raw: Any) -> bool:
    """None, a blank string or an empty list: "no value"."""
    if raw is None:
        return True
    if isinstance(raw, str):
        return not raw.strip()
    return isinstance(raw, list) and not raw


def normalize_value(f: Field, raw: Any) -> Any:
    """The value to store for `raw` in field `f`; None means "no value".

    Raises ValueError with a message that names the field's merge tag.
    """
    if is_empty(raw):
        return None
    if f.merge_tag == TIMEZONE_TAG:
        return normalize_timezone(raw)
    return _CHECKS[f.type](f, raw)


def normalize_timezone(raw: Any) -> str:
    """A `timezone` value: an IANA name zoneinfo knows, in its own spelling (europe/paris ->
    Europe/Paris). Raises ValueError naming the field otherwise."""
    from marketing_cli.kernel.localtime import canonical_zone

    name = canonical_zone(raw)
    if name is None:
        raise ValueError(f"Field '{TIMEZONE_TAG}' must be an IANA time zone name (for example Europe/Paris "
                         f"or America/New_York), not '{raw}'.")
    return name


# --- email and phone ----------------------------------------------------------------

_email_validator: Any = None
_phonenumbers: Any = None


def _fast_email(text: str) -> str | None:
    match = _FAST_EMAIL.fullmatch(text)
    if match is None or len(text) > 254 or len(match.group(1)) > 64:
        return None
    domain = match.group(2).lower()
    plain = _plain_domains.get(domain)
    if plain is None:
        plain = _plain_domain(domain)
        if len(_plain_domains) < _PLAIN_DOMAINS_KEPT:  # a list has few domains; a hostile one many
            _plain_domains[domain] = plain
    return text.lower() if plain else None


_plain_domains: dict[str, bool] = {}
_PLAIN_DOMAINS_KEPT = 10_000


def _plain_domain(domain: str) -> bool:
    """Whether the fast path may take an address at `domain` (lower case): not too long, no
    IDNA label, not a special-use name. Kept per domain (an import reads a few thousand at most)."""
    if len(domain) > 253:
        return False
    for label in domain.split("."):
        if label[2:4] == "--":  # xn-- and friends: IDNA rules apply, let email-validator decide
            return False
    tld = domain.rsplit(".", 1)[1]
    for special in _SPECIAL_USE:
        if domain == special or domain.endswith("." + special) or tld == special:
            return False
    return True


def normalize_email(raw: Any, *, own_domains: Callable[[], Collection[str]] | None = None) -> str:
    """The address, validated (syntax only, no network) and lower-cased; ValueError if invalid,
    its text saying which part is at fault.

    `own_domains`: the workspace's sending domains, asked for only when the address is refused.
    A special-use name (`news.example.test`,
    RFC 6761), which email-validator refuses, is taken when it is one of them: mkt already sends
    from it (a staging setup against a local SMTP catcher), so a reply-to or a test address there
    is as good as the sender's. The local part is then checked on its own, as a sender's is."""
    if not isinstance(raw, str) or not raw.strip():
        raise ValueError("An email address must be a non-empty string.")
    text = raw.strip()
    fast = _fast_email(text)
    if fast is not None:
        return fast
    global _email_validator
    if _email_validator is None:
        import email_validator

        _email_validator = email_validator
    try:
        result = _email_validator.validate_email(text, check_deliverability=False)
    except _email_validator.EmailNotValidError as exc:
        local, _, domain = text.rpartition("@")
        if local and own_domains is not None and domain.lower() in {d.lower() for d in own_domains()}:
            try:
                _email_validator.validate_email(f"{local}@example.com", check_deliverability=False)
            except _email_validator.EmailNotValidError as local_exc:
                raise ValueError(f"'{text}' is not a valid email address: {local_exc}") from None
            return f"{local}@{domain}".lower()
        raise ValueError(f"'{text}' is not a valid email address: {exc}") from None
    return result.normalized.lower()


def _phone_module() -> Any:
    global _phonenumbers
    if _phonenumbers is None:
        import phonenumbers

        _phonenumbers = phonenumbers
    return _phonenumbers


def is_phone_region(code: Any) -> bool:
    """Whether `code` is a region phonenumbers can read numbers for (ISO alpha-2, upper case)."""
    return isinstance(code, str) and code in COUNTRY_CODES and code in _phone_module().SUPPORTED_REGIONS


def contact_with_phone(conn: sqlite3.Connection, workspace_id: int, phone: str,
                       columns: str = "*") -> sqlite3.Row | None:
    """The contact a phone number names: of the contacts that have it, the first made.

    The earliest is picked here, not by `ORDER BY created_at, id LIMIT 1`: to skip that sort
    SQLite walked contacts_created over the whole workspace instead of seeking contacts_phone
    (2.9 s at 200,000 contacts against 0.1 ms). `columns` is the caller's own list, with
    created_at and id in it."""
    rows = conn.execute(f"SELECT {columns} FROM contacts WHERE workspace_id = ? AND phone = ?",
                        (workspace_id, phone)).fetchall()
    return min(rows, key=lambda r: (r["created_at"], r["id"]), default=None)


def normalize_phone(raw: Any, default_region: str | None) -> str:
    """The number in E.164. Without a leading + it is read in `default_region`.

    Raises ValueError when it cannot be parsed, has no country code and there is no
    default region, or is not a valid number.
    """
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = str(raw)
    if not isinstance(raw, str) or not raw.strip():
        raise ValueError("A phone number must be a non-empty string.")
    text = raw.strip()
    fast = e164(text)  # `+` and digits: the same answer without phonenumbers' generic path (e164.py)
    if fast is not None:
        return fast
    pn = _phone_module()
    region = None if text.startswith("+") else default_region
    if region is None and not text.startswith("+"):
        raise ValueError(f"'{text}' has no country code (+...) and no default region is set.")
    try:
        number = pn.parse(text, region)
    except pn.NumberParseException:
        raise ValueError(f"'{text}' is not a phone number.") from None
    if not pn.is_valid_number(number):
        raise ValueError(f"'{text}' is not a valid phone number.")
    return pn.format_number(number, pn.PhoneNumberFormat.E164)
