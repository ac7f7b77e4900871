"""Test data built through the services, never through raw SQL that can drift from the schema.

Each helper takes a connection and returns what its service returns. Areas add their own
helpers here (one section each), so no test module needs to import another.
"""

from __future__ import annotations

import sqlite3
from typing import Any


def workspace(conn: sqlite3.Connection, name: str = "Test workspace") -> dict[str, Any]:
    """A workspace with its first key: {"id", "api_key", ...Workspace}."""
    from marketing_cli.services import workspaces

    created = workspaces.create_workspace(conn, name)
    return {"id": created["workspace"]["id"], "api_key": created["api_key"], **created["workspace"]}


def tag(conn: sqlite3.Connection, workspace_id: int, name: str) -> int:
    from marketing_cli.services import tags

    return tags.create_tag(conn, workspace_id, {"name": name})["id"]


def field(conn: sqlite3.Connection, workspace_id: int, merge_tag: str, type_: str = "TEXT", **extra: Any) -> int:
    from marketing_cli.services import fields

    body = {"label": extra.pop("label", merge_tag.replace("_", " ").title()), "merge_tag": merge_tag,
            "type": type_, **extra}
    return fields.create_field(conn, workspace_id, body)["id"]


def contact(conn: sqlite3.Connection, workspace_id: int, email: str | None = None, *,
            status: str = "SUBSCRIBED", tags: list[int] | None = None, **values: Any) -> dict[str, Any]:
    """A contact made by POST /v1/contacts/upsert's service; `values` are merge_tag=value."""
    from marketing_cli.services import contacts

    body: dict[str, Any] = {"fields": values, "status": status}
    if email is not None:
        body["email_address"] = email
    if "phone_number" in values:
        body["phone_number"] = values.pop("phone_number")
    if tags:
        body["tags"] = tags
    return contacts.upsert_contact(conn, workspace_id, body)


def segment(conn: sqlite3.Connection, workspace_id: int, name: str, filters: dict[str, Any]) -> dict[str, Any]:
    from marketing_cli.services import segments

    return segments.create_segment(conn, workspace_id, {"name": name, "filters": filters})


# --- email campaigns (branch campaigns) -------------------------------------------------------

def campaign_sender(conn: sqlite3.Connection, workspace_id: int, domain: str = "example.com",
                    local_part: str = "news", display_name: str = "News Team") -> int:
    """A sender identity on the workspace's domain of that name (added if missing); returns its id."""
    from marketing_cli.services import domains, senders

    existing = [d for d in domains.list_domains(conn, workspace_id) if d["domain_name"] == domain]
    domain_id = existing[0]["id"] if existing else domains.add_domain(conn, workspace_id, domain)["id"]
    return senders.add_sender_identity(conn, workspace_id, {"domain_id": domain_id, "local_part": local_part,
                                                            "display_name": display_name})["id"]


def campaign(conn: sqlite3.Connection, workspace_id: int, name: str = "Spring sale",
             type_: str = "SINGLE_VARIANT") -> dict[str, Any]:
    """A DRAFT email campaign (POST /v1/campaigns's service)."""
    from marketing_cli.services import campaigns

    return campaigns.create_campaign(conn, workspace_id, {"name": name, "type": type_})


def ready_campaign(conn: sqlite3.Connection, workspace_id: int, *, html: str = "<p>Hello {{contact.first_name}}</p>",
                   subject: str = "Hello {{contact.first_name|friend}}", preview_text: str = "A preview",
                   reply_to: dict[str, str] | None = None, domain: str = "example.com") -> dict[str, Any]:
    """A SINGLE_VARIANT campaign with a sender, an audience, variant A's subject and HTML."""
    from marketing_cli.services import campaign_html, campaigns

    created = campaign(conn, workspace_id)
    sender_body: dict[str, Any] = {"sender_identity_id": campaign_sender(conn, workspace_id, domain)}
    if reply_to:
        sender_body["reply_to"] = reply_to
    campaigns.configure_campaign(conn, workspace_id, created["id"], {
        "sender": sender_body, "audience": {"type": "ENTIRE_AUDIENCE"},
        "variants": [{"type": "A", "subject": subject, "preview_text": preview_text}]})
    campaign_html.set_variant_html(conn, workspace_id, created["id"], "A", {"html": html})
    return campaigns.get_campaign(conn, workspace_id, created["id"])
# ---------------------------------------------------------------- email campaign statistics


def email_campaign(conn: sqlite3.Connection, workspace_id: int, name: str = "Launch",
                   type_: str = "SINGLE_VARIANT") -> dict[str, Any]:
    """A DRAFT email campaign: {"id", "variants": {"A": id, "B": id}} (B for AB_TESTING only)."""
    from marketing_cli.services import campaigns

    created = campaigns.create_campaign(conn, workspace_id, {"name": name, "type": type_})
    return {"id": created["id"], "variants": {v["type"]: v["id"] for v in created["variants"]}}


