"""Contacts: create, upsert, read (by id, by phone), tag and untag, one contact at a time.

How a contact is shown is view.py's (`render_contacts`); how a body's values are checked,
normalised and completed with defaults is checks.py's. Here: the statuses, the
endpoints' own messages, and each write in its one transaction.

Rules the specification leaves open, as decided here (docs/api.md, "Contacts"):
- A phone number belongs to at most one contact of a workspace (create answers 409, upsert
  the "different contacts" message), so a lookup by phone is never ambiguous.
- Full replace (upsert with partial_update false) replaces every field value, the phone
  number included; values left out fall back to the field's default_value. A partial update
  merges: given values replace those fields' values, given tags are added to the contact's
  tags (none is removed: /tags/remove or a full replace does that).
- `upsert_and_report` also says what a full replace removed (the command line lists it).
- Automation events (part 6) are appended to contact_events in the same transaction.
- A person on the workspace's suppression list (suppressions.py) is refused with 409 unless
  written UNCONFIRMED: a new double opt-in is the person asking again.
- Each change of the email or SMS consent appends a row to the consent ledger in the same
  transaction (consents.py), with `consent_text` (optional) as the wording, source `api`
  or `command` as the face says.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.ids import new_id, parse_hex_id
from marketing_cli.kernel.inputs import int_list, member, require_object
from marketing_cli.services.account import billing
from marketing_cli.services.contacts import consents, phone_zones, zone_columns
from marketing_cli.services.contacts.checks import (
    allows_no_email,
    check_merge_tags,
    checked_email,
    checked_phone,
    parse_values,
    require_fields,
    with_defaults,
)
from marketing_cli.services.contacts.events import append_events
from marketing_cli.services.contacts.suppressions import refuse_suppressed
from marketing_cli.services.contacts.tagging import change_tag, one_contact
from marketing_cli.services.contacts.tags import tags_by_id
from marketing_cli.services.contacts.values import (
    EMAIL_TAG,
    PHONE_TAG,
    FieldMap,
    contact_with_phone,
    is_empty,
    load_fields,
)
from marketing_cli.services.contacts.view import render_contact, render_contacts
from marketing_cli.storage.db import transaction

STATUSES = ("SUBSCRIBED", "UNSUBSCRIBED", "UNCONFIRMED", "CLEANED", "COMPLAINED")
SMS_STATUSES = ("SUBSCRIBED", "UNSUBSCRIBED", "CLEANED", "BLOCKED")

INVALID_BODY = "Invalid request body."
# Create Contact
NO_FIELDS = "Please provide at least one field for the contact."
STATUS_REQUIRED = "Contact status is required."
STATUS_INVALID = "The status you provided is not valid."
SMS_STATUS_INVALID = ("The SMS status you provided is not valid. Valid SMS statuses are: SUBSCRIBED, UNSUBSCRIBED, "
                      "CLEANED, or BLOCKED.")
EMAIL_REQUIRED = "An email address is required."
# Upsert Contact
UPSERT_EMAIL_REQUIRED = "Email address is required for upsert operation."
UPSERT_IDENTITY_REQUIRED = "A valid email address or phone number is required for upsert operation."
DIFFERENT_CONTACTS = "The email address and phone number belong to different contacts in your workspace."
NO_PHONE_FIELD = "Phone field not found in workspace configuration."
EMAIL_CANNOT_CHANGE = ("The phone number belongs to a contact with a different email address; an email address "
                       "cannot be changed through upsert.")
# Get Contact by Phone Number
BY_PHONE_REQUIRED = "Phone number is required. Please provide a valid phone number."
BY_PHONE_INVALID = "Phone number is invalid. Please provide a valid phone number."
BY_PHONE_NOT_FOUND = "We couldn't find a contact with that phone number."
# Add / remove tags, get by id
CONTACT_ID_INVALID = "The contact ID you provided is not valid."
NO_TAG_IDS = "Please provide at least one tag ID to add or remove."
CONTACT_NOT_FOUND = "We couldn't find a contact with that ID."
# Ours
BILLING_LIMIT = "Billing limit error"
EMAIL_TAKEN = "A contact with the email address {email} already exists in this workspace."
PHONE_TAKEN = "A contact with the phone number {phone} already exists in this workspace."


# --- shared steps --------------------------------------------------------------------

def _status(body: dict[str, Any]) -> str | None:
    status = member(body, "status", str)
    if status is not None and status not in STATUSES:
        raise MktError(400, STATUS_INVALID)
    return status


def _sms_status(body: dict[str, Any]) -> str | None:
    sms_status = member(body, "sms_status", str)
    if sms_status is not None and sms_status not in SMS_STATUSES:
        raise MktError(400, SMS_STATUS_INVALID)
    return sms_status


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def _source(body: dict[str, Any], source: str) -> consents.Source:
    """Where the request's consent changes come from: the face (`api`, `command`) and the wording."""
    return consents.Source(source, consent_text=consents.check_consent_text(body.get("consent_text")))


