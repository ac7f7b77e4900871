"""Where the compliance gate (compliance.py) stands in the way: scheduling an email campaign and
activating a flow that sends email (docs/deliverability.md "The compliance gate").

    schedule_campaign(conn, ws, id, body, override=False)   # POST /v1/campaigns/{id}/schedule
    create_series(conn, ws, id, body)                       # POST /v1/campaigns/{id}/series
    require_flow_senders(conn, ws, flow)                    # publish / resume of a flow

The DNS lookups run before the scheduling transaction (a slow DNS server must not hold the
write lock); the verdict is applied inside it, right after the sender's domain is found
verified, so the refusals keep their order (a campaign without a sender still hears that
first). A campaign whose sender changed between the two is refused: schedule it again. A large
send from a domain idle for 30 days without a warm-up is scheduled with a `warnings` line
offering one (warmup.idle_offer).

`override` is the operator's `mkt campaigns schedule ID --override-compliance` (CLI only: no
API key can send around the gate): the campaign is scheduled although rules fail, and the
override is written to the operator log (who, when, which campaign, which rules), in the
scheduling transaction, as the SMS quiet hours' switch is. A recurring series is gated when it
is created (its copies are then scheduled by the series' job without the gate); neither a
series nor a flow has an override: fix the domain, or send from one that passes.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterator, Mapping
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.services.account import operator_log
from marketing_cli.services.delivery import compliance
from marketing_cli.services.email import campaigns, senders, series
from marketing_cli.services.email import schedule as email_schedule

log = logging.getLogger("mkt.compliance")

OVERRIDE_FLAG = "--override-compliance"
SENDER_CHANGED = "The campaign's sender changed while its domain was being checked: schedule it again."


def _precheck(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any) -> tuple[Any, list[dict[str, Any]]]:
    """(domain id, rows) of the campaign's sender as it stands; (None, []) when there is nothing
    to check yet (no sender, an unverified domain, not a draft: scheduling refuses those first)."""
    row = campaigns.campaign_row(conn, workspace_id, campaign_id)
    if row["status"] != "DRAFT" or row["sender_identity_id"] is None:
        return None, []
    sender = senders.get_sender_identity(conn, workspace_id, row["sender_identity_id"])
    if sender is None or not sender["domain_verified"]:
        return None, []
    return sender["domain_id"], compliance.check_domain(conn, workspace_id, sender["domain_id"])


def schedule_campaign(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any, body: Any, *,
                      override: bool = False) -> dict[str, Any]:
    """POST /v1/campaigns/:id/schedule (and `mkt campaigns schedule`): the compliance gate, then
    services/email/schedule.schedule_campaign. With `override` (CLI only) the failing rules are
    recorded in the operator log and the answer's `compliance_override` instead of refusing."""
    domain_id, rows = _precheck(conn, workspace_id, campaign_id)
    overridden: list[str] = []

    def check(sender: Mapping[str, Any]) -> None:
        if sender["domain_id"] != domain_id:
            raise MktError(409, SENDER_CHANGED)
        failed = compliance.failures(rows)
        if not failed:
            return
        if not override:
            raise compliance.refusal(sender["domain_name"], sender["domain_id"], "campaign", failed)
        overridden.extend(r["rule"] for r in failed)
        detail = (f"campaign {campaign_id} scheduled with {OVERRIDE_FLAG}: {sender['domain_name']} fails "
                  f"{', '.join(overridden)}")
        operator_log.record(conn, workspace_id, "email.compliance.override", detail)
        log.warning("workspace %s: %s", workspace_id, detail)

    answer = email_schedule.schedule_campaign(conn, workspace_id, campaign_id, body, sender_check=check)
    if overridden:
        answer["compliance_override"] = overridden
    offer = _warmup_offer(conn, workspace_id, answer["id"], domain_id)
    if offer:
        answer["warnings"] = [offer]
    return answer


def _warmup_offer(conn: sqlite3.Connection, workspace_id: int, campaign_id: str, domain_id: Any) -> str | None:
    """warmup.idle_offer for the scheduled campaign's audience (docs/deliverability.md "Warm-up")."""
    from marketing_cli.services.contacts.audience import count_audience
    from marketing_cli.services.delivery import warmup

    if domain_id is None:
        return None
    row = campaigns.campaign_row(conn, workspace_id, campaign_id)
    count = count_audience(conn, workspace_id, json.loads(row["audience"]), "email") if row["audience"] else 0
    return warmup.idle_offer(conn, workspace_id, domain_id, count)


def create_series(conn: sqlite3.Connection, workspace_id: int, campaign_id: Any, body: Any) -> dict[str, Any]:
    """POST /v1/campaigns/:id/series (and `mkt campaigns schedule --every`): the gate for the
    campaign's sender (no override), then services/email/series.create_series."""
    domain_id, rows = _precheck(conn, workspace_id, campaign_id)
    failed = compliance.failures(rows)
    if failed:
        name = conn.execute("SELECT domain_name FROM domains WHERE id = ?", (domain_id,)).fetchone()[0]
        raise compliance.refusal(name, domain_id, "recurring campaign", failed)
    return series.create_series(conn, workspace_id, campaign_id, body)


def _send_steps(node: Any) -> Iterator[Mapping[str, Any]]:
    """Every send_email step of a flow document, however deep (branches, splits)."""
    if isinstance(node, dict):
        if node.get("type") == "send_email":
            yield node
        for value in node.values():
            yield from _send_steps(value)
    elif isinstance(node, list):
        for value in node:
            yield from _send_steps(value)


def require_flow_senders(conn: sqlite3.Connection, workspace_id: int, flow: Any) -> None:
    """Refuse (400, every failing rule named) to activate a flow whose email steps send from a
    domain that fails the gate. Steps whose sender is missing are left to the flow's validation."""
    if isinstance(flow, str):
        try:
            flow = json.loads(flow)
        except ValueError:
            return
    domain_ids: dict[int, str] = {}
    for step in _send_steps(flow):
        sender = senders.get_sender_identity(conn, workspace_id, step.get("sender_id"))
        if sender is not None:
            domain_ids.setdefault(sender["domain_id"], sender["domain_name"])
    for domain_id in domain_ids:
        compliance.require(conn, workspace_id, domain_id, "automation")
