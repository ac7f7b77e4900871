"""The email send with warm-ups built in (services/delivery/warmup_gate.py), alternated in the same
run against the same send with the warm-up reads taken out (the send path before warm-ups).

Each run copies one prepared database (a campaign scheduled NOW from bench_email_send's
`_prepare`: DKIM, tracking, merge tags) and sends it with one `mkt jobs run` to an aiosmtpd sink:

- baseline: `Gate.active` and `rank` patched to do nothing (the claim takes the path it took
  before warm-ups existed);
- no warm-up: the code as it is, the domain with no warm-up (a read of domain_warmups every
  5 s per worker): target within 5 % of the baseline;
- warm-up running, caps not reached: every lane capped at 10,000,000 a day, so the claim
  ranks by engagement (email_messages_warm) and counts every message in warmup_counters:
  the cost of a warm-up's bookkeeping (target >= 0.8x).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_email_send import _prepare, _sink
from common import REPO, row

PATCH = ("import sys; from marketing_cli.services.delivery import warmup_gate as g;"
         " g.Gate.active = lambda self, conn: None; g.rank = lambda conn, cid: 0;"
         " from marketing_cli.cli.main import run; sys.argv = ['mkt'] + sys.argv[1:]; run()")
MODES = ("baseline", "no warm-up", "warm-up")


def _run(db: Path, port: int, mode: str) -> float:
    env = {**os.environ, "MKT_SMTP_URL": f"smtp://127.0.0.1:{port}"}
    head = [sys.executable, "-c", PATCH] if mode == "baseline" else [sys.executable, "-m", "marketing_cli"]
    started = time.perf_counter()
    done = subprocess.run([*head, "--db", str(db), "jobs", "run"], cwd=REPO, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"mkt jobs run ({mode}) failed: {done.stderr.strip()[-500:]}")
    return seconds


def _warm(db: Path, folder: Path) -> None:
    schedule = folder / "caps.csv"
    schedule.write_text("day,lane,cap\n" + "".join(f"1,{lane},10000000\n"
                                                   for lane in ("gmail", "yahoo", "microsoft", "apple", "other")))
    with sqlite3.connect(db) as conn:
        domain_id = conn.execute("SELECT id FROM domains").fetchone()[0]
    out = subprocess.run([sys.executable, "-m", "marketing_cli", "--db", str(db), "domains", "warmup", "start",
                          str(domain_id), "--schedule", str(schedule), "--json"], cwd=REPO, capture_output=True,
                         text=True)
    if out.returncode != 0 or json.loads(out.stdout)["status"] != "active":
        raise RuntimeError(f"warm-up start failed: {out.stderr.strip()}")


def run(quick: bool) -> list[dict]:
    count, rounds = (2_000, 2) if quick else (20_000, 3)
    sink, port = _sink()
    seconds: dict[str, list[float]] = {mode: [] for mode in MODES}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            prepared, _ = _prepare(folder, count)
            with sqlite3.connect(prepared) as conn:  # (everything in the main file: the copies are whole)
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            for n in range(rounds):
                for mode in (MODES if n % 2 == 0 else MODES[::-1]):  # alternated
                    db = folder / f"run-{n}-{MODES.index(mode)}.db"
                    shutil.copy(prepared, db)
                    if mode == "warm-up":
                        _warm(db, folder)
                    seconds[mode].append(_run(db, port, mode))
                    with sqlite3.connect(db) as conn:
                        delivered = conn.execute("SELECT count(*) FROM email_messages"
                                                 " WHERE status = 'delivered'").fetchone()[0]
                    if delivered != count:
                        raise RuntimeError(f"{mode}: only {delivered} of {count} messages were delivered")
                    db.unlink()
    finally:
        sink.terminate()
        sink.wait(10)
    rate = {mode: count / min(times) for mode, times in seconds.items()}  # best of the alternated runs
    base = rate["baseline"]
    return [
        row(f"email send, {count:,} recipients, no warm-up", rate["no warm-up"], "msg/s",
            "same send without the warm-up reads", base, rate["no warm-up"] / base, ">= 0.95x",
            rate["no warm-up"] / base >= 0.95),
        row(f"email send, {count:,} recipients, warm-up running (caps not reached)", rate["warm-up"], "msg/s",
            "same send without the warm-up reads", base, rate["warm-up"] / base, ">= 0.8x",
            rate["warm-up"] / base >= 0.8),
    ]


if __name__ == "__main__":
    for r in run("--quick" in sys.argv):
        print(r)
