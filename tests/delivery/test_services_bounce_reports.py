"""Bounce and complaint reports: realistic DSNs (Postfix, Exim, Gmail-like, Outlook-like),
feedback-loop reports (Yahoo-like, AOL-like redacted) and files that are neither."""

from __future__ import annotations

import email
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.services.delivery import bounce_reports
from marketing_cli.services.delivery.bounce_reports import (
    MAX_MIME_DEPTH,
    MAX_MIME_PARTS,
    MAX_REPORT_BYTES,
    NO_FEEDBACK_PART,
    NO_STATUS_PART,
    NOT_A_REPORT,
    TOO_DEEP,
    TOO_LARGE,
    TOO_MANY_PARTS,
    message_id,
    parse_report,
    read_report,
)

REPORTS = Path(__file__).parent.parent / "data" / "reports"


def load(name: str) -> bytes:
    return (REPORTS / name).read_bytes()


def only(result: dict) -> dict:
    assert result["error"] is None, result
    assert len(result["bounces"]) == 1, result
    return result["bounces"][0]


@pytest.mark.parametrize(("name", "address", "status", "message_id_", "token"), [
    ("postfix_hard.eml", "nobody@example.org", "5.1.1", "<66f0c2a1e4b0a1b2c3d4e5f6.1@example.com>",
     "9f86d081884c7d659a2feaa0c55ad015"),
    ("exim_hard.eml", "gone@exim.example", "5.0.0", "<66f0c2a1e4b0a1b2c3d4e5f6.3@example.com>",
     "fcde2b2edba56bf408601fb721fe9b5c"),
    ("gmail_hard.eml", "full.inbox@gmail.example", "5.2.2", "<66f0c2a1e4b0a1b2c3d4e5f6.4@example.com>",
     "4e07408562bedb8b60ce05c1decfe3ad"),
    ("outlook_hard.eml", "someone@contoso.example", "5.1.10", "<66f0c2a1e4b0a1b2c3d4e5f6.5@example.com>",
     "6b86b273ff34fce19d6b804eff5a3f57"),
])
def test_hard_bounces_from_common_mtas(name: str, address: str, status: str, message_id_: str, token: str) -> None:
    result = parse_report(load(name))
    assert result["report_type"] == "delivery-status"
    entry = only(result)
    assert entry["email_address"] == address
    assert entry["type"] == "hard"
    assert entry["status"] == status
    assert entry["original_message_id"] == message_id_
    assert entry["mkt_message_token"] == token
    assert entry["diagnostic"].lower().startswith("smtp;")


def test_postfix_prefers_original_recipient_and_keeps_the_diagnostic() -> None:
    entry = only(parse_report(load("postfix_hard.eml")))
    assert entry["email_address"] == "nobody@example.org"  # Original-Recipient, lower-cased
    assert entry["diagnostic"] == ("smtp; 550 5.1.1 <nobody@example.org>: Recipient address rejected: "
                                   "User unknown in virtual mailbox table")


def test_delayed_is_a_soft_bounce() -> None:
    entry = only(parse_report(load("postfix_delayed.eml")))
    assert (entry["email_address"], entry["type"], entry["status"]) == ("slow@example.net", "soft", "4.4.1")
    assert entry["original_message_id"] == "<66f0c2a1e4b0a1b2c3d4e5f6.2@example.com>"


def test_multi_recipient_dsn_lists_each_failure_and_skips_deliveries() -> None:
    result = parse_report(load("multi_recipient.eml"))
    assert result["error"] is None
    assert [(b["email_address"], b["type"], b["status"]) for b in result["bounces"]] == [
        ("unknown@corp.example", "hard", "5.1.1"),  # "5.1.1 (bad destination mailbox address)"
        ("expired@corp.example", "soft", "4.4.7"),  # Action failed but a 4.x.x status
        ("nostatus@corp.example", "hard", "5.0.0"),  # no Status: the 554 reply says permanent
    ]
    assert {b["original_message_id"] for b in result["bounces"]} == {"<66f0c2a1e4b0a1b2c3d4e5f6.6@example.com>"}
    assert {b["mkt_message_token"] for b in result["bounces"]} == {None}


def test_yahoo_like_abuse_report_is_a_complaint() -> None:
    result = parse_report(load("yahoo_arf.eml"))
    assert result["report_type"] == "feedback-report"
    assert only(result) == {"email_address": "reader@yahoo.example", "type": "complaint", "status": None,
                            "diagnostic": None, "bounce_class": None, "original_message_id": "<66f0c2a1e4b0a1b2c3d4e5f6.7@example.com>",
                            "mkt_message_token": "d4735e3a265e16eee03f59718b9b5d03"}


