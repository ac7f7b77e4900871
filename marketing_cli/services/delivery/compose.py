"""Building a campaign's messages fast: compile a variant once, fill it per recipient.

    variant = compile_variant(...)            # once per variant of a send
    raw = variant.build(recipient, values)    # per recipient: bytes ready for SMTP, DKIM-signed

Everything that is the same for every recipient is done in `compile_variant`: the
HTML's links are rewritten to tracking placeholders and the open pixel is added (when
the workspace tracks interactions), the plain-text part is made from that HTML once
(`mail_message.html_to_text`, which costs milliseconds), the subject, HTML and text are
compiled into merge-tag templates (`merge_render`), and the headers that never change
(From, Reply-To, MIME-Version, the multipart boundary) are encoded once; the templates are
`mail_message.CompiledEmail`, the same compilation test emails use. Per recipient,
`build` renders three templates with the recipient's values, quoted-printable-encodes
the two bodies (`binascii.b2a_qp`, C), joins bytes, and signs them (`dkim.DkimSigner`,
OpenSSL): given as header fields and body (`DkimSigner.sign_fields`), so the signer
neither parses the message back nor canonicalises the constant header fields again (done
once here). The message is RFC 5322 with CRLF line ends, as `email.policy.SMTP` writes it,
and parses back with the standard library's `email` package (the tests check both).
Addresses are written as SMTP carries them (kernel/addresses.py): a Unicode domain in its
IDNA form; a local part with non-ASCII characters as UTF-8 (RFC 6532), which only a
server with SMTPUTF8 takes (the transport decides, per message).

Tracked links: every `<a href>` whose URL is http(s) and holds no merge tag becomes
`{base}/t/c/{token}/{link_id}`; the tracking endpoint answers 302 with the original
URL. A link whose URL holds a merge tag differs per recipient and is left untracked.
The open pixel is `{base}/t/o/{token}`; the unsubscribe URL `{base}/t/u/{token}`
(CONTRACT section 7: all of them begin with the workspace's tracking base URL). Each path
carries a token of its own kind (path_tokens.py: `MessageTokens`), so the pixel's token
cannot unsubscribe or confirm anyone.
"""

from __future__ import annotations

import binascii
import html as html_lib
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from email.header import Header
from email.utils import formataddr, formatdate
from typing import Any

from marketing_cli.kernel.addresses import wire_address
from marketing_cli.kernel.links import HREF, trackable
from marketing_cli.kernel.merge_contexts import Values
from marketing_cli.services.delivery.bounce_reports import MKT_MESSAGE_HEADER as MESSAGE_HEADER  # bounces read it back
from marketing_cli.services.delivery.dkim import DkimSigner
from marketing_cli.services.delivery.message import CompiledEmail
from marketing_cli.services.delivery.path_tokens import MessageTokens

_BODY_END = re.compile(r"</body\s*>", re.IGNORECASE)
PIXEL = ('<img src="{{__open_url}}" width="1" height="1" alt="" '
         'style="display:block;border:0;width:1px;height:1px;overflow:hidden">')


def rewrite_links(html: str, link_ids: Mapping[str, int]) -> str:
    """Replace each trackable link by the per-recipient click placeholder of its link id."""
    def replace(match: re.Match[str]) -> str:
        url = html_lib.unescape(match.group(3)).strip()
        if not trackable(url) or url not in link_ids:
            return match.group(0)
        return f"{match.group(1)}{match.group(2)}{{{{__click_base}}}}/{link_ids[url]}{match.group(2)}"

    return HREF.sub(replace, html)


def message_urls(base: str, tokens: MessageTokens) -> dict[str, str]:
    """One recipient's URLs under the tracking base, each with its path's token: the action
    merge tags and the tracking placeholders (the view-online page renders with the same)."""
    return {"unsubscribe_url": f"{base}/t/u/{tokens.unsubscribe}", "preferences_url": f"{base}/t/u/{tokens.unsubscribe}",
            "view_online_url": f"{base}/t/v/{tokens.view}", "confirmation_url": f"{base}/t/confirm/{tokens.confirm}",
            "__click_base": f"{base}/t/c/{tokens.click}",
            "__open_url": f"{base}/t/o/{tokens.open}"}


def add_pixel(html: str) -> str:
    ends = list(_BODY_END.finditer(html))
    if not ends:
        return html + PIXEL
    at = ends[-1].start()
    return html[:at] + PIXEL + html[at:]


def _qp(text: str) -> bytes:
    """Quoted-printable with CRLF line ends (RFC 2045; `b2a_qp` writes LF). A lone CR (a merge
    tag's value may hold one) is a line end too: `b2a_qp` passes it through unencoded, and
    the signer (`sign_fields`) converts nothing, so a bare CR on the wire would be turned into
    CRLF by a receiving MTA after the body hash was taken over it."""
    encoded = binascii.b2a_qp(text.replace("\r\n", "\n").replace("\r", "\n").encode("utf-8"), istext=True)
    return encoded.replace(b"\n", b"\r\n")


def _header_value(text: str) -> str:
    """A header value in ASCII: RFC 2047 encoded words when it is not ASCII already."""
    if text.isascii():
        return " ".join(text.split())  # no line breaks can reach a header
    return Header(" ".join(text.split()), "utf-8", maxlinelen=998).encode(linesep="\r\n")  # (folded: CRLF)


