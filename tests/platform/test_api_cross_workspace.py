"""Every endpoint that takes an id or an identifier, called with another workspace's: 0 leaks.

Two workspaces share one database file and each holds one of every resource
(tests/factories.py: workspace_world). Workspace A's text carries the marker `Alphaleak`.
The operations come from the served OpenAPI document, so a new endpoint is swept without a
new test: every path parameter, query parameter and JSON body member that carries an id or
an identifier (names ending in `_id` / `_ids`, audience entries, and the few names listed
in MEMBERS) gets A's value, and the call is made with B's key:

  - all of A's ids at once (A's path ids, A's ids in the body and the query);
  - one member at a time with B's own path ids, so that a body id is really looked at
    (a call on A's campaign stops at the path and proves nothing about its body).

Asserted: no 5xx; no answer shows A's data (the marker, or an A hex id the request did
not carry); a write that names an A id in its body is refused (4xx); A's rows in the file
are the same before and after; no row of B references a row of A; and A's own key reads
every one of A's resources (2xx, A's data in the answer), so a sweep where every call fails
for some other reason cannot pass. A path parameter, query parameter or body member that
looks like an id and is not mapped here fails the test, so a new one gets noticed.

Out of scope: the keyless paths (tracking links /t/ and /s/, unsubscribe pages, Twilio's
/webhooks/, /docs, /v1/openapi.json). They take tokens signed for one recipient, not a
workspace's ids, and have tests of their own.
"""

from __future__ import annotations

import json
import re
import sqlite3
from typing import Any

import pytest

from marketing_cli import jobs
from tests import engines, factories

MARK_A = "Alphaleak"
MARK_B = "Bravoown"

# Path parameters: the resource each names. Where the name alone cannot tell (a campaign
# of which channel, a template's bare `id`), the path's prefix decides.
PATH_RESOURCES = {"contact_id": "contact", "field_id": "field", "segment_id": "segment", "domain_id": "domain",
                  "tag_id": "tag", "sender_id": "sender", "path": "asset", "series_id": "series", "automation_id": "automation"}
PATH_BY_PREFIX = {("campaign_id", "/v1/campaigns/"): "campaign",
                  ("campaign_id", "/v1/sms-campaigns/"): "sms_campaign",
                  ("id", "/v1/templates/"): "template",
                  ("id", "/v1/suppressions/"): "suppression"}
PATH_CONSTANTS = {"variant_type": "A",  # not an id: the variant A or B of any campaign
                  "version": "1"}  # an automation's version number, not an id

# Query parameters and JSON body members that carry an id or a contact's identifier.
MEMBERS = {
    "tag_ids": "tag", "include_tag_ids": "tag", "exclude_tag_ids": "tag",
    "include_segment_ids": "segment", "exclude_segment_ids": "segment",
    "field_id": "field", "sender_identity_id": "sender", "template_id": "template", "domain_id": "domain",
    "contact_id": "contact", "contact_ids": "contact", "campaign_id": "campaign", "after_id": "event",
    "segment_id": "segment",
    # names that do not say the resource
    "tags": "tag",  # POST /v1/contacts, /upsert, /search: tag ids
    "tag": "tag",  # POST /v1/contacts/import?tag=
    # identifiers: a contact's lookup keys
    "email_address": "email", "phone_number": "phone",
}
IDENTIFIERS = {"email", "phone"}

# Body members whose name cannot tell that they hold ids: (member, resource, a list?, the
# members beside it that make it an id).
FILTER = ("filters", "filters", "[]")
CONTEXT_SLOTS: dict[tuple[str, str], list[tuple[tuple[str, ...], str, bool, dict[tuple[str, ...], Any]]]] = {
    ("POST", "/v1/segments"): [((*FILTER, "value"), "tag", True,
                                {(*FILTER, "type"): "tags", (*FILTER, "operator"): "contains"})],
}