def test_redacted_abuse_report_keeps_the_attribution_headers() -> None:
    entry = only(parse_report(load("aol_arf_redacted.eml")))
    assert entry["email_address"] is None and entry["type"] == "complaint"
    assert entry["original_message_id"] == "<66f0c2a1e4b0a1b2c3d4e5f6.8@example.com>"  # brackets added
    assert entry["mkt_message_token"] == "4b227777d4dd1fc61c6f884f48641d02"


def test_abuse_report_without_rcpt_to_uses_the_returned_to() -> None:
    data = load("yahoo_arf.eml").replace(b"Original-Rcpt-To: Reader@Yahoo.example\n", b"")
    assert b"Original-Rcpt-To" not in data
    assert only(parse_report(data))["email_address"] == "reader@yahoo.example"


def test_feedback_report_of_another_type_is_not_a_complaint() -> None:
    assert parse_report(load("not_spam_arf.eml")) == {
        "report_type": "feedback-report", "bounces": [],
        "error": "The feedback report is not an abuse report (Feedback-Type: not-spam)."}
    data = load("yahoo_arf.eml").replace(b"Content-Type: message/feedback-report", b"Content-Type: text/plain")
    assert parse_report(data) == {"report_type": "feedback-report", "bounces": [], "error": NO_FEEDBACK_PART}


@pytest.mark.parametrize("data", [
    b"", b"   \r\n", b"\x00\xff\xfe garbage \x89PNG\r\n\x1a\n", b"no headers at all, just words\n",
    b"Subject: a bounce in plain text\n\nMail delivery failed: nobody@example.org: 550 no such user\n",
])
def test_anything_else_is_not_a_report(data: bytes) -> None:
    assert parse_report(data) == {"report_type": None, "bounces": [], "error": NOT_A_REPORT}


def test_ordinary_message_and_non_bytes_are_not_reports() -> None:
    assert parse_report(load("ordinary.eml"))["error"] == NOT_A_REPORT
    assert parse_report("Subject: text, not bytes")["error"] == NOT_A_REPORT  # type: ignore[arg-type]


def test_truncated_dsn_says_what_is_missing() -> None:
    assert parse_report(load("truncated_dsn.eml")) == {
        "report_type": "delivery-status", "bounces": [], "error": NO_STATUS_PART}


def test_crlf_and_lf_files_read_the_same() -> None:
    for name in ("postfix_hard.eml", "gmail_hard.eml", "yahoo_arf.eml"):
        lf = load(name).replace(b"\r\n", b"\n")
        assert parse_report(lf.replace(b"\n", b"\r\n")) == parse_report(lf)


def test_dsn_without_returned_message_falls_back_to_the_mtas_reference() -> None:
    data = load("gmail_hard.eml")
    cut = data.index(b"--000000000000c2f1a9062f4b0001\nContent-Type: message/rfc822")
    entry = only(parse_report(data[:cut] + b"--000000000000c2f1a9062f4b0001--\n"))
    assert entry["original_message_id"] == "<66f0c2a1e4b0a1b2c3d4e5f6.4@example.com>"  # X-Original-Message-ID
    assert entry["mkt_message_token"] is None
    data = load("outlook_hard.eml")
    cut = data.index(b"--a7c6d5e4-1234-4f5e-9abc-def012345678\nContent-Type: text/rfc822-headers")
    entry = only(parse_report(data[:cut]))
    assert entry["original_message_id"] == "<66f0c2a1e4b0a1b2c3d4e5f6.5@example.com>"  # In-Reply-To


def test_a_forwarded_report_is_found_inside_the_forward() -> None:
    forward = EmailMessage()
    forward["From"] = "postmaster@example.com"
    forward["To"] = "bounces@example.com"
    forward["Subject"] = "Fwd: Undelivered Mail Returned to Sender"
    forward.set_content("See the attached bounce.")
    forward.add_attachment(email.message_from_bytes(load("postfix_hard.eml")))  # message/rfc822, 8bit
    assert only(parse_report(forward.as_bytes()))["email_address"] == "nobody@example.org"


