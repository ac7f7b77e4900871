"""The one merge-tag renderer: compile a template once, render it per recipient.

Syntax (docs/campaigns.md):

    {{contact.<merge_tag>}}        a contact field's value (field default when the contact has none)
    {{workspace.name}}             workspace values
    {{unsubscribe_url}} ...        action URLs (per recipient; the caller supplies them)
    {{preview_text}} {{server_time}} {{current_date}}   system values
    {{contact.first_name|there}}   fallback: written when the value is empty

Spaces inside the braces are allowed (`{{ contact.city | Paris }}`). A tag whose value is
empty (and that has no fallback) renders as nothing. A tag the workspace does not define
is left exactly as written, so a mistake shows in a test email, and `find_unknown_tags`
reports it when HTML is set.

Values inserted into HTML are HTML-escaped; values inserted into plain text or a subject
are not. A fallback is part of the template's own source, so it is written as is. A tag
that begins a URL attribute (`href="{{contact.website}}"`, src, action, background...)
renders its value only when it is an http(s), mailto or tel URL (or a URL of ours, such
as `{{unsubscribe_url}}`): a contact's value can never put a `javascript:` link into a
message; anything else renders as the fallback.

Speed: `compile_template` splits the text ONCE into literal and tag parts; `render` then
only joins strings with dict lookups (no regular expression per recipient). A `Values`
object holds one recipient's values and escapes them for HTML at most once, however many
templates (subject, HTML) are rendered with it. Tag names are matched against the
workspace's own definitions and looked up in dicts: they never reach SQL.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable, Mapping
from html import escape
from typing import Any

from marketing_cli import clock
from marketing_cli.services.merge_tags import ACTION_TAGS, SYSTEM_TAGS, WORKSPACE_TAGS
from marketing_cli.services.values import EMAIL_TAG, PHONE_TAG, FieldMap, load_fields, normalize_value

# {{ name }} or {{ name | fallback }}; a fallback holds no braces.
TAG = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.]*)\s*(?:\|([^{}]*))?\}\}")

STATIC_NAMES = tuple(tag.strip("{}") for tag, _ in (*WORKSPACE_TAGS, *ACTION_TAGS, *SYSTEM_TAGS))
ACTION_NAMES = tuple(tag.strip("{}") for tag, _ in ACTION_TAGS)


class Values:
    """One recipient's tag values (name without braces -> text), plain and HTML-escaped."""

    __slots__ = ("text", "_html")

    def __init__(self, text: Mapping[str, str]) -> None:
        self.text = dict(text)
        self._html: dict[str, str] | None = None

    @property
    def html(self) -> dict[str, str]:
        if self._html is None:
            self._html = {name: escape(value, quote=True) for name, value in self.text.items()}
        return self._html


_URL_ATTRIBUTE = re.compile(r"""\b(?:href|src|action|formaction|background|poster|cite|srcset)\s*=\s*["']?\s*$""",
                            re.IGNORECASE)
_SAFE_SCHEMES = ("http://", "https://", "mailto:", "tel:")
_INVISIBLE = re.compile(r"[\x00-\x20\x7f]+")


def safe_url(value: str) -> bool:
    """Whether a value may start a URL attribute: http(s), mailto or tel (case, blanks and
    control characters ignored, as browsers ignore them)."""
    return _INVISIBLE.sub("", value).lower().startswith(_SAFE_SCHEMES)


class Template:
    """A text split into literal parts (str) and tag parts ((name, fallback, as_written, url))."""

    __slots__ = ("parts", "html", "names")

    def __init__(self, text: str, *, html: bool) -> None:
        self.html = html
        parts: list[Any] = []
        names: dict[str, None] = {}
        position = 0
        for match in TAG.finditer(text):
            if match.start() > position:
                parts.append(text[position:match.start()])
            name, fallback = match.group(1), match.group(2)
            url = html and _URL_ATTRIBUTE.search(text, max(0, match.start() - 40), match.start()) is not None
            parts.append((name, "" if fallback is None else fallback.strip(), match.group(0), url))
            names.setdefault(name, None)
            position = match.end()
        if position < len(text):
            parts.append(text[position:])
        self.parts = tuple(parts)
        self.names = tuple(names)

    def render(self, values: Values) -> str:
        source = values.html if self.html else values.text
        out = []
        for part in self.parts:
            if part.__class__ is str:
                out.append(part)
                continue
            name, fallback, written, url = part
            value = source.get(name)
            if value is None:
                out.append(written)  # not a tag of this workspace: left as written
            elif url and value and not safe_url(values.text[name]):
                out.append(fallback)  # a value that would make the link active content
            else:
                out.append(value or fallback)
        return "".join(out)


