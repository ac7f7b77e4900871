"""A real SMTP server for tests (aiosmtpd), optionally with STARTTLS and AUTH LOGIN/PLAIN.

    with SmtpServer() as server:                       # plain, no auth
        ... MKT_SMTP_URL = server.url ...
        server.messages  -> [Received(mail_from, rcpt_tos, message)]

    with SmtpServer(tls_dir=tmp_path, users={"u": "p"}) as server:   # STARTTLS required, login required
        server.url -> smtp://u:p@127.0.0.1:PORT?starttls=1&cafile=...

    SmtpServer(refuse=(addr,))    RCPT TO addr answered 550 (refused for good)
    SmtpServer(defer=(addr,))     RCPT TO addr answered 451 (try again later)
    SmtpServer(smtputf8=False)    no SMTPUTF8 (RFC 6531) offered; aiosmtpd's Controller offers it by default
    SmtpServer(push_back={"gmail.com": ("421 4.7.28 ...", 60.0)})
                                  RCPT TO any address at gmail.com answered with that reply for 60 s from
                                  the first one (a relay passing a provider's throttle on);
                                  `answers` keeps every (time.monotonic(), address, code) given to RCPT TO

The certificate is a self-signed one made with `cryptography` for 127.0.0.1; the URL
names it as the CA file to trust. A helper module, not a test module.
"""

from __future__ import annotations

import datetime
import email
import ipaddress
import socket
import ssl
import time
from dataclasses import dataclass
from email import policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any
from urllib.parse import quote


@dataclass
class Received:
    mail_from: str
    rcpt_tos: list[str]
    raw: bytes
    smtputf8: bool = False  # sent with MAIL FROM's SMTPUTF8 parameter

    @property
    def message(self) -> EmailMessage:
        return email.message_from_bytes(self.raw, policy=policy.default)  # type: ignore[return-value]


def self_signed_cert(folder: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                        x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "smtp-cert.pem", folder / "smtp-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Handler:
    def __init__(self, server: SmtpServer) -> None:
        self.server = server

    async def handle_RCPT(self, smtp: Any, session: Any, envelope: Any, address: str, options: Any) -> str:
        reply = self.server.pushed_back(address)
        if reply is not None:
            return reply
        if address in self.server.refuse:
            return "550 5.1.1 No such user here"
        if address in self.server.defer:
            return "451 4.3.0 Mailbox busy, try again later"
        self.server.answers.append((time.monotonic(), address, 250))
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, smtp: Any, session: Any, envelope: Any) -> str:
        self.server.messages.append(Received(envelope.mail_from, list(envelope.rcpt_tos),
                                             envelope.original_content or envelope.content, envelope.smtp_utf8))
        return "250 2.0.0 Queued"


class SmtpServer:
    def __init__(self, *, tls_dir: Path | None = None, users: dict[str, str] | None = None,
                 refuse: tuple[str, ...] = (), defer: tuple[str, ...] = (), smtputf8: bool = True,
                 push_back: dict[str, tuple[str, float]] | None = None) -> None:
        self.messages: list[Received] = []
        self.push_back = push_back or {}
        self.push_back_began: dict[str, float] = {}
        self.answers: list[tuple[float, str, int]] = []
        self.logins: list[str] = []
        self.refuse = refuse
        self.defer = defer
        self.users = users or {}
        self.port = free_port()
        self.cafile: Path | None = None
        kwargs: dict[str, Any] = {"enable_SMTPUTF8": smtputf8}
        if tls_dir is not None:
            self.cafile, key = self_signed_cert(tls_dir)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(self.cafile, key)
            kwargs.update(tls_context=context, require_starttls=True)
        if self.users:
            kwargs.update(authenticator=self._authenticate, auth_require_tls=tls_dir is not None,
                          auth_required=True)
        from aiosmtpd.controller import Controller

        self.controller = Controller(_Handler(self), hostname="127.0.0.1", port=self.port, **kwargs)

    def pushed_back(self, address: str) -> str | None:
        """The push-back reply for `address` while its domain's window lasts, else None."""
        domain = address.rpartition("@")[2].lower()
        if domain not in self.push_back:
            return None
        reply, seconds = self.push_back[domain]
        now = time.monotonic()
        if now - self.push_back_began.setdefault(domain, now) >= seconds:
            return None
        self.answers.append((now, address, int(reply[:3])))
        return reply

    def _authenticate(self, server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any) -> Any:
        from aiosmtpd.smtp import AuthResult

        login = auth_data.login.decode()
        ok = self.users.get(login) == auth_data.password.decode()
        if ok:
            self.logins.append(login)
        return AuthResult(success=ok, handled=False)

    @property
    def url(self) -> str:
        auth = ""
        if self.users:
            user, password = next(iter(self.users.items()))
            auth = f"{quote(user, safe='')}:{quote(password, safe='')}@"
        query = f"?starttls=1&cafile={quote(str(self.cafile))}" if self.cafile else ""
        return f"smtp://{auth}127.0.0.1:{self.port}{query}"

    def __enter__(self) -> SmtpServer:
        self.controller.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.controller.stop()
