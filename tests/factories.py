"""Test data built through the services, never through raw SQL that can drift from the schema.

Each helper takes a connection and returns what its service returns. Areas add their own
helpers here (one section each), so no test module needs to import another.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timedelta
from typing import Any

from marketing_cli.kernel import clock, ids
from marketing_cli.kernel.ids import new_id
from marketing_cli.services.account import workspaces
from marketing_cli.storage import field_sql


def workspace(conn: sqlite3.Connection, name: str = "Test workspace") -> dict[str, Any]:
    """A workspace with its first key: {"id", "api_key", ...Workspace}."""
    from marketing_cli.services.account import workspaces

    created = workspaces.create_workspace(conn, name)
    return {"id": created["workspace"]["id"], "api_key": created["api_key"], **created["workspace"]}


def tag(conn: sqlite3.Connection, workspace_id: int, name: str) -> int:
    from marketing_cli.services.contacts import tags

    return tags.create_tag(conn, workspace_id, {"name": name})["id"]


def field(conn: sqlite3.Connection, workspace_id: int, merge_tag: str, type_: str = "TEXT", **extra: Any) -> int:
    from marketing_cli.services.contacts import fields

    body = {"label": extra.pop("label", merge_tag.replace("_", " ").title()), "merge_tag": merge_tag,
            "type": type_, **extra}
    return fields.create_field(conn, workspace_id, body)["id"]


def contact(conn: sqlite3.Connection, workspace_id: int, email: str | None = None, *,
            status: str = "SUBSCRIBED", tags: list[int] | None = None, **values: Any) -> dict[str, Any]:
    """A contact made by POST /v1/contacts/upsert's service; `values` are merge_tag=value."""
    from marketing_cli.services.contacts import records

    body: dict[str, Any] = {"fields": values, "status": status}
    if email is not None:
        body["email_address"] = email
    if "phone_number" in values:
        body["phone_number"] = values.pop("phone_number")
    if tags:
        body["tags"] = tags
    return records.upsert_contact(conn, workspace_id, body)


def segment(conn: sqlite3.Connection, workspace_id: int, name: str, filters: dict[str, Any]) -> dict[str, Any]:
    from marketing_cli.services.contacts import segments

    return segments.create_segment(conn, workspace_id, {"name": name, "filters": filters})


# --- email campaigns (branch campaigns) -------------------------------------------------------

def campaign_sender(conn: sqlite3.Connection, workspace_id: int, domain: str = "example.com",
                    local_part: str = "news", display_name: str = "News Team") -> int:
    """A sender identity on the workspace's domain of that name (added if missing); returns its id."""
    from marketing_cli.services.email import domains, senders

    existing = [d for d in domains.list_domains(conn, workspace_id) if d["domain_name"] == domain]
    domain_id = existing[0]["id"] if existing else domains.add_domain(conn, workspace_id, domain)["id"]
    return senders.add_sender_identity(conn, workspace_id, {"domain_id": domain_id, "local_part": local_part,
                                                            "display_name": display_name})["id"]


def campaign(conn: sqlite3.Connection, workspace_id: int, name: str = "Spring sale",
             type_: str = "SINGLE_VARIANT") -> dict[str, Any]:
    """A DRAFT email campaign (POST /v1/campaigns's service)."""
    from marketing_cli.services.email import campaigns

    return campaigns.create_campaign(conn, workspace_id, {"name": name, "type": type_})


def ready_campaign(conn: sqlite3.Connection, workspace_id: int, *, html: str = "<p>Hello {{contact.first_name}}</p>",
                   subject: str = "Hello {{contact.first_name|friend}}", preview_text: str = "A preview",
                   reply_to: dict[str, str] | None = None, domain: str = "example.com") -> dict[str, Any]:
    """A SINGLE_VARIANT campaign with a sender, an audience, variant A's subject and HTML."""
    from marketing_cli.services.email import campaigns, variant_html

    created = campaign(conn, workspace_id)
    sender_body: dict[str, Any] = {"sender_identity_id": campaign_sender(conn, workspace_id, domain)}
    if reply_to:
        sender_body["reply_to"] = reply_to
    campaigns.configure_campaign(conn, workspace_id, created["id"], {
        "sender": sender_body, "audience": {"type": "ENTIRE_AUDIENCE"},
        "variants": [{"type": "A", "subject": subject, "preview_text": preview_text}]})
    variant_html.set_variant_html(conn, workspace_id, created["id"], "A", {"html": html})
    return campaigns.get_campaign(conn, workspace_id, created["id"])


def sending_campaign(conn: sqlite3.Connection, workspace_id: int, emails: list[str], *, html: str) -> str:
    """A campaign to `emails` (new SUBSCRIBED contacts), its domains verified, scheduled NOW and
    frozen: its messages queued for the send job. The allowances are set to three times the list."""
    from marketing_cli.services.account import billing
    from marketing_cli.services.email import domains, preparation
    from marketing_cli.services.email import schedule as email_schedule
    from marketing_cli.storage import db

    for resource in ("contacts", "monthly_emails", "hourly_emails"):
        billing.set_allowance(conn, workspace_id, resource, len(emails) * 3)
    now = clock.now()
    with db.transaction(conn):
        conn.executemany("INSERT INTO contacts (id, workspace_id, email, status, data, created_at, updated_at)"
                         " VALUES (?, ?, ?, 'SUBSCRIBED', '{}', ?, ?)",
                         [(new_id(), workspace_id, e, now, now) for e in emails])
    made = ready_campaign(conn, workspace_id, html=html)
    for d in domains.list_domains(conn, workspace_id):
        domains.verify_domain(conn, workspace_id, d["id"])
    email_schedule.schedule_campaign(conn, workspace_id, made["id"], {"schedule_type": "NOW"})
    preparation.preprocess(conn, {"campaign_id": made["id"]})
    return made["id"]
# ---------------------------------------------------------------- email campaign statistics


def email_campaign(conn: sqlite3.Connection, workspace_id: int, name: str = "Launch",
                   type_: str = "SINGLE_VARIANT") -> dict[str, Any]:
    """A DRAFT email campaign: {"id", "variants": {"A": id, "B": id}} (B for AB_TESTING only)."""
    from marketing_cli.services.email import campaigns

    created = campaigns.create_campaign(conn, workspace_id, {"name": name, "type": type_})
    return {"id": created["id"], "variants": {v["type"]: v["id"] for v in created["variants"]}}


def email_recipients(conn: sqlite3.Connection, workspace_id: int, campaign: dict[str, Any], emails: list[str],
                     variant: str = "A") -> list[int]:
    """Contacts for `emails` (made through the contacts service) queued as messages of one variant."""
    from marketing_cli.services.email import stats

    pairs = [(contact(conn, workspace_id, email)["id"], email) for email in emails]
    return stats.add_messages(conn, campaign["id"], campaign["variants"][variant], pairs)


# --- templates ---------------------------------------------------------------------------------

def code_template(conn: sqlite3.Connection, workspace_id: int, html: str, name: str = "Template") -> dict[str, Any]:
    """A CODE template imported from HTML (import_format html)."""
    import base64

    from marketing_cli.services.email import templates

    return templates.create_template(conn, workspace_id, {
        "name": name, "type": "code", "import_format": "html",
        "content_base64": base64.b64encode(html.encode("utf-8")).decode("ascii")})


# --- Sending domains and sender identities (domains work) -------------------------------