def test_global_delivery_status_rfc6533() -> None:
    data = load("postfix_hard.eml").replace(b"report-type=delivery-status", b"report-type=global-delivery-status")
    data = data.replace(b"Content-Type: message/delivery-status", b"Content-Type: message/global-delivery-status")
    data = data.replace(b"rfc822;Nobody@Example.org", "utf-8;Zoë@Example.org".encode())
    entry = only(parse_report(data))
    assert entry["email_address"] == "zoë@example.org" and entry["status"] == "5.1.1" and entry["type"] == "hard"


def test_delayed_without_status_and_unknown_address_type() -> None:
    data = load("postfix_delayed.eml").replace(b"Status: 4.4.1\n", b"").replace(b"Diagnostic-Code: X-Postfix; ", b"Diagnostic-Code: x-local; ")
    assert only(parse_report(data))["status"] == "4.0.0"
    data = load("exim_hard.eml").replace(b"Final-Recipient: rfc822;gone@exim.example", b"Final-Recipient: x400; C=FR;O=x")
    entry = only(parse_report(data))
    assert entry["email_address"] is None and entry["type"] == "hard"


def test_message_id_form() -> None:
    assert message_id("<a.b@example.com>") == "<a.b@example.com>"
    assert message_id("  a.b@example.com ") == "<a.b@example.com>"
    assert message_id("\r\n <a.b@example.com> (comment)") == "<a.b@example.com>"
    assert message_id("") is None


@pytest.mark.parametrize("content_type", [b"message/delivery-status", b"message/global-delivery-status"])
@pytest.mark.parametrize("newline", [b"\n", b"\r\n"])
def test_base64_encoded_delivery_status(content_type: bytes, newline: bytes) -> None:
    import base64

    data = load("postfix_hard.eml")
    head = b"Content-Type: message/delivery-status\n\n"
    start = data.index(head) + len(head)
    end = data.index(b"--3F2A81C0C4E.1795420862/mail.example.com", start)
    fields = data[start:end].replace(b"Nobody@Example.org", "Zoë@Example.org".encode())
    data = (data[:start].replace(head, b"Content-Type: " + content_type + b"\nContent-Transfer-Encoding: base64\n\n")
            + base64.encodebytes(fields) + b"\n" + data[end:])
    entry = only(parse_report(data.replace(b"\n", newline)))
    assert (entry["email_address"], entry["type"], entry["status"]) == ("zoë@example.org", "hard", "5.1.1")
    assert entry["diagnostic"].startswith("smtp; 550 5.1.1")


def test_undecodable_base64_status_part_reports_nothing() -> None:
    data = load("postfix_hard.eml").replace(b"Content-Type: message/delivery-status\n",
                                            b"Content-Type: message/delivery-status\nContent-Transfer-Encoding: base64\n")
    result = parse_report(data)
    assert result["report_type"] == "delivery-status" and result["bounces"] == []


def test_mangled_reports_never_raise() -> None:
    import random

    files = [path.read_bytes() for path in sorted(REPORTS.glob("*.eml"))]
    pieces = [b"\n", b"\r\n", b":", b";", b"=?utf-8?b?", b"?=", b"\xff", b"\x00", b"--", b"<>", b"\t",
              b"report-type=", b"Content-Type: message/delivery-status\n", b"Action: failed\n", b"Status: 5.1.1\n",
              b"=?x-unknown?q?abc?=", b"Content-Transfer-Encoding: base64\n", b'charset="x-bogus"']
    rng = random.Random(3464)
    for _ in range(400):
        data = bytearray(rng.choice(files))
        for _ in range(rng.randint(1, 8)):
            pos = rng.randrange(len(data) + 1)
            roll = rng.random()
            if roll < 0.3:
                data[pos:pos] = rng.choice(pieces)
            elif roll < 0.5:
                del data[pos:pos + rng.randint(1, 200)]
            elif roll < 0.6:
                del data[pos:]
            elif data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        result = parse_report(bytes(data))
        assert set(result) == {"report_type", "bounces", "error"}
        assert all(b["type"] in ("hard", "soft", "complaint") for b in result["bounces"])


# --- untrusted files: size, depth and part limits ------------------------------------------------

def nested_multiparts(depth: int) -> bytes:
    """A message whose multipart/mixed parts nest `depth` levels, the message being the first."""
    heads = "".join(f'Content-Type: multipart/mixed; boundary="b{i}"\n\n--b{i}\n' for i in range(depth - 1))
    tails = "".join(f"\n--b{i}--\n" for i in reversed(range(depth - 1)))
    return (heads + "Content-Type: text/plain\n\nhello\n" + tails).encode()


def nested_messages(depth: int) -> bytes:
    return b"Content-Type: message/rfc822\n\n" * (depth - 1) + b"Subject: innermost\n\nhello\n"


