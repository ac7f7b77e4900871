"""The mail transport as a workspace setting (services/delivery/transport_settings.py): what is
stored, which source wins, that the password never shows, and that sends, test emails and
statistics follow the setting and name the outbox when that is where mail went."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from marketing_cli.errors import MktError
from marketing_cli.services.delivery import test_emails, transport_settings
from marketing_cli.services.delivery import transport as mt
from marketing_cli.services.email import campaigns, stats
from tests import factories
from tests.smtp_server import SmtpServer

SECRET = "s3cr%40t-pw"  # as written in the URL: "s3cr@t-pw"


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither MKT_SMTP_URL nor MKT_OUTBOX: the workspace's setting decides."""
    monkeypatch.delenv("MKT_OUTBOX", raising=False)
    monkeypatch.delenv("MKT_SMTP_URL", raising=False)


def _everything_printed(conn: sqlite3.Connection, ws: int) -> str:
    return repr(transport_settings.show_transport(conn, ws)) + repr(transport_settings.selection(conn, ws))


# --- what is stored and shown -----------------------------------------------------------------

def test_a_fresh_workspace_writes_to_the_outbox_beside_the_database(conn: sqlite3.Connection, workspace: dict,
                                                                    default_outbox: Path, no_env: None) -> None:
    shown = transport_settings.show_transport(conn, workspace["id"])
    assert shown == {"transport": "outbox", "url": None, "path": str(default_outbox), "source": "default",
                     "reason": transport_settings.REASONS["default"], "stored": None}
    chosen = transport_settings.selection(conn, workspace["id"])
    assert (chosen.kind, chosen.source, chosen.folder) == ("outbox", "default", default_outbox)
    assert isinstance(chosen.open(), mt.OutboxTransport)


def test_an_smtp_url_is_stored_without_its_password_and_shown_masked(conn: sqlite3.Connection, workspace: dict,
                                                                     no_env: None) -> None:
    ws = workspace["id"]
    url = f"smtp://ann:{SECRET}@smtp.example.com:587?starttls=1"
    shown = transport_settings.set_transport(conn, ws, url)
    masked = "smtp://ann:****@smtp.example.com:587?starttls=1"
    assert shown["transport"] == "smtp" and shown["url"] == masked and shown["path"] is None
    assert shown["source"] == "workspace" and shown["reason"] == transport_settings.REASONS["workspace"]
    assert shown["stored"]["url"] == masked and shown["stored"]["transport"] == "smtp"
    row = conn.execute("SELECT * FROM mail_transport_settings WHERE workspace_id = ?", (ws,)).fetchone()
    assert row["smtp_url"] == "smtp://ann@smtp.example.com:587?starttls=1" and row["smtp_password"] == SECRET
    assert SECRET not in _everything_printed(conn, ws) and "s3cr@t" not in _everything_printed(conn, ws)
    chosen = transport_settings.selection(conn, ws)
    assert chosen.shown_url == masked and "s3cr@t" not in repr(mt.parse_smtp_url(chosen.smtp_url or ""))
    settings = mt.parse_smtp_url(chosen.smtp_url or "")  # the sender gets the password back, decoded
    assert (settings.username, settings.password, settings.port, settings.starttls) == ("ann", "s3cr@t-pw", 587, True)


def test_outbox_with_a_path_is_stored_absolute(conn: sqlite3.Connection, workspace: dict, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch, no_env: None) -> None:
    monkeypatch.chdir(tmp_path)
    shown = transport_settings.set_transport(conn, workspace["id"], "outbox", path="mail-files")
    assert shown["transport"] == "outbox" and shown["path"] == str(tmp_path / "mail-files")
    assert shown["source"] == "workspace" and shown["stored"]["path"] == str(tmp_path / "mail-files")
    # Without a path: the default folder, as the operator's explicit choice.
    shown = transport_settings.set_transport(conn, workspace["id"], "outbox")
    assert shown["source"] == "workspace" and shown["path"].endswith("/outbox")


def test_the_setting_is_per_workspace(conn: sqlite3.Connection, workspace: dict, no_env: None) -> None:
    other = factories.workspace(conn, "Other")["id"]
    transport_settings.set_transport(conn, workspace["id"], "smtp://relay.example.com:25")
    assert transport_settings.selection(conn, workspace["id"]).kind == "smtp"
    assert transport_settings.show_transport(conn, other)["source"] == "default"