def domain(conn: sqlite3.Connection, workspace_id: int, name: str = "example.com") -> dict[str, Any]:
    """A sending domain (unverified) with its DNS records: the Domain of the API.

    The free plan allows one domain; call `allow_domains` first for more.
    """
    from marketing_cli.services.email import domains

    return domains.add_domain(conn, workspace_id, name)


def allow_domains(conn: sqlite3.Connection, workspace_id: int, n: int = 10) -> None:
    from marketing_cli.services.account import billing

    billing.set_allowance(conn, workspace_id, "domains", n)


def sender(conn: sqlite3.Connection, workspace_id: int, domain_id: int | None = None, local_part: str = "news",
           display_name: str = "News Team") -> dict[str, Any]:
    """A sender identity (as get_sender_identity returns it); adds example.com when no domain is given."""
    from marketing_cli.services.email import senders

    if domain_id is None:
        domain_id = domain(conn, workspace_id)["id"]
    return senders.add_sender_identity(conn, workspace_id,
                                       {"domain_id": domain_id, "local_part": local_part,
                                        "display_name": display_name})


def verify(conn: sqlite3.Connection, workspace_id: int, domain_id: int) -> None:
    """The operator marks the domain verified (`mkt domains mark-verified`), without DNS."""
    from marketing_cli.services.email import domains

    domains.mark_domain_verified(conn, workspace_id, domain_id)


def verified_sender(conn: sqlite3.Connection, workspace_id: int, name: str = "example.com") -> int:
    """A sender identity on a domain the operator marked verified; its id."""
    created = sender(conn, workspace_id, domain(conn, workspace_id, name)["id"])
    verify(conn, workspace_id, created["domain_id"])
    return created["id"]


def verified_domain(conn: sqlite3.Connection, workspace_id: int, dns: Any, name: str = "example.com") -> dict[str, Any]:
    """A domain whose records `dns` (the conftest `dns_server` fixture) publishes, verified
    through the real DNS check."""
    from marketing_cli.services.email import domains

    added = domain(conn, workspace_id, name)
    dns.publish(added)
    return domains.verify_domain(conn, workspace_id, added["id"])


def zip_bytes(files: dict[str, bytes | str], *, symlinks: tuple[str, ...] = ()) -> bytes:
    """A ZIP archive of `files` (path -> content); paths in `symlinks` are stored as links."""
    import io
    import stat
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, content in files.items():
            info = zipfile.ZipInfo(path)
            info.compress_type = zipfile.ZIP_DEFLATED
            if path in symlinks:
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, content)
    return buffer.getvalue()


class PageServer:
    """A local HTTP server for URL imports: `pages` maps a path to (status, headers, body).

    Use as a context manager; `url(path)` gives the address of a path."""

    def __init__(self, pages: dict[str, tuple[int, dict[str, str], bytes]]) -> None:
        import http.server
        import threading

        pages_ = pages

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
                status, headers, body = pages_.get(self.path, (404, {}, b"missing"))
                self.send_response(status)
                for key, value in {"Content-Length": str(len(body)), **headers}.items():
                    self.send_header(key, value)
                self.end_headers()
                try:
                    self.wfile.write(body)
                except ConnectionError:  # the client stopped reading (a size limit under test): expected
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def __enter__(self) -> PageServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()
# --- SMS campaigns -------------------------------------------------------------------

SMS_TEXT = "Hi {{contact.first_name}}, our autumn sale starts today. Reply STOP to opt out."


def sms_ready(conn: sqlite3.Connection, workspace_id: int, *, balance: str | None = "50",
              sender: str | None = "ACME") -> None:
    """A phone_number field, and optionally a sender ID and a prepaid balance."""
    from marketing_cli.services.sms import ledger

    if conn.execute("SELECT 1 FROM fields WHERE workspace_id = ? AND merge_tag = 'phone_number'",
                    (workspace_id,)).fetchone() is None:
        field(conn, workspace_id, "phone_number", label="Phone")
    if sender:
        ledger.set_sender_id(conn, workspace_id, sender)
    if balance:
        ledger.add_balance(conn, workspace_id, balance)


def sms_contacts(conn: sqlite3.Connection, workspace_id: int, phones: list[str], **values: Any) -> list[dict[str, Any]]:
    """One contact per number (emails made up from the number)."""
    return [contact(conn, workspace_id, f"p{phone.lstrip('+')}@example.com", phone_number=phone, **values)
            for phone in phones]


def sms_campaign(conn: sqlite3.Connection, workspace_id: int, name: str = "Autumn sale", *,
                 message: str | None = SMS_TEXT, audience: Any = None) -> dict[str, Any]:
    """A DRAFT SMS campaign with a message and (by default) the entire audience."""
    from marketing_cli.services.sms import campaigns

    created = campaigns.create_campaign(conn, workspace_id, {"name": name})
    body: dict[str, Any] = {"audience": audience or [{"type": "ENTIRE_AUDIENCE"}]}
    if message is not None:
        body["message"] = message
    return campaigns.update_campaign(conn, workspace_id, created["id"], body)
# --- shared test helpers (harden-data): no test module imports another -------------------

def error_of(response: Any) -> tuple[int, str]:
    """(status, message) of an error response, checking the CONTRACT body shape."""
    body = response.json()
    assert set(body) == {"data", "error"} and body["data"] is None, body
    assert set(body["error"]) == {"status", "message"}, body
    assert body["error"]["status"] == response.status_code
    return response.status_code, body["error"]["message"]


# --- rows written directly (harden-data) -------------------------------------------------
# Contacts with engagement counters (deliveries, opens, clicks, last activity) and back-dated
# timestamps, which no service writes yet (the campaign and tracking work will): the
# segment filter, audience, search and event tests need them. They follow schema.sql and
# the storage design in docs/architecture.md; everything else above goes through services.

NOW = clock.utcnow()


def ago(**kw: float) -> str:
    return clock.format_ts(NOW - timedelta(**kw))


def filter_field(conn: sqlite3.Connection, ws: int, merge_tag: str, ftype: str, definition: str | None = None,
              default_region: str | None = None) -> int:
    now = clock.now()
    fid = conn.execute(
        "INSERT INTO fields (workspace_id, label, merge_tag, type, definition, default_region, created_at,"
        " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (ws, merge_tag.title(), merge_tag, ftype, definition, default_region, now, now)).lastrowid
    if merge_tag != "phone_number":
        field_sql.create_index(conn, fid)  # the engine's expression (typed on PostgreSQL)
    return fid


def filter_tag(conn: sqlite3.Connection, ws: int, name: str) -> int:
    return conn.execute("INSERT INTO tags (workspace_id, name, created_at) VALUES (?, ?, ?)",
                        (ws, name, clock.now())).lastrowid


def filter_contact(conn: sqlite3.Connection, ws: int, email: str | None, *, phone: str | None = None,
                status: str = "SUBSCRIBED", sms_status: str | None = None, data: dict[int, Any] | None = None,
                tags: tuple[int, ...] = (), delivered: int = 0, opens: int = 0, clicks: int = 0,
                last_opened: str | None = None, last_clicked: str | None = None) -> str:
    cid = ids.new_id()
    now = clock.now()
    conn.execute(
        "INSERT INTO contacts (id, workspace_id, email, phone, status, sms_status, data, total_delivered,"
        " unique_opens, unique_clicks, total_opens, total_clicks, last_opened_at, last_clicked_at,"
        " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (cid, ws, email, phone, status, sms_status, json.dumps({str(k): v for k, v in (data or {}).items()}),
         delivered, opens, clicks, opens, clicks, last_opened, last_clicked, now, now))
    conn.executemany("INSERT INTO contact_tags (contact_id, tag_id) VALUES (?, ?)", [(cid, t) for t in tags])
    return cid


