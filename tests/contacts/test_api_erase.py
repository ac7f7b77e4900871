"""DELETE /v1/contacts/{id}, GET /v1/contacts/{id}/personal-data and /v1/suppressions over HTTP
(envelope B), and a person erased, refused, then back through a new double opt-in."""

from __future__ import annotations

import os
import re
from email import message_from_bytes, policy
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests import factories as f
from tests.factories import error_of

SUPPRESSED = "This person asked to be erased: a new double opt-in confirmation is needed."


def _contact(client: Any, auth: dict[str, str], email: str, status: str = "SUBSCRIBED") -> Any:
    return client.post("/v1/contacts", headers=auth, json={"status": status, "fields": {"email_address": email}})


def test_delete_a_contact(client: Any, auth: dict[str, str], conn: Any) -> None:
    contact_id = _contact(client, auth, "ann@example.org").json()["data"]["id"]
    response = client.delete(f"/v1/contacts/{contact_id}", headers=auth)
    assert response.status_code == 200 and response.json() == {"data": {"id": contact_id, "deleted": True}}
    assert error_of(client.delete(f"/v1/contacts/{contact_id}", headers=auth)) == (404, "Not found.")
    assert error_of(client.get(f"/v1/contacts/{contact_id}", headers=auth)) == (
        404, "We couldn't find a contact with that ID.")
    assert client.get("/v1/suppressions", headers=auth).json() == {"data": []}
    assert _contact(client, auth, "ann@example.org").status_code == 201  # not suppressed: may come back


def test_delete_errors(client: Any, auth: dict[str, str], conn: Any) -> None:
    theirs = f.contact(conn, f.workspace(conn, "Other")["id"], "ann@example.org")["id"]
    assert error_of(client.delete(f"/v1/contacts/{theirs}", headers=auth)) == (404, "Not found.")
    assert error_of(client.delete("/v1/contacts/nope", headers=auth)) == (
        400, "The contact ID you provided is not valid.")
    assert error_of(client.delete(f"/v1/contacts/{theirs}?suppress=maybe", headers=auth)) == (
        400, "The query parameter 'suppress' must be true or false.")
    assert error_of(client.delete(f"/v1/contacts/{theirs}?supress=true", headers=auth))[0] == 400  # a typo
    assert error_of(client.delete(f"/v1/contacts/{theirs}")) == (401, "Please provide an API key.")
    assert error_of(client.delete("/v1/contacts/upsert", headers=auth)) == (405, "Method not allowed.")
    assert conn.execute("SELECT count(*) FROM contacts").fetchone()[0] == 1


def test_personal_data(client: Any, auth: dict[str, str], conn: Any, workspace: dict[str, Any]) -> None:
    world = f.person_with_everything(conn, workspace["id"])
    response = client.get(f"/v1/contacts/{world['person']}/personal-data", headers=auth)
    assert response.status_code == 200 and set(response.json()) == {"data"}
    document = response.json()["data"]
    assert document["contact"]["id"] == world["person"] and len(document["email_messages"]) == 2
    assert document["sms_messages"][0]["phone"] == f.PERSON_PHONE
    assert error_of(client.get("/v1/contacts/nope/personal-data", headers=auth)) == (
        400, "The contact ID you provided is not valid.")
    client.delete(f"/v1/contacts/{world['person']}?suppress=true", headers=auth)
    assert error_of(client.get(f"/v1/contacts/{world['person']}/personal-data", headers=auth)) == (
        404, "We couldn't find a contact with that ID.")


def test_the_suppression_list(client: Any, auth: dict[str, str], conn: Any) -> None:
    added = client.post("/v1/suppressions", headers=auth, json={"email_address": "gone@example.org"})
    assert added.status_code == 201 and set(added.json()["data"]) == {"id", "kind", "reason", "created_at"}
    entry = added.json()["data"]
    assert client.get("/v1/suppressions", headers=auth).json() == {"data": [entry]}
    assert client.get("/v1/suppressions?email_address=GONE@example.org", headers=auth).json() == {"data": [entry]}
    assert "gone" not in client.get("/v1/suppressions", headers=auth).text
    assert error_of(_contact(client, auth, "gone@example.org")) == (409, SUPPRESSED)
    assert error_of(client.post("/v1/suppressions", headers=auth, json={"email_address": "gone@example.org"}))[0] == 409
    assert error_of(client.post("/v1/suppressions", headers=auth, json={"email": "x@example.org"})) == (
        400, "Unknown member 'email'")
    assert error_of(client.get("/v1/suppressions?limit=0", headers=auth))[0] == 400
    removed = client.delete(f"/v1/suppressions/{entry['id']}", headers=auth)
    assert removed.status_code == 200 and removed.json() == {"data": {"id": entry["id"], "deleted": True}}
    assert error_of(client.delete(f"/v1/suppressions/{entry['id']}", headers=auth)) == (404, "Not found.")
    assert _contact(client, auth, "gone@example.org").status_code == 201


def test_erased_then_back_through_a_new_double_opt_in(client: Any, auth: dict[str, str], conn: Any,
                                                      workspace: dict[str, Any]) -> None:
    """Erased with suppression, a signup as SUBSCRIBED is refused; as UNCONFIRMED it starts a double
    opt-in whose confirmation (the person, asking again) takes them off the list."""
    ws = workspace["id"]
    sender = f.verified_sender(conn, ws)
    f.automation(conn, ws, {"name": "Double opt-in", "triggers": [{"type": "subscription_pending"}],
                            "steps": [{"id": "confirm", "type": "send_email", "confirmation": True, "sender_id": sender,
                                       "subject": "Please confirm", "html": '<a href="{{confirmation_url}}">Yes</a>'}]})
    first = _contact(client, auth, "ann@example.org").json()["data"]["id"]
    assert client.delete(f"/v1/contacts/{first}?suppress=true", headers=auth).status_code == 200
    assert error_of(_contact(client, auth, "ann@example.org")) == (409, SUPPRESSED)
    again = _contact(client, auth, "ann@example.org", "UNCONFIRMED")
    assert again.status_code == 201
    assert f.run_automations(conn)["failed"] == 0
    [eml] = Path(os.environ["MKT_OUTBOX"]).glob("*.eml")
    html = message_from_bytes(eml.read_bytes(), policy=policy.default).get_body(("html",)).get_content()
    link = urlsplit(re.search(r'href="([^"]+/t/confirm/[^"]+)"', html).group(1)).path
    assert client.post(link).status_code == 200
    back = client.get(f"/v1/contacts/{again.json()['data']['id']}", headers=auth).json()["data"]
    assert back["status"] == "SUBSCRIBED"
    assert client.get("/v1/suppressions", headers=auth).json() == {"data": []}
