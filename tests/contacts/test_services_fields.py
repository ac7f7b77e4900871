"""Field definitions: every rule of POST /v1/fields and PATCH /v1/fields/:id."""

from __future__ import annotations

from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.contacts import fields
from marketing_cli.services.contacts.fields import FieldValidationError
from marketing_cli.storage import field_sql
from marketing_cli.storage.db import is_postgresql
from tests.engines import query_plan


def create(conn: Any, ws: int, **body: Any) -> dict[str, Any]:
    return fields.create_field(conn, ws, {"label": "City", "merge_tag": "city", "type": "TEXT", **body})


def field_count(conn: Any) -> int:
    return conn.execute("SELECT count(*) FROM fields").fetchone()[0]


def test_create_returns_view_and_index(conn, workspace) -> None:
    f = create(conn, workspace["id"], default_value="Paris", required=True)
    assert f == {"id": f["id"], "label": "City", "merge_tag": "city", "type": "TEXT", "definition": None,
                 "default_value": "Paris", "order": 4, "immutable": False, "required": True,
                 "default_region": None}
    index = index_sql(conn, f"contacts_field_{f['id']}")
    expr = field_sql.typed_value_expr(conn, f["id"], "TEXT")  # json_extract(data, '$."7"') on SQLite
    assert index is not None and expr.rstrip(")") in index  # (PostgreSQL writes the key '7'::text)
    plan = query_plan(conn, f"SELECT id FROM contacts WHERE workspace_id = 1 AND {expr} = 'Paris'")
    assert f"contacts_field_{f['id']}" in plan


def test_list_in_order(conn, workspace) -> None:
    create(conn, workspace["id"])
    tags = [f["merge_tag"] for f in fields.list_fields(conn, workspace["id"])]
    assert tags == ["email_address", "first_name", "last_name", "city"]


def test_dropdown_definition(conn, workspace) -> None:
    f = create(conn, workspace["id"], type="DROPDOWN_SINGLE", definition=" Free,Pro ")
    assert f["definition"] == "Free,Pro"
    text = create(conn, workspace["id"], label="Notes", merge_tag="notes", definition="a,b")
    assert text["definition"] is None  # only dropdowns keep a definition


@pytest.mark.parametrize("body,detail", [
    ({"label": ""}, "label"),
    ({"label": "   "}, "label"),
    ({"label": "x" * 33}, "label"),
    ({"label": None}, "label"),
    ({"merge_tag": "c"}, "merge_tag"),
    ({"merge_tag": "City"}, "merge_tag"),
    ({"merge_tag": "city1"}, "merge_tag"),
    ({"merge_tag": "a" * 17}, "merge_tag"),
    ({"merge_tag": None}, "merge_tag"),
    ({"type": None}, "type"),
    ({"type": "STRING"}, "type"),
    ({"type": "DROPDOWN_SINGLE"}, "definition"),
    ({"type": "DROPDOWN_MULTIPLE", "definition": "a, a ,"}, "definition"),
    ({"label": "Email address", "merge_tag": "email_two"}, "label"),
    ({"label": "FIRST NAME", "merge_tag": "fname"}, "label"),
    ({"merge_tag": "first_name"}, "merge_tag"),
    ({"merge_tag": "email_address"}, "merge_tag"),
    ({"immutable": True}, "Immutable"),
    ({"type": "NUMBER", "default_value": "abc"}, "default_value"),
    ({"type": "DROPDOWN_SINGLE", "definition": "a,b", "default_value": "c"}, "default_value"),
    ({"default_region": "ZZ"}, "default_region"),
    ({"default_region": "AQ"}, "default_region"),
    ({"merge_tag": "phone_number", "type": "NUMBER"}, "TEXT"),
])
def test_create_validation_errors(conn, workspace, body: dict, detail: str) -> None:
    before = field_count(conn)
    with pytest.raises(FieldValidationError) as info:
        create(conn, workspace["id"], **body)
    assert (info.value.status, info.value.message) == (400, "Validation error")
    assert detail in info.value.detail
    assert field_count(conn) == before


def test_body_not_object_is_validation_error(conn, workspace) -> None:
    with pytest.raises(FieldValidationError):
        fields.create_field(conn, workspace["id"], ["label"])


def test_wrong_json_type_names_member(conn, workspace) -> None:
    with pytest.raises(MktError, match="The member 'required' must be a boolean."):
        create(conn, workspace["id"], required="yes")


def test_default_region_upper_cased(conn, workspace) -> None:
    f = create(conn, workspace["id"], label="Phone", merge_tag="phone_number", default_region="gb")
    assert f["default_region"] == "GB"
    # phone numbers live in contacts.phone: no expression index for this field
    assert index_sql(conn, f"contacts_field_{f['id']}") is None


def lock(conn: Any, ws: int, expires_at: str) -> None:
    conn.execute("INSERT INTO contact_io_locks VALUES (?, 'import', 'test', ?, ?) ON CONFLICT (workspace_id)"
                 " DO UPDATE SET started_at = excluded.started_at, expires_at = excluded.expires_at",
                 (ws, clock.now(), expires_at))


def index_sql(conn: Any, name: str) -> str | None:
    """The index's definition (None when there is no such index)."""
    sql = ("SELECT indexdef FROM pg_indexes WHERE indexname = ?" if is_postgresql(conn)
           else "SELECT sql FROM sqlite_master WHERE name = ?")
    row = conn.execute(sql, (name,)).fetchone()
    return row[0] if row is not None else None