def build_filter_world(conn: sqlite3.Connection) -> dict[str, Any]:
    """(tests/contacts/test_segment_filters.py and the segment and audience tests) Two workspaces; in the first, five contacts (a-e) covering every operator."""
    ws = workspaces.create_workspace(conn, "Segments")["workspace"]["id"]
    other = workspaces.create_workspace(conn, "Other")["workspace"]["id"]
    f = {
        "email": conn.execute("SELECT id FROM fields WHERE workspace_id = ? AND merge_tag = 'email_address'",
                              (ws,)).fetchone()[0],
        "city": filter_field(conn, ws, "city", "TEXT"),
        "age": filter_field(conn, ws, "age", "NUMBER"),
        "vip": filter_field(conn, ws, "vip", "BOOLEAN"),
        "born": filter_field(conn, ws, "born", "DATE"),
        "plan": filter_field(conn, ws, "plan", "DROPDOWN_SINGLE", "free,pro,team"),
        "langs": filter_field(conn, ws, "langs", "DROPDOWN_MULTIPLE", "en,fr,de"),
        "country": filter_field(conn, ws, "country", "COUNTRY"),
        "phone": filter_field(conn, ws, "phone_number", "TEXT", default_region="GB"),
    }
    t = {name: filter_tag(conn, ws, name) for name in ("t1", "t2", "t3")}
    t["other"] = filter_tag(conn, other, "t1")
    c = {}
    c["a"] = filter_contact(conn, ws, "a@x.io", phone="+447911123401", data={
        f["city"]: "Paris", f["age"]: 30, f["vip"]: True, f["born"]: "1990-05-01", f["plan"]: "pro",
        f["langs"]: ["en", "fr"], f["country"]: "FR"}, tags=(t["t1"], t["t2"]),
        delivered=10, opens=5, clicks=1, last_opened=ago(days=2), last_clicked=ago(days=1))
    c["b"] = filter_contact(conn, ws, "b@x.io", sms_status="UNSUBSCRIBED", phone="+447911123402", data={
        f["city"]: "paris south", f["age"]: 45.5, f["vip"]: False, f["born"]: "1980-01-01", f["plan"]: "free",
        f["langs"]: ["en"], f["country"]: "US"}, tags=(t["t1"],),
        delivered=4, opens=1, clicks=0, last_opened=ago(days=300))
    c["c"] = filter_contact(conn, ws, "c@x.io", status="UNSUBSCRIBED", data={
        f["city"]: "Lyon", f["age"]: 18, f["born"]: "2000-12-31", f["plan"]: "team", f["langs"]: ["de"],
        f["country"]: "DE"})
    c["d"] = filter_contact(conn, ws, "d@x.io", phone="+447911123404", tags=(t["t2"],), delivered=2, opens=2,
                         clicks=2, last_clicked=ago(hours=1))
    c["e"] = filter_contact(conn, ws, None, phone="+447911123405", sms_status="SUBSCRIBED", data={
        f["city"]: "50%_deal", f["langs"]: ["en", "fr", "de"]}, tags=(t["t1"], t["t2"], t["t3"]),
        delivered=3, opens=1, clicks=1, last_opened=ago(days=40), last_clicked=ago(days=20))
    # A contact of another workspace that matches nearly everything: it must never show up.
    filter_contact(conn, other, "a@x.io", data={f["city"]: "Paris", f["age"]: 30}, tags=(t["other"],),
                delivered=1, opens=1, last_opened=ago(hours=1))
    return {"ws": ws, "other": other, "f": f, "t": t, "c": c}


ENGAGED = {"condition": "AND", "filters": [{"type": "open_rate", "operator": "gte", "value": 50}]}


def row_field(conn: Any, workspace_id: int, merge_tag: str, type: str = "TEXT", *,
              definition: str | None = None, default_region: str | None = None) -> int:
    now = clock.now()
    field_id = conn.execute(
        "INSERT INTO fields (workspace_id, label, merge_tag, type, definition, default_region, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (workspace_id, merge_tag.replace("_", " ").title(), merge_tag, type, definition, default_region, now, now),
    ).lastrowid
    field_sql.create_index(conn, field_id)  # the engine's expression (typed on PostgreSQL)
    return field_id


def row_contact(conn: Any, workspace_id: int, *, email: str | None = None, phone: str | None = None,
                data: dict[str, Any] | None = None, status: str = "SUBSCRIBED",
                created_at: str | None = None, updated_at: str | None = None, tags: list[int] = ()) -> str:
    contact_id = new_id()
    now = created_at or clock.now()
    conn.execute(
        "INSERT INTO contacts (id, workspace_id, email, phone, status, data, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (contact_id, workspace_id, email, phone, status, json.dumps(data or {}), now, updated_at or now),
    )
    for tag_id in tags:
        conn.execute("INSERT INTO contact_tags (contact_id, tag_id) VALUES (?, ?)", (contact_id, tag_id))
    return contact_id


def row_tag(conn: Any, workspace_id: int, name: str) -> int:
    return conn.execute("INSERT INTO tags (workspace_id, name, created_at) VALUES (?, ?, ?)",
                        (workspace_id, name, clock.now())).lastrowid


# --- Twilio stand-in (the twilio branch) ---------------------------------------------------

TWILIO_SID = "AC" + "0123456789abcdef" * 2
TWILIO_TOKEN = "s3cr3t-auth-token-0123456789"


class TwilioStandIn:
    """A local HTTP server that speaks Twilio's Messages API (a stand-in for https://api.twilio.com):
    `POST /2010-04-01/Accounts/{SID}/Messages.json`, basic auth, form fields; answers 201 with Twilio's
    message JSON (sid, status "queued", ...) or an error JSON {code, message, more_info, status}.
    `script` maps a recipient number to a list of (status, error code) answers, used in turn
    (the last one repeats); every request is kept in `received`. Each answer waits `delay`
    seconds (so that requests overlap); `max_in_flight` is the most requests it held at once."""

    def __init__(self, script: dict[str, list[tuple[int, int | None]]] | None = None, *, delay: float = 0.0) -> None:
        import itertools
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.script = {k: list(v) for k, v in (script or {}).items()}
        self.received: list[dict[str, Any]] = []
        self.delay = delay
        self.in_flight = self.max_in_flight = 0
        self._lock = threading.Lock()
        self._counter = itertools.count(1)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
                import base64
                import json
                import time
                from urllib.parse import parse_qs

                length = int(self.headers.get("Content-Length") or 0)
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode(), keep_blank_values=True).items()}
                with outer._lock:  # held from the whole request read to just before the answer is written
                    outer.in_flight += 1
                    outer.max_in_flight = max(outer.max_in_flight, outer.in_flight)
                auth = self.headers.get("Authorization", "")
                user = base64.b64decode(auth[6:]).decode() if auth.startswith("Basic ") else ""
                with outer._lock:
                    outer.received.append({"path": self.path, "auth": user, "form": form})
                    steps = outer.script.get(form.get("To", ""))
                    status, code = (steps.pop(0) if len(steps) > 1 else steps[0]) if steps else (201, None)
                    number = next(outer._counter)
                sid_ok = self.path == f"/2010-04-01/Accounts/{TWILIO_SID}/Messages.json"
                if not sid_ok or user != f"{TWILIO_SID}:{TWILIO_TOKEN}":
                    status, code = 401, 20003
                if status < 300:
                    body = {"sid": f"SM{number:032x}", "account_sid": TWILIO_SID, "to": form.get("To"),
                            "from": form.get("From"), "body": form.get("Body"), "status": "queued",
                            "num_segments": "1", "price": None, "error_code": None, "error_message": None,
                            "date_created": "Mon, 23 Nov 2026 10:00:00 +0000"}
                else:
                    body = {"code": code, "message": f"Stand-in error {code}",
                            "more_info": f"https://www.twilio.com/docs/errors/{code}", "status": status}
                data = json.dumps(body).encode()
                if outer.delay:
                    time.sleep(outer.delay)
                with outer._lock:
                    outer.in_flight -= 1
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> TwilioStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        from marketing_cli.services.sms import providers

        providers.close_clients()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


