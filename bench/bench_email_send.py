"""Sending an email campaign end to end against a local SMTP sink, beside bare smtplib loops.

mkt: a campaign with merge tags in the body, tracking on (rewritten links, the open pixel)
and DKIM signing, scheduled NOW and sent by one `mkt jobs run` process (preprocess: the
audience frozen; send: render, sign, SMTP with the default concurrency), and by one
`mkt jobs run --processes 2` (two runner processes sharing the send), to bench/smtp_sink.py's
lean sink (it answers at once and costs the shared cores little) in its own process.

Baselines, in the same run and alternated with mkt's sends (ROUNDS rounds, MKT_BENCH_ROUNDS or 2, of: bare loop,
bare loop with DKIM, mkt, mkt with two processes; each mkt send from a fresh copy of the
prepared database), over one connection to the same sink:
- the bare loop: `smtplib.SMTP.sendmail` of one pre-built message of the size mkt sends
  (the same body, rendered once: about 7 KB);
- the bare loop with DKIM: per message, the body rendered for the recipient (`str.replace`
  of the name and of the per-recipient URLs), signed (the project's DkimSigner: RSA in
  OpenSSL) and sent: the physical floor of the work mkt does per message, without a database.
Each is given with its CPU a message (mkt: the process and its children, from their rusage;
a bare loop: this process's) and the load average at its end; each mkt send with its phases
(read from its database: the freeze's end, the first delivery by each process, the rate from
the first to the last delivery), so the start and the freeze are seen apart from the sending.

Rows: mkt against the bare loop with DKIM (target >= 0.6x), against the bare loop (reported),
two processes against one (target >= 1.6x), the CPU a message of mkt against that of the
bare DKIM loop (reported), and, informational, the rows before 2026-11-29: mkt and the bare
loop against aiosmtpd's sink (whose cost of about 1.4 ms a message caps the bare loop);
MKT_BENCH_AIOSMTPD=0 leaves them out. Peak RSS of the sending process at a tenth of the
audience against the full audience (flat: <= 1.5x). MKT_BENCH_EMAILS sets the audience
(default 100,000; --quick 2,000).
"""

from __future__ import annotations

import os
import re
import resource
import smtplib
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from email import policy
from email.message import EmailMessage
from pathlib import Path

from common import REPO, row, run_measured, smtp_sink

HERE = Path(__file__).resolve().parent
ROUNDS = int(os.environ.get("MKT_BENCH_ROUNDS", 2))  # alternated rounds
BODY = ("<html><head><style>@media (max-width:600px){.c{width:100%!important}}</style></head><body>"
        "<table class='c' width='600' align='center' cellpadding='0' cellspacing='0'>"
        + "".join(f"<tr><td style='padding:8px;font-family:Arial'>Hello {{{{contact.first_name|there}}}}, paragraph {i}"
                  f" of our newsletter with <a href='https://shop.example.org/item/{i}'>item {i}</a> and some words "
                  "to make the message the size of a real one.</td></tr>" for i in range(12))
        + "<tr><td><a href='{{unsubscribe_url}}'>Unsubscribe</a></td></tr></table></body></html>")


def _sink(aiosmtpd: bool = False) -> tuple[subprocess.Popen, int]:
    if aiosmtpd:
        return smtp_sink([sys.executable, "-m", "aiosmtpd", "-n", "-c", "aiosmtpd.handlers.Sink", "-l",
                          "127.0.0.1:{port}"])
    return smtp_sink([sys.executable, str(HERE / "smtp_sink.py"), "{port}", "0"])


def _bare_message() -> tuple[str, str]:
    """The bench's body as mkt sends it, as (HTML, text) templates: the name and the URLs left as
    {name} and {url0}..{url13} (12 links, the unsubscribe link, the open pixel)."""
    from marketing_cli.kernel.html_text import html_to_text

    html = BODY.replace("{{contact.first_name|there}}", "\0name\0").replace("{{unsubscribe_url}}", "\0url12\0")
    html = re.sub(r"https://shop[.]example[.]org/item/([0-9]+)", lambda m: "\0url" + m.group(1) + "\0", html)
    html = html.replace("</body>", '<img src="\0url13\0" width="1" height="1" alt=""></body>')
    html = html.replace("{", "{{").replace("}", "}}")  # (the style's braces) then the placeholders
    html = re.sub("\0([a-z0-9]+)\0", lambda m: "{" + m.group(1) + "}", html)
    return html, html_to_text(html)


