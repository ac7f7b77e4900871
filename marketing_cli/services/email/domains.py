"""Sending domains: `mkt domains` and /v1/domains.

Adding a domain generates its DKIM key pair (RSA-2048; the PKCS#8 PEM private key stays in
the row for the sender to sign with, no answer ever shows it) and the DNS records the
operator must publish, in this order:

    purpose      type   host                          value                              mandatory
    spf          TXT    <domain>                      v=spf1 <MKT_SPF_MECHANISMS> ~all  no
    dkim         TXT    <selector>._domainkey.<dom>   v=DKIM1; k=rsa; p=<SPKI DER b64>  yes
    dmarc        TXT    _dmarc.<domain>               v=DMARC1; p=none                   no
    return_path  CNAME  <domain_code>.<domain>        <domain>                           no

Only DKIM is mandatory: it is the one record no one else can publish, and a valid DKIM
signature with `d=` the sender's domain is what DMARC alignment needs. The others are
recommended and checked the same way (docs/sending-domains.md says why each exists).
How a published record is matched lives in services/dns_check.py.

Reserved names (`news.example.test`, `mail.localhost`, `example.com`: RESERVED_NAMES) are
accepted like any other: they are what a staging setup against a local SMTP catcher uses.
No one can publish their records in public DNS, so mail from them can never be delivered
publicly; every Domain says so (`reserved_name`). Such a domain is made sendable by the
operator, without DNS: `mkt domains mark-verified` (CLI only: no API key can do it).

A domain is `verified` when its mandatory records were found by the last DNS check, or
when the operator marked it (`operator_verified_at`); the mark holds whatever a later DNS
check finds, until the operator takes it back. `verified_by` tells which of the two it is.
"""

from __future__ import annotations

import base64
import ipaddress
import logging
import os
import re
import secrets
import sqlite3
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.ids import parse_int_id
from marketing_cli.kernel.inputs import member, require_object
from marketing_cli.kernel.numbers import parse_digits
from marketing_cli.services.account import billing
from marketing_cli.storage.db import transaction

INVALID_BODY = "Invalid request body."
INVALID_ID = "Please provide a valid domain ID."
NOT_FOUND = "We were unable to find the domain."
NAME_REQUIRED = "Please provide a domain name."
INVALID_NAME = "Please provide a valid domain name, such as example.com."
DUPLICATE = "The domain {name} has already been added to this workspace."
BILLING_LIMIT = "Billing limit error"

NAME_MEMBERS = ("domain_name", "domain", "name")
DEFAULT_SPF_MECHANISMS = "a mx"
DKIM_SELECTOR = "mkt"
MAX_NAME = 230  # DNS allows 253: room for `mkt<n>._domainkey.` and the return-path label in front
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")

# Names no one can publish in public DNS, and every name under them: reserved for tests
# and documentation (RFC 2606 and 6761: test, example, invalid, localhost, and the
# second-level example.com/.net/.org), multicast DNS (RFC 6762: local), Tor (RFC 7686:
# onion), non-DNS namespaces (RFC 9476: alt), infrastructure and home networks (RFC 3172
# and 8375: arpa, home.arpa), private networks (ICANN, 2024: internal).
RESERVED_NAMES = ("test", "example", "invalid", "localhost", "example.com", "example.net", "example.org",
                  "local", "onion", "alt", "arpa", "internal")

log = logging.getLogger("mkt.domains")


