"""Tracking tokens: round trip, no forgery, no cross-kind replay, no enumeration."""

from __future__ import annotations

import base64
import sqlite3

from marketing_cli.kernel import tokens as tt
from marketing_cli.storage import db


def test_round_trip_and_lengths(conn: sqlite3.Connection) -> None:
    secret = db.instance_secret(conn)
    for number in (1, 255, 2**40, 2**62):
        token = tt.make_token(secret, "open", number)
        assert tt.read_token(secret, "open", token) == number
    assert len(tt.make_token(secret, "click", 123_456)) == 20
    assert len(tt.make_token(secret, "sms", 123_456, tt.SMS_MAC_BYTES)) == 15
    two_ids = int.from_bytes(bytes(range(1, 25)), "big")  # a test email's view token: 24 bytes
    assert len(tt.make_token(secret, "test-view", two_ids)) == 46 <= tt.MAX_TOKEN_LENGTH
    assert tt.read_token(secret, "test-view", tt.make_token(secret, "test-view", two_ids)) == two_ids


def test_secret_is_made_once_and_kept(conn: sqlite3.Connection) -> None:
    first = db.instance_secret(conn)
    assert len(first) == 32 and db.instance_secret(conn) == first


def test_forged_replayed_or_malformed_tokens_are_refused(conn: sqlite3.Connection) -> None:
    secret = db.instance_secret(conn)
    token = tt.make_token(secret, "open", 41)
    assert tt.read_token(secret, "click", token) is None                 # another kind
    assert tt.read_token(b"x" * 32, "open", token) is None               # another installation
    neighbour = tt.make_token(b"guess" * 7, "open", 42)
    assert tt.read_token(secret, "open", neighbour) is None              # made without the secret
    flipped = token[:-1] + ("A" if token[-1] != "A" else "B")
    assert tt.read_token(secret, "open", flipped) is None
    for junk in ("", "short", "!" * 20, "é" * 20, "A" * 41, "A" * (tt.MAX_TOKEN_LENGTH + 1), None):
        assert tt.read_token(secret, "open", junk) is None  # type: ignore[arg-type]


def test_tracking_url_setting(conn: sqlite3.Connection, monkeypatch) -> None:  # noqa: ANN001
    import pytest

    from marketing_cli.errors import MktError
    from marketing_cli.services.account import workspaces
    from tests import factories

    ws = factories.workspace(conn)["id"]
    monkeypatch.delenv("MKT_PUBLIC_URL", raising=False)
    assert workspaces.tracking_base_url(conn, ws) == "http://127.0.0.1:8000"
    monkeypatch.setenv("MKT_PUBLIC_URL", "https://mail.example.com/")
    assert workspaces.tracking_base_url(conn, ws) == "https://mail.example.com"
    workspaces.update_operator_settings(conn, ws, tracking_url="https://t.example.org/mkt/")
    assert workspaces.get_operator_settings(conn, ws)["tracking_url"] == "https://t.example.org/mkt"
    for bad in ("ftp://x.org", "https://", "https://x.org/?a=1", "not a url"):
        with pytest.raises(MktError) as err:
            workspaces.update_operator_settings(conn, ws, tracking_url=bad)
        assert err.value.status == 400 and "tracking URL" in err.value.message
    assert workspaces.tracking_base_url(conn, ws) == "https://t.example.org/mkt"


def test_cli_sets_the_tracking_url(cli, workspace) -> None:  # noqa: ANN001
    result = cli("workspace", "update", "--tracking-url", "https://t.example.org")
    assert result.exit_code == 0 and "https://t.example.org" in result.stdout
    bad = cli("workspace", "update", "--tracking-url", "javascript:alert(1)")
    assert bad.exit_code == 1 and bad.stderr.startswith("The tracking URL must be")


def test_a_token_has_one_spelling(conn: sqlite3.Connection) -> None:
    """Foreign characters and non-canonical base64 (the same bytes spelt another way) are refused."""
    secret = db.instance_secret(conn)
    for mac_bytes in (tt.EMAIL_MAC_BYTES, tt.SMS_MAC_BYTES):
        token = tt.make_token(secret, "m", 123456, mac_bytes)
        assert tt.read_token(secret, "m", token, mac_bytes) == 123456
        last = token[-1]
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        # A last character whose unused low bits differ decodes to the same bytes.
        twins = [c for c in alphabet if c != last
                 and base64.urlsafe_b64decode(token[:-1] + c + "=" * (-len(token) % 4))
                 == base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))]
        # 11 bytes (an SMS token) leave 2 unused bits; 15 (an email token) none.
        assert bool(twins) == (len(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))) % 3 != 0)
        for spelling in [*(token[:-1] + t for t in twins[:3]), token[:3] + "." + token[3:], token[:3] + "\n" + token[3:],
                         token + "=", token[:4] + "+" + token[5:], token[:4] + "/" + token[5:],
                         token.replace(token[2], "é", 1)]:
            assert tt.read_token(secret, "m", spelling, mac_bytes) is None, spelling


def test_token_maker_makes_the_same_tokens() -> None:
    """The sender's keyed-HMAC copy (TokenMaker) gives make_token's tokens, read back the same."""
    from marketing_cli.kernel.tokens import SMS_MAC_BYTES, TokenMaker, make_token, read_token

    secret = b"s" * 32
    maker = TokenMaker(secret)
    for kind in ("open", "click", "unsubscribe", "report", "m"):
        for number in (0, 1, 2**40 - 1, 2**40, 2**95):
            token = maker.make(kind, number)
            assert token == make_token(secret, kind, number)
            assert read_token(secret, kind, token) == number
    assert maker.make("sms", 7, SMS_MAC_BYTES) == make_token(secret, "sms", 7, SMS_MAC_BYTES)
    assert TokenMaker(b"t" * 32).make("open", 1) != maker.make("open", 1)
    kinds = ("open", "click", "unsubscribe", "view", "confirm", "report")
    for number in (0, 1, 2**40 - 1, 2**40, 2**95):  # make_all: each kind's prefix hashed once, the same tokens
        assert maker.make_all(kinds, number) == [make_token(secret, kind, number) for kind in kinds]
    assert maker.make_all(("sms",), 7, SMS_MAC_BYTES) == [make_token(secret, "sms", 7, SMS_MAC_BYTES)]