def _insert(conn: sqlite3.Connection, workspace_id: int, *, email: str | None, phone: str | None, status: str,
            sms_status: str | None, data: dict[str, Any], tag_ids: list[int], source: consents.Source) -> str:
    if billing.remaining(conn, workspace_id, "contacts") <= 0:
        raise billing.limit_error(conn, workspace_id, "contacts", BILLING_LIMIT)
    contact_id = new_id()
    now = clock.now()
    conn.execute(
        "INSERT INTO contacts (id, workspace_id, email, phone, status, sms_status, data, created_at, updated_at,"
        " zone_field, zone_phone_set, zone_cached) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)",
        (contact_id, workspace_id, email, phone, status, sms_status, _dump(data), now, now,
         *_kept_zone(conn, workspace_id, phone, data)),
    )
    conn.executemany("INSERT OR IGNORE INTO contact_tags (contact_id, tag_id) VALUES (?, ?)",
                     [(contact_id, t) for t in tag_ids])
    consents.append(conn, workspace_id, contact_id, consents.changes(None, (status, sms_status, phone)), source,
                    at=now)
    if status == "UNCONFIRMED":
        append_events(conn, workspace_id, contact_id,
                       [("CONTACT_SUBSCRIBED_PENDING", {"email_address": email, "phone_number": phone,
                                                        "status": status})])
    return contact_id


def _kept_zone(conn: sqlite3.Connection, workspace_id: int, phone: str | None,
               data: dict[str, Any]) -> tuple[Any, int | None]:
    """The contact's kept time zone columns (zone_columns.py): its `timezone` value, its phone's list."""
    return (zone_columns.field_value(data, zone_columns.timezone_field(conn, workspace_id)),
            phone_zones.PhoneSets(conn)(phone))


def _find(conn: sqlite3.Connection, workspace_id: int, column: str, value: str | None) -> sqlite3.Row | None:
    if value is None:
        return None
    if column == "phone":
        return contact_with_phone(conn, workspace_id, value)
    return conn.execute("SELECT * FROM contacts WHERE workspace_id = ? AND email = ?", (workspace_id, value)).fetchone()


# --- create --------------------------------------------------------------------------

def create_contact(conn: sqlite3.Connection, workspace_id: int, body: Any, *, source: str = "api") -> dict[str, Any]:
    """POST /v1/contacts: a new contact (201). `source`: the face, for the consent ledger."""
    body = require_object(body, INVALID_BODY)
    given = member(body, "fields", dict)
    if not given:
        raise MktError(400, NO_FIELDS)
    status = _status(body)
    if status is None:
        raise MktError(400, STATUS_REQUIRED)
    sms_status = _sms_status(body)
    tag_ids = list(dict.fromkeys(int_list(body, "tags") or []))
    origin = _source(body, source)
    with transaction(conn):
        fields = load_fields(conn, workspace_id)
        email_raw = given.get(EMAIL_TAG)
        phone_raw = given.get(PHONE_TAG) if fields.phone else None
        if is_empty(email_raw) and (is_empty(phone_raw) or not allows_no_email(conn, workspace_id)):
            raise MktError(400, EMAIL_REQUIRED)
        check_merge_tags(fields, given)
        email = None if is_empty(email_raw) else checked_email(email_raw)
        phone = None if is_empty(phone_raw) else checked_phone(fields, phone_raw)
        data = with_defaults(fields, parse_values(fields, given))
        require_fields(fields, data, phone)
        tags_by_id(conn, workspace_id, tag_ids)
        if email is not None and _find(conn, workspace_id, "email", email) is not None:
            raise MktError(409, EMAIL_TAKEN.format(email=email))
        if phone is not None and _find(conn, workspace_id, "phone", phone) is not None:
            raise MktError(409, PHONE_TAKEN.format(phone=phone))
        refuse_suppressed(conn, workspace_id, email=email, phone=phone, status=status)
        contact_id = _insert(conn, workspace_id, email=email, phone=phone, status=status, sms_status=sms_status,
                             data=data, tag_ids=tag_ids, source=origin)
        return render_contact(conn, workspace_id, contact_id, "full", fields)


