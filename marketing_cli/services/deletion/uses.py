"""Who uses a resource: each rule of docs/privacy.md "Deleting resources" as SQL over the tables
that hold the references, answering the 409 message that names the first user and what to do.

Where the references live:
- audiences: `campaigns.audience` and `sms_campaigns.audience`, JSON arrays of Audience
  objects with `include_tag_ids`, `exclude_tag_ids`, `include_segment_ids`, `exclude_segment_ids`;
- segments: `segments.filters`, `{"filters": [{"type": "field", "field_id"} | {"type": "tags",
  "value": [ids]}, ...]}`;
- flows: a published version (`automation_versions.flow`) names tags, fields, segments and
  senders by id (`tag_id`, `field_id`, `segment_id`, `sender_id`) in its triggers, goal, steps
  and each step's `condition` and `event`; a draft (`automations.draft`) names fields by merge
  tag (`field`). A version is live while its flow is ACTIVE or PAUSED and it is the current one,
  or while contacts are still in it;
- merge tags (`{{contact.<merge_tag>}}`): templates, campaign variants, SMS messages and flow
  documents. SQL finds the rows whose text holds `contact.<merge_tag>`; the merge-tag grammar
  (kernel/merge.py) then tells `{{contact.city}}` from `{{contact.city_code}}` in those few rows;
- senders: `campaigns.sender_identity_id` and flows' `send_email` steps; a domain is used
  through its senders.

"In flight" is an email campaign QUEUED, PREPROCESSING, IN_REVIEW, SENDING or PAUSED, an SMS
campaign QUEUED, or the DRAFT that an ACTIVE or PAUSED series sends again and again. Values read
out of JSON arrays are compared as integers only when their JSON type says they are integers
(PostgreSQL evaluates both sides of an AND in any order, and a cast of 'Paris' would fail).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from marketing_cli.kernel.merge import TAG

EMAIL_IN_FLIGHT = ("QUEUED", "PREPROCESSING", "IN_REVIEW", "SENDING", "PAUSED")
SMS_IN_FLIGHT = ("QUEUED",)
SERIES_LIVE = ("ACTIVE", "PAUSED")
WAIT_OR_CANCEL = "wait for it to finish or cancel it first."


def listed(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{v}'" for v in values)  # our own constants, never input


def _int_at(json_sql: str, member: str) -> str:
    """The integer at `$.member` of a JSON object, NULL when it is not an integer."""
    return (f"CASE WHEN json_type({json_sql}, '$.{member}') = 'integer'"
            f" THEN CAST(json_extract({json_sql}, '$.{member}') AS BIGINT) END")


def _in_array(json_sql: str, path: str) -> str:
    """`:id` is one of the integers of the array at `path`."""
    return (f"EXISTS (SELECT 1 FROM json_each({json_sql}, '{path}') x"
            f" WHERE CASE WHEN x.type = 'integer' THEN CAST(x.value AS BIGINT) END = :id)")


def _audience_names(column: str, kind: str) -> str:
    """The audience (a JSON array of Audience objects) includes or excludes the `kind` :id."""
    return (f"EXISTS (SELECT 1 FROM json_each({column}) e WHERE {_in_array('e.value', f'$.include_{kind}_ids')}"
            f" OR {_in_array('e.value', f'$.exclude_{kind}_ids')})")


# --- campaigns ---------------------------------------------------------------------------------

def _automation_message(row: Any, what: str) -> str:
    return (f"This {what} is used by messages of automation {row['automation_id']} not yet sent: wait for them to"
            " go out.")


def _email_campaign(conn: sqlite3.Connection, workspace_id: int, condition: str, params: dict[str, Any],
                    what: str) -> str | None:
    """A campaign in flight (or the draft a live series sends); a flow's hidden campaign, which
    stays SENDING for the flow's life, only while some of its messages wait to be sent."""
    row = conn.execute(
        "SELECT c.id, c.status, c.automation_id, s.id AS series_id, s.status AS series_status FROM campaigns c"
        f" LEFT JOIN campaign_series s ON s.campaign_id = c.id AND s.status IN ({listed(SERIES_LIVE)})"
        f" WHERE c.workspace_id = :ws AND ((c.automation_id IS NULL AND (c.status IN ({listed(EMAIL_IN_FLIGHT)})"
        " OR s.id IS NOT NULL)) OR (c.automation_id IS NOT NULL AND EXISTS (SELECT 1 FROM email_messages m"
        " WHERE m.campaign_id = c.id AND m.status IN ('queued', 'sending'))))"
        f" AND {condition} ORDER BY c.created_at, c.id LIMIT 1", {"ws": workspace_id, **params}).fetchone()
    if row is None:
        return None
    if row["automation_id"] is not None:
        return _automation_message(row, what)
    if row["status"] in EMAIL_IN_FLIGHT:
        return f"This {what} is used by campaign {row['id']} ({row['status']}): {WAIT_OR_CANCEL}"
    return (f"This {what} is used by campaign {row['id']}, which series {row['series_id']} sends"
            f" ({row['series_status']}): stop the series first.")


