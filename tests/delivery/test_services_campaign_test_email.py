"""Send Test Email: every message in order, rendering, limits, SMTP and outbox delivery."""

from __future__ import annotations

import email
from datetime import timedelta
from email import policy
from pathlib import Path
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.delivery import test_emails as t
from marketing_cli.services.email import campaigns, variant_html
from tests import factories as f
from tests.smtp_server import SmtpServer

HTML = ('<html><body><h1>Hi {{contact.first_name|friend}} from {{contact.city}}</h1>'
        '<p>{{workspace.name}}: <a href="https://shop.example/sale">sale</a></p>'
        '<a href="{{unsubscribe_url}}">Unsubscribe</a></body></html>')


def err(fn: Any, *args: Any, **kwargs: Any) -> tuple[int, str]:
    with pytest.raises(MktError) as info:
        fn(*args, **kwargs)
    return info.value.status, info.value.message


@pytest.fixture
def ready(conn: Any, workspace: dict[str, Any]) -> dict[str, Any]:
    f.field(conn, workspace["id"], "city", default_value="Paris")
    return f.ready_campaign(conn, workspace["id"], html=HTML, subject="Hello {{contact.first_name|friend}}",
                            reply_to={"display_name": "Help", "local_part": "help", "domain_name": "example.com"})


def _send(conn: Any, ws: int, cid: str, to: str = "ann@example.org", variant: str = "A", **kw: Any) -> str:
    return t.send_test_email(conn, ws, cid, {"variant_type": variant, "recipient": to}, **kw)


def _outbox(tmp_path: Path) -> list[Any]:
    return [email.message_from_bytes(p.read_bytes(), policy=policy.default)
            for p in sorted((tmp_path / "outbox").glob("*.eml"))]


