"""`mkt mail transport set|show`, the transport lines of `mkt jobs run`, and the outbox named
in `campaigns stats` and `campaigns watch` (CliRunner)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from marketing_cli.services.delivery import transport_settings
from tests import factories

PASSWORD = "hunter2-secret"
URL = f"smtp://ann:{PASSWORD}@smtp.example.com:587?starttls=1"
MASKED = "smtp://ann:****@smtp.example.com:587?starttls=1"


def _printed(result: Any) -> str:
    return result.stdout + result.stderr


def test_set_and_show_never_print_the_password(cli: Any, cli_json: Any, workspace: dict,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MKT_OUTBOX")
    human = cli("mail", "transport", "set", URL)
    assert human.exit_code == 0 and MASKED in human.stdout and PASSWORD not in _printed(human)
    shown = cli_json("mail", "transport", "show")
    assert (shown["transport"], shown["url"], shown["source"]) == ("smtp", MASKED, "workspace")
    human = cli("mail", "transport", "show")
    assert f"SMTP {MASKED}" in human.stdout and "the workspace's setting" in human.stdout
    assert PASSWORD not in _printed(human) and PASSWORD not in json.dumps(shown)
    again = cli_json("mail", "transport", "set", URL)  # set answers what show answers
    assert again == cli_json("mail", "transport", "show") and again["url"] == MASKED


def test_show_says_which_source_wins_and_why(cli: Any, cli_json: Any, workspace: dict, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # The test environment sets MKT_OUTBOX: a stored SMTP server wins over it (CONTRACT section 3) ...
    cli_json("mail", "transport", "set", URL)
    shown = cli_json("mail", "transport", "show")
    assert (shown["transport"], shown["url"], shown["source"]) == ("smtp", MASKED, "workspace")
    # ... and MKT_SMTP_URL wins over the stored server, and show says so.
    monkeypatch.setenv("MKT_SMTP_URL", "smtp://relay.example.com:25")
    shown = cli_json("mail", "transport", "show")
    assert (shown["transport"], shown["source"]) == ("smtp", "MKT_SMTP_URL")
    assert shown["stored"]["url"] == MASKED
    human = " ".join(cli("mail", "transport", "show").stdout.split())
    assert "MKT_SMTP_URL (or --smtp-url) is set for this process" in human
    assert "not used while MKT_SMTP_URL or --smtp-url is set" in human
    # A stored outbox without a folder writes where MKT_OUTBOX says.
    monkeypatch.delenv("MKT_SMTP_URL")
    cli_json("mail", "transport", "set", "outbox")
    human = " ".join(cli("mail", "transport", "show").stdout.split())
    assert f"outbox at {tmp_path / 'outbox'} (nothing leaves this machine)" in human
    assert "MKT_OUTBOX (or --outbox) is set for this process" in human and "not used" not in human


def test_set_outbox_with_a_path(cli_json: Any, workspace: dict, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MKT_OUTBOX")
    shown = cli_json("mail", "transport", "set", "outbox", "--path", str(tmp_path / "eml"))
    assert (shown["transport"], shown["path"], shown["source"]) == ("outbox", str(tmp_path / "eml"), "workspace")


def test_errors_exit_1_with_the_message_and_write_nothing(cli: Any, conn: sqlite3.Connection,
                                                          workspace: dict) -> None:
    for args, message in [
        (("http://ann:hunter2-secret@x.example",),
         transport_settings.TRANSPORT_INVALID.format(value="http://ann:****@x.example")),
        (("smtp://x.example", "--path", "/tmp"), transport_settings.PATH_WITH_SMTP),
        (("smtp://x.example?tls=1",), transport_settings.QUERY_INVALID.format(name="tls")),
    ]:
        result = cli("mail", "transport", "set", *args)
        assert result.exit_code == 1 and result.stderr.strip() == message and PASSWORD not in _printed(result)
    assert conn.execute("SELECT count(*) FROM mail_transport_settings").fetchone()[0] == 0
    assert cli("mail", "transport", "set").exit_code == 2


def test_jobs_run_names_the_transports_on_stderr(cli: Any, workspace: dict, tmp_path: Path) -> None:
    result = cli("jobs", "run", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"processed": 0, "failed": 0}  # stdout stays the result
    assert result.stderr.splitlines() == [
        f"mail: outbox at {tmp_path / 'outbox'} (nothing leaves this machine) [MKT_OUTBOX or --outbox]",
        "sms: outbox (`mkt sms outbox` lists the messages; nothing leaves this machine)"]


def test_the_banner_names_workspaces_when_they_differ(cli: Any, conn: sqlite3.Connection, workspace: dict,
                                                      default_outbox: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from marketing_cli.services.sms import providers

    monkeypatch.delenv("MKT_OUTBOX")
    other = factories.workspace(conn, "Other")["id"]
    transport_settings.set_transport(conn, other, URL)
    providers.set_provider(conn, other, "twilio", account_sid="AC" + "a" * 32, auth_token="tok")
    lines = cli("jobs", "run").stderr.splitlines()
    assert lines == [
        f"mail (workspace {workspace['id']}): outbox at {default_outbox} (nothing leaves this machine)",
        f"mail (workspace {other}): SMTP {MASKED}",
        (f"sms (workspace {workspace['id']}): outbox (`mkt sms outbox` lists the messages; nothing leaves this "
         "machine)"),
        f"sms (workspace {other}): Twilio account AC{'a' * 32} at https://api.twilio.com"]
    monkeypatch.setenv("MKT_SMTP_URL", "smtp://relay.example.com:25")  # one line when every workspace agrees
    assert cli("jobs", "run").stderr.splitlines()[0] == \
        "mail: SMTP smtp://relay.example.com:25 [MKT_SMTP_URL or --smtp-url]"


def test_stats_and_watch_name_outbox_deliveries(cli: Any, conn: sqlite3.Connection, workspace: dict,
                                                tmp_path: Path) -> None:
    made = factories.sendable_campaign(conn, workspace["id"], ["ann@example.org", "bob@example.org"])
    factories.send_now(conn, workspace["id"], made["id"])
    folder = tmp_path / "outbox"
    stats = " ".join(cli("campaigns", "stats", made["id"]).stdout.split())
    assert f"2 of the delivered messages were delivered to the outbox at {folder}, not to recipients." in stats
    watch = cli("campaigns", "watch", made["id"], "--once").stdout.strip()
    assert watch.startswith(f"SENT: 2/2 sent (2 delivered (2 of them to the outbox at {folder}, not to "
                            "recipients), 0 failed), ")
    assert json.loads(cli("campaigns", "watch", made["id"], "--json").stdout)["outbox"] == \
        {"delivered": 2, "path": str(folder)}


def test_the_mail_app_lists_its_commands(cli: Any) -> None:
    result = cli("mail", "transport", "--help")
    assert result.exit_code == 0 and "set" in result.stdout and "show" in result.stdout
