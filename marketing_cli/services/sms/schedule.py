"""Before an SMS campaign is queued: the quote of one message, the cost estimate of a
campaign, the automated review, and scheduling (DRAFT -> QUEUED), whose checks run in the
specification's order (part 7, Schedule SMS Campaign)."""

from __future__ import annotations

import json
import re
import sqlite3
from decimal import Decimal
from typing import Any

from marketing_cli import jobs
from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.inputs import member, require_object
from marketing_cli.kernel.money import cents
from marketing_cli.services.sms import ledger
from marketing_cli.services.sms.campaigns import (
    AUDIENCE_BEFORE_SCHEDULING,
    BALANCE_BELOW_ESTIMATE,
    BALANCE_BELOW_MINIMUM,
    BALANCE_CHECK_FAILED,
    INVALID_BODY,
    INVALID_NUMBER,
    INVALID_SCHEDULE_TYPE,
    MESSAGE_BEFORE_SCHEDULING,
    NAME_BEFORE_SCHEDULING,
    NO_SENDER_ID,
    ONLY_DRAFT,
    QUEUE_FAILED,
    QUOTE_MESSAGE_REQUIRED,
    RESERVED,
    REVIEW_FAILED,
    REVIEW_FLAGGED,
    SCHEDULE_INVALID_BODY,
    SCHEDULED_AT_FORMAT,
    SCHEDULED_AT_PAST,
    SCHEDULED_AT_REQUIRED,
    SCHEDULED_AT_UNUSABLE,
    TOP_UP,
    campaign_row,
    job_key,
)
from marketing_cli.services.sms.expansion import JOB_TYPE
from marketing_cli.services.sms.pricing import Pricing, country_of, price_units
from marketing_cli.services.sms.render import Renderer, check_message, register_renderer
from marketing_cli.services.sms.segments import count_segments
from marketing_cli.storage import field_sql
from marketing_cli.storage.db import transaction


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
        number = _quote_number(conn, workspace_id, to)
        country = country_of(number)
        if country is None:
            raise MktError(400, INVALID_NUMBER.format(value=to))
        prices = price_units(conn, workspace_id)
        quote.update(to=number, country=country)
        if country in prices:
            per_segment = Decimal(prices[country]).scaleb(-5)
            quote.update(price_per_segment=f"{per_segment:.5f}", price=f"{per_segment * result.segments:.5f}",
                         sendable=True)
        else:
            quote.update(sendable=False, note=f"SMS cannot be sent to {country}: no price is published for it "
                                              "(SMS not enabled there, or a dedicated sender registration is needed).")
    return quote


def _quote_number(conn: sqlite3.Connection, workspace_id: int, to: str) -> str:
    """`to` in E.164, read as contacts read phone numbers (services/contacts/values.py):
    separators and national forms are fine, a number without + is read in the phone_number
    field's default region. The refusal says which region was used, or that none is set."""
    from marketing_cli.services.contacts.values import load_fields, normalize_phone

    phone_field = load_fields(conn, workspace_id).phone
    region = phone_field.default_region if phone_field is not None else None
    try:
        return normalize_phone(to, region)
    except ValueError as exc:
        if to.strip().startswith("+"):
            detail = f"{exc}"
        elif region:
            detail = (f"{exc} Without a + country code it was read as a number of {region}, the phone_number "
                      "field's default region, as contacts are.")
        else:
            detail = (f"{exc} Write it with + and its country code, or give the phone_number field a default "
                      "region (`mkt fields update ID --default-region CC`) to read national numbers.")
        raise MktError(400, INVALID_NUMBER.format(value=to), detail) from None


