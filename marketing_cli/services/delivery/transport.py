"""Where mail goes: an SMTP server or the outbox folder, and which of the two a process uses.

    smtp://[user:password@]host[:port][?starttls=1]     plain SMTP (port 25), STARTTLS when asked
    smtps://[user:password@]host[:port]                  SMTP over TLS (port 465)

Optional query members: `cafile=PATH` (trust this CA bundle for TLS, e.g. a local
server's self-signed certificate), `verify=0` (no certificate check; local testing only),
`timeout=SECONDS` (default 30). User and password are percent-decoded.

The outbox writes every message as `<time>-<random>.eml` to a folder: nothing leaves the
machine. `select_transport` picks one, first match wins:

    1. an SMTP URL given to the process: `--smtp-url` (serve, campaigns test) or MKT_SMTP_URL
    2. the workspace's stored transport (`mkt mail transport set`, services/delivery/transport_settings.py)
    3. an outbox folder given to the process: `--outbox` (serve) or MKT_OUTBOX
    4. the outbox folder `outbox/` beside the database file (a fresh install mails nobody)

as CONTRACT section 3 has it: the flag and MKT_SMTP_URL override a stored transport; the
outbox folder of the process is where mail goes when none of the three names a server
(a stored "outbox" without a folder of its own writes there too).

and answers a `Selection` that says which and why (`source`), and prints its URL only with the
password masked. `Selection.open()` (or `open_transport(...)`) gives an object with
`send(message, sender, recipients) -> str` and `close()` (also a context manager). The SMTP
transport keeps its connection open between messages (the sending work sends thousands
through one) and reconnects once if the server dropped it. Failures are `TransportError`;
`permanent` is True for a 5xx refusal, and for a message the server cannot take at all.

Addresses (kernel/addresses.py): a domain in Unicode goes out in its IDNA form. A message
that needs SMTPUTF8 (RFC 6531: an address with non-ASCII characters before the @, in the
envelope or in a header) is sent with the SMTPUTF8 parameter when the server offers the
extension, and is refused (permanent, that message only) when it does not. A body that is
not 7-bit goes with BODY=8BITMIME when the server offers it.
"""

from __future__ import annotations

import os
import re
import smtplib
import ssl
import uuid
from dataclasses import dataclass, field
from email.message import EmailMessage
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit, urlunsplit

from marketing_cli.kernel import clock
from marketing_cli.kernel.addresses import NO_SMTPUTF8, wire_address


class TransportError(Exception):
    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


@dataclass(frozen=True)
class SmtpSettings:
    host: str
    port: int
    tls: bool          # smtps://: TLS from the first byte
    starttls: bool
    username: str | None
    password: str | None = field(repr=False)  # a secret: never in a log line or a traceback
    cafile: str | None
    verify: bool
    timeout: float


_TRUE = ("1", "true", "yes", "on")


