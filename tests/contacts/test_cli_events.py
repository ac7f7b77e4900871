"""`mkt events track` and `mkt events log`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from marketing_cli.cli import events as events_cli
from marketing_cli.services.account import billing
from marketing_cli.services.contacts import events
from tests.factories import row_contact as add_contact
from tests.factories import row_field as add_field


@pytest.fixture(autouse=True)
def _wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables keep whole ids however the shared console was sized when first imported."""
    from marketing_cli.cli import output

    monkeypatch.setattr(output.console, "_width", 250)

@pytest.fixture
def ada(conn: Any, workspace: dict[str, Any]) -> str:
    add_field(conn, workspace["id"], "phone_number", default_region="FR")
    return add_contact(conn, workspace["id"], email="ada@example.com", phone="+33612345678")


def test_track_json_is_the_api_data(cli_json, conn, workspace, ada):
    assert cli_json("events", "track", "--email", "ada@example.com", "--name", "signed_up",
                    "--properties", '{"plan": "pro"}') == {"queued": True}
    assert cli_json("events", "track", "--phone", "06 12 34 56 78", "--name", "called") == {"queued": True}
    log = events.list_events(conn, workspace["id"])
    assert [(e["contact_id"], e["payload"]) for e in log] == [
        (ada, {"event_name": "signed_up", "properties": {"plan": "pro"}}),
        (ada, {"event_name": "called", "properties": {}}),
    ]


def test_track_human_output(cli, ada):
    result = cli("events", "track", "--email", "ada@example.com", "--name", "signed_up")
    assert result.exit_code == 0
    assert "Event 'signed_up' recorded for ada@example.com." in result.stdout


@pytest.mark.parametrize("args, message", [
    (["--name", "x"], "Email address or phone number is required. Please provide the contact's email address"
                      " or phone number."),
    (["--name", "x", "--email", "ada@example.com", "--phone", "+33612345678"],
     "Please provide an email address or phone number, not both."),
    (["--email", "ada@example.com"], "Event name is required."),
    (["--phone", "+33 6 00 00 00 01", "--name", "x"],
     "We couldn't find a contact with the phone number '+33 6 00 00 00 01'."),
    (["--email", "ada@example.com", "--name", "x", "--properties", "[1, 2]"],
     "Event properties must be a JSON object (not an array, a string, a number or a boolean)."),
    (["--email", "ada@example.com", "--name", "x", "--properties", '{"a.b": 1}'],
     "Event property key 'a.b' is not allowed: a key cannot contain '.'."),
])
def test_track_errors_exit_1_with_api_message(cli, conn, workspace, ada, args, message):
    result = cli("events", "track", *args)
    assert result.exit_code == 1
    assert result.stderr.strip() == message
    assert events.list_events(conn, workspace["id"]) == []


def test_track_properties_not_json_is_usage_error(cli, ada):
    result = cli("events", "track", "--email", "ada@example.com", "--name", "x", "--properties", "{nope")
    assert result.exit_code == 2
    assert "--properties" in result.stderr


def test_track_allowance(cli, conn, workspace, ada):
    billing.set_allowance(conn, workspace["id"], "events", 0)
    result = cli("events", "track", "--email", "ada@example.com", "--name", "x")
    assert result.exit_code == 1
    assert result.stderr.startswith("Billing limit error: your plan's event allowance for this month is used up.")


def test_log_json_and_filters(cli, cli_json, conn, workspace, ada):
    events.append_event(conn, workspace["id"], ada, "TAG_ADDED", {"tag_id": 4})
    cli_json("events", "track", "--email", "ada@example.com", "--name", "bought")
    log = cli_json("events", "log")
    assert log == events.list_events(conn, workspace["id"])
    assert [e["type"] for e in log] == ["TAG_ADDED", "CUSTOM_EVENT"]
    assert [e["type"] for e in cli_json("events", "log", "--limit", "1")] == ["CUSTOM_EVENT"]
    assert [e["type"] for e in cli_json("events", "log", "--type", "TAG_ADDED")] == ["TAG_ADDED"]
    assert cli_json("events", "log", "--contact", "0" * 24) == []


def test_log_human_table(cli, conn, workspace, ada):
    events.append_event(conn, workspace["id"], ada, "TAG_ADDED", {"tag_id": 4})
    result = cli("events", "log")
    assert result.exit_code == 0
    assert "TAG_ADDED" in result.stdout and ada in result.stdout and "1 event(s), newest last" in result.stdout


def test_log_bad_type(cli, workspace):
    result = cli("events", "log", "--type", "nope")
    assert result.exit_code == 1
    assert result.stderr.startswith("The event type 'nope' is not valid.")


def test_log_follow_prints_new_events_as_json_lines(cli, conn, workspace, ada, monkeypatch):
    events.append_event(conn, workspace["id"], ada, "TAG_ADDED", {"tag_id": 1})
    polls = []

    def fake_sleep(seconds: float) -> None:
        polls.append(seconds)
        if len(polls) == 1:
            events.append_event(conn, workspace["id"], ada, "TAG_REMOVED", {"tag_id": 1})
            events.append_event(conn, workspace["id"], ada, "FIELD_UPDATED", {"fields": ["city"]})
        elif len(polls) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(events_cli, "_sleep", fake_sleep)
    result = cli("events", "log", "--follow", "--json")
    assert result.exit_code == 0
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [e["type"] for e in lines] == ["TAG_ADDED", "TAG_REMOVED", "FIELD_UPDATED"]
    assert polls == [0.5, 0.5, 0.5]


def test_log_follow_from_an_empty_log_human(cli, conn, workspace, ada, monkeypatch):
    calls = []

    def fake_sleep(seconds: float) -> None:
        calls.append(seconds)
        if len(calls) == 1:
            events.append_event(conn, workspace["id"], ada, "CONTACT_SUBSCRIBED_PENDING", {})
        else:
            raise KeyboardInterrupt

    monkeypatch.setattr(events_cli, "_sleep", fake_sleep)
    result = cli("events", "log", "--follow")
    assert result.exit_code == 0
    assert "CONTACT_SUBSCRIBED_PENDING" in result.stdout and ada in result.stdout


def test_log_follow_drains_a_burst_without_waiting(cli, conn, workspace, ada, monkeypatch):
    monkeypatch.setattr(events, "MAX_LOG_LIMIT", 2)
    sleeps = []

    def fake_sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 1:
            for i in range(5):
                events.append_event(conn, workspace["id"], ada, "TAG_ADDED", {"tag_id": i})
        else:
            raise KeyboardInterrupt

    monkeypatch.setattr(events_cli, "_sleep", fake_sleep)
    result = cli("events", "log", "--follow", "--json", "--limit", "1")
    assert result.exit_code == 0, result.stderr
    assert [json.loads(line)["payload"]["tag_id"] for line in result.stdout.splitlines()] == [0, 1, 2, 3, 4]
    assert len(sleeps) == 2  # batches of 2, 2 and 1 after a single wait
