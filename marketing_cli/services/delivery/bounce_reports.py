"""Bounce and complaint reports read from `.eml` files (`mkt bounces import`), with the
standard library's `email` package. Pure: no database; the bounces service applies them.

    parse_report(data: bytes) -> {"report_type", "bounces": [...], "error"}

Two kinds of report are understood:

- RFC 3464 delivery status notifications: `multipart/report; report-type=delivery-status`
  (or `global-delivery-status`, RFC 6533) holding a `message/delivery-status` part of one
  block of per-message fields and one block per recipient. A recipient block counts when:
    Action: failed and a 5.x.x Status         -> "hard"
    Action: failed and a 4.x.x Status         -> "soft"
    Action: delayed (any Status)              -> "soft"
  Other actions (delivered, relayed, expanded) are not failures and are skipped. When
  Status is missing or unreadable, the enhanced code (or else the basic 4xx/5xx reply) of
  the Diagnostic-Code is used; a failed recipient with no code at all is a hard bounce with
  status "5.0.0" (RFC 3464 defines "failed" as permanent). The address is the
  Original-Recipient when the report carries one (the address the message was sent to,
  before any forwarding), else the Final-Recipient.
- RFC 5965 abuse reports (feedback loops): `multipart/report; report-type=feedback-report`
  whose `message/feedback-report` part says `Feedback-Type: abuse` -> "complaint". The
  address is Original-Rcpt-To, else the returned message's To (feedback loops often
  redact both: the address is then None and attribution rests on the message headers).

The original message comes back as a `text/rfc822-headers` or `message/rfc822` part; its
`Message-ID` ("<...>" form) and the project's own `X-Mkt-Message` header (the sender's
per-recipient token) are reported with each entry so that the bounce can be attributed to
its campaign, variant and recipient. A DSN that returns neither (some MTAs return
nothing of the message) falls back to the `X-Original-Message-ID` of its per-message block
or its own `In-Reply-To` header, which MTAs that set it point at the bounced message.

Each entry: {"email_address": str | None (lower case), "type": "hard" | "soft" |
"complaint", "status": "5.1.1" | None (complaints), "diagnostic": str | None,
"bounce_class": the class of the Diagnostic-Code and Status (bounce_classes.py; None for a
complaint), "original_message_id": str | None, "mkt_message_token": str | None}.

Anything else (an ordinary message, a plain-text bounce without a delivery-status part,
an abuse report of another Feedback-Type, bytes that are not a message) is not an error:
the result has no entries and `error` says why.

Report files are untrusted: anyone can send mail to the return-path mailbox, and a file
is read before anything is known about it. So a file larger than MAX_REPORT_BYTES, or whose
MIME structure nests deeper than MAX_MIME_DEPTH or holds more than MAX_MIME_PARTS parts,
is refused with MktError(400) before the parser goes further (the standard library's
parser recurses once per nesting level: a few thousand levels raised RecursionError), and
`read_report(path)` never reads more than MAX_REPORT_BYTES + 1 bytes of a file.
"""

from __future__ import annotations

import email.policy
import email.utils
import os
import re
from email.feedparser import BytesFeedParser
from email.message import Message
from email.parser import HeaderParser
from email.utils import getaddresses
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.services.delivery.bounce_classes import classify

MKT_MESSAGE_HEADER = "X-Mkt-Message"

MAX_REPORT_BYTES = 4 * 1024 * 1024
"""4 MiB. A report is a few KiB: the MTA's notice, the status fields and the returned
headers or a truncated copy of the message (Postfix returns at most 50,000 bytes, Exim
100 KiB by default); even a whole copy of a typical campaign message (tens of KiB; Gmail
clips messages past 102 KiB) fits many times over. What a file costs the email package
depends on its shape more than its size: on the 2-core machine at load 15, 4 MiB of
one-word header fields (the costliest shape found) took 10.6 s and 200 MiB, 4 MiB of short
lines 3.7 s; at 16 MiB they took 50 s and 765 MiB. A larger report fails with its name and
this reason; `mkt bounces add` records that bounce by hand."""