# --- one of every resource (the cross-workspace sweep, branch leaks) ----------------------

def workspace_world(conn: sqlite3.Connection, marker: str, *, email: str, phone: str) -> dict[str, Any]:
    """A workspace holding one of every resource the API names by id, each carrying `marker`
    in its text (names, labels, HTML, message), so that any answer showing it can be found.

    Returns {"workspace", "key", "ids": {resource: id}, "email", "phone", "hex_ids"}; the
    contact's email and phone are identifiers a caller may send, so they do not carry the marker."""
    import base64

    from marketing_cli.services.contacts import events
    from marketing_cli.services.email import campaigns, templates, variant_html

    ws = workspace(conn, f"{marker} workspace")
    wid = ws["id"]
    sms_ready(conn, wid)
    city = field(conn, wid, "city", label=f"City {marker}")
    vip = tag(conn, wid, f"{marker} vip")
    person = contact(conn, wid, email, tags=[vip], first_name=marker, city=f"{marker} town", phone_number=phone)
    seg = segment(conn, wid, f"{marker} segment", {"condition": "AND", "filters": [
        {"type": "field", "field_id": city, "operator": "contains", "value": "town"}]})
    dom = domain(conn, wid, f"{marker.lower()}.example")
    who = sender(conn, wid, dom["id"], local_part="news", display_name=f"{marker} News")
    verify(conn, wid, dom["id"])  # an automation's email step sends only from a verified domain
    archive = zip_bytes({"index.html": f"<p>{marker} template</p><img src=\"img/logo.png\">",
                         "img/logo.png": f"PNG {marker}".encode()})
    tpl = templates.create_template(conn, wid, {"name": f"{marker} template", "type": "code", "import_format": "zip",
                                                "content_base64": base64.b64encode(archive).decode("ascii")})
    mail = campaigns.create_campaign(conn, wid, {"name": f"{marker} campaign", "type": "AB_TESTING"})
    campaigns.configure_campaign(conn, wid, mail["id"], {
        "sender": {"sender_identity_id": who["id"]},
        "audience": {"type": "TAGS", "include_tag_ids": [vip], "exclude_segment_ids": [seg["id"]]},
        "variants": [{"type": t, "subject": f"{marker} subject {t}", "preview_text": f"{marker} preview"}
                     for t in ("A", "B")]})
    for t in ("A", "B"):
        variant_html.set_variant_html(conn, wid, mail["id"], t, {"html": f"<p>Hello {marker} {t}</p>"})
    sms = sms_campaign(conn, wid, f"{marker} sms", message=f"Hi {marker}, our sale starts today.",
                       audience=[{"type": "TAGS", "include_tag_ids": [vip]}])
    events.track_event(conn, wid, {"event_name": f"{marker}_signup", "email_address": email,
                                   "properties": {"who": marker}})
    event_id = events.list_events(conn, wid)[-1]["id"]
    series_id = series_row(conn, wid, mail["id"])
    flow = automation(conn, wid, {"name": f"{marker} automation", "triggers": [{"type": "manual"}],
                                  "steps": [email_step("hello", who["id"], subject=f"{marker} welcome")]})
    from marketing_cli.services.automations import triggers

    triggers.enroll_contact(conn, wid, flow["id"], {"contact_id": person["id"]})
    from marketing_cli.services.contacts import suppressions

    gone = suppressions.add_suppression(conn, wid, {"email_address": f"gone.{marker.lower()}@example.com"})
    return {
        "workspace": ws, "key": ws["api_key"], "email": email, "phone": phone,
        "ids": {"contact": person["id"], "tag": vip, "field": city, "segment": seg["id"], "domain": dom["id"],
                "sender": who["id"], "template": tpl["id"], "asset": "img/logo.png", "campaign": mail["id"],
                "sms_campaign": sms["id"], "event": event_id, "series": series_id, "automation": flow["id"],
                "suppression": gone["id"]},
        "hex_ids": [person["id"], mail["id"], sms["id"], *(v["id"] for v in mail["variants"])],
    }


# --- the mail transport (branch transport) ---------------------------------------------------

UNSUBSCRIBE_HTML = '<p>Hello {{contact.first_name|there}}</p><p><a href="{{unsubscribe_url}}">Unsubscribe</a></p>'


def sendable_campaign(conn: sqlite3.Connection, workspace_id: int, emails: list[str]) -> dict[str, Any]:
    """A ready campaign to `emails` (subscribed contacts) whose domain counts as verified, as
    if its DNS records had been found (the domains tests check real lookups)."""
    from marketing_cli.storage.db import transaction

    for address in emails:
        contact(conn, workspace_id, address)
    made = ready_campaign(conn, workspace_id, html=UNSUBSCRIBE_HTML)
    with transaction(conn):
        conn.execute("UPDATE domains SET verified = 1 WHERE workspace_id = ?", (workspace_id,))
    return made


def send_now(conn: sqlite3.Connection, workspace_id: int, campaign_id: str) -> dict[str, int]:
    """Schedule the campaign NOW and run the due jobs in this process (what `mkt jobs run` does)."""
    from marketing_cli import jobs, services
    from marketing_cli.services.email import schedule

    services.load_job_handlers()
    schedule.schedule_campaign(conn, workspace_id, campaign_id, {"schedule_type": "NOW"})
    return jobs.run_due(conn)


def scheduled_ab_campaign(conn: sqlite3.Connection, workspace_id: int, html: str, test_percentage: int) -> str:
    """An A/B campaign to the whole audience, both variants with `html`, its domain verified
    (the caller stubs DNS), scheduled now with the winner by opens after 0 minutes; its id."""
    from marketing_cli.services.email import campaigns, domains, schedule, variant_html

    created = campaign(conn, workspace_id, type_="AB_TESTING")
    campaigns.configure_campaign(conn, workspace_id, created["id"], {
        "sender": {"sender_identity_id": campaign_sender(conn, workspace_id)}, "audience": {"type": "ENTIRE_AUDIENCE"},
        "variants": [{"type": "A", "subject": "Subject A"}, {"type": "B", "subject": "Subject B"}]})
    for kind in "AB":
        variant_html.set_variant_html(conn, workspace_id, created["id"], kind, {"html": html})
    for d in domains.list_domains(conn, workspace_id):
        domains.verify_domain(conn, workspace_id, d["id"])
    schedule.schedule_campaign(conn, workspace_id, created["id"], {
        "schedule_type": "NOW",
        "ab_test": {"test_percentage": test_percentage, "winner_criterion": "OPENS", "wait_minutes": 0}})
    return created["id"]


