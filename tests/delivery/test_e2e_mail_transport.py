"""`mkt jobs run` (as cron runs it) and `mkt serve` in real processes: each names where mail and
SMS go on stderr when it starts, and a campaign follows the workspace's stored transport
whatever the environment of the process lacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from marketing_cli.storage.db import connect
from tests import factories
from tests.conftest import Server
from tests.smtp_server import SmtpServer

pytestmark = pytest.mark.slow


def _mkt(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A process with no MKT_SMTP_URL and no MKT_OUTBOX, like a bare cron job."""
    env = {k: v for k, v in os.environ.items() if k not in ("MKT_SMTP_URL", "MKT_OUTBOX")}
    return subprocess.run([sys.executable, "-m", "marketing_cli", "--db", str(db), *args],
                          capture_output=True, text=True, timeout=120, env=env, check=False)


def _campaign(db: Path, emails: list[str]) -> str:
    conn = connect(db)
    try:
        ws = factories.workspace(conn, "Cron")["id"]
        return factories.sendable_campaign(conn, ws, emails)["id"]
    finally:
        conn.close()


def test_jobs_run_prints_the_transports_on_stderr_and_keeps_stdout_json(tmp_path: Path) -> None:
    db = tmp_path / "cron.db"
    campaign_id = _campaign(db, ["ann@example.org", "bob@example.org"])
    assert _mkt(db, "campaigns", "schedule", campaign_id, "--now").returncode == 0
    run = _mkt(db, "jobs", "run", "--json")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)  # nothing but the result on stdout
    assert set(result) == {"processed", "failed"} and result["failed"] == 0
    assert run.stderr.splitlines() == [
        f"mail: outbox at {tmp_path / 'outbox'} (nothing leaves this machine)",
        "sms: outbox (`mkt sms outbox` lists the messages; nothing leaves this machine)"]
    assert len(list((tmp_path / "outbox").glob("*.eml"))) == 2
    stats = json.loads(_mkt(db, "campaigns", "stats", campaign_id, "--json").stdout)
    assert stats["aggregate"]["delivered"] == 2 and stats["outbox"] == {"delivered": 2, "path": str(tmp_path / "outbox")}


def test_a_cron_run_without_mkt_smtp_url_sends_through_the_stored_server(tmp_path: Path) -> None:
    db = tmp_path / "cron.db"
    campaign_id = _campaign(db, ["ann@example.org", "bob@example.org"])
    with SmtpServer(tls_dir=tmp_path, users={"u": "p"}) as server:
        assert _mkt(db, "mail", "transport", "set", server.url).returncode == 0
        assert _mkt(db, "campaigns", "schedule", campaign_id, "--now").returncode == 0
        run = _mkt(db, "jobs", "run", "--json")
    assert run.returncode == 0, run.stderr
    assert run.stderr.splitlines()[0].startswith("mail: SMTP smtp://u:****@127.0.0.1:")
    assert ":p@" not in run.stderr
    assert sorted(m.rcpt_tos[0] for m in server.messages) == ["ann@example.org", "bob@example.org"]
    assert not (tmp_path / "outbox").exists()
    stats = json.loads(_mkt(db, "campaigns", "stats", campaign_id, "--json").stdout)
    assert stats["aggregate"]["delivered"] == 2 and stats["outbox"] is None


def test_serve_prints_the_transports_at_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MKT_OUTBOX")
    db = tmp_path / "served.db"
    server = Server(db)
    try:
        output = server.output()
    finally:
        server.stop()
    assert f"mail: outbox at {tmp_path / 'outbox'} (nothing leaves this machine)" in output
    assert "sms: outbox (`mkt sms outbox` lists the messages; nothing leaves this machine)" in output