_date: tuple[int, str] = (-1, "")  # (second, its Date header value): formatted once a second


def _date_now() -> str:
    """The Date header's value for now (RFC 5322, GMT), formatted once per second."""
    global _date
    second = int(time.time())
    if _date[0] != second:
        _date = (second, formatdate(second, usegmt=True))
    return _date[1]


@dataclass(frozen=True)
class Recipient:
    """What `build` needs of one recipient: its message row id, address and tokens (the
    X-Mkt-Message header carries the `report` one)."""

    message_id: int
    email: str
    tokens: MessageTokens


class CompiledVariant:
    """One variant of one send, ready to be filled per recipient."""

    def __init__(self, *, subject: str, html: str, from_name: str, from_address: str,
                 reply_to: tuple[str, str] | None, tracking_base: str, campaign_id: str,
                 track: bool, link_ids: Mapping[str, int], signer: DkimSigner | None) -> None:
        if track:
            html = add_pixel(rewrite_links(html, link_ids))
        self.parts = CompiledEmail(subject, html)
        self.base = tracking_base.rstrip("/")
        self.track = track
        self.campaign_id = campaign_id
        self.domain = from_address.rpartition("@")[2]
        self.envelope_from = from_address
        self.signer = signer
        self.boundary = "mkt-" + os.urandom(12).hex()
        fixed = [f"From: {formataddr((from_name, wire_address(from_address)))}"]
        if reply_to is not None:
            fixed.append(f"Reply-To: {formataddr((reply_to[0], wire_address(reply_to[1])))}")
        # UTF-8 only for a non-ASCII local part (RFC 6532)
        self._fixed = [line.encode("utf-8") for line in fixed]
        self._one_click = b"List-Unsubscribe-Post: List-Unsubscribe=One-Click"
        self._mime = [b"MIME-Version: 1.0",
                      f"Content-Type: multipart/alternative; boundary=\"{self.boundary}\"".encode("ascii")]
        self._text = (f"--{self.boundary}\r\nContent-Type: text/plain; charset=\"utf-8\"\r\n"
                      "Content-Transfer-Encoding: quoted-printable\r\n\r\n").encode("ascii")
        self._between = (f"\r\n--{self.boundary}\r\nContent-Type: text/html; charset=\"utf-8\"\r\n"
                         "Content-Transfer-Encoding: quoted-printable\r\n\r\n").encode("ascii")
        self._end = f"\r\n--{self.boundary}--\r\n".encode("ascii")
        if signer is not None:  # the constant fields split and canonicalised once
            self._signed_fixed = [signer.field(raw) for raw in self._fixed]
            self._signed_one_click = signer.field(self._one_click)
            self._signed_mime = [signer.field(raw) for raw in self._mime]

    def urls(self, tokens: MessageTokens) -> dict[str, str]:
        """The per-recipient URLs: actions (merge tags) and the tracking placeholders."""
        return message_urls(self.base, tokens)

    def smtp_message_id(self, message_id: int) -> str:
        return f"{message_id}.{self.campaign_id}@{self.domain}"

    def build(self, recipient: Recipient, values: Values, date: str | None = None,
              timestamp: int | None = None) -> bytes:
        """The signed message for one recipient (`values` already hold the URLs of `urls`;
        `timestamp`: the signature's t=, now by default)."""
        unsubscribe = values.text["unsubscribe_url"]
        subject, html, text = self.parts.render(values)
        to = f"To: {wire_address(recipient.email)}".encode("utf-8")  # RFC 6532 for a non-ASCII local part
        varying = (f"Subject: {_header_value(subject)}",
                   f"Date: {date or _date_now()}",
                   f"Message-ID: <{self.smtp_message_id(recipient.message_id)}>",
                   f"List-Unsubscribe: <{unsubscribe}>")
        tag = f"{MESSAGE_HEADER}: {recipient.tokens.report}".encode("ascii")
        body = self._text + _qp(text) + self._between + _qp(html) + self._end
        if self.signer is None:
            return b"\r\n".join([*self._fixed, to, *(line.encode("ascii") for line in varying), self._one_click,
                                  tag, *self._mime, b"", body])
        field = self.signer.field
        return self.signer.sign_fields(
            [*self._signed_fixed, field(to), *(field(line.encode("ascii")) for line in varying),
             self._signed_one_click, field(tag), *self._signed_mime], body, timestamp=timestamp)


def compile_variant(variant: Mapping[str, Any], sender: Mapping[str, Any], reply_to: Mapping[str, Any] | None, *,
                    tracking_base: str, campaign_id: str, track: bool, link_ids: Mapping[str, int],
                    signer: DkimSigner | None) -> CompiledVariant:
    """A CompiledVariant from a variant row, the sender identity and the campaign's reply-to."""
    reply = None
    if reply_to:
        reply = (reply_to.get("display_name") or "", f"{reply_to['local_part']}@{reply_to['domain_name']}")
    return CompiledVariant(
        subject=variant["subject"] or "", html=variant["body_html"] or "",
        from_name=sender["display_name"], from_address=f"{sender['local_part']}@{sender['domain_name']}",
        reply_to=reply, tracking_base=tracking_base, campaign_id=campaign_id, track=track,
        link_ids=link_ids, signer=signer,
    )
