"""The circuit breaker's cost on the send path (services/delivery/breakers.py).

A campaign of `count` messages, most of them answered (delivered, 2 % failed as unknown users,
a few bounced and complained), the rest queued: alternated in the same run,

- `breakers.check` (the window of the last 1,000 answers read from the index, the campaign
  left SENDING: no trip), against
- the recording of a round of 5 deliveries (`stats.record_deliveries`, the send's own
  recording, on queued messages of the same campaign).

A send job reads the window after a round with an unknown-user or block refusal and every
100 answers otherwise: a clean send pays one read per 100 messages, a send whose every round
has a refusal one per round (rounds of 5 at the default concurrency of 10); both are set
against the whole send's time per message (end to end, below). The check must not grow with the campaign: its
time on a campaign ten times smaller is the third row's baseline.

End to end (bench_email_send's campaign and SMTP sink, `mkt jobs run`), alternated: the send
with the breaker as shipped, and with it reading the window after every round (the worst
case: every round with a refusal), each against the send with the breaker switched off
(`breakers.check` replaced by a no-op in that process).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import REPO

sys.path.insert(0, str(REPO))

ROUND = 5


def _campaign(conn, ws: int, count: int) -> str:  # noqa: ANN001 - a storage connection
    from marketing_cli.kernel import clock
    from marketing_cli.kernel.ids import new_id
    from marketing_cli.storage.db import transaction

    now = clock.now()
    campaign_id = new_id()
    with transaction(conn):
        conn.execute("INSERT INTO campaigns (id, workspace_id, name, type, status, created_at, updated_at,"
                     " send_started_at) VALUES (?, ?, 'Bench', 'SINGLE_VARIANT', 'SENDING', ?, ?, ?)",
                     (campaign_id, ws, now, now, now))
        answered = count * 8 // 10
        conn.executemany(
            "INSERT INTO email_messages (campaign_id, variant_id, email, domain, provider, created_at, status,"
            " delivered_at, failed_at, bounce_class, complained_at) VALUES (?, 'v', ?, 'example.org', 'Other', ?,"
            " ?, ?, ?, ?, ?)",
            [(campaign_id, f"u{i}@example.org", now,
              "queued" if i >= answered else "failed" if i % 50 == 7 else "bounced" if i % 500 == 3 else "delivered",
              None if i >= answered or i % 50 == 7 else now, now if i < answered and i % 50 == 7 else None,
              "unknown_user" if i < answered and i % 50 == 7 else None,
              now if i < answered and i % 1000 == 11 else None) for i in range(count)])
    return campaign_id


def _time(fn, repeat: int) -> float:  # noqa: ANN001
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


_VARIANT = ("import sys; from marketing_cli.services.delivery import breakers as b; {patch}; "
            "from marketing_cli.cli.main import app; sys.argv[0] = 'mkt'; app()")
VARIANTS = {"off": "b.check = lambda *a, **k: None", "shipped": "pass", "every round": "b.CHECK_EVERY = 1"}


def _end_to_end(count: int, repeat: int) -> dict[str, float]:
    """Seconds of `mkt jobs run` (the audience frozen, then the send) per variant (the median of
    `repeat` alternated runs)."""
    import os
    import subprocess

    from bench_email_send import _prepare, _sink

    sink, port = _sink()
    seconds: dict[str, list[float]] = {name: [] for name in VARIANTS}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for n in range(repeat):
                for name, patch in VARIANTS.items():
                    folder = Path(tmp) / f"{n}-{name.replace(' ', '-')}"
                    folder.mkdir()
                    db, _ = _prepare(folder, count)
                    env = {**os.environ, "MKT_SMTP_URL": f"smtp://127.0.0.1:{port}"}
                    started = time.perf_counter()
                    subprocess.run([sys.executable, "-c", _VARIANT.format(patch=patch), "--db", str(db), "jobs", "run"],
                                   cwd=REPO, env=env, check=True, capture_output=True)
                    seconds[name].append(time.perf_counter() - started)
    finally:
        sink.terminate()
        sink.wait(10)
    return {name: statistics.median(values) for name, values in seconds.items()}


def run(quick: bool) -> list[dict]:
    from common import row

    from marketing_cli.services.account import workspaces
    from marketing_cli.services.delivery import breakers
    from marketing_cli.services.email import stats
    from marketing_cli.storage.db import connect

    count = 20_000 if quick else 200_000
    with tempfile.TemporaryDirectory() as tmp:
        conn = connect(Path(tmp) / "breakers.db")
        ws = workspaces.create_workspace(conn, "Bench")["workspace"]["id"]
        big = _campaign(conn, ws, count)
        small = _campaign(conn, ws, count // 10)
        queued = iter([r[0] for r in conn.execute("SELECT id FROM email_messages WHERE campaign_id = ?"
                                                  " AND status = 'queued' ORDER BY id", (big,))])
        checks, rounds, smalls = [], [], []
        for _ in range(40 if quick else 200):  # alternated
            checks.append(_time(lambda: breakers.check(conn, big), 1))
            ids = [next(queued) for _ in range(ROUND)]
            rounds.append(_time(lambda: stats.record_deliveries(conn, ids), 1))
            smalls.append(_time(lambda: breakers.check(conn, small), 1))
        assert conn.execute("SELECT status FROM campaigns WHERE id = ?", (big,)).fetchone()[0] == "SENDING"
        conn.close()
    check, record, small_check = (statistics.median(x) * 1000 for x in (checks, rounds, smalls))
    ratio = check / record
    sends = 2_000 if quick else 20_000
    e2e = _end_to_end(sends, 3)
    per_message = e2e["off"] / sends * 1000  # ms of the whole send per message, the breaker off
    share = check / 100 / per_message  # one read per 100 answers
    return [
        row(f"email send, {sends:,} recipients, breaker as shipped", sends / e2e["shipped"], "msg/s",
            "breaker off", sends / e2e["off"], e2e["off"] / e2e["shipped"], ">= 0.95x (noisy machine)",
            e2e["off"] / e2e["shipped"] >= 0.95),
        row(f"email send, {sends:,} recipients, breaker read after every round", sends / e2e["every round"], "msg/s",
            "breaker off", sends / e2e["off"], e2e["off"] / e2e["every round"], "reported", True),
        row(f"breaker check, {count:,}-message campaign (window 1,000)", check, "ms",
            f"recording a round of {ROUND} deliveries", record, ratio, "reported", True),
        row("breaker reads per message of a clean send (one per 100 answers)", check / 100 * 1000, "us",
            "the send's time per message, breaker off", per_message * 1000, share, "<= 1 %", share <= 0.01),
        row("breaker reads per message, read after every round (the worst case)", check / ROUND * 1000, "us",
            "the send's time per message, breaker off", per_message * 1000, check / ROUND / per_message, "<= 5 %",
            check / ROUND / per_message <= 0.05),
        row("breaker check against a campaign 10x smaller", check, "ms", f"{count // 10:,} messages", small_check,
            check / small_check, "<= 1.5x (bounded)", check / small_check <= 1.5),
    ]


if __name__ == "__main__":
    for r in run("--quick" in sys.argv):
        print(r)
