"""Merge tags usable in templates: `{{contact.<merge_tag>}}` for every field of the
workspace (read live, so a new field shows at once), workspace values, action URLs and
system values."""

from __future__ import annotations

import sqlite3
from typing import Any

WORKSPACE_TAGS = (("{{workspace.name}}", "Workspace name"),)
ACTION_TAGS = (
    ("{{unsubscribe_url}}", "Unsubscribe link"),
    ("{{view_online_url}}", "View online link"),
    ("{{preferences_url}}", "Manage preferences link"),
)
SYSTEM_TAGS = (
    ("{{preview_text}}", "Preview text"),
    ("{{server_time}}", "Server time (UTC)"),
    ("{{current_date}}", "Current date (UTC)"),
)


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