def test_sends_through_smtp_rendered_for_the_recipients_contact(conn: Any, workspace: dict[str, Any],
                                                                 ready: dict[str, Any],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    f.contact(conn, workspace["id"], "ann@example.org", first_name="Ann <3", city="Lyon")
    with SmtpServer() as server:
        monkeypatch.setenv("MKT_SMTP_URL", server.url)
        answer = _send(conn, workspace["id"], ready["id"], " Ann@Example.org ")
    assert answer == "A test email of variant A was sent to ann@example.org."
    [received] = server.messages
    assert received.mail_from == "news@example.com" and received.rcpt_tos == ["ann@example.org"]
    message = received.message
    assert message["Subject"] == "Hello Ann <3"
    assert message["From"] == "News Team <news@example.com>" and message["Reply-To"] == "Help <help@example.com>"
    assert message["To"] == "ann@example.org" and message["Message-ID"].endswith("@example.com>")
    assert message["Date"] and message["X-Mkt-Test"] == "1"
    assert message.get_content_type() == "multipart/alternative"
    html = message.get_body(("html",)).get_content()
    text = message.get_body(("plain",)).get_content()
    assert "Hi Ann &lt;3 from Lyon" in html and "Test workspace" in html
    assert "A preview" in html  # the hidden preview span, rendered
    assert "/test-email/unsubscribe" in html and "{{" not in html
    assert "Hi Ann <3 from Lyon" in text and "sale (https://shop.example/sale)" in text
    assert "A preview" not in text


def test_without_a_contact_the_field_defaults_are_used(conn: Any, workspace: dict[str, Any], ready: dict[str, Any],
                                                       tmp_path: Path) -> None:
    _send(conn, workspace["id"], ready["id"], "stranger@example.org")
    [message] = _outbox(tmp_path)
    assert message["Subject"] == "Hello friend"
    assert "Hi friend from Paris" in message.get_body(("html",)).get_content()


def test_outbox_defaults_beside_the_database(conn: Any, workspace: dict[str, Any], ready: dict[str, Any],
                                             default_outbox: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MKT_OUTBOX")
    _send(conn, workspace["id"], ready["id"])
    assert len(list(default_outbox.glob("*.eml"))) == 1


@pytest.mark.parametrize(("campaign_id", "body", "message"), [
    ("", {"variant_type": "A", "recipient": "a@example.org"}, campaigns.ID_REQUIRED),
    (None, ["A"], campaigns.INVALID_BODY),
    (None, {"variant_type": "C", "recipient": "a@example.org"}, campaigns.VARIANT_TYPE_INVALID),
    (None, {"recipient": "a@example.org"}, campaigns.VARIANT_TYPE_INVALID),
    (None, {"variant_type": "a", "recipient": "not-an-address"}, t.RECIPIENT_INVALID),
    (None, {"variant_type": "A", "recipient": 5}, t.RECIPIENT_INVALID),
    (None, {"variant_type": "A"}, t.RECIPIENT_INVALID),
    ("f" * 24, {"variant_type": "A", "recipient": "a@example.org"}, campaigns.NOT_FOUND),
    ("zz", {"variant_type": "A", "recipient": "a@example.org"}, campaigns.NOT_FOUND),
    (None, {"variant_type": "B", "recipient": "a@example.org"}, campaigns.VARIANT_NOT_FOUND),
])
def test_request_messages(conn: Any, workspace: dict[str, Any], ready: dict[str, Any], campaign_id: Any, body: Any,
                          message: str, tmp_path: Path) -> None:
    cid = ready["id"] if campaign_id is None else campaign_id
    assert err(t.send_test_email, conn, workspace["id"], cid, body) == (400, message)
    assert _outbox(tmp_path) == []


def test_campaign_state_messages_in_order(conn: Any, workspace: dict[str, Any], tmp_path: Path) -> None:
    ws = workspace["id"]
    cid = f.campaign(conn, ws)["id"]
    assert err(_send, conn, ws, cid, variant="B") == (400, t.NO_SENDER)  # sender before the variant
    campaigns.configure_campaign(conn, ws, cid, {"sender": {"sender_identity_id": f.campaign_sender(conn, ws)}})
    assert err(_send, conn, ws, cid, variant="B") == (400, campaigns.VARIANT_NOT_FOUND)
    assert err(_send, conn, ws, cid) == (400, t.NO_SUBJECT)
    variant_html.set_variant_html(conn, ws, cid, "A", {"html": "<p>Body</p>"})
    assert err(_send, conn, ws, cid) == (400, t.NO_SUBJECT)
    cid2 = f.campaign(conn, ws, "Second")["id"]
    campaigns.configure_campaign(conn, ws, cid2, {"sender": {"sender_identity_id": f.campaign_sender(conn, ws, local_part="x")},
                                                  "variants": [{"type": "A", "subject": "Subject"}]})
    assert err(_send, conn, ws, cid2) == (400, t.NO_CONTENT)
    assert _outbox(tmp_path) == []


def test_another_workspaces_campaign_is_not_found(conn: Any, ready: dict[str, Any]) -> None:
    other = f.workspace(conn, "Other workspace")
    assert err(_send, conn, other["id"], ready["id"]) == (400, campaigns.NOT_FOUND)


def test_per_minute_limit_is_429(conn: Any, workspace: dict[str, Any], ready: dict[str, Any],
                                 tmp_path: Path) -> None:
    for i in range(t.DEFAULT_LIMITS[0]):
        _send(conn, workspace["id"], ready["id"], f"r{i}@example.org")
    assert err(_send, conn, workspace["id"], ready["id"]) == (429, t.PER_MINUTE)
    assert len(_outbox(tmp_path)) == t.DEFAULT_LIMITS[0]
    other = f.workspace(conn, "Other workspace")  # limits are per workspace
    theirs = f.ready_campaign(conn, other["id"])
    assert _send(conn, other["id"], theirs["id"]).startswith("A test email")


def test_hourly_limit(conn: Any, workspace: dict[str, Any], ready: dict[str, Any]) -> None:
    ws = workspace["id"]
    now = clock.utcnow()
    for i in range(t.DEFAULT_LIMITS[1]):  # all earlier this hour, none in the last minute
        t.record_test_send(conn, ws, "x@example.org", at=clock.format_ts(now - timedelta(minutes=2, seconds=i)))
    assert err(_send, conn, ws, ready["id"]) == (400, t.PER_HOUR)


def test_daily_limit_and_pruning(conn: Any, workspace: dict[str, Any], ready: dict[str, Any]) -> None:
    ws = workspace["id"]
    now = clock.utcnow()
    for i in range(t.DEFAULT_LIMITS[2]):  # all earlier today, none in the last hour
        t.record_test_send(conn, ws, "x@example.org", at=clock.format_ts(now - timedelta(hours=2, seconds=i)))
    assert err(_send, conn, ws, ready["id"]) == (400, t.PER_DAY)
    t.record_test_send(conn, ws, "x@example.org", at=clock.format_ts(now - timedelta(days=1, minutes=1)))
    assert conn.execute("SELECT COUNT(*) FROM test_email_sends WHERE sent_at < ?",
                        (clock.format_ts(now - timedelta(days=1)),)).fetchone()[0] == 1
    t.record_test_send(conn, ws, "x@example.org")  # prunes what is older than a day
    assert conn.execute("SELECT COUNT(*) FROM test_email_sends WHERE sent_at < ?",
                        (clock.format_ts(now - timedelta(days=1)),)).fetchone()[0] == 0


def test_limits_can_be_set_by_the_operator(conn: Any, workspace: dict[str, Any], ready: dict[str, Any],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(t.LIMITS_ENV, "1,10,10")
    _send(conn, workspace["id"], ready["id"])
    assert err(_send, conn, workspace["id"], ready["id"]) == (429, t.PER_MINUTE)
    monkeypatch.setenv(t.LIMITS_ENV, "nonsense")
    assert t.limits() == t.DEFAULT_LIMITS


def test_a_failed_send_is_502_and_does_not_count(conn: Any, workspace: dict[str, Any], ready: dict[str, Any],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    with SmtpServer(refuse=("ann@example.org",)) as server:
        monkeypatch.setenv("MKT_SMTP_URL", server.url)
        status, message = err(_send, conn, workspace["id"], ready["id"])
    assert status == 502 and message.startswith("The test email could not be sent: the SMTP server refused")
    monkeypatch.setenv("MKT_SMTP_URL", "http://not-smtp")
    status, message = err(_send, conn, workspace["id"], ready["id"])
    assert status == 502 and "MKT_SMTP_URL must look like" in message
    assert conn.execute("SELECT COUNT(*) FROM test_email_sends").fetchone()[0] == 0


def test_starttls_login_server(conn: Any, workspace: dict[str, Any], ready: dict[str, Any], tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    with SmtpServer(tls_dir=tmp_path, users={"mkt": "pw"}) as server:
        monkeypatch.setenv("MKT_SMTP_URL", server.url)
        _send(conn, workspace["id"], ready["id"], "bob@example.org")
    assert server.logins == ["mkt"] and server.messages[0].message["To"] == "bob@example.org"


def test_a_newline_in_a_contact_value_cannot_inject_headers(conn: Any, workspace: dict[str, Any],
                                                           ready: dict[str, Any], tmp_path: Path) -> None:
    f.contact(conn, workspace["id"], "eve@example.org", first_name="Eve\r\nBcc: all@example.org")
    _send(conn, workspace["id"], ready["id"], "eve@example.org")
    [message] = _outbox(tmp_path)
    assert message["Bcc"] is None and message["Subject"] == "Hello Eve Bcc: all@example.org"


def test_a_non_ascii_address_goes_out_with_smtputf8(conn: Any, workspace: dict[str, Any], ready: dict[str, Any],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    with SmtpServer(smtputf8=True) as server:
        monkeypatch.setenv("MKT_SMTP_URL", server.url)
        answer = _send(conn, workspace["id"], ready["id"], "gül.kowalski.6@example.com")
    assert answer == "A test email of variant A was sent to gül.kowalski.6@example.com."
    [received] = server.messages
    assert received.rcpt_tos == ["gül.kowalski.6@example.com"] and received.smtputf8
    message = email.message_from_string(received.raw.decode("utf-8"), policy=policy.default)  # RFC 6532 headers
    assert message["To"].addresses[0].addr_spec == "gül.kowalski.6@example.com"


def test_without_smtputf8_a_non_ascii_address_is_a_clear_502(conn: Any, workspace: dict[str, Any],
                                                             ready: dict[str, Any],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    with SmtpServer(smtputf8=False) as server:
        monkeypatch.setenv("MKT_SMTP_URL", server.url)
        status, message = err(_send, conn, workspace["id"], ready["id"], "gül.kowalski.6@example.com")
    assert (status, message) == (502, "The test email could not be sent: the SMTP server does not offer SMTPUTF8 "
                                      "(RFC 6531), which an address with non-ASCII characters before the @ needs.")
    assert server.messages == [] and conn.execute("SELECT COUNT(*) FROM test_email_sends").fetchone()[0] == 0


def test_a_unicode_domain_goes_out_in_idna_form(conn: Any, workspace: dict[str, Any], ready: dict[str, Any],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    with SmtpServer(smtputf8=False) as server:
        monkeypatch.setenv("MKT_SMTP_URL", server.url)
        assert _send(conn, workspace["id"], ready["id"], "Ann@Bücher.de").endswith("sent to ann@bücher.de.")
    [received] = server.messages
    assert received.rcpt_tos == ["ann@xn--bcher-kva.de"] and not received.smtputf8
    assert received.message["To"] == "ann@xn--bcher-kva.de"


@pytest.mark.parametrize("where", ["subject", "preview_text", "html"])
def test_an_unknown_tag_is_refused_as_the_schedule_refuses_it(conn: Any, workspace: dict[str, Any], tmp_path: Path,
                                                              where: str) -> None:
    from marketing_cli.services.email import schedule

    ws = workspace["id"]
    f.field(conn, ws, "city")
    html = HTML.replace("</body>", "<p>{{contact.nickname}}</p></body>" if where == "html" else "</body>")
    subject = "Hi {{contact.nickname}}" if where == "subject" else "Hi there"
    campaign = f.ready_campaign(conn, ws, html=html, subject=subject)
    if where == "preview_text":
        conn.execute("UPDATE campaign_variants SET preview_text = 'See {{contact.nickname}}' WHERE campaign_id = ?",
                     (campaign["id"],))
        conn.commit()
    refusal = "Variant A uses merge tags this workspace does not define: {{contact.nickname}}."
    assert err(_send, conn, ws, campaign["id"]) == (400, refusal)
    assert not (tmp_path / "outbox").exists() or _outbox(tmp_path) == []  # nothing was sent
    assert conn.execute("SELECT count(*) FROM test_email_sends").fetchone()[0] == 0  # nor counted
    variant = conn.execute("SELECT * FROM campaign_variants WHERE campaign_id = ?", (campaign["id"],)).fetchone()
    assert schedule.content_problems(conn, ws, variant) == [refusal]  # what schedule and the review refuse
