"""Where a campaign's mail comes from: sending domains (add, read, verify their DNS records)
and sender identities on them, and how their mail fared (deliverability at a glance).

The routes of api/domains.py, api/senders.py and api/deliverability.py.
"""

from __future__ import annotations

from typing import Any

from marketing_cli.api.schemas.common import INT_ID, NULLABLE_TIMESTAMP, TIMESTAMP, array, deleted, name, obj
from marketing_cli.services.delivery import deliverability
from marketing_cli.services.email import domains, senders

# What services/email/senders._display_name refuses: C0 and C1 controls, DEL, line and paragraph separators.
_NO_CONTROL = r"[^\x00-\x1f\x7f-\x9f\u2028\u2029]"
DISPLAY_NAME_PATTERN = rf"^{_NO_CONTROL}*(?!\s){_NO_CONTROL}{_NO_CONTROL}*$"
DOMAIN = obj({
    "id": INT_ID,
    "domain_name": {"type": "string"},
    "verified": {"type": "boolean"},
    "dns_records": array(obj({"type": {"type": "string"}, "host": {"type": "string"},
                              "value": {"type": "string"}, "mandatory": {"type": "boolean"},
                              "verified": {"type": "boolean"}})),
    # extensions (docs/api.md)
    "verified_by": {"type": ["string", "null"], "enum": ["dns", "operator", None],
                    "description": "What makes the domain verified: its mandatory records found in DNS, or the "
                                   "operator's mark (`mkt domains mark-verified`, CLI only); null when not verified."},
    "reserved_name": {"type": "boolean",
                      "description": "The name is reserved (.test, .example, .invalid, .localhost, example.com ...): "
                                     "no one can publish its DNS records, so mail from it can never be delivered "
                                     "publicly. For staging against a local SMTP catcher."},
}, ("id", "domain_name", "verified", "dns_records", "verified_by", "reserved_name"))
COMPLIANCE_ROW = obj({
    "rule": {"type": "string", "enum": ["spf", "dkim", "dmarc", "dmarc_aligned", "one_click", "https_unsubscribe",
                                        "relay_tls", "free_mail_from"]},
    "status": {"type": "string", "enum": ["pass", "warn", "fail"],
               "description": "fail refuses scheduling; warn marks what suits staging only (docs/deliverability.md)"},
    "found": {"type": "string", "description": "What was found (in DNS, in the settings)."},
    "fix": {"type": ["string", "null"], "description": "What to change; null when the rule passes."},
}, ("rule", "status", "found", "fix"))
_LANE = {"type": "string", "enum": ["gmail", "yahoo", "microsoft", "apple", "other"]}
WARMUP_ROW = obj({"day": {"type": "integer", "minimum": 1, "maximum": 365,
                          "description": "Day 1 is the UTC day the warm-up starts."},
                  "lane": _LANE, "cap": {"type": "integer", "minimum": 0, "maximum": 100_000_000}},
                 ("day", "lane", "cap"))
WARMUP = obj({
    "domain_id": INT_ID,
    "domain_name": {"type": "string"},
    "status": {"type": "string", "enum": ["none", "active", "stopped", "finished"]},
    "day": {"type": ["integer", "null"], "description": "Today's day of the warm-up while it is active."},
    "days": {"type": ["integer", "null"], "description": "The schedule's last day."},
    "started_at": {"type": ["string", "null"], "format": "date-time"},
    "stopped_at": {"type": ["string", "null"], "format": "date-time"},
    "ends_on": {"type": ["string", "null"], "format": "date", "description": "The first day without caps."},
    "origin": {"type": ["string", "null"], "description": "built-in, or the schedule file or request it came from."},
    "today": array(obj({"lane": _LANE,
                        "cap": {"type": ["integer", "null"], "description": "null: no cap today"},
                        "used": {"type": "integer", "description": "messages claimed today"},
                        "left": {"type": ["integer", "null"]}}, ("lane", "cap", "used", "left"))),
    "schedule": array(WARMUP_ROW),
}, ("domain_id", "domain_name", "status", "day", "days", "started_at", "stopped_at", "ends_on", "origin", "today",
    "schedule"))
SENDER = obj({"id": INT_ID, "display_name": {"type": "string"}, "local_part": {"type": "string"},
              "domain_name": {"type": "string"}}, ("id", "display_name", "local_part", "domain_name"))

_COUNT = {"type": "integer", "minimum": 0}
_RATE = {"type": ["number", "null"], "minimum": 0, "maximum": 1}
_NULLABLE_COUNT = {"type": ["integer", "null"], "minimum": 0}
DELIVERABILITY_ROW = obj({
    "domain_id": INT_ID, "domain": {"type": "string"},
    "lane": {"type": "string", "description": "gmail, yahoo, microsoft, apple or other"},
    "sent": _COUNT, "delivered": _COUNT, "deferred": _COUNT, "bounced": _COUNT,
    "bounced_by_class": {"type": "object", "additionalProperties": _COUNT,
                         "description": "bounce class (or unclassified) -> messages"},
    "complained": _COUNT, "delivered_rate": _RATE, "deferred_rate": _RATE, "bounce_rate": _RATE,
    "complaint_rate": {**_RATE, "description": "complaints over the messages accepted"},
    "rate_now": {"type": ["number", "null"], "description": "the lane's messages per second now; null: no rate "
                                                            "of its own"},
    "suspended_until": NULLABLE_TIMESTAMP,
    "warmup_day": _NULLABLE_COUNT, "warmup_cap": _NULLABLE_COUNT,
}, ("domain_id", "domain", "lane", "sent", "delivered", "deferred", "bounced", "bounced_by_class", "complained",
    "delivered_rate", "deferred_rate", "bounce_rate", "complaint_rate", "rate_now", "suspended_until", "warmup_day",
    "warmup_cap"))
