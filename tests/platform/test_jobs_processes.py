"""`mkt jobs run --processes N` (jobs/processes.py): N forked runner processes share the queue and
one campaign's send; SIGTERM reaches every child; a bad value is refused before anything runs."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from marketing_cli.storage import dialect
from tests import factories
from tests.smtp_server import SmtpServer

REPO = Path(__file__).resolve().parents[2]
RECIPIENTS = 1_500  # above jobs.HELPERS_FROM: the send queues its helper for the second process


def _command(db_path: Any, *args: str) -> list[str]:
    return [sys.executable, "-m", "marketing_cli", "--db", str(db_path), "jobs", "run", *args]


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), **extra}
    env.pop("MKT_SEND_WORKERS", None)
    return env


def _campaign(conn: Any, ws: int) -> str:
    from marketing_cli.kernel import clock
    from marketing_cli.kernel.ids import new_id
    from marketing_cli.services.account import billing
    from marketing_cli.services.email import schedule
    from marketing_cli.storage.db import transaction

    for resource in ("contacts", "monthly_emails", "hourly_emails"):
        billing.set_allowance(conn, ws, resource, RECIPIENTS * 4)
    now = clock.now()
    with transaction(conn):
        conn.executemany("INSERT INTO contacts (id, workspace_id, email, status, data, created_at, updated_at)"
                         " VALUES (?, ?, ?, 'SUBSCRIBED', '{}', ?, ?)",
                         [(new_id(), ws, f"u{i}@example{i % 20}.org", now, now) for i in range(RECIPIENTS)])
    campaign = factories.ready_campaign(conn, ws, html=factories.UNSUBSCRIBE_HTML)
    with transaction(conn):
        conn.execute("UPDATE domains SET verified = 1 WHERE workspace_id = ?", (ws,))
    schedule.schedule_campaign(conn, ws, campaign["id"], {"schedule_type": "NOW"})
    return campaign["id"]


def test_two_processes_share_one_campaign_send(conn: Any, workspace: dict[str, Any], db_path: Any) -> None:
    campaign = _campaign(conn, workspace["id"])
    with SmtpServer() as smtp:
        out = subprocess.run(_command(db_path, "--processes", "2", "--json"), capture_output=True, text=True,
                             env=_env(MKT_SMTP_URL=smtp.url), cwd=REPO, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        totals = json.loads(out.stdout)
        assert totals["failed"] == 0 and totals["processed"] >= 3  # preprocess, send, its helper (and the preview)
        received = Counter(rcpt for m in smtp.messages for rcpt in m.rcpt_tos)
    assert len(received) == RECIPIENTS and set(received.values()) == {1}  # every recipient once
    rows = conn.execute("SELECT status, claim_token FROM email_messages WHERE campaign_id = ?", (campaign,)).fetchall()
    assert {r["status"] for r in rows} == {"delivered"}
    # The claim tokens name the process that handed each message over: both did.
    processes = Counter(re.search(r"/p(\d\d)#", r["claim_token"]).group(1) for r in rows)
    assert set(processes) == {"00", "01"}, processes
    helper = conn.execute("SELECT status FROM jobs WHERE type = 'email.send_helper'").fetchall()
    # MKT_SEND_WORKERS unset: at least 2 with --processes 2 (SQLite's 1 made 2; PostgreSQL's default 4 stays)
    assert [r["status"] for r in helper] == ["done"] * (3 if dialect.postgresql(conn) else 1)
    assert conn.execute("SELECT status FROM campaigns WHERE id = ?", (campaign,)).fetchone()[0] == "SENT"


def test_sigterm_reaches_every_process(workspace: dict[str, Any], db_path: Any) -> None:
    proc = subprocess.Popen(_command(db_path, "--forever", "--interval", "0.2", "--processes", "2", "--json"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(), cwd=REPO, text=True)
    try:
        deadline = time.monotonic() + 60
        children: list[int] = []
        while time.monotonic() < deadline and len(children) < 2:
            time.sleep(0.2)
            children = [int(pid) for pid in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()]
        assert len(children) == 2
        time.sleep(1.0)  # the children in their loops, their signal handlers set
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr[-2000:]
    assert json.loads(stdout) == {"processed": 0, "failed": 0}
    for pid in children:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_processes_refused_out_of_range(cli: Any, workspace: dict[str, Any]) -> None:
    assert cli("jobs", "run", "--processes", "0").exit_code == 2
    assert cli("jobs", "run", "--processes", "65").exit_code == 2


def test_a_child_stays_for_a_job_queued_while_no_sibling_held_a_lease(conn: Any, workspace: dict[str, Any],
                                                                      monkeypatch: Any) -> None:
    """Between a sibling's job and the job it queued (the freeze, then the send) no lease is held
    for a moment: a child that looks then stays for the due job (and a send's helper) rather than
    ending; a due job it cannot take (two passes in a row) ends it all the same."""
    from marketing_cli import jobs
    from marketing_cli.jobs import processes

    monkeypatch.setattr(processes, "SIBLING_POLL", 0.0)
    monkeypatch.setattr(processes, "siblings_busy", lambda conn, owner: False)  # the gap: no lease anywhere
    passes: list[bool] = []

    def run_pass(first: bool) -> dict[str, int]:
        passes.append(first)
        if len(passes) == 1:  # the sibling's freeze queues the send just after this pass looked
            jobs.enqueue(conn, "email.send", {"campaign_id": "c"}, workspace_id=workspace["id"])
            return {"processed": 0, "failed": 0}
        taken = conn.execute("UPDATE jobs SET status = 'done' WHERE status = 'queued'").rowcount
        return {"processed": taken, "failed": 0}

    assert processes.pass_with_siblings(conn, "runner/p01", run_pass, 1.0) == {"processed": 1, "failed": 0}
    assert passes == [True, False]  # it stayed, took the job, and ended when nothing was due

    passes.clear()
    jobs.enqueue(conn, "email.send", {"campaign_id": "d"}, workspace_id=workspace["id"])
    assert processes.pass_with_siblings(conn, "runner/p01", lambda first: passes.append(first) or
                                        {"processed": 0, "failed": 0}, 1.0) == {"processed": 0, "failed": 0}
    assert passes == [True, False]  # a due job it does not take: two passes, then it ends