def _sms_campaign(conn: sqlite3.Connection, workspace_id: int, condition: str, params: dict[str, Any],
                  what: str) -> str | None:
    row = conn.execute(
        f"SELECT id, status, automation_id FROM sms_campaigns WHERE workspace_id = :ws AND status IN"
        f" ({listed(SMS_IN_FLIGHT)}) AND (automation_id IS NULL OR EXISTS (SELECT 1 FROM sms_messages m"
        " WHERE m.campaign_id = sms_campaigns.id AND m.status IN ('pending', 'held', 'sending')))"
        f" AND {condition} ORDER BY created_at, id LIMIT 1", {"ws": workspace_id, **params}).fetchone()
    if row is None:
        return None
    if row["automation_id"] is not None:
        return _automation_message(row, what)
    return f"This {what} is used by SMS campaign {row['id']} ({row['status']}): {WAIT_OR_CANCEL}"


# --- flows -------------------------------------------------------------------------------------

_LIVE_VERSIONS = (
    "SELECT a.id, a.name, a.status, v.flow AS doc, 1 AS live FROM automations a"
    " JOIN automation_versions v ON v.automation_id = a.id"
    " WHERE a.workspace_id = :ws AND ((a.status IN ('ACTIVE', 'PAUSED') AND v.version = a.current_version)"
    " OR EXISTS (SELECT 1 FROM automation_enrollments n WHERE n.automation_id = a.id AND n.version_id = v.id"
    " AND n.status IN ('active', 'paused')))")
_DRAFTS = ("SELECT a.id, a.name, a.status, a.draft AS doc, 0 AS live FROM automations a"
           " WHERE a.workspace_id = :ws AND a.status <> 'ARCHIVED'")
# Every object of a flow document that may name a tag, field, segment or sender.
_NODES = (
    "nodes AS ("
    "SELECT d.id, d.name, d.status, d.live, t.value AS node FROM docs d, json_each(d.doc, '$.triggers') t"
    " UNION ALL SELECT d.id, d.name, d.status, d.live, json_extract(d.doc, '$.goal') FROM docs d"
    " WHERE json_type(d.doc, '$.goal') = 'object'"
    " UNION ALL SELECT d.id, d.name, d.status, d.live, s.value FROM docs d, json_each(d.doc, '$.steps') s"
    " UNION ALL SELECT d.id, d.name, d.status, d.live, json_extract(s.value, '$.condition')"
    " FROM docs d, json_each(d.doc, '$.steps') s WHERE json_type(s.value, '$.condition') = 'object'"
    " UNION ALL SELECT d.id, d.name, d.status, d.live, json_extract(s.value, '$.event')"
    " FROM docs d, json_each(d.doc, '$.steps') s WHERE json_type(s.value, '$.event') = 'object')")


