"""Segments and audiences at scale: the compiled filters against hand-written SQL, at
20,000 contacts (--quick) or 1,000,000 (full).

One temporary database per run: a workspace on the pro plan, four custom fields created
through the fields service (so their expression indexes exist, as in production), 20
tags, and the contacts loaded with executemany in batches (time-ordered ids; about 90%
SUBSCRIBED, random delivery/open/click statistics and last activity over a year, 0-3
tags each). ANALYZE runs after the load.

Rows (each a median of warm runs; the baseline is measured in the same run):
- segment member calculation: `recount_segment` (the segment.count job: load, validate,
  compile, count, store) of a three-filter AND segment (country eq FR, open_rate gte 30,
  last_activity within_last_days 90) against the hand-written COUNT(*) for the same
  filter. Target: ratio <= 3.
- audience count: `count_audience` of TAGS include (2 tags) with that segment excluded,
  email channel, against a hand-written JOIN ... EXCEPT count. Target: ratio <= 3.
- audience batches: `iter_audience_batches` (the audience snapshot into a temporary table,
  read 1,000 ids at a time) over the entire email audience and over the audience above,
  against resolving the audience and fetching all its ids into Python with one SELECT.
  Target: ratio <= 2.
"""

from __future__ import annotations

import json
import os
import random
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

from marketing_cli.kernel import clock  # noqa: E402
from marketing_cli.kernel.ids import new_id  # noqa: E402
from marketing_cli.storage.db import connect, transaction  # noqa: E402

