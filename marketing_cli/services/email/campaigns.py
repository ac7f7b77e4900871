"""Email campaigns: create, list, show, configure, and the status machine.

A campaign is made with its variant(s) (A; and B for AB_TESTING), each with its final id:
configure updates the variants of the given types in place, so a variant keeps its id for
the campaign's life. Configure checks everything before it writes anything, in the
specification's order of checks, and writes in one transaction (all or nothing).

The status machine (docs/campaigns.md draws it): every status change goes through
`set_campaign_status`, which refuses a move that `TRANSITIONS` does not list.
"""

from __future__ import annotations

import json
import math
import sqlite3
from typing import Any

from marketing_cli import jobs
from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.addresses import needs_smtputf8
from marketing_cli.kernel.ids import new_id, parse_hex_id, parse_int_id
from marketing_cli.kernel.inputs import member, required_text, type_error
from marketing_cli.kernel.numbers import parse_signed
from marketing_cli.services.contacts.audience import validate_audience
from marketing_cli.services.contacts.values import normalize_email
from marketing_cli.services.email.domains import domain_names
from marketing_cli.services.email.stats import campaign_progress
from marketing_cli.storage.db import transaction

TYPES = ("SINGLE_VARIANT", "AB_TESTING")
VARIANT_TYPES = ("A", "B")
STATUSES = ("DRAFT", "QUEUED", "PREPROCESSING", "IN_REVIEW", "SENDING", "SENT", "CANCELLED", "PAUSED", "ARCHIVED")

# Which status may follow which. DRAFT is the only editable one; SENT and CANCELLED end a send
# and may only be archived (then the campaign may be deleted: services/deletion/campaigns.py).
TRANSITIONS: dict[str, frozenset[str]] = {
    "DRAFT": frozenset({"QUEUED"}),
    "QUEUED": frozenset({"DRAFT", "PREPROCESSING", "CANCELLED"}),
    "PREPROCESSING": frozenset({"DRAFT", "IN_REVIEW", "SENDING", "PAUSED", "CANCELLED"}),
    "IN_REVIEW": frozenset({"DRAFT", "SENDING", "PAUSED", "CANCELLED"}),
    "SENDING": frozenset({"SENT", "PAUSED", "CANCELLED"}),
    "PAUSED": frozenset({"SENDING", "CANCELLED"}),
    "SENT": frozenset({"ARCHIVED"}),
    "CANCELLED": frozenset({"ARCHIVED"}),
    "ARCHIVED": frozenset(),
}
LOCKED_FOR_EDIT = ("PREPROCESSING", "IN_REVIEW")

INVALID_BODY = "Invalid request body."
CREATE_INVALID_BODY = "Please provide a valid request body."
NAME_REQUIRED = "Please provide a name for this campaign."
NAME_TOO_LONG = "The campaign name must be 255 characters or less."
TYPE_INVALID = "Invalid campaign type. Must be 'SINGLE_VARIANT' or 'AB_TESTING'."
STATUS_INVALID = "Invalid status '{value}'."
ID_REQUIRED = "Please provide a campaign ID."
NOT_FOUND = "We could not find the campaign you are looking for."
NOT_DRAFT = "The campaign must be in draft mode before it can be configured."
SENDER_INVALID = "Invalid sender identity DomainID."
SENDER_NOT_FOUND = "The sender identity could not be found."
REPLY_TO_INCOMPLETE = "The reply-to address needs a local_part and a domain_name."
REPLY_TO_INVALID = "The reply-to address is not a valid email address."
REPLY_TO_NOT_ASCII = ("The reply-to address must be ASCII before the @: servers without SMTPUTF8 could not carry "
                      "any message that names it (a domain in Unicode is fine).")
VARIANT_TYPE_INVALID = "Invalid variant type. Must be 'A' or 'B'."
VARIANT_TWICE = "Variant '{type}' is given more than once."
SINGLE_NO_B = "Single variant campaigns cannot have a 'B' variant."
SINGLE_NEEDS_A = "Single variant campaigns must include variant 'A'."
AB_NEEDS_BOTH = "A/B testing campaigns must include both variant 'A' and variant 'B'."
SUBJECT_REQUIRED = "Please provide a subject for this variant."
SUBJECT_TOO_SHORT = "The subject must be at least 3 characters long."
SUBJECT_TOO_LONG = "The subject must be 90 characters or less."
PREVIEW_TOO_LONG = "The preview text must be 120 characters or less."
VARIANT_NOT_FOUND = "We could not find the variant you are looking for."
ILLEGAL_MOVE = "A campaign cannot move from {old} to {new}."
COPY_NAME = "Copy of {name}"
AB_SETTINGS = ("test_percentage", "winner_criterion", "wait_minutes")
PREVIEW_JOB = "campaign.preview"  # its handler: services/email/variant_html.py
DEFAULT_LIMIT = 50
MAX_LIMIT = 100


