"""`mkt fields`: --json equals the API's data; Validation error tells which rule failed."""

from __future__ import annotations


def test_create_list_update_match_api(cli_json, client, auth, workspace) -> None:
    created = cli_json("fields", "create", "--label", "Plan", "--merge-tag", "plan", "--type", "DROPDOWN_SINGLE",
                       "--definition", "free,pro", "--default-value", "free", "--required")
    assert created["definition"] == "free,pro" and created["required"] is True and created["default_value"] == "free"
    assert cli_json("fields", "list") == client.get("/v1/fields", headers=auth).json()["data"]
    updated = cli_json("fields", "update", str(created["id"]), "--label", "Tier", "--not-required")
    assert updated == {**created, "label": "Tier", "required": False}
    phone = cli_json("fields", "create", "--label", "Phone", "--merge-tag", "phone_number", "--type", "TEXT",
                     "--default-region", "gb")
    assert phone["default_region"] == "GB"
    assert cli_json("fields", "update", str(phone["id"]), "--default-region", "none")["default_region"] is None


def test_validation_error_says_why(cli, workspace) -> None:
    result = cli("fields", "create", "--label", "Age", "--merge-tag", "Age1", "--type", "NUMBER")
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert lines[0] == "Validation error" and "merge_tag" in lines[1]
    assert result.stdout == ""


def test_update_messages(cli, workspace) -> None:
    result = cli("fields", "update", "999", "--label", "X")
    assert result.exit_code == 1 and result.stderr.strip() == "We were unable to find the field."
    result = cli("fields", "update", "1", "--label", "Mail")
    assert result.exit_code == 1 and result.stderr.strip() == "This field is immutable and cannot be updated."
    result = cli("fields", "update", "2", "--type", "NUMBER")
    assert result.exit_code == 1 and result.stderr.strip() == "The type of the field cannot be changed."


def test_human_list(cli, workspace) -> None:
    result = cli("fields", "list")
    assert result.exit_code == 0 and "email_address" in result.stdout and "first_name" in result.stdout
