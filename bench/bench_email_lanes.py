"""Provider lanes (issue 39 section 2): what they cost a normal send, and what a throttled
provider costs the others.

    python bench/run.py --only email_lanes [--quick]
    python bench/bench_email_lanes.py [--quick]          (the rows as JSON lines)

Row 1, the normal send with lanes and nothing throttled, against the code before the lanes
(the parent of the commit that added services/delivery/lanes.py, exported with `git archive`
to a temporary folder): the same campaign (bench_email_send's body: merge tags, tracking,
DKIM) to recipients at gmail.com, yahoo.com, hotmail.com, icloud.com and 50 other domains, one
`mkt jobs run` (freeze, lanes, send) to bench/smtp_sink.py answering at once. Each code
prepares its own database once; every run sends a copy of it. Runs alternate (base, lanes,
lanes, base, ...) and the medians are compared: target within 5 % (ratio >= 0.95). On a
shared machine the wall clock moves by 10-20 % between identical runs: stderr also gives the
ratio of each back-to-back pair (their median follows the machine's load less) and the CPU
time (user + sys) per message of each run's `mkt jobs run`, the steadier comparisons.

Row 2, the four-lane throttled send: 2,000 recipients at each of the four providers (quick:
600), two `mkt jobs run --forever` workers (MKT_SEND_WORKERS=2) on SQLite, to
bench/relay_standin.py, which answers RCPT TO a gmail.com address `421 4.7.28 ... unusual rate`
for WINDOW seconds (60; quick 10) from the first one. The yahoo, microsoft and apple lanes'
rate (their deliveries over the time from the first delivery to their last one) is compared
with the same send unthrottled, alternated: target >= 90 %. Checked on every run: nothing
failed, no address delivered twice, every message delivered. The lane rates are an
operator's copy (MKT_LANE_RATES) that grows Gmail back within seconds once the window ends
(the shipped table's +1/s every 10 s would take minutes to drain 2,000 held messages).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench_email_send import BODY
from common import REPO, row, smtp_sink

PROVIDERS = ("gmail.com", "yahoo.com", "hotmail.com", "icloud.com")
FAST_RATES = ("lane,rate,start,floor,decrease,increase,every,source\n"
              "gmail,0,50,1,0.5,25,2,bench\nother,0,50,1,0.5,25,2,bench\n")


def _base(folder: Path) -> Path:
    """The code before the lanes, exported to `folder`/base."""
    added = subprocess.run(["git", "log", "--format=%H", "--diff-filter=A", "--", "marketing_cli/services/delivery/lanes.py"],
                           cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    target = folder / "base"
    target.mkdir()
    archive = subprocess.run(["git", "archive", f"{added[-1]}^"], cwd=REPO, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def _mkt(code: Path, db: Path, *args: str, env: dict[str, str] | None = None) -> str:
    out = subprocess.run([sys.executable, "-m", "marketing_cli", "--db", str(db), *args], cwd=code,
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(code), **(env or {})})
    if out.returncode != 0:
        raise RuntimeError(f"mkt {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout


def _prepare(code: Path, db: Path, emails: list[str]) -> str:
    """A database with the recipients and a ready campaign scheduled NOW; its id."""
    import json

    _mkt(code, db, "init", "--name", "Bench")
    for resource in ("contacts", "monthly_emails", "hourly_emails"):
        _mkt(code, db, "billing", "allowance", "set", resource, str(len(emails) * 2))
    csv = db.with_suffix(".csv")
    csv.write_text("email,first_name\n" + "".join(f"{e},Name{i}\n" for i, e in enumerate(emails)))
    _mkt(code, db, "contacts", "import", str(csv))
    domain = json.loads(_mkt(code, db, "domains", "add", "example.com", "--json"))
    with sqlite3.connect(db) as conn:  # the DNS records are taken as published (no DNS in a benchmark)
        conn.execute("UPDATE domains SET verified = 1")
        conn.execute("UPDATE dns_records SET verified = 1")
    sender = json.loads(_mkt(code, db, "senders", "add", "--domain-id", str(domain["id"]), "--local-part", "news",
                             "--display-name", "News", "--json"))
    campaign = json.loads(_mkt(code, db, "campaigns", "create", "--name", "Bench", "--json"))
    _mkt(code, db, "campaigns", "configure", campaign["id"], "--sender-id", str(sender["id"]), "--subject-a",
         "Hello {{contact.first_name}}", "--audience-type", "ENTIRE_AUDIENCE")
    html = db.with_suffix(".html")
    html.write_text(BODY)
    _mkt(code, db, "campaigns", "html", "set", campaign["id"], "A", str(html))
    _mkt(code, db, "campaigns", "schedule", campaign["id"], "--now")
    with sqlite3.connect(db) as conn:  # (all of it in the file: each run sends a copy of the file alone)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return campaign["id"]


def _delivered(db: Path) -> tuple[int, int]:
    with sqlite3.connect(db) as conn:
        return tuple(conn.execute("SELECT count(*) FILTER (WHERE status = 'delivered'),"
                                  " count(*) FILTER (WHERE status = 'failed') FROM email_messages").fetchone())


def _normal_rate(code: Path, prepared: Path, port: int, count: int) -> tuple[float, float]:
    """(messages per second, CPU ms per message of the `mkt jobs run` process)."""
    import resource

    db = prepared.with_name(f"run-{time.monotonic_ns()}.db")
    shutil.copy(prepared, db)
    env = {**os.environ, "PYTHONPATH": str(code), "MKT_SMTP_URL": f"smtp://127.0.0.1:{port}"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "marketing_cli", "--db", str(db), "jobs", "run"], cwd=code, env=env,
                   check=True, capture_output=True)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if _delivered(db) != (count, 0):
        raise RuntimeError(f"{code.name}: {_delivered(db)} delivered/failed of {count}")
    db.unlink()
    return count / seconds, cpu * 1000 / count


def normal_send(folder: Path, quick: bool) -> dict:
    count, rounds = (3_000, 3) if quick else (20_000, 4)
    emails = [f"user{i}@{PROVIDERS[i % 5] if i % 5 < 4 else f'example{i % 50}.org'}" for i in range(count)]
    codes = {"base": _base(folder), "lanes": REPO}
    prepared = {}
    for name, code in codes.items():
        prepared[name] = folder / f"normal-{name}.db"
        _prepare(code, prepared[name], emails)
    sink, port = smtp_sink([sys.executable, str(REPO / "bench" / "smtp_sink.py"), "{port}", "0"])
    rates: dict[str, list[float]] = {"base": [], "lanes": []}
    cpu: dict[str, list[float]] = {"base": [], "lanes": []}
    try:
        for n in range(rounds):
            for name in (("base", "lanes") if n % 2 == 0 else ("lanes", "base")):
                rate, ms = _normal_rate(codes[name], prepared[name], port, count)
                rates[name].append(rate)
                cpu[name].append(ms)
    finally:
        sink.terminate()
        sink.wait(10)
    base, lanes = statistics.median(rates["base"]), statistics.median(rates["lanes"])
    pairs = statistics.median(b / a for a, b in zip(rates["base"], rates["lanes"]))  # (each pair ran back to back)
    print(f"email_lanes normal send: medians {lanes / base:.3f}x, median of the pairs' ratios {pairs:.3f}x, CPU a "
          f"message {statistics.median(cpu['lanes']) / statistics.median(cpu['base']):.3f}x", file=sys.stderr)
    print(f"email_lanes normal send: base {[round(r) for r in rates['base']]} msg/s "
          f"{[round(c, 2) for c in cpu['base']]} CPU ms/msg; lanes {[round(r) for r in rates['lanes']]} msg/s "
          f"{[round(c, 2) for c in cpu['lanes']]} CPU ms/msg", file=sys.stderr)
    return row(f"email send with provider lanes, nothing throttled, {count:,} recipients (5 lanes)", lanes, "msg/s",
               "the same send before the lanes (alternated, medians)", base, lanes / base, ">= 0.95x", lanes / base >= 0.95)


def _throttled_run(prepared: Path, count: int, window: float, folder: Path) -> dict[str, float]:
    """One send by two workers to the relay stand-in (Gmail pushed back for `window` s, 0: never)."""
    db = prepared.with_name(f"run-{time.monotonic_ns()}.db")
    shutil.copy(prepared, db)
    log = folder / f"relay-{time.monotonic_ns()}.log"
    relay, port = smtp_sink([sys.executable, str(REPO / "bench" / "relay_standin.py"), "{port}", str(log),
                             *([f"gmail.com={window}"] if window else [])])
    rates = folder / "rates.csv"
    rates.write_text(FAST_RATES)
    env = {**os.environ, "PYTHONPATH": str(REPO), "MKT_SMTP_URL": f"smtp://127.0.0.1:{port}", "MKT_SEND_WORKERS": "2",
           "MKT_LANE_RATES": str(rates)}
    cmd = [sys.executable, "-m", "marketing_cli", "--db", str(db), "jobs", "run", "--forever", "--interval", "0.2"]
    workers = [subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for _ in range(2)]
    try:
        deadline = time.monotonic() + window + 600
        while time.monotonic() < deadline:
            time.sleep(0.5)
            with sqlite3.connect(db, timeout=30) as conn:
                if conn.execute("SELECT status FROM campaigns").fetchone()[0] == "SENT":
                    break
        else:
            raise RuntimeError("the throttled send did not end")
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(30)
        relay.terminate()
        relay.wait(10)
    delivered, failed = _delivered(db)
    answers = [line.split() for line in log.read_text().splitlines()]
    accepted = [(float(t), address) for t, code, address in answers if code == "250"]
    twice = [a for a, n in Counter(a for _, a in accepted).items() if n > 1]
    if (delivered, failed) != (count, 0) or twice or len(accepted) != count:
        raise RuntimeError(f"throttled send: {delivered} delivered, {failed} failed, {len(accepted)} accepted, "
                           f"{len(twice)} twice (of {count})")
    first = min(t for t, _ in accepted)
    others = [t for t, a in accepted if not a.endswith("@gmail.com")]
    gmail_done = max(t for t, a in accepted if a.endswith("@gmail.com"))
    db.unlink()
    return {"others": len(others) / (max(others) - first), "pushed": sum(1 for a in answers if a[1] == "421"),
            "gmail_done": gmail_done - first}


def throttled_send(folder: Path, quick: bool) -> dict:
    per, window, pairs = (600, 10.0, 2) if quick else (2_000, 60.0, 2)
    emails = [f"user{i}@{PROVIDERS[i % 4]}" for i in range(per * 4)]
    prepared = folder / "throttled.db"
    _prepare(REPO, prepared, emails)
    free, held = [], []
    for n in range(pairs):
        for window_now in ((0.0, window) if n % 2 == 0 else (window, 0.0)):
            result = _throttled_run(prepared, len(emails), window_now, folder)
            (held if window_now else free).append(result)
            print(f"email_lanes throttled send (window {window_now:g} s): other lanes {result['others']:.0f} msg/s, "
                  f"{result['pushed']} pushed back, Gmail done after {result['gmail_done']:.1f} s", file=sys.stderr)
    base = statistics.median(r["others"] for r in free)
    value = statistics.median(r["others"] for r in held)
    return row(f"email send, Gmail lane answered 421 4.7.28 for {window:g} s, {len(emails):,} recipients at 4 providers,"
               " 2 workers (SQLite): the other lanes' rate", value, "msg/s",
               "the same send unthrottled (alternated, medians)", base, value / base, ">= 0.9x (nothing failed, "
               "nothing twice, all delivered)", value / base >= 0.9)


def run(quick: bool) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        return [normal_send(folder, quick), throttled_send(folder, quick)]


if __name__ == "__main__":
    for r in run("--quick" in sys.argv):
        print(r)