def _urls(i: int) -> dict[str, str]:
    token = f"{i:010d}abcdefghijklmnopq"  # 27 characters, longer than mkt's 20: the baseline sends no less
    return {f"url{k}": f"https://track.example.com/t/c/{token}/{k}" for k in range(14)}


def _bare_loop(port: int, count: int) -> tuple[float, float]:
    """(messages a second, CPU ms a message) of sendmail with one pre-built message of mkt's size."""
    html, text = _bare_message()
    values = {"name": "Name1", **_urls(1)}
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "News <news@example.com>", "u@example.org", "Hello Name1"
    message.set_content(text.format(**values))
    message.add_alternative(html.format(**values), subtype="html")
    raw = message.as_bytes(policy=policy.SMTP)
    with smtplib.SMTP("127.0.0.1", port) as smtp:
        started, cpu = time.perf_counter(), time.process_time()
        for i in range(count):
            smtp.sendmail("bounces@example.com", [f"u{i}@example.org"], raw)
        return count / (time.perf_counter() - started), 1000 * (time.process_time() - cpu) / count


def _bare_dkim_loop(port: int, count: int, key_pem: bytes) -> tuple[float, float, int]:
    """(messages a second, CPU ms a message, bytes a message) of: render the body for the
    recipient, DKIM-sign the message and send it, one message after the other."""
    import binascii

    from marketing_cli.services.delivery.dkim import DkimSigner

    signer = DkimSigner("example.com", "mkt", key_pem)
    html, text = _bare_message()
    boundary = "bare-boundary-0123456789"
    part = "--" + boundary + "\r\nContent-Type: text/{kind}; charset=\"utf-8\"\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n"

    def qp(value: str) -> bytes:
        return binascii.b2a_qp(value.encode("utf-8"), istext=True).replace(b"\n", b"\r\n")

    size = 0
    with smtplib.SMTP("127.0.0.1", port) as smtp:
        started, cpu = time.perf_counter(), time.process_time()
        for i in range(count):
            values = {"name": f"Name{i}", **_urls(i)}
            head = (f"From: News <news@example.com>\r\nTo: user{i}@example.org\r\nSubject: Hello Name{i}\r\n"
                    f"Date: Sun, 29 Nov 2026 00:00:00 GMT\r\nMessage-ID: <{i}.bench@example.com>\r\n"
                    f"List-Unsubscribe: <{values['url12']}>\r\nList-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n"
                    f"MIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=\"{boundary}\"\r\n\r\n")
            raw = (head.encode("ascii") + part.format(kind="plain").encode("ascii") + qp(text.format(**values))
                   + b"\r\n" + part.format(kind="html").encode("ascii") + qp(html.format(**values))
                   + f"\r\n--{boundary}--\r\n".encode("ascii"))
            signed = signer.sign(raw)
            size = len(signed)
            smtp.sendmail("bounces@example.com", [f"user{i}@example.org"], signed)
        return count / (time.perf_counter() - started), 1000 * (time.process_time() - cpu) / count, size


