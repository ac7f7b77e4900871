"""Email addresses as SMTP carries them (RFC 5321, and RFC 6531/6532 for SMTPUTF8).

A contact's address is stored as email-validator normalises it: lower case, its domain in
Unicode (`ann@bücher.de`), its local part as written (`gül@example.com`). On the wire:

- a domain in Unicode goes out in its IDNA form (`ann@xn--bcher-kva.de`), which every
  SMTP server and every header reader takes: `wire_address`;
- a local part with non-ASCII characters has no ASCII form. Only a server that offers the
  SMTPUTF8 extension (RFC 6531) takes it, with the UTF-8 header that carries it (RFC
  6532): `needs_smtputf8` says so, and the transport sends such a message with SMTPUTF8
  or refuses that message alone (services/delivery/transport.py).
"""

from __future__ import annotations

# Why a message cannot go out through a server without SMTPUTF8 (the transport's reason,
# kept free of the address so that a campaign's failures group by reason).
NO_SMTPUTF8 = ("the SMTP server does not offer SMTPUTF8 (RFC 6531), which an address with non-ASCII "
               "characters before the @ needs")


def needs_smtputf8(address: str) -> bool:
    """True when the local part (before the last @) is not ASCII: no server without SMTPUTF8 can take it."""
    return not address.rpartition("@")[0].isascii()


def ascii_domain(domain: str) -> str:
    """The domain's IDNA (A-label) form; ValueError when it has none."""
    if domain.isascii():
        return domain
    import idna

    try:
        return idna.encode(domain.rstrip("."), uts46=True).decode("ascii")
    except (idna.IDNAError, UnicodeError) as exc:
        raise ValueError(f"the domain {domain!r} has no IDNA form ({exc})") from None


def wire_address(address: str) -> str:
    """The address as SMTP commands and headers carry it: the domain in IDNA form, the local
    part as it is. ValueError for a domain that has no IDNA form."""
    if address.isascii():
        return address
    local, at, domain = address.rpartition("@")
    if not at:
        raise ValueError(f"{address!r} is not an email address")
    return f"{local}@{ascii_domain(domain)}"
