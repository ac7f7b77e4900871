"""README.md's "Try a real send locally", run as written: its catcher command, then its commands
in one bash script against an SMTP server of the test's own; the campaign's message arrives and
its statistics say delivered.

The only changes to the text: the catcher's port 8025 becomes a free one (two runs of the suite
on one machine must not collide), and `mkt` / `python3` are this checkout's program and the
test's interpreter (scripts on PATH).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import smtplib
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.smtp_server import SmtpServer, free_port

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
README_PORT = "127.0.0.1:8025"


def trial_blocks() -> tuple[str, str]:
    """(the catcher command, the trial script): the two `sh` blocks of the README's section."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"^## Try a real send locally\n(.*?)(?=^## )", text, re.DOTALL | re.MULTILINE)
    assert match, "README.md has no '## Try a real send locally' section"
    blocks = re.findall(r"^```sh\n(.*?)^```", match.group(1), re.DOTALL | re.MULTILINE)
    assert len(blocks) == 2, "the section holds two sh blocks: the catcher, then the trial"
    catcher, script = blocks
    assert catcher.strip() == f"python3 -m aiosmtpd -n -l {README_PORT}"
    assert README_PORT in script
    return catcher.strip(), script


def environment(tmp_path: Path) -> dict[str, str]:
    """PATH first holds `mkt` (this checkout) and `python3` (this interpreter); no MKT_* from the test run."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # Scripts, not symlinks: a symlinked venv interpreter would lose its venv.
    for name, command in (("python3", shlex.quote(sys.executable)),
                          ("mkt", f"{shlex.quote(sys.executable)} -m marketing_cli")):
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\nexec {command} "$@"\n')
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MKT_")}
    temp = tmp_path / "temp"  # where the README's `mktemp -d` puts the trial's database
    temp.mkdir()
    return {**env, "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", "TMPDIR": str(temp),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))}


def test_the_catcher_command_starts_a_server(tmp_path: Path) -> None:
    catcher, _ = trial_blocks()
    port = free_port()
    process = subprocess.Popen(["bash", "-c", "exec " + catcher.replace(README_PORT, f"127.0.0.1:{port}")],
                               env=environment(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with smtplib.SMTP("127.0.0.1", port, timeout=5) as smtp:
                    assert smtp.ehlo()[0] == 250
                break
            except OSError:
                assert process.poll() is None, "the catcher command exited"
                assert time.monotonic() < deadline, "the catcher never answered"
                time.sleep(0.1)
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_the_trial_sends_the_campaign_and_its_statistics_say_delivered(tmp_path: Path) -> None:
    _, script = trial_blocks()
    env = environment(tmp_path)
    with SmtpServer() as server:
        run = subprocess.run(["bash", "-e", "-u", "-o", "pipefail", "-c",
                              script.replace(README_PORT, f"127.0.0.1:{server.port}")],
                             env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False)
        assert run.returncode == 0, f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
        messages = [m.message for m in server.messages]

    assert "news.example.test is a reserved name" in " ".join(run.stdout.split())
    assert "can never be delivered publicly" in " ".join(run.stdout.split())
    assert "marked verified by the operator" in run.stderr  # the mkt.domains log line
    test_email, sent = messages  # the test email first, then the campaign's one message
    assert test_email["X-Mkt-Test"] == "1"
    assert sent["X-Mkt-Test"] is None
    assert (sent["From"], sent["To"], sent["Subject"]) == ("Example News <news@news.example.test>",
                                                            "ann@example.com", "Hello Ann")
    assert "d=news.example.test" in sent["DKIM-Signature"]
    assert "Hi Ann!" in sent.get_body(("plain",)).get_content()
    assert re.search(r"Delivered\s+1\b", run.stdout), run.stdout  # the README's `mkt campaigns stats`

    [db] = (tmp_path / "temp").glob("*/trial.db")
    env["MKT_DB"] = str(db)

    def mkt(*args: str) -> Any:
        done = subprocess.run(["mkt", *args, "--json"], env=env, capture_output=True, text=True, timeout=120,
                              check=False)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    [campaign] = mkt("campaigns", "list")["campaigns"]
    assert campaign["status"] == "SENT"
    stats = mkt("campaigns", "stats", campaign["id"])
    assert stats["aggregate"]["delivered"] == 1
    domain = mkt("domains", "show", "1")
    assert (domain["verified_by"], domain["reserved_name"]) == ("operator", True)
