"""Scheduling, unscheduling, cancelling and resuming email campaigns.

    DRAFT --schedule--> QUEUED --(due) preprocess job--> PREPROCESSING --> IN_REVIEW --> SENDING --> SENT
                          |            (audience frozen)           (content re-checked)
                          +--cancel--> CANCELLED  <--cancel-- PREPROCESSING / IN_REVIEW / SENDING / PAUSED
                          +--unschedule--> DRAFT (nothing prepared yet; the queued jobs removed)

Scheduling checks everything a send needs before anything is queued, so a scheduled
campaign fails only for reasons that arise later (a transport that refuses). The checks
run in this order, each with its message: campaign id, body, schedule type and time
(the Schedule SMS Campaign messages), DRAFT, sender, verified sending domain, the sender's
compliance (services/delivery/compliance.py, given as `sender_check`), audience,
each variant's subject and HTML, each variant's content (merge tags the workspace does
not define, no `{{unsubscribe_url}}`, links that do not parse), the A/B test settings,
recipients, and the `monthly_emails` and `hourly_emails` allowances. The jobs live in
services/delivery/sender.py (the A/B winner's in services/delivery/ab_winner.py).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from marketing_cli import jobs
from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.inputs import require_object
from marketing_cli.kernel.links import tracked_links
from marketing_cli.kernel.merge import TAG
from marketing_cli.services.account import billing
from marketing_cli.services.contacts import audience, local_time
from marketing_cli.services.contacts.merge_tags import find_unknown_tags
from marketing_cli.services.email import campaigns, senders
from marketing_cli.storage.db import transaction

INVALID_BODY = "Invalid request body."
SCHEDULE_TYPE = "Invalid schedule type. Must be 'NOW' or 'LATER'."
AT_REQUIRED = "Scheduled date and time is required when schedule type is 'LATER'."
AT_INVALID = "Invalid scheduled date format. Please provide a valid ISO 8601 UTC timestamp."
AT_PAST = "Scheduled date must be in the future."
ONLY_DRAFT = "Only draft campaigns can be scheduled."
NO_SENDER = "Please configure a sender identity before scheduling this campaign."
UNVERIFIED = ("The sending domain {domain} is not verified yet: publish its DNS records, then run "
              "`mkt domains verify {domain_id}` (POST /v1/domains/{domain_id}/verify).")
NO_AUDIENCE = "Please configure an audience for this campaign before scheduling."
NO_SUBJECT = "Variant {type} needs a subject before scheduling."
NO_HTML = "Variant {type} needs HTML content before scheduling."
UNKNOWN_TAGS = "Variant {type} uses merge tags this workspace does not define: {tags}."
NO_UNSUBSCRIBE = "Variant {type} has no unsubscribe link: add {{{{unsubscribe_url}}}} to its HTML."
BAD_LINK = "Variant {type} has a link that is not a valid URL: {url}"
AB_ONLY = "Only A/B testing campaigns take ab_test settings."
AB_PERCENTAGE = "ab_test.test_percentage must be an integer from 1 to 100."
AB_CRITERION = "ab_test.winner_criterion must be 'OPENS' or 'CLICKS'."
AB_WAIT = "ab_test.wait_minutes must be an integer from 0 to 43200 (30 days)."
NO_RECIPIENTS = "The audience of this campaign has no subscribed recipients with an email address."
MONTHLY_LIMIT = ("This campaign would send {count} emails, but your plan allows {left} more this month "
                 "(monthly_emails). Please upgrade your plan or reduce the audience.")
MONTH_USED_UP = ("Your plan's monthly email allowance (monthly_emails) is used up for this month. "
                 "Please upgrade your plan or resume the campaign next month.")
HOURLY_LIMIT = "Your plan's hourly email allowance (hourly_emails) is used up for this hour. Please try again later."
NOT_CANCELLABLE = "Only queued or sending campaigns can be cancelled."
NOT_ARCHIVABLE = "Only sent or cancelled campaigns can be archived."
NOT_PAUSED = "Only paused campaigns can be resumed."
# The start of a status_detail written by the circuit breaker (services/delivery/breakers.py)
BREAKER_PAUSED = "Paused by the circuit breaker"
BREAKER_NEEDS_FORCE = ("The circuit breaker paused this campaign: check what its status_detail names, then resume it with"
                       " `mkt campaigns resume {id} --force` (POST /v1/campaigns/{id}/resume with {{\"force\": true}}).")
RESUME_BODY_INVALID = "The resume body must be an object whose optional 'force' member is true or false."  # (null: false)
NOT_UNSCHEDULABLE = ("Only queued campaigns can be unscheduled; this one is {status}. "
                     "{hint}")
UNSCHEDULE_HINTS = {
    "DRAFT": "It is not scheduled.",
    "PREPROCESSING": "Its sending has started: cancel it with `mkt campaigns cancel {id}` instead.",
    "IN_REVIEW": "Its sending has started: cancel it with `mkt campaigns cancel {id}` instead.",
    "SENDING": "Its sending has started: cancel it with `mkt campaigns cancel {id}` instead.",
    "PAUSED": "Its sending has started: cancel it with `mkt campaigns cancel {id}` instead.",
    "SENT": "It was sent: `mkt campaigns duplicate {id}` makes a new draft from it.",
    "CANCELLED": "It was cancelled: `mkt campaigns duplicate {id}` makes a new draft from it.",
    "ARCHIVED": "It was archived: `mkt campaigns duplicate {id}` makes a new draft from it.",
}
DEFAULT_AB_TEST = {"test_percentage": 20, "winner_criterion": "OPENS", "wait_minutes": 240}
SERIES_DEFINITION = ("This campaign defines recurring series {id}: each occurrence sends a copy of it. "
                     "Stop the series (mkt campaigns series stop {id}) to schedule the campaign itself.")
AB_LOCAL_TIME = "Local-time delivery is not available for A/B testing campaigns: schedule it without local_time."
ACTIVE = ("QUEUED", "PREPROCESSING", "IN_REVIEW", "SENDING", "PAUSED")
SenderCheck = Callable[[Mapping[str, Any]], None]


def _scheduled_at(body: dict[str, Any]) -> str | None:
    kind = body.get("schedule_type")
    if kind not in ("NOW", "LATER"):
        raise MktError(400, SCHEDULE_TYPE)
    if kind == "NOW":
        return None
    value = body.get("scheduled_at")
    if value is None or value == "":
        raise MktError(400, AT_REQUIRED)
    try:
        moment = clock.parse_ts(value)
    except (ValueError, TypeError):
        raise MktError(400, AT_INVALID) from None
    if moment <= clock.utcnow():
        raise MktError(400, AT_PAST)
    return clock.format_ts(moment)


def content_problems(conn: sqlite3.Connection, workspace_id: int, variant: sqlite3.Row) -> list[str]:
    """What keeps a variant from being sent, as messages (empty when it is ready)."""
    kind = variant["type"]
    if not (variant["subject"] or "").strip():
        return [NO_SUBJECT.format(type=kind)]
    html = variant["body_html"] or ""
    if not html.strip():
        return [NO_HTML.format(type=kind)]
    problems = []
    unknown = unknown_tags_problem(conn, workspace_id, variant)
    if unknown:
        problems.append(unknown)
    if not has_unsubscribe_link(html):
        problems.append(NO_UNSUBSCRIBE.format(type=kind))
    for url in tracked_links(html):
        if not _parses(url):
            problems.append(BAD_LINK.format(type=kind, url=url))
            break
    return problems


def has_unsubscribe_link(html: str) -> bool:
    """Whether the HTML carries the {{unsubscribe_url}} merge tag (every marketing email must)."""
    return any(m.group(1) == "unsubscribe_url" for m in TAG.finditer(html))


def unknown_tags_problem(conn: sqlite3.Connection, workspace_id: int, variant: sqlite3.Row) -> str | None:
    """The refusal of a variant whose subject, preview text or HTML uses a merge tag the
    workspace does not define (schedule and test emails refuse it alike); None when all are known."""
    text = "\n".join(variant[key] or "" for key in ("subject", "preview_text", "body_html"))
    unknown = find_unknown_tags(conn, workspace_id, text)
    return UNKNOWN_TAGS.format(type=variant["type"], tags=", ".join(unknown)) if unknown else None


def _parses(url: str) -> bool:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        return False
    return bool(parts.hostname) and not any(ch.isspace() for ch in url)


def _ab_test(row: sqlite3.Row, value: Any) -> dict[str, Any] | None:
    if row["type"] != "AB_TESTING":
        if value is not None:
            raise MktError(400, AB_ONLY)
        return None
    if value is None and row["ab_test"]:  # settings kept by unschedule or copied by duplicate
        value = json.loads(campaigns.ab_settings(row["ab_test"]))
    settings = {**DEFAULT_AB_TEST, **require_object(value if value is not None else {}, AB_PERCENTAGE)}
    percentage, criterion, wait = (settings["test_percentage"], settings["winner_criterion"],
                                   settings["wait_minutes"])
    if isinstance(percentage, bool) or not isinstance(percentage, int) or not 1 <= percentage <= 100:
        raise MktError(400, AB_PERCENTAGE)
    if criterion not in ("OPENS", "CLICKS"):
        raise MktError(400, AB_CRITERION)
    if isinstance(wait, bool) or not isinstance(wait, int) or not 0 <= wait <= 43200:
        raise MktError(400, AB_WAIT)
    return {"test_percentage": percentage, "winner_criterion": criterion, "wait_minutes": wait}


def check_ready(conn: sqlite3.Connection, workspace_id: int, row: sqlite3.Row,
                variants: list[Any] | None = None, sender_check: SenderCheck | None = None) -> int:
    """Every check on the campaign's own settings; returns the number of recipients.

    `variants` replaces the stored ones (a recurring feed campaign checks its variants as a
    copy will carry them, feed block rendered). `sender_check` is called with the sender once
    its domain is known verified (the compliance gate of services/delivery/sender_gate.py)."""
    sender = senders.get_sender_identity(conn, workspace_id, row["sender_identity_id"]) \
        if row["sender_identity_id"] is not None else None
    if sender is None:
        raise MktError(400, NO_SENDER)
    if not sender["domain_verified"]:
        raise MktError(400, UNVERIFIED.format(domain=sender["domain_name"], domain_id=sender["domain_id"]))
    if sender_check is not None:
        sender_check(sender)
    if not row["audience"]:
        raise MktError(400, NO_AUDIENCE)
    if variants is None:
        variants = conn.execute("SELECT * FROM campaign_variants WHERE campaign_id = ? ORDER BY type",
                                (row["id"],)).fetchall()
    for variant in variants:
        problems = content_problems(conn, workspace_id, variant)
        if problems:
            raise MktError(400, problems[0], "\n".join(problems[1:]) or None)
    return audience.count_audience(conn, workspace_id, json.loads(row["audience"]), "email")


def _check_not_series(conn: sqlite3.Connection, campaign_id: str) -> None:
    """The definition of a live series (services/email/series.py) stays a DRAFT: it is copied, not sent."""
    series = conn.execute("SELECT id FROM campaign_series WHERE campaign_id = ? AND status IN ('ACTIVE', 'PAUSED')",
                          (campaign_id,)).fetchone()
    if series is not None:
        raise MktError(400, SERIES_DEFINITION.format(id=series["id"]))


def _check_allowances(conn: sqlite3.Connection, workspace_id: int, count: int) -> None:
    if count == 0:
        raise MktError(400, NO_RECIPIENTS)
    left = billing.remaining(conn, workspace_id, "monthly_emails")
    if count > left:
        raise billing.limit_error(conn, workspace_id, "monthly_emails", MONTHLY_LIMIT.format(count=count, left=left))
    if billing.remaining(conn, workspace_id, "hourly_emails") == 0:
        raise billing.limit_error(conn, workspace_id, "hourly_emails", HOURLY_LIMIT)


def schedule_campaign(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any, body: Any, *,
                      sender_check: SenderCheck | None = None) -> dict[str, Any]:
    """DRAFT -> QUEUED, the preprocess job due at the time. The faces call it through
    services/delivery/sender_gate.schedule_campaign, which gives the compliance gate as
    `sender_check` (its DNS lookups done before this transaction)."""
    with transaction(conn):
        row = campaigns.campaign_row(conn, workspace_id, campaign_id)
        body = require_object(body, INVALID_BODY)
        scheduled_at = _scheduled_at(body)
        if row["status"] != "DRAFT":
            raise MktError(400, ONLY_DRAFT)
        _check_not_series(conn, row["id"])
        count = check_ready(conn, workspace_id, row, sender_check=sender_check)
        ab_test = _ab_test(row, body.get("ab_test"))
        local = local_time.read_local_time(conn, workspace_id, body, scheduled_at)
        if local is not None and row["type"] == "AB_TESTING":
            raise MktError(400, AB_LOCAL_TIME)
        _check_allowances(conn, workspace_id, count)
        campaigns.set_campaign_status(conn, row["id"], "QUEUED")
        conn.execute("UPDATE campaigns SET scheduled_at = ?, ab_test = ?, local_time = ?, local_date = ?,"
                     " local_time_missed = ?, local_starts_at = ?, local_time_skipped = 0 WHERE id = ?",
                     (scheduled_at, json.dumps(ab_test) if ab_test else None, local and local["time"],
                      local and local["date"], local and local["missed"], local and local["starts_at"], row["id"]))
        # A local-time send is prepared when the first zone reaches the time (or now).
        jobs.enqueue(conn, "email.preprocess", {"campaign_id": row["id"]}, workspace_id=workspace_id,
                     dedupe_key=f"email.preprocess:{row['id']}", run_at=local["starts_at"] if local else scheduled_at)
    answer: dict[str, Any] = {"id": row["id"], "status": "QUEUED"}
    if scheduled_at is not None:
        answer["scheduled_at"] = scheduled_at
    if local is not None:
        answer["local_time"] = local
    return answer


def preview_schedule(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any, body: Any) -> dict[str, Any]:
    """POST /v1/campaigns/:id/schedule/preview: what the schedule call would do with this body,
    without doing it: the UTC instant understood and, with local_time, the count per zone."""
    body = require_object(body, INVALID_BODY)
    row = campaigns.campaign_row(conn, workspace_id, campaign_id)
    scheduled_at = _scheduled_at(body)
    if not row["audience"]:
        raise MktError(400, NO_AUDIENCE)
    local = local_time.read_local_time(conn, workspace_id, body, scheduled_at)
    return local_time.schedule_preview(conn, workspace_id, json.loads(row["audience"]), "email", scheduled_at, local)


def unschedule_campaign(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """POST /v1/campaigns/:id/unschedule: a QUEUED campaign (nothing prepared or sent yet) goes
    back to DRAFT, its time cleared (its A/B settings kept for the next schedule) and its
    queued jobs removed."""
    with transaction(conn):
        row = campaigns.campaign_row(conn, workspace_id, campaign_id)
        if row["status"] != "QUEUED":
            hint = UNSCHEDULE_HINTS.get(row["status"], "").format(id=row["id"])
            raise MktError(400, NOT_UNSCHEDULABLE.format(status=row["status"], hint=hint).strip())
        campaigns.set_campaign_status(conn, row["id"], "DRAFT")
        conn.execute("UPDATE campaigns SET scheduled_at = NULL, ab_test = ?, local_time = NULL, local_date = NULL,"
                     " local_time_missed = NULL, local_starts_at = NULL, local_time_skipped = 0 WHERE id = ?",
                     (campaigns.ab_settings(row["ab_test"]), row["id"]))
        jobs.drop_queued(conn, "campaign_id", row["id"])
    return {"id": row["id"], "status": "DRAFT"}


def cancel_campaign(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """POST /v1/campaigns/:id/cancel: nothing not yet handed to the transport goes out afterwards;
    the campaign's queued jobs are removed (a running one sees CANCELLED and stops)."""
    with transaction(conn):
        row = campaigns.campaign_row(conn, workspace_id, campaign_id)
        if row["status"] not in ACTIVE:
            raise MktError(400, NOT_CANCELLABLE)
        campaigns.set_campaign_status(conn, row["id"], "CANCELLED")
        conn.execute("UPDATE email_messages SET status = 'cancelled' WHERE campaign_id = ? AND status = 'queued'",
                     (row["id"],))
        conn.execute("DELETE FROM email_ab_holdout WHERE campaign_id = ?", (row["id"],))
        # Messages left `sending` by a runner that died are settled by the send job (it marks
        # them cancelled): it stays; every other queued job of the campaign goes.
        in_flight = conn.execute("SELECT 1 FROM email_messages WHERE campaign_id = ? AND status = 'sending' LIMIT 1",
                                 (row["id"],)).fetchone()
        jobs.drop_queued(conn, "campaign_id", row["id"], keep=("email.send",) if in_flight else ())
    return {"id": row["id"], "status": "CANCELLED"}