def test_import_in_progress_blocks_create_and_update(conn, workspace) -> None:
    ws = workspace["id"]
    f = create(conn, ws)
    lock(conn, ws, "2999-01-01T00:00:00.000Z")
    for call in (lambda: create(conn, ws, label="Zip", merge_tag="zip"),
                 lambda: fields.update_field(conn, ws, f["id"], {"label": "Town", "merge_tag": "city",
                                                                 "type": "TEXT"})):
        with pytest.raises(FieldValidationError) as info:
            call()
        assert info.value.message == "Validation error"
        assert info.value.detail == "An import or export is currently in progress."
    lock(conn, ws, "2000-01-01T00:00:00.000Z")  # a lapsed lock no longer blocks
    assert create(conn, ws, label="Zip", merge_tag="zip")["merge_tag"] == "zip"


def test_update(conn, workspace) -> None:
    ws = workspace["id"]
    f = create(conn, ws, default_value="Paris", required=True)
    updated = fields.update_field(conn, ws, f["id"], {"label": "Town", "merge_tag": "town", "type": "TEXT"})
    assert updated == {**f, "label": "Town", "merge_tag": "town"}  # optional members kept
    cleared = fields.update_field(conn, ws, f["id"], {"label": "Town", "merge_tag": "town", "type": "TEXT",
                                                      "default_value": None, "required": False})
    assert cleared["default_value"] is None and cleared["required"] is False
    same = fields.update_field(conn, ws, f["id"], {"label": "Town", "merge_tag": "town", "type": "TEXT"})
    assert same == cleared


def test_update_messages(conn, workspace) -> None:
    ws = workspace["id"]
    f = create(conn, ws)
    email_id = next(x["id"] for x in fields.list_fields(conn, ws) if x["merge_tag"] == "email_address")
    body = {"label": "City", "merge_tag": "city", "type": "TEXT"}
    with pytest.raises(MktError) as info:
        fields.update_field(conn, ws, 9999, body)
    assert (info.value.status, info.value.message) == (404, "We were unable to find the field.")
    with pytest.raises(MktError) as info:
        fields.update_field(conn, ws, email_id, {"label": "Mail", "merge_tag": "email_address", "type": "TEXT"})
    assert (info.value.status, info.value.message) == (400, "This field is immutable and cannot be updated.")
    with pytest.raises(MktError) as info:
        fields.update_field(conn, ws, f["id"], {**body, "type": "NUMBER"})
    assert (info.value.status, info.value.message) == (400, "The type of the field cannot be changed.")
    for bad in ({**body, "type": None}, {**body, "label": ""}, {**body, "merge_tag": "first_name"}):
        with pytest.raises(FieldValidationError):
            fields.update_field(conn, ws, f["id"], bad)


def test_update_other_workspace_is_not_found(conn, workspace) -> None:
    from marketing_cli.services.account import workspaces

    other = workspaces.create_workspace(conn, "Other")["workspace"]["id"]
    f = create(conn, other)
    with pytest.raises(MktError, match="We were unable to find the field."):
        fields.update_field(conn, workspace["id"], f["id"], {"label": "X", "merge_tag": "xx", "type": "TEXT"})


def test_update_dropdown_needs_definition(conn, workspace) -> None:
    ws = workspace["id"]
    f = create(conn, ws, type="DROPDOWN_MULTIPLE", definition="a,b")
    body = {"label": "City", "merge_tag": "city", "type": "DROPDOWN_MULTIPLE"}
    with pytest.raises(FieldValidationError):
        fields.update_field(conn, ws, f["id"], body)
    assert fields.update_field(conn, ws, f["id"], {**body, "definition": "a,b,c"})["definition"] == "a,b,c"


def test_phone_number_tag_cannot_move(conn, workspace) -> None:
    ws = workspace["id"]
    phone = create(conn, ws, label="Phone", merge_tag="phone_number")
    city = create(conn, ws)
    with pytest.raises(FieldValidationError):
        fields.update_field(conn, ws, phone["id"], {"label": "Phone", "merge_tag": "mobile", "type": "TEXT"})
    with pytest.raises(FieldValidationError):
        fields.update_field(conn, ws, city["id"], {"label": "City", "merge_tag": "phone_number", "type": "TEXT"})


@pytest.mark.postgresql_only  # SQLite types a value by json_extract itself
def test_typed_values_answer_as_the_two_parse_forms(conn) -> None:
    """schema step 28's one-parse mkt_field_text / mkt_field_number give step 20's answers for
    every JSON value and document shape (the indexes built on them stay valid)."""
    import json

    values: list[Any] = ["Ann", "", "O'Hara \"q\" \\ é 😀", "line\nbreak", "12", 0, 7, -2.5, 5.50, 1e-07, 1e20,
                         -0.0, 12345.678, True, False, None, [1, "a"], {"x": {"y": 1}}]
    docs = [json.dumps({"7": v}, ensure_ascii=ascii) for v in values for ascii in (True, False)]
    docs += [json.dumps({"8": "x"}), "{}", '[{"7": "x"}]', '"7"', "7", "null", '{"7": 1e3}', '{"7": 5.50}', None]
    for doc in docs:
        got = conn.execute(
            "SELECT mkt_field_text(?, '7'), CASE WHEN jsonb_typeof(?::jsonb -> '7') = 'string'"
            " THEN ?::jsonb ->> '7' END, mkt_field_number(?, '7')::text, CASE WHEN jsonb_typeof(?::jsonb -> '7')"
            " = 'number' THEN (?::jsonb ->> '7')::numeric END::text", (doc,) * 6).fetchone()
        assert (got[0], got[2]) == (got[1], got[3]), doc