def parse_smtp_url(url: str) -> SmtpSettings:
    """MKT_SMTP_URL read into settings; ValueError when it is not an smtp:// or smtps:// URL."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
        raise ValueError(f"MKT_SMTP_URL must look like smtp://host:port or smtps://host:port, not {mask_url(url)!r}")
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    tls = parts.scheme == "smtps"
    try:
        port = parts.port or (465 if tls else 25)
        timeout = float(query.get("timeout", 30))
    except ValueError:
        raise ValueError(f"MKT_SMTP_URL has a bad port or timeout: {mask_url(url)!r}") from None
    return SmtpSettings(
        host=parts.hostname, port=port, tls=tls,
        starttls=not tls and query.get("starttls", "0").lower() in _TRUE,
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
        cafile=query.get("cafile"), verify=query.get("verify", "1").lower() in _TRUE, timeout=timeout)


def _ssl_context(settings: SmtpSettings) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=settings.cafile)
    if not settings.verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


# An envelope address smtplib need not parse: an addr-spec without blanks, quotes, brackets,
# comments or line breaks, as kernel/addresses.wire_address gives a checked address.
_PLAIN_ADDRESS = re.compile(r"[^\s<>()\[\]\\\",;:@]+@[^\s<>()\[\]\\\",;:@]+")


class _Commands:
    """smtplib's MAIL, RCPT and DATA without its per-message parsing (mixed into smtplib.SMTP
    and SMTP_SSL; `sendmail` is smtplib's own, with its answers and errors).

    smtplib quotes every envelope address through `email.utils.parseaddr` (about 17 us a
    message for the two) and dot-stuffs the message with a multi-line regular expression.
    Here a plain addr-spec (`_PLAIN_ADDRESS`) is written `<address>` as it is, which is what
    `quoteaddr` makes of it; anything else goes through smtplib's quoting. The dot-stuffing
    is the same rule (RFC 5321 section 4.5.2: a line that begins with a period gets one more)
    as two byte replacements in C."""

    def mail(self, sender: str, options: Any = ()) -> tuple[int, bytes]:
        if not _PLAIN_ADDRESS.fullmatch(sender):
            return super().mail(sender, options)  # type: ignore[misc]
        optionlist = ""
        if options and self.does_esmtp:  # type: ignore[attr-defined]
            if any(x.lower() == "smtputf8" for x in options):
                if not self.has_extn("smtputf8"):  # type: ignore[attr-defined]
                    raise smtplib.SMTPNotSupportedError("SMTPUTF8 not supported by server")
                self.command_encoding = "utf-8"
            optionlist = " " + " ".join(options)
        self.putcmd("mail", f"FROM:<{sender}>{optionlist}")  # type: ignore[attr-defined]
        return self.getreply()  # type: ignore[attr-defined, no-any-return]

    def rcpt(self, recip: str, options: Any = ()) -> tuple[int, bytes]:
        if not _PLAIN_ADDRESS.fullmatch(recip):
            return super().rcpt(recip, options)  # type: ignore[misc]
        optionlist = " " + " ".join(options) if options and self.does_esmtp else ""  # type: ignore[attr-defined]
        self.putcmd("rcpt", f"TO:<{recip}>{optionlist}")  # type: ignore[attr-defined]
        return self.getreply()  # type: ignore[attr-defined, no-any-return]

    def data(self, msg: bytes | str) -> tuple[int, bytes]:
        if not isinstance(msg, bytes):
            return super().data(msg)  # type: ignore[misc]
        self.putcmd("data")  # type: ignore[attr-defined]
        code, reply = self.getreply()  # type: ignore[attr-defined]
        if code != 354:
            raise smtplib.SMTPDataError(code, reply)
        stuffed = msg.replace(b"\n.", b"\n..")
        if stuffed[:1] == b".":
            stuffed = b"." + stuffed
        self.send(stuffed + (b".\r\n" if stuffed[-2:] == b"\r\n" else b"\r\n.\r\n"))  # type: ignore[attr-defined]
        return self.getreply()  # type: ignore[attr-defined, no-any-return]


class _Smtp(_Commands, smtplib.SMTP):
    pass


class _SmtpSsl(_Commands, smtplib.SMTP_SSL):
    pass


class SmtpTransport:
    """One SMTP connection, opened on first send and kept for the next ones."""

    def __init__(self, settings: SmtpSettings) -> None:
        self.settings = settings
        self._smtp: smtplib.SMTP | None = None

    def _connect(self) -> smtplib.SMTP:
        s = self.settings
        try:
            if s.tls:
                smtp: smtplib.SMTP = _SmtpSsl(s.host, s.port, timeout=s.timeout, context=_ssl_context(s))
            else:
                smtp = _Smtp(s.host, s.port, timeout=s.timeout)
            try:
                smtp.ehlo()
                if s.starttls:
                    smtp.starttls(context=_ssl_context(s))
                    smtp.ehlo()
                if s.username:
                    smtp.login(s.username, s.password or "")
            except BaseException:
                smtp.close()
                raise
        except smtplib.SMTPAuthenticationError as exc:
            raise TransportError(f"the SMTP server refused the login ({exc.smtp_code})") from None
        except (OSError, smtplib.SMTPException) as exc:
            raise TransportError(f"cannot reach the SMTP server {s.host}:{s.port}: {exc}") from None
        return smtp

    def send(self, message: EmailMessage | bytes, sender: str, recipients: list[str]) -> str:
        """Hand one message to the server; returns the server's queue answer. TransportError on failure."""
        data = message if isinstance(message, bytes) else message.as_bytes()
        try:
            envelope = [wire_address(a) for a in (sender, *recipients)]
        except ValueError as exc:
            raise TransportError(f"the address cannot be sent: {exc}", permanent=True) from None
        utf8 = not _header_block(data).isascii() or not all(a.isascii() for a in envelope)
        for attempt in (1, 2):
            if self._smtp is None:
                self._smtp = self._connect()
            if utf8 and not self._smtp.has_extn("smtputf8"):
                raise TransportError(NO_SMTPUTF8, permanent=True)
            options = ["SMTPUTF8"] if utf8 else []
            if not data.isascii() and self._smtp.has_extn("8bitmime"):
                options.append("BODY=8BITMIME")
            try:
                refused = self._smtp.sendmail(envelope[0], envelope[1:], data, mail_options=options)
            except smtplib.SMTPServerDisconnected:
                self._smtp = None
                if attempt == 2:
                    raise TransportError("the SMTP server closed the connection") from None
                continue
            except smtplib.SMTPRecipientsRefused as exc:
                code, text = next(iter(exc.recipients.values()))
                raise TransportError(f"the SMTP server refused the recipient: {code} {_text(text)}",
                                     permanent=500 <= code < 600) from None
            except smtplib.SMTPResponseException as exc:
                self.close()
                raise TransportError(f"the SMTP server refused the message: {exc.smtp_code} {_text(exc.smtp_error)}",
                                     permanent=500 <= exc.smtp_code < 600) from None
            except (OSError, smtplib.SMTPException) as exc:
                self.close()
                raise TransportError(f"sending failed: {exc}") from None
            except UnicodeError:  # an address or command SMTP cannot carry; the session is mid-message
                self.close()
                raise TransportError(NO_SMTPUTF8, permanent=True) from None
            if refused:
                code, text = next(iter(refused.values()))
                raise TransportError(f"the SMTP server refused a recipient: {code} {_text(text)}",
                                     permanent=500 <= code < 600)
            return "accepted"
        raise AssertionError("unreachable")

    def close(self) -> None:
        smtp, self._smtp = self._smtp, None
        if smtp is not None:
            try:
                smtp.quit()
            except (OSError, smtplib.SMTPException):
                smtp.close()

    def __enter__(self) -> SmtpTransport:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _header_block(data: bytes) -> bytes:
    end = data.find(b"\r\n\r\n")
    if end < 0:
        end = data.find(b"\n\n")
    return data if end < 0 else data[:end]