def _flow_message(row: Any, what: str) -> str:
    if row["live"]:
        return f"This {what} is used by automation {row['id']} ({row['name']}, {row['status']}): archive the automation first."
    return (f"This {what} is used by the draft of automation {row['id']} ({row['name']}, {row['status']}):"
            " remove it from the flow first.")


def _flow(conn: sqlite3.Connection, workspace_id: int, condition: str, params: dict[str, Any], what: str, *,
          drafts: bool = False) -> str | None:
    docs = _LIVE_VERSIONS + (f" UNION ALL {_DRAFTS}" if drafts else "")
    row = conn.execute(f"WITH docs AS ({docs}), {_NODES} SELECT id, name, status, live FROM nodes"
                       f" WHERE {condition} ORDER BY live DESC, id LIMIT 1", {"ws": workspace_id, **params}).fetchone()
    return _flow_message(row, what) if row is not None else None


# --- merge tags --------------------------------------------------------------------------------

def _mentions(merge_tag: str, *texts: Any) -> bool:
    name = f"contact.{merge_tag}"
    return any(m.group(1) == name for text in texts if text for m in TAG.finditer(text))


def _merge_tag_user(conn: sqlite3.Connection, workspace_id: int, merge_tag: str) -> str | None:
    """The first template, live campaign or flow whose text holds {{contact.<merge_tag>}}."""
    like = {"ws": workspace_id, "like": f"%contact.{merge_tag}%"}
    written = "{{contact." + merge_tag + "}}"
    for row in conn.execute("SELECT id, name, body_html, body_json FROM templates WHERE workspace_id = :ws"
                            " AND (body_html LIKE :like OR body_json LIKE :like) ORDER BY id", like):
        if _mentions(merge_tag, row["body_html"], row["body_json"]):
            return f"This field is used by template {row['id']} ({row['name']}) as {written}: remove it from the template first."
    for row in conn.execute(
            "SELECT c.id, c.status, v.subject, v.preview_text, v.body_html, v.body_json FROM campaigns c"
            " JOIN campaign_variants v ON v.campaign_id = c.id WHERE c.workspace_id = :ws AND c.automation_id IS NULL"
            f" AND c.status IN ('DRAFT', {listed(EMAIL_IN_FLIGHT)}) AND (v.subject LIKE :like"
            " OR v.preview_text LIKE :like OR v.body_html LIKE :like OR v.body_json LIKE :like)"
            " ORDER BY c.created_at, c.id", like):
        if _mentions(merge_tag, row["subject"], row["preview_text"], row["body_html"], row["body_json"]):
            todo = "remove it from the campaign first." if row["status"] == "DRAFT" else WAIT_OR_CANCEL
            return f"This field is used by campaign {row['id']} ({row['status']}) as {written}: {todo}"
    for row in conn.execute(
            "SELECT id, status, message FROM sms_campaigns WHERE workspace_id = :ws AND automation_id IS NULL"
            f" AND status IN ('DRAFT', {listed(SMS_IN_FLIGHT)}) AND message LIKE :like ORDER BY created_at, id", like):
        if _mentions(merge_tag, row["message"]):
            todo = "remove it from the message first." if row["status"] == "DRAFT" else WAIT_OR_CANCEL
            return f"This field is used by SMS campaign {row['id']} ({row['status']}) as {written}: {todo}"
    for row in conn.execute(f"WITH docs AS ({_LIVE_VERSIONS} UNION ALL {_DRAFTS}) SELECT id, name, status, live, doc"
                            " FROM docs WHERE doc LIKE :like ORDER BY live DESC, id", like):
        if _mentions(merge_tag, row["doc"]):
            return _flow_message(row, "field")
    return None


# --- the rules, one function per resource --------------------------------------------------------