MAX_MIME_DEPTH = 16
"""Levels of MIME nesting, the whole message counting as the first. A DSN nests 4
(multipart/report > message/rfc822 > multipart/alternative > text/html), a forwarded one 6,
a forward of a forward 8. The parser recurses once per level and tests every line against
the boundary of every open level, so depth multiplies the work of each line; 16 keeps it
small and the recursion far from Python's 1,000-frame limit."""

MAX_MIME_PARTS = 1_000
"""MIME parts (the message, every part, every field block of a delivery-status part) in one
file. A DSN has 3 parts, a block per recipient and the returned message's parts (3 for
mkt's): a report of a hundred recipients stays under 120. The email package spends about
0.1 ms and a few KiB on each part: a 5 MiB file of a million empty parts took 79 s and
334 MiB before this limit, 1,000 parts take about 0.1 s."""

TOO_LARGE = f"The report is larger than {MAX_REPORT_BYTES // (1024 * 1024)} MiB."
TOO_DEEP = f"The report nests MIME parts more than {MAX_MIME_DEPTH} levels deep."
TOO_MANY_PARTS = f"The report has more than {MAX_MIME_PARTS:,} MIME parts."
NOT_A_REPORT = "Not a delivery status notification (RFC 3464) or abuse report (RFC 5965)."
NO_STATUS_PART = "The delivery status notification has no message/delivery-status part."
NO_FEEDBACK_PART = "The feedback report has no message/feedback-report part."
NOT_ABUSE = "The feedback report is not an abuse report (Feedback-Type: {})."

_STATUS = re.compile(r"\b([245])\.(\d{1,3})\.(\d{1,3})\b")
_SMTP_REPLY = re.compile(r"\b([45])\d\d\b")
_STATUS_TYPES = ("delivery-status", "global-delivery-status")