def normalise_domain_name(value: Any) -> str:
    """A domain name as DNS stores it: IDNA (xn--) form, lower case, no trailing dot.

    Refused: IP addresses, single labels, labels that are not letters, digits and inner
    hyphens (no underscores), numeric top-level labels, names over 230 characters
    (every record's host, `mkt._domainkey.<name>` included, must fit DNS's 253).
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        raise MktError(400, NAME_REQUIRED)
    if not isinstance(value, str):
        raise MktError(400, INVALID_NAME)
    import idna

    text = value.strip()
    text = text[:-1] if text.endswith(".") else text
    if len(text) > 4 * MAX_NAME:  # far past any name; spares the IDNA codec a huge input
        raise MktError(400, INVALID_NAME)
    try:
        ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        pass
    else:
        raise MktError(400, INVALID_NAME)
    try:
        name = idna.encode(text, uts46=True).decode("ascii")
    except (idna.IDNAError, UnicodeError, ValueError):
        raise MktError(400, INVALID_NAME) from None
    labels = name.split(".")
    if (len(name) > MAX_NAME or len(labels) < 2 or parse_digits(labels[-1], MAX_NAME) is not None
            or not all(_LABEL.fullmatch(label) for label in labels)):
        raise MktError(400, INVALID_NAME)
    return name


def is_reserved_name(name: str) -> bool:
    """Whether a domain name (as normalise_domain_name gives it) is, or is under, a reserved
    name: one whose records no one can publish, so mail from it is never delivered publicly."""
    return any(name == reserved or name.endswith("." + reserved) for reserved in RESERVED_NAMES)


def _record(row: sqlite3.Row) -> dict[str, Any]:
    record = {"type": row["type"], "host": row["host"], "value": row["value"]}
    if row["type"] == "MX":
        record["priority"] = row["priority"]
    record["mandatory"] = bool(row["mandatory"])
    record["verified"] = bool(row["verified"])
    return record


def _verified_by(row: sqlite3.Row, records: list[dict[str, Any]]) -> str | None:
    """"dns" when the mandatory records were found, "operator" when only the operator's mark
    makes the domain verified, None when it is not verified."""
    if not row["verified"]:
        return None
    found = all(r["verified"] for r in records if r["mandatory"])
    return "operator" if row["operator_verified_at"] is not None and not found else "dns"


def domain_view(conn: sqlite3.Connection, row: sqlite3.Row) -> dict[str, Any]:
    """The Domain of the specification, plus two members of our own (docs/api.md); never the private key."""
    records = [_record(r) for r in conn.execute("SELECT * FROM dns_records WHERE domain_id = ? ORDER BY position",
                                                (row["id"],))]
    return {
        "id": row["id"],
        "domain_code": row["domain_code"],
        "domain_name": row["domain_name"],
        "verified": bool(row["verified"]),
        "dns_records": records,
        "verified_by": _verified_by(row, records),
        "reserved_name": is_reserved_name(row["domain_name"]),
    }


def domain_row(conn: sqlite3.Connection, workspace_id: int, domain_id: Any) -> sqlite3.Row:
    """The domains row: 400 for an id that is not a positive integer, 404 outside the workspace."""
    return _row(conn, workspace_id, domain_id)


def _row(conn: sqlite3.Connection, workspace_id: int, domain_id: Any) -> sqlite3.Row:
    domain_id = parse_int_id(domain_id, INVALID_ID)
    row = conn.execute("SELECT * FROM domains WHERE id = ? AND workspace_id = ?", (domain_id, workspace_id)).fetchone()
    if row is None:
        raise MktError(404, NOT_FOUND)
    return row


def _new_key() -> tuple[str, str]:
    """(PKCS#8 PEM private key, base64 SubjectPublicKeyInfo DER public key) of a new RSA-2048 pair."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode("ascii")
    der = key.public_key().public_bytes(serialization.Encoding.DER,
                                        serialization.PublicFormat.SubjectPublicKeyInfo)
    return pem, base64.b64encode(der).decode("ascii")


def _spf_value() -> str:
    mechanisms = " ".join(os.environ.get("MKT_SPF_MECHANISMS", "").split()) or DEFAULT_SPF_MECHANISMS
    return f"v=spf1 {mechanisms} ~all"


def _records(name: str, selector: str, code: str, public_key: str) -> list[tuple[str, str, str, str, int]]:
    """(purpose, type, host, value, mandatory) of every record a new domain needs, in display order."""
    return [
        ("spf", "TXT", name, _spf_value(), 0),
        ("dkim", "TXT", f"{selector}._domainkey.{name}", f"v=DKIM1; k=rsa; p={public_key}", 1),
        ("dmarc", "TXT", f"_dmarc.{name}", "v=DMARC1; p=none", 0),
        ("return_path", "CNAME", f"{code}.{name}", name, 0),
    ]


def _selector(conn: sqlite3.Connection, name: str) -> str:
    """`mkt`, unless another workspace of this database already publishes that name's `mkt`
    key: then `mkt2`, `mkt3` ..., so two workspaces sending for one domain never ask for
    the same DKIM host with different keys."""
    taken = {r["dkim_selector"] for r in conn.execute("SELECT dkim_selector FROM domains WHERE domain_name = ?",
                                                      (name,))}
    selector, n = DKIM_SELECTOR, 1
    while selector in taken:
        n += 1
        selector = f"{DKIM_SELECTOR}{n}"
    return selector


def _new_code(conn: sqlite3.Connection) -> str:
    """A random public code that is also a DNS label (it names the return-path host)."""
    while True:
        code = "mkt" + secrets.token_hex(4)
        if conn.execute("SELECT 1 FROM domains WHERE domain_code = ?", (code,)).fetchone() is None:
            return code


def _check_can_add(conn: sqlite3.Connection, workspace_id: int, name: str) -> None:
    if conn.execute("SELECT 1 FROM domains WHERE workspace_id = ? AND domain_name = ?",
                    (workspace_id, name)).fetchone() is not None:
        raise MktError(400, DUPLICATE.format(name=name))
    if billing.remaining(conn, workspace_id, "domains") == 0:
        raise billing.limit_error(conn, workspace_id, "domains", BILLING_LIMIT)


def add_domain(conn: sqlite3.Connection, workspace_id: int, name: Any) -> dict[str, Any]:
    """`mkt domains add` / POST /v1/domains: a new, unverified domain with its DNS records."""
    name = normalise_domain_name(name)
    _check_can_add(conn, workspace_id, name)  # refuse before paying for a key
    pem, public_key = _new_key()  # 0.1-0.8 s: made before the write lock is taken
    now = clock.now()
    with transaction(conn):
        _check_can_add(conn, workspace_id, name)
        selector, code = _selector(conn, name), _new_code(conn)
        domain_id = conn.execute(
            "INSERT INTO domains (workspace_id, domain_name, domain_code, dkim_selector, dkim_private_key,"
            " verified, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 0, ?, ?)",
            (workspace_id, name, code, selector, pem, now, now),
        ).lastrowid
        conn.executemany(
            "INSERT INTO dns_records (domain_id, position, purpose, type, host, value, priority, mandatory, verified)"
            " VALUES (?, ?, ?, ?, ?, ?, NULL, ?, 0)",
            [(domain_id, i, *record) for i, record in enumerate(_records(name, selector, code, public_key))],
        )
        return get_domain(conn, workspace_id, domain_id)


def create_domain(conn: sqlite3.Connection, workspace_id: int, body: Any) -> dict[str, Any]:
    """POST /v1/domains {"domain_name": "example.com"} (`domain` and `name` are read as well)."""
    body = require_object(body, INVALID_BODY)
    key = next((k for k in NAME_MEMBERS if body.get(k) is not None), NAME_MEMBERS[0])
    return add_domain(conn, workspace_id, member(body, key, str))


def domain_names(conn: sqlite3.Connection, workspace_id: int) -> list[str]:
    """The workspace's sending domains by name (an address on one is as good as its senders')."""
    return [r[0] for r in conn.execute("SELECT domain_name FROM domains WHERE workspace_id = ?", (workspace_id,))]


def list_domains(conn: sqlite3.Connection, workspace_id: int) -> list[dict[str, Any]]:
    """GET /v1/domains: every domain of the workspace, oldest first."""
    rows = conn.execute("SELECT * FROM domains WHERE workspace_id = ? ORDER BY id", (workspace_id,)).fetchall()
    return [domain_view(conn, r) for r in rows]


def get_domain(conn: sqlite3.Connection, workspace_id: int, domain_id: Any) -> dict[str, Any]:
    """GET /v1/domains/:id: 400 for an id that is not a positive integer, 404 outside the workspace."""
    return domain_view(conn, _row(conn, workspace_id, domain_id))


def verify_domain(conn: sqlite3.Connection, workspace_id: int, domain_id: Any) -> dict[str, Any]:
    """POST /v1/domains/:id/verify: look every record up in DNS and store what was found."""
    return verify_domain_report(conn, workspace_id, domain_id)["domain"]


def verify_domain_report(conn: sqlite3.Connection, workspace_id: int, domain_id: Any) -> dict[str, Any]:
    """{"domain": Domain after the check, "checks": [per record: host, type, found values, error]}.

    The lookups run outside any transaction (a slow DNS server must not hold the write
    lock). A definite answer (the record, a wrong value, no such name) sets the record's
    `verified`; a failed lookup (timeout, SERVFAIL, no resolver) leaves it as the last
    check found it. The domain is verified when every mandatory record is, or when the
    operator marked it verified (the mark holds whatever DNS says).
    """
    from marketing_cli.services.email import dns_check

    row = _row(conn, workspace_id, domain_id)
    records = conn.execute("SELECT * FROM dns_records WHERE domain_id = ? ORDER BY position", (row["id"],)).fetchall()
    checks = dns_check.check_records([dict(r) for r in records])
    with transaction(conn):
        row = _row(conn, workspace_id, row["id"])
        for record, check in zip(records, checks):
            if check["verified"] is not None:
                conn.execute("UPDATE dns_records SET verified = ? WHERE id = ?", (int(check["verified"]), record["id"]))
        now = clock.now()
        conn.execute(f"UPDATE domains SET verified = {_VERIFIED}, checked_at = ?, updated_at = ? WHERE id = ?",
                     (now, now, row["id"]))
        domain = get_domain(conn, workspace_id, row["id"])
    return {"domain": domain, "checks": checks}


# What `domains.verified` is: the last DNS check found every mandatory record, or the operator marked it.
_VERIFIED = ("(CASE WHEN operator_verified_at IS NOT NULL OR NOT EXISTS (SELECT 1 FROM dns_records r"
             " WHERE r.domain_id = domains.id AND r.mandatory = 1 AND r.verified = 0) THEN 1 ELSE 0 END)")


def mark_domain_verified(conn: sqlite3.Connection, workspace_id: int, domain_id: Any, *,
                         undo: bool = False) -> dict[str, Any]:
    """`mkt domains mark-verified ID [--undo]`: the operator vouches for a domain without DNS.

    An operator's act, for a staging domain on a reserved name or a domain whose DNS the
    operator checked by other means: no API route calls this (an API key could otherwise
    send as any domain it adds). The mark is stored (`operator_verified_at`) and logged,
    and holds whatever a later DNS check finds; `undo` takes it back, leaving the domain
    verified only if the last DNS check found its mandatory records.
    """
    with transaction(conn):
        row = _row(conn, workspace_id, domain_id)
        now = clock.now()
        conn.execute("UPDATE domains SET operator_verified_at = ?, updated_at = ? WHERE id = ?",
                     (None if undo else now, now, row["id"]))
        conn.execute(f"UPDATE domains SET verified = {_VERIFIED} WHERE id = ?", (row["id"],))
        domain = get_domain(conn, workspace_id, row["id"])
    if undo:
        log.warning("domain %s (%s) of workspace %s: the operator's verified mark was taken back; verified: %s",
                    domain["id"], domain["domain_name"], workspace_id, "yes" if domain["verified"] else "no")
    else:
        log.warning("domain %s (%s) of workspace %s marked verified by the operator, without a DNS check",
                    domain["id"], domain["domain_name"], workspace_id)
    return domain


def dkim_signing_key(conn: sqlite3.Connection, domain_id: int) -> tuple[str, str, str]:
    """(domain_name, selector, PKCS#8 PEM private key) for signing mail from the domain.

    For the sender only (no workspace check: the caller has the domain through a sender
    identity it already checked); 404 when the domain does not exist.
    """
    row = conn.execute("SELECT domain_name, dkim_selector, dkim_private_key FROM domains WHERE id = ?",
                       (domain_id,)).fetchone()
    if row is None:
        raise MktError(404, NOT_FOUND)
    return row["domain_name"], row["dkim_selector"], row["dkim_private_key"]
