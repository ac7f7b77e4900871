"""Provider lanes: each recipient's mailbox provider (gmail, yahoo, microsoft, apple, other;
CONTRACT section 11), so that a provider's push-back slows that provider only (shaping.py).

The lane of a mail domain comes from a table kept as data (`lanes.csv` beside this module, or
the operator's copy named by MKT_LANES): `domain` rows name the consumer domains (gmail.com,
yahoo.*, hotmail.*, icloud.com ...); for any other domain, `mx` rows name suffixes of the MX
hosts that put it in a lane, as KumoMTA's shaping.toml matches providers by MXSuffix: a Google
Workspace domain (MX aspmx.l.google.com) goes in the gmail lane, a Microsoft 365 one (MX
*.mail.protection.outlook.com) in the microsoft lane. MX answers are cached in
mail_domain_lanes for every worker (MX_TTL; a failed lookup for FAILED_TTL).

`assign_lanes` runs at the start of a send job, before its helpers are called, for the messages
queued since its last pass (email_lane_marks), in batches off the hot path: one pass over the
new queued messages for their distinct domains, the MX lookups of at most MX_LOOKUPS unknown
domains (the largest first, in parallel, within MX_BUDGET seconds; names reserved for
documentation and tests, RFC 2606 and RFC 6761, are never looked up), and one UPDATE per
chunk of domains outside the `other` lane (a NULL lane reads as `other`).
"""

from __future__ import annotations

import logging
import re
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.kernel.data_tables import DataTable, csv_rows
from marketing_cli.services.delivery.replies import LANES
from marketing_cli.storage.db import marks, transaction

log = logging.getLogger("mkt.email.send")

TABLE_ENV = "MKT_LANES"
BUILT_IN = Path(__file__).with_name("lanes.csv")
OTHER = "other"
NAMES = {"gmail": "Gmail", "yahoo": "Yahoo/AOL", "microsoft": "Microsoft", "apple": "Apple iCloud", "other": "other"}
MX_LOOKUPS = 200      # unknown domains looked up per pass at most (the largest first); the rest: `other`
MX_BUDGET = 4.0       # seconds a pass waits for its MX lookups at most
MX_THREADS = 16
MX_TTL = timedelta(days=1)
FAILED_TTL = timedelta(hours=1)
CHUNK = 400           # domains per UPDATE
_WILD = re.compile(r"^[a-z]{2,3}(?:\.[a-z]{2,3})?$")  # what `.*` stands for: com, fr, co.uk, com.br
_RESERVED = ("example", "test", "invalid", "localhost", "local")  # RFC 2606, RFC 6761, RFC 6762


@dataclass(frozen=True)
class Table:
    domains: dict[str, str]                  # exact domain -> lane
    wild: tuple[tuple[str, str], ...]        # ("yahoo.", lane): the domain's start, any short ending
    mx: tuple[tuple[str, str], ...]          # (".google.com", lane)
    origin: str


def parse_table(text: str, origin: str) -> Table:
    domains: dict[str, str] = {}
    wild: list[tuple[str, str]] = []
    mx: list[tuple[str, str]] = []
    header = False
    for n, cells in csv_rows(text):
        if not header:
            if [c.lower() for c in cells[:3]] != ["match", "pattern", "lane"]:
                raise MktError(400, f"{origin} line {n}: the header must be match,pattern,lane,source.")
            header = True
            continue
        if len(cells) < 3:
            raise MktError(400, f"{origin} line {n}: expected match,pattern,lane,source.")
        match, pattern, lane = (c.lower() for c in cells[:3])
        if lane not in LANES:
            raise MktError(400, f"{origin} line {n}: '{cells[2]}' is not a lane ({', '.join(LANES)}).")
        if match == "mx" and pattern:
            mx.append((pattern, lane))
        elif match == "domain" and pattern.endswith(".*") and len(pattern) > 2:
            wild.append((pattern[:-1], lane))
        elif match == "domain" and pattern and "*" not in pattern:
            domains[pattern.rstrip(".")] = lane
        else:
            raise MktError(400, f"{origin} line {n}: expected `domain` (a domain, or one ending in .*) or `mx` "
                                f"(an MX host suffix), not '{cells[0]},{cells[1]}'.")
    if not header:
        raise MktError(400, f"{origin}: no header line (match,pattern,lane,source).")
    return Table(domains, tuple(wild), tuple(mx), origin)


TABLE = DataTable(TABLE_ENV, BUILT_IN, parse_table, "lanes table")


def check_environment() -> None:
    """`mkt jobs run` and `mkt serve` refuse to start on a lanes table they cannot read."""
    TABLE.current()


def domain_lane(domain: str, table: Table | None = None) -> str | None:
    """The lane the table's `domain` rows give a mail domain; None when none names it."""
    table = table or TABLE.current()
    domain = domain.strip().rstrip(".").lower()
    found = table.domains.get(domain)
    if found is None:
        found = next((lane for start, lane in table.wild
                      if domain.startswith(start) and _WILD.match(domain[len(start):])), None)
    return found