def read_report(path: str | os.PathLike[str]) -> bytes:
    """A report file's bytes, reading at most MAX_REPORT_BYTES + 1 of them (so parse_report
    can tell it is too large without the whole of a huge file in memory)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(MAX_REPORT_BYTES + 1)
    except OSError as exc:
        raise MktError(400, f"The file cannot be read: {exc.strerror or exc}.") from None


def parse_report(data: bytes) -> dict[str, Any]:
    """The failed recipients or the complaint in one report file (see the module docstring).
    MktError(400) for a file past MAX_REPORT_BYTES, MAX_MIME_DEPTH or MAX_MIME_PARTS."""
    if not isinstance(data, bytes | bytearray) or not data.strip():
        return _result(None, [], NOT_A_REPORT)
    if len(data) > MAX_REPORT_BYTES:
        raise MktError(400, TOO_LARGE)
    parser = _BoundedParser()
    parser.feed(bytes(data))
    message = parser.close()
    report = _find_report(message)
    if report is None:
        return _result(None, [], NOT_A_REPORT)
    report_type = _report_type(report)
    original = _original_headers(report)
    if report_type in _STATUS_TYPES:
        return _delivery_status(report, original)
    return _feedback(report, original)


class _BoundedParser(BytesFeedParser):
    """The standard library's parser (what `email.message_from_bytes` runs), stopped with
    MktError(400) at the part that would pass MAX_MIME_PARTS or MAX_MIME_DEPTH.

    FeedParser creates every part, and descends into it, through `_new_message`, with the
    chain of open parts in `_msgstack` (CPython since 2.4, still so on its main branch): counting
    there stops a part before the parser recurses into it. The tests feed it thousands of
    levels and parts, so a CPython that renamed the hook would fail them, not pass silently.
    """

    def __init__(self) -> None:
        super().__init__(policy=email.policy.compat32)
        self.parts = 0

    def _new_message(self) -> None:
        self.parts += 1
        if self.parts > MAX_MIME_PARTS:
            raise MktError(400, TOO_MANY_PARTS)
        if len(self._msgstack) >= MAX_MIME_DEPTH:
            raise MktError(400, TOO_DEEP)
        super()._new_message()


def _result(report_type: str | None, bounces: list[dict[str, Any]], error: str | None) -> dict[str, Any]:
    return {"report_type": report_type, "bounces": bounces, "error": error}


def _find_report(message: Message) -> Message | None:
    """The multipart/report part (the whole message, or one part of a forwarded one)."""
    for part in message.walk():
        if part.get_content_type() == "multipart/report" and _report_type(part) in (*_STATUS_TYPES, "feedback-report"):
            return part
    return None


def _report_type(part: Message) -> str:
    return _text(email.utils.collapse_rfc2231_value(part.get_param("report-type", "", header="content-type"))).lower()


def _delivery_status(report: Message, original: Message | None) -> dict[str, Any]:
    blocks = next((_blocks(part) for part in report.walk()
                   if part.get_content_type() in ("message/delivery-status", "message/global-delivery-status")), None)
    report_type = "delivery-status"
    if not blocks:
        return _result(report_type, [], NO_STATUS_PART)
    attribution = _attribution(original)
    if attribution["original_message_id"] is None:  # no returned headers: what the MTA says
        attribution["original_message_id"] = message_id(
            _text(blocks[0].get("X-Original-Message-ID")) or _text(report.get("In-Reply-To")))
    bounces = []
    for block in blocks:  # the per-message block has no Action: skipped like a success
        entry = _recipient(block)
        if entry is not None:
            bounces.append({**entry, **attribution})
    return _result(report_type, bounces, None)


def _recipient(block: Message) -> dict[str, Any] | None:
    """One per-recipient block as an entry, or None when it reports no failure."""
    action = _text(block.get("Action")).lower().split("(")[0].strip()
    if action not in ("failed", "delayed"):
        return None
    diagnostic = _text(block.get("Diagnostic-Code")) or None
    status = _status(_text(block.get("Status"))) or _status(diagnostic or "")
    if status is None and diagnostic and (reply := _SMTP_REPLY.search(diagnostic)):
        status = f"{reply.group(1)}.0.0"
    if status is None or status.startswith("2"):
        if action == "delayed":
            status = "4.0.0"
        elif status is None:
            status = "5.0.0"
        else:
            return None
    kind = "hard" if action == "failed" and status.startswith("5") else "soft"
    address = _typed_address(block.get("Original-Recipient")) or _typed_address(block.get("Final-Recipient"))
    if address is None and block.get("Original-Recipient") is None and block.get("Final-Recipient") is None:
        return None
    return {"email_address": address, "type": kind, "status": status, "diagnostic": diagnostic,
            "bounce_class": classify(diagnostic, status)}


def _feedback(report: Message, original: Message | None) -> dict[str, Any]:
    report_type = "feedback-report"
    fields = next((part for part in report.walk() if part.get_content_type() == "message/feedback-report"), None)
    if fields is None:
        return _result(report_type, [], NO_FEEDBACK_PART)
    block = _feedback_fields(fields)
    feedback_type = _text(block.get("Feedback-Type")).lower()
    if feedback_type != "abuse":
        return _result(report_type, [], NOT_ABUSE.format(feedback_type or "missing"))
    address = _address(_text(block.get("Original-Rcpt-To")))
    if address is None and original is not None:
        address = next(filter(None, (_address(a) for _, a in getaddresses(original.get_all("To", [])))), None)
    entry = {"email_address": address, "type": "complaint", "status": None, "diagnostic": None, "bounce_class": None}
    return _result(report_type, [{**entry, **_attribution(original)}], None)


def _original_headers(report: Message) -> Message | None:
    """The returned message's headers (text/rfc822-headers or message/rfc822), if any."""
    for part in report.walk():
        kind = part.get_content_type()
        if kind in ("message/rfc822", "message/global"):
            payload = part.get_payload()
            if isinstance(payload, list) and payload:
                return payload[0]
        elif kind in ("text/rfc822-headers", "text/global-headers"):
            raw = part.get_payload(decode=True) or b""
            return HeaderParser(policy=email.policy.compat32).parsestr(raw.decode("utf-8", "replace"))
    return None