def _mkt(db: Path, *args: str, env: dict[str, str] | None = None) -> str:
    out = subprocess.run([sys.executable, "-m", "marketing_cli", "--db", str(db), *args], cwd=REPO,
                         capture_output=True, text=True, env={**os.environ, **(env or {})})
    if out.returncode != 0:
        raise RuntimeError(f"mkt {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout


def _prepare(folder: Path, count: int) -> tuple[Path, str]:
    """A database with `count` subscribed contacts and a ready campaign; returns (db, campaign id)."""
    import json

    db = folder / f"send-{count}.db"
    _mkt(db, "init", "--name", "Bench")
    for allowance in ("contacts", "monthly_emails", "hourly_emails"):
        _mkt(db, "billing", "allowance", "set", allowance, str(count * 20))
    csv = folder / f"contacts-{count}.csv"
    csv.write_text("email,first_name\n" + "".join(f"user{i}@example{i % 50}.org,Name{i}\n" for i in range(count)))
    _mkt(db, "contacts", "import", str(csv))
    domain = json.loads(_mkt(db, "domains", "add", "example.com", "--json"))
    with sqlite3.connect(db) as conn:  # the DNS records are taken as published (no DNS in a benchmark)
        conn.execute("UPDATE domains SET verified = 1")
        conn.execute("UPDATE dns_records SET verified = 1")
    sender = json.loads(_mkt(db, "senders", "add", "--domain-id", str(domain["id"]), "--local-part", "news",
                             "--display-name", "News", "--json"))
    campaign = json.loads(_mkt(db, "campaigns", "create", "--name", "Bench", "--json"))
    _mkt(db, "campaigns", "configure", campaign["id"], "--sender-id", str(sender["id"]), "--subject-a",
         "Hello {{contact.first_name}}", "--audience-type", "ENTIRE_AUDIENCE")
    html = folder / "body.html"
    html.write_text(BODY)
    _mkt(db, "campaigns", "html", "set", campaign["id"], "A", str(html))
    _mkt(db, "campaigns", "schedule", campaign["id"], "--now")
    return db, campaign["id"]


def _send(db: Path, port: int, processes: int = 1) -> tuple[float, int, float]:
    """(seconds, peak RSS in KiB, CPU seconds) of one `mkt jobs run` that freezes and sends the
    campaign (its CPU and its children's, from this process's rusage of waited-for children).
    Its phases (`_phases`) go to stderr."""
    env = {**os.environ, "MKT_SMTP_URL": f"smtp://127.0.0.1:{port}", "PYTHONPATH": str(REPO)}
    env.pop("MKT_SEND_WORKERS", None)  # (--processes N sets it to N)
    cmd = [sys.executable, "-m", "marketing_cli", "--db", str(db), "jobs", "run"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.time()
    seconds, rss = run_measured(cmd + (["--processes", str(processes)] if processes > 1 else []), env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    _say(f"  phases of --processes {processes}: {_phases(db, started, seconds)}")
    return seconds, rss, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def _phases(db: Path, started: float, seconds: float) -> str:
    """Where a send's time went, from its database: the start (the command's start to the
    audience freeze's job), the freeze (email.preprocess), the first delivery, each process's
    first delivery (by the claim token's lease owner), and the rate from the first to the last
    delivery (the whole-run rate without the start and the freeze)."""
    from datetime import datetime

    def at(stamp: str) -> float:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() - started

    with sqlite3.connect(db) as conn:
        job = conn.execute("SELECT updated_at, finished_at FROM jobs WHERE type = 'email.preprocess'").fetchone()
        first, last, count = conn.execute("SELECT min(delivered_at), max(delivered_at), count(*) FROM email_messages"
                                          " WHERE delivered_at IS NOT NULL").fetchone()
        owners = conn.execute("SELECT substr(claim_token, 1, instr(claim_token, '#')) AS owner, min(delivered_at),"
                              " count(*) FROM email_messages WHERE delivered_at IS NOT NULL GROUP BY owner"
                              " ORDER BY 2").fetchall()
    freeze = f"freeze done at {at(job[1]):.2f} s" if job and job[1] else "freeze ?"
    each = ", ".join(f"{n:,} from {at(t):.2f} s" for _, t, n in owners)
    span = at(last) - at(first) if first else 0.0
    steady = f"{count / span:,.0f} msg/s from the first to the last delivery" if span > 0 else ""
    return (f"{freeze}; first delivery {at(first):.2f} s; last {at(last):.2f} s of {seconds:.2f} s; by process: "
            f"{each}; {steady}") if first else freeze


def _copy(template: Path, folder: Path) -> Path:
    """A fresh copy of a prepared database through SQLite's backup API: the mkt commands that
    prepared it may leave pages in its -wal file, which a plain file copy would lose."""
    target = folder / f"copy-{time.monotonic_ns()}.db"
    source, copy = sqlite3.connect(template), sqlite3.connect(target)
    try:
        source.backup(copy)
    finally:
        copy.close()
        source.close()
    return target


def _delivered(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT count(*) FROM email_messages WHERE status = 'delivered'").fetchone()[0]


def _key_pem() -> bytes:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    return rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def _say(text: str) -> None:
    print(f"email_send: {text} (load average {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)


def run(quick: bool) -> list[dict]:
    count = int(os.environ.get("MKT_BENCH_EMAILS", 2_000 if quick else 100_000))
    bare_count = min(count, 20_000)
    key = _key_pem()
    points: dict[str, list[float]] = {k: [] for k in ("bare", "bare_cpu", "dkim", "dkim_cpu", "mkt", "mkt_cpu",
                                                     "two", "two_cpu", "ratio_dkim", "ratio_bare", "ratio_two")}
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        small_db, _ = _prepare(folder, max(count // 10, 1))
        template, _ = _prepare(folder, count)
        sink, port = _sink()
        try:
            for round_ in range(1, ROUNDS + 1):
                bare, bare_cpu = _bare_loop(port, bare_count)
                _say(f"round {round_}: bare loop {bare:,.0f} msg/s, {bare_cpu:.3f} ms CPU a message, "
                     f"{bare * bare_cpu / 1000:.2f} of a core")
                dkim, dkim_cpu, size = _bare_dkim_loop(port, bare_count, key)
                _say(f"round {round_}: bare loop with DKIM {dkim:,.0f} msg/s, {dkim_cpu:.3f} ms CPU a message, "
                     f"{dkim * dkim_cpu / 1000:.2f} of a core, {size:,} bytes a message")
                results = {}
                for processes in (1, 2):
                    db = _copy(template, folder)
                    seconds, rss, cpu = _send(db, port, processes)
                    if _delivered(db) != count:
                        raise RuntimeError(f"only {_delivered(db)} of {count} messages were delivered")
                    db.unlink()
                    results[processes] = (count / seconds, 1000 * cpu / count)
                    _say(f"round {round_}: mkt jobs run --processes {processes}: {count / seconds:,.0f} msg/s, "
                         f"{1000 * cpu / count:.3f} ms CPU a message (every process; the freeze included), "
                         f"{cpu / seconds:.2f} of a core")
                for key_, value in (("bare", bare), ("bare_cpu", bare_cpu), ("dkim", dkim), ("dkim_cpu", dkim_cpu),
                                    ("mkt", results[1][0]), ("mkt_cpu", results[1][1]), ("two", results[2][0]),
                                    ("two_cpu", results[2][1]), ("ratio_dkim", results[1][0] / dkim),
                                    ("ratio_bare", results[1][0] / bare), ("ratio_two", results[2][0] / results[1][0])):
                    points[key_].append(value)
            _, small_rss, _ = _send(_copy(small_db, folder), port)
            _, big_rss, _ = _send(_copy(template, folder), port)
        finally:
            sink.terminate()
            sink.wait(10)
        med = {k: statistics.median(v) for k, v in points.items()}
        load = os.getloadavg()[0]
        rows += [
            row(f"email send, {count:,} recipients (DKIM, tracking, merge tags), lean sink, median of {ROUNDS} "
                f"alternated rounds (load average {load:.1f})", med["mkt"], "msg/s",
                "bare loop rendering, DKIM-signing and sending each message", med["dkim"], med["ratio_dkim"],
                ">= 0.6x", med["ratio_dkim"] >= 0.6),
            row(f"email send, {count:,} recipients, lean sink", med["mkt"], "msg/s",
                "bare smtplib loop, one pre-built message of the same size", med["bare"], med["ratio_bare"],
                "reported", True),
            row(f"email send CPU a message, {count:,} recipients (every process, the freeze included)",
                med["mkt_cpu"], "ms", "bare loop with DKIM", med["dkim_cpu"], med["mkt_cpu"] / med["dkim_cpu"],
                "reported", True),
            row(f"email send, {count:,} recipients, `mkt jobs run --processes 2` (SQLite)", med["two"], "msg/s",
                "one process", med["mkt"], med["ratio_two"], ">= 1.6x", med["ratio_two"] >= 1.6),
            row(f"email send peak RSS, {count:,} recipients", big_rss / 1024, "MiB",
                f"{max(count // 10, 1):,} recipients", small_rss / 1024, big_rss / small_rss, "<= 1.5x (flat)",
                big_rss / small_rss <= 1.5),
        ]
        if os.environ.get("MKT_BENCH_AIOSMTPD", "1") != "0":  # the rows before 2026-11-29, informational
            sink, port = _sink(aiosmtpd=True)
            try:
                bare, _ = _bare_loop(port, bare_count)
                db = _copy(template, folder)
                seconds, _, _ = _send(db, port)
                _say(f"aiosmtpd sink: bare loop {bare:,.0f} msg/s, mkt {count / seconds:,.0f} msg/s")
            finally:
                sink.terminate()
                sink.wait(10)
            rows.append(row(f"email send, {count:,} recipients, aiosmtpd sink (the rows before 2026-11-29)",
                            count / seconds, "msg/s", "bare smtplib loop to aiosmtpd", bare, count / seconds / bare,
                            "informational", True))
    return rows


if __name__ == "__main__":
    for r in run("--quick" in sys.argv):
        print(r)