def mx_lane(hosts: list[str], table: Table | None = None) -> tuple[str, str | None]:
    """The lane of a domain whose MX hosts are `hosts` (lowest preference first), and the host
    that decided it."""
    table = table or TABLE.current()
    for host in hosts:
        name = "." + host.rstrip(".").lower()
        for suffix, lane in table.mx:
            if name.endswith(suffix if suffix.startswith(".") else "." + suffix):
                return lane, host
    return OTHER, hosts[0] if hosts else None


def reserved(domain: str) -> bool:
    labels = domain.split(".")
    return labels[-1] in _RESERVED or (len(labels) >= 2 and labels[-2] == "example")


def _lookup_mx(domain: str) -> list[str]:
    """The domain's MX hosts, lowest preference first; LookupFailed when DNS gives no answer."""
    from marketing_cli.services.email import dns_check

    found = dns_check.lookup(dns_check.make_resolver(), domain, "MX")  # "10 aspmx.l.google.com"
    return [host for _, host in sorted((int(p), h) for p, h in (v.split(" ", 1) for v in found))]


def resolve_domains(conn: sqlite3.Connection, domains: list[str], table: Table) -> dict[str, str]:
    """The lanes of `domains` (none in the table's `domain` rows): from the cache, else looked up
    (MX_LOOKUPS of them at most, within MX_BUDGET seconds) and cached."""
    now = clock.now()
    lanes: dict[str, str] = {}
    for start in range(0, len(domains), CHUNK):
        chunk = domains[start:start + CHUNK]
        lanes.update({r[0]: r[1] for r in conn.execute(
            f"SELECT domain, lane FROM mail_domain_lanes WHERE domain IN ({marks(chunk)}) AND expires_at > ?",
            (*chunk, now))})
    wanted = [d for d in domains if d not in lanes and not reserved(d)][:MX_LOOKUPS]
    if not wanted:
        return lanes
    found: dict[str, tuple[str, str | None, timedelta]] = {}

    def look(domain: str) -> None:
        from marketing_cli.services.email.dns_check import LookupFailed

        try:
            lane, host = mx_lane(_lookup_mx(domain), table)
            found[domain] = (lane, host, MX_TTL)
        except LookupFailed:
            found[domain] = (OTHER, None, FAILED_TTL)

    started = time.monotonic()
    pool = ThreadPoolExecutor(max_workers=min(MX_THREADS, len(wanted)), thread_name_prefix="mkt-mx")
    wait([pool.submit(look, d) for d in wanted], timeout=MX_BUDGET)
    pool.shutdown(wait=False, cancel_futures=True)
    results = dict(found)  # (a lookup still running is left out: looked up again next pass)
    moment = clock.utcnow()
    with transaction(conn):
        for domain, (lane, host, ttl) in results.items():
            conn.execute("INSERT INTO mail_domain_lanes (domain, lane, mx, expires_at) VALUES (?, ?, ?, ?)"
                         " ON CONFLICT (domain) DO UPDATE SET lane = excluded.lane, mx = excluded.mx,"
                         " expires_at = excluded.expires_at", (domain, lane, host, clock.format_ts(moment + ttl)))
    log.info("MX lanes: %d domain(s) looked up in %.2f s", len(results), time.monotonic() - started)
    lanes.update({d: lane for d, (lane, _, _) in results.items()})
    return lanes


def assign_lanes(conn: sqlite3.Connection, campaign_id: str) -> dict[str, int]:
    """Give the messages queued since the last pass their lane (the module docstring); the
    number of messages per lane outside `other`."""
    mark = conn.execute("SELECT through FROM email_lane_marks WHERE campaign_id = ?", (campaign_id,)).fetchone()
    through = mark[0] if mark else 0
    rows = conn.execute("SELECT domain, count(*), max(id) FROM email_messages WHERE campaign_id = ?"
                        " AND status = 'queued' AND id > ? GROUP BY domain", (campaign_id, through)).fetchall()
    if not rows:
        return {}
    table = TABLE.current()
    lanes = {r[0]: domain_lane(r[0], table) for r in rows}
    unknown = [r[0] for r in sorted(rows, key=lambda r: -r[1]) if lanes[r[0]] is None]
    if unknown:
        lanes.update(resolve_domains(conn, unknown, table))
    placed = {d: lane for d, lane in lanes.items() if lane is not None and lane != OTHER}
    counts: dict[str, int] = {}
    for r in rows:
        if r[0] in placed:
            counts[placed[r[0]]] = counts.get(placed[r[0]], 0) + r[1]
    last = max(r[2] for r in rows)
    names = sorted(placed)
    with transaction(conn):
        for start in range(0, len(names), CHUNK):
            chunk = names[start:start + CHUNK]
            cases = " ".join("WHEN ? THEN ?" for _ in chunk)
            conn.execute(f"UPDATE email_messages SET lane = CASE domain {cases} END WHERE campaign_id = ?"
                         f" AND status = 'queued' AND id > ? AND id <= ? AND domain IN ({marks(chunk)})",
                         (*(v for d in chunk for v in (d, placed[d])), campaign_id, through, last, *chunk))
        conn.execute("INSERT INTO email_lane_marks (campaign_id, through) VALUES (?, ?) ON CONFLICT (campaign_id)"
                     " DO UPDATE SET through = excluded.through", (campaign_id, last))
    return counts