DELIVERABILITY = obj({
    "days": {"type": "integer", "minimum": 1, "maximum": deliverability.MAX_DAYS}, "since": TIMESTAMP,
    "rows": array(DELIVERABILITY_ROW),
    "compliance": {"type": ["object", "null"], "additionalProperties": array(COMPLIANCE_ROW),
                   "description": "sending domain -> the compliance gate's rows (only with compliance=true)"},
}, ("days", "since", "rows", "compliance"))

OPERATIONS: dict[tuple[str, str], dict[str, Any]] = {
    ("GET", "/v1/deliverability"): {
        "summary": "Per sending domain and provider lane: sent, delivered, deferred, bounced by class, complaints, "
                   "their rates, the lane's rate now and its warm-up", "envelope": "A",
        "query": {"days": {"type": "integer", "minimum": 1, "maximum": deliverability.MAX_DAYS,
                           "description": f"1 to {deliverability.MAX_DAYS} (default {deliverability.DEFAULT_DAYS})"},
                  "compliance": {"type": "string", "enum": ["true", "false", "1", "0", "yes", "no", ""],
                                 "description": "also check each domain's DNS (seconds)"}},
        "data": DELIVERABILITY},
    ("GET", "/v1/domains"): {"summary": "The workspace's sending domains", "envelope": "A", "data": array(DOMAIN)},
    ("POST", "/v1/domains"): {"links": [("GET", "/v1/domains/{domain_id}", {"domain_id": "id"})],
                              "summary": "Add a sending domain", "envelope": "A", "status": 201,
                              "body": obj({name: {"type": "string", "minLength": 1, "maxLength": domains.MAX_NAME,
                                                  **({} if name == "domain_name" else {"description": "Same as domain_name."})}
                                           for name in domains.NAME_MEMBERS}),
                              "data": DOMAIN},
    ("GET", "/v1/domains/{domain_id}"): {"summary": "A sending domain", "envelope": "A", "data": DOMAIN},
    ("DELETE", "/v1/domains/{domain_id}"): {**deleted(INT_ID, "a sending domain, its DNS records and its senders"),
                                            "envelope": "A"},
    ("POST", "/v1/domains/{domain_id}/verify"): {"summary": "Check a domain's DNS records", "envelope": "A",
                                                 "data": DOMAIN},
    ("GET", "/v1/domains/{domain_id}/compliance"): {
        "summary": "Whether mail from the domain meets the mailbox providers' sender requirements", "envelope": "A",
        "data": array(COMPLIANCE_ROW)},
    ("POST", "/v1/domains/{domain_id}/warmup"): {
        "summary": "Start (or start again) the domain's warm-up: daily caps per provider lane", "envelope": "A",
        "body_optional": True,
        "body": obj({"schedule": {**array(WARMUP_ROW), "minItems": 1, "maxItems": 365 * 5,
                                  "description": "Rows of day, lane and cap (a lane missing from a day has no cap "
                                                 "that day); the shipped schedule when left out."}}),
        "data": WARMUP},
    ("GET", "/v1/domains/{domain_id}/warmup"): {"summary": "The domain's warm-up: today's caps and what went out",
                                                "envelope": "A", "data": WARMUP},
    ("DELETE", "/v1/domains/{domain_id}/warmup"): {"summary": "Stop the domain's warm-up (its caps are lifted)",
                                                   "envelope": "A", "data": WARMUP},
    ("GET", "/v1/sender-identities"): {"summary": "The workspace's sender identities", "envelope": "A",
                                       "data": array(SENDER)},
    ("POST", "/v1/sender-identities"): {"links": [("GET", "/v1/sender-identities/{sender_id}", {"sender_id": "id"})],
                                        "summary": "Add a sender identity", "envelope": "A", "status": 201,
                                        "body": obj({"domain_id": INT_ID,
                                                     "local_part": {"type": "string", "maxLength": senders.MAX_LOCAL_PART},
                                                     "display_name": {**name(senders.MAX_DISPLAY_NAME),
                                                                      "pattern": DISPLAY_NAME_PATTERN}},
                                                    ("domain_id", "local_part", "display_name")),
                                        "data": SENDER},
    ("GET", "/v1/sender-identities/{sender_id}"): {"summary": "A sender identity", "envelope": "A", "data": SENDER},
    ("DELETE", "/v1/sender-identities/{sender_id}"): {**deleted(INT_ID, "a sender identity"), "envelope": "A"},
}
