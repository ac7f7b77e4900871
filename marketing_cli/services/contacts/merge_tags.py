"""A workspace's merge tags: the list GET /v1/merge-tags shows, the names a template may
use, and the `Renderer` that turns a contact row into one recipient's values.

The language itself (the `{{...}}` syntax, fallbacks, escaping, safe URLs) is
kernel/merge.py, shared by every channel; this module adds what a workspace defines:
`{{contact.<merge_tag>}}` for every field (read live, so a new field shows at once),
workspace values, action URLs and system values.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

from marketing_cli.kernel import clock
from marketing_cli.kernel.merge import (
    ACTION_NAMES,
    ACTION_TAGS,
    STATIC_NAMES,
    SYSTEM_TAGS,
    TAG,
    WORKSPACE_TAGS,
    format_value,
)
from marketing_cli.kernel.merge_contexts import Values
from marketing_cli.services.contacts.values import EMAIL_TAG, PHONE_TAG, FieldMap, load_fields, normalize_value


def list_merge_tags(conn: sqlite3.Connection, workspace_id: int) -> list[dict[str, Any]]:
    tags = [
        {"tag": f"{{{{contact.{row['merge_tag']}}}}}", "label": row["label"], "category": "contact"}
        for row in conn.execute(
            'SELECT merge_tag, label FROM fields WHERE workspace_id = ? ORDER BY "order", id', (workspace_id,)
        )
    ]
    for category, entries in (("workspace", WORKSPACE_TAGS), ("actions", ACTION_TAGS), ("system", SYSTEM_TAGS)):
        tags.extend({"tag": tag, "label": label, "category": category} for tag, label in entries)
    return tags


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


