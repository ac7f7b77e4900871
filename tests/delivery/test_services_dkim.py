"""DKIM signing: every signature the signer makes verifies with dkimpy (an independent
implementation) against the domain's public key record; any change to a signed part fails."""

from __future__ import annotations

import base64
import random
import re
from email.message import EmailMessage
from email.policy import SMTP

import dkim as dkimpy
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from marketing_cli.services.delivery.dkim import DEFAULT_HEADERS, DkimSigner, body_hash

HEAD = (b"From: Ann Example <ann@example.com>\r\n"
        b"To: bob@example.org\r\n"
        b"Subject: Spring sale\r\n"
        b"Date: Mon, 23 Nov 2026 08:00:00 +0000\r\n"
        b"Message-ID: <0001.mkt@example.com>\r\n"
        b"MIME-Version: 1.0\r\n"
        b"Content-Type: text/plain; charset=utf-8\r\n"
        b"List-Unsubscribe: <https://t.example.com/u/tok123>\r\n"
        b"List-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n")
BODY = b"Hello Bob,\r\n\r\nOur spring sale starts today.\r\n"


@pytest.fixture(scope="module")
def key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def pem(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


@pytest.fixture(scope="module")
def dns(key: rsa.RSAPrivateKey):  # noqa: ANN201
    """dkimpy's DNS lookup, answering the TXT record a domain publishes for selector mkt."""
    der = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    record = b"v=DKIM1; k=rsa; p=" + base64.b64encode(der)
    asked: list[bytes] = []

    def lookup(name: bytes, timeout: int = 5) -> bytes | None:
        asked.append(name)
        return record if name in (b"mkt._domainkey.example.com.", b"mkt._domainkey.xn--bcher-kva.example.") else None

    lookup.asked = asked  # type: ignore[attr-defined]
    return lookup


@pytest.fixture(scope="module")
def signer(pem: bytes) -> DkimSigner:
    return DkimSigner("example.com", "mkt", pem)


def tags(signed: bytes) -> dict[str, str]:
    header = re.match(rb"DKIM-Signature:(.*?)\r\n(?![ \t])", signed, re.S)
    assert header, signed[:200]
    value = re.sub(r"\s+", "", header.group(1).decode())
    return dict(part.split("=", 1) for part in value.split(";"))


def multipart_message() -> bytes:
    msg = EmailMessage(policy=SMTP)
    msg["From"] = "Équipe Café <news@example.com>"
    msg["To"] = "Zoë Müller <zoe@example.org>"
    msg["Subject"] = "Ünïcödé subject, long enough that the header folds over several lines " * 2
    msg["Date"] = "Mon, 23 Nov 2026 08:00:00 +0000"
    msg["Message-ID"] = "<0002.mkt@example.com>"
    msg["List-Unsubscribe"] = "<https://t.example.com/u/" + "x" * 90 + ">"
    msg["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
    msg.set_content("Bonjour Zoë,\n\nLes soldes commencent.\n")
    msg.add_alternative("<html><body><p>Bonjour Zoë,</p>\n\n<p>Les   soldes\tcommencent.</p></body></html>\n",
                        subtype="html")
    return msg.as_bytes()


MESSAGES = {
    "plain": HEAD + b"\r\n" + BODY,
    "multipart, encoded words, folded headers": multipart_message(),
    "encoded-word subject": HEAD.replace(b"Subject: Spring sale",
                                         b"Subject: =?utf-8?q?Soldes_d=27=C3=A9t=C3=A9?=\r\n =?utf-8?b?4pyTIOKckyDinJM=?=")
    + b"\r\n" + BODY,
    "long folded To with tabs": HEAD.replace(b"To: bob@example.org",
                                             b"To: Bob   Example <bob@example.org>,\r\n\t carol@example.org,  \r\n"
                                             b"        dave@example.org")
    + b"\r\n" + BODY,
    "trailing blank lines": HEAD + b"\r\n" + BODY + b"\r\n\r\n   \r\n\t\r\n",
    "trailing whitespace on lines": HEAD + b"\r\n" + b"line one   \r\nline\t two \t\r\n  indented\r\n",
    "header missing (no List-Unsubscribe, no Date)": b"".join(
        line + b"\r\n" for line in HEAD.split(b"\r\n")
        if line and not line.startswith((b"List-Unsubscribe", b"Date"))) + b"\r\n" + BODY,
    "empty body": HEAD + b"\r\n",
    "no blank line, headers only": HEAD,
    "LF line ends": (HEAD + b"\r\n" + BODY).replace(b"\r\n", b"\n"),
    "body without final CRLF": HEAD + b"\r\n" + b"last line   ",
    "blanks in a header value": HEAD.replace(b"Subject: Spring sale", b"Subject:\t  Spring    sale  ")
    + b"\r\n" + BODY,
    "two To headers": HEAD + b"To: second@example.org\r\n\r\n" + BODY,
}


@pytest.mark.parametrize("name", MESSAGES)
def test_dkimpy_verifies_the_signature(signer: DkimSigner, dns, name: str) -> None:  # noqa: ANN001
    signed = signer.sign(MESSAGES[name])
    assert signed.startswith(b"DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d=example.com; s=mkt;")
    assert dkimpy.verify(signed, dnsfunc=dns)
    assert dns.asked[-1] == b"mkt._domainkey.example.com."


@pytest.mark.parametrize("name", MESSAGES)
def test_changing_the_body_or_a_signed_header_breaks_it(signer: DkimSigner, dns, name: str) -> None:  # noqa: ANN001
    signed = signer.sign(MESSAGES[name])
    head, _, body = signed.partition(b"\r\n\r\n")
    assert not dkimpy.verify(head + b"\r\n\r\n" + body + b"P.S. one more line\r\n", dnsfunc=dns)
    assert not dkimpy.verify(signed.replace(b"example.org", b"example.net", 1), dnsfunc=dns)


def test_tampered_subject_and_list_unsubscribe_fail(signer: DkimSigner, dns) -> None:  # noqa: ANN001
    signed = signer.sign(MESSAGES["plain"])
    assert dkimpy.verify(signed, dnsfunc=dns)
    assert not dkimpy.verify(signed.replace(b"Spring sale", b"Spring SALE"), dnsfunc=dns)
    assert not dkimpy.verify(signed.replace(b"/u/tok123", b"/u/tok124"), dnsfunc=dns)
    assert not dkimpy.verify(signed.replace(b"=One-Click", b"=Two-Click"), dnsfunc=dns)
    assert not dkimpy.verify(signed.replace(b"Our spring", b"Our Spring"), dnsfunc=dns)


def test_relaxed_canonicalisation_tolerates_whitespace_changes(signer: DkimSigner, dns) -> None:  # noqa: ANN001
    signed = signer.sign(MESSAGES["plain"])
    rewrapped = signed.replace(b"Subject: Spring sale", b"Subject:  Spring\r\n\tsale").replace(
        b"starts today.", b"starts  today.  ")
    assert dkimpy.verify(rewrapped + b"\r\n\r\n", dnsfunc=dns)


def test_unsigned_headers_may_be_added_but_not_a_second_from(signer: DkimSigner, dns) -> None:  # noqa: ANN001
    signed = signer.sign(MESSAGES["plain"])
    assert dkimpy.verify(b"Received: from relay by mx; Mon, 23 Nov 2026 08:00:01 +0000\r\n" + signed, dnsfunc=dns)
    head, _, body = signed.partition(b"\r\n\r\n")
    assert not dkimpy.verify(head + b"\r\nFrom: mallory@example.net\r\n\r\n" + body, dnsfunc=dns)


def test_h_tag_covers_the_contract_headers_present_and_oversigns_from(signer: DkimSigner) -> None:
    h = tags(signer.sign(MESSAGES["plain"]))["h"].split(":")
    assert h == ["from", "to", "subject", "date", "message-id", "mime-version", "content-type",
                 "list-unsubscribe", "list-unsubscribe-post", "from"]
    assert {"from", "to", "subject", "date", "message-id", "list-unsubscribe", "list-unsubscribe-post"} <= set(h)
    missing = tags(signer.sign(MESSAGES["header missing (no List-Unsubscribe, no Date)"]))["h"].split(":")
    assert "date" not in missing and "list-unsubscribe" not in missing and "list-unsubscribe-post" not in missing
    assert tags(signer.sign(MESSAGES["two To headers"]))["h"].split(":")[1:3] == ["to", "to"]


def test_tags_and_folding(signer: DkimSigner) -> None:
    signed = signer.sign(MESSAGES["multipart, encoded words, folded headers"], timestamp=1795420800)
    t = tags(signed)
    assert (t["v"], t["a"], t["c"], t["d"], t["s"], t["t"]) == (
        "1", "rsa-sha256", "relaxed/relaxed", "example.com", "mkt", "1795420800")
    assert list(t)[-1] == "b" and len(base64.b64decode(t["b"])) == 256
    header = signed[: signed.index(b"\r\nFrom:")]
    assert all(len(line) <= 78 for line in header.split(b"\r\n"))
    assert all(line.startswith(b" ") for line in header.split(b"\r\n")[1:])


def test_the_message_is_returned_unchanged_after_the_signature(signer: DkimSigner) -> None:
    message = MESSAGES["plain"]
    signed = signer.sign(message)
    assert signed.endswith(b"\r\n" + message) and signed.count(b"DKIM-Signature:") == 1
    assert signer.sign(MESSAGES["LF line ends"]).endswith(b"\r\n" + message)
    assert signer.sign(HEAD + b"\r\nno newline").endswith(b"\r\n\r\nno newline\r\n")


def test_timestamp_defaults_to_now(signer: DkimSigner) -> None:
    import time

    before = int(time.time())
    assert before <= int(tags(signer.sign(MESSAGES["plain"]))["t"]) <= int(time.time())


def test_body_hash_matches_dkimpy_relaxed_canonicalisation() -> None:
    import hashlib

    from dkim.canonicalization import Relaxed

    rng = random.Random(11)
    pieces = [b"a", b"word", b" ", b"  ", b"\t", b" \t ", b"\r\n", b"\r\n\r\n", b"\xc3\xa9"]
    for _ in range(500):
        body = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        if body and not body.endswith(b"\r\n"):
            body += b"\r\n"  # the signer adds the final CRLF before hashing
        assert body_hash(body) == hashlib.sha256(Relaxed.canonicalize_body(body)).digest(), body


def test_idna_domain_is_signed_as_a_label(pem: bytes, dns) -> None:  # noqa: ANN001
    signed = DkimSigner("Bücher.Example.", "MKT", pem).sign(MESSAGES["plain"])
    assert tags(signed)["d"] == "xn--bcher-kva.example" and tags(signed)["s"] == "mkt"
    assert dkimpy.verify(signed, dnsfunc=dns)


def test_custom_header_list(pem: bytes, dns) -> None:  # noqa: ANN001
    signer = DkimSigner("example.com", "mkt", pem.decode(), headers=["From", "Subject"])
    signed = signer.sign(MESSAGES["plain"])
    assert tags(signed)["h"] == "from:subject:from"
    assert dkimpy.verify(signed.replace(b"bob@example.org", b"eve@example.org"), dnsfunc=dns)
    assert "list-unsubscribe" in [name.lower() for name in DEFAULT_HEADERS]


def test_repeated_header_names_count_once(pem: bytes, dns) -> None:  # noqa: ANN001
    signed = DkimSigner("example.com", "mkt", pem, headers=["From", "to", "TO", "From"]).sign(MESSAGES["plain"])
    assert tags(signed)["h"] == "from:to:from"
    assert dkimpy.verify(signed, dnsfunc=dns)


@pytest.mark.parametrize(("args", "message"), [
    (("example.com", "mkt", b"not a key"), "not a readable unencrypted PEM key"),
    (("example.com", "mkt", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), "not a readable"),
    (("exa mple.com", "mkt", None), "not a valid DNS name"),
    (("", "mkt", None), "not a valid DNS name"),
    (("example.com", "m;kt", None), "not a valid DNS name"),
])
def test_bad_configuration_is_a_value_error(pem: bytes, args: tuple, message: str) -> None:
    domain, selector, key = args
    with pytest.raises(ValueError, match=message):
        DkimSigner(domain, selector, pem if key is None else key)


def test_non_rsa_key_and_bad_header_names_are_refused(pem: bytes) -> None:
    ed = ed25519.Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    with pytest.raises(ValueError, match="must be an RSA key"):
        DkimSigner("example.com", "mkt", ed)
    with pytest.raises(ValueError, match="header names"):
        DkimSigner("example.com", "mkt", pem, headers=["From", "Bad Name"])
    with pytest.raises(ValueError, match="header names"):
        DkimSigner("example.com", "mkt", pem, headers=[])
    with pytest.raises(ValueError, match="must cover the From header"):
        DkimSigner("example.com", "mkt", pem, headers=["To", "Subject"])


def test_long_domain_selector_and_header_list_still_fold_and_verify(pem: bytes, key: rsa.RSAPrivateKey) -> None:
    domain = "news." + "very-long-label-" * 3 + "x.example.com"
    selector = "mkt-2026-11-selector-with-a-long-name"
    der = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    record = b"v=DKIM1; k=rsa; p=" + base64.b64encode(der)
    names = [*DEFAULT_HEADERS, "X-Mkt-Message", "Feedback-ID", "Precedence", "Auto-Submitted", "X-Campaign-Reference"]
    signer = DkimSigner(domain, selector, pem, headers=names)
    message = HEAD.replace(b"From: Ann Example <ann@example.com>", f"From: News <news@{domain}>".encode()) + (
        b"X-Mkt-Message: tok\r\nFeedback-ID: 1:2:3\r\nPrecedence: bulk\r\n\r\n" + BODY)
    signed = signer.sign(message)
    header = signed[: signed.index(b"\r\nFrom:")]
    assert all(len(line) <= 78 for line in header.split(b"\r\n"))
    assert tags(signed)["h"].split(":")[-4:] == ["x-mkt-message", "feedback-id", "precedence", "from"]
    expected = f"{selector}._domainkey.{domain}.".encode()
    assert dkimpy.verify(signed, dnsfunc=lambda name, timeout=5: record if name == expected else None)


@pytest.mark.parametrize("name", [n for n, m in MESSAGES.items() if b"\r\n\r\n" in m and b"\r\n" in m])
def test_sign_fields_gives_the_bytes_sign_gives(signer: DkimSigner, dns, name: str) -> None:  # noqa: ANN001
    from marketing_cli.services.delivery.dkim import _parse_header_block

    message = MESSAGES[name]
    head, body = message.split(b"\r\n\r\n", 1)
    fields = [signer.field(raw) for _, raw in _parse_header_block(head + b"\r\n")]
    signed = signer.sign_fields(fields, body, timestamp=1_790_000_000)
    assert signed == signer.sign(message, timestamp=1_790_000_000)
    assert dkimpy.verify(signed, dnsfunc=dns)


def test_a_composed_message_is_signed_as_sign_would_and_verifies(signer: DkimSigner, dns) -> None:  # noqa: ANN001
    """compose.CompiledVariant hands the signer its fields (the constant ones canonicalised once):
    the same bytes as signing the unsigned message, for a plain and a long non-ASCII subject
    (folded with CRLF) and a non-ASCII Reply-To domain."""
    from marketing_cli.kernel.merge_contexts import Values
    from marketing_cli.services.delivery.compose import CompiledVariant, Recipient
    from marketing_cli.services.delivery.path_tokens import KINDS, MessageTokens

    for subject, html in (("Hello {{contact.first_name|there}}", "<p>Hi  there\t<a href='{{unsubscribe_url}}'>x</a></p>"),
                          ("Grüße aus dem Laden, " * 12, "<p>one\rtwo\r\nthree\nfour</p>")):  # a lone CR too
        variant = CompiledVariant(subject=subject, html=html,
                                  from_name="Shop", from_address="news@example.com",
                                  reply_to=("Help", "help@bücher.de"), tracking_base="http://t.example",
                                  campaign_id="c1", track=True, link_ids={}, signer=signer)
        tokens = MessageTokens(*(f"tok{kind}" for kind in KINDS))
        recipient = Recipient(7, "zoe@example.org", tokens)
        values = Values(variant.urls(tokens))
        date = "Thu, 26 Nov 2026 08:00:00 GMT"
        signed = variant.build(recipient, values, date, timestamp=1_790_000_000)
        variant.signer = None
        unsigned = variant.build(recipient, values, date)
        bare = unsigned.replace(b"\r\n", b"")
        assert b"\n" not in bare and b"\r" not in bare  # CRLF only (a folded subject too)
        assert signed == signer.sign(unsigned, timestamp=1_790_000_000)
        assert dkimpy.verify(signed, dnsfunc=dns)