# What a request needs besides its ids for the service to get as far as reading them (the
# document cannot say which optional members a service needs together).
BASE_BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/v1/contacts"): {"status": "SUBSCRIBED", "fields": {"email_address": "sweep@example.com"}},
    ("POST", "/v1/contacts/upsert"): {"email_address": "sweep@example.com"},
    ("POST", "/v1/events"): {"event_name": "sweep"},
    ("POST", "/v1/segments"): {"name": "Sweep segment", "filters": {"condition": "AND"}},
    ("POST", "/v1/sender-identities"): {"local_part": "sweep", "display_name": "Sweep"},
    ("POST", "/v1/bounces"): {"type": "soft"},
    ("POST", "/v1/audience/count"): {"channel": "email"},
    ("POST", "/v1/campaigns/{campaign_id}/test"): {"recipient": "sweep@example.com", "variant_type": "A"},
}
RAW_BODIES = {("POST", "/v1/contacts/import"): ("text/csv", b"email_address\nsweep-import@example.com\n")}

# Calls where B's request may succeed with an A value in it, and why that is no leak. They
# make B a contact with A's email or phone, so they run last: until then a lookup of A's
# identifiers in B must find nothing.
MAY_SUCCEED = {
    ("POST", "/v1/contacts/upsert", "email_address"): "a lookup key: B makes its own contact",
    ("POST", "/v1/contacts/upsert", "phone_number"): "a lookup key: B makes its own contact",
    ("POST", "/v1/suppressions", "email_address"): "an address: B keeps it out of its own workspace (or is told "
                                                   "which of its own contacts holds it)",
    ("POST", "/v1/suppressions", "phone_number"): "an address: as email_address",
    # A bulk selection counts the ids of no contact of B's in `not_found`, as it counts missing
    # ones, and changes nothing (the rows check below holds it to that).
    ("POST", "/v1/tags/{tag_id}/contacts", "contact_ids"): "a selection: A's ids are not_found",
    ("POST", "/v1/tags/{tag_id}/contacts/remove", "contact_ids"): "a selection: A's ids are not_found",
}


def missing_world() -> dict[str, Any]:
    """Ids and identifiers that exist in no workspace: B's answer to A's must be the same."""
    from marketing_cli.kernel.ids import new_id

    hex_ids = {name: new_id() for name in ("contact", "campaign", "sms_campaign")}
    ints = {name: 10**6 + n for n, name in enumerate(("tag", "field", "segment", "domain", "sender", "template",
                                                      "event", "series", "automation", "suppression"))}
    return {"ids": {**hex_ids, **ints, "asset": "img/missing.png"}, "email": "nobody@example.com",
            "phone": "+447911000000", "hex_ids": []}


# Reads of A's resources whose answer names nothing of A (counters of a campaign not sent).
NO_MARKER_IN_ANSWER = ["GET /v1/sms-campaigns/{campaign_id}/statistics", "GET /v1/sms-campaigns/{campaign_id}/messages"]


def _properties(schema: dict[str, Any]) -> dict[str, Any]:
    """Members of an object schema, with those its if/then branches type more precisely."""
    props = dict(schema.get("properties", {}))
    for branch in schema.get("allOf", ()):
        for name, sub in branch.get("then", {}).get("properties", {}).items():
            props[name] = sub
    return props


def _plain(schema: dict[str, Any]) -> dict[str, Any]:
    """An anyOf of an object and a list of them (an audience) read as its object form."""
    return next((b for b in schema.get("anyOf", ()) if _is_object(b)), schema)