# --- campaign timelines (branch timelines) ------------------------------------------------


def timeline_start(hours_ago: int = 100) -> Any:
    """An hour boundary `hours_ago` hours before now (the first bucket of a timeline that starts
    20 minutes after it); events placed at offsets from it fall in known buckets."""
    from marketing_cli.kernel import timeline

    return timeline.floor_hour(clock.utcnow() - timedelta(hours=hours_ago))


def email_timeline_world(conn: sqlite3.Connection, workspace_id: int, first: Any,
                         name: str = "Spring") -> dict[str, Any]:
    """An A/B email campaign whose send started at `first` + 20 min, with events at known
    times (offsets from `first`) through the recording functions: {"id", "messages"}."""
    from marketing_cli.services.email import stats
    from marketing_cli.storage.db import transaction

    def at(hours: float) -> str:
        return clock.format_ts(first + timedelta(hours=hours))

    campaign = email_campaign(conn, workspace_id, name, "AB_TESTING")
    a = email_recipients(conn, workspace_id, campaign, ["a1@gmail.com", "a2@gmail.com", "a3@yahoo.com"])
    b = email_recipients(conn, workspace_id, campaign, ["b1@gmail.com", "b2@icloud.com"], "B")
    with transaction(conn):
        conn.execute("UPDATE campaigns SET status = 'SENT', send_started_at = ? WHERE id = ?",
                     (at(1 / 3), campaign["id"]))
    [link_a] = stats.register_links(conn, campaign["id"], campaign["variants"]["A"], ["https://shop.example/a"]).values()
    [link_b] = stats.register_links(conn, campaign["id"], campaign["variants"]["B"], ["https://shop.example/b"]).values()
    for message in (*a, b[0]):
        stats.record_delivery(conn, message, at=at(0.5))              # hour 0: 4 sent, 4 delivered
    stats.record_failure(conn, b[1], "550 no such user", at=at(1.2))  # hour 1: 1 sent
    stats.record_open(conn, a[0], at=at(1.5))                         # hour 1: unique and total
    stats.record_open(conn, a[0], at=at(2.1))                         # hour 2: total
    stats.record_open(conn, a[1], at=at(2.2), machine=True)           # counts nowhere
    stats.record_open(conn, b[0], at=at(80))                          # day 0 (hours 72-95)
    stats.record_click(conn, a[0], link_a, "desktop", "Windows", "FR", at=at(2.3))  # hour 2: unique + total
    stats.record_click(conn, a[0], link_a, "desktop", "Windows", "FR", at=at(2.4))  # hour 2: total
    stats.record_click(conn, a[1], link_a, "other", "Other", "US", machine=True, at=at(2.5))
    stats.record_click(conn, b[0], link_b, "mobile", "iOS", "GB", at=at(97))  # day 1 (hours 96-119)
    stats.record_unsubscribe(conn, a[1], at=at(3.0))
    stats.record_bounce(conn, a[2], "hard", at=at(0.9))               # hour 0
    stats.record_complaint(conn, a[0], at=at(71.5))                   # hour 71
    return {"id": campaign["id"], "messages": [*a, *b]}


