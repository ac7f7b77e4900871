"""Templates: POST /v1/templates, GET /v1/templates, GET /v1/templates/:id and `mkt templates`.

A template is an editor document (`type` EDITOR, `body_json`) or coded HTML (`type` CODE,
`body_html`) imported from a file (`html`), a ZIP archive (`zip`, services/email/template_zip.py)
or a web page (`url`, services/email/template_url.py). The HTML is stored as uploaded: it is
cleaned (services/email/html_clean.py) when it becomes a campaign variant's HTML, which is when
it can reach a recipient. docs/templates.md has the record, the formats and the limits.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import sqlite3
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.ids import parse_int_id
from marketing_cli.kernel.inputs import member, require_object, required_text
from marketing_cli.kernel.merge_fallbacks import check_fallbacks
from marketing_cli.services.email import template_url, template_zip
from marketing_cli.storage import dialect
from marketing_cli.storage.db import transaction

INVALID_BODY = "Invalid request body."
NAME_REQUIRED = "Please provide a name for this template."
NAME_LENGTH = "Template name must not exceed 255 characters."
INVALID_TYPE = "You must provide a valid template type. Must be 'editor' or 'code'."
FORMAT_REQUIRED = "The import format is required for coded templates. Must be 'html', 'zip', or 'url'."
INVALID_FORMAT = "Please provide a valid import format. Must be 'html', 'zip', or 'url'."
CONTENT_REQUIRED = "Please provide the content_base64 field for HTML and ZIP coded templates."
INVALID_BASE64 = "We were unable to decode the base64 content."
URL_REQUIRED = "The url field is required for URL-based coded templates."
INVALID_URL = template_url.BAD_SCHEME
STORAGE_FAILED = "We had an internal issue while processing your template."
NOT_FOUND = "We could not find the template you are looking for."
EMPTY_HTML = "The template HTML is empty."
NO_HTML = "Template {id} is an editor template: it has no HTML."
NO_ASSET = "The template has no file named '{path}'."
BODY_JSON_TOO_LARGE = "The member 'body_json' is larger than 5 MiB."

MAX_NAME = 255
MAX_BODY_BYTES = 16 * 1024 * 1024  # POST /v1/templates: a 10 MiB archive in base64 fits
FORMATS = ("html", "zip", "url")
_WHITESPACE = re.compile(rb"[\t\n\r ]+")


# --- reading ----------------------------------------------------------------------------------

def template_view(row: sqlite3.Row, assets: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "name": row["name"],
        "type": row["type"],
        "import_format": row["import_format"],
        "body_json": json.loads(row["body_json"]) if row["body_json"] is not None else None,
        "body_html": row["body_html"],
        "entry_file": row["entry_file"],
        "source_url": row["source_url"],
        "size": row["size"],
        "assets": assets,
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }


def summary_view(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "name": row["name"],
        "type": row["type"],
        "import_format": row["import_format"],
        "size": row["size"],
        "asset_count": row["asset_count"],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }


def list_templates(conn: sqlite3.Connection, workspace_id: int) -> list[dict[str, Any]]:
    """GET /v1/templates: every template of the workspace, oldest first, without its content."""
    rows = conn.execute(
        "SELECT t.id, t.name, t.type, t.import_format, t.size, t.created_at, t.updated_at, "
        "(SELECT COUNT(*) FROM template_assets a WHERE a.template_id = t.id) AS asset_count "
        "FROM templates t WHERE t.workspace_id = ? ORDER BY t.id", (workspace_id,))
    return [summary_view(r) for r in rows]


def _row(conn: sqlite3.Connection, workspace_id: int, template_id: Any) -> sqlite3.Row:
    template_id = parse_int_id(template_id, NOT_FOUND, 404)
    row = conn.execute("SELECT * FROM templates WHERE id = ? AND workspace_id = ?",
                       (template_id, workspace_id)).fetchone()
    if row is None:
        raise MktError(404, NOT_FOUND)
    return row


def _assets(conn: sqlite3.Connection, template_id: int) -> list[dict[str, Any]]:
    return [{"path": r["path"], "content_type": r["content_type"], "size": r["size"]} for r in conn.execute(
        "SELECT path, content_type, size FROM template_assets WHERE template_id = ?"
        f" ORDER BY {dialect.in_byte_order(conn, 'path')}", (template_id,))]


def get_template(conn: sqlite3.Connection, workspace_id: int, template_id: Any) -> dict[str, Any]:
    """GET /v1/templates/:id: the whole record, content included (asset bytes excepted)."""
    row = _row(conn, workspace_id, template_id)
    return template_view(row, _assets(conn, row["id"]))


def template_html(conn: sqlite3.Connection, workspace_id: int, template_id: Any) -> str:
    """The HTML of a CODE template, as uploaded (for a campaign variant, which cleans it).
    404 when the workspace has no such template; 400 for an editor template."""
    row = _row(conn, workspace_id, template_id)
    if row["body_html"] is None:
        raise MktError(400, NO_HTML.format(id=row["id"]))
    return row["body_html"]


def template_asset(conn: sqlite3.Connection, workspace_id: int, template_id: Any, path: str) -> tuple[str, bytes]:
    """(content type, bytes) of one file kept from a ZIP import; 404 when missing."""
    row = _row(conn, workspace_id, template_id)
    asset = conn.execute("SELECT content_type, content FROM template_assets WHERE template_id = ? AND path = ?",
                         (row["id"], path)).fetchone()
    if asset is None:
        raise MktError(404, NO_ASSET.format(path=path[:200]))
    return asset["content_type"], bytes(asset["content"])


# --- creating ---------------------------------------------------------------------------------

def _name(body: dict[str, Any]) -> str:
    return required_text(body.get("name"), "name", missing=NAME_REQUIRED, too_long=NAME_LENGTH, max_length=MAX_NAME)


def _choice(body: dict[str, Any], key: str, choices: tuple[str, ...], invalid: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or value.strip().lower() not in choices:
        raise MktError(400, invalid)
    return value.strip().lower()


def decode_base64(value: Any) -> bytes:
    """Strict base64 (the standard alphabet, padded); line breaks and spaces are ignored."""
    if not isinstance(value, str) or not value.isascii():
        raise MktError(400, INVALID_BASE64)
    try:
        return base64.b64decode(_WHITESPACE.sub(b"", value.encode("ascii")), validate=True)
    except (binascii.Error, ValueError):
        raise MktError(400, INVALID_BASE64) from None


def _content(body: dict[str, Any]) -> bytes:
    value = body.get("content_base64")
    if value is None or value == "":
        raise MktError(400, CONTENT_REQUIRED)
    return decode_base64(value)


def _html_record(html: str) -> dict[str, Any]:
    if not html.strip():
        raise MktError(400, EMPTY_HTML)
    check_fallbacks(html)  # a fallback that would not stand where it is written: 400 now, not at send
    return {"body_html": html, "size": len(html.encode("utf-8"))}


def _code_record(body: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str, bytes]]]:
    if body.get("import_format") is None:
        raise MktError(400, FORMAT_REQUIRED)
    fmt = _choice(body, "import_format", FORMATS, INVALID_FORMAT)
    record: dict[str, Any] = {"type": "CODE", "import_format": fmt}
    if fmt == "html":
        record |= _html_record(template_zip.decode_html(_content(body)))
        return record, []
    if fmt == "zip":
        imported = template_zip.read_zip_template(_content(body))
        record |= _html_record(imported.html) | {"entry_file": imported.entry_file}
        return record, imported.assets
    url = body.get("url")
    if url is None or url == "":
        raise MktError(400, URL_REQUIRED)
    if not isinstance(url, str) or not template_url.has_http_scheme(url.strip()):
        raise MktError(400, INVALID_URL)
    fetched = template_url.fetch_html(url.strip())
    record |= _html_record(fetched.html) | {"source_url": fetched.url}
    return record, []


def _editor_record(body: dict[str, Any]) -> dict[str, Any]:
    document = member(body, "body_json", dict)
    text = json.dumps(document if document is not None else {}, ensure_ascii=False, separators=(",", ":"))
    size = len(text.encode("utf-8"))
    if size > template_zip.MAX_HTML_BYTES:
        raise MktError(400, BODY_JSON_TOO_LARGE)
    return {"type": "EDITOR", "import_format": None, "body_json": text, "size": size}


def create_template(conn: sqlite3.Connection, workspace_id: int, body: Any) -> dict[str, Any]:
    """POST /v1/templates: checks the body in the specification's order, imports the content
    (a URL is fetched before any write), then stores the template and its assets at once."""
    body = require_object(body, INVALID_BODY)
    name = _name(body)
    kind = _choice(body, "type", ("editor", "code"), INVALID_TYPE)
    assets: list[tuple[str, str, bytes]] = []
    if kind == "editor":
        if body.get("import_format") is not None:  # given, it must be valid, though an editor template has none
            _choice(body, "import_format", FORMATS, INVALID_FORMAT)
        record = _editor_record(body)
    else:
        record, assets = _code_record(body)
    return store_template(conn, workspace_id, name, record, assets)


def store_template(conn: sqlite3.Connection, workspace_id: int, name: str, record: dict[str, Any],
                   assets: list[tuple[str, str, bytes]]) -> dict[str, Any]:
    """One transaction; any storage failure is the specification's 500 and writes nothing."""
    now = clock.now()
    try:
        with transaction(conn):
            template_id = conn.execute(
                "INSERT INTO templates (workspace_id, name, type, import_format, body_json, body_html, entry_file, "
                "source_url, size, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (workspace_id, name, record["type"], record.get("import_format"), record.get("body_json"),
                 record.get("body_html"), record.get("entry_file"), record.get("source_url"), record["size"],
                 now, now)).lastrowid
            conn.executemany(
                "INSERT INTO template_assets (template_id, path, content_type, size, content) VALUES (?, ?, ?, ?, ?)",
                [(template_id, path, kind, len(data), data) for path, kind, data in assets])
            return get_template(conn, workspace_id, template_id)
    except sqlite3.Error as exc:
        raise MktError(500, STORAGE_FAILED, detail=str(exc)) from exc
