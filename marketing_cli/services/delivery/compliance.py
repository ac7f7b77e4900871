"""The sender-compliance gate: whether mail from a sending domain meets what the mailbox
providers require of bulk senders (docs/deliverability.md "The compliance gate").

    check_domain(conn, ws, domain_id) -> [{"rule", "status", "found", "fix"}]   # mkt domains check
    require(conn, ws, domain_id, what)                                          # 400 naming the failures

Gmail (support.google.com/a/answer/81126, enforced with 550 5.7.26 since November 2025),
Yahoo (senders.yahooinc.com/best-practices) and Microsoft's consumer domains (550 5.7.515
since 2025-05-05) ask the same of a bulk sender: SPF and DKIM that pass, a DMARC record (p=none
is enough) aligned with the From domain, one-click unsubscribe (RFC 8058) with its headers
under the DKIM signature, TLS, and a From domain of one's own. One row per rule, in this order:

    spf                SPF of the return path (`bounces@<code>.<domain>`, whose CNAME points at
                       the domain): exactly one v=spf1 record, holding our mechanisms, within
                       RFC 7208's 10 DNS lookups
    dkim               the DKIM key published at <selector>._domainkey.<domain> is ours
    dmarc              one v=DMARC1 record with a policy, at _dmarc.<domain> or up the DNS tree
                       (the DMARCbis tree walk: no public-suffix list needed)
    dmarc_aligned      DKIM d= (the domain itself) or the return path aligned with the From
                       domain under the record's adkim/aspf
    one_click          List-Unsubscribe and List-Unsubscribe-Post are in the DKIM h= tag
    https_unsubscribe  the unsubscribe URL (the workspace's tracking base) is https
    relay_tls          the connection to the relay is TLS (smtps:// or ?starttls=1)
    free_mail_from     the From domain is not a free-mail domain (free_mail_domains.csv)

Every rule is required: `fail` refuses scheduling (require). `warn` does not: it marks what is
fine for a staging setup and wrong for public mail: a reserved name (`.test`, `example.com`:
no one can publish its records, so the DNS rules are not looked up), an http unsubscribe base
or a plain relay on a loopback or private address, the outbox (nothing leaves the machine),
a relay whose certificate is not checked. A DNS lookup that fails (timeout, SERVFAIL) fails its
rule: what cannot be checked is not vouched for.

Why dnspython and not checkdmarc or pyspf (measured on this machine, 2026-11-28; docs/deliverability.md):
checkdmarc 6.0.4 gives the same DMARC and SPF verdicts against the test DNS server (through
dns.nameserver objects) but costs 0.76 s of import on every `mkt campaigns schedule` (dnspython's
resolver: 0.05 s) and 14 more packages (requests, httpx2, pyleri, publicsuffixlist ...); pyspf
evaluates SPF for a sending IP, which mkt does not know (the relay's egress). The two things
they would add, the 10-lookup count and the DMARC record of a parent domain, are a few lines
here, with the resolver of dns_check.py (MKT_DNS_SERVER, the tests' DNS server).
"""

from __future__ import annotations

import csv
import io
import ipaddress
import logging
import re
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from marketing_cli.errors import MktError
from marketing_cli.kernel.data_tables import DataTable
from marketing_cli.services.account import workspaces
from marketing_cli.services.delivery import dkim, transport_settings
from marketing_cli.services.delivery.transport import parse_smtp_url
from marketing_cli.services.email import dns_check, domains

log = logging.getLogger("mkt.compliance")

RULES = ("spf", "dkim", "dmarc", "dmarc_aligned", "one_click", "https_unsubscribe", "relay_tls", "free_mail_from")
SPF_LOOKUP_LIMIT = 10  # RFC 7208 section 4.6.4
FREE_MAIL_ENV = "MKT_FREE_MAIL_DOMAINS"
FREE_MAIL_BUILT_IN = Path(__file__).with_name("free_mail_domains.csv")
REFUSED = ("The sending domain {domain} does not meet the mailbox providers' sender requirements, so Gmail, Yahoo "
           "and Microsoft would reject or junk this {what}. {failures} (`mkt domains check {domain_id}` shows every "
           "rule.)")
_LOOKUP_TERMS = ("include", "a", "mx", "ptr", "exists", "redirect")


def _parse_free_mail(text: str, origin: str) -> frozenset[str]:
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames is None or [f.strip() for f in reader.fieldnames] != ["domain", "provider", "source"]:
        raise MktError(500, f"{FREE_MAIL_ENV}: {origin} must begin with the header domain,provider,source.")
    names = set()
    for number, row in enumerate(reader, 2):
        if not (row.get("domain") or "").strip() or not (row.get("source") or "").strip():
            raise MktError(500, f"{FREE_MAIL_ENV}: {origin} line {number}: every row needs a domain and a source.")
        names.add(row["domain"].strip().lower().rstrip("."))
    return frozenset(names)