def estimate_cost(conn: sqlite3.Connection, workspace_id: int, message: str,
                  audience: list[dict[str, Any]]) -> tuple[Decimal, int]:
    """(estimated cost, recipients): each eligible recipient with a price x the segments of the
    message rendered for that recipient, in SQL as expansion renders it (each merge tag's value,
    default or fallback). A charge differs only when the audience or the contacts change before
    expansion, or when link tracking replaces the message's links by short links. The recipients
    are those with a price (the others are suppressed, never sent): the estimate's count."""
    from marketing_cli.services.contacts.audience import resolve_audience

    renderer = Renderer(conn, workspace_id, message)
    numbers = resolve_audience(conn, workspace_id, audience, "sms", "c.phone")
    with Pricing(conn, workspace_id, price_units(conn, workspace_id)) as pricing:
        pricing.resolve(numbers.sql, numbers.params)
        units, join = pricing.units("a.phone"), pricing.join("a.phone")
        if not renderer.has_tags:  # one text for all
            recipients, total = conn.execute(f"SELECT COUNT({units}), COALESCE(SUM({units}), 0) FROM ({numbers.sql}) a{join}",
                                             numbers.params).fetchone()
            return ledger.from_units(total * count_segments(renderer.text).segments), recipients
        register_renderer(conn, renderer)
        columns = f"c.phone, c.email, {field_sql.data_columns(conn, 'c')}"
        query = resolve_audience(conn, workspace_id, audience, "sms", columns)
        measure = renderer.rendered_sql("b")[1]
        recipients, total = conn.execute(
            f"WITH b AS MATERIALIZED (SELECT {units} AS units, {renderer.texts_sql('a')} FROM ({query.sql}) a{join})"
            f" SELECT COUNT(b.units), COALESCE(SUM(b.units * (({measure}) >> 1)), 0) FROM b", query.params).fetchone()
    return ledger.from_units(total), recipients


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
    # One write transaction (BEGIN IMMEDIATE) from the first read to the last write: the
    # balance check and the reservation (the campaign QUEUED with its estimate) commit
    # together, so two campaigns scheduled at once (two processes, the CLI and the API) are
    # checked one after the other, the second against what the first reserved.
    with transaction(conn):
        row = campaign_row(conn, workspace_id, campaign_id)
        _, scheduled_at = _parse_schedule(body)
        if row["status"] != "DRAFT":
            raise MktError(400, ONLY_DRAFT)
        if not row["name"].strip():
            raise MktError(400, NAME_BEFORE_SCHEDULING)
        if not row["message"].strip():
            raise MktError(400, MESSAGE_BEFORE_SCHEDULING)
        check_message(conn, workspace_id, row["message"])  # a field renamed or deleted since the update
        audience = json.loads(row["audience"])
        if not audience:
            raise MktError(400, AUDIENCE_BEFORE_SCHEDULING)
        if not ledger.get_sender_id(conn, workspace_id)["sms_sender_id"]:
            raise MktError(400, NO_SENDER_ID)
        try:
            balance = ledger.balance(conn, workspace_id)
            reserved = ledger.reserved(conn, workspace_id)
            minimum = ledger.scheduling_minimum()
        except (sqlite3.Error, ArithmeticError, MktError):
            raise MktError(400, BALANCE_CHECK_FAILED) from None
        available = balance - reserved
        if available < minimum:
            raise MktError(400, BALANCE_BELOW_MINIMUM.format(available=cents(available),
                                                             minimum=cents(minimum)), detail=TOP_UP)
        estimate, recipients = estimate_cost(conn, workspace_id, row["message"], audience)
        if available < estimate:
            held = RESERVED.format(reserved=cents(reserved), balance=cents(balance))
            raise MktError(400, BALANCE_BELOW_ESTIMATE.format(available=cents(available),
                                                              reserved=held if reserved else "",
                                                              estimate=cents(estimate),
                                                              recipients=f"{recipients:,} recipient"
                                                                         + ("" if recipients == 1 else "s")))
        try:
            verdict = review_campaign(conn, workspace_id, row["message"])
        except Exception:  # noqa: BLE001 - any failure of the classifier is the spec's message
            raise MktError(400, REVIEW_FAILED) from None
        if verdict["flagged"]:
            raise MktError(400, REVIEW_FLAGGED)
        from marketing_cli.services.contacts import local_time

        local = local_time.read_local_time(conn, workspace_id, body, scheduled_at)
        now = clock.now()
        try:
            jobs.enqueue(conn, JOB_TYPE, {"campaign_id": row["id"]}, workspace_id=workspace_id,
                         dedupe_key=job_key(row['id']), run_at=local["starts_at"] if local else scheduled_at,
                         max_attempts=10)
        except (sqlite3.Error, ValueError):
            raise MktError(400, QUEUE_FAILED) from None
        conn.execute("UPDATE sms_campaigns SET status = 'QUEUED', scheduled_at = ?, queued_at = ?, estimated_cost = ?,"
                     " updated_at = ?, local_time = ?, local_date = ?, local_time_missed = ?, local_starts_at = ?,"
                     " local_time_skipped = 0 WHERE id = ?",
                     (scheduled_at, now, ledger.money(estimate), now, local and local["time"], local and local["date"],
                      local and local["missed"], local and local["starts_at"], row["id"]))
    result: dict[str, Any] = {"id": row["id"], "status": "QUEUED"}
    if scheduled_at is not None:
        result["scheduled_at"] = scheduled_at
    if local is not None:
        result["local_time"] = local
    return result


def preview_schedule(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any, body: Any) -> dict[str, Any]:
    """POST /v1/sms-campaigns/:id/schedule/preview: what the schedule call would do with this
    body, without doing it: the UTC instant understood and, with local_time, the count per zone."""
    from marketing_cli.services.contacts import local_time

    body = require_object(body, SCHEDULE_INVALID_BODY)
    row = campaign_row(conn, workspace_id, campaign_id)
    _, scheduled_at = _parse_schedule(body)
    audience = json.loads(row["audience"])
    if not audience:
        raise MktError(400, AUDIENCE_BEFORE_SCHEDULING)
    local = local_time.read_local_time(conn, workspace_id, body, scheduled_at)
    return local_time.schedule_preview(conn, workspace_id, audience, "sms", scheduled_at, local)
