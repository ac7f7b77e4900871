"""services/contacts/references.py: a tag by name or id, a contact by id, email or phone, as typed."""

from __future__ import annotations

from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.services.contacts import fields, records, references, tags


@pytest.fixture
def ws(conn: Any, workspace: dict[str, Any]) -> int:
    wid = workspace["id"]
    fields.create_field(conn, wid, {"label": "Phone", "merge_tag": "phone_number", "type": "TEXT",
                                    "default_region": "US"})
    return wid


def fail(call: Any) -> tuple[int, str]:
    with pytest.raises(MktError) as err:
        call()
    return err.value.status, err.value.message


def test_tags_by_name_in_any_case_or_by_id(conn: Any, ws: int) -> None:
    vip = tags.create_tag(conn, ws, {"name": "VIP"})["id"]
    year = tags.create_tag(conn, ws, {"name": "2024"})["id"]
    assert references.tag_ids(conn, ws, ["vip", str(vip), " Vip ", "2024"]) == [vip, vip, vip, year]
    assert references.tag_ids(conn, ws, []) == []
    # a number that is neither an id nor a name goes on as an id: the service says it does not exist
    assert references.tag_ids(conn, ws, ["999"]) == [999]
    assert fail(lambda: references.tag_ids(conn, ws, ["vip", "vipp"])) == (
        400, "There is no tag named 'vipp' in this workspace (`mkt tags list` shows them).")


def test_an_id_wins_over_a_name_that_is_a_number(conn: Any, ws: int) -> None:
    first = tags.create_tag(conn, ws, {"name": "first"})["id"]
    tags.create_tag(conn, ws, {"name": str(first)})
    assert references.tag_ids(conn, ws, [str(first)]) == [first]


def test_another_workspace_tags_are_not_found(conn: Any, ws: int, workspace: dict[str, Any]) -> None:
    from marketing_cli.services.account import workspaces

    other = workspaces.create_workspace(conn, "Other shop")["workspace"]["id"]
    tags.create_tag(conn, other, {"name": "theirs"})
    assert fail(lambda: references.tag_ids(conn, ws, ["theirs"]))[0] == 400


def test_contacts_by_id_email_or_phone(conn: Any, ws: int) -> None:
    ann = records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "phone_number": "+14155552671"})
    assert references.contact_id(conn, ws, ann["id"]) == ann["id"]
    assert references.contact_id(conn, ws, ann["id"].upper()) == ann["id"]
    assert references.contact_id(conn, ws, "Ann@Example.COM") == ann["id"]
    assert references.contact_id(conn, ws, "(415) 555-2671") == ann["id"]  # the field's default region: US
    assert references.contact_id(conn, ws, "+1 415 555 2671") == ann["id"]
    assert references.contact_id(conn, ws, "f" * 24) == "f" * 24  # the service says whether it exists
    assert fail(lambda: references.contact_id(conn, ws, "bob@example.com")) == (
        404, "We couldn't find a contact with the email address bob@example.com.")
    assert fail(lambda: references.contact_id(conn, ws, "+14155552672")) == (
        404, "We couldn't find a contact with the phone number +14155552672.")
    for text in ("ann", "12", "bad@", ""):
        assert fail(lambda text=text: references.contact_id(conn, ws, text)) == (
            400, f"'{text}' is not a contact: give its id (24 hex characters), email address or phone number.")
