"""SMS campaigns: create, list, read, update, quote, schedule, expand, cancel, archive, statistics.

States (spec part 3): DRAFT -> QUEUED (schedule) -> COMPLETED (every recipient expanded
and handed to the provider); QUEUED -> CANCELLED (cancel: what was never handed over is
refunded); DRAFT, COMPLETED or CANCELLED -> ARCHIVED.

Expansion (`sms.expand` job, docs/sms.md) runs in two phases, each in batches:

1. Recipients: the audience resolver's query (SMS eligibility) runs once into a temporary
   snapshot, and each distinct number prefix gets its country and price once; each batch
   of BATCH_SIZE recipients becomes message rows in ONE SQL statement (`INSERT OR IGNORE
   ... SELECT`: merge tags rendered and segments counted in SQL, Python only for the texts
   SQL cannot measure; country and price joined by prefix), and the batch's charge (an
   exact integer SUM) is written to the ledger in the same transaction. A recipient already written (a re-run after a
   crash) is ignored by the UNIQUE key, and a batch that wrote nothing charges nothing:
   no recipient is ever charged twice. Recipients in countries without a price are
   `suppressed`: written, never charged.
2. Hand-off: pending messages go to the workspace's provider (services/sms/providers.py).

Then the campaign is COMPLETED. The job checks the campaign's status inside every batch's
transaction, so a cancel stops it at the next batch.
"""

from __future__ import annotations

import json
import math
import os
import re
import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from functools import lru_cache
from typing import Any, Self

from marketing_cli import field_sql, jobs
from marketing_cli.db import transaction
from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.ids import new_id, parse_hex_id
from marketing_cli.kernel.inputs import member, require_object, required_text
from marketing_cli.services.sms import ledger as sms_ledger
from marketing_cli.services.sms.segments import MULTI_GSM, SINGLE_GSM, count_segments

STATUSES = ("DRAFT", "QUEUED", "COMPLETED", "CANCELLED", "ARCHIVED")
MAX_NAME = 255
MAX_MESSAGE = 1600
DEFAULT_LIMIT, MAX_LIMIT = 50, 100
BATCH_SIZE = 5000
JOB_TYPE = "sms.expand"

# Specification messages (part 7).
INVALID_BODY = "Please provide a valid request body."
NAME_REQUIRED = "Please provide a name for this campaign."
NAME_TOO_LONG = "The campaign name must be 255 characters or less."
INVALID_STATUS = "Invalid status '{value}'."
ID_REQUIRED = "Please provide a campaign ID."
NOT_FOUND = "We could not find the campaign you are looking for."
SCHEDULE_INVALID_BODY = "Invalid request body."
INVALID_SCHEDULE_TYPE = "Invalid schedule type. Must be 'NOW' or 'LATER'."
SCHEDULED_AT_REQUIRED = "Scheduled date and time is required when schedule type is 'LATER'."
SCHEDULED_AT_FORMAT = "Invalid scheduled date format. Please provide a valid ISO 8601 UTC timestamp."
SCHEDULED_AT_PAST = "Scheduled date must be in the future."
SCHEDULED_AT_UNUSABLE = "Please enter a valid date and time."
ONLY_DRAFT = "Only draft campaigns can be scheduled."
NAME_BEFORE_SCHEDULING = "Please provide a name for this campaign before scheduling."
MESSAGE_BEFORE_SCHEDULING = "Please provide a message for this campaign before scheduling."
AUDIENCE_BEFORE_SCHEDULING = "Please configure an audience for this campaign before scheduling."
NO_SENDER_ID = "Please add an SMS sender ID under SMS Marketing before scheduling this campaign."
BALANCE_CHECK_FAILED = "We could not check your SMS balance. Please try again later."
BALANCE_BELOW_MINIMUM = ("Your available SMS balance is ${available}, but at least ${minimum} is required to start a "
                         "campaign. Please visit Billing to top up your SMS balance.")
REVIEW_FAILED = "We couldn't complete the automated review of this campaign. Please try again in a few minutes."
REVIEW_FLAGGED = "This campaign was flagged by automated review. Please contact support if you believe this is a mistake."
QUEUE_FAILED = "Failed to queue SMS campaign for processing."

# The project's own messages (extensions, docs/sms.md).
BALANCE_BELOW_ESTIMATE = ("Your available SMS balance is ${available}, but this campaign is estimated to cost "
                          "${estimate} ({recipients} recipients). Please visit Billing to top up your SMS balance.")
ONLY_DRAFT_UPDATE = "Only draft campaigns can be updated."
MESSAGE_TOO_LONG = f"The message must be {MAX_MESSAGE} characters or less."
UNKNOWN_MERGE_TAG = "The merge tag {tag} is not a contact field of this workspace."
ONLY_QUEUED_CANCEL = "Only queued campaigns can be cancelled."
CANNOT_ARCHIVE = "Only draft, completed or cancelled campaigns can be archived."
QUOTE_MESSAGE_REQUIRED = "Please provide a message to quote."
INVALID_NUMBER = "'{value}' is not a valid phone number in E.164 form (+14155550100)."

CONTACT_TAG = re.compile(r"\{\{\s*contact\.([A-Za-z0-9_]+)\s*\}\}")
# Printable ASCII of the GSM basic table (no `, no extension characters) and LF: one septet each.
FAST_CLASS = "\n -Z_a-z"
_OUTSIDE_FAST_CLASS = re.compile(f"[^{FAST_CLASS}]")


# --- views --------------------------------------------------------------------------

_ZERO_STATS = {"sent": 0, "delivered": 0, "clicked": 0, "failed": 0, "unsubscribed": 0, "suppressed": 0}
_STATS_SQL = """
SELECT m.campaign_id,
       SUM(m.handed_at IS NOT NULL) AS sent,
       SUM(m.status = 'delivered') AS delivered,
       SUM(m.status IN ('failed', 'undelivered')) AS failed,
       SUM(m.unsubscribed_at IS NOT NULL) AS unsubscribed,
       SUM(m.status = 'suppressed') AS suppressed,
       SUM(EXISTS (SELECT 1 FROM sms_clicks k WHERE k.message_id = m.id)) AS clicked
FROM sms_messages m WHERE m.campaign_id IN ({marks}) GROUP BY m.campaign_id
"""