# --- upsert --------------------------------------------------------------------------

def upsert_contact(conn: sqlite3.Connection, workspace_id: int, body: Any, *, source: str = "api") -> dict[str, Any]:
    """POST /v1/contacts/upsert: find by email and/or phone, then create, replace or merge.
    `source`: the face, for the consent ledger."""
    return upsert_and_report(conn, workspace_id, body, source=source)[0]


def upsert_and_report(conn: sqlite3.Connection, workspace_id: int, body: Any, *,
                      source: str = "api") -> tuple[dict[str, Any], dict[str, Any] | None]:
    """upsert_contact's contact, and what a full replace of an existing contact removed:
    {"fields": {merge_tag: the value removed}, "tags": [names], "status": the status replaced
    by the default SUBSCRIBED, or None} (None when the contact was created or merged into)."""
    body = require_object(body, INVALID_BODY)
    email_raw = member(body, "email_address", str)
    phone_raw = member(body, "phone_number", str)
    given = dict(member(body, "fields", dict) or {})
    tag_ids = int_list(body, "tags")
    if tag_ids is not None:
        tag_ids = list(dict.fromkeys(tag_ids))
    status = _status(body)
    sms_status = _sms_status(body)
    partial = bool(member(body, "partial_update", bool))
    origin = _source(body, source)

    with transaction(conn):
        fields = load_fields(conn, workspace_id)
        given.pop(EMAIL_TAG, None)  # the top-level email_address is the only one
        inner_phone = given.pop(PHONE_TAG, None) if fields.phone else None
        if is_empty(phone_raw) and not is_empty(inner_phone):
            phone_raw = inner_phone  # fields.phone_number counts when there is no top-level one
        if is_empty(email_raw):
            if not allows_no_email(conn, workspace_id):
                raise MktError(400, UPSERT_EMAIL_REQUIRED)
            if is_empty(phone_raw):
                raise MktError(400, UPSERT_IDENTITY_REQUIRED)
        if not is_empty(phone_raw) and fields.phone is None:
            raise MktError(400, NO_PHONE_FIELD)
        email = None if is_empty(email_raw) else checked_email(email_raw)
        phone = None if is_empty(phone_raw) else checked_phone(fields, phone_raw)
        check_merge_tags(fields, given)
        parsed = parse_values(fields, given)
        tag_names = tags_by_id(conn, workspace_id, tag_ids or [])

        by_email = _find(conn, workspace_id, "email", email)
        by_phone = _find(conn, workspace_id, "phone", phone)
        if by_email is not None and by_phone is not None and by_email["id"] != by_phone["id"]:
            raise MktError(400, DIFFERENT_CONTACTS)
        row = by_email or by_phone
        if row is not None and email is not None and row["email"] not in (None, email):
            raise MktError(400, EMAIL_CANNOT_CHANGE)
        final_status = status or ("SUBSCRIBED" if row is None or not partial else row["status"])
        refuse_suppressed(conn, workspace_id, email=email, phone=phone, status=final_status)

        removed = None
        if row is None:
            data = with_defaults(fields, parsed)
            require_fields(fields, data, phone)
            contact_id = _insert(conn, workspace_id, email=email, phone=phone, status=status or "SUBSCRIBED",
                                 sms_status=sms_status, data=data, tag_ids=tag_ids or [], source=origin)
        else:
            contact_id = row["id"]
            events = _update(conn, workspace_id, fields, row, email=email, phone=phone, parsed=parsed, given=given,
                             status=status, sms_status=sms_status, tag_ids=tag_ids, tag_names=tag_names,
                             partial=partial, source=origin)
            if not partial:
                removed = _removed(events, row["status"], status)
        return render_contact(conn, workspace_id, contact_id, "full", fields), removed


