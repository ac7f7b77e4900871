"""Email campaign statistics at scale: an A/B campaign of 50,000 messages (--quick) or
1,000,000 (full), read through `get_campaign_statistics`.

One temporary database per run: a workspace, an AB_TESTING campaign with 8 links per
variant and its messages split evenly between A and B, written the way sending will
write them: one INSERT ... SELECT per batch of 50,000 (the insert trigger counts the
recipients), then the events as set-based UPDATEs of the event columns (so the counter
triggers run once per changed row, as they do for the sender and the bounce importer):
about 97% delivered (2% failed, 1% delivered then bounced), 25% of the delivered opened,
0.3% unsubscribed, 0.05% complained; and about 4% of the delivered clicking one to three
times through `record_click` (country, device type and OS drawn from realistic mixes).
Recipients are spread over the big providers' domains and 40 others. Message rows carry
no contact (contact_id NULL): the statistics read never touches contacts.

Rows (medians of warm runs; the baselines are measured in the same run):
- statistics read against a bare `SELECT count(*)` of the campaign's messages (an index
  scan of its rows). Target: the statistics within 200 ms.
- the same read against computing the aggregate and variant numbers by scanning the
  messages (what the counters save).
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import median_seconds as median  # noqa: E402
from common import row  # noqa: E402

from marketing_cli.kernel import clock  # noqa: E402
from marketing_cli.storage.db import connect, transaction  # noqa: E402

BATCH = 50_000
DOMAINS = (["gmail.com"] * 30 + ["hotmail.com"] * 8 + ["outlook.com"] * 6 + ["yahoo.com"] * 8 + ["aol.com"] * 2
           + ["icloud.com"] * 5 + ["me.com"] * 1 + ["gmx.de"] * 3 + ["proton.me"] * 1 + ["yandex.ru"] * 2
           + [f"company{i}.example" for i in range(40)])
COUNTRIES = ["US"] * 30 + ["GB"] * 10 + ["DE"] * 8 + ["FR"] * 8 + ["BR"] * 5 + ["IN"] * 5 + ["CA"] * 4 + \
    ["ES", "IT", "NL", "SE", "PL", "MX", "AU", "JP", "Unknown"] * 2
DEVICES = ["mobile"] * 55 + ["desktop"] * 38 + ["tablet"] * 6 + ["other"]
OS_BY_DEVICE = {"mobile": ["iOS"] * 6 + ["Android"] * 4, "tablet": ["iOS", "Android"],
                "desktop": ["Windows"] * 6 + ["Mac OS X"] * 3 + ["Linux", "Chrome OS"], "other": ["Other"]}

INSERT_BATCH = (
    "INSERT INTO email_messages (campaign_id, variant_id, contact_id, email, domain, provider, created_at)"
    " WITH RECURSIVE seq(i) AS (SELECT :start UNION ALL SELECT i + 1 FROM seq WHERE i + 1 < :stop)"
    " SELECT :campaign, CASE i % 2 WHEN 0 THEN :a ELSE :b END, NULL, 'user' || i || '@' || d.domain, d.domain,"
    " d.provider, :now FROM seq JOIN bench_domains d ON d.n = i % :domains"
)
EVENTS = (  # (column, extra assignments, which ids): ids hash to 0-9999 through (id * 7919) % 10000
    ("failed_at", ", status = 'failed', failure_reason = '550 5.1.1'", "h < 200"),
    ("delivered_at", ", status = 'delivered'", "h >= 200"),
    ("bounced_at", ", status = 'bounced', bounce_type = 'hard'", "h >= 200 AND h < 300"),
    ("opened_at", ", open_count = 1", "h >= 300 AND (id * 31) % 100 < 25"),
    ("unsubscribed_at", "", "h >= 300 AND (id * 17) % 1000 < 3"),
    ("complained_at", "", "h >= 300 AND (id * 13) % 10000 < 5"),
)


def _campaign(conn, ws: int) -> dict:  # noqa: ANN001
    from marketing_cli.services.email import campaigns

    created = campaigns.create_campaign(conn, ws, {"name": "Bench", "type": "AB_TESTING"})
    return {"id": created["id"], **{v["type"]: v["id"] for v in created["variants"]}}


def build(path: Path, n: int) -> dict:
    from marketing_cli.services.account import workspaces
    from marketing_cli.services.email import stats

    conn = connect(path)
    ws = workspaces.create_workspace(conn, "Bench")["workspace"]["id"]
    campaign = _campaign(conn, ws)
    conn.execute("CREATE TEMP TABLE bench_domains (n INTEGER PRIMARY KEY, domain TEXT, provider TEXT)")
    conn.executemany("INSERT INTO bench_domains VALUES (?, ?, ?)",
                     [(i, d, stats.provider_of(d)) for i, d in enumerate(DOMAINS)])
    now = clock.now()
    for start in range(0, n, BATCH):
        with transaction(conn):
            conn.execute(INSERT_BATCH, {"start": start, "stop": min(start + BATCH, n), "campaign": campaign["id"],
                                        "a": campaign["A"], "b": campaign["B"], "now": now,
                                        "domains": len(DOMAINS)})
    first, last = conn.execute("SELECT min(id), max(id) FROM email_messages WHERE campaign_id = ?",
                               (campaign["id"],)).fetchone()
    for column, also, where in EVENTS:
        for low in range(first, last + 1, BATCH):
            with transaction(conn):
                conn.execute(f"UPDATE email_messages SET {column} = ?{also} WHERE id IN (SELECT id FROM"
                             f" (SELECT id, (id * 7919) % 10000 AS h FROM email_messages WHERE id >= ? AND id < ?)"
                             f" WHERE {where})", (now, low, low + BATCH))
    links = {v: list(stats.register_links(conn, campaign["id"], campaign[v],
                                                   [f"https://shop.example/{v}/{i}" for i in range(8)]).values())
             for v in ("A", "B")}
    variant_of = {campaign["A"]: "A", campaign["B"]: "B"}
    rnd = random.Random(11)
    clickers = conn.execute("SELECT id, variant_id FROM email_messages WHERE campaign_id = ? AND delivered_at IS NOT"
                            " NULL AND bounced_at IS NULL AND (id * 37) % 100 < 4", (campaign["id"],)).fetchall()
    for message_id, variant_id in clickers:
        device = rnd.choice(DEVICES)
        os_name, country = rnd.choice(OS_BY_DEVICE[device]), rnd.choice(COUNTRIES)
        for _ in range(rnd.choice((1, 1, 1, 2, 3))):
            stats.record_click(conn, message_id, rnd.choice(links[variant_of[variant_id]]), device,
                                        os_name, country)
    conn.execute("ANALYZE")
    return {"conn": conn, "ws": ws, "campaign": campaign, "clickers": len(clickers)}


SCAN = (
    "SELECT variant_id, count(delivered_at), count(opened_at), count(clicked_at), count(bounced_at),"
    " count(unsubscribed_at), count(complained_at) FROM email_messages WHERE campaign_id = ? GROUP BY variant_id"
)


def run(quick: bool) -> list[dict]:
    from marketing_cli.services.email import stats

    n = 50_000 if quick else 1_000_000
    repeat = 9
    label = f"{n:,} messages"
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        world = build(Path(tmp) / "bench.db", n)
        load_seconds = time.perf_counter() - started
        conn, ws, cid = world["conn"], world["ws"], world["campaign"]["id"]
        result = stats.get_campaign_statistics(conn, ws, cid)
        scanned = {r[0]: list(r[1:]) for r in conn.execute(SCAN, (cid,))}
        for v in result["variant_stats"]:  # the counters agree with the rows
            assert [v[k] for k in stats.COUNTERS] == scanned[v["variant_id"]], (v, scanned)
        assert result["aggregate"]["clicked"] == world["clickers"]
        count_sql = "SELECT count(*) FROM email_messages WHERE campaign_id = ?"
        t_stats = median(lambda: stats.get_campaign_statistics(conn, ws, cid), repeat)
        t_count = median(lambda: conn.execute(count_sql, (cid,)).fetchone(), repeat)
        t_scan = median(lambda: conn.execute(SCAN, (cid,)).fetchall(), 3)
        conn.close()
    if os.environ.get("MKT_BENCH_VERBOSE"):
        print(f"load: {load_seconds:.1f} s for {n:,} messages; aggregate {result['aggregate']}", file=sys.stderr)
    return [
        row(f"campaign statistics, {label}", t_stats * 1000, "ms", "SELECT count(*) of the campaign's messages",
            t_count * 1000, t_stats / t_count, "<= 200 ms", t_stats * 1000 <= 200),
        row(f"campaign statistics from counters vs scanning the messages, {label}", t_stats * 1000, "ms",
            "aggregate by scanning the messages", t_scan * 1000, t_stats / t_scan, "ratio <= 0.1",
            t_stats / t_scan <= 0.1),
    ]


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    os.environ["MKT_BENCH_VERBOSE"] = "1"
    for r in run(args.quick):
        print(f"{r['name']}: {r['value']:.3f} {r['unit']} vs {r['baseline']} {r['baseline_value']:.3f}"
              f" -> {r['ratio']:.4f} ({r['target']}: {'ok' if r['ok'] else 'MISSED'})")
