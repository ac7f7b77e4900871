"""`mkt contacts create/upsert/get/by-phone/tag/untag`: --json equals the API's data."""

from __future__ import annotations

import json


def test_create_get_tag_untag(cli_json, cli, client, auth, workspace) -> None:
    tag = cli_json("tags", "create", "VIP")
    created = cli_json("contacts", "create", "--field", "email_address=Ann@Example.com", "-f", "first_name=Ann",
                       "--status", "UNCONFIRMED", "--tag", str(tag["id"]))
    assert created["data"]["email_address"] == "ann@example.com" and created["tags"] == [tag]
    got = cli_json("contacts", "get", created["id"])
    assert got == client.get(f"/v1/contacts/{created['id']}", headers=auth).json()["data"]
    assert cli_json("contacts", "untag", created["id"], str(tag["id"]))["tags"] == []
    tagged = cli_json("contacts", "tag", created["id"], str(tag["id"]))
    assert tagged["tags"] == [tag]
    api = client.get(f"/v1/contacts/{created['id']}", headers=auth).json()["data"]
    assert tagged == {k: v for k, v in api.items() if k not in ("last_opened_at", "last_clicked_at")}


def test_upsert_options_and_body(cli_json, cli, workspace) -> None:
    cli_json("fields", "create", "--label", "Phone", "--merge-tag", "phone_number", "--type", "TEXT",
             "--default-region", "US")
    first = cli_json("contacts", "upsert", "--email", "ann@example.com", "--phone", "(415) 555-2671",
                     "--field", "last_name=Lee")
    merged = cli_json("contacts", "upsert", "--email", "ann@example.com", "--partial", "--field", "first_name=Ann")
    assert merged["id"] == first["id"]
    assert merged["data"] == {**first["data"], "first_name": "Ann"}
    body = json.dumps({"email_address": "ann@example.com", "status": "CLEANED", "partial_update": True})
    assert cli_json("contacts", "upsert", "--body", body)["status"] == "CLEANED"
    result = cli("contacts", "upsert", "--body", "-", "--json", input=json.dumps({"email_address": "bob@example.com"}))
    assert result.exit_code == 0 and json.loads(result.stdout)["data"]["email_address"] == "bob@example.com"
    found = cli_json("contacts", "by-phone", "+1 415 555 2671")
    assert found["id"] == first["id"] and "fields" in found


def test_messages_and_usage_errors(cli, workspace) -> None:
    result = cli("contacts", "create", "--field", "email_address=a@b.com")
    assert result.exit_code == 1 and result.stderr.strip() == "Contact status is required."
    result = cli("contacts", "upsert")
    assert result.exit_code == 1 and result.stderr.strip() == "Email address is required for upsert operation."
    result = cli("contacts", "get", "nope")
    assert result.exit_code == 1 and result.stderr.strip() == (
        "'nope' is not a contact: give its id (24 hex characters), email address or phone number.")
    result = cli("contacts", "get", "0" * 24)
    assert result.exit_code == 1 and result.stderr.strip() == "We couldn't find a contact with that ID."
    result = cli("contacts", "by-phone", "+14155552671")
    assert result.exit_code == 1 and result.stderr.strip() == "We couldn't find a contact with that phone number."
    assert cli("contacts", "create", "--field", "oops", "--status", "SUBSCRIBED").exit_code == 2
    assert cli("contacts", "upsert", "--body", "{bad").exit_code == 2


def test_human_output(cli, workspace) -> None:
    result = cli("contacts", "create", "--field", "email_address=a@b.com", "--field", "first_name=Ann",
                 "--status", "SUBSCRIBED")
    assert result.exit_code == 0 and "a@b.com" in result.stdout and "Ann" in result.stdout
