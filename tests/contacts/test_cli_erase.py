"""`mkt contacts delete | erase | export-person` and `mkt suppressions`: --json prints the API's
data; a terminal is asked first (--yes skips it); errors go to stderr with exit 1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from marketing_cli.cli import contacts_privacy
from tests import factories as f


def _without_time(document: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in document.items() if k != "exported_at"}


def test_delete_and_erase(cli: Any, cli_json: Any, client: Any, auth: dict[str, str], conn: Any,
                          workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    ann, bob = f.contact(conn, ws, "ann@example.org"), f.contact(conn, ws, "bob@example.org")
    assert cli_json("contacts", "delete", ann["id"]) == {"id": ann["id"], "deleted": True}
    result = cli("contacts", "delete", ann["id"])
    assert result.exit_code == 1 and result.stderr.strip() == "Not found."
    assert cli_json("suppressions", "list") == []
    human = cli("contacts", "erase", "BOB@example.org", "--yes")
    assert human.exit_code == 0 and f"Contact {bob['id']} deleted" in human.stdout
    assert "suppression list" in human.stdout
    assert [e["kind"] for e in cli_json("suppressions", "list")] == ["email"]
    assert cli_json("suppressions", "list") == client.get("/v1/suppressions", headers=auth).json()["data"]
    result = cli("contacts", "create", "--status", "SUBSCRIBED", "--field", "email_address=bob@example.org")
    assert result.exit_code == 1
    assert result.stderr.strip() == "This person asked to be erased: a new double opt-in confirmation is needed."


def test_a_terminal_is_asked_first(cli: Any, conn: Any, workspace: dict[str, Any],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    ann = f.contact(conn, workspace["id"], "ann@example.org")
    monkeypatch.setattr(contacts_privacy, "at_terminal", lambda: True)
    kept = cli("contacts", "erase", ann["id"], input="n\n")
    assert kept.exit_code == 1 and "Erase" in kept.stderr
    assert conn.execute("SELECT count(*) FROM contacts").fetchone()[0] == 1
    gone = cli("contacts", "delete", ann["id"], "--suppress", input="y\n")
    assert gone.exit_code == 0 and conn.execute("SELECT count(*) FROM contacts").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM suppressions").fetchone()[0] == 1


def test_export_person(cli: Any, cli_json: Any, client: Any, auth: dict[str, str], conn: Any,
                       workspace: dict[str, Any], tmp_path: Path) -> None:
    world = f.person_with_everything(conn, workspace["id"])
    printed = cli_json("contacts", "export-person", f.PERSON_PHONE)
    api = client.get(f"/v1/contacts/{world['person']}/personal-data", headers=auth).json()["data"]
    assert _without_time(printed) == _without_time(api)
    target = tmp_path / "zoe.json"
    human = cli("contacts", "export-person", f.PERSON_EMAIL, "--output", str(target))
    assert human.exit_code == 0 and "email_messages" in human.stdout and str(target) in human.stdout
    assert _without_time(json.loads(target.read_text(encoding="utf-8"))) == _without_time(api)
    missing = cli("contacts", "export-person", "nobody@example.org")
    assert missing.exit_code == 1
    assert missing.stderr.strip() == "We couldn't find a contact with the email address nobody@example.org."


def test_suppressions_add_and_remove(cli: Any, cli_json: Any, conn: Any, workspace: dict[str, Any]) -> None:
    f.field(conn, workspace["id"], "phone_number", label="Phone", default_region="FR")
    added = cli_json("suppressions", "add", "06 12 34 56 78")
    assert (added["kind"], added["reason"]) == ("phone", "added")
    assert cli_json("suppressions", "list", "--phone", "+33612345678") == [added]
    human = cli("suppressions", "add", "gone@example.org")
    assert human.exit_code == 0 and "keyed hash" in human.stdout and "gone@" not in human.stdout
    assert cli_json("suppressions", "remove", "gone@example.org")["deleted"] is True
    assert cli_json("suppressions", "remove", str(added["id"])) == {"id": added["id"], "deleted": True}
    again = cli("suppressions", "remove", str(added["id"]))
    assert again.exit_code == 1 and again.stderr.strip() == "Not found."
    listed = cli("suppressions", "list")
    assert listed.exit_code == 0
