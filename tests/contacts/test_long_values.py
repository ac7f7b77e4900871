"""Values of any length the API accepts are stored and found, on PostgreSQL as on SQLite (issue 41).

A PostgreSQL btree entry holds at most 2704 bytes: an index over a text column refused the
write of a longer value (a contact with a 10 kB first_name answered 500), where SQLite stored
it. Every indexed text column the API writes user text into is swept here with 10 kB and
1 MB of random text (base64 of random bytes: incompressible, so PostgreSQL's compression of a
long index entry cannot hide the size): what the API accepts is stored, read back whole and
found by the searches and filters that use the index; what it refuses is refused with the
same 4xx and message on both engines (a spec length limit, the 1 MiB body limit).

The columns, and where the sweep reaches them:
  contacts_field_<id>      a field's value (first_name, last_name, a TEXT field, a DROPDOWN_SINGLE
                           option; DATE and COUNTRY values are short by their format, NUMBER and
                           BOOLEAN ones are numbers): upsert, read, search, segments (on PostgreSQL
                           the index holds a prefix and comparisons recheck: storage/field_sql.py)
  contacts_email           email_address: refused, no address is that long
  tags (workspace, name)   POST /v1/tags: refused over 100 characters (services/contacts/tags.py)
  fields label, merge_tag  POST /v1/fields: refused over the specification's lengths
  template_assets path     a ZIP template's member paths: refused over 1024 bytes
  email_links url          a link of a campaign's HTML: over 2048 bytes it goes out untracked
  sms_replies phone        an SMS reply's From (Twilio's webhook): refused over 64 characters
Campaign, SMS campaign, template and segment names are not indexed; the specification bounds
them, and they are refused alike. Columns that the API fills from values of its own (ids,
hashes, statuses, dedupe keys, a User-Agent's OS family read from its first 512 characters) or
that are bounded before they are stored (domain names, phone numbers, sender local parts,
entry_key, flow step ids and event names) are not swept.
"""

from __future__ import annotations

import base64
import io
import os
import zipfile
from typing import Any

import pytest

from marketing_cli.storage import field_sql
from tests.factories import error_of

SIZES = {"10kB": 10_000, "1MB": 1_000_000}


def noise(size: int) -> str:
    """`size` characters of random text that no compression shrinks."""
    return base64.b64encode(os.urandom(size))[:size].decode()


def twin_of(value: str) -> str:
    """A value equal to `value` but for its last character: the same index prefix."""
    return value[:-1] + ("A" if value[-1] != "A" else "B")


def upsert(client: Any, auth: dict[str, str], email: str, fields: dict[str, Any]) -> Any:
    return client.post("/v1/contacts", headers=auth,
                       json={"fields": {"email_address": email, **fields}, "status": "SUBSCRIBED"})


def found(client: Any, auth: dict[str, str], merge_tag: str, operator: str, value: Any) -> set[str]:
    response = client.post("/v1/contacts/search", headers=auth,
                           json={"fields": [{"merge_tag": merge_tag, "operator": operator, "value": value}]})
    assert response.status_code == 200, response.text[:300]
    return {c["data"]["email_address"] for c in response.json()["data"]["contacts"]}


def members(client: Any, auth: dict[str, str], field_id: int, operator: str, value: Any) -> set[str]:
    made = client.post("/v1/segments", headers=auth, json={"name": f"s {operator}", "filters": {
        "condition": "AND", "filters": [{"type": "field", "field_id": field_id, "operator": operator, "value": value}]}})
    assert made.status_code == 201, made.text[:300]
    response = client.get(f"/v1/segments/{made.json()['data']['id']}/members", headers=auth)
    assert response.status_code == 200, response.text[:300]
    return {c["data"]["email_address"] for c in response.json()["data"]["contacts"]}