FREE_MAIL: DataTable[frozenset[str]] = DataTable(FREE_MAIL_ENV, FREE_MAIL_BUILT_IN, _parse_free_mail,
                                                 "free-mail domain list")


def _row(rule: str, status: str, found: str, fix: str | None = None) -> dict[str, Any]:
    return {"rule": rule, "status": status, "found": found, "fix": fix if status != "pass" else None}


def _tags(value: str) -> dict[str, str]:
    tags: dict[str, str] = {}
    for part in value.split(";"):
        key, sep, tag_value = part.partition("=")
        if sep:
            tags.setdefault(key.strip().lower(), tag_value.strip())
    return tags


def is_local_host(host: str | None) -> bool:
    """Whether a host is this machine or a private network (a staging setup), not the internet."""
    host = (host or "").strip("[]").lower().rstrip(".")
    if not host or host == "localhost" or host.endswith(".localhost") or domains.is_reserved_name(host):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local or address.is_reserved


# --- the DNS rules ----------------------------------------------------------------------------

def _spf_lookups(resolver: Any, record: str, depth: int = 0) -> int:
    """The DNS lookups an SPF record costs a receiver (include and redirect followed)."""
    count = 0
    for term in record.split()[1:]:
        mechanism, _, target = re.split(r"([:=/])", term.lstrip("+-~?").lower() + ":", maxsplit=1)
        target = target.rstrip(":")
        if mechanism not in _LOOKUP_TERMS:
            continue
        count += 1
        if mechanism in ("include", "redirect") and target and "%" not in target and depth < SPF_LOOKUP_LIMIT:
            found = [v for v in dns_check.lookup(resolver, target, "TXT") if dns_check.is_spf(v)]
            if found:
                count += _spf_lookups(resolver, found[0], depth + 1)
        if count > SPF_LOOKUP_LIMIT:
            break
    return count


def _spf(resolver: Any, domain: sqlite3.Row, expected: dict[str, Any] | None) -> dict[str, Any]:
    host = f"{domain['domain_code']}.{domain['domain_name']}"
    publish = f"publish `{expected['value']}` as TXT at {domain['domain_name']}" if expected else "publish an SPF record"
    cname = f" and the CNAME {host} -> {domain['domain_name']}"
    records = [v for v in dns_check.lookup(resolver, host, "TXT") if dns_check.is_spf(v)]
    if not records:
        return _row("spf", "fail", f"no SPF record for the return path {host}", publish + cname)
    if len(records) > 1:
        return _row("spf", "fail", f"{len(records)} SPF records at {host} (RFC 7208: a permanent error)",
                    "merge them into one v=spf1 record")
    if expected and not dns_check.matches({**expected, "type": "TXT"}, records):
        return _row("spf", "fail", f"`{records[0]}` does not authorise the relay", publish)
    lookups = _spf_lookups(resolver, records[0])
    if lookups > SPF_LOOKUP_LIMIT:
        return _row("spf", "fail", f"`{records[0]}` needs more than {SPF_LOOKUP_LIMIT} DNS lookups (RFC 7208 4.6.4)",
                    "flatten includes until the record needs at most 10 lookups")
    if re.search(r"(^|\s)\+?all(\s|$)", records[0]):
        return _row("spf", "warn", f"`{records[0]}` ends in +all: it authorises every host", "end it with ~all or -all")
    return _row("spf", "pass", f"`{records[0]}` for the return path {host} ({lookups} DNS lookups)")


def _dkim(resolver: Any, expected: dict[str, Any] | None) -> dict[str, Any]:
    if expected is None:
        return _row("dkim", "fail", "the domain has no DKIM key", "add the domain again")
    found = dns_check.lookup(resolver, expected["host"], "TXT")
    if dns_check.matches({**expected, "type": "TXT"}, found):
        return _row("dkim", "pass", f"our key at {expected['host']}")
    seen = f"another key at {expected['host']}" if found else f"no TXT record at {expected['host']}"
    return _row("dkim", "fail", seen, f"publish `{expected['value']}` as TXT at {expected['host']}")