def _attribution(original: Message | None) -> dict[str, str | None]:
    if original is None:
        return {"original_message_id": None, "mkt_message_token": None}
    return {"original_message_id": message_id(_text(original.get("Message-ID"))),
            "mkt_message_token": _text(original.get(MKT_MESSAGE_HEADER)) or None}


def message_id(value: str) -> str | None:
    """A Message-ID header value in its "<id@host>" form (brackets added), or None."""
    value = "".join(value.split())
    if not value:
        return None
    match = re.search(r"<[^<>]+>", value)
    return match.group(0) if match else f"<{value.strip('<>')}>"


def _blocks(part: Message) -> list[Message]:
    """The field blocks of a delivery-status part: per-message first, then per recipient."""
    payload = part.get_payload()
    encoding = _text(part.get("Content-Transfer-Encoding")).lower()
    if encoding in ("base64", "quoted-printable"):
        # the email package split the still-encoded text into "blocks": undo that, decode
        encoded = part.as_bytes(policy=email.policy.compat32).partition(b"\n\n")[2]
        text = _decode(encoded, encoding)
    elif part.get_content_type() == "message/delivery-status" and isinstance(payload, list):
        return [block for block in payload if isinstance(block, Message)]  # split by the email package
    elif isinstance(payload, list) and payload and isinstance(payload[0], Message):
        # other message/* types parse as one message: the per-message block as its headers,
        # the recipient blocks as its body (UTF-8 in message/global-delivery-status)
        first = payload[0]
        body = first.get_payload(decode=True) or b""
        text = "".join(f"{k}: {v}\n" for k, v in first.items()) + "\n" + body.decode("utf-8", "replace")
    else:
        text = (part.get_payload(decode=True) or b"").decode("utf-8", "replace")
    parser = HeaderParser(policy=email.policy.compat32)
    return [parser.parsestr(chunk.strip() + "\n") for chunk in re.split(r"\r?\n[ \t]*\r?\n", text) if chunk.strip()]


def _decode(encoded: bytes, encoding: str) -> str:
    import binascii
    import quopri

    try:
        raw = binascii.a2b_base64(encoded) if encoding == "base64" else quopri.decodestring(encoded)
    except (binascii.Error, ValueError):
        return ""
    return raw.decode("utf-8", "replace")


def _feedback_fields(part: Message) -> Message:
    payload = part.get_payload()
    if isinstance(payload, list) and payload and isinstance(payload[0], Message):
        return payload[0]
    raw = part.get_payload(decode=True) or b""
    return HeaderParser(policy=email.policy.compat32).parsestr(raw.decode("utf-8", "replace"))


def _typed_address(value: Any) -> str | None:
    """`rfc822; user@example.com` -> the address; other address types -> None."""
    text = _text(value)
    kind, sep, address = text.partition(";")
    if not sep:
        return _address(text)
    return _address(address) if kind.strip().lower() in ("rfc822", "utf-8") else None


def _address(value: str) -> str | None:
    from marketing_cli.services.contacts.values import normalize_email

    value = value.strip().strip("<>").strip()
    if "@" not in value:
        return None
    try:
        return normalize_email(value)
    except ValueError:
        return None


def _status(text: str) -> str | None:
    match = _STATUS.search(text)
    return ".".join(match.groups()) if match else None


def _text(value: Any) -> str:
    """A header value as one line of text (folds joined; undecodable headers as best we can)."""
    if value is None:
        return ""
    return " ".join(str(value).split())
