"""Campaign timelines at scale: an email campaign and an SMS campaign of 50,000 messages
(--quick) or 1,000,000 each (full), read through `get_campaign_timeline` /
`campaign_timeline`.

One temporary database per run. The email campaign's messages are written as the sender
writes them (one INSERT ... SELECT per batch of 50,000), then their events as set-based
UPDATEs of the event columns with timestamps spread over the 110 hours since the send
started (so the step 16 hour triggers run once per changed row, as they do for the sender,
the tracker and the bounce importer): deliveries over the first two hours, 2% failed, 1%
bounced, 25% opened with a skew towards the first hours, 16% of the openers clicking once
or twice (email_clicks rows, human), 0.3% unsubscribed, 0.05% complained. Total opens get
their hour rows the way the schema step fills them (set-based; record_open writes one per
open). The SMS campaign: 1,000 expansion batches, each with its ledger charge, every message
handed over in the first hour, 95% delivered and 3% failed over the next hours, 5% clicking,
0.5% STOP replies.

Rows (medians of warm runs; the baselines are measured in the same run, on the same rows):
- the email timeline read against a bare `GROUP BY` of ONE event column over the raw rows
  (the opens per hour: `substr(opened_at, 1, 13)` of the campaign's messages), and against
  computing every series of the timeline from the raw rows (what the hour counters save).
  Target: well under a second at 1,000,000 messages (100 ms).
- the same for the SMS timeline against a bare `GROUP BY` of the deliveries per hour.
- the report's chart (kernel/timeline.py `campaign_chart`): its finer buckets read
  the events themselves, against the same bare `GROUP BY`, which sets FINE_LIMIT (above it
  the chart keeps hourly buckets); its hourly buckets sum the hour rows.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import median_seconds as median  # noqa: E402
from common import row  # noqa: E402

from marketing_cli.kernel import clock, timeline  # noqa: E402
from marketing_cli.storage.db import connect, transaction  # noqa: E402

BATCH = 50_000
HOURS_AGO = 110

INSERT_EMAIL = (
    "INSERT INTO email_messages (campaign_id, variant_id, contact_id, email, domain, provider, created_at)"
    " WITH RECURSIVE seq(i) AS (SELECT :start UNION ALL SELECT i + 1 FROM seq WHERE i + 1 < :stop)"
    " SELECT :campaign, CASE i % 2 WHEN 0 THEN :a ELSE :b END, NULL, 'user' || i || '@gmail.com', 'gmail.com',"
    " 'Gmail', :now FROM seq"
)
# (column, extra assignments, which ids, seconds after the start): ids hash to 0-9999 through (id * 7919) % 10000
TS = "strftime('%Y-%m-%dT%H:%M:%S.000Z', :t0 + ({}), 'unixepoch')"
SKEW = "(((id * 31) % 1000) * ((id * 31) % 1000) * 396 / 1000)"  # 0-110 hours, most in the first ones
EMAIL_EVENTS = (
    ("failed_at", ", status = 'failed'", "h < 200", "id % 7200"),
    ("delivered_at", ", status = 'delivered'", "h >= 200", "id % 7200"),
    ("bounced_at", ", status = 'bounced', bounce_type = 'hard'", "h >= 200 AND h < 300", "7200 + id % 3600"),
    ("opened_at", ", open_count = 1 + id % 3", "h >= 300 AND (id * 31) % 100 < 25", "7200 + " + SKEW),
    ("clicked_at", "", "opened_at IS NOT NULL AND (id * 37) % 100 < 16", "7300 + " + SKEW),
    ("unsubscribed_at", "", "h >= 300 AND (id * 17) % 1000 < 3", "7400 + " + SKEW),
    ("complained_at", "", "h >= 300 AND (id * 13) % 10000 < 5", "7500 + " + SKEW),
)

INSERT_SMS = (
    "INSERT INTO sms_messages (campaign_id, contact_id, batch, phone, country, encoding, segments, price_units,"
    " status, created_at)"
    " WITH RECURSIVE seq(i) AS (SELECT :start UNION ALL SELECT i + 1 FROM seq WHERE i + 1 < :stop)"
    " SELECT :campaign, 'c' || i, i / 1000, '+1415' || printf('%07d', i), 'US', 'GSM-7', 1, 830, 'pending', :now"
    " FROM seq"
)
SMS_EVENTS = (
    ("handed_at", ", status = 'sent', provider = 'outbox'", "1", "id % 3600"),
    ("delivered_at", ", status = 'delivered'", "(id * 7919) % 100 < 95", "3600 + " + SKEW),
    ("failed_at", ", status = 'failed'", "(id * 7919) % 100 >= 97", "3600 + " + SKEW),
    ("unsubscribed_at", "", "(id * 13) % 1000 < 5", "7200 + " + SKEW),
)

RAW_EMAIL = " UNION ALL ".join(
    f"SELECT substr({column}, 1, 13) AS hour, {i} AS series, count(*) AS n FROM email_messages"
    f" WHERE campaign_id = :c AND {column} IS NOT NULL GROUP BY 1"
    for i, column in enumerate(("delivered_at", "failed_at", "opened_at", "clicked_at", "unsubscribed_at",
                                "bounced_at", "complained_at"))) + (
    " UNION ALL SELECT substr(opened_at, 1, 13), 7, sum(open_count) FROM email_messages"
    " WHERE campaign_id = :c AND opened_at IS NOT NULL GROUP BY 1"
    " UNION ALL SELECT substr(k.clicked_at, 1, 13), 8, count(*) FROM email_clicks k JOIN email_messages m"
    " ON m.id = k.message_id WHERE m.campaign_id = :c AND k.machine = 0 GROUP BY 1")
BARE_EMAIL = ("SELECT substr(opened_at, 1, 13) AS hour, count(*) FROM email_messages"
              " WHERE campaign_id = ? AND opened_at IS NOT NULL GROUP BY hour")
BARE_SMS = ("SELECT substr(delivered_at, 1, 13) AS hour, count(*) FROM sms_messages"
            " WHERE campaign_id = ? AND delivered_at IS NOT NULL GROUP BY hour")


def _updates(conn, table: str, cid: str, events: tuple, t0: int) -> None:  # noqa: ANN001
    first, last = conn.execute(f"SELECT min(id), max(id) FROM {table} WHERE campaign_id = ?", (cid,)).fetchone()
    for column, also, where, offset in events:
        for low in range(first, last + 1, BATCH):
            with transaction(conn):
                conn.execute(f"UPDATE {table} SET {column} = {TS.format(offset)}{also} WHERE id IN (SELECT id FROM"
                             f" (SELECT *, (id * 7919) % 10000 AS h FROM {table} WHERE id >= :low AND id < :high)"
                             f" WHERE {where})", {"t0": t0, "low": low, "high": low + BATCH})


def build_email(conn, ws: int, n: int, start) -> str:  # noqa: ANN001
    from marketing_cli.services.email import campaigns, stats

    created = campaigns.create_campaign(conn, ws, {"name": "Bench", "type": "AB_TESTING"})
    cid, (a, b) = created["id"], [v["id"] for v in created["variants"]]
    now = clock.now()
    with transaction(conn):
        conn.execute("UPDATE campaigns SET status = 'SENT', send_started_at = ? WHERE id = ?",
                     (clock.format_ts(start), cid))
    for low in range(0, n, BATCH):
        with transaction(conn):
            conn.execute(INSERT_EMAIL, {"start": low, "stop": min(low + BATCH, n), "campaign": cid, "a": a, "b": b,
                                        "now": now})
    t0 = int(start.timestamp())
    _updates(conn, "email_messages", cid, EMAIL_EVENTS, t0)
    [link] = stats.register_links(conn, cid, a, ["https://shop.example/"]).values()
    with transaction(conn):  # every click of the clickers (one or two each), 5 minutes apart
        conn.execute("INSERT INTO email_clicks (message_id, link_id, clicked_at, device_type, os, country)"
                     " SELECT id, :link, clicked_at, 'mobile', 'iOS', 'US' FROM email_messages"
                     " WHERE campaign_id = :c AND clicked_at IS NOT NULL UNION ALL"
                     " SELECT id, :link, strftime('%Y-%m-%dT%H:%M:%S.000Z', clicked_at, '+300 seconds'), 'mobile',"
                     " 'iOS', 'US' FROM email_messages WHERE campaign_id = :c AND clicked_at IS NOT NULL AND id % 3 = 0",
                     {"link": link, "c": cid})
        conn.execute("INSERT INTO email_campaign_hours (campaign_id, hour, variant_id, total_opens)"
                     " SELECT campaign_id, substr(opened_at, 1, 13) AS h, variant_id, sum(open_count) FROM email_messages"
                     " WHERE campaign_id = ? AND opened_at IS NOT NULL GROUP BY 1, 2, 3"
                     " ON CONFLICT (campaign_id, hour, variant_id) DO UPDATE SET total_opens = excluded.total_opens",
                     (cid,))
    return cid


def build_sms(conn, ws: int, n: int, start) -> str:  # noqa: ANN001
    created = clock.format_ts(start)
    from marketing_cli.kernel.ids import new_id

    cid = new_id()
    with transaction(conn):
        conn.execute("INSERT INTO sms_campaigns (id, workspace_id, name, message, status, queued_at, created_at,"
                     " updated_at) VALUES (?, ?, 'Bench', 'Hello', 'COMPLETED', ?, ?, ?)",
                     (cid, ws, created, created, created))
    for low in range(0, n, BATCH):
        with transaction(conn):
            conn.execute(INSERT_SMS, {"start": low, "stop": min(low + BATCH, n), "campaign": cid, "now": created})
    with transaction(conn):  # one charge per expansion batch of 1,000, in the first minutes
        conn.execute("INSERT INTO sms_ledger (workspace_id, kind, amount, campaign_id, batch, reason, created_at)"
                     " SELECT ?, 'charge', '-8.30000', ?, batch, 'bench', strftime('%Y-%m-%dT%H:%M:%S.000Z', ?,"
                     " '+' || batch || ' seconds') FROM sms_messages WHERE campaign_id = ? GROUP BY batch",
                     (ws, cid, created, cid))
    _updates(conn, "sms_messages", cid, SMS_EVENTS, int(start.timestamp()))
    with transaction(conn):
        conn.execute("INSERT INTO sms_clicks (message_id, url, country, device_type, operating_system, clicked_at)"
                     " SELECT id, 'https://shop.example/', 'US', 'mobile', 'iOS', delivered_at FROM sms_messages"
                     " WHERE campaign_id = ? AND delivered_at IS NOT NULL AND (id * 37) % 100 < 5", (cid,))
    return cid


def run(quick: bool) -> list[dict]:
    from marketing_cli.services.account import workspaces
    from marketing_cli.services.email.timeline import CHART as EMAIL_CHART
    from marketing_cli.services.email.timeline import get_campaign_timeline
    from marketing_cli.services.sms.timeline import campaign_timeline

    n = 50_000 if quick else 1_000_000
    repeat = 9
    label = f"{n:,} messages"
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        conn = connect(Path(tmp) / "bench.db")
        ws = workspaces.create_workspace(conn, "Bench")["workspace"]["id"]
        start = timeline.floor_hour(clock.utcnow() - timedelta(hours=HOURS_AGO)) + timedelta(minutes=20)
        email, sms = build_email(conn, ws, n, start), build_sms(conn, ws, n, start)
        conn.execute("ANALYZE")
        load_seconds = time.perf_counter() - started
        result = get_campaign_timeline(conn, ws, email)
        raw: dict[int, int] = {}
        for _, series, count in conn.execute(RAW_EMAIL, {"c": email}):
            raw[series] = raw.get(series, 0) + count
        totals = result["totals"]  # the hour rows agree with the raw events
        assert [totals[k] for k in ("delivered", "unique_opens", "unique_clicks", "unsubscribed", "bounced",
                                    "complained", "total_opens", "total_clicks")] == \
            [raw[i] for i in (0, 2, 3, 4, 5, 6, 7, 8)], (totals, raw)
        assert totals["sent"] == raw[0] + raw[1] and len(result["hours"]) == 72
        sms_result = campaign_timeline(conn, ws, sms)
        assert sms_result["totals"]["sent"] == n and sms_result["totals"]["total_clicks"] > 0
        t_email = median(lambda: get_campaign_timeline(conn, ws, email), repeat)
        t_bare = median(lambda: conn.execute(BARE_EMAIL, (email,)).fetchall(), 5)
        t_raw = median(lambda: conn.execute(RAW_EMAIL, {"c": email}).fetchall(), 3)
        t_sms = median(lambda: campaign_timeline(conn, ws, sms), repeat)
        t_sms_bare = median(lambda: conn.execute(BARE_SMS, (sms,)).fetchall(), 5)
        # the report's chart: a 15-minute bucket counts the events themselves (three series and
        # the clicks' join), an hour or longer sums the hour rows (services/email/timeline.py)
        t_fine = median(lambda: timeline.chart_rows(conn.execute, EMAIL_CHART, email, 15), 3)
        t_hourly = median(lambda: timeline.chart_rows(conn.execute, EMAIL_CHART, email, 60), repeat)
        conn.close()
    if os.environ.get("MKT_BENCH_VERBOSE"):
        print(f"load: {load_seconds:.1f} s for 2 x {n:,} messages; email totals {totals}", file=sys.stderr)
    return [
        row(f"email campaign timeline, {label}", t_email * 1000, "ms",
            "bare GROUP BY of the opens per hour over the raw rows", t_bare * 1000, t_email / t_bare, "<= 100 ms",
            t_email * 1000 <= 100),
        row(f"email campaign timeline vs every series from the raw rows, {label}", t_email * 1000, "ms",
            "the 9 series grouped per hour from the raw rows", t_raw * 1000, t_email / t_raw, "ratio <= 0.1",
            t_email / t_raw <= 0.1),
        row(f"SMS campaign timeline (cost from 1,000 ledger rows), {label}", t_sms * 1000, "ms",
            "bare GROUP BY of the deliveries per hour over the raw rows", t_sms_bare * 1000, t_sms / t_sms_bare,
            "<= 100 ms", t_sms * 1000 <= 100),
        row(f"report chart in 15-minute buckets, from the events, {label}", t_fine * 1000, "ms",
            "bare GROUP BY of the opens per hour over the raw rows", t_bare * 1000, t_fine / t_bare,
            "ratio <= 6 (3 series and a join)", t_fine / t_bare <= 6),
        row(f"report chart in hourly buckets, from the hour rows, {label}", t_hourly * 1000, "ms",
            "the campaign timeline (the same hour rows)", t_email * 1000, t_hourly / t_email, "<= 100 ms",
            t_hourly * 1000 <= 100),
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
