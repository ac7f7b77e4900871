"""Building an email: a MIME message with an HTML part and a plain-text part made from it.

    build_message(...) -> email.message.EmailMessage (policy SMTP: CRLF, folded headers)

        multipart/alternative
          text/plain; charset=utf-8   html_to_text(html)
          text/html;  charset=utf-8   the rendered HTML

Headers: From (the sender identity), To, Subject, Date (UTC), Message-ID on the sender's
domain, Reply-To when given, and any extra headers the caller passes (List-Unsubscribe...).
Addresses go in as SMTP carries them (kernel/addresses.py): a Unicode domain in IDNA form;
a message with a non-ASCII local part is written with policy SMTPUTF8 (RFC 6532: UTF-8
headers), which the transport sends only to a server with SMTPUTF8. (Policy SMTP would
turn such an address into an encoded word, which is no address at all.)
"""

from __future__ import annotations

from collections.abc import Mapping
from email import policy
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid
from typing import Any

from marketing_cli.kernel import clock
from marketing_cli.kernel.addresses import ascii_domain, needs_smtputf8, wire_address
from marketing_cli.kernel.html_text import html_to_text


def address(display_name: str | None, local_part: str, domain_name: str) -> Address:
    return Address(display_name or "", local_part, ascii_domain(domain_name))


def build_message(*, sender: Address, to: str, subject: str, html: str, text: str | None = None,
                  reply_to: Address | None = None, headers: Mapping[str, str] | None = None,
                  message_id: str | None = None) -> EmailMessage:
    """A multipart/alternative message ready for SMTP (bytes: `bytes(message)` or `as_bytes()`)."""
    utf8 = needs_smtputf8(to) or any(a is not None and not a.username.isascii() for a in (sender, reply_to))
    message = EmailMessage(policy=policy.SMTPUTF8 if utf8 else policy.SMTP)
    message["From"] = sender
    message["To"] = wire_address(to)
    message["Subject"] = subject
    message["Date"] = format_datetime(clock.utcnow())
    message["Message-ID"] = message_id or make_msgid(domain=sender.domain)
    if reply_to is not None:
        message["Reply-To"] = reply_to
    for name, value in (headers or {}).items():
        message[name] = value
    message.set_content(text if text is not None else html_to_text(html), subtype="plain", charset="utf-8")
    message.add_alternative(html, subtype="html", charset="utf-8")
    return message


class CompiledEmail:
    """A variant compiled once for many recipients: subject, HTML and plain-text templates.

    The plain-text template is made ONCE from the HTML source (tags survive the conversion
    as text), so a recipient costs three template renders and no HTML parsing:
    `render(values) -> (subject, html, text)`. Subjects lose line breaks (no header can be
    injected through a value).
    """

    __slots__ = ("subject", "html", "text")

    def __init__(self, subject: str, html: str) -> None:
        from marketing_cli.kernel.merge import compile_template

        self.subject = compile_template(subject)
        self.html = compile_template(html, html=True)
        self.text = compile_template(html_to_text(html))

    def render(self, values: Any) -> tuple[str, str, str]:
        return " ".join(self.subject.render(values).split()), self.html.render(values), self.text.render(values)