SPANS = {"hour": (3, [1, 4, 8, 11, 14, 18, 21, 24, 28, 31, 34, 37]),           # minutes after the start
         "day": (30, [20 + 95 * i for i in range(12)]),                    # over 18 hours
         "month": (24 * 32, [60 * 24 * 30 * i // 11 + 45 for i in range(12)])}  # over 30 days


def email_span_world(conn: sqlite3.Connection, workspace_id: int, span: str) -> dict[str, Any]:
    """A sent email campaign whose activity spans SPANS[span] (one hour, one day or one month):
    twelve recipients delivered when the send started (20 minutes past an hour, that many
    hours ago), each opening at its offset, clicking a minute later and every third
    unsubscribing two minutes later; {"id", "start"}."""
    from marketing_cli.services.email import stats
    from marketing_cli.storage.db import transaction

    hours_ago, offsets = SPANS[span]
    start = timeline_start(hours_ago) + timedelta(minutes=20)

    def at(minutes: float) -> str:
        return clock.format_ts(start + timedelta(minutes=minutes))

    campaign = email_campaign(conn, workspace_id, f"One {span}")
    ids = email_recipients(conn, workspace_id, campaign, [f"r{i}@example.com" for i in range(len(offsets))])
    with transaction(conn):
        conn.execute("UPDATE campaigns SET status = 'SENT', send_started_at = ? WHERE id = ?", (at(0), campaign["id"]))
    [link] = stats.register_links(conn, campaign["id"], campaign["variants"]["A"], ["https://shop.example/"]).values()
    for i, (message, offset) in enumerate(zip(ids, offsets, strict=True)):
        stats.record_delivery(conn, message, at=at(0.5))
        stats.record_open(conn, message, at=at(offset))
        stats.record_click(conn, message, link, "desktop", "Windows", "FR", at=at(offset + 1))
        if i % 3 == 0:
            stats.record_unsubscribe(conn, message, at=at(offset + 2))
    return {"id": campaign["id"], "start": start}


def sms_timeline_world(conn: sqlite3.Connection, workspace_id: int, first: Any, name: str = "Autumn sale") -> str:
    """An SMS campaign to three US numbers, sent now through the outbox, its start moved to
    `first` + 20 min and its delivery reports, STOP reply and clicks written at known offsets
    from `first` (as the webhooks and the short links write them); its id."""
    from marketing_cli import jobs
    from marketing_cli.services.sms import schedule
    from marketing_cli.storage.db import transaction

    def at(hours: float) -> str:
        return clock.format_ts(first + timedelta(hours=hours))

    sms_ready(conn, workspace_id)
    sms_contacts(conn, workspace_id, ["+14155550101", "+14155550102", "+14155550103"])
    campaign = sms_campaign(conn, workspace_id, name)
    schedule.schedule_campaign(conn, workspace_id, campaign["id"], {"schedule_type": "NOW"})
    jobs.run_due(conn)
    ids = [r[0] for r in conn.execute("SELECT id FROM sms_messages WHERE campaign_id = ? ORDER BY id",
                                      (campaign["id"],))]
    with transaction(conn):
        conn.execute("UPDATE sms_campaigns SET queued_at = ? WHERE id = ?", (at(1 / 3), campaign["id"]))
        conn.execute("UPDATE sms_messages SET status = 'delivered', delivered_at = ? WHERE id IN (?, ?)",
                     (at(0.5), ids[0], ids[1]))                                          # hour 0
        conn.execute("UPDATE sms_messages SET status = 'failed', failed_at = ? WHERE id = ?", (at(1.5), ids[2]))
        conn.execute("UPDATE sms_messages SET unsubscribed_at = ? WHERE id = ?", (at(5.5), ids[1]))  # hour 5
        conn.executemany("INSERT INTO sms_clicks (message_id, url, country, device_type, operating_system, clicked_at)"
                         " VALUES (?, 'https://a.example', 'US', 'mobile', 'iOS', ?)",
                         [(ids[0], at(2.1)), (ids[0], at(2.2)), (ids[1], at(2.3)), (ids[1], at(75))])
    return str(campaign["id"])


# --- recurring campaigns (branch recurring) ----------------------------------------------------

class FixedClock:
    """A clock that stands still until moved: monkeypatch it over `clock.utcnow`."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def set(self, moment: datetime) -> None:
        self.now = moment

    def advance(self, **kw: float) -> None:
        self.now += timedelta(**kw)


def rss(items: list[tuple[str, str, str]], title: str = "The Blog") -> bytes:
    """An RSS 2.0 document of (guid, title, RFC 822 date) items, newest first; each item's
    description holds a script that the rendering must drop."""
    entries = "".join(
        f"<item><guid>{guid}</guid><title>{name}</title><link>https://blog.example.org/{guid}</link>"
        f"<description>&lt;p&gt;About {name} &lt;script&gt;alert(1)&lt;/script&gt;&lt;/p&gt;</description>"
        f"<pubDate>{date}</pubDate></item>" for guid, name, date in items)
    return (f'<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>{title}</title>'
            f"<link>https://blog.example.org/</link><description>x</description>{entries}</channel></rss>").encode()


def series_row(conn: sqlite3.Connection, workspace_id: int, campaign_id: str,
               rrule: str = "FREQ=WEEKLY;BYDAY=MO;BYHOUR=9;BYMINUTE=0;BYSECOND=0") -> int:
    """A recurring series of a campaign written as a row (the service would first ask for a
    campaign ready to send: verified domain, unsubscribe link); its id."""
    from marketing_cli.storage.db import transaction

    now = clock.now()
    with transaction(conn):
        return conn.execute(
            "INSERT INTO campaign_series (workspace_id, campaign_id, rrule, timezone, dtstart, status, next_run_at,"
            " created_at, updated_at) VALUES (?, ?, ?, 'UTC', ?, 'ACTIVE', ?, ?, ?)",
            (workspace_id, campaign_id, rrule, now, "2099-01-05T09:00:00.000Z", now, now)).lastrowid


# --- automations -----------------------------------------------------------------------------

def email_step(step_id: str, sender_id: int, next_: str | None = None, **extra: Any) -> dict[str, Any]:
    """A send_email step with inline HTML (merge tags, a link, the unsubscribe URL)."""
    return {"id": step_id, "type": "send_email", "sender_id": sender_id, "subject": f"Step {step_id}",
            "html": f"<p>Hi {{{{contact.first_name}}}}, this is {step_id}. <a href=\"https://example.org/x\">x</a>"
                    " <a href=\"{{unsubscribe_url}}\">unsubscribe</a></p>",
            **({"next": next_} if next_ else {}), **extra}


def automation(conn: sqlite3.Connection, workspace_id: int, doc: dict[str, Any], *,
               publish: bool = True) -> dict[str, Any]:
    """An automation created (and published) through the services."""
    from marketing_cli.services.automations import flows

    created = flows.create_automation(conn, workspace_id, doc)
    return flows.publish_automation(conn, workspace_id, created["id"]) if publish else created


def run_automations(conn: sqlite3.Connection) -> dict[str, int]:
    """One pass of the automations job and every job it queues (email.send, webhooks), as `mkt jobs run`."""
    from marketing_cli import jobs

    return jobs.run_due(conn)


# --- deleting resources (issue 38, deletes) ---------------------------------------------------

def an_hour_from_now() -> str:
    return clock.format_ts(clock.utcnow().replace(microsecond=0) + timedelta(hours=1))


def queued_email_campaign(conn: sqlite3.Connection, workspace_id: int, audience: Any = None) -> str:
    """A ready campaign (its domain counted verified) to `audience` (default: everyone), scheduled
    an hour from now: QUEUED. Makes one contact, q@example.com."""
    from marketing_cli.services.email import campaigns, schedule

    made = sendable_campaign(conn, workspace_id, ["q@example.com"])
    if audience is not None:
        campaigns.configure_campaign(conn, workspace_id, made["id"], {"audience": audience})
    schedule.schedule_campaign(conn, workspace_id, made["id"], {"schedule_type": "LATER",
                                                                "scheduled_at": an_hour_from_now()})
    return made["id"]


def sent_email_campaign(conn: sqlite3.Connection, workspace_id: int, emails: list[str]) -> str:
    """A campaign sent to `emails` (through the outbox): SENT."""
    made = sendable_campaign(conn, workspace_id, emails)
    send_now(conn, workspace_id, made["id"])
    return made["id"]


def queued_sms_campaign(conn: sqlite3.Connection, workspace_id: int, audience: Any = None,
                        message: str | None = SMS_TEXT) -> str:
    """An SMS campaign to one US number, scheduled an hour from now: QUEUED."""
    from marketing_cli.services.sms import schedule

    sms_ready(conn, workspace_id)
    sms_contacts(conn, workspace_id, ["+14155550101"], first_name="Ann")
    made = sms_campaign(conn, workspace_id, audience=audience, message=message)
    schedule.schedule_campaign(conn, workspace_id, made["id"], {"schedule_type": "LATER",
                                                                "scheduled_at": an_hour_from_now()})
    return made["id"]


def completed_sms_campaign(conn: sqlite3.Connection, workspace_id: int) -> str:
    """An SMS campaign sent to one US number through the outbox provider: COMPLETED."""
    from marketing_cli import jobs, services
    from marketing_cli.services.sms import schedule

    services.load_job_handlers()
    sms_ready(conn, workspace_id)
    sms_contacts(conn, workspace_id, ["+14155550102"], first_name="Bo")
    made = sms_campaign(conn, workspace_id)
    schedule.schedule_campaign(conn, workspace_id, made["id"], {"schedule_type": "NOW"})
    jobs.run_due(conn)
    return made["id"]


def step_flow(conn: sqlite3.Connection, workspace_id: int, steps: list[dict[str, Any]], *,
              triggers: list[dict[str, Any]] | None = None, publish: bool = True) -> dict[str, Any]:
    """A flow of `steps` entered by hand (or by `triggers`), published (ACTIVE) unless told not to."""
    doc = {"name": "Flow", "triggers": triggers or [{"type": "manual"}], "steps": steps}
    return automation(conn, workspace_id, doc, publish=publish)


def sent_long_ago(conn: sqlite3.Connection, campaign_id: str, days: int = 31) -> None:
    """Move a sent campaign's deliveries `days` back, past the 30 days its unsubscribe links must work."""
    from marketing_cli.storage.db import transaction

    with transaction(conn):
        conn.execute("UPDATE email_messages SET delivered_at = ? WHERE campaign_id = ? AND delivered_at IS NOT NULL",
                     (clock.format_ts(clock.utcnow() - timedelta(days=days)), campaign_id))


# --- SMS replies and revocation (issue 38) ---------------------------------------------------

def sms_reply(conn: sqlite3.Connection, workspace_id: int, body: str, number: str) -> dict[str, Any]:
    """An inbound reply as the signed webhook hands it over (services/sms/replies.receive), then
    its confirmation handed over at once as the webhook does; the kept reply, read again."""
    from marketing_cli.services.sms import confirmation, replies

    kept = replies.receive(conn, workspace_id, {"From": number, "Body": body, "AccountSid": TWILIO_SID})
    if kept["confirmation"] is not None:
        confirmation.send_now(conn, kept["confirmation"]["message_id"])
    return next(r for r in replies.list_replies(conn, workspace_id, limit=100)["replies"] if r["id"] == kept["id"])


def expanded_sms_campaign(conn: sqlite3.Connection, workspace_id: int, name: str = "Autumn sale") -> sqlite3.Row:
    """An SMS campaign to the whole audience, scheduled and expanded (its messages written and
    charged, none handed over yet): the row the hand-off takes."""
    from marketing_cli.services.sms import recipients, schedule

    made = sms_campaign(conn, workspace_id, name)
    schedule.schedule_campaign(conn, workspace_id, made["id"], {"schedule_type": "NOW"})
    row = conn.execute("SELECT * FROM sms_campaigns WHERE id = ?", (made["id"],)).fetchone()
    assert recipients.expand_recipients(conn, row)
    return conn.execute("SELECT * FROM sms_campaigns WHERE id = ?", (made["id"],)).fetchone()


# --- a person with every kind of data (branch erase) -------------------------------------------

PERSON_EMAIL = "zoe.quintrell@example.org"
PERSON_PHONE = "+33612345678"
PERSON_VALUE = "Zanzibarville"  # a field value held nowhere else
# What must be found nowhere after an erase: the address, the number as stored (E.164, and its
# digits without the +) and as people write it in France, and the distinctive value.
PERSON_NEEDLES = (PERSON_EMAIL, "33612345678", "0612345678", PERSON_VALUE.lower())
OTHER_EMAIL = "bob.other@example.org"
BROWSER = ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 Version/17.0 Mobile/15E148"
           " Safari/604.1")
PERSON_IP = "203.0.113.77"
PERSON_HTML = ('<p>Hi {{contact.first_name}} from {{contact.city}}</p><p><a href="https://shop.example.org/sale">'
               'Sale</a> <a href="{{unsubscribe_url}}">Unsubscribe</a></p>')
PERSON_SMS = "Hi {{contact.first_name}} in {{contact.city}}: https://shop.example.org/?c={{contact.city}} Reply STOP to opt out."


def person_with_everything(conn: sqlite3.Connection, workspace_id: int) -> dict[str, Any]:
    """A person with every kind of data a workspace holds (fields, tags, events with properties,
    an email sent, opened and clicked with an IP address and a User-Agent, a failed one whose
    reason quotes the address, a test email to the address, an SMS sent and clicked through its
    personalised link, a flow enrollment with a webhook call about them), and a second contact who
    got the same campaigns. Returns {"person", "other", "campaign", "failed_campaign",
    "sms_campaign", "automation"} (ids)."""
    from marketing_cli import jobs, services
    from marketing_cli.services.automations import triggers
    from marketing_cli.services.contacts import events, records
    from marketing_cli.services.delivery import test_emails, tracking
    from marketing_cli.services.delivery.path_tokens import MessageTokens
    from marketing_cli.services.email import preparation, schedule, stats
    from marketing_cli.services.sms import links as sms_links
    from marketing_cli.services.sms import replies
    from marketing_cli.services.sms import schedule as sms_schedule
    from marketing_cli.storage.db import instance_secret, transaction

    services.load_job_handlers()
    ws = workspace_id
    sms_ready(conn, ws)
    allow_domains(conn, ws)
    field(conn, ws, "city")
    vip = tag(conn, ws, "vip")
    person = contact(conn, ws, PERSON_EMAIL, status="UNCONFIRMED", tags=[vip], first_name="Zoe", city=PERSON_VALUE,
                     phone_number=PERSON_PHONE)  # its pending event holds the address and the number
    records.upsert_contact(conn, ws, {"email_address": PERSON_EMAIL, "status": "SUBSCRIBED", "partial_update": True,
                                      "fields": {"city": f"{PERSON_VALUE} Nord"}})  # FIELD_UPDATED: old and new
    other = contact(conn, ws, OTHER_EMAIL, first_name="Bob", city="Oslo", phone_number="+33698765432")
    events.track_event(conn, ws, {"event_name": "order", "email_address": PERSON_EMAIL,
                                  "properties": {"ship_to": f"{PERSON_VALUE}, rue des Lilas", "total": 42}})
    # email: sent, opened and clicked (with an IP address and a User-Agent)
    mail = ready_campaign(conn, ws, html=PERSON_HTML)
    with transaction(conn):
        conn.execute("UPDATE domains SET verified = 1 WHERE workspace_id = ?", (ws,))
    schedule.schedule_campaign(conn, ws, mail["id"], {"schedule_type": "NOW"})
    assert jobs.run_due(conn)["failed"] == 0
    message_id = conn.execute("SELECT id FROM email_messages WHERE contact_id = ?", (person["id"],)).fetchone()[0]
    tokens = MessageTokens.make(instance_secret(conn), message_id)
    link_id = conn.execute("SELECT id FROM email_links WHERE campaign_id = ? AND url LIKE 'https://shop%'",
                           (mail["id"],)).fetchone()[0]
    tracking.track_open(conn, tokens.open, BROWSER, PERSON_IP)
    tracking.track_click(conn, tokens.click, str(link_id), BROWSER, PERSON_IP)
    test_emails.send_test_email(conn, ws, mail["id"], {"variant_type": "A", "recipient": PERSON_EMAIL})
    # email: a second campaign whose message to the person failed, the relay quoting the address
    failed = ready_campaign(conn, ws, html=PERSON_HTML, domain="example.net")
    with transaction(conn):
        conn.execute("UPDATE domains SET verified = 1 WHERE workspace_id = ?", (ws,))
    schedule.schedule_campaign(conn, ws, failed["id"], {"schedule_type": "NOW"})
    preparation.preprocess(conn, {"campaign_id": failed["id"]})  # frozen; the send job runs with the SMS's below
    second = conn.execute("SELECT id FROM email_messages WHERE campaign_id = ? AND contact_id = ?",
                          (failed["id"], person["id"])).fetchone()[0]
    assert stats.record_failure(conn, second, f"550 5.1.1 <{PERSON_EMAIL}>: Recipient address rejected")
    # SMS: sent with the person's values in its text and its link, then the link clicked
    text = sms_campaign(conn, ws, "Flash sale", message=PERSON_SMS)
    sms_schedule.schedule_campaign(conn, ws, text["id"], {"schedule_type": "NOW"})
    assert jobs.run_due(conn)["failed"] == 0
    body = conn.execute("SELECT body FROM sms_messages WHERE campaign_id = ? AND contact_id = ?",
                        (text["id"], person["id"])).fetchone()[0]
    short = [url for _, _, url in sms_links.find_urls(body) if "/s/" in url][0]
    sms_links.track_click(conn, short.rsplit("/s/", 1)[1], BROWSER, PERSON_IP)
    # the person's own words: a reply kept (sms_replies), a revocation in the consent ledger, its
    # confirmation text queued to the number
    replies.receive(conn, ws, {"From": PERSON_PHONE, "Body": f"Stop texting me, {PERSON_VALUE} is far"})
    # a flow: enrolled by hand, a webhook call about the person (refused: a private address), then a wait
    flow = automation(conn, ws, {"name": "Welcome", "triggers": [{"type": "manual"}], "steps": [
        {"id": "hook", "type": "webhook", "url": "http://127.0.0.1:9/hook", "next": "pause"},
        {"id": "pause", "type": "wait", "duration": {"days": 3}, "next": "done"}, {"id": "done", "type": "exit"}]})
    for who in (person, other):
        triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": who["id"]})
    run_automations(conn)
    return {"person": person["id"], "other": other["id"], "campaign": mail["id"], "failed_campaign": failed["id"],
            "sms_campaign": text["id"], "automation": flow["id"]}


# --- the consent ledger and the tokens of a message's paths (issue 38, consent) -------------

CONSENT_HTML = ('<p>Hi {{contact.first_name|there}} <a href="https://shop.example.org/sale">Sale</a>'
                ' <a href="{{view_online_url}}">View</a> <a href="{{unsubscribe_url}}">Unsubscribe</a></p>')


def consent_rows(conn: sqlite3.Connection, contact_id: str) -> list[dict[str, Any]]:
    """The contact's consent ledger rows, oldest first, as the faces show them."""
    from marketing_cli.services.contacts import consent_export

    rows = conn.execute("SELECT * FROM contact_consents WHERE contact_id = ? ORDER BY id", (contact_id,)).fetchall()
    return [{name: r[name] for name in consent_export.ROW_COLUMNS} for r in rows]


def sent_message(conn: sqlite3.Connection, workspace_id: int, email: str = "ann@example.com", *,
                 domain: str = "example.com") -> dict[str, Any]:
    """A campaign (a tracked link, the view-online and unsubscribe URLs) sent to the outbox to
    one subscribed contact: {"message_id", "contact_id", "campaign_id", "tokens" (MessageTokens)}."""
    from marketing_cli.services.delivery.path_tokens import MessageTokens
    from marketing_cli.storage.db import instance_secret, transaction

    person = contact(conn, workspace_id, email, first_name="Ann")
    made = ready_campaign(conn, workspace_id, html=CONSENT_HTML, domain=domain)
    with transaction(conn):
        conn.execute("UPDATE domains SET verified = 1 WHERE workspace_id = ?", (workspace_id,))
    assert send_now(conn, workspace_id, made["id"])["failed"] == 0
    message_id = conn.execute("SELECT id FROM email_messages WHERE campaign_id = ? AND contact_id = ?",
                              (made["id"], person["id"])).fetchone()[0]
    return {"message_id": message_id, "contact_id": person["id"], "campaign_id": made["id"],
            "tokens": MessageTokens.make(instance_secret(conn), message_id)}


def mailed_before_the_upgrade(conn: sqlite3.Connection) -> None:
    """Every message there is counts as handed over before schema step 32: the cut-over it
    records when it runs over a database that holds them (the highest message id)."""
    from marketing_cli.storage.db import transaction

    with transaction(conn):
        conn.execute("UPDATE token_cutovers SET last_id = (SELECT COALESCE(MAX(id), 0) FROM email_messages)"
                     " WHERE kind = 'm'")


# --- outbound calls and untrusted documents (issue 40) -----------------------------------------

FEED_HTML = ('<p>{{feed.title}}: {{feed.item_count}} new</p>{{#feed.items}}<div class="item"><h2>'
             '<a href="{{item.url}}">{{item.title}}</a></h2><p>{{item.summary}}</p></div>{{/feed.items}}'
             '<p><a href="{{unsubscribe_url}}">Unsubscribe</a></p>')


def feed_campaign(conn: sqlite3.Connection, workspace_id: int, emails: tuple[str, ...] = ("ann@example.org",)
                  ) -> dict[str, Any]:
    """A sendable campaign whose HTML carries a {{#feed.items}} block (a feed series can be made of it)."""
    from marketing_cli.services.email import campaigns, variant_html

    made = sendable_campaign(conn, workspace_id, list(emails))
    variant_html.set_variant_html(conn, workspace_id, made["id"], "A", {"html": FEED_HTML})
    campaigns.configure_campaign(conn, workspace_id, made["id"], {"variants": [
        {"type": "A", "subject": "New on {{feed.title}}: {{feed.latest_title}}"}]})
    return made


def webhook_flow(conn: sqlite3.Connection, workspace_id: int, url: str) -> dict[str, Any]:
    """A published flow (manual trigger) whose one step POSTs to `url`, and a contact enrolled in it."""
    from marketing_cli.services.account import billing
    from marketing_cli.services.automations import triggers

    billing.set_allowance(conn, workspace_id, "automations", 20)
    flow = automation(conn, workspace_id, {"name": "Hook", "triggers": [{"type": "manual"}],
                                           "steps": [{"id": "h", "type": "webhook", "url": url}]})
    person = contact(conn, workspace_id, "hooked@example.org")
    triggers.enroll_contact(conn, workspace_id, flow["id"], {"contact_id": person["id"]})
    return flow


# --- the job runner's fairness across workspaces (issue 40, item 3) -------------------------------

def stalled_webhooks(conn: sqlite3.Connection, url: str, hooks: int) -> int:
    """A workspace whose flow calls the webhook at `url` for `hooks` contacts, its `hooks` webhook jobs
    queued (the automations pass run here); the workspace's id."""
    from marketing_cli import jobs
    from marketing_cli.services.automations import triggers

    ws = workspace(conn, "Stalled shop")["id"]
    flow = webhook_flow(conn, ws, url)  # one contact enrolled
    for i in range(hooks - 1):
        person = contact(conn, ws, f"hooked{i}@example.org")
        triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": person["id"]})
    owner = jobs.new_owner()
    while (job := jobs.claim(conn, owner, types=["automations.run"])) is not None:
        jobs.run_job(conn, job, owner)
    return ws


def campaign_and_segment(conn: sqlite3.Connection, recipients: int) -> tuple[int, str, int]:
    """A workspace with `recipients` subscribed contacts, a ready campaign to all of them (its domain
    verified) and a segment, counted already (no job queued): (workspace, campaign, segment)."""
    from marketing_cli.services.account import billing
    from marketing_cli.storage.db import transaction

    ws = workspace(conn, "Busy shop")["id"]
    for resource in ("contacts", "monthly_emails", "hourly_emails"):
        billing.set_allowance(conn, ws, resource, recipients * 4)
    now = clock.now()
    with transaction(conn):
        conn.executemany("INSERT INTO contacts (id, workspace_id, email, status, data, created_at, updated_at)"
                         " VALUES (?, ?, ?, 'SUBSCRIBED', '{}', ?, ?)",
                         [(new_id(), ws, f"b{i}@example{i % 10}.org", now, now) for i in range(recipients)])
    campaign = ready_campaign(conn, ws, html=UNSUBSCRIBE_HTML)
    vip = tag(conn, ws, "vip")
    made = segment(conn, ws, "VIPs", {"condition": "AND", "filters": [
        {"type": "tags", "operator": "contains", "value": [vip]}]})
    with transaction(conn):
        conn.execute("UPDATE domains SET verified = 1 WHERE workspace_id = ?", (ws,))
        conn.execute("DELETE FROM jobs WHERE workspace_id = ?", (ws,))  # the segment's first count
    return ws, campaign["id"], made["id"]


def send_and_count(conn: sqlite3.Connection, workspace_id: int, campaign_id: str, segment_id: int) -> None:
    """Schedule the campaign NOW and ask for a recount of the segment (jobs for a runner)."""
    from marketing_cli.services.contacts import segments
    from marketing_cli.services.email import schedule

    schedule.schedule_campaign(conn, workspace_id, campaign_id, {"schedule_type": "NOW"})
    segments.refresh_segment(conn, workspace_id, segment_id)


def sent_and_counted(conn: sqlite3.Connection, campaign_id: str, segment_id: int) -> bool:
    return conn.execute("SELECT status FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()[0] == "SENT" and \
        conn.execute("SELECT counted_at FROM segments WHERE id = ?", (segment_id,)).fetchone()[0] is not None