def field_ids(client: Any, auth: dict[str, str]) -> dict[str, int]:
    return {f["merge_tag"]: f["id"] for f in client.get("/v1/fields", headers=auth).json()["data"]}


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
@pytest.mark.parametrize("merge_tag", ["first_name", "last_name", "city"])
def test_text_field_values_of_any_length_are_stored_and_found(client, auth, merge_tag, size) -> None:
    """Two contacts whose values share their first 256 characters (the prefix PostgreSQL's index
    holds) and differ at the end: each is stored whole, and equality, order and segments tell them
    apart; a third contact holds a short value."""
    if merge_tag == "city":
        assert client.post("/v1/fields", headers=auth,
                           json={"label": "City", "merge_tag": "city", "type": "TEXT"}).status_code == 201
    value = noise(size)
    twin = twin_of(value)
    low, high = sorted((value, twin))
    for email, text in (("a@example.com", value), ("b@example.com", twin), ("c@example.com", "Paris")):
        response = upsert(client, auth, email, {merge_tag: text})
        assert response.status_code == 201, response.text[:300]
        got = client.get(f"/v1/contacts/{response.json()['data']['id']}", headers=auth)
        assert got.status_code == 200 and got.json()["data"]["data"][merge_tag] == text
    emails = {value: "a@example.com", twin: "b@example.com"}
    assert found(client, auth, merge_tag, "EQUALS", value) == {"a@example.com"}
    assert found(client, auth, merge_tag, "EQUALS", twin) == {"b@example.com"}
    assert found(client, auth, merge_tag, "EQUALS", value[:-1]) == set()
    assert found(client, auth, merge_tag, "NOT_EQUALS", value) == {"b@example.com", "c@example.com"}
    assert found(client, auth, merge_tag, "GREATER_THAN", low) == {emails[high]} | (
        {"c@example.com"} if "Paris" > low else set())
    assert found(client, auth, merge_tag, "LESS_THAN", high) == {emails[low]} | (
        {"c@example.com"} if "Paris" < high else set())
    assert found(client, auth, merge_tag, "EQUALS", "Paris") == {"c@example.com"}
    field_id = field_ids(client, auth)[merge_tag]
    assert members(client, auth, field_id, "eq", value) == {"a@example.com"}
    assert members(client, auth, field_id, "in", [twin, "Paris"]) == {"b@example.com", "c@example.com"}
    assert members(client, auth, field_id, "starts_with", value[:300]) == {"a@example.com", "b@example.com"}


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_dropdown_options_of_any_length(client, auth, size) -> None:
    """A DROPDOWN_SINGLE option is what a contact's value may be: a long one is stored and found."""
    option = noise(size)
    response = client.post("/v1/fields", headers=auth, json={
        "label": "Plan", "merge_tag": "plan", "type": "DROPDOWN_SINGLE", "definition": f"{option},basic"})
    assert response.status_code == 201, response.text[:300]  # a definition has no length limit
    assert upsert(client, auth, "a@example.com", {"plan": option}).status_code == 201
    assert upsert(client, auth, "b@example.com", {"plan": "basic"}).status_code == 201
    assert found(client, auth, "plan", "EQUALS", option) == {"a@example.com"}


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
def test_refused_over_the_limits_alike_on_both_engines(client, auth, size) -> None:
    """Where the specification bounds a value, or it is no address, the answer is a clear 400."""
    text = noise(size)
    assert error_of(client.post("/v1/tags", headers=auth, json={"name": text}))[0] == 400
    assert error_of(client.post("/v1/fields", headers=auth, json={"label": text, "merge_tag": "x_y",
                                                                  "type": "TEXT"}))[0] == 400
    assert error_of(upsert(client, auth, f"{text}@example.com", {}))[0] == 400
    # Names the specification bounds (not indexed, but stored: the same answer on both engines).
    for path, body in (("/v1/campaigns", {"name": text}), ("/v1/sms-campaigns", {"name": text}),
                       ("/v1/templates", {"name": text, "type": "code", "import_format": "html",
                                          "content_base64": base64.b64encode(b"<p>x</p>").decode()}),
                       ("/v1/segments", {"name": text, "filters": {"condition": "AND", "filters": [
                           {"type": "open_rate", "operator": "gt", "value": 1}]}})):
        status, message = error_of(client.post(path, headers=auth, json=body))
        assert status == 400 and ("255 characters" in message or "64 characters" in message), (path, message)
    assert client.get("/v1/tags", headers=auth).json()["data"] == []


def _zip_with(path: str) -> str:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("index.html", '<html><body><img src="x.png"> {{unsubscribe_url}}</body></html>')
        archive.writestr(path, b"\x89PNG")
    return base64.b64encode(buffer.getvalue()).decode()


@pytest.mark.parametrize("size", [300, 10_000, 60_000])
def test_template_member_paths(client, auth, size) -> None:
    """A ZIP template's member paths key its assets: a path of up to 1024 bytes is kept, a longer
    one refused 400 (a ZIP member name holds at most 65535 bytes, so 1 MB cannot be sent)."""
    path = f"{noise(size).replace('/', '_')}.png"
    response = client.post("/v1/templates", headers=auth, json={
        "name": "Long paths", "type": "code", "import_format": "zip", "content_base64": _zip_with(path)})
    if len(path.encode()) <= 1024:
        assert response.status_code == 201, response.text[:300]
    else:
        status, message = error_of(response)
        assert status == 400 and "1024 bytes" in message, message[:300]