def archive_campaign(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> dict[str, Any]:
    """POST /v1/campaigns/:id/archive: a SENT or CANCELLED campaign becomes ARCHIVED (final). Its
    statistics stay readable; an archived campaign may be deleted (docs/privacy.md)."""
    with transaction(conn):
        row = campaigns.campaign_row(conn, workspace_id, campaign_id)
        if row["status"] not in ("SENT", "CANCELLED"):
            raise MktError(400, NOT_ARCHIVABLE)
        campaigns.set_campaign_status(conn, row["id"], "ARCHIVED", detail=row["status_detail"])
    return {"id": row["id"], "status": "ARCHIVED"}


def resume_campaign(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any,
                    body: Any = None) -> dict[str, Any]:
    """POST /v1/campaigns/:id/resume: a campaign PAUSED (after transport errors, by an operator,
    with the month's allowance used up, or by the circuit breaker) sends again; not while the
    month's allowance is still used up and messages wait (400, with the allowance in the
    error's detail). A campaign the circuit breaker paused needs `{"force": true}` (`--force`),
    and from then on its breaker counts only the messages answered after the resume."""
    if body is None:
        body = {}
    force = body.get("force") if isinstance(body, dict) else "not an object"
    if force is not None and not isinstance(force, bool):  # (null reads as false)
        raise MktError(400, RESUME_BODY_INVALID)
    with transaction(conn):
        row = campaigns.campaign_row(conn, workspace_id, campaign_id)
        if row["status"] != "PAUSED":
            raise MktError(400, NOT_PAUSED)
        breaker = (row["status_detail"] or "").startswith(BREAKER_PAUSED)
        if breaker and not force:
            raise MktError(400, BREAKER_NEEDS_FORCE.format(id=row["id"]))
        if billing.remaining(conn, workspace_id, "monthly_emails") == 0 and conn.execute(
                "SELECT 1 FROM email_messages WHERE campaign_id = ? AND status = 'queued' LIMIT 1",
                (row["id"],)).fetchone() is not None:  # (it would pause again at its first claim)
            raise billing.limit_error(conn, workspace_id, "monthly_emails", MONTH_USED_UP)
        if breaker:  # the breaker's window starts again after the last answer (services/delivery/breakers.py)
            conn.execute("UPDATE campaigns SET breaker_after = (SELECT max(id) FROM email_messages WHERE campaign_id = ?"
                         " AND status IN ('delivered', 'failed', 'bounced')) WHERE id = ?", (row["id"], row["id"]))
        campaigns.set_campaign_status(conn, row["id"], "SENDING")
        jobs.enqueue(conn, "email.send", {"campaign_id": row["id"]}, workspace_id=workspace_id,
                     dedupe_key=f"email.send:{row['id']}")
    return {"id": row["id"], "status": "SENDING"}
