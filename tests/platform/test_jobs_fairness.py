"""The job runner is fair across workspaces (issue 40, item 3).

Before, `mkt serve` ran one job at a time for every workspace: a webhook receiver that drips its
answer held the runner for the webhook's whole deadline (10 s) per job, and meanwhile every
other workspace's campaign sends, SMS hand-offs and segment counts waited. Now a runner has
several worker threads and each workspace runs on at most its share of them (jobs/pool.py), the
count read from the jobs table in the claim itself (jobs/queue.py).

Workspace A: 16 contacts in a flow whose one step is a webhook to a receiver that sends its
answer a byte a second for 60 s, so each of A's 16 webhook jobs holds its worker until the
deadline cuts it off (then it is retried with backoff). Workspace B: a 1,000-recipient campaign
scheduled NOW and a segment recount, asked for once A's webhooks hold their workers. serve's
worker (4 threads, A's share 2) runs them all. B's campaign is SENT and its segment counted while
A's webhooks are still being called, before A's backlog (16 first attempts of 10 s on 2
workers: 80 s) is through: some of A's webhooks have not even been tried when B is done.
One thread could not do that: B's jobs, queued after A's, waited for all 16 first attempts
(2 min 40 s). How fast B is beside A compared with B alone: bench/bench_fairness.py.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from marketing_cli import jobs
from marketing_cli.jobs import context
from marketing_cli.storage.db import connect
from tests import factories as f
from tests.hostile_http import HostileServer

pytestmark = pytest.mark.slow

HOOKS = 16  # A's webhook jobs, each held 10 s by the dripping receiver
RECIPIENTS = 1000
WORKERS, SHARE = 4, 2


class Watch(threading.Thread):
    """Samples the running jobs every 20 ms: the most of A's, and of all, seen at once."""

    def __init__(self, db_path: Any, a: int) -> None:
        super().__init__(daemon=True)
        self.db_path, self.a = db_path, a
        self.most_a = self.most = 0
        self.done = threading.Event()

    def run(self) -> None:
        conn = connect(self.db_path, upgrade=False)
        try:
            while not self.done.wait(0.02):
                rows = conn.execute("SELECT workspace_id, count(*) FROM jobs WHERE status = 'running'"
                                    " GROUP BY workspace_id").fetchall()
                self.most_a = max(self.most_a, sum(n for ws, n in rows if ws == self.a))
                self.most = max(self.most, sum(n for _, n in rows))
        finally:
            conn.close()


def _wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_workspace_s_stalled_webhooks_do_not_hold_up_another_workspace_s_send(
        conn: Any, db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MKT_ALLOW_PRIVATE_URLS", "1")  # the receiver listens on 127.0.0.1
    with HostileServer("slow_head", interval=1.0, lasting=60.0) as receiver:
        a = f.stalled_webhooks(conn, receiver.url("/hook"), HOOKS)
        assert conn.execute("SELECT count(*) FROM jobs WHERE type = 'automations.webhook' AND status = 'queued'"
                            " AND workspace_id = ?", (a,)).fetchone()[0] == HOOKS
        b, campaign_id, segment_id = f.campaign_and_segment(conn, RECIPIENTS)
        watch = Watch(db_path, a)
        watch.start()
        worker = jobs.Worker(db_path, interval=0.05, workers=WORKERS, share=SHARE)
        worker.start()
        try:
            # A's webhooks hold their workers first; then B asks for its send and its count.
            _wait_for(lambda: len(receiver.requests) >= SHARE, 60, "A's webhooks to reach the receiver")
            f.send_and_count(conn, b, campaign_id, segment_id)
            _wait_for(lambda: f.sent_and_counted(conn, campaign_id, segment_id), 240, "B's send and count")
            untried = conn.execute("SELECT count(*) FROM automation_webhooks WHERE workspace_id = ? AND attempts = 0",
                                   (a,)).fetchone()[0]
            delivered = conn.execute("SELECT count(*) FROM email_messages WHERE campaign_id = ?"
                                     " AND status = 'delivered'", (campaign_id,)).fetchone()[0]
        finally:
            worker.stop(timeout=30)
            watch.done.set()
            watch.join(5)
    assert delivered == RECIPIENTS
    # B did not wait for A's backlog: some of A's webhooks were not even tried when B was done.
    assert untried > 0, "B's send waited for every one of A's stalled webhooks"
    # A never held more than its share of the workers, and the workers were never more than 4.
    assert watch.most_a == SHARE and watch.most <= WORKERS, (watch.most_a, watch.most)
    assert not worker._thread.is_alive()


def test_the_share_is_read_from_the_running_leases(conn: Any, workspace: dict[str, Any]) -> None:
    """claim(share=2) passes over a workspace of which the owner already runs 2 jobs, takes the
    next workspace's job (younger, but the older ones are the full workspace's), and counts
    neither other owners' leases nor jobs of no workspace."""
    a, b = workspace["id"], f.workspace(conn, "Shop B")["id"]
    older = [jobs.enqueue(conn, "test.fair", workspace_id=a) for _ in range(4)]
    younger = jobs.enqueue(conn, "test.fair", workspace_id=b)
    installation = jobs.enqueue(conn, "test.fair")
    taken = [jobs.claim(conn, "runner-1", types=["test.fair"], share=2)["id"] for _ in range(2)]
    assert taken == older[:2]
    assert jobs.claim(conn, "runner-1", types=["test.fair"], share=2)["id"] == younger  # A is at its share
    assert jobs.claim(conn, "runner-1", types=["test.fair"], share=2)["id"] == installation  # not counted
    assert jobs.claim(conn, "runner-1", types=["test.fair"], share=2) is None  # A's two left wait for a free share
    assert jobs.claim(conn, "runner-2", types=["test.fair"], share=2)["id"] == older[2]  # another runner's own share
    assert jobs.claim(conn, "runner-1", types=["test.fair"])["id"] == older[3]  # no share: oldest first


def test_each_claim_of_a_runner_has_a_lease_owner_of_its_own(conn: Any, workspace: dict[str, Any]) -> None:
    """A runner's threads share its owner as a prefix only: a job whose lease lapsed under a starved
    thread and that the same runner claims again is fenced from its first run (before, one owner
    for the runner: the first run's renewals and its `done` would have counted for the second)."""
    seen: list[str] = []
    jobs.handler("test.fair")(lambda c, job: seen.append(context._current.get()[1]))
    try:
        for _ in range(3):
            jobs.enqueue(conn, "test.fair", workspace_id=workspace["id"])
        assert jobs.run_pass(conn, "host:1:runner", workers=2) == {"processed": 3, "failed": 0}
    finally:
        jobs._handlers.pop("test.fair", None)
    assert len(set(seen)) == 3 and all(owner.startswith("host:1:runner#") for owner in seen), seen

    job_id = jobs.enqueue(conn, "test.fair", workspace_id=workspace["id"])
    first = jobs.claim(conn, "host:1:runner#7", types=["test.fair"], share=2, runner="host:1:runner#")
    conn.execute("UPDATE jobs SET lease_expires_at = '2000-01-01T00:00:00Z' WHERE id = ?", (job_id,))
    again = jobs.claim(conn, "host:1:runner#8", types=["test.fair"], share=2, runner="host:1:runner#")
    assert first["id"] == again["id"] == job_id and again["attempts"] == 2
    assert not jobs.renew_lease(conn, job_id, "host:1:runner#7") and not jobs.complete(conn, job_id, "host:1:runner#7")
    assert jobs.complete(conn, job_id, "host:1:runner#8")