BATCH = 10_000
COUNTRIES = ("US", "GB", "FR", "DE", "ES", "IT", "NL", "BR", "MX", "CA", "AU", "IN", "JP", "SE", "PL")
PLANS = ("free", "basic", "pro", "enterprise")
FIELDS = (
    {"label": "City", "merge_tag": "city", "type": "TEXT"},
    {"label": "Age", "merge_tag": "age", "type": "NUMBER"},
    {"label": "Plan", "merge_tag": "plan", "type": "DROPDOWN_SINGLE", "definition": ",".join(PLANS)},
    {"label": "Country", "merge_tag": "country", "type": "COUNTRY"},
)
INSERT = (
    "INSERT INTO contacts (id, workspace_id, email, status, data, total_delivered, unique_opens, unique_clicks,"
    " total_opens, total_clicks, last_opened_at, last_clicked_at, created_at, updated_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def build(path: Path, n: int) -> dict:
    from marketing_cli.services.account import billing, workspaces
    from marketing_cli.services.contacts import fields, tags

    conn = connect(path)
    ws = workspaces.create_workspace(conn, "Bench")["workspace"]["id"]
    billing.set_plan(conn, ws, "pro")
    billing.set_allowance(conn, ws, "contacts", n + 10)
    ids = {f["merge_tag"]: fields.create_field(conn, ws, f)["id"] for f in FIELDS}
    tag_ids = [tags.create_tag(conn, ws, {"name": f"tag{i}"})["id"] for i in range(20)]
    rnd = random.Random(7)
    now = clock.utcnow()
    stamps = [clock.format_ts(now - timedelta(minutes=m)) for m in range(0, 365 * 24 * 60, 37)]
    statuses = ["SUBSCRIBED"] * 9 + ["UNSUBSCRIBED"]
    city_key, age_key, plan_key, country_key = (str(ids[k]) for k in ("city", "age", "plan", "country"))
    created = clock.now()
    done = 0
    while done < n:
        size = min(BATCH, n - done)
        contacts, links = [], []
        for i in range(done, done + size):
            cid = new_id()
            delivered = rnd.randrange(0, 21)
            opens = rnd.randint(0, delivered) if delivered else 0
            clicks = rnd.randint(0, opens) if opens else 0
            opened = rnd.choice(stamps) if opens else None
            clicked = rnd.choice(stamps) if clicks else None
            data = json.dumps({city_key: f"City {rnd.randrange(500)}", age_key: rnd.randrange(18, 90),
                               plan_key: rnd.choice(PLANS), country_key: rnd.choice(COUNTRIES)},
                              separators=(",", ":"))
            contacts.append((cid, ws, f"user{i}@example.com", rnd.choice(statuses), data, delivered, opens, clicks,
                             opens, clicks, opened, clicked, created, created))
            for tag in rnd.sample(tag_ids, rnd.randrange(4)):
                links.append((cid, tag))
        with transaction(conn):
            conn.executemany(INSERT, contacts)
            conn.executemany("INSERT INTO contact_tags (contact_id, tag_id) VALUES (?, ?)", links)
        done += size
    conn.execute("ANALYZE")
    return {"conn": conn, "ws": ws, "fields": ids, "tags": tag_ids}


def run(quick: bool) -> list[dict]:
    from marketing_cli.services.contacts import audience, segments

    n = 20_000 if quick else 1_000_000
    repeat = 5
    label = f"{n:,} contacts"
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        world = build(Path(tmp) / "bench.db", n)
        load_seconds = time.perf_counter() - started
        conn, ws = world["conn"], world["ws"]
        country = world["fields"]["country"]
        filters = {"condition": "AND", "filters": [
            {"type": "field", "field_id": country, "operator": "eq", "value": "FR"},
            {"type": "open_rate", "operator": "gte", "value": 30},
            {"type": "last_activity", "operator": "within_last_days", "value": 90},
        ]}
        seg = segments.create_segment(conn, ws, {"name": "Engaged in France", "filters": filters})
        cutoff = clock.format_ts(clock.utcnow() - timedelta(days=90))
        hand_segment = (
            f"""SELECT COUNT(*) FROM contacts WHERE workspace_id = ? AND json_extract(data, '$."{country}"') = 'FR'"""
            " AND total_delivered > 0 AND unique_opens * 100.0 / total_delivered >= 30"
            " AND MAX(COALESCE(last_opened_at, ''), COALESCE(last_clicked_at, '')) >= ?"
        )
        hand_count = conn.execute(hand_segment, (ws, cutoff)).fetchone()[0]
        counted = segments.recount_segment(conn, ws, seg["id"])
        assert counted is not None and counted["contact_count"] == hand_count, (counted, hand_count)
        t_recount = median(lambda: segments.recount_segment(conn, ws, seg["id"]), repeat)
        t_hand = median(lambda: conn.execute(hand_segment, (ws, cutoff)).fetchone(), repeat)

        include = world["tags"][:2]
        aud = {"type": "TAGS", "include_tag_ids": include, "exclude_segment_ids": [seg["id"]]}
        hand_audience = (
            "SELECT COUNT(*) FROM (SELECT ct.contact_id FROM contact_tags ct JOIN contacts c ON c.id = ct.contact_id"
            " WHERE ct.tag_id IN (?, ?) AND c.workspace_id = ? AND c.status = 'SUBSCRIBED' AND c.email IS NOT NULL"
            f""" EXCEPT SELECT id FROM contacts WHERE workspace_id = ? AND json_extract(data, '$."{country}"') = 'FR'"""
            " AND total_delivered > 0 AND unique_opens * 100.0 / total_delivered >= 30"
            " AND MAX(COALESCE(last_opened_at, ''), COALESCE(last_clicked_at, '')) >= ?)"
        )
        hand_params = (*include, ws, ws, cutoff)
        resolved = audience.count_audience(conn, ws, aud, "email")
        expected = conn.execute(hand_audience, hand_params).fetchone()[0]
        assert resolved == expected, (resolved, expected)
        t_aud = median(lambda: audience.count_audience(conn, ws, aud, "email"), repeat)
        t_aud_hand = median(lambda: conn.execute(hand_audience, hand_params).fetchone(), repeat)

        batch_rows = []
        for what, batch_aud in (("entire email audience", {"type": "ENTIRE_AUDIENCE"}), ("the audience above", aud)):
            query = audience.resolve_audience(conn, ws, batch_aud, "email")
            total = sum(len(b) for b in audience.iter_audience_batches(conn, ws, batch_aud, "email"))
            assert total == len(conn.execute(query.sql, query.params).fetchall())
            t_batches = median(lambda a=batch_aud: sum(len(b) for b in audience.iter_audience_batches(
                conn, ws, a, "email")), 3)
            def all_at_once(a: dict = batch_aud) -> list:
                q = audience.resolve_audience(conn, ws, a, "email")
                return conn.execute(q.sql, q.params).fetchall()

            t_all = median(all_at_once, 3)
            batch_rows.append(row(f"audience ids in batches of 1,000, {what}, {label} ({total:,} ids)",
                                  t_batches * 1000, "ms", "resolve + one SELECT of all ids", t_all * 1000, t_batches / t_all,
                                  "ratio <= 2", t_batches / t_all <= 2))
        conn.close()

    rows = [
        row(f"segment member calculation, 3 filters, {label} ({hand_count:,} members)", t_recount * 1000, "ms",
            "hand-written COUNT(*)", t_hand * 1000, t_recount / t_hand, "ratio <= 3", t_recount / t_hand <= 3),
        row(f"audience count, 2 tags in, segment out, {label} ({resolved:,})", t_aud * 1000, "ms",
            "hand-written JOIN ... EXCEPT", t_aud_hand * 1000, t_aud / t_aud_hand, "ratio <= 3",
            t_aud / t_aud_hand <= 3),
        *batch_rows,
    ]
    if os.environ.get("MKT_BENCH_VERBOSE"):
        print(f"load: {load_seconds:.1f} s for {n:,} contacts", file=sys.stderr)
    return rows


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    os.environ["MKT_BENCH_VERBOSE"] = "1"
    for r in run(args.quick):
        print(f"{r['name']}: {r['value']:.2f} {r['unit']} vs {r['baseline']} {r['baseline_value']:.2f}"
              f" -> {r['ratio']:.2f} ({r['target']}: {'ok' if r['ok'] else 'MISSED'})")