def test_the_index_holds_a_prefix_on_postgresql(conn, workspace, engine) -> None:
    """On PostgreSQL a text field's index holds the value's first PREFIX characters in code point
    order, and an equality search is read from it (EXPLAIN); SQLite's holds the whole value."""
    from marketing_cli.services.contacts import fields as fields_service

    field = fields_service.create_field(conn, workspace["id"], {"label": "Town", "merge_tag": "town", "type": "TEXT"})
    definition = (conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = ?",
                               (field_sql.index_name(field["id"]),)).fetchone()[0] if engine == "postgresql"
                  else conn.execute("SELECT sql FROM sqlite_master WHERE name = ?",
                                    (field_sql.index_name(field["id"]),)).fetchone()[0])
    if engine != "postgresql":
        assert "left(" not in definition
        return
    key = f"mkt_field_text(data_doc, '{field['id']}'::text)"
    assert f'"left"({key}, {field_sql.PREFIX}) COLLATE "C"' in definition
    conn.execute("INSERT INTO contacts (id, workspace_id, email, status, data, created_at, updated_at)"
                 " SELECT lpad(to_hex(g), 24, '0'), ?, 'p' || g || '@example.com', 'SUBSCRIBED',"
                 " json_build_object(?::text, 'town ' || g)::text, 'x', 'x' FROM generate_series(1, 5000) g",
                 (workspace["id"], str(field["id"])))
    conn.execute("ANALYZE contacts")
    conn.execute("SET enable_seqscan = off")
    long = noise(10_000)
    conditions = [field_sql.compare(conn, field["id"], "TEXT", op, value) for op in ("=", ">", "<=")
                  for value in ("Paris", long)]
    conditions += [field_sql.is_in(conn, field["id"], "TEXT", values) for values in (["Paris", "Lyon"], [long, "x"])]
    for sql, params in conditions:
        plan = "\n".join(r[0] for r in conn.execute(
            f"EXPLAIN SELECT id FROM contacts WHERE workspace_id = ? AND {sql}", (workspace["id"], *params)))
        assert "Index Cond: ((workspace_id = " in plan and field_sql.index_name(field["id"]) in plan, plan


@pytest.mark.parametrize("size", [2048, *SIZES.values()], ids=["2048B", *SIZES.keys()])
def test_long_link_urls_go_out_untracked(conn, workspace, size) -> None:
    """A link of a campaign's HTML is registered for click tracking when the campaign is handed
    over (email_links, unique per campaign, variant and URL): a URL of up to 2048 bytes is, a
    longer one goes out as written, untracked (kernel/links.py), and the send succeeds."""
    from marketing_cli import jobs, services
    from marketing_cli.services.email import schedule
    from marketing_cli.storage.db import transaction
    from tests import factories

    services.load_job_handlers()
    url = f"https://shop.example.org/sale?q={noise(size - 33)}"
    html = f'<p><a href="{url}">Sale</a> <a href="{{{{unsubscribe_url}}}}">Unsubscribe</a></p>'
    factories.contact(conn, workspace["id"], "ann@example.com")
    mail = factories.ready_campaign(conn, workspace["id"], html=html)
    with transaction(conn):
        conn.execute("UPDATE domains SET verified = 1 WHERE workspace_id = ?", (workspace["id"],))
    schedule.schedule_campaign(conn, workspace["id"], mail["id"], {"schedule_type": "NOW"})
    assert jobs.run_due(conn)["failed"] == 0
    registered = [r[0] for r in conn.execute("SELECT url FROM email_links WHERE campaign_id = ?", (mail["id"],))]
    assert registered == ([url] if size <= 2048 else [])
    assert conn.execute("SELECT COUNT(*) FROM email_messages WHERE campaign_id = ? AND status = 'delivered'",
                        (mail["id"],)).fetchone()[0] == 1


