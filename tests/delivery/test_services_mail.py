"""MIME building and the mail transport, against a real SMTP server (aiosmtpd)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from marketing_cli.services.delivery import message as mm
from marketing_cli.services.delivery import transport as mt
from tests.smtp_server import SmtpServer


def _message(to: str = "bob@example.org", subject: str = "Héllo ✓") -> Any:
    html = ('<html><head><style>.x{color:red}</style></head><body><span style="display:none">preview</span>'
            '<h1>Hi &amp; welcome</h1><p>See <a href="https://ex.com/a">the shop</a>.</p></body></html>')
    return mm.build_message(sender=mm.address("Ann Shop", "ann", "shop.example"), to=to, subject=subject,
                            html=html, reply_to=mm.address("Help", "help", "shop.example"),
                            headers={"X-Mkt-Test": "1"})


def test_build_message_structure_and_headers() -> None:
    message = _message()
    assert message.get_content_type() == "multipart/alternative"
    plain, html = message.iter_parts()
    assert plain.get_content_type() == "text/plain" and html.get_content_type() == "text/html"
    assert plain.get_content() == "Hi & welcome\n\nSee the shop (https://ex.com/a).\n"
    assert "<h1>Hi &amp; welcome</h1>" in html.get_content()
    assert str(message["From"]) == "Ann Shop <ann@shop.example>"
    assert str(message["Reply-To"]) == "Help <help@shop.example>"
    assert message["Message-ID"].endswith("@shop.example>") and message["Date"].endswith("+0000")
    raw = message.as_bytes()
    assert b"\r\n" in raw and b"Subject: =?utf-8?" in raw  # SMTP policy: CRLF, encoded words


def test_html_to_text_skips_hidden_head_and_style() -> None:
    html = ("<head><title>T</title><style>p{}</style></head><div style='display: none'>secret <b>x</b></div>"
            "<table><tr><td>One</td></tr><tr><td>Two<br>Three</td></tr></table><img alt='Logo' src='x'>"
            "<p><a href='https://a.example'>https://a.example</a></p>")
    assert mm.html_to_text(html) == "One\n\nTwo\nThree\n\nLogo\nhttps://a.example\n"


@pytest.mark.parametrize(("url", "expected"), [
    ("smtp://mail.example", ("mail.example", 25, False, False, None, None)),
    ("smtps://u%40x:p%2Fw@mail.example", ("mail.example", 465, True, False, "u@x", "p/w")),
    ("smtp://u:p@127.0.0.1:2525?starttls=1", ("127.0.0.1", 2525, False, True, "u", "p")),
])
def test_parse_smtp_url(url: str, expected: tuple[Any, ...]) -> None:
    s = mt.parse_smtp_url(url)
    assert (s.host, s.port, s.tls, s.starttls, s.username, s.password) == expected


@pytest.mark.parametrize("url", ["http://mail.example", "smtp://", "smtp://h:notaport", "smtp://h?timeout=x"])
def test_parse_smtp_url_refuses(url: str) -> None:
    with pytest.raises(ValueError):
        mt.parse_smtp_url(url)


def test_smtp_transport_sends_several_messages_on_one_connection() -> None:
    with SmtpServer() as server, mt.open_transport(smtp_url=server.url) as transport:
        transport.send(_message("a@example.org"), "ann@shop.example", ["a@example.org"])
        first = transport._smtp
        transport.send(_message("b@example.org"), "ann@shop.example", ["b@example.org"])
        assert first is not None and transport._smtp is first  # kept open between messages
    assert [m.rcpt_tos for m in server.messages] == [["a@example.org"], ["b@example.org"]]
    received = server.messages[0].message
    assert received["Subject"] == "Héllo ✓" and received["To"] == "a@example.org"
    assert received.get_body(("plain",)).get_content().startswith("Hi & welcome")
    assert server.messages[0].mail_from == "ann@shop.example"


def test_smtp_transport_reconnects_when_the_server_dropped_the_connection() -> None:
    with SmtpServer() as server, mt.open_transport(smtp_url=server.url) as transport:
        transport.send(_message(), "ann@shop.example", ["bob@example.org"])
        transport._smtp.sock.close()  # the server (or the network) dropped it
        transport.send(_message(), "ann@shop.example", ["bob@example.org"])
    assert len(server.messages) == 2


def test_starttls_and_login(tmp_path: Path) -> None:
    with SmtpServer(tls_dir=tmp_path, users={"mailer": "s3cret/pw"}) as server:
        with mt.open_transport(smtp_url=server.url) as transport:
            transport.send(_message(), "ann@shop.example", ["bob@example.org"])
        assert len(server.messages) == 1 and server.logins == ["mailer"]
        bad = server.url.replace("s3cret%2Fpw", "wrong")
        with pytest.raises(mt.TransportError, match="refused the login"), mt.open_transport(smtp_url=bad) as t:
            t.send(_message(), "ann@shop.example", ["bob@example.org"])
        no_tls = server.url.split("?")[0]
        with pytest.raises(mt.TransportError), mt.open_transport(smtp_url=no_tls) as t:
            t.send(_message(), "ann@shop.example", ["bob@example.org"])
        untrusted = server.url.split("&cafile")[0]  # STARTTLS without trusting the self-signed cert
        with pytest.raises(mt.TransportError, match="cannot reach"), mt.open_transport(smtp_url=untrusted) as t:
            t.send(_message(), "ann@shop.example", ["bob@example.org"])
    assert len(server.messages) == 1


def test_a_refused_recipient_is_a_permanent_error() -> None:
    with SmtpServer(refuse=("nobody@example.org",)) as server, mt.open_transport(smtp_url=server.url) as t:
        with pytest.raises(mt.TransportError) as info:
            t.send(_message("nobody@example.org"), "ann@shop.example", ["nobody@example.org"])
        assert info.value.permanent and "550" in str(info.value)
        t.send(_message(), "ann@shop.example", ["bob@example.org"])  # the connection is still usable
    assert len(server.messages) == 1


def test_smtputf8_only_where_needed_and_a_refusal_of_that_message_alone_without_it() -> None:
    from marketing_cli.kernel.addresses import NO_SMTPUTF8

    with SmtpServer(smtputf8=False) as plain, mt.open_transport(smtp_url=plain.url) as t:
        with pytest.raises(mt.TransportError) as info:
            t.send(_message("gül@example.org"), "ann@shop.example", ["gül@example.org"])
        assert info.value.permanent and str(info.value) == NO_SMTPUTF8
        t.send(_message("ann@bücher.de"), "ann@shop.example", ["ann@bücher.de"])  # the session goes on
    [idna] = plain.messages
    assert idna.rcpt_tos == ["ann@xn--bcher-kva.de"] and idna.message["To"] == "ann@xn--bcher-kva.de"
    assert not idna.smtputf8
    with SmtpServer(smtputf8=True) as utf8, mt.open_transport(smtp_url=utf8.url) as t:
        t.send(_message("gül@example.org"), "ann@shop.example", ["gül@example.org"])
        t.send(_message(), "ann@shop.example", ["bob@example.org"])
    assert [(m.rcpt_tos, m.smtputf8) for m in utf8.messages] == [(["gül@example.org"], True),
                                                                   (["bob@example.org"], False)]


def test_compose_writes_unicode_domains_in_idna_form_and_a_non_ascii_local_part_as_utf8() -> None:
    import email
    from email import policy

    from marketing_cli.kernel.merge_contexts import Values
    from marketing_cli.services.delivery.compose import CompiledVariant, Recipient
    from marketing_cli.services.delivery.path_tokens import KINDS, MessageTokens

    variant = CompiledVariant(subject="Hi", html="<p>x {{unsubscribe_url}}</p>", from_name="Shop",
                              from_address="news@shop.example", reply_to=("Help", "help@bücher.de"),
                              tracking_base="http://t.example", campaign_id="c1", track=False, link_ids={},
                              signer=None)
    tokens = MessageTokens(*(f"tok{kind}" for kind in KINDS))
    urls = variant.urls(tokens)
    raw = variant.build(Recipient(1, "gül@bücher.de", tokens), Values(urls))
    head = raw.split(b"\r\n\r\n", 1)[0].decode("utf-8")
    assert "\r\nTo: gül@xn--bcher-kva.de\r\n" in head and "Reply-To: Help <help@xn--bcher-kva.de>" in head
    parsed = email.message_from_string(raw.decode("utf-8"), policy=policy.default)
    assert parsed["To"].addresses[0].username == "gül"


def test_unreachable_server_is_a_transport_error() -> None:
    from tests.smtp_server import free_port

    with pytest.raises(mt.TransportError, match="cannot reach"), \
            mt.open_transport(smtp_url=f"smtp://127.0.0.1:{free_port()}?timeout=2") as t:
        t.send(_message(), "ann@shop.example", ["bob@example.org"])


def test_outbox_transport_writes_eml_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MKT_OUTBOX")
    transport = mt.open_transport(db_path=tmp_path / "data" / "mkt.db")
    assert isinstance(transport, mt.OutboxTransport) and transport.folder == tmp_path / "data" / "outbox"
    path = Path(transport.send(_message(), "ann@shop.example", ["bob@example.org"]))
    assert path.parent == tmp_path / "data" / "outbox" and path.suffix == ".eml"
    import email
    from email import policy

    parsed = email.message_from_bytes(path.read_bytes(), policy=policy.default)
    assert parsed["To"] == "bob@example.org" and parsed.get_content_type() == "multipart/alternative"
    monkeypatch.setenv("MKT_OUTBOX", str(tmp_path / "elsewhere"))
    assert mt.open_transport(db_path=tmp_path / "mkt.db").folder == tmp_path / "elsewhere"


def test_outbox_that_cannot_be_written_is_a_transport_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(mt.TransportError, match="cannot write to the outbox"):
        mt.OutboxTransport(blocker / "outbox").send(_message(), "a@b.example", ["c@d.example"])


def test_compiled_email_renders_text_without_parsing_html_per_recipient(conn: Any, workspace: dict[str, Any]) -> None:
    from marketing_cli.services.contacts.merge_tags import Renderer

    html = ('<html><head><style>p{}</style></head><body><span style="display:none">{{preview_text}}</span>'
            '<h1>Hi {{contact.first_name|friend}} &amp; co</h1>'
            '<p><a href="{{unsubscribe_url}}">Unsubscribe</a></p></body></html>')
    compiled = mm.CompiledEmail("Hello\n {{contact.first_name|friend}}", html)
    values = Renderer(conn, workspace["id"], preview_text="Hidden").values_for(
        {"email": "a@example.com", "phone": None, "data": "{}"}, actions={"unsubscribe_url": "https://u.example/1?a&b"})
    subject, rendered_html, text = compiled.render(values)
    assert subject == "Hello friend"
    assert "Hidden" in rendered_html and "https://u.example/1?a&amp;b" in rendered_html
    assert text == "Hi friend & co\n\nUnsubscribe (https://u.example/1?a&b)\n"
    assert text == mm.html_to_text(rendered_html)  # the same text as converting each rendered HTML