def compile_template(text: str, *, html: bool = False) -> Template:
    return Template(text or "", html=html)


# --- the workspace's tags and their values -------------------------------------------------

def known_tag_names(conn: sqlite3.Connection, workspace_id: int, fields: FieldMap | None = None) -> set[str]:
    """Every tag name GET /v1/merge-tags lists for the workspace, without braces."""
    fields = fields if fields is not None else load_fields(conn, workspace_id)
    return {f"contact.{tag}" for tag in fields.by_tag} | set(STATIC_NAMES)


def find_unknown_tags(conn: sqlite3.Connection, workspace_id: int, text: str) -> list[str]:
    """The tags of `text` the workspace does not define, as written (`{{contact.nickname}}`), in order."""
    known = known_tag_names(conn, workspace_id)
    unknown: dict[str, None] = {}
    for match in TAG.finditer(text or ""):
        if match.group(1) not in known:
            unknown.setdefault("{{" + match.group(1) + "}}", None)
    return list(unknown)


def format_value(value: Any) -> str:
    """A stored field value as text: lists joined with ", ", booleans true/false, None empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ", ".join(format_value(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _default(field: Any) -> str:
    if field.default_value is None or field.merge_tag in (EMAIL_TAG, PHONE_TAG):
        return ""
    try:
        return format_value(normalize_value(field, field.default_value))
    except ValueError:  # the definition changed since the default was set
        return ""


class Renderer:
    """A workspace's tag values, loaded once, and the per-recipient `Values` built from them.

    `Renderer(conn, ws)` reads the fields and the workspace name; `values_for(contact_row,
    actions=...)` is then pure Python per recipient (the sender calls it 100k times).
    """

    def __init__(self, conn: sqlite3.Connection, workspace_id: int, *, preview_text: str = "",
                 now: str | None = None) -> None:
        self.fields = load_fields(conn, workspace_id)
        row = conn.execute("SELECT name FROM workspaces WHERE id = ?", (workspace_id,)).fetchone()
        stamp = now or clock.now()
        self.shared = {
            "workspace.name": row["name"] if row is not None else "",
            "preview_text": preview_text or "",
            "server_time": stamp,
            "current_date": stamp[:10],
            **{name: "" for name in ACTION_NAMES},
        }
        self.defaults = {f"contact.{f.merge_tag}": _default(f) for f in self.fields.by_tag.values()}
        self._by_id = [(str(f.id), f"contact.{f.merge_tag}") for f in self.fields.by_tag.values()
                       if f.merge_tag not in (EMAIL_TAG, PHONE_TAG)]

    def values_for(self, contact: Mapping[str, Any] | None = None, *, actions: Mapping[str, str] | None = None,
                   extra: Mapping[str, str] | None = None) -> Values:
        """The values for one recipient: a `contacts` row (email, phone, data) or None (defaults only)."""
        values = {**self.shared, **self.defaults}
        if contact is not None:
            raw = contact["data"]
            stored = json.loads(raw) if raw and raw != "{}" else {}
            for key, name in self._by_id:
                value = format_value(stored.get(key))
                if value:
                    values[name] = value
            if f"contact.{EMAIL_TAG}" in values:
                values[f"contact.{EMAIL_TAG}"] = contact["email"] or ""
            if f"contact.{PHONE_TAG}" in values:
                values[f"contact.{PHONE_TAG}"] = contact["phone"] or ""
        if actions:
            values.update({name: actions.get(name, "") for name in ACTION_NAMES})
        if extra:
            values.update(extra)
        return Values(values)


def render_all(templates: Iterable[Template], values: Values) -> list[str]:
    return [t.render(values) for t in templates]