@pytest.mark.postgresql_only
def test_step_38_rebuilds_the_text_field_indexes_on_a_prefix(postgres_server: Any) -> None:
    """A database upgraded from step 37 holds text field indexes over the whole value: step 38
    rebuilds them on the prefix (a NUMBER field's stays as it was), and a 10 kB value is stored."""
    from marketing_cli.storage import db

    url = postgres_server.empty()
    conn = db.connect(url, upgrade=False)
    try:
        db.migrate(conn, 38 - 1)
        conn.execute("INSERT INTO workspaces (name, created_at) VALUES ('Old', 'x')")
        ws = conn.execute("SELECT id FROM workspaces").fetchone()[0]
        for label, kind in (("City", "TEXT"), ("Age", "NUMBER")):
            conn.execute("INSERT INTO fields (workspace_id, label, merge_tag, type, \"order\", immutable, required,"
                         " created_at, updated_at) VALUES (?, ?, ?, ?, 1, 0, 0, 'x', 'x')",
                         (ws, label, label.lower(), kind))
        city, age = (r[0] for r in conn.execute("SELECT id FROM fields ORDER BY id"))
        conn.execute(f"CREATE INDEX contacts_field_{city} ON contacts (workspace_id, mkt_field_text(data_doc, '{city}'))"
                     f" WHERE mkt_field_text(data_doc, '{city}') IS NOT NULL")
        conn.execute(f"CREATE INDEX contacts_field_{age} ON contacts (workspace_id, mkt_field_number(data_doc, '{age}'))"
                     f" WHERE mkt_field_number(data_doc, '{age}') IS NOT NULL")
        before = dict(conn.execute("SELECT indexname, indexdef FROM pg_indexes WHERE indexname LIKE 'contacts_field_%'"))
        db.migrate(conn)
        after = dict(conn.execute("SELECT indexname, indexdef FROM pg_indexes WHERE indexname LIKE 'contacts_field_%'"))
        assert after[f"contacts_field_{age}"] == before[f"contacts_field_{age}"]
        assert f'"left"(mkt_field_text(data_doc, \'{city}\'::text), 256) COLLATE "C"' in after[f"contacts_field_{city}"]
        conn.execute(f"DROP INDEX contacts_field_{city}")  # what a new field gets: the same index
        field_sql.create_index(conn, city)
        assert conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = ?",
                            (f"contacts_field_{city}",)).fetchone()[0] == after[f"contacts_field_{city}"]
        value = noise(10_000)
        conn.execute("INSERT INTO contacts (id, workspace_id, email, status, data, created_at, updated_at)"
                     " VALUES ('c1', ?, 'a@x.io', 'SUBSCRIBED', ?, 'x', 'x')", (ws, f'{{"{city}": "{value}"}}'))
        sql, params = field_sql.compare(conn, city, "TEXT", "=", value)
        assert conn.execute(f"SELECT id FROM contacts WHERE {sql}", params).fetchall() == [("c1",)]
    finally:
        conn.close()


@pytest.mark.parametrize("size", [64, 10_000, 60_000])
def test_sms_reply_numbers(client, conn, workspace, size) -> None:
    """An SMS reply (Twilio's signed inbound webhook, its body up to 64 KiB) is kept under its
    sender's number (sms_replies, indexed by workspace and number): a `From` of up to 64
    characters is kept, a longer one, which no phone number or sender ID is, refused 400."""
    from marketing_cli.services.sms import providers
    from marketing_cli.services.sms import webhooks as sms_webhooks
    from tests import factories

    base = "https://t.example.com"
    conn.execute("UPDATE workspaces SET tracking_url = ? WHERE id = ?", (base, workspace["id"]))
    providers.set_provider(conn, workspace["id"], "twilio", account_sid=factories.TWILIO_SID,
                           auth_token=factories.TWILIO_TOKEN, base_url="https://api.example.com")
    number = "+" + noise(size - 1)
    params = {"From": number, "To": "+15005550006", "Body": "hello", "AccountSid": factories.TWILIO_SID,
              "MessageSid": "SM" + "1" * 32, "NumMedia": "0"}
    signature = sms_webhooks.signature(factories.TWILIO_TOKEN, base + "/webhooks/twilio/inbound", params)
    response = client.post("/webhooks/twilio/inbound", data=params, headers={"X-Twilio-Signature": signature})
    kept = [r[0] for r in conn.execute("SELECT phone FROM sms_replies WHERE workspace_id = ?", (workspace["id"],))]
    if size <= 64:
        assert response.status_code == 200, response.text[:300]
        assert kept == [number]
    else:
        status, message = error_of(response)
        assert (status, kept) == (400, []) and "64 characters" in message, message


def test_long_numbers(client, auth) -> None:
    """A NUMBER field's index holds the number (PostgreSQL: numeric), never its text: a number
    written with 100,000 digits is read as the float it is, stored and found; an integer past
    what the field takes is refused alike on both engines."""
    assert client.post("/v1/fields", headers=auth, json={"label": "Age", "merge_tag": "age",
                                                          "type": "NUMBER"}).status_code == 201

    def post(email: str, number: str) -> Any:
        return client.post("/v1/contacts", headers={**auth, "Content-Type": "application/json"}, content=(
            '{"fields": {"email_address": "%s", "age": %s}, "status": "SUBSCRIBED"}' % (email, number)).encode())

    assert error_of(post("a@example.com", "9" * 4299)) == (400, "Field 'age' must be a number.")
    response = post("b@example.com", "41." + "9" * 100_000)
    assert response.status_code == 201, response.text[:300]
    assert response.json()["data"]["data"]["age"] == 42
    assert found(client, auth, "age", "EQUALS", 42) == {"b@example.com"}