def email_recipients(conn: sqlite3.Connection, workspace_id: int, campaign: dict[str, Any], emails: list[str],
                     variant: str = "A") -> list[int]:
    """Contacts for `emails` (made through the contacts service) queued as messages of one variant."""
    from marketing_cli.services import campaign_stats

    pairs = [(contact(conn, workspace_id, email)["id"], email) for email in emails]
    return campaign_stats.add_messages(conn, campaign["id"], campaign["variants"][variant], pairs)


# --- templates ---------------------------------------------------------------------------------

def code_template(conn: sqlite3.Connection, workspace_id: int, html: str, name: str = "Template") -> dict[str, Any]:
    """A CODE template imported from HTML (import_format html)."""
    import base64

    from marketing_cli.services import templates

    return templates.create_template(conn, workspace_id, {
        "name": name, "type": "code", "import_format": "html",
        "content_base64": base64.b64encode(html.encode("utf-8")).decode("ascii")})


# --- Sending domains and sender identities (domains work) -------------------------------


def domain(conn: sqlite3.Connection, workspace_id: int, name: str = "example.com") -> dict[str, Any]:
    """A sending domain (unverified) with its DNS records: the Domain of the API.

    The free plan allows one domain; call `allow_domains` first for more.
    """
    from marketing_cli.services import domains

    return domains.add_domain(conn, workspace_id, name)


def allow_domains(conn: sqlite3.Connection, workspace_id: int, n: int = 10) -> None:
    from marketing_cli.services import billing

    billing.set_allowance(conn, workspace_id, "domains", n)


def sender(conn: sqlite3.Connection, workspace_id: int, domain_id: int | None = None, local_part: str = "news",
           display_name: str = "News Team") -> dict[str, Any]:
    """A sender identity (as get_sender_identity returns it); adds example.com when no domain is given."""
    from marketing_cli.services import senders

    if domain_id is None:
        domain_id = domain(conn, workspace_id)["id"]
    return senders.add_sender_identity(conn, workspace_id,
                                       {"domain_id": domain_id, "local_part": local_part,
                                        "display_name": display_name})


def verified_domain(conn: sqlite3.Connection, workspace_id: int, dns: Any, name: str = "example.com") -> dict[str, Any]:
    """A domain whose records `dns` (the conftest `dns_server` fixture) publishes, verified
    through the real DNS check."""
    from marketing_cli.services import domains

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
                self.wfile.write(body)

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
    from marketing_cli.services import sms_ledger

    if conn.execute("SELECT 1 FROM fields WHERE workspace_id = ? AND merge_tag = 'phone_number'",
                    (workspace_id,)).fetchone() is None:
        field(conn, workspace_id, "phone_number", label="Phone")
    if sender:
        sms_ledger.set_sender_id(conn, workspace_id, sender)
    if balance:
        sms_ledger.add_balance(conn, workspace_id, balance)


def sms_contacts(conn: sqlite3.Connection, workspace_id: int, phones: list[str], **values: Any) -> list[dict[str, Any]]:
    """One contact per number (emails made up from the number)."""
    return [contact(conn, workspace_id, f"p{phone.lstrip('+')}@example.com", phone_number=phone, **values)
            for phone in phones]


def sms_campaign(conn: sqlite3.Connection, workspace_id: int, name: str = "Autumn sale", *,
                 message: str | None = SMS_TEXT, audience: Any = None) -> dict[str, Any]:
    """A DRAFT SMS campaign with a message and (by default) the entire audience."""
    from marketing_cli.services import sms_campaigns

    created = sms_campaigns.create_campaign(conn, workspace_id, {"name": name})
    body: dict[str, Any] = {"audience": audience or [{"type": "ENTIRE_AUDIENCE"}]}
    if message is not None:
        body["message"] = message
    return sms_campaigns.update_campaign(conn, workspace_id, created["id"], body)


# --- Twilio stand-in (the twilio branch) ---------------------------------------------------

TWILIO_SID = "AC" + "0123456789abcdef" * 2
TWILIO_TOKEN = "s3cr3t-auth-token-0123456789"


class TwilioStandIn:
    """A local HTTP server that speaks Twilio's Messages API (a stand-in for https://api.twilio.com):
    `POST /2010-04-01/Accounts/{SID}/Messages.json`, basic auth, form fields; answers 201 with Twilio's
    message JSON (sid, status "queued", ...) or an error JSON {code, message, more_info, status}.
    `script` maps a recipient number to a list of (status, error code) answers, used in turn
    (the last one repeats); every request is kept in `received`."""

    def __init__(self, script: dict[str, list[tuple[int, int | None]]] | None = None) -> None:
        import itertools
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.script = {k: list(v) for k, v in (script or {}).items()}
        self.received: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._counter = itertools.count(1)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
                import base64
                import json
                from urllib.parse import parse_qs

                length = int(self.headers.get("Content-Length") or 0)
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode(), keep_blank_values=True).items()}
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
        from marketing_cli.services import sms_providers

        sms_providers.close_clients()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