@pytest.mark.parametrize(("value", "path", "message"), [
    ("http://ann:hunter2@example.com", None,
     transport_settings.TRANSPORT_INVALID.format(value="http://ann:****@example.com")),
    ("sendmail", None, transport_settings.TRANSPORT_INVALID.format(value="sendmail")),
    ("smtp://ann:hunter2@", None, transport_settings.URL_INVALID.format(value="smtp://ann:****@")),
    ("smtp://ann:hunter2@host:port", None, transport_settings.URL_INVALID.format(value="smtp://ann:****@host:port")),
    ("smtp://host:25?start_tls=1", None, transport_settings.QUERY_INVALID.format(name="start_tls")),
    ("smtp://host:25", "/tmp", transport_settings.PATH_WITH_SMTP),
    ("outbox", "  ", "The outbox path must be a folder name."),
])
def test_set_refuses_what_it_cannot_use(conn: sqlite3.Connection, workspace: dict, value: str, path: str | None,
                                        message: str) -> None:
    with pytest.raises(MktError) as caught:
        transport_settings.set_transport(conn, workspace["id"], value, path=path)
    assert (caught.value.status, caught.value.message) == (400, message)
    assert "hunter2" not in caught.value.message
    assert conn.execute("SELECT count(*) FROM mail_transport_settings").fetchone()[0] == 0