def _text(raw: bytes | str) -> str:
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


class OutboxTransport:
    """Each message becomes one .eml file in a folder (created on first use)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)

    def send(self, message: EmailMessage | bytes, sender: str, recipients: list[str]) -> str:
        data = message if isinstance(message, bytes) else message.as_bytes()
        stamp = clock.now().replace(":", "").replace("-", "").replace(".", "")
        path = self.folder / f"{stamp}-{uuid.uuid4().hex[:12]}.eml"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            temporary = path.with_suffix(".tmp")
            temporary.write_bytes(data)
            temporary.replace(path)  # a reader never sees half a file
        except OSError as exc:
            raise TransportError(f"cannot write to the outbox {self.folder}: {exc.strerror}") from None
        return str(path)

    def close(self) -> None:
        pass

    def __enter__(self) -> OutboxTransport:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def mask_url(url: str) -> str:
    """The URL with its password shown as `****`: the only form of an SMTP URL that is printed."""
    text = url.strip()
    try:
        parts = urlsplit(text)
    except ValueError:
        return "<not a URL>"
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return text
    return urlunsplit(parts._replace(netloc=f"{userinfo.split(':', 1)[0]}:****@{hostport}"))


def default_outbox_folder(db_path: str | os.PathLike[str] | None) -> Path:
    """`outbox/` beside the database file (the working directory for an in-memory database or a PostgreSQL URL)."""
    return (Path(db_path).resolve().parent if db_path else Path.cwd()) / "outbox"


def outbox_folder(db_path: str | os.PathLike[str] | None) -> Path:
    """MKT_OUTBOX, else `outbox/` beside the database file."""
    env = os.environ.get("MKT_OUTBOX")
    if env:
        return Path(env)
    return default_outbox_folder(db_path)


def database_file(conn: Any) -> str | None:
    """The main database file of a connection (None for an in-memory one)."""
    for row in conn.execute("PRAGMA database_list"):
        if row[1] == "main":
            return row[2] or None
    return None


SMTP_ENV = "MKT_SMTP_URL"
OUTBOX_ENV = "MKT_OUTBOX"
SOURCES = (SMTP_ENV, OUTBOX_ENV, "workspace", "default")


@dataclass(frozen=True)
class Selection:
    """The transport a process uses (for one workspace) and why: `source` is one of SOURCES."""

    kind: str                      # "smtp" or "outbox"
    source: str
    smtp_url: str | None = None    # with its password: print `shown_url`, never this
    folder: Path | None = None     # the outbox folder, absolute

    @property
    def shown_url(self) -> str | None:
        return mask_url(self.smtp_url) if self.smtp_url else None

    def open(self) -> SmtpTransport | OutboxTransport:
        """The transport itself; ValueError when the SMTP URL is not one."""
        if self.kind == "smtp":
            return SmtpTransport(parse_smtp_url(self.smtp_url or ""))
        return OutboxTransport(self.folder or Path("outbox"))

    def __repr__(self) -> str:  # never the password
        return f"Selection(kind={self.kind!r}, source={self.source!r}, url={self.shown_url!r}, folder={self.folder!r})"


def select_transport(*, smtp_url: str | None = None, stored: tuple[str, str | None] | None = None,
                     db_path: str | os.PathLike[str] | None = None) -> Selection:
    """The transport of this process for a workspace (the order is in the module docstring).

    `smtp_url` is a command's `--smtp-url`; `stored` the workspace's ("smtp", url) or
    ("outbox", folder or None), None when it stored nothing.
    """
    url = smtp_url or os.environ.get(SMTP_ENV)
    if url:
        return Selection("smtp", SMTP_ENV, smtp_url=url)
    folder = os.environ.get(OUTBOX_ENV)
    if stored is not None:
        kind, value = stored
        if kind == "smtp" and value:
            return Selection("smtp", "workspace", smtp_url=value)
        if value:
            return Selection("outbox", "workspace", folder=Path(value))
    if folder:
        return Selection("outbox", OUTBOX_ENV, folder=Path(folder).absolute())
    return Selection("outbox", "workspace" if stored is not None else "default", folder=default_outbox_folder(db_path))


def open_transport(*, smtp_url: str | None = None, db_path: str | os.PathLike[str] | None = None
                   ) -> SmtpTransport | OutboxTransport:
    """The transport of a process without a workspace: `smtp_url` or MKT_SMTP_URL when set, else the outbox folder."""
    return select_transport(smtp_url=smtp_url, db_path=db_path).open()