def _is_array(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "array" or (isinstance(kind, list) and "array" in kind)


def _is_object(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in schema


def _id_like(name: str) -> bool:
    return name.endswith(("_id", "_ids"))


def body_slots(schema: dict[str, Any], path: tuple[str, ...] = ()) -> tuple[list[tuple[tuple[str, ...], str, bool]],
                                                                          list[str]]:
    """(member path, resource, is a list) of every id member of a body schema; and the id-like
    members MEMBERS does not map. A path step "[]" is an array's item."""
    slots: list[tuple[tuple[str, ...], str, bool]] = []
    unmapped: list[str] = []
    for name, sub in _properties(schema).items():
        sub = _plain(sub)
        here = (*path, name)
        if name in MEMBERS:
            slots.append((here, MEMBERS[name], _is_array(sub) or name.endswith("_ids")))
            continue
        if _id_like(name):
            unmapped.append(".".join(here))
        if _is_array(sub) and isinstance(sub.get("items"), dict) and _is_object(sub["items"]):
            found, missing = body_slots(sub["items"], (*here, "[]"))
        elif _is_object(sub):
            found, missing = body_slots(sub, here)
        else:
            continue
        slots += found
        unmapped += missing
    return slots, unmapped


def sample(schema: dict[str, Any]) -> Any:
    """A plain valid value of a schema (for members a request needs that carry no id)."""
    if "enum" in schema:
        return next(v for v in schema["enum"] if v not in (None, ""))
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return sample(schema[key][0])
    kind = schema.get("type")
    kind = next((k for k in kind if k != "null"), None) if isinstance(kind, list) else kind
    if kind == "string":
        return "Sweep"[:schema.get("maxLength", 5)].ljust(schema.get("minLength", 0), "x")
    if kind == "integer":
        return schema.get("minimum", 1)
    if kind == "boolean":
        return False
    if kind == "array":
        return []
    if kind == "object" or "properties" in schema:
        return {}
    return "town"  # any JSON value: a segment filter's value


def build_body(schema: dict[str, Any], assign: dict[tuple[str, ...], Any], own: dict[str, Any],
               path: tuple[str, ...] = (), in_item: bool = False) -> dict[str, Any]:
    """An object for `schema`: the assigned id members, the members on the way to them, the
    required ones (sampled, or the caller's `own` value for an id) and, inside array items,
    every member (sampled)."""
    props = _properties(schema)
    required = set(schema.get("required", ()))
    result: dict[str, Any] = {}
    for name, sub in props.items():
        sub = _plain(sub)
        here = (*path, name)
        if here in assign:
            result[name] = assign[here]
        elif any(p[:len(here)] == here for p in assign):
            if _is_array(sub):
                result[name] = [build_body(sub["items"], assign, own, (*here, "[]"), True)]
            else:
                result[name] = build_body(sub, assign, own, here)
        elif name in required and name in MEMBERS:
            result[name] = Sweep.value(own, MEMBERS[name], _is_array(sub))
        elif (name in required or in_item) and name not in MEMBERS:
            result[name] = sample(sub)
    if "include_tag_ids" in props and "type" in props:  # an audience entry: its type follows its ids
        kind = "SEGMENTS" if "include_segment_ids" in result else "TAGS"
        result["type"] = kind
        if kind == "TAGS" and "include_tag_ids" not in result:
            result["include_tag_ids"] = [own["ids"]["tag"]]
    return result


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


class Sweep:
    """The requests of the sweep, built from the document for two worlds."""

    def __init__(self, document: dict[str, Any], a: dict[str, Any], b: dict[str, Any]) -> None:
        self.document, self.a, self.b = document, a, b
        self.unmapped: list[str] = []
        self.out_of_scope: list[str] = []
        self.operations: list[dict[str, Any]] = []
        self.reads: list[dict[str, Any]] = []  # every keyed GET, lists included
        for path, methods in document["paths"].items():
            for method, op in methods.items():
                self._add(method.upper(), path, op)

    @staticmethod
    def value(world: dict[str, Any], resource: str, as_list: bool) -> Any:
        if resource == "email":
            value: Any = world["email"]
        elif resource == "phone":
            value = world["phone"]
        else:
            value = world["ids"][resource]
        return [value] if as_list else value

    def _path_resource(self, path: str, name: str) -> str | None:
        if name in PATH_RESOURCES:
            return PATH_RESOURCES[name]
        for (param, prefix), resource in PATH_BY_PREFIX.items():
            if param == name and path.startswith(prefix):
                return resource
        return None

    def _add(self, method: str, path: str, op: dict[str, Any]) -> None:
        label = f"{method} {path}"
        if not op.get("security"):
            self.out_of_scope.append(label)
            return
        path_slots, query_slots = [], []
        for param in op.get("parameters", ()):
            name = param["name"]
            if param["in"] == "path":
                if name in PATH_CONSTANTS:
                    continue
                resource = self._path_resource(path, name)
                if resource is None:
                    self.unmapped.append(f"{label}: path parameter {name}")
                    continue
                path_slots.append((name, resource))
            elif name in MEMBERS:
                query_slots.append((name, MEMBERS[name], _is_array(param["schema"])))
            elif _id_like(name):
                self.unmapped.append(f"{label}: query parameter {name}")
        body_schema = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
        slots: list[tuple[tuple[str, ...], str, bool]] = []
        context: dict[str, dict[tuple[str, ...], Any]] = {}
        if body_schema:
            slots, missing = body_slots(body_schema)
            self.unmapped += [f"{label}: body member {m}" for m in missing]
            for member, resource, as_list, beside in CONTEXT_SLOTS.get((method, path), ()):
                slots.append((member, resource, as_list))
                context[".".join(member)] = beside
        raw = op.get("requestBody", {}).get("content", {})
        if raw and not body_schema and (method, path) not in RAW_BODIES:
            self.unmapped.append(f"{label}: a {', '.join(raw)} body (add a sample to RAW_BODIES)")
        resources = {name: resource for name, resource, _ in query_slots}
        resources.update({".".join(member): resource for member, resource, _ in slots})
        operation = {"method": method, "path": path, "path_slots": path_slots, "query_slots": query_slots,
                     "body_slots": slots, "body_schema": body_schema, "read": method == "GET",
                     "resources": resources, "context": context}
        if path_slots or query_slots or slots:
            self.operations.append(operation)
        if method == "GET":
            self.reads.append(operation)

    def request(self, op: dict[str, Any], path_world: dict[str, Any], picks: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """One call: path ids from `path_world`, and for each picked member name the world whose value it takes."""
        url = op["path"]
        for name, resource in op["path_slots"]:
            url = url.replace("{" + name + "}", str(self.value(path_world, resource, False)))
        for name, constant in PATH_CONSTANTS.items():
            url = url.replace("{" + name + "}", constant)
        params = {name: self.value(picks[name], resource, as_list)
                  for name, resource, as_list in op["query_slots"] if name in picks}
        call: dict[str, Any] = {"method": op["method"], "url": url, "params": params}
        key = (op["method"], op["path"])
        if op["body_schema"] is not None:
            assign: dict[tuple[str, ...], Any] = {}
            for member, resource, as_list in op["body_slots"]:
                if ".".join(member) in picks:
                    assign[member] = self.value(picks[".".join(member)], resource, as_list)
                    assign.update(op["context"].get(".".join(member), {}))
            body = merge(BASE_BODIES.get(key, {}), build_body(op["body_schema"], assign, path_world))
            call["content"] = json.dumps(body).encode()
            call["headers"] = {"Content-Type": "application/json"}
        elif key in RAW_BODIES:
            media, content = RAW_BODIES[key]
            call["content"] = content
            call["headers"] = {"Content-Type": media}
        return call

    def member_names(self, op: dict[str, Any]) -> list[str]:
        return list(op["resources"])

    def calls(self) -> list[tuple[dict[str, Any], str | None, dict[str, Any], dict[str, Any]]]:
        """(operation, the member under test or None for all of A's at once, the request with
        A's values, the same request with values that exist nowhere); MAY_SUCCEED ones last."""
        out = []
        missing = missing_world()
        for op in self.operations:
            names = self.member_names(op)
            out.append((op, None, self.request(op, self.a, {n: self.a for n in names}),
                        self.request(op, missing, {n: missing for n in names})))
            if op["path_slots"] or len(names) > 1:
                for name in names:
                    out.append((op, name, self.request(op, self.b, {name: self.a}),
                                self.request(op, self.b, {name: missing})))
        return sorted(out, key=lambda c: (c[0]["method"], c[0]["path"], c[1]) in MAY_SUCCEED)


# --- what A owns in the file ----------------------------------------------------------------

def _tables(conn: sqlite3.Connection) -> list[str]:
    return engines.tables(conn)


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return engines.columns(conn, table)


def _foreign_keys(conn: sqlite3.Connection, table: str) -> list[tuple[str, str, str]]:
    """(column, parent table, parent column) of each foreign key."""
    return engines.foreign_keys(conn, table)


def owned_rows(conn: sqlite3.Connection, workspace_id: int) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the file that belongs to a workspace: its own row, rows with its
    workspace_id, and (transitively) rows whose foreign key points at one of those."""
    tables = _tables(conn)
    owned: dict[str, list[sqlite3.Row]] = {"workspaces": list(conn.execute(
        "SELECT * FROM workspaces WHERE id = ?", (workspace_id,)))}
    for table in tables:
        if table != "workspaces" and "workspace_id" in _columns(conn, table):
            owned[table] = list(conn.execute(f"SELECT * FROM {table} WHERE workspace_id = ?", (workspace_id,)))
    for _ in range(6):  # chains are at most a few links long
        grew = False
        for table in tables:
            if table in owned:
                continue
            found = []
            names = _columns(conn, table)
            links = [(c, p, t) for c, p, t in _foreign_keys(conn, table) if p in owned]
            if not links:
                continue
            for row in conn.execute(f"SELECT * FROM {table}"):
                record = dict(zip(names, row))
                for column, parent, to in links:
                    if record[column] is not None and any(dict(r)[to] == record[column] for r in owned[parent]):
                        found.append(row)
                        break
            owned[table] = found
            grew = True
        if not grew:
            break
    return {table: sorted((tuple(r) for r in rows), key=repr) for table, rows in owned.items()}


def cross_references(conn: sqlite3.Connection) -> list[str]:
    """Rows that point at a row of another workspace (through a declared foreign key)."""
    found = []
    with_workspace = {t for t in _tables(conn) if "workspace_id" in _columns(conn, t)}
    for table in _tables(conn):
        keys = [(c, p, t) for c, p, t in _foreign_keys(conn, table) if p in with_workspace]
        if table in with_workspace:
            for column, parent, to in keys:
                n = conn.execute(f"SELECT count(*) FROM {table} c JOIN {parent} p ON c.{column} = p.{to}"
                                 " WHERE c.workspace_id IS NOT p.workspace_id").fetchone()[0]
                if n:
                    found.append(f"{table}.{column} -> {parent}: {n}")
        for i, (c1, p1, t1) in enumerate(keys):
            for c2, p2, t2 in keys[i + 1:]:
                n = conn.execute(f"SELECT count(*) FROM {table} c JOIN {p1} a ON c.{c1} = a.{t1}"
                                 f" JOIN {p2} b ON c.{c2} = b.{t2} WHERE a.workspace_id IS NOT b.workspace_id"
                                 ).fetchone()[0]
                if n:
                    found.append(f"{table}: {c1} and {c2} in two workspaces: {n}")
    return found


# --- the test --------------------------------------------------------------------------------

@pytest.fixture
def worlds(conn: sqlite3.Connection, db_path: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    # B first, so that A's integer ids differ from B's own.
    b = factories.workspace_world(conn, MARK_B, email="bravo@example.com", phone="+447911123499")
    a = factories.workspace_world(conn, MARK_A, email="person@example.com", phone="+447911123456")
    jobs.run_due(conn)  # previews and segment counts, so that every read of A has something to show
    return a, b


def leaked(text: str, a: dict[str, Any], sent: str) -> list[str]:
    """A's data in an answer: the marker, or an A hex id that the request did not carry."""
    found = [MARK_A] if MARK_A.lower() in text.lower() else []
    return found + [h for h in a["hex_ids"] if h in text and h not in sent]


def outcome(response: Any, call: dict[str, Any]) -> tuple[int, str]:
    """Status and error message, the ids the request carried written as <id>."""
    message = ""
    if not response.is_success and response.headers.get("content-type", "").startswith("application/json"):
        message = response.json()["error"]["message"]
        for value in re.findall(r"[0-9a-f]{6,}|\d+|[\w.+-]+@[\w.-]+", call["url"] + json.dumps(call.get("params")) +
                                call.get("content", b"").decode()):
            message = re.sub(rf"(?<![\w]){re.escape(value)}(?![\w])", "<id>", message)
    return response.status_code, message


def body_text(response: Any) -> str:
    return response.content.decode("utf-8", "replace")


def test_no_endpoint_shows_or_changes_another_workspaces_data(client: Any, conn: sqlite3.Connection,
                                                              worlds: tuple[dict[str, Any], dict[str, Any]]) -> None:
    a, b = worlds
    document = client.get("/v1/openapi.json").json()
    sweep = Sweep(document, a, b)
    assert sweep.unmapped == [], "map these in MEMBERS / PATH_RESOURCES / PATH_BY_PREFIX / RAW_BODIES"
    keyless = [label for label in sweep.out_of_scope
               if not label.split()[1].startswith(("/t/", "/s/", "/webhooks/", "/docs", "/v1/openapi.json"))]
    assert keyless == []  # only the tracking, webhook and documentation paths are out of scope
    assert len(sweep.operations) >= 40  # every /v1 operation with an id path, query or body member

    before = owned_rows(conn, a["workspace"]["id"])
    assert all(before[t] for t in ("contacts", "contact_tags", "contact_events", "campaign_variants", "dns_records",
                                   "template_assets", "sender_identities", "sms_campaigns", "usage_counters"))
    as_b = {"Authorization": f"Bearer {b['key']}"}
    problems: list[str] = []
    refused = 0
    for op, member, call, twin in sweep.calls():
        label = f"{call['method']} {call['url']} {member or 'all of A'}"
        response = client.request(**{**call, "headers": {**call.get("headers", {}), **as_b}})
        sent = call["url"] + json.dumps(call["params"]) + call.get("content", b"").decode()
        if response.status_code >= 500:
            problems.append(f"{label}: {response.status_code}")
        for found in leaked(body_text(response), a, sent):
            problems.append(f"{label}: {response.status_code} shows A's {found}: {body_text(response)[:300]}")
        a_id = member is not None and op["resources"][member] not in IDENTIFIERS
        if response.is_success and (member is None and op["path_slots"] or (a_id and not op["read"])) \
                and (op["method"], op["path"], member) not in MAY_SUCCEED:
            problems.append(f"{label}: {response.status_code} accepted A's id: {body_text(response)[:300]}")
        refused += not response.is_success
        if (op["method"], op["path"], member) not in MAY_SUCCEED:
            # Another workspace's id is answered as one that does not exist: no oracle.
            other = client.request(**{**twin, "headers": {**twin.get("headers", {}), **as_b}})
            if outcome(response, call) != outcome(other, twin):
                problems.append(f"{label}: {outcome(response, call)} but for a missing id {outcome(other, twin)}")
    assert problems == []
    jobs.run_due(conn)  # what B's calls queued runs too
    assert refused >= len(sweep.operations)  # every operation refused A's ids at least once
    assert owned_rows(conn, a["workspace"]["id"]) == before, "a call with B's key changed A's rows"
    assert cross_references(conn) == []

    # B's own data after the sweep holds nothing of A's (stored ids, copied HTML), in any
    # keyed read of the document: the lists too, which take no id at all.
    for op in sweep.reads:
        own = sweep.request(op, b, {n: b for n in sweep.member_names(op)})
        response = client.request(**{**own, "headers": as_b})
        assert response.is_success, (own, response.text[:300])
        assert leaked(body_text(response), a, "") == [], (own["url"], body_text(response)[:300])

    # The reverse: A's key reaches every one of A's resources the sweep asked for.
    as_a = {"Authorization": f"Bearer {a['key']}"}
    anonymous = []
    for op in sweep.operations:
        if op["read"]:
            mine = sweep.request(op, a, {n: a for n in sweep.member_names(op)})
            response = client.request(**{**mine, "headers": as_a})
            assert response.is_success, (mine, response.status_code, response.text[:300])
            if op["path_slots"] and not leaked(body_text(response), a, ""):
                anonymous.append(f"{op['method']} {op['path']}")
    assert anonymous == NO_MARKER_IN_ANSWER


def test_an_unmapped_id_member_is_noticed() -> None:
    document = {"paths": {
        "/v1/widgets/{widget_id}": {"get": {"security": [{"bearer": []}], "parameters": [
            {"name": "widget_id", "in": "path", "required": True, "schema": {"type": "integer"}},
            {"name": "owner_id", "in": "query", "schema": {"type": "integer"}}]}},
        "/v1/widgets": {"post": {"security": [{"bearer": []}], "requestBody": {"content": {"application/json": {
            "schema": {"type": "object", "properties": {"parts": {"type": "array", "items": {
                "type": "object", "properties": {"gadget_ids": {"type": "array"}}}}}}}}}}},
        "/t/x/{token}": {"get": {"security": [], "parameters": [
            {"name": "token", "in": "path", "required": True, "schema": {"type": "string"}}]}},
    }}
    world = {"ids": {}, "email": "", "phone": ""}
    sweep = Sweep(document, world, world)
    assert sweep.unmapped == ["GET /v1/widgets/{widget_id}: path parameter widget_id",
                              "GET /v1/widgets/{widget_id}: query parameter owner_id",
                              "POST /v1/widgets: body member parts.[].gadget_ids"]
    assert sweep.out_of_scope == ["GET /t/x/{token}"]


def test_the_sweep_finds_a_leak(client: Any, conn: sqlite3.Connection,
                                worlds: tuple[dict[str, Any], dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    """A tag lookup that forgets the workspace shows A's tag to B: the checks above see it."""
    from marketing_cli.services.contacts import records

    a, b = worlds
    real = records.tags_by_id

    def careless(conn_: sqlite3.Connection, workspace_id: int, ids: list[int]) -> Any:
        rows = conn_.execute(f"SELECT workspace_id FROM tags WHERE id IN ({', '.join('?' * len(ids))})", ids)
        owners = {r[0] for r in rows} or {workspace_id}
        return real(conn_, owners.pop(), ids)

    monkeypatch.setattr(records, "tags_by_id", careless)
    before = owned_rows(conn, a["workspace"]["id"])
    document = client.get("/v1/openapi.json").json()
    sweep = Sweep(document, a, b)
    op = next(o for o in sweep.operations if (o["method"], o["path"]) == ("POST", "/v1/contacts/{contact_id}/tags/add"))
    call = sweep.request(op, b, {"tag_ids": a})
    response = client.request(**{**call, "headers": {**call["headers"], "Authorization": f"Bearer {b['key']}"}})
    assert response.is_success and leaked(body_text(response), a, "") == [MARK_A]
    assert [problem.split(":")[0] for problem in cross_references(conn)] == ["contact_tags"]
    assert owned_rows(conn, a["workspace"]["id"]) != before  # A's tag is on B's contact now


# --- the dashboard (api/dashboard.py): not in the document, so swept here by hand -----------

def test_the_dashboard_shows_b_nothing_of_a(app: Any, conn: sqlite3.Connection,
                                             worlds: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """B's key signed in to the dashboard: A's campaign pages answer 404 like a missing id,
    and no page B can reach shows A's marker or ids; A's own key sees A's pages."""
    from starlette.testclient import TestClient

    from marketing_cli.kernel.ids import new_id

    a, b = worlds
    pages = {"email": "/dashboard/campaigns/{}", "sms": "/dashboard/sms-campaigns/{}"}
    ids = {"email": ("campaign", a["ids"]["campaign"]), "sms": ("sms_campaign", a["ids"]["sms_campaign"])}
    before = owned_rows(conn, a["workspace"]["id"])
    for who, expect in ((b, 404), (a, 200)):
        with TestClient(app, raise_server_exceptions=False, follow_redirects=False) as browser:
            signed = browser.post("/dashboard/sign-in", data={"api_key": who["key"]},
                                  headers={"Origin": "http://testserver"})
            assert signed.status_code == 303
            for kind, template in pages.items():
                _, a_id = ids[kind]
                theirs = browser.get(template.format(a_id))
                assert theirs.status_code == expect, (kind, who is a, theirs.text[-300:])
                if who is b:
                    missing = browser.get(template.format(new_id()))
                    assert missing.status_code == 404 and leaked(body_text(theirs), a, "") == []
                    assert body_text(theirs).replace(a_id, "<id>") == body_text(missing).replace(
                        missing.request.url.path.rsplit("/", 1)[1], "<id>")
                else:
                    assert MARK_A in body_text(theirs)
            listing = browser.get("/dashboard/")
            assert listing.status_code == 200
            assert (leaked(body_text(listing), a, "") == []) == (who is b)
        if who is b:  # (A's own visit stamps its key's last_used_at)
            assert owned_rows(conn, a["workspace"]["id"]) == before
