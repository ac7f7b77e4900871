"""Strict input (issue 26, CONTRACT section 4): an unknown body member or query parameter is a
400 that names it, on every operation, and nothing is written.

The sweeps walk the OpenAPI document, so an operation added later is swept by itself; each
request is otherwise valid (a body that would write without the check), so "no write" means
the check ran before the service.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from typing import Any

import pytest

from tests import engines
from tests import factories as f
from tests.factories import error_of

UNKNOWN = "zzz_unknown"


@pytest.fixture
def world(conn: Any, workspace: dict[str, Any]) -> dict[str, Any]:
    ws = workspace["id"]
    f.allow_domains(conn, ws)
    f.sms_ready(conn, ws)
    vip = f.tag(conn, ws, "vip")
    city = f.field(conn, ws, "city")
    contact = f.contact(conn, ws, "ann@example.com", tags=[vip], city="Lyon")
    segment = f.segment(conn, ws, "VIPs", {"condition": "AND", "filters": [
        {"type": "tags", "operator": "contains", "value": [vip]}]})
    domain = f.domain(conn, ws)
    sender = f.sender(conn, ws, domain["id"])
    f.verify(conn, ws, domain["id"])  # the automation below sends from it
    campaign = f.campaign(conn, ws, type_="AB_TESTING")
    template = f.code_template(conn, ws, "<p>Hi</p>")
    sms = f.sms_campaign(conn, ws)
    series = f.series_row(conn, ws, campaign["id"])
    flow = f.automation(conn, ws, flow_doc(sender["id"]))
    return {"ws": ws, "vip": vip, "path": {
        "series_id": series, "automation_id": flow["id"], "version": 1,
        "contact_id": contact["id"], "field_id": city, "segment_id": segment["id"], "domain_id": domain["id"],
        "tag_id": vip,
        "sender_id": sender["id"], "id": template["id"], "variant_type": "A", "path": "index.html",
        "token": "x", "link_id": "1"}, "campaign": campaign["id"], "sms": sms["id"], "sender": sender["id"],
        "contact": contact["id"],
        "domain": domain["id"]}


def flow_doc(sender_id: int) -> dict[str, Any]:
    return {"name": "Welcome", "triggers": [{"type": "manual"}], "steps": [f.email_step("hello", sender_id)]}


def valid_bodies(w: dict[str, Any]) -> dict[tuple[str, str], Any]:
    """A body each operation would act on (write, where it writes) if nothing were added to it."""
    audience = {"type": "TAGS", "include_tag_ids": [w["vip"]], "exclude_segment_ids": [w["path"]["segment_id"]]}
    return {
        ("PATCH", "/v1/workspace"): {"name": "Renamed", "conversion_tracking": False},
        ("POST", "/v1/contacts"): {"fields": {"email_address": "new@example.com"}, "status": "SUBSCRIBED",
                                   "tags": [w["vip"]]},
        ("POST", "/v1/contacts/upsert"): {"email_address": "new@example.com", "fields": {"first_name": "N"}},
        ("POST", "/v1/contacts/search"): {"fields": [{"merge_tag": "email_address", "operator": "CONTAINS",
                                                     "value": "example"}], "limit": 10},
        ("POST", "/v1/contacts/{contact_id}/tags/add"): {"tag_ids": [w["vip"]]},
        ("POST", "/v1/contacts/{contact_id}/tags/remove"): {"tag_ids": [w["vip"]]},
        ("POST", "/v1/fields"): {"label": "Town", "merge_tag": "town", "type": "TEXT"},
        ("PATCH", "/v1/fields/{field_id}"): {"label": "Home city", "merge_tag": "city", "type": "TEXT"},
        ("POST", "/v1/tags"): {"name": "new"},
        ("POST", "/v1/tags/{tag_id}/contacts"): {"search": {"status": "SUBSCRIBED"}},
        ("POST", "/v1/tags/{tag_id}/contacts/remove"): {"emails": ["ann@example.com"]},
        ("POST", "/v1/domains/{domain_id}/warmup"): {"schedule": [{"day": 1, "lane": "gmail", "cap": 100}]},
        ("POST", "/v1/campaigns/{campaign_id}/resume"): {"force": True},
        ("POST", "/v1/events"): {"email_address": "ann@example.com", "event_name": "purchase",
                                 "properties": {"sku": "A1"}},
        ("POST", "/v1/segments"): {"name": "Lyon", "filters": {"condition": "AND", "filters": [
            {"type": "field", "field_id": w["path"]["field_id"], "operator": "eq", "value": "Lyon"}]}},
        ("PATCH", "/v1/segments/{segment_id}"): {"name": "VIPs too", "filters": {"condition": "AND", "filters": [
            {"type": "tags", "operator": "contains", "value": [w["vip"]]}]}},
        ("POST", "/v1/audience/count"): {"audience": audience, "channel": "email"},
        ("POST", "/v1/campaigns"): {"name": "New", "type": "AB_TESTING"},
        ("PATCH", "/v1/campaigns/{campaign_id}/configure"): {
            "sender": {"sender_identity_id": w["sender"],
                       "reply_to": {"display_name": "R", "local_part": "r", "domain_name": "example.com"}},
            "audience": audience,
            "variants": [{"type": "A", "subject": "Hello A"}, {"type": "B", "subject": "Hello B"}]},
        ("POST", "/v1/campaigns/{campaign_id}/variants/{variant_type}/html"): {"html": "<p>x</p>"},
        ("POST", "/v1/campaigns/{campaign_id}/test"): {"variant_type": "A", "recipient": "r@example.com"},
        ("POST", "/v1/campaigns/{campaign_id}/schedule"): {
            "schedule_type": "NOW", "ab_test": {"test_percentage": 50, "winner_criterion": "OPENS",
                                                "wait_minutes": 10}},
        ("POST", "/v1/campaigns/{campaign_id}/schedule/preview"): {"schedule_type": "NOW", "local_time": "09:00"},
        ("POST", "/v1/campaigns/{campaign_id}/series"): {"rrule": "FREQ=WEEKLY;BYDAY=MO;BYHOUR=9"},
        ("POST", "/v1/campaigns/{campaign_id}/series/preview"): {"rrule": "FREQ=WEEKLY;BYDAY=MO;BYHOUR=9", "count": 3},
        ("POST", "/v1/bounces"): {"email_address": "ann@example.com", "type": "hard"},
        ("POST", "/v1/suppressions"): {"email_address": "gone@example.com"},
        ("POST", "/v1/templates"): {"name": "T", "type": "code", "import_format": "html",
                                    "content_base64": base64.b64encode(b"<p>x</p>").decode()},
        ("POST", "/v1/domains"): {"domain_name": "example.org"},
        ("POST", "/v1/sender-identities"): {"domain_id": w["domain"], "local_part": "hi", "display_name": "Hi"},
        ("POST", "/v1/sms-campaigns"): {"name": "New"},
        ("PATCH", "/v1/sms-campaigns/{campaign_id}"): {"name": "Renamed", "message": "Hello there",
                                                       "audience": [audience]},
        ("POST", "/v1/sms-campaigns/{campaign_id}/schedule"): {"schedule_type": "NOW"},
        ("POST", "/v1/sms-campaigns/{campaign_id}/schedule/preview"): {"schedule_type": "NOW", "local_time": "09:00"},
        ("POST", "/v1/sms/quote"): {"message": "Hello", "to": "+14155550100"},
        ("POST", "/v1/automations"): flow_doc(w["sender"]),
        ("PUT", "/v1/automations/{automation_id}"): flow_doc(w["sender"]),
        ("POST", "/v1/automations/{automation_id}/enrollments"): {"contact_id": w["contact"]},
        ("POST", "/v1/automations/{automation_id}/backfill"): {"dry_run": False},
        ("POST", "/v1/automations/{automation_id}/migrate"): {"to_version": 1, "dry_run": False},
        ("PUT", "/v1/automations/caps"): {"email": {"max_messages": 2, "window": {"days": 1}}},
        ("POST", "/v1/automations/{automation_id}/simulate"): {
            "contact_id": w["contact"], "events": [{"name": "cart", "properties": {"sku": "A1"},
                                                    "at": "2030-01-01T00:00:00Z"}]},
        ("POST", "/v1/automations/{automation_id}/test"): {"to": "qa@example.org"},
    }


def url(w: dict[str, Any], path: str) -> str:
    ids = {**w["path"], "campaign_id": w["sms"] if path.startswith("/v1/sms-") else w["campaign"]}
    return path.format(**ids)


def snapshot(conn: Any) -> str:
    """Every row of every table but api_keys (each request notes its key's last use there)."""
    lines = [f"{table} {sorted(map(repr, map(tuple, conn.execute(f'SELECT * FROM {table}').fetchall())))}"
             for table in engines.tables(conn) if table != "api_keys"]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def operations(client: Any) -> Iterator[tuple[str, str, dict[str, Any]]]:
    document = client.get("/v1/openapi.json").json()
    for path, ops in document["paths"].items():
        for method, op in ops.items():
            yield method.upper(), path, op


def json_schema(op: dict[str, Any]) -> dict[str, Any] | None:
    return op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")


def _branch(schema: dict[str, Any], value: Any) -> dict[str, Any]:
    for sub in schema.get("anyOf", ()):
        kinds = sub.get("type") if isinstance(sub.get("type"), list) else [sub.get("type")]
        if (isinstance(value, dict) and "object" in kinds) or (isinstance(value, list) and "array" in kinds):
            return sub
    return schema


def closed_objects(value: Any, schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """(dotted path, the dict) of every object in `value` that its schema closes."""
    schema = _branch(schema, value)
    if isinstance(value, dict):
        if schema.get("additionalProperties") is False:
            yield path, value
        for name, child in value.items():
            sub = schema.get("properties", {}).get(name)
            if sub is not None:
                yield from closed_objects(child, sub, f"{path}.{name}" if path else name)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            yield from closed_objects(item, schema["items"], f"{path}[{i}]")


def test_every_json_body_is_closed_in_the_document_and_has_a_sweep_body(client: Any, world: dict[str, Any]) -> None:
    bodies = valid_bodies(world)
    with_body = {(m, p) for m, p, op in operations(client) if json_schema(op) is not None}
    assert with_body == set(bodies)
    for method, path, op in operations(client):
        schema = json_schema(op)
        if schema is not None:
            branches = [schema, *schema.get("anyOf", ())]
            assert any(b.get("additionalProperties") is False for b in branches), (method, path)


def test_an_unknown_body_member_at_any_depth_is_refused_and_nothing_is_written(
        client: Any, auth: dict[str, str], conn: Any, world: dict[str, Any]) -> None:
    bodies = valid_bodies(world)
    swept = []
    for method, path, op in operations(client):
        schema = json_schema(op)
        if schema is None:
            continue
        body = bodies[(method, path)]
        for where, obj in list(closed_objects(body, schema)):
            before = snapshot(conn)
            obj[UNKNOWN] = 1
            response = client.request(method, url(world, path), headers=auth, json=body)
            del obj[UNKNOWN]
            member = f"{where}.{UNKNOWN}" if where else UNKNOWN
            assert error_of(response) == (400, f"Unknown member '{member}'"), (method, path, where)
            assert snapshot(conn) == before, (method, path, where)
            swept.append(member)
    # The nested objects the specification defines are reached, not only the top level.
    for nested in ("ab_test.", "sender.reply_to.", "variants[1].", "audience.", "audience[0].",
                   "filters.filters[0].", "fields[0]."):
        assert any(m.startswith(nested) for m in swept), nested


def test_an_unknown_query_parameter_is_refused_on_every_operation_and_nothing_is_written(
        client: Any, auth: dict[str, str], conn: Any, world: dict[str, Any]) -> None:
    bodies = valid_bodies(world)
    swept = 0
    for method, path, op in operations(client):
        if not op["security"]:
            continue  # tracking links, webhooks and the docs: see api/strict.py
        kwargs: dict[str, Any] = {"headers": auth}
        if (method, path) in bodies:
            kwargs["json"] = bodies[(method, path)]
        elif path == "/v1/contacts/import":
            kwargs = {"headers": {**auth, "Content-Type": "text/csv"}, "content": "email_address\nnew@example.com\n"}
        before = snapshot(conn)
        response = client.request(method, url(world, path) + f"?{UNKNOWN}=1", **kwargs)
        assert error_of(response) == (400, f"Unknown query parameter '{UNKNOWN}'"), (method, path)
        assert snapshot(conn) == before, (method, path)
        swept += 1
    assert swept >= 60  # every operation behind a key (60 today)


def test_the_issues_typos_are_named(client: Any, auth: dict[str, str], conn: Any, world: dict[str, Any]) -> None:
    before = snapshot(conn)
    response = client.post("/v1/contacts/import?dryrun=true", headers={**auth, "Content-Type": "text/csv"},
                           content="email_address\nnew@example.com\n")
    assert error_of(response) == (400, "Unknown query parameter 'dryrun'")
    response = client.post("/v1/contacts/search", headers=auth, json={"feilds": [
        {"merge_tag": "email_address", "operator": "EQUALS", "value": "nobody@example.com"}]})
    assert error_of(response) == (400, "Unknown member 'feilds'")
    response = client.patch("/v1/workspace", headers=auth, json={"nmae": "Renamed", "conversion_tracking": False})
    assert error_of(response) == (400, "Unknown member 'nmae'")
    response = client.get("/v1/sms-campaigns?statuss=DRAFT", headers=auth)
    assert error_of(response) == (400, "Unknown query parameter 'statuss'")
    assert snapshot(conn) == before


def test_what_is_declared_or_left_open_is_still_accepted(client: Any, auth: dict[str, str],
                                                        world: dict[str, Any]) -> None:
    # Declared query parameters, repeated ones included.
    assert client.get("/v1/sms-campaigns?status=DRAFT&page=1&limit=10", headers=auth).status_code == 200
    assert client.get("/v1/contacts/export?format=jsonl&fields=email_address", headers=auth).status_code == 200
    response = client.post(f"/v1/contacts/import?dry_run=true&tag={world['vip']}&tag={world['vip']}&batch_size=10",
                           headers={**auth, "Content-Type": "text/csv"}, content="email_address\nnew@example.com\n")
    assert response.status_code == 200, response.text
    # Open objects: contact fields are the workspace's merge tags (email_address inside `fields`
    # of an upsert is ignored, as the specification says); event properties are the caller's.
    response = client.post("/v1/contacts/upsert", headers=auth, json={
        "email_address": "ann@example.com", "fields": {"email_address": "other@example.com", "city": "Paris"},
        "partial_update": True})
    assert response.status_code == 200, response.text
    assert response.json()["data"]["data"]["email_address"] == "ann@example.com"
    response = client.post("/v1/events", headers=auth, json={"email_address": "ann@example.com", "event_name": "x",
                                                             "properties": {"anything": {"goes": 1}}})
    assert response.status_code == 200, response.text
    # An unknown key in `fields` is still the specification's own message, not "Unknown member".
    response = client.post("/v1/contacts", headers=auth, json={"fields": {"email_address": "z@example.com",
                                                                          "nickname": "Z"}, "status": "SUBSCRIBED"})
    assert error_of(response) == (400, "We were unable to find a field with the merge_tag nickname")
    # Optional members sent as null are still read as left out.
    response = client.post("/v1/contacts/search", headers=auth, json={"fields": None, "tags": None})
    assert response.status_code == 200, response.text


def test_a_missing_key_is_answered_before_an_unknown_parameter(client: Any, world: dict[str, Any]) -> None:
    assert error_of(client.get(f"/v1/tags?{UNKNOWN}=1"))[0] == 401
    assert error_of(client.post("/v1/tags", json={UNKNOWN: 1}))[0] == 401
    # The public rate list is strict too, with or without a key.
    assert error_of(client.get(f"/v1/sms-rates?{UNKNOWN}=1")) == (400, f"Unknown query parameter '{UNKNOWN}'")


def test_public_links_keep_parameters_a_mail_client_may_add(client: Any) -> None:
    # A tracking link with an added parameter is answered as without it.
    for path in ("/t/o/nope", "/t/u/nope", "/s/nope"):
        assert client.get(f"{path}?{UNKNOWN}=1").status_code == client.get(path).status_code != 400


def test_a_whole_number_written_with_a_fraction_is_that_integer(client: Any, auth: dict[str, str],
                                                                 world: dict[str, Any]) -> None:
    # Found by Schemathesis: JSON Schema's "integer" admits 3.0, and the services refused it.
    response = client.post(f"/v1/contacts/{world['path']['contact_id']}/tags/add", headers=auth,
                           json={"tag_ids": [float(world["vip"])]})
    assert response.status_code == 200, response.text
    response = client.post("/v1/contacts/search", headers=auth, content=b'{"limit": 1e1, "page": 1.0}')
    assert response.json()["data"]["pagination"]["limit"] == 10
    response = client.post("/v1/contacts/search", headers=auth, json={"limit": 10.5})
    assert error_of(response) == (400, "The member 'limit' must be an integer.")


def test_an_editor_template_with_an_invalid_import_format_is_refused(client: Any, auth: dict[str, str]) -> None:
    # Found by Schemathesis: {"name": "n]", "type": "editor", "import_format": "\t..."} was created (201).
    response = client.post("/v1/templates", headers=auth, json={"name": "T", "type": "editor", "import_format": "x"})
    assert error_of(response) == (400, "Please provide a valid import format. Must be 'html', 'zip', or 'url'.")
    response = client.post("/v1/templates", headers=auth, json={"name": "T", "type": "editor", "import_format": None})
    assert response.status_code == 201