def dmarc_record(resolver: Any, name: str) -> tuple[str, list[str]]:
    """(where, DMARC records found there): _dmarc.<name>, else up the tree to the last two labels."""
    labels = name.split(".")
    for start in range(0, max(1, len(labels) - 1)):
        where = ".".join(labels[start:])
        records = [v for v in dns_check.lookup(resolver, f"_dmarc.{where}", "TXT")
                   if re.match(r"\s*v\s*=\s*DMARC1\s*(;|$)", v, re.IGNORECASE)]
        if records:
            return where, records
    return name, []


def _dmarc(name: str, where: str, records: list[str]) -> tuple[dict[str, Any], dict[str, str]]:
    fix = f"publish `v=DMARC1; p=none; rua=mailto:dmarc@{name}` as TXT at _dmarc.{name} (p=none is enough)"
    if not records:
        return _row("dmarc", "fail", f"no DMARC record at _dmarc.{name} or above", fix), {}
    if len(records) > 1:
        return _row("dmarc", "fail", f"{len(records)} DMARC records at _dmarc.{where}", "keep one"), {}
    tags = _tags(records[0])
    policy = (tags.get("sp") if where != name and tags.get("sp") else tags.get("p", "")).lower()
    if policy not in ("none", "quarantine", "reject"):
        return _row("dmarc", "fail", f"`{records[0]}` at _dmarc.{where} has no valid policy (p=)", fix), tags
    inherited = f" (inherited from {where})" if where != name else ""
    return _row("dmarc", "pass", f"`{records[0]}` at _dmarc.{where}{inherited}: p={policy}"), tags


def _aligned(name: str, code: str, dkim_row: dict[str, Any], spf_row: dict[str, Any],
             tags: dict[str, str]) -> dict[str, Any]:
    """DMARC alignment (RFC 7489 3.1): DKIM d= is the From domain itself; the return path is a
    subdomain of it, aligned only in relaxed mode (aspf=r, the default)."""
    if dkim_row["status"] == "pass":
        return _row("dmarc_aligned", "pass", f"DKIM d={name} is the From domain")
    relaxed = tags.get("aspf", "r").lower() != "s"
    if spf_row["status"] in ("pass", "warn") and relaxed:
        return _row("dmarc_aligned", "pass", f"SPF of the return path {code}.{name} aligns (relaxed) with {name}")
    found = "neither DKIM (its key is not published) nor SPF" + ("" if relaxed else " (aspf=s: strict)") + " aligns"
    return _row("dmarc_aligned", "fail", found, "publish the DKIM key (dkim rule): d= is the From domain")