def _removed(events: list[tuple[str, dict[str, Any]]], old_status: str, given_status: str | None) -> dict[str, Any]:
    """What a full replace took away, read from the events it appended (upsert_and_report)."""
    return {
        "fields": {e["merge_tag"]: e["old"] for kind, e in events
                   if kind == "FIELD_UPDATED" and not is_empty(e["old"]) and is_empty(e["new"])},
        "tags": [e["tag_name"] for kind, e in events if kind == "TAG_REMOVED"],
        "status": old_status if given_status is None and old_status != "SUBSCRIBED" else None,
    }


def _update(conn: sqlite3.Connection, workspace_id: int, fields: FieldMap, row: sqlite3.Row, *,
            email: str | None, phone: str | None, parsed: dict[str, Any], given: dict[str, Any],
            status: str | None, sms_status: str | None, tag_ids: list[int] | None, tag_names: dict[int, str],
            partial: bool, source: consents.Source) -> list[tuple[str, dict[str, Any]]]:
    """Replace or merge into the contact `row`; the events appended (also when none was)."""
    old_data = json.loads(row["data"] or "{}")
    if partial:
        data = dict(old_data)
        for key, value in parsed.items():
            if value is None:
                data.pop(key, None)
            else:
                data[key] = value
        new_phone = phone if phone is not None else row["phone"]
        require_fields(fields, data, new_phone, only=given)
        new_status = status or row["status"]
    else:
        data = with_defaults(fields, parsed)
        new_phone = phone
        require_fields(fields, data, new_phone)
        new_status = status or "SUBSCRIBED"
        if tag_ids is None:
            tag_ids = []  # full replace: tags left out means no tags
    new_email = email if email is not None else row["email"]
    new_sms = sms_status if sms_status is not None else row["sms_status"]

    events: list[tuple[str, dict[str, Any]]] = []
    for f in fields.by_tag.values():
        if f.merge_tag == EMAIL_TAG:
            old, new = row["email"], new_email
        elif f.merge_tag == PHONE_TAG:
            old, new = row["phone"], new_phone
        else:
            old, new = old_data.get(str(f.id)), data.get(str(f.id))
        if old != new or type(old) is not type(new):
            events.append(("FIELD_UPDATED", {"field_id": f.id, "merge_tag": f.merge_tag, "old": old, "new": new}))

    if tag_ids is not None:
        current = {r["id"]: r["name"] for r in conn.execute(
            "SELECT t.id, t.name FROM contact_tags ct JOIN tags t ON t.id = ct.tag_id WHERE ct.contact_id = ?"
            " ORDER BY t.id", (row["id"],))}
        added = [t for t in tag_ids if t not in current]
        removed = [] if partial else [t for t in current if t not in tag_names]  # a merge adds tags only
        conn.executemany("INSERT OR IGNORE INTO contact_tags (contact_id, tag_id) VALUES (?, ?)",
                         [(row["id"], t) for t in added])
        conn.executemany("DELETE FROM contact_tags WHERE contact_id = ? AND tag_id = ?",
                         [(row["id"], t) for t in removed])
        events += [("TAG_ADDED", {"tag_id": t, "tag_name": tag_names[t]}) for t in added]
        events += [("TAG_REMOVED", {"tag_id": t, "tag_name": current[t]}) for t in removed]

    changed = bool(events) or new_status != row["status"] or new_sms != row["sms_status"]
    if changed:
        # the kept zone columns: as they were when neither phone nor data changes
        same = new_phone == row["phone"] and _dump(data) == row["data"]
        kept = "zone_cached" if same else zone_columns.FRESH.format(c="contacts")
        conn.execute(
            "UPDATE contacts SET email = ?, phone = ?, status = ?, sms_status = ?, data = ?, updated_at = ?,"
            f" zone_field = ?, zone_phone_set = ?, zone_cached = {kept}"
            " WHERE id = ? AND workspace_id = ?",
            (new_email, new_phone, new_status, new_sms, _dump(data), clock.now(),
             *_kept_zone(conn, workspace_id, new_phone, data), row["id"], workspace_id),
        )
        append_events(conn, workspace_id, row["id"], events)
        consents.append(conn, workspace_id, row["id"], consents.changes(
            (row["status"], row["sms_status"], row["phone"]), (new_status, new_sms, new_phone)), source)
    return events


