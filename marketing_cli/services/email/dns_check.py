"""Looking a domain's records up in DNS (dnspython) and deciding whether each is published.

The resolver is `MKT_DNS_SERVER=HOST:PORT` when set (`[::1]:5353` for IPv6; the port
defaults to 53), else the system's (/etc/resolv.conf). Every lookup gives up after
`DNS_TIMEOUT` seconds; the records are looked up in parallel, so a check takes at most
about that long whatever happens.

A record counts as published when DNS holds, at its host:

    dkim         a TXT record whose `p=` tag (whitespace removed) is our public key, and
                 whose `v=` tag, when present, is DKIM1
    spf          exactly one `v=spf1` TXT record, holding each of our mechanisms (it may
                 hold others: operators merge SPF records)
    dmarc        exactly one TXT record beginning `v=DMARC1` (any policy)
    CNAME / MX   the target / exchange we ask for (letter case and final dot ignored)
    other TXT    our value, runs of whitespace compared as one space

TXT records longer than 255 bytes are published as several strings; they are joined
before comparing. "No such name" and "no record of that type" are definite answers
(`verified` false); a timeout, SERVFAIL or a missing resolver is a failed lookup
(`verified` None: the caller keeps what the last check found).
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from marketing_cli.kernel.numbers import parse_digits

DNS_TIMEOUT = 3.0
BAD_SERVER = "MKT_DNS_SERVER must be HOST:PORT (for example 127.0.0.1:5353), not {value!r}."


class LookupFailed(Exception):
    """A lookup that gave no definite answer; the message says why."""


def parse_server(value: str) -> tuple[str, int]:
    """(IP address, port) of MKT_DNS_SERVER; a host name is resolved once. ValueError when unusable."""
    text = value.strip()
    match = re.fullmatch(r"\[([^\]]+)\](?::(\d+))?", text)
    if match:
        host, port = match.group(1), match.group(2)
    elif text.count(":") == 1:
        host, port = text.split(":")
    else:
        host, port = text, None
    port_number = (parse_digits(port, 5) or -1) if port is not None else 53
    if not host or not 0 < port_number < 65536:
        raise ValueError(BAD_SERVER.format(value=value))
    try:
        ipaddress.ip_address(host)
    except ValueError:
        try:
            host = socket.getaddrinfo(host, port_number, type=socket.SOCK_DGRAM)[0][4][0]
        except (OSError, UnicodeError):
            raise ValueError(BAD_SERVER.format(value=value)) from None
    return host, port_number


def make_resolver() -> Any:
    """A dnspython resolver for the checks; LookupFailed when none can be made."""
    import dns.resolver

    server = os.environ.get("MKT_DNS_SERVER", "").strip()
    try:
        if server:
            host, port = parse_server(server)
            resolver = dns.resolver.Resolver(configure=False)
            resolver.nameservers = [host]
            resolver.port = port
        else:
            resolver = dns.resolver.Resolver()
    except ValueError as exc:
        raise LookupFailed(str(exc)) from None
    except dns.resolver.NoResolverConfiguration:
        raise LookupFailed("no DNS resolver is configured on this machine (set MKT_DNS_SERVER)") from None
    resolver.timeout = resolver.lifetime = DNS_TIMEOUT
    resolver.cache = None
    return resolver


def lookup(resolver: Any, host: str, rtype: str) -> list[str]:
    """The values DNS holds for (host, type): TXT strings joined, names without the final dot.

    [] for no such name or no such record; LookupFailed for anything that is not an answer.
    """
    import dns.exception
    import dns.resolver

    try:
        answer = resolver.resolve(host.rstrip(".") + ".", rtype, search=False)
    except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
        return []
    except dns.exception.Timeout:
        raise LookupFailed(f"no answer from the DNS server within {DNS_TIMEOUT:g} s") from None
    except dns.resolver.NoNameservers:
        raise LookupFailed("the DNS server failed to answer (SERVFAIL or refused)") from None
    except dns.exception.DNSException as exc:
        raise LookupFailed(str(exc) or type(exc).__name__) from None
    if rtype == "TXT":
        return [b"".join(r.strings).decode("utf-8", "replace") for r in answer]
    if rtype == "MX":
        return [f"{r.preference} {r.exchange.to_text(omit_final_dot=True).lower()}" for r in answer]
    return [r.to_text().rstrip(".").lower() for r in answer]


def _tags(value: str) -> dict[str, str]:
    tags = {}
    for part in value.split(";"):
        key, sep, tag_value = part.partition("=")
        if sep:
            tags.setdefault(key.strip().lower(), tag_value.strip())
    return tags


def _dkim_matches(expected: str, found: str) -> bool:
    ours, theirs = _tags(expected), _tags(found)
    return (theirs.get("v", "DKIM1").upper() == "DKIM1"
            and re.sub(r"\s", "", theirs.get("p", "")) == ours["p"] and ours["p"] != "")


def _spf_terms(value: str) -> set[str]:
    return {term.lower() for term in value.split()[1:] if term.lower().lstrip("+-~?") != "all"}


def is_spf(value: str) -> bool:
    return value.lower().split()[:1] == ["v=spf1"]


def matches(record: dict[str, Any], found: list[str]) -> bool:
    """Whether the values `found` at the record's host publish it (the rules of the module docstring)."""
    purpose, rtype, expected = record.get("purpose"), record["type"], record["value"]
    if rtype == "TXT" and purpose == "dkim":
        return any(_dkim_matches(expected, value) for value in found)
    if rtype == "TXT" and purpose == "spf":
        spf = [value for value in found if is_spf(value)]
        return len(spf) == 1 and _spf_terms(expected) <= _spf_terms(spf[0])
    if rtype == "TXT" and purpose == "dmarc":
        dmarc = [value for value in found if re.match(r"\s*v\s*=\s*DMARC1\s*(;|$)", value, re.IGNORECASE)]
        return len(dmarc) == 1
    if rtype == "TXT":
        return " ".join(expected.split()) in {" ".join(value.split()) for value in found}
    if rtype == "MX":
        return any(value.split(" ", 1)[-1] == expected.rstrip(".").lower() for value in found)
    return expected.rstrip(".").lower() in found


def check_record(resolver: Any, record: dict[str, Any]) -> dict[str, Any]:
    check = {"purpose": record.get("purpose"), "type": record["type"], "host": record["host"],
             "found": None, "verified": None, "error": None}
    try:
        check["found"] = lookup(resolver, record["host"], record["type"])
    except LookupFailed as exc:
        check["error"] = str(exc)
        return check
    check["verified"] = matches(record, check["found"])
    return check


def check_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One check per record, in order: {purpose, type, host, found, verified, error}."""
    try:
        resolver = make_resolver()
    except LookupFailed as exc:
        return [{"purpose": r.get("purpose"), "type": r["type"], "host": r["host"], "found": None,
                 "verified": None, "error": str(exc)} for r in records]
    if not records:
        return []
    with ThreadPoolExecutor(max_workers=len(records)) as pool:
        return list(pool.map(lambda record: check_record(resolver, record), records))