def forwarded(report: bytes, times: int) -> bytes:
    """The report attached (message/rfc822) to a forward, that forward to another ... (2 levels each)."""
    for _ in range(times):
        forward = EmailMessage()
        forward["Subject"] = "Fwd: Undelivered Mail Returned to Sender"
        forward.set_content("See the attached bounce.")
        forward.add_attachment(email.message_from_bytes(report))
        report = forward.as_bytes()
    return report


def refusal(data: bytes) -> str:
    with pytest.raises(MktError) as refused:
        parse_report(data)
    assert refused.value.status == 400
    return refused.value.message


@pytest.mark.parametrize("build", [nested_multiparts, nested_messages])
def test_thousands_of_nested_levels_are_refused_not_a_recursion_error(build: Any) -> None:
    # Before the limit: RecursionError (a traceback that ended the whole import) from about 1,000 levels.
    for depth in (5_000, 50_000):
        assert refusal(build(depth)) == TOO_DEEP == "The report nests MIME parts more than 16 levels deep."


@pytest.mark.parametrize("build", [nested_multiparts, nested_messages])
def test_the_depth_limit_is_exact(build: Any) -> None:
    assert parse_report(build(MAX_MIME_DEPTH))["error"] == NOT_A_REPORT  # read, and not a report
    assert refusal(build(MAX_MIME_DEPTH + 1)) == TOO_DEEP


def test_a_report_forwarded_within_the_depth_limit_is_read() -> None:
    # postfix_hard.eml nests 3 levels (report, delivery-status, its field blocks); each forward adds 2
    report = load("postfix_hard.eml")
    assert only(parse_report(forwarded(report, 6)))["email_address"] == "nobody@example.org"  # 15 levels
    assert refusal(forwarded(report, 7)) == TOO_DEEP


def test_a_huge_number_of_parts_is_refused_quickly() -> None:
    # 800,000 empty parts in 3.8 MiB: before the limit the email package spent minutes and GiBs on them.
    data = b'Content-Type: multipart/mixed; boundary="b"\n\n' + b"--b\n\n" * 800_000 + b"--b--\n"
    assert len(data) < MAX_REPORT_BYTES
    assert refusal(data) == TOO_MANY_PARTS == "The report has more than 1,000 MIME parts."


def test_the_part_limit_counts_every_part_and_every_delivery_status_block() -> None:
    def parts(n: int) -> bytes:  # the message and n - 1 parts
        return b'Content-Type: multipart/mixed; boundary="b"\n\n' + b"--b\n\nx\n" * (n - 1) + b"--b--\n"

    assert parse_report(parts(MAX_MIME_PARTS))["error"] == NOT_A_REPORT
    assert refusal(parts(MAX_MIME_PARTS + 1)) == TOO_MANY_PARTS
    block = b"Final-Recipient: rfc822; a@example.org\nAction: failed\nStatus: 5.1.1\n\n"
    dsn = load("postfix_hard.eml").replace(b"Final-Recipient: rfc822; nobody@example.org\n",
                                           block * MAX_MIME_PARTS + b"Final-Recipient: rfc822; nobody@example.org\n")
    assert refusal(dsn) == TOO_MANY_PARTS


def test_an_oversize_file_is_refused_without_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    report = load("postfix_hard.eml")
    notice = b"I'm sorry to have to inform you"
    exactly = report.replace(notice, notice + b"." * (MAX_REPORT_BYTES - len(report)))
    assert len(exactly) == MAX_REPORT_BYTES
    assert only(parse_report(exactly))["email_address"] == "nobody@example.org"
    monkeypatch.setattr(bounce_reports._BoundedParser, "feed", lambda self, data: pytest.fail("parsed"))
    assert refusal(exactly + b".") == TOO_LARGE == "The report is larger than 4 MiB."


def test_read_report_reads_one_byte_past_the_limit_at_most(tmp_path: Path) -> None:
    huge = tmp_path / "huge.eml"
    with huge.open("wb") as handle:
        handle.truncate(10 * MAX_REPORT_BYTES)  # sparse: costs no disk
    assert len(read_report(huge)) == MAX_REPORT_BYTES + 1
    assert read_report(REPORTS / "postfix_hard.eml") == load("postfix_hard.eml")
    for path, reason in ((tmp_path / "missing.eml", "No such file or directory"), (tmp_path, "Is a directory")):
        with pytest.raises(MktError, match=f"^The file cannot be read: {reason}.$"):
            read_report(path)