# --- reading -------------------------------------------------------------------------

def _row(conn: sqlite3.Connection, workspace_id: int, contact_id: Any) -> sqlite3.Row:
    contact_id = parse_hex_id(contact_id, CONTACT_ID_INVALID)
    row = conn.execute("SELECT * FROM contacts WHERE id = ? AND workspace_id = ?",
                       (contact_id, workspace_id)).fetchone()
    if row is None:
        raise MktError(404, CONTACT_NOT_FOUND)
    return row


def get_contact(conn: sqlite3.Connection, workspace_id: int, contact_id: Any) -> dict[str, Any]:
    """GET /v1/contacts/:id: the full contact plus last_opened_at / last_clicked_at."""
    return render_contacts(conn, workspace_id, [_row(conn, workspace_id, contact_id)], "detail")[0]


def get_contact_by_phone(conn: sqlite3.Connection, workspace_id: int, phone_number: Any) -> dict[str, Any]:
    """GET /v1/contacts/by-phone?phone_number=...: the by-phone shape (values under `fields`)."""
    if is_empty(phone_number) or not isinstance(phone_number, str):
        raise MktError(400, BY_PHONE_REQUIRED)
    fields = load_fields(conn, workspace_id)
    if fields.phone is None:
        raise MktError(404, BY_PHONE_NOT_FOUND)
    row = _find(conn, workspace_id, "phone", checked_phone(fields, phone_number, BY_PHONE_INVALID))
    if row is None:
        raise MktError(404, BY_PHONE_NOT_FOUND)
    return render_contacts(conn, workspace_id, [row], "by_phone", fields)[0]


# --- tags ----------------------------------------------------------------------------

def check_contact_id(contact_id: Any) -> str:
    """The path id when it is a contact id (24 hex); 400 otherwise."""
    return parse_hex_id(contact_id, CONTACT_ID_INVALID)


def _tag_ids(body: Any) -> list[int]:
    body = require_object(body, INVALID_BODY)
    tag_ids = int_list(body, "tag_ids")
    if not tag_ids:
        raise MktError(400, NO_TAG_IDS)
    return list(dict.fromkeys(tag_ids))


def add_contact_tags(conn: sqlite3.Connection, workspace_id: int, contact_id: Any, body: Any) -> dict[str, Any]:
    """POST /v1/contacts/:id/tags/add: TAG_ADDED for each tag not already on the contact."""
    return _change_tags(conn, workspace_id, contact_id, body, add=True)


def remove_contact_tags(conn: sqlite3.Connection, workspace_id: int, contact_id: Any, body: Any) -> dict[str, Any]:
    """POST /v1/contacts/:id/tags/remove: TAG_REMOVED for each tag actually removed."""
    return _change_tags(conn, workspace_id, contact_id, body, add=False)


def _change_tags(conn: sqlite3.Connection, workspace_id: int, contact_id: Any, body: Any, *,
                 add: bool) -> dict[str, Any]:
    contact_id = parse_hex_id(contact_id, CONTACT_ID_INVALID)
    tag_ids = _tag_ids(body)
    with transaction(conn):
        row = _row(conn, workspace_id, contact_id)
        names = tags_by_id(conn, workspace_id, tag_ids)
        # The bulk path's writer with a one-contact set, tag by tag in the order given (tagging.py).
        source, params = one_contact(row["id"])
        for t in tag_ids:
            change_tag(conn, workspace_id, {"id": t, "name": names[t]}, source, params, add=add)
        return render_contact(conn, workspace_id, row["id"], "full")