def test_an_outbox_path_that_is_a_file_is_refused(conn: sqlite3.Connection, workspace: dict, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(MktError, match="is a file"):
        transport_settings.set_transport(conn, workspace["id"], "outbox", path=str(tmp_path / "file"))


# --- which source wins ----------------------------------------------------------------------------

def test_mkt_smtp_url_overrides_the_stored_transport_and_says_so(conn: sqlite3.Connection, workspace: dict,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 no_env: None) -> None:
    ws = workspace["id"]
    transport_settings.set_transport(conn, ws, "outbox")
    monkeypatch.setenv("MKT_SMTP_URL", "smtp://bob:pw@env.example.com:2525")
    shown = transport_settings.show_transport(conn, ws)
    assert (shown["transport"], shown["url"], shown["source"]) == ("smtp", "smtp://bob:****@env.example.com:2525",
                                                                   "MKT_SMTP_URL")
    assert shown["reason"] == transport_settings.REASONS["MKT_SMTP_URL"] and "overrides" in shown["reason"]
    assert shown["stored"]["transport"] == "outbox"
    monkeypatch.setenv("MKT_OUTBOX", "/tmp/elsewhere")  # an SMTP URL given to the process beats an outbox folder
    assert transport_settings.selection(conn, ws).source == "MKT_SMTP_URL"
    # A command's --smtp-url beats all.
    assert transport_settings.selection(conn, ws, smtp_url="smtp://flag.example.com").smtp_url == \
        "smtp://flag.example.com"


def test_a_stored_smtp_transport_wins_over_mkt_outbox(conn: sqlite3.Connection, workspace: dict, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch, no_env: None) -> None:
    """CONTRACT section 3: only the flag and MKT_SMTP_URL override a stored transport;
    MKT_OUTBOX places the outbox where no server is stored (a stored outbox without a folder)."""
    ws = workspace["id"]
    transport_settings.set_transport(conn, ws, f"smtp://ann:{SECRET}@smtp.example.com:587")
    monkeypatch.setenv("MKT_OUTBOX", str(tmp_path / "dry-run"))
    shown = transport_settings.show_transport(conn, ws)
    assert (shown["transport"], shown["url"], shown["source"]) == (
        "smtp", "smtp://ann:****@smtp.example.com:587", "workspace")
    transport_settings.set_transport(conn, ws, "outbox")
    shown = transport_settings.show_transport(conn, ws)
    assert (shown["transport"], shown["path"], shown["source"]) == ("outbox", str(tmp_path / "dry-run"), "MKT_OUTBOX")


def test_mask_url() -> None:
    assert mt.mask_url("smtps://u:p%40ss@h:465?timeout=5") == "smtps://u:****@h:465?timeout=5"
    assert mt.mask_url("smtp://:pw@h") == "smtp://:****@h"
    assert mt.mask_url("smtp://u@h:25") == "smtp://u@h:25"
    assert mt.mask_url("smtp://h") == "smtp://h"
    with pytest.raises(ValueError) as caught:  # the variable's own message never echoes a password
        mt.parse_smtp_url("smtp://u:hunter2@host:notaport")
    assert "hunter2" not in str(caught.value) and "****" in str(caught.value)


# --- sending follows the setting -------------------------------------------------------------------

def test_a_campaign_goes_through_the_stored_smtp_transport(conn: sqlite3.Connection, workspace: dict,
                                                           tmp_path: Path, no_env: None) -> None:
    ws = workspace["id"]
    made = factories.sendable_campaign(conn, ws, ["ann@example.org", "bob@example.org"])
    with SmtpServer(tls_dir=tmp_path, users={"u": "p"}) as server:
        transport_settings.set_transport(conn, ws, server.url)  # STARTTLS, login and a CA file in the query
        assert factories.send_now(conn, ws, made["id"])["failed"] == 0
    assert sorted(m.rcpt_tos[0] for m in server.messages) == ["ann@example.org", "bob@example.org"]
    assert set(server.logins) == {"u"}  # one login per connection (the pool may open several)
    assert not (tmp_path / "outbox").exists()
    result = stats.get_campaign_statistics(conn, ws, made["id"])
    assert result["aggregate"]["delivered"] == 2 and result["outbox"] is None
    assert campaigns.get_campaign(conn, ws, made["id"])["progress"]["outbox"] is None


def test_outbox_deliveries_are_named_in_statistics_and_progress(conn: sqlite3.Connection, workspace: dict,
                                                                default_outbox: Path, no_env: None) -> None:
    ws = workspace["id"]
    made = factories.sendable_campaign(conn, ws, ["ann@example.org", "bob@example.org", "cy@example.org"])
    factories.send_now(conn, ws, made["id"])
    folder = default_outbox
    assert len(list(folder.glob("*.eml"))) == 3
    result = stats.get_campaign_statistics(conn, ws, made["id"])
    assert result["aggregate"]["delivered"] == 3  # the contract's count: written to the outbox
    assert result["outbox"] == {"delivered": 3, "path": str(folder)}
    assert campaigns.get_campaign(conn, ws, made["id"])["progress"]["outbox"] == {"delivered": 3, "path": str(folder)}


# --- test emails --------------------------------------------------------------------------------------

def test_a_test_email_says_where_it_went(conn: sqlite3.Connection, workspace: dict, default_outbox: Path,
                                         no_env: None) -> None:
    ws = workspace["id"]
    ready = factories.ready_campaign(conn, ws)
    body = {"variant_type": "A", "recipient": "someone@else.example"}
    folder = default_outbox
    assert test_emails.send_test_email(conn, ws, ready["id"], body) == test_emails.WRITTEN.format(
        type="A", recipient="someone@else.example", folder=folder)
    assert "was sent to" not in test_emails.WRITTEN and len(list(folder.glob("*.eml"))) == 1
    with SmtpServer() as server:
        transport_settings.set_transport(conn, ws, server.url)
        assert test_emails.send_test_email(conn, ws, ready["id"], body) == \
            "A test email of variant A was sent to someone@else.example."
    assert [m.rcpt_tos for m in server.messages] == [["someone@else.example"]]


def test_a_test_email_through_a_stored_server_that_is_down_is_a_502_without_the_password(
        conn: sqlite3.Connection, workspace: dict, no_env: None) -> None:
    from tests.conftest import free_port

    ws = workspace["id"]
    ready = factories.ready_campaign(conn, ws)
    transport_settings.set_transport(conn, ws, f"smtp://ann:{SECRET}@127.0.0.1:{free_port()}?timeout=2")
    with pytest.raises(MktError) as caught:
        test_emails.send_test_email(conn, ws, ready["id"], {"variant_type": "A", "recipient": "a@example.org"})
    assert caught.value.status == 502 and SECRET not in caught.value.message



# --- the SMTP commands (transport._Commands) ------------------------------------------------------

@pytest.mark.parametrize("body", [b"one\r\n.two\r\n..three\r\n.\r\nend", b".first line\r\nsecond\r\n",
                                  b"no final line end .\r\n.", b"\r\n.\r\n.\r\n"])
def test_a_message_arrives_byte_for_byte_whatever_lines_begin_with_a_period(body: bytes) -> None:
    """The transport dot-stuffs with byte replacements (not smtplib's regular expression): the
    server reads back exactly what was sent (a final CRLF added where the message lacked one)."""
    raw = b"From: a@example.com\r\nTo: b@example.org\r\nSubject: dots\r\n\r\n" + body
    with SmtpServer() as server, mt.SmtpTransport(mt.parse_smtp_url(server.url)) as transport:
        transport.send(raw, "bounces@example.com", ["b@example.org"])
    assert server.messages[0].raw == raw if raw.endswith(b"\r\n") else raw + b"\r\n"


def test_envelope_addresses_are_written_as_smtplib_quotes_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain addr-spec goes as `<address>` without smtplib's parsing; anything else (a quoted
    local part) through smtplib's own quoting."""
    import smtplib

    sent: list[str] = []
    real = smtplib.SMTP.putcmd

    def putcmd(self: smtplib.SMTP, cmd: str, args: str = "") -> None:
        sent.append(f"{cmd} {args}".strip())
        real(self, cmd, args)

    monkeypatch.setattr(smtplib.SMTP, "putcmd", putcmd)
    addresses = ["plain.name+tag@example.org", '"odd name"@example.org', "o'brien@example.org"]
    with SmtpServer() as server, mt.SmtpTransport(mt.parse_smtp_url(server.url)) as transport:
        for address in addresses:
            transport.send(b"Subject: x\r\n\r\nbody\r\n", "bounces@x.example.com", [address])
    commands = [c for c in sent if c.split()[0] in ("mail", "rcpt")]
    expected = [smtplib.quoteaddr(a) for a in addresses]
    assert commands == [c for a in expected for c in ("mail FROM:<bounces@x.example.com> size=20", f"rcpt TO:{a}")]
    assert [m.rcpt_tos for m in server.messages] == [["plain.name+tag@example.org"], ['"odd name"@example.org'],
                                                     ["o'brien@example.org"]]