def _statistics(conn: sqlite3.Connection, ids: list[str]) -> dict[str, dict[str, int]]:
    out = {i: dict(_ZERO_STATS) for i in ids}
    if ids:
        for row in conn.execute(_STATS_SQL.format(marks=", ".join("?" * len(ids))), ids):
            out[row["campaign_id"]] = {k: int(row[k] or 0) for k in _ZERO_STATS}
    return out


def campaign_view(row: sqlite3.Row, stats: dict[str, int], *, with_workspace: bool = True) -> dict[str, Any]:
    view: dict[str, Any] = {"id": row["id"]}
    if with_workspace:
        view["workspace_id"] = row["workspace_id"]
    view.update({
        "name": row["name"],
        "message": row["message"],
        "audience": json.loads(row["audience"]),
        "status": row["status"],
        "scheduled_at": row["scheduled_at"],
        "statistics": stats,
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    })
    return view


def _row(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> sqlite3.Row:
    if campaign_id is None or (isinstance(campaign_id, str) and not campaign_id.strip()):
        raise MktError(400, ID_REQUIRED)
    cid = parse_hex_id(campaign_id, NOT_FOUND)
    row = conn.execute("SELECT * FROM sms_campaigns WHERE id = ? AND workspace_id = ?", (cid, workspace_id)).fetchone()
    if row is None:
        raise MktError(400, NOT_FOUND)
    return row


def _view(conn: sqlite3.Connection, row: sqlite3.Row, *, with_workspace: bool = True) -> dict[str, Any]:
    return campaign_view(row, _statistics(conn, [row["id"]])[row["id"]], with_workspace=with_workspace)


# --- create, list, read, update --------------------------------------------------------

def _check_name(value: Any, *, path: str = "name") -> str:
    return required_text(value, path, missing=NAME_REQUIRED, too_long=NAME_TOO_LONG, max_length=MAX_NAME)


def create_campaign(conn: sqlite3.Connection, workspace_id: int, body: Any) -> dict[str, Any]:
    """POST /v1/sms-campaigns: a DRAFT with an empty message and audience."""
    body = require_object(body, INVALID_BODY)
    name = _check_name(body.get("name"))
    now = clock.now()
    cid = new_id()
    with transaction(conn):
        conn.execute("INSERT INTO sms_campaigns (id, workspace_id, name, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
                     (cid, workspace_id, name, now, now))
        return _view(conn, _row(conn, workspace_id, cid))


def _page_arg(value: Any, default: int, high: int | None) -> int:
    try:
        number = int(str(value).strip()) if value is not None and str(value).strip() else default
    except ValueError:
        number = default
    number = max(1, number)
    return min(number, high) if high is not None else number


def list_campaigns(conn: sqlite3.Connection, workspace_id: int, *, page: Any = None, limit: Any = None,
                   status: Any = None) -> dict[str, Any]:
    """GET /v1/sms-campaigns: newest first; page and limit sanitised (limit 1-100, default 50)."""
    where, params = "workspace_id = ?", [workspace_id]
    if status is not None and str(status) != "":
        if not isinstance(status, str) or status.strip().upper() not in STATUSES:
            raise MktError(400, INVALID_STATUS.format(value=status))
        where += " AND status = ?"
        params.append(status.strip().upper())
    page_number = min(_page_arg(page, 1, None), 10**12)
    per_page = _page_arg(limit, DEFAULT_LIMIT, MAX_LIMIT)
    total = conn.execute(f"SELECT COUNT(*) FROM sms_campaigns WHERE {where}", params).fetchone()[0]
    rows = conn.execute(f"SELECT * FROM sms_campaigns WHERE {where} ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
                        (*params, per_page, (page_number - 1) * per_page)).fetchall()
    stats = _statistics(conn, [r["id"] for r in rows])
    return {
        "campaigns": [campaign_view(r, stats[r["id"]], with_workspace=False) for r in rows],
        "pagination": {"current_page": page_number, "per_page": per_page,
                       "total_pages": math.ceil(total / per_page), "total_count": total},
    }


def get_campaign(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """GET /v1/sms-campaigns/:id."""
    return _view(conn, _row(conn, workspace_id, campaign_id))


def _check_message(conn: sqlite3.Connection, workspace_id: int, value: Any) -> str:
    if not isinstance(value, str):
        raise MktError(400, "The member 'message' must be a string.")
    if len(value) > MAX_MESSAGE:
        raise MktError(400, MESSAGE_TOO_LONG)
    known = {r[0] for r in conn.execute("SELECT merge_tag FROM fields WHERE workspace_id = ?", (workspace_id,))}
    for match in CONTACT_TAG.finditer(value):
        if match.group(1) not in known:
            raise MktError(400, UNKNOWN_MERGE_TAG.format(tag=match.group(0)))
    return value


def update_campaign(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any, body: Any) -> dict[str, Any]:
    """PATCH /v1/sms-campaigns/:id: name, message, audience (members left out keep their values)."""
    from marketing_cli.services.contacts.audience import validate_audience

    row = _row(conn, workspace_id, campaign_id)
    body = require_object(body, INVALID_BODY)
    changes: dict[str, Any] = {}
    if "name" in body:
        changes["name"] = _check_name(body["name"])
    if "message" in body:
        changes["message"] = _check_message(conn, workspace_id, body["message"] if body["message"] is not None else "")
    if "audience" in body:
        audience = body["audience"]
        changes["audience"] = json.dumps([] if audience is None or audience == []
                                         else validate_audience(conn, workspace_id, audience))
    with transaction(conn):
        row = _row(conn, workspace_id, row["id"])
        if row["status"] != "DRAFT":
            raise MktError(400, ONLY_DRAFT_UPDATE)
        if changes:
            sets = ", ".join(f"{k} = ?" for k in changes)
            conn.execute(f"UPDATE sms_campaigns SET {sets}, updated_at = ? WHERE id = ?",
                         (*changes.values(), clock.now(), row["id"]))
        return _view(conn, _row(conn, workspace_id, row["id"]))


def archive_campaign(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """POST /v1/sms-campaigns/:id/archive: DRAFT, COMPLETED or CANCELLED -> ARCHIVED."""
    with transaction(conn):
        row = _row(conn, workspace_id, campaign_id)
        if row["status"] not in ("DRAFT", "COMPLETED", "CANCELLED"):
            raise MktError(400, CANNOT_ARCHIVE)
        conn.execute("UPDATE sms_campaigns SET status = 'ARCHIVED', updated_at = ? WHERE id = ?", (clock.now(), row["id"]))
        return {"id": row["id"], "status": "ARCHIVED"}


# --- countries, prices, rendering -------------------------------------------------------

def _parse_country(number: str) -> str | None:
    import phonenumbers

    try:
        parsed = phonenumbers.parse(number, None)
    except phonenumbers.NumberParseException:
        return None
    if not phonenumbers.is_valid_number(parsed):
        return None
    return phonenumbers.region_code_for_number(parsed)


@lru_cache(maxsize=1)
def _single_region_codes() -> dict[str, str]:
    """Calling code ('+33') -> its one region, for the codes that belong to one region only."""
    from phonenumbers import COUNTRY_CODE_TO_REGION_CODE

    return {f"+{code}": regions[0] for code, regions in COUNTRY_CODE_TO_REGION_CODE.items()
            if len(regions) == 1 and regions[0] != "001"}


# The SQL twin of country_of's memo: the characters of a stored number that fix its country
# (the area code under +1, else the first 10). Expansion and the estimate resolve each
# distinct key once in Python and join on it, instead of calling Python per recipient.
PHONE_KEY = "CASE WHEN {number} GLOB '+1*' THEN substr({number}, 1, 5) ELSE substr({number}, 1, 10) END"
_KEYS_CHUNK = 10_000
KEY_SEEKS = 1_000  # seeks for distinct prefixes allowed at least, before one pass over the snapshot


def phone_key(number: str) -> str:
    """PHONE_KEY in Python (the same characters)."""
    return number[:5] if number.startswith("+1") else number[:10]


_PREFIXES: dict[str, str] = {}  # '+1415' -> 'US', '+447911123' -> 'GG': learnt from valid numbers
_MAX_PREFIXES = 100_000


def country_of(number: str | None) -> str | None:
    """The ISO country of a stored E.164 number (contacts' numbers are validated on input).

    A calling code of one region answers at once. A shared calling code (+1, +44 with
    Guernsey, +7, +39 ...) is told apart by the number's leading digits: phonenumbers
    parses the first number seen, and the answer is memoised for its NANP area code (+1:
    an area code belongs to one country) or for its first 7 national digits (the finest
    block numbering plans allocate), so a million recipients cost a few thousand parses.
    """
    if not number or number[0] != "+":
        return None
    region = _PREFIXES.get(number[:5]) or _PREFIXES.get(number[:10])  # seen before: the common case
    if region is not None:
        return region
    single = _single_region_codes()
    for size in (2, 3, 4):
        region = single.get(number[:size])
        if region is not None:
            _remember(number[:5], region)  # 5 characters hold any calling code whole
            return region
    region = _parse_country(number)
    if region is not None:
        _remember(phone_key(number), region)
    return region


def _remember(key: str, region: str) -> None:
    if len(_PREFIXES) >= _MAX_PREFIXES:
        _PREFIXES.clear()
    _PREFIXES[key] = region


class _Pricing:
    """A number's country and price per segment in SQL, for one workspace (a context manager).

    Two temporary tables: the workspace's prices, and each distinct PHONE_KEY with one number
    of it as its example, that number's country and its price (NULL: no price there), each
    resolved once in Python (`resolve`). A query joins `join(number)` and reads
    `country(number)` and `units(number)`; a number whose prefix has no country there (it
    changed since, or its prefix's example did not parse) is resolved on its own.
    """

    def __init__(self, conn: sqlite3.Connection, workspace_id: int, prices: dict[str, int]) -> None:
        self.conn, self.workspace_id, self.prices = conn, workspace_id, prices
        suffix = uuid.uuid4().hex  # our own names, never user text
        self.keys, self.price_table = f"temp.sms_keys_{suffix}", f"temp.sms_prices_{suffix}"
        conn.create_function("mkt_sms_country", 1, country_of, deterministic=True)

    def __enter__(self) -> Self:
        self.conn.execute(f"CREATE TABLE {self.keys} (key TEXT PRIMARY KEY, phone TEXT NOT NULL, country TEXT,"
                          " units INTEGER) WITHOUT ROWID")
        self.conn.execute(f"CREATE TABLE {self.price_table} (country TEXT PRIMARY KEY, units INTEGER NOT NULL)"
                          " WITHOUT ROWID")
        self.conn.executemany(f"INSERT INTO {self.price_table} VALUES (?, ?)", self.prices.items())
        return self

    def __exit__(self, *exc: object) -> None:
        for table in (self.keys, self.price_table):
            self.conn.execute(f"DROP TABLE IF EXISTS {table}")

    def resolve(self, numbers: str, params: Any = (), size: int = 0) -> None:
        """Fill the keys table for the numbers that the SELECT `numbers` yields (one column).

        The workspace's numbers are indexed (contacts_phone), so its distinct keys are found by
        one seek each past the last key: a few thousand seeks for most workspaces instead of a
        pass over the numbers (0.4 s at 1,000,000). Keys of numbers outside them are harmless.
        Past max(KEY_SEEKS, size // 50) seeks (numbers spread over many prefixes), the seeks
        stop and one pass over `numbers` finds the rest. Python sees each key once, in chunks:
        memory stays flat.
        """
        conn, keys = self.conn, self.keys
        budget, after, found = max(KEY_SEEKS, size // 50), "", []
        while len(found) < budget:
            row = conn.execute("SELECT phone FROM contacts WHERE workspace_id = ? AND phone > ? ORDER BY phone"
                               " LIMIT 1", (self.workspace_id, after)).fetchone()
            if row is None:
                break
            key = phone_key(row[0])
            found.append((key, row[0]))
            after = key + "\U0010ffff"  # past every number that starts with the key
        conn.executemany(f"INSERT OR IGNORE INTO {keys} (key, phone) VALUES (?, ?)", found)
        if len(found) >= budget:
            conn.execute(f"WITH n(phone) AS ({numbers}) INSERT OR IGNORE INTO {keys} (key, phone)"
                         f" SELECT {PHONE_KEY.format(number='n.phone')}, n.phone FROM n WHERE n.phone IS NOT NULL",
                         params)
        after = ""
        while True:
            chunk = conn.execute(f"SELECT key, phone FROM {keys} WHERE key > ? ORDER BY key LIMIT {_KEYS_CHUNK}",
                                 (after,)).fetchall()
            if not chunk:
                return
            updates = []
            for key, phone in chunk:
                country = country_of(phone)
                updates.append((country, self.prices.get(country or ""), key))
            conn.executemany(f"UPDATE {keys} SET country = ?, units = ? WHERE key = ?", updates)
            after = chunk[-1][0]

    def join(self, number: str) -> str:
        return f" LEFT JOIN {self.keys} k ON k.key = {PHONE_KEY.format(number=number)}"

    @staticmethod
    def country(number: str) -> str:
        return f"CASE WHEN k.country IS NULL THEN mkt_sms_country({number}) ELSE k.country END"

    def units(self, number: str) -> str:
        return (f"CASE WHEN k.country IS NULL THEN (SELECT p.units FROM {self.price_table} p"
                f" WHERE p.country = mkt_sms_country({number})) ELSE k.units END")


def price_units(conn: sqlite3.Connection, workspace_id: int) -> dict[str, int]:
    """country -> the workspace's price per segment in 1/100000 USD (countries with a price only)."""
    from marketing_cli.services.account.rates import list_rates

    return {r["country_code"]: int(Decimal(r["price_per_segment"]).scaleb(5))
            for r in list_rates(conn, workspace_id)["rates"] if r["price_per_segment"] is not None}


class Renderer:
    """Renders `{{contact.<merge_tag>}}` for one recipient (email, phone, the data JSON).

    Only contact fields are SMS merge tags; a missing value renders as the field's default
    value, else as nothing; other `{{...}}` text is left as written.
    """

    def __init__(self, conn: sqlite3.Connection, workspace_id: int, template: str) -> None:
        from marketing_cli.services.contacts.values import EMAIL_TAG, PHONE_TAG, load_fields

        fields = load_fields(conn, workspace_id)
        self.parts: list[Any] = []  # str, or (source, key, default)
        position = 0
        for match in CONTACT_TAG.finditer(template):
            self.parts.append(template[position:match.start()])
            f = fields.by_tag.get(match.group(1))
            if f is None:
                self.parts.append(("none", None, None))
            elif f.merge_tag == EMAIL_TAG:
                self.parts.append(("email", None, f.default_value))
            elif f.merge_tag == PHONE_TAG:
                self.parts.append(("phone", None, f.default_value))
            else:
                self.parts.append(("data", str(f.id), f.default_value))
            position = match.end()
        self.parts.append(template[position:])
        self.has_tags = len(self.parts) > 1
        self.values_sql = self._values_sql(fields) if self.has_tags else None

    @staticmethod
    def _literal(text: str) -> str:
        return "'" + text.replace("'", "''") + "'"

    def _values_sql(self, fields: Any) -> list[str] | None:
        """Each tag's text (its default applied) as an SQL expression over `c` (a contacts row),
        in the order of `parts`, so that expansion renders a million recipients without a Python
        call each; None when a field's values need Python to become text (BOOLEAN, DROPDOWN_MULTIPLE)."""
        values = []
        for part in self.parts:
            if isinstance(part, str):
                continue
            source, key, default = part
            if source == "none":
                values.append("''")
                continue
            if source == "data":
                if fields.by_id[int(key)].type in ("BOOLEAN", "DROPDOWN_MULTIPLE"):
                    return None
                value = f"CAST({field_sql.value_expr(key, 'c')} AS TEXT)"
            else:
                value = f"c.{source}"
            values.append(f"COALESCE(NULLIF({value}, ''), {self._literal(default or '')})")
        return values

    def body_sql(self, value: str) -> str:
        """The rendering as an SQL expression, the i-th tag's text being `value.format(i)`."""
        pieces, number = [], 0
        for part in self.parts:
            if isinstance(part, str):
                if part:
                    pieces.append(self._literal(part))
            else:
                pieces.append(value.format(number))
                number += 1
        return " || ".join(pieces)

    def measure_sql(self, value: str) -> str:
        """The message's measure (segments * 2, plus 1 for UCS-2) as an SQL expression over the
        tags' texts (`value.format(i)`).

        When the written text and every tag's text are printable ASCII of the GSM basic table
        (no `, no extension characters) or LF, a character is a septet and the count is
        arithmetic on lengths: the class test runs on the tags' texts only (a first name, not
        the whole message: GLOB costs about 2 us a row on 80 characters). Any other text is
        measured in Python (`mkt_sms_measure`, cached per text).
        """
        python = f"mkt_sms_measure({self.body_sql(value)})"
        written = "".join(p for p in self.parts if isinstance(p, str))
        if _OUTSIDE_FAST_CLASS.search(written):
            return python
        count = sum(not isinstance(p, str) for p in self.parts)
        fits = " AND ".join(f"{value.format(i)} NOT GLOB '*[^{FAST_CLASS}]*'" for i in range(count))
        length = " + ".join([str(len(written))] + [f"length({value.format(i)})" for i in range(count)])
        return (f"CASE WHEN {fits} THEN (CASE WHEN {length} = 0 THEN 0 WHEN {length} <= {SINGLE_GSM} THEN 1"
                f" ELSE ({length} + {MULTI_GSM - 1}) / {MULTI_GSM} END) * 2 ELSE {python} END")

    @staticmethod
    def _text(value: Any) -> str:
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, list):
            return ", ".join(str(v) for v in value)
        return str(value)

    def render(self, email: str | None, phone: str | None, data: str | None) -> str:
        values = json.loads(data) if data and data != "{}" else {}
        out = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
                continue
            source, key, default = part
            value = email if source == "email" else phone if source == "phone" else values.get(key) \
                if source == "data" else None
            text = self._text(value)
            out.append(text if text else (default or ""))
        return "".join(out)


# --- quote ----------------------------------------------------------------------------

def quote_message(conn: sqlite3.Connection, workspace_id: int, body: Any) -> dict[str, Any]:
    """POST /v1/sms/quote and `mkt sms quote`: encoding, segments and (with `to`) the price."""
    body = require_object(body, INVALID_BODY)
    message = member(body, "message", str)
    if not message:
        raise MktError(400, QUOTE_MESSAGE_REQUIRED)
    to = member(body, "to", str)
    result = count_segments(message)
    quote: dict[str, Any] = {
        "encoding": result.encoding,
        "characters": len(message),
        "units": result.units,
        "segments": result.segments,
        "ucs2_characters": result.ucs2_characters,
        "to": None, "country": None, "price_per_segment": None, "price": None, "currency": "USD",
        "sendable": None, "note": None,
    }
    if to is not None:
        country = country_of(to.strip())
        if country is None:
            raise MktError(400, INVALID_NUMBER.format(value=to))
        prices = price_units(conn, workspace_id)
        quote.update(to=to.strip(), country=country)
        if country in prices:
            per_segment = Decimal(prices[country]).scaleb(-5)
            quote.update(price_per_segment=f"{per_segment:.5f}", price=f"{per_segment * result.segments:.5f}",
                         sendable=True)
        else:
            quote.update(sendable=False, note=f"SMS cannot be sent to {country}: no price is published for it "
                                              "(SMS not enabled there, or a dedicated sender registration is needed).")
    return quote


# --- scheduling -------------------------------------------------------------------------

def _register_renderer(conn: sqlite3.Connection, renderer: Renderer) -> None:
    """mkt_sms_render and mkt_sms_measure: the merge-tag texts SQL cannot render or measure."""
    conn.create_function("mkt_sms_render", 3, renderer.render, deterministic=True)
    cache: dict[str, int] = {}

    def measure(text: str) -> int:
        """segments * 2, plus 1 for UCS-2 (one Python call per recipient, cached per text)."""
        got = cache.get(text)
        if got is None:
            if len(cache) > 100_000:
                cache.clear()
            result = count_segments(text)
            got = cache[text] = result.segments * 2 + (result.encoding == "UCS-2")
        return got

    conn.create_function("mkt_sms_measure", 1, measure, deterministic=True)


def estimate_cost(conn: sqlite3.Connection, workspace_id: int, message: str,
                  audience: list[dict[str, Any]]) -> tuple[Decimal, int]:
    """(estimated cost, recipients): each eligible recipient with a price x the segments of the
    message as written (merge tags unrendered: usually longer than the values, so the
    estimate errs high)."""
    from marketing_cli.services.contacts.audience import resolve_audience

    segments = count_segments(message).segments
    query = resolve_audience(conn, workspace_id, audience, "sms", "c.phone")
    with _Pricing(conn, workspace_id, price_units(conn, workspace_id)) as pricing:
        pricing.resolve(query.sql, query.params)
        recipients, units = conn.execute(
            f"SELECT COUNT(*), COALESCE(SUM({pricing.units('a.phone')}), 0) FROM ({query.sql}) a"
            f"{pricing.join('a.phone')}", query.params).fetchone()
    units *= segments
    return sms_ledger.from_units(units), recipients


def _first_message(conn: sqlite3.Connection, workspace_id: int) -> bool:
    """Is this the workspace's first SMS campaign (so the first message to its numbers)?"""
    return conn.execute("SELECT 1 FROM sms_campaigns WHERE workspace_id = ? AND completed_at IS NOT NULL LIMIT 1",
                        (workspace_id,)).fetchone() is None


def review_campaign(conn: sqlite3.Connection, workspace_id: int, message: str) -> dict[str, Any]:
    from marketing_cli.services.sms.review import review_message

    return review_message(message, first_message=_first_message(conn, workspace_id))


def _parse_schedule(body: Any) -> tuple[str, str | None]:
    kind = body.get("schedule_type")
    if not isinstance(kind, str) or kind.strip().upper() not in ("NOW", "LATER"):
        raise MktError(400, INVALID_SCHEDULE_TYPE)
    kind = kind.strip().upper()
    if kind == "NOW":
        return kind, None
    raw = body.get("scheduled_at")
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        raise MktError(400, SCHEDULED_AT_REQUIRED)
    if not isinstance(raw, str) or not re.fullmatch(
            r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})", raw.strip()):
        raise MktError(400, SCHEDULED_AT_FORMAT)
    try:
        moment = clock.parse_ts(raw.strip())
    except ValueError:
        raise MktError(400, SCHEDULED_AT_FORMAT) from None
    except OverflowError:  # valid text, but not a moment this service can hold in UTC
        raise MktError(400, SCHEDULED_AT_UNUSABLE) from None
    if moment <= clock.utcnow():
        raise MktError(400, SCHEDULED_AT_PAST)
    return kind, clock.format_ts(moment)


def schedule_campaign(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any, body: Any) -> dict[str, Any]:
    """POST /v1/sms-campaigns/:id/schedule: checks in the specification's order, then QUEUED."""
    body = require_object(body, SCHEDULE_INVALID_BODY)
    row = _row(conn, workspace_id, campaign_id)
    kind, scheduled_at = _parse_schedule(body)
    with transaction(conn):
        row = _row(conn, workspace_id, row["id"])
        if row["status"] != "DRAFT":
            raise MktError(400, ONLY_DRAFT)
        if not row["name"].strip():
            raise MktError(400, NAME_BEFORE_SCHEDULING)
        if not row["message"].strip():
            raise MktError(400, MESSAGE_BEFORE_SCHEDULING)
        audience = json.loads(row["audience"])
        if not audience:
            raise MktError(400, AUDIENCE_BEFORE_SCHEDULING)
        if not sms_ledger.get_sender_id(conn, workspace_id)["sms_sender_id"]:
            raise MktError(400, NO_SENDER_ID)
        try:
            available = sms_ledger.balance(conn, workspace_id)
            minimum = sms_ledger.scheduling_minimum()
        except (sqlite3.Error, ArithmeticError, MktError):
            raise MktError(400, BALANCE_CHECK_FAILED) from None
        if available < minimum:
            raise MktError(400, BALANCE_BELOW_MINIMUM.format(available=sms_ledger.two_places(available),
                                                             minimum=sms_ledger.two_places(minimum)))
        estimate, recipients = estimate_cost(conn, workspace_id, row["message"], audience)
        if available < estimate:
            raise MktError(400, BALANCE_BELOW_ESTIMATE.format(available=sms_ledger.two_places(available),
                                                              estimate=sms_ledger.two_places(estimate),
                                                              recipients=f"{recipients:,}"))
        try:
            verdict = review_campaign(conn, workspace_id, row["message"])
        except Exception:  # noqa: BLE001 - any failure of the classifier is the spec's message
            raise MktError(400, REVIEW_FAILED) from None
        if verdict["flagged"]:
            raise MktError(400, REVIEW_FLAGGED)
        now = clock.now()
        try:
            jobs.enqueue(conn, JOB_TYPE, {"campaign_id": row["id"]}, workspace_id=workspace_id,
                         dedupe_key=f"sms-campaign:{row['id']}", run_at=scheduled_at, max_attempts=10)
        except (sqlite3.Error, ValueError):
            raise MktError(400, QUEUE_FAILED) from None
        conn.execute("UPDATE sms_campaigns SET status = 'QUEUED', scheduled_at = ?, queued_at = ?, estimated_cost = ?,"
                     " updated_at = ? WHERE id = ?",
                     (scheduled_at, now, sms_ledger.money(estimate), now, row["id"]))
    result: dict[str, Any] = {"id": row["id"], "status": "QUEUED"}
    if scheduled_at is not None:
        result["scheduled_at"] = scheduled_at
    return result


# --- expansion -------------------------------------------------------------------------

def batch_size() -> int:
    try:
        return max(1, int(os.environ.get("MKT_SMS_BATCH_SIZE", BATCH_SIZE)))
    except ValueError:
        return BATCH_SIZE


def _pause() -> None:
    """A test hook: MKT_SMS_BATCH_PAUSE seconds between batches (crash tests)."""
    pause = os.environ.get("MKT_SMS_BATCH_PAUSE")
    if pause:
        time.sleep(float(pause))


def _still_queued(conn: sqlite3.Connection, campaign_id: str) -> bool:
    row = conn.execute("SELECT status FROM sms_campaigns WHERE id = ?", (campaign_id,)).fetchone()
    return row is not None and row["status"] == "QUEUED"


@contextmanager
def _campaign_checked_here(conn: sqlite3.Connection) -> Iterator[None]:
    """Foreign key checks off for one expansion batch's transaction (the pragma cannot change
    inside one). Every row the batch writes belongs to the campaign that the same transaction
    has just read as QUEUED, under the write lock, so the per-row check of sms_messages'
    campaign_id could not fail; it cost 0.27 s per 1,000,000 rows (measured)."""
    enabled = conn.execute("PRAGMA foreign_keys").fetchone()[0]
    conn.execute("PRAGMA foreign_keys = OFF")
    try:
        yield
    finally:
        conn.execute(f"PRAGMA foreign_keys = {'ON' if enabled else 'OFF'}")


def expand_recipients(conn: sqlite3.Connection, campaign: sqlite3.Row) -> bool:
    """Phase 1: message rows and charges, batch by batch. False when the campaign was cancelled.

    Before the batches, three small steps keep the per-batch statement a plain join: the
    audience is frozen into a snapshot (the contact's rowid and id); each distinct
    number prefix gets its country and price once (_Pricing); then each batch reads its slice
    of the snapshot, the contact by rowid (a contact deleted, unsubscribed from SMS or left
    without a number since the snapshot is skipped) and the prefix's row.
    """
    from marketing_cli.services.contacts.audience import resolve_audience
    from marketing_cli.services.sms import links as sms_links

    workspace_id = campaign["workspace_id"]
    renderer = Renderer(conn, workspace_id, campaign["message"])
    if renderer.has_tags:
        _register_renderer(conn, renderer)
    prices = price_units(conn, workspace_id)
    # Links can only appear through the message or a merge tag's value.
    track_links = sms_links.tracking_on(conn, workspace_id) and (
        renderer.has_tags or bool(sms_links.find_urls(campaign["message"])))
    snapshot = f"temp.sms_snapshot_{uuid.uuid4().hex}"  # our own name, never user text
    query = resolve_audience(conn, workspace_id, json.loads(campaign["audience"]), "sms", "c.rowid, c.id")
    conn.execute(f"CREATE TABLE {snapshot} (rid INTEGER NOT NULL, id TEXT NOT NULL)")
    try:
        with _Pricing(conn, workspace_id, prices) as pricing:
            # In rowid order: each batch then reads its contacts in table order and appends their
            # ids to sms_messages' (campaign_id, contact_id) key. Without it, an index plan (by
            # phone, without ANALYZE's statistics) made each batch's rows land all over the key:
            # 3.4 s against 1.8 s at 200,000 recipients. With a table scan the order is free.
            conn.execute(f"INSERT INTO {snapshot} (rid, id) {query.sql} ORDER BY c.rowid", query.params)
            last = conn.execute(f"SELECT MAX(rowid) FROM {snapshot}").fetchone()[0] or 0
            pricing.resolve(f"SELECT c.phone FROM {snapshot} s JOIN contacts c ON c.rowid = s.rid", size=last)
            insert = _batch_statement(campaign["message"], renderer, snapshot, pricing)
            return _write_batches(conn, campaign, insert, last, prices, track_links)
    finally:
        conn.execute(f"DROP TABLE IF EXISTS {snapshot}")


def _batch_statement(message: str, renderer: Renderer, snapshot: str, pricing: _Pricing) -> str:
    """The INSERT of one batch's message rows (parameters :start, :end, :cid, :batch, :now)."""
    country, units = pricing.country("c.phone"), pricing.units("c.phone")
    recipients = (f"FROM {snapshot} s JOIN contacts c ON c.rowid = s.rid AND c.id = s.id{pricing.join('c.phone')}"
                  " WHERE s.rowid > :start AND s.rowid <= :end AND c.phone IS NOT NULL AND c.phone <> ''"
                  " AND (c.sms_status IS NULL OR c.sms_status = 'SUBSCRIBED')")
    columns = ("INSERT OR IGNORE INTO sms_messages (campaign_id, contact_id, batch, phone, country, body,"
               " encoding, segments, price_units, status, created_at)")
    if not renderer.has_tags:  # one text for all: its encoding and segments are values of ours
        fixed = count_segments(message)
        return (f"{columns} SELECT :cid, c.id, :batch, c.phone, {country}, NULL, '{fixed.encoding}',"
                f" {int(fixed.segments)}, COALESCE(({units}) * {int(fixed.segments)}, 0),"
                f" CASE WHEN ({units}) IS NULL THEN 'suppressed' ELSE 'pending' END, :now {recipients}")
    # Two steps, each MATERIALIZED so that its columns are computed once per recipient: b
    # reads the tags' texts (one json_extract each), r renders and measures from them.
    # m packs a message's measure in one integer: segments * 2, plus 1 for UCS-2.
    if renderer.values_sql is None:  # a field's values need Python to become text
        texts, body, measure = "mkt_sms_render(c.email, c.phone, c.data) AS body", "b.body", "mkt_sms_measure(b.body)"
    else:
        texts = ", ".join(f"{v} AS v{i}" for i, v in enumerate(renderer.values_sql))
        body, measure = renderer.body_sql("b.v{}"), renderer.measure_sql("b.v{}")
    return (f"WITH b AS MATERIALIZED (SELECT c.id, c.phone, {country} AS country, {units} AS units, {texts}"
            f" {recipients}), r AS MATERIALIZED (SELECT b.id, b.phone, b.country, b.units, {body} AS body,"
            f" {measure} AS m FROM b) {columns}"
            " SELECT :cid, r.id, :batch, r.phone, r.country, r.body, CASE WHEN r.m & 1 THEN 'UCS-2' ELSE 'GSM-7'"
            " END, r.m >> 1, COALESCE(r.units * (r.m >> 1), 0),"
            " CASE WHEN r.units IS NULL THEN 'suppressed' ELSE 'pending' END, :now FROM r")


def _write_batches(conn: sqlite3.Connection, campaign: sqlite3.Row, insert: str, last: int,
                   prices: dict[str, int], track_links: bool) -> bool:
    """Snapshot rows 1..last, BATCH_SIZE at a time: each batch's rows and its charge in one
    transaction that first checks the campaign is still QUEUED. False when it is not."""
    from marketing_cli.services.sms import links as sms_links

    workspace_id, cid = campaign["workspace_id"], campaign["id"]
    size, start = batch_size(), 0
    while start < last:
        with _campaign_checked_here(conn), transaction(conn):
            if not _still_queued(conn, cid):
                return False
            batch = (conn.execute("SELECT MAX(batch) FROM sms_messages WHERE campaign_id = ?",
                                  (cid,)).fetchone()[0] or 0) + 1
            before = conn.total_changes  # (rowcount is -1 for a statement that starts with WITH)
            conn.execute(insert, {"start": start, "end": start + size, "cid": cid, "batch": batch,
                                  "now": clock.now()})
            written = conn.total_changes - before
            if written > 0 and track_links:  # short links change the text as sent: before the charge
                sms_links.shorten_batch(conn, workspace_id, cid, batch, campaign["message"], prices)
            if written > 0:
                row = conn.execute("SELECT COUNT(*), COALESCE(SUM(price_units), 0) FROM sms_messages"
                                   " WHERE campaign_id = ? AND batch = ? AND status = 'pending'",
                                   (cid, batch)).fetchone()
                if row[1] > 0:
                    sms_ledger.append(conn, workspace_id, "charge", -sms_ledger.from_units(row[1]),
                                      f"Campaign '{campaign['name']}': {row[0]:,} messages (batch {batch})",
                                      campaign_id=cid, batch=batch)
        start += size
        jobs.heartbeat(conn)
        _pause()
    with transaction(conn):
        if not _still_queued(conn, cid):
            return False
        conn.execute("UPDATE sms_campaigns SET expanded_at = ?, updated_at = ? WHERE id = ?",
                     (clock.now(), clock.now(), cid))
    return True


def hand_off(conn: sqlite3.Connection, campaign: sqlite3.Row) -> bool:
    """Phase 2: pending messages to the provider, a batch at a time. False when cancelled."""
    from marketing_cli.services.sms.providers import Outgoing, get_provider

    workspace_id, cid = campaign["workspace_id"], campaign["id"]
    provider = get_provider(conn, workspace_id)
    sender = sms_ledger.get_sender_id(conn, workspace_id)["sms_sender_id"] or ""
    size = batch_size()
    # A network provider's batch left 'sending' by a crash is handed over again.
    with transaction(conn):
        conn.execute("UPDATE sms_messages SET status = 'pending' WHERE campaign_id = ? AND status = 'sending'", (cid,))
    while True:
        if hasattr(provider, "send_claimed"):  # an in-database provider: one SQL statement per batch
            with transaction(conn):
                if not _still_queued(conn, cid):
                    return False
                claimed = conn.execute(
                    "UPDATE sms_messages SET status = 'sending' WHERE id IN (SELECT id FROM sms_messages"
                    " WHERE campaign_id = ? AND status = 'pending' ORDER BY id LIMIT ?)", (cid, size)).rowcount
                if claimed == 0:
                    return True
                prefix = provider.send_claimed(conn, workspace_id, cid, sender, campaign["message"])
                conn.execute("UPDATE sms_messages SET status = 'sent', provider = ?, provider_ref = ? || id,"
                             " handed_at = ? WHERE campaign_id = ? AND status = 'sending'",
                             (provider.name, prefix, clock.now(), cid))
            jobs.heartbeat(conn)
            _pause()
            continue
        with transaction(conn):
            if not _still_queued(conn, cid):
                return False
            rows = conn.execute(
                "UPDATE sms_messages SET status = 'sending' WHERE id IN (SELECT id FROM sms_messages"
                " WHERE campaign_id = ? AND status = 'pending' ORDER BY id LIMIT ?)"
                " RETURNING id, phone, COALESCE(body, ?) AS body, segments", (cid, size, campaign["message"])).fetchall()
            if not rows:
                return True
            outgoing = [Outgoing(r["id"], cid, sender, r["phone"], r["body"], r["segments"]) for r in rows]
            if provider.in_database:
                _record(conn, provider.name, provider.send(conn, workspace_id, outgoing))
        if not provider.in_database:
            receipts = provider.send(conn, workspace_id, outgoing)
            with transaction(conn):
                refused = [r.message_id for r in receipts if not r.accepted]
                count, units = conn.execute(
                    f"SELECT COUNT(*), COALESCE(SUM(price_units), 0) FROM sms_messages WHERE status = 'sending'"
                    f" AND id IN ({', '.join('?' * len(refused)) or 'NULL'})", refused).fetchone()
                _record(conn, provider.name, receipts)
                if units > 0:  # a message the provider refused is not charged
                    sms_ledger.append(conn, workspace_id, "refund", sms_ledger.from_units(units),
                                      f"Campaign '{campaign['name']}': {count:,} messages refused by {provider.name}",
                                      campaign_id=cid)
        jobs.heartbeat(conn)
        _pause()


def _record(conn: sqlite3.Connection, provider: str, receipts: list[Any]) -> None:
    now = clock.now()
    conn.executemany(
        "UPDATE sms_messages SET status = ?, provider = ?, provider_ref = ?, handed_at = ?, failed_at = ?,"
        " error_code = ?, error_message = ? WHERE id = ? AND status = 'sending'",
        [("sent" if r.accepted else "failed", provider, r.reference, now if r.accepted else None,
          None if r.accepted else now, None if r.accepted else getattr(r, "code", None),
          None if r.accepted else r.error, r.message_id)
         for r in receipts],
    )


@jobs.handler(JOB_TYPE)
def expand_job(conn: sqlite3.Connection, job: dict[str, Any]) -> None:
    """Expand a QUEUED campaign and hand its messages over; idempotent (a re-run resumes)."""
    campaign = conn.execute("SELECT * FROM sms_campaigns WHERE id = ?", (job["campaign_id"],)).fetchone()
    if campaign is None or campaign["status"] != "QUEUED":
        return  # cancelled (or deleted) meanwhile: nothing to do
    if campaign["expanded_at"] is None and not expand_recipients(conn, campaign):
        return
    if not hand_off(conn, campaign):
        return
    with transaction(conn):
        now = clock.now()
        conn.execute("UPDATE sms_campaigns SET status = 'COMPLETED', completed_at = ?, updated_at = ?"
                     " WHERE id = ? AND status = 'QUEUED'", (now, now, campaign["id"]))


# --- cancel ------------------------------------------------------------------------------

def cancel_campaign(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """POST /v1/sms-campaigns/:id/cancel: stop, refund every message never handed over."""
    with transaction(conn):
        row = _row(conn, workspace_id, campaign_id)
        if row["status"] != "QUEUED":
            raise MktError(400, ONLY_QUEUED_CANCEL)
        count, units = conn.execute("SELECT COUNT(*), COALESCE(SUM(price_units), 0) FROM sms_messages"
                                    " WHERE campaign_id = ? AND status = 'pending'", (row["id"],)).fetchone()
        conn.execute("UPDATE sms_messages SET status = 'cancelled' WHERE campaign_id = ? AND status = 'pending'",
                     (row["id"],))
        if units > 0:
            sms_ledger.append(conn, workspace_id, "refund", sms_ledger.from_units(units),
                              f"Campaign '{row['name']}' cancelled: {count:,} messages never handed to a provider",
                              campaign_id=row["id"])
        now = clock.now()
        conn.execute("UPDATE sms_campaigns SET status = 'CANCELLED', cancelled_at = ?, updated_at = ? WHERE id = ?",
                     (now, now, row["id"]))
        conn.execute("DELETE FROM jobs WHERE dedupe_key = ? AND status = 'queued'", (f"sms-campaign:{row['id']}",))
        return {"id": row["id"], "status": "CANCELLED", "refunded": sms_ledger.money(sms_ledger.from_units(units)),
                "refunded_messages": count}


# --- statistics --------------------------------------------------------------------------

def _breakdown(conn: sqlite3.Connection, cid: str, column: str, key: str) -> list[dict[str, Any]]:
    sql = (f"SELECT COALESCE(k.{column}, 'unknown') AS v, COUNT(*) AS n FROM sms_clicks k"
           " WHERE k.id IN (SELECT MIN(k2.id) FROM sms_clicks k2 JOIN sms_messages m ON m.id = k2.message_id"
           "                WHERE m.campaign_id = ? GROUP BY k2.message_id)"
           " GROUP BY v ORDER BY n DESC, v LIMIT 10")
    return [{key: r["v"], "click_count": r["n"]} for r in conn.execute(sql, (cid,))]


def campaign_statistics(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """GET /v1/sms-campaigns/:id/statistics."""
    row = _row(conn, workspace_id, campaign_id)
    cid = row["id"]
    links = conn.execute(
        "SELECT k.url, COUNT(*) AS total, COUNT(DISTINCT k.message_id) AS uniq FROM sms_clicks k"
        " JOIN sms_messages m ON m.id = k.message_id WHERE m.campaign_id = ? GROUP BY k.url ORDER BY total DESC, k.url",
        (cid,)).fetchall()
    return {
        "aggregate": _statistics(conn, [cid])[cid],
        "clicks_by_country": _breakdown(conn, cid, "country", "country"),
        "clicks_by_device_type": _breakdown(conn, cid, "device_type", "device_type"),
        "clicks_by_os": _breakdown(conn, cid, "operating_system", "operating_system"),
        "link_activity": [{"url": r["url"], "total_clicks": r["total"], "unique_clicks": r["uniq"]} for r in links],
        "total_cost": sms_ledger.money(sms_ledger.campaign_cost(conn, cid)),
    }
