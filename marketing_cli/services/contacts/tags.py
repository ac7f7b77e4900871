"""Tags: GET/POST /v1/tags and `mkt tags` (extension endpoints, CONTRACT section 5).

A tag is {id, name}; names are unique in a workspace regardless of letter case.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.inputs import require_object, required_text
from marketing_cli.storage.db import transaction

INVALID_BODY = "Invalid request body."
NAME_REQUIRED = "Please provide a name for the tag."
NAME_LENGTH = "Tag name must be 100 characters or less."
DUPLICATE = "A tag named '{name}' already exists in this workspace."
UNKNOWN_TAG = "Tag ID {id} does not exist in this workspace"
MAX_NAME = 100


def tag_view(row: sqlite3.Row) -> dict[str, Any]:
    return {"id": row["id"], "name": row["name"]}


def list_tags(conn: sqlite3.Connection, workspace_id: int) -> list[dict[str, Any]]:
    return [tag_view(r) for r in conn.execute("SELECT id, name FROM tags WHERE workspace_id = ? ORDER BY id",
                                              (workspace_id,))]


def create_tag(conn: sqlite3.Connection, workspace_id: int, body: Any) -> dict[str, Any]:
    """POST /v1/tags {"name": ...}: a new tag."""
    body = require_object(body, INVALID_BODY)
    name = required_text(body.get("name"), "name", missing=NAME_REQUIRED, too_long=NAME_LENGTH, max_length=MAX_NAME)
    with transaction(conn):
        clash = conn.execute("SELECT name FROM tags WHERE workspace_id = ? AND lower(name) = lower(?)",
                             (workspace_id, name)).fetchone()
        if clash is not None:
            raise MktError(400, DUPLICATE.format(name=clash["name"]))
        tag_id = conn.execute("INSERT INTO tags (workspace_id, name, created_at) VALUES (?, ?, ?)",
                              (workspace_id, name, clock.now())).lastrowid
    return {"id": tag_id, "name": name}


def tags_by_id(conn: sqlite3.Connection, workspace_id: int, tag_ids: list[int]) -> dict[int, str]:
    """{id: name} for the given ids; 400 naming the first id the workspace does not have."""
    if not tag_ids:
        return {}
    # The ids as BIGINT (json_each's values are text on PostgreSQL); a larger id cannot exist.
    storable = [t for t in tag_ids if -(2**63) <= t < 2**63]
    found = {r["id"]: r["name"] for r in conn.execute(
        "SELECT id, name FROM tags WHERE workspace_id = ? AND id IN (SELECT CAST(value AS BIGINT) FROM json_each(?))",
        (workspace_id, json.dumps(storable)))}
    for tag_id in tag_ids:
        if tag_id not in found:
            raise MktError(400, UNKNOWN_TAG.format(id=tag_id))
    return found
