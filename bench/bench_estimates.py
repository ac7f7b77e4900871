"""Campaign estimates (services/estimates) in lists: a page of 50 email and 50 SMS campaigns,
with and without their estimates, over a workspace of 10,000 contacts (--quick) or 100,000.

One temporary database per run: bench_sms.py's workspace (US, GB and unpriced IN numbers, a
first name each), 50 email campaigns (30 DRAFTs to the whole audience, 20 SENT) and 50 SMS
campaigns (30 DRAFTs with a merge tag in their message, 20 COMPLETED). A DRAFT's estimate
counts its audience (email) or groups it by skip reason, gate key and price (SMS); a finished
campaign's reads nothing.

Rows (medians, alternated with their baseline in the same run):
- GET /v1/campaigns's page with estimates against the page without (list_campaigns alone).
- GET /v1/sms-campaigns's page with estimates against the page without: with the estimates
  kept (services/estimates/cache.py); after a contact changed (the list's budget: a few
  counted afresh, the others' kept ones reused); and with none kept at all (every draft
  counted: the first list after the upgrade, the worst case).
- one SMS DRAFT's estimate against the reach of the same campaign (GET .../reach: the
  audience grouped by skip reason, the nearest query that existed before).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import row  # noqa: E402

PAGE = 50


def _campaigns(conn, ws: int) -> str:  # noqa: ANN001
    """The page's campaigns; the id of an SMS draft."""
    from marketing_cli.services.email import campaigns as email
    from marketing_cli.services.sms import campaigns as sms

    audience = json.dumps([{"type": "ENTIRE_AUDIENCE"}])
    sms_draft = ""
    for i in range(PAGE):
        made = email.create_campaign(conn, ws, {"name": f"Email {i}"})
        status = "DRAFT" if i < 30 else "SENT"
        conn.execute("UPDATE campaigns SET audience = ?, status = ? WHERE id = ?", (audience, status, made["id"]))
        texting = sms.create_campaign(conn, ws, {"name": f"SMS {i}"})
        sms.update_campaign(conn, ws, texting["id"], {"message": "Hi {{contact.first_name}}, sale today. Reply STOP",
                                                      "audience": [{"type": "ENTIRE_AUDIENCE"}]})
        if i >= 30:
            conn.execute("UPDATE sms_campaigns SET status = 'COMPLETED' WHERE id = ?", (texting["id"],))
        else:
            sms_draft = texting["id"]
    return sms_draft


def _alternated(a, b, repeat: int) -> tuple[float, float]:  # noqa: ANN001
    """Median seconds of `a` and of `b`, run one after the other `repeat` times (after one warm-up each)."""
    import statistics

    a(), b()
    ta, tb = [], []
    for _ in range(repeat):
        for fn, into in ((a, ta), (b, tb)):
            started = time.perf_counter()
            fn()
            into.append(time.perf_counter() - started)
    return statistics.median(ta), statistics.median(tb)


def run(quick: bool) -> list[dict]:
    from datetime import timedelta

    from bench_sms import build

    from marketing_cli.kernel import clock
    from marketing_cli.services.email import campaigns as email
    from marketing_cli.services.estimates import views
    from marketing_cli.services.estimates.cache import FRESH_PER_LIST
    from marketing_cli.services.sms import campaigns as sms
    from marketing_cli.services.sms import reach

    n = 10_000 if quick else 100_000
    repeat = 3 if quick else 3
    label = f"{PAGE} campaigns (30 drafts), {n:,} contacts"
    with tempfile.TemporaryDirectory() as tmp:
        conn, ws = build(Path(tmp) / "bench.db", n)
        draft = _campaigns(conn, ws)
        t_email, t_email_bare = _alternated(lambda: views.email_campaigns(conn, ws, limit=PAGE),
                                            lambda: email.list_campaigns(conn, ws, limit=PAGE), repeat)
        t_sms, t_sms_bare = _alternated(lambda: views.sms_campaigns(conn, ws, limit=PAGE),
                                        lambda: sms.list_campaigns(conn, ws, limit=PAGE), repeat)
        def changed() -> None:  # a contact changed since the estimates were kept: the budget's few afresh
            conn.execute("UPDATE contacts SET updated_at = ? WHERE id = (SELECT min(id) FROM contacts)",
                         (clock.format_ts(clock.utcnow() + timedelta(seconds=len(marks))),))
            marks.append(1)
            views.sms_campaigns(conn, ws, limit=PAGE)

        def cold() -> None:  # nothing kept at all (the first list after the upgrade): every draft counted
            conn.execute("UPDATE sms_campaigns SET estimate_cache = NULL")
            views.sms_campaigns(conn, ws, limit=PAGE)

        marks: list[int] = []
        t_changed, t_sms_bare3 = _alternated(changed, lambda: sms.list_campaigns(conn, ws, limit=PAGE), repeat)
        t_cold, t_sms_bare2 = _alternated(cold, lambda: sms.list_campaigns(conn, ws, limit=PAGE), repeat)
        t_one, t_reach = _alternated(lambda: views.sms_campaign(conn, ws, draft),
                                     lambda: reach.campaign_reach(conn, ws, draft), repeat)
        conn.close()
    if os.environ.get("MKT_BENCH_VERBOSE"):
        print(f"email page {t_email:.3f} s vs {t_email_bare:.3f} s; sms page {t_sms:.3f} s vs {t_sms_bare:.3f} s;"
              f" one SMS estimate {t_one:.3f} s vs reach {t_reach:.3f} s", file=sys.stderr)
    return [
        row(f"email list page with estimates, {label}", t_email * 1000, "ms", "the page without estimates",
            t_email_bare * 1000, t_email / t_email_bare, "<= 1 s", t_email <= 1),
        row(f"SMS list page with estimates, {label}", t_sms * 1000, "ms", "the page without estimates",
            t_sms_bare * 1000, t_sms / t_sms_bare, "<= 5 s", t_sms <= 5),
        row(f"SMS list page after a contact changed (at most {FRESH_PER_LIST} counted afresh), {label}",
            t_changed * 1000, "ms", "the page without estimates", t_sms_bare3 * 1000, t_changed / t_sms_bare3,
            f"<= {FRESH_PER_LIST + 1} x one estimate", t_changed <= (FRESH_PER_LIST + 1) * t_one),
        row(f"SMS list page, no estimate kept at all (every draft counted), {label}", t_cold * 1000, "ms",
            "the page without estimates", t_sms_bare2 * 1000, t_cold / t_sms_bare2, "<= 30 x one estimate",
            t_cold <= 30 * t_one * 1.2),
        row(f"one SMS draft's estimate, {n:,} contacts", t_one * 1000, "ms", "the campaign's reach",
            t_reach * 1000, t_one / t_reach, "ratio <= 5", t_one / t_reach <= 5),
    ]


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    os.environ["MKT_BENCH_VERBOSE"] = "1"
    for r in run(args.quick):
        print(f"{r['name']}: {r['value']:.1f} {r['unit']} vs {r['baseline']} {r['baseline_value']:.1f}"
              f" -> {r['ratio']:.2f} ({r['target']}: {'ok' if r['ok'] else 'MISSED'})")