# --- ids and rows ----------------------------------------------------------------------

def check_campaign_id(campaign_id: Any) -> str:
    """The path's campaign id: blank is `Please provide a campaign ID.`, malformed is not found."""
    if campaign_id is None or (isinstance(campaign_id, str) and not campaign_id.strip()):
        raise MktError(400, ID_REQUIRED)
    return parse_hex_id(campaign_id, NOT_FOUND)


def campaign_row(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> sqlite3.Row:
    """The workspace's campaign row, or the specification's 400 not-found (also for malformed ids)."""
    campaign_id = check_campaign_id(campaign_id)
    row = conn.execute("SELECT * FROM campaigns WHERE id = ? AND workspace_id = ?",
                       (campaign_id, workspace_id)).fetchone()
    if row is None:
        raise MktError(400, NOT_FOUND)
    return row


def check_variant_type(variant_type: Any) -> str:
    """A or B, case-insensitive."""
    if not isinstance(variant_type, str) or variant_type.strip().upper() not in VARIANT_TYPES:
        raise MktError(400, VARIANT_TYPE_INVALID)
    return variant_type.strip().upper()


def variant_row(conn: sqlite3.Connection, campaign_id: str, variant_type: str) -> sqlite3.Row:
    row = conn.execute("SELECT * FROM campaign_variants WHERE campaign_id = ? AND type = ?",
                       (campaign_id, variant_type)).fetchone()
    if row is None:
        raise MktError(400, VARIANT_NOT_FOUND)
    return row


def sender_identity(conn: sqlite3.Connection, workspace_id: int, sender_id: int | None) -> dict[str, Any] | None:
    """{id, display_name, local_part, domain_name, domain_id, domain_verified, ...} of the workspace, or None."""
    if sender_id is None:
        return None
    from marketing_cli.services.email.senders import get_sender_identity

    return get_sender_identity(conn, workspace_id, sender_id)


# --- views ---------------------------------------------------------------------------------

def variant_view(row: sqlite3.Row) -> dict[str, Any]:
    return {"id": row["id"], "type": row["type"], "subject": row["subject"], "preview_text": row["preview_text"],
            "template_type": row["template_type"], "preview_url": row["preview_url"]}


def _variants(conn: sqlite3.Connection, campaign_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {cid: [] for cid in campaign_ids}
    if campaign_ids:
        marks = ", ".join("?" * len(campaign_ids))
        for row in conn.execute(f"SELECT * FROM campaign_variants WHERE campaign_id IN ({marks}) ORDER BY type",
                                campaign_ids):
            out[row["campaign_id"]].append(variant_view(row))
    return out


def _sender_view(conn: sqlite3.Connection, row: sqlite3.Row) -> dict[str, Any] | None:
    sender = sender_identity(conn, row["workspace_id"], row["sender_identity_id"])
    if sender is None:
        return None
    return {k: sender[k] for k in ("display_name", "local_part", "domain_name")}


def configuration_view(conn: sqlite3.Connection, row: sqlite3.Row,
                       variants: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The specification's configuration view: {id, name, type, sender_identity, reply_to, audience, variants}."""
    return {
        "id": row["id"],
        "name": row["name"],
        "type": row["type"],
        "sender_identity": _sender_view(conn, row),
        "reply_to": json.loads(row["reply_to"]) if row["reply_to"] else None,
        "audience": json.loads(row["audience"]) if row["audience"] else [],
        "variants": variants if variants is not None else _variants(conn, [row["id"]])[row["id"]],
    }


def campaign_view(conn: sqlite3.Connection, row: sqlite3.Row,
                  variants: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The configuration view plus status, status_detail (why a campaign went back to DRAFT,
    PAUSED, or was SENT with failed messages; else null), scheduled_at and timestamps."""
    return {**configuration_view(conn, row, variants), "status": row["status"], "status_detail": row["status_detail"],
            "scheduled_at": row["scheduled_at"], "created_at": row["created_at"], "updated_at": row["updated_at"]}


# --- create, list, get -----------------------------------------------------------------------

def _name(body: dict[str, Any]) -> str:
    return required_text(body.get("name"), "name", missing=NAME_REQUIRED, too_long=NAME_TOO_LONG, max_length=255)


def create_campaign(conn: sqlite3.Connection, workspace_id: int, body: Any) -> dict[str, Any]:
    """POST /v1/campaigns: {name, type?} -> a DRAFT campaign with its empty variant(s)."""
    if not isinstance(body, dict):
        raise MktError(400, CREATE_INVALID_BODY)
    name = _name(body)
    kind = body.get("type", "SINGLE_VARIANT")
    if kind is None:
        kind = "SINGLE_VARIANT"
    if not isinstance(kind, str) or kind.strip().upper() not in TYPES:
        raise MktError(400, TYPE_INVALID)
    kind = kind.strip().upper()
    now = clock.now()
    campaign_id = new_id()
    with transaction(conn):
        conn.execute("INSERT INTO campaigns (id, workspace_id, name, type, status, created_at, updated_at)"
                     " VALUES (?, ?, ?, ?, 'DRAFT', ?, ?)", (campaign_id, workspace_id, name, kind, now, now))
        for variant_type in ("A", "B") if kind == "AB_TESTING" else ("A",):
            conn.execute("INSERT INTO campaign_variants (id, campaign_id, type, created_at, updated_at)"
                         " VALUES (?, ?, ?, ?, ?)", (new_id(), campaign_id, variant_type, now, now))
        return get_campaign(conn, workspace_id, campaign_id)


def get_campaign(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """GET /v1/campaigns/:id: the configuration view with status; once a send began, also
    `progress` (services/email/stats.py) and, for A/B tests, `ab_test` with the decision."""
    row = campaign_row(conn, workspace_id, campaign_id)
    view = campaign_view(conn, row)
    if row["ab_test"]:
        view["ab_test"] = json.loads(row["ab_test"])
    progress = campaign_progress(conn, row)
    if progress is not None:
        view["progress"] = progress
    if row["local_time"]:
        from marketing_cli.services.contacts.local_time import local_time_view

        view["local_time"] = local_time_view(row, progress["waiting_for_local_time"] if progress else None)
    return view


def _page_number(value: Any, default: int) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, str):
        value = parse_signed(value)
        if value is None:
            return default
    if not isinstance(value, int) or value < 1:
        return default
    return value


def list_campaigns(conn: sqlite3.Connection, workspace_id: int, *, page: Any = 1, limit: Any = DEFAULT_LIMIT,
                   status: Any = None) -> dict[str, Any]:
    """GET /v1/campaigns: paged like the SMS list (page from 1; limit 1-100, default 50), newest first."""
    page = _page_number(page, 1)
    limit = min(_page_number(limit, DEFAULT_LIMIT), MAX_LIMIT)
    where, params = "workspace_id = ? AND automation_id IS NULL", [workspace_id]  # not an automation's own
    if status is not None and status != "":
        if not isinstance(status, str) or status.strip().upper() not in STATUSES:
            raise MktError(400, STATUS_INVALID.format(value=status))
        where += " AND status = ?"
        params.append(status.strip().upper())
    total = conn.execute(f"SELECT COUNT(*) FROM campaigns WHERE {where}", params).fetchone()[0]
    rows = conn.execute(f"SELECT * FROM campaigns WHERE {where} ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
                        [*params, limit, (page - 1) * limit]).fetchall()
    variants = _variants(conn, [r["id"] for r in rows])
    return {
        "campaigns": [campaign_view(conn, r, variants[r["id"]]) for r in rows],
        "pagination": {"current_page": page, "per_page": limit,
                       "total_pages": math.ceil(total / limit), "total_count": total},
    }


# --- duplicate -------------------------------------------------------------------------------

def ab_settings(stored: str | None) -> str | None:
    """The A/B test settings of a stored `ab_test` (JSON), without a past decision (winner, rates)."""
    if not stored:
        return None
    settings = json.loads(stored)
    return json.dumps({k: settings[k] for k in AB_SETTINGS if k in settings})


def duplicate_campaign(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """POST /v1/campaigns/:id/duplicate: a new DRAFT named `Copy of <name>` with the same type,
    sender, reply-to, audience, A/B settings and variants (subject, preview text, HTML), each
    variant with a new id. Nothing of the original's sending is copied: no schedule, messages
    or statistics. 201."""
    with transaction(conn):
        row = campaign_row(conn, workspace_id, campaign_id)
        now = clock.now()
        copy_id = new_id()
        conn.execute("INSERT INTO campaigns (id, workspace_id, name, type, status, sender_identity_id, reply_to,"
                     " audience, ab_test, created_at, updated_at) VALUES (?, ?, ?, ?, 'DRAFT', ?, ?, ?, ?, ?, ?)",
                     (copy_id, workspace_id, COPY_NAME.format(name=row["name"])[:255], row["type"],
                      row["sender_identity_id"], row["reply_to"], row["audience"], ab_settings(row["ab_test"]),
                      now, now))
        for v in conn.execute("SELECT * FROM campaign_variants WHERE campaign_id = ? ORDER BY type", (row["id"],)):
            conn.execute("INSERT INTO campaign_variants (id, campaign_id, type, subject, preview_text, template_type,"
                         " body_json, body_html, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (new_id(), copy_id, v["type"], v["subject"], v["preview_text"], v["template_type"],
                          v["body_json"], v["body_html"], now, now))
            _requeue_preview(conn, workspace_id, copy_id, v["type"])  # the thumbnail is the copy's own
        return get_campaign(conn, workspace_id, copy_id)


# --- configure -------------------------------------------------------------------------------

def _reply_to(conn: sqlite3.Connection, workspace_id: int, value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise type_error("sender.reply_to", dict)
    display = member(value, "display_name", str, path="sender.reply_to.display_name") or ""
    local = member(value, "local_part", str, path="sender.reply_to.local_part") or ""
    domain = member(value, "domain_name", str, path="sender.reply_to.domain_name") or ""
    if not local.strip() or not domain.strip():
        raise MktError(400, REPLY_TO_INCOMPLETE)
    if any(c in display for c in "\r\n"):
        raise MktError(400, REPLY_TO_INVALID)
    try:
        address = normalize_email(f"{local.strip()}@{domain.strip()}",
                                  own_domains=lambda: domain_names(conn, workspace_id))
    except ValueError as exc:
        raise MktError(400, REPLY_TO_INVALID, detail=str(exc)) from None
    if needs_smtputf8(address):  # it is in every message's header: as for sender identities, ASCII only
        raise MktError(400, REPLY_TO_NOT_ASCII)
    local_part, domain_name = address.rsplit("@", 1)
    return {"display_name": display.strip(), "local_part": local_part, "domain_name": domain_name}


def _sender(conn: sqlite3.Connection, workspace_id: int, value: Any) -> tuple[int, dict[str, str] | None]:
    if not isinstance(value, dict):
        raise type_error("sender", dict)
    sender_id = parse_int_id(value.get("sender_identity_id"), SENDER_INVALID)
    if sender_identity(conn, workspace_id, sender_id) is None:
        raise MktError(400, SENDER_NOT_FOUND)
    return sender_id, _reply_to(conn, workspace_id, value.get("reply_to"))


def _check_variant(entry: dict[str, Any], index: int) -> dict[str, Any]:
    subject = member(entry, "subject", str, path=f"variants[{index}].subject")
    if subject is None or not subject.strip():
        raise MktError(400, SUBJECT_REQUIRED)
    subject = subject.strip()
    if len(subject) < 3:
        raise MktError(400, SUBJECT_TOO_SHORT)
    if len(subject) > 90:
        raise MktError(400, SUBJECT_TOO_LONG)
    checked = {"type": entry["type"], "subject": subject}
    if "preview_text" in entry:  # absent: the variant keeps its preview text; null or "": cleared
        preview = member(entry, "preview_text", str, path=f"variants[{index}].preview_text") or ""
        if len(preview.strip()) > 120:
            raise MktError(400, PREVIEW_TOO_LONG)
        checked["preview_text"] = preview.strip()
    return checked


def _variants_of(value: Any, campaign_type: str) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise type_error("variants", list)
    seen: list[str] = []
    entries: list[dict[str, Any]] = []
    for i, entry in enumerate(value):
        if not isinstance(entry, dict):
            raise type_error(f"variants[{i}]", dict)
        entries.append({**entry, "type": check_variant_type(entry.get("type"))})
        if entries[-1]["type"] in seen:
            raise MktError(400, VARIANT_TWICE.format(type=entries[-1]["type"]))
        seen.append(entries[-1]["type"])
    if campaign_type == "SINGLE_VARIANT":
        if "B" in seen:
            raise MktError(400, SINGLE_NO_B)
        if "A" not in seen:
            raise MktError(400, SINGLE_NEEDS_A)
    elif set(seen) != {"A", "B"}:
        raise MktError(400, AB_NEEDS_BOTH)
    return [_check_variant(entry, i) for i, entry in enumerate(entries)]


def configure_campaign(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any, body: Any) -> dict[str, Any]:
    """PATCH /v1/campaigns/:id/configure: given sections replaced, omitted ones unchanged; all or nothing."""
    campaign_id = check_campaign_id(campaign_id)
    if not isinstance(body, dict):
        raise MktError(400, INVALID_BODY)
    with transaction(conn):
        row = campaign_row(conn, workspace_id, campaign_id)
        if row["status"] != "DRAFT":
            raise MktError(400, NOT_DRAFT)
        changes: dict[str, Any] = {}
        if body.get("sender") is not None:
            sender_id, reply_to = _sender(conn, workspace_id, body["sender"])
            changes["sender_identity_id"] = sender_id
            changes["reply_to"] = json.dumps(reply_to) if reply_to else None
        if body.get("audience") is not None:
            changes["audience"] = json.dumps(validate_audience(conn, workspace_id, body["audience"]))
        variants = _variants_of(body["variants"], row["type"]) if body.get("variants") is not None else []
        now = clock.now()
        if changes:
            assignments = ", ".join(f"{column} = ?" for column in changes)  # our own column names
            conn.execute(f"UPDATE campaigns SET {assignments}, updated_at = ? WHERE id = ?",
                         (*changes.values(), now, campaign_id))
        else:
            conn.execute("UPDATE campaigns SET updated_at = ? WHERE id = ?", (now, campaign_id))
        for v in variants:
            conn.execute("UPDATE campaign_variants SET subject = ?, preview_text = COALESCE(?, preview_text),"
                         " updated_at = ? WHERE campaign_id = ? AND type = ?",
                         (v["subject"], v.get("preview_text"), now, campaign_id, v["type"]))
            _requeue_preview(conn, workspace_id, campaign_id, v["type"])
        row = campaign_row(conn, workspace_id, campaign_id)
        return configuration_view(conn, row)


def _requeue_preview(conn: sqlite3.Connection, workspace_id: int, campaign_id: str, variant_type: str) -> None:
    """The thumbnail shows the subject: redraw it when a variant with HTML gets a new one."""
    row = conn.execute("SELECT id, body_html FROM campaign_variants WHERE campaign_id = ? AND type = ?",
                       (campaign_id, variant_type)).fetchone()
    if row["body_html"]:
        jobs.enqueue(conn, PREVIEW_JOB, {"campaign_id": campaign_id, "variant_id": row["id"]},
                     workspace_id=workspace_id, dedupe_key=f"{PREVIEW_JOB}:{row['id']}")


# --- the status machine ---------------------------------------------------------------------

def set_campaign_status(conn: sqlite3.Connection, campaign_id: str, new_status: str, *,
                        detail: str | None = None) -> str:
    """Move a campaign to `new_status` if TRANSITIONS allows it; returns the status it left.

    An illegal move (or an unknown status) is MktError(409) and changes nothing.
    """
    if new_status not in STATUSES:
        raise ValueError(f"unknown campaign status {new_status!r}")
    with transaction(conn):
        row = conn.execute("SELECT status FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()
        if row is None:
            raise MktError(400, NOT_FOUND)
        old = row["status"]
        if new_status not in TRANSITIONS[old]:
            raise MktError(409, ILLEGAL_MOVE.format(old=old, new=new_status))
        conn.execute("UPDATE campaigns SET status = ?, status_detail = ?, updated_at = ? WHERE id = ?",
                     (new_status, detail, clock.now(), campaign_id))
        return old