def _segment_filter(conn: sqlite3.Connection, workspace_id: int, condition: str, item_id: int,
                    what: str) -> str | None:
    row = conn.execute(
        "SELECT s.id, s.name FROM segments s WHERE s.workspace_id = :ws AND EXISTS (SELECT 1 FROM"
        f" json_each(s.filters, '$.filters') f WHERE {condition}) ORDER BY s.id LIMIT 1",
        {"ws": workspace_id, "id": item_id}).fetchone()
    if row is None:
        return None
    return (f"This {what} is used by segment {row['id']} ({row['name']}): change the segment's filters or delete"
            " the segment first.")


def tag_user(conn: sqlite3.Connection, workspace_id: int, tag_id: int) -> str | None:
    """A live campaign's audience, an active flow, or a segment's filters that use the tag."""
    params = {"id": tag_id}
    return (_email_campaign(conn, workspace_id, _audience_names("c.audience", "tag"), params, "tag")
            or _sms_campaign(conn, workspace_id, _audience_names("audience", "tag"), params, "tag")
            or _flow(conn, workspace_id, f"{_int_at('node', 'tag_id')} = :id", params, "tag")
            or _segment_filter(conn, workspace_id, "json_extract(f.value, '$.type') = 'tags' AND "
                               + _in_array("f.value", "$.value"), tag_id, "tag"))


def segment_user(conn: sqlite3.Connection, workspace_id: int, segment_id: int) -> str | None:
    """A live campaign's audience or an active flow that uses the segment."""
    params = {"id": segment_id}
    return (_email_campaign(conn, workspace_id, _audience_names("c.audience", "segment"), params, "segment")
            or _sms_campaign(conn, workspace_id, _audience_names("audience", "segment"), params, "segment")
            or _flow(conn, workspace_id, f"{_int_at('node', 'segment_id')} = :id", params, "segment"))


def field_user(conn: sqlite3.Connection, workspace_id: int, field: Any) -> str | None:
    """A segment's filters, a merge tag in a template, a draft or live campaign or flow, a flow step,
    trigger or goal that reads the field; for phone_number also a live SMS campaign or flow
    that texts (they read the number)."""
    params = {"id": field["id"], "tag": field["merge_tag"]}
    found = (_segment_filter(conn, workspace_id, "json_extract(f.value, '$.type') = 'field' AND "
                             f"{_int_at('f.value', 'field_id')} = :id", field["id"], "field")
             or _flow(conn, workspace_id, f"((live = 1 AND {_int_at('node', 'field_id')} = :id)"
                      " OR (live = 0 AND json_extract(node, '$.field') = :tag))", params, "field", drafts=True)
             or _merge_tag_user(conn, workspace_id, field["merge_tag"]))
    if found or field["merge_tag"] != "phone_number":
        return found
    return (_sms_campaign(conn, workspace_id, "1 = 1", {}, "field")
            or _flow(conn, workspace_id, "json_extract(node, '$.type') = 'send_sms'", {}, "field"))


def sender_user(conn: sqlite3.Connection, workspace_id: int, sender_id: int) -> str | None:
    """A live campaign sending from it, or an active flow's send_email step."""
    params = {"id": sender_id}
    return (_email_campaign(conn, workspace_id, "c.sender_identity_id = :id", params, "sender")
            or _flow(conn, workspace_id, f"json_extract(node, '$.type') = 'send_email'"
                     f" AND {_int_at('node', 'sender_id')} = :id", params, "sender"))


def domain_user(conn: sqlite3.Connection, workspace_id: int, domain_id: int) -> str | None:
    """A live campaign or an active flow sending from one of the domain's senders."""
    senders = "(SELECT id FROM sender_identities WHERE domain_id = :id)"
    params = {"id": domain_id}
    return (_email_campaign(conn, workspace_id, f"c.sender_identity_id IN {senders}", params, "domain")
            or _flow(conn, workspace_id, f"json_extract(node, '$.type') = 'send_email'"
                     f" AND {_int_at('node', 'sender_id')} IN {senders}", params, "domain"))