def _dns_rules(domain: sqlite3.Row, records: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    name = domain["domain_name"]
    if domains.is_reserved_name(name):
        found = (f"{name} is a reserved name: no one can publish its records, so mail from it only reaches a local "
                 "SMTP catcher (staging); not looked up")
        return [_row(rule, "warn", found, "send real mail from a domain you own")
                for rule in ("spf", "dkim", "dmarc", "dmarc_aligned")]
    try:
        resolver = dns_check.make_resolver()
    except dns_check.LookupFailed as exc:
        return [_row(rule, "fail", f"DNS lookup failed: {exc}", "check the DNS resolver (MKT_DNS_SERVER) and try again")
                for rule in ("spf", "dkim", "dmarc", "dmarc_aligned")]

    def safely(rule: str, work: Any) -> Any:
        try:
            return work()
        except dns_check.LookupFailed as exc:
            return _row(rule, "fail", f"DNS lookup failed: {exc}", "try again when the DNS server answers")

    with ThreadPoolExecutor(max_workers=3) as pool:
        spf = pool.submit(safely, "spf", lambda: _spf(resolver, domain, records.get("spf")))
        key = pool.submit(safely, "dkim", lambda: _dkim(resolver, records.get("dkim")))
        found = pool.submit(safely, "dmarc", lambda: dmarc_record(resolver, name))
        spf_row, dkim_row, dmarc_found = spf.result(), key.result(), found.result()
    if isinstance(dmarc_found, dict):  # the lookup failed
        dmarc_row, tags = dmarc_found, {}
    else:
        dmarc_row, tags = _dmarc(name, *dmarc_found)
    return [spf_row, dkim_row, dmarc_row, _aligned(name, domain["domain_code"], dkim_row, spf_row, tags)]


# --- the rules of the message and the transport -------------------------------------------------

def _one_click() -> dict[str, Any]:
    signed = {h.lower() for h in dkim.DEFAULT_HEADERS}
    missing = [h for h in ("List-Unsubscribe", "List-Unsubscribe-Post") if h.lower() not in signed]
    if missing:
        return _row("one_click", "fail", f"{', '.join(missing)} not in the DKIM h= tag",
                    "sign both List-Unsubscribe headers (RFC 8058 section 4)")
    return _row("one_click", "pass", "List-Unsubscribe and List-Unsubscribe-Post: List-Unsubscribe=One-Click are in "
                                     "every campaign message, under the DKIM signature")


def _https_unsubscribe(conn: sqlite3.Connection, workspace_id: int) -> dict[str, Any]:
    base = workspaces.tracking_base_url(conn, workspace_id)
    parts = urlsplit(base)
    fix = "set an https tracking base (`mkt workspace update --tracking-url https://...` or MKT_PUBLIC_URL)"
    if parts.scheme == "https":
        return _row("https_unsubscribe", "pass", f"unsubscribe URLs begin with {base}")
    if is_local_host(parts.hostname):
        return _row("https_unsubscribe", "warn", f"unsubscribe URLs begin with {base}: a local address (staging)", fix)
    return _row("https_unsubscribe", "fail", f"unsubscribe URLs begin with {base}: not https (RFC 8058 requires it)",
                fix)


def _relay_tls(conn: sqlite3.Connection, workspace_id: int) -> dict[str, Any]:
    chosen = transport_settings.selection(conn, workspace_id)
    if chosen.kind != "smtp":
        return _row("relay_tls", "warn", f"no relay: mail is written to the outbox {chosen.folder}",
                    "set the relay: `mkt mail transport set smtps://...`")
    try:
        settings = parse_smtp_url(chosen.smtp_url or "")
    except ValueError as exc:
        return _row("relay_tls", "fail", str(exc), "set a valid relay URL")
    where = f"{settings.host}:{settings.port}"
    if settings.tls or settings.starttls:
        how = "TLS" if settings.tls else "STARTTLS"
        if not settings.verify:
            return _row("relay_tls", "warn", f"{how} to {where} without checking its certificate (verify=0)",
                        "drop verify=0 (or give the relay's CA with cafile=)")
        return _row("relay_tls", "pass", f"{how} to {where}")
    fix = "use smtps://HOST:465 or smtp://HOST:587?starttls=1"
    if is_local_host(settings.host):
        return _row("relay_tls", "warn", f"plain SMTP to {where}, a local relay", fix)
    return _row("relay_tls", "fail", f"plain SMTP to {where}: the relay and its password travel in clear text", fix)


def _free_mail(name: str) -> dict[str, Any]:
    listed = FREE_MAIL.current()
    parts = name.split(".")
    hit = next((".".join(parts[i:]) for i in range(len(parts) - 1) if ".".join(parts[i:]) in listed), None)
    if hit:
        return _row("free_mail_from", "fail", f"{name} is a free-mail domain ({hit}): its owner's DMARC policy, not "
                                              "yours, decides, and providers reject bulk mail from it",
                    "send from a domain you own")
    return _row("free_mail_from", "pass", f"{name} is not a free-mail domain")


# --- the service --------------------------------------------------------------------------------

def check_domain(conn: sqlite3.Connection, workspace_id: int, domain_id: Any) -> list[dict[str, Any]]:
    """`mkt domains check ID` / GET /v1/domains/{id}/compliance: one row per rule (RULES order).
    The DNS lookups run outside any transaction (at most DNS_TIMEOUT seconds, in parallel)."""
    row = domains.domain_row(conn, workspace_id, domain_id)
    records = {r["purpose"]: dict(r) for r in conn.execute(
        "SELECT purpose, type, host, value FROM dns_records WHERE domain_id = ? ORDER BY position", (row["id"],))}
    return [*_dns_rules(row, records), _one_click(), _https_unsubscribe(conn, workspace_id),
            _relay_tls(conn, workspace_id), _free_mail(row["domain_name"])]


def failures(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r["status"] == "fail"]


def refusal(domain: str, domain_id: int, what: str, failed: list[dict[str, Any]]) -> MktError:
    """The 400 that names each failing rule with what was found and its fix."""
    text = " ".join(f"{r['rule']}: {r['found']}; fix: {r['fix']}." for r in failed)
    return MktError(400, REFUSED.format(domain=domain, domain_id=domain_id, what=what, failures=text))


def require(conn: sqlite3.Connection, workspace_id: int, domain_id: int, what: str) -> list[dict[str, Any]]:
    """The rows of the domain; MktError(400) naming every failing rule when one fails."""
    rows = check_domain(conn, workspace_id, domain_id)
    failed = failures(rows)
    if failed:
        name = conn.execute("SELECT domain_name FROM domains WHERE id = ?", (domain_id,)).fetchone()[0]
        raise refusal(name, domain_id, what, failed)
    return rows
