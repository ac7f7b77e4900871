"""Steps: what each one does, one message per step (two runners, a crash, a SIGKILL), live
edits that never touch older versions (the Mautic #16262 case) and the due index."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from marketing_cli import jobs
from marketing_cli.kernel import clock
from marketing_cli.services.account import billing
from marketing_cli.services.automations import flows, runner, stats, steps, triggers
from marketing_cli.services.contacts import events, records
from marketing_cli.storage.db import connect
from tests import factories as f
from tests.engines import query_plan

ROOT = Path(__file__).resolve().parents[2]


class Clock:
    """A fixed clock the test moves forward."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = clock.utcnow()
        monkeypatch.setattr(clock, "utcnow", lambda: self.now)

    def advance(self, **kw: float) -> None:
        self.now += timedelta(**kw)


@pytest.fixture
def fixed(monkeypatch: pytest.MonkeyPatch) -> Clock:
    return Clock(monkeypatch)


@pytest.fixture
def world(conn: Any, workspace: dict[str, Any], fixed: Clock) -> dict[str, Any]:
    ws = workspace["id"]
    billing.set_allowance(conn, ws, "automations", 20)
    return {"ws": ws, "sender": f.verified_sender(conn, ws), "vip": f.tag(conn, ws, "vip"),
            "city": f.field(conn, ws, "city"),
            "ann": f.contact(conn, ws, "ann@example.com", first_name="Ann")["id"]}


def _manual(conn: Any, ws: int, step_list: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return f.automation(conn, ws, {"name": "Flow", "triggers": [{"type": "manual"}], "steps": step_list, **extra})


def _enrollment(conn: Any, automation_id: int) -> Any:
    return conn.execute("SELECT * FROM automation_enrollments WHERE automation_id = ? ORDER BY id DESC",
                        (automation_id,)).fetchone()


def _runs(conn: Any, automation_id: int) -> list[tuple[str, str]]:
    return [(r["step_id"], r["outcome"]) for r in conn.execute(
        "SELECT step_id, outcome FROM automation_step_runs WHERE automation_id = ? ORDER BY enrollment_id, seq",
        (automation_id,))]


def _messages(conn: Any) -> list[tuple[str, str]]:
    return [(r["email"], r["subject"]) for r in conn.execute(
        "SELECT m.email, v.subject FROM email_messages m JOIN campaign_variants v ON v.id = m.variant_id ORDER BY m.id")]


def test_a_send_a_wait_and_a_tag(conn: Any, world: dict[str, Any], fixed: Clock) -> None:
    ws = world["ws"]
    flow = _manual(conn, ws, [f.email_step("hello", world["sender"], "wait"),
                              {"id": "wait", "type": "wait", "duration": {"days": 2}, "next": "tag"},
                              {"id": "tag", "type": "add_tag", "tag": "vip"}])
    triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": world["ann"]})
    f.run_automations(conn)
    assert _messages(conn) == [("ann@example.com", "Step hello")]
    assert conn.execute("SELECT status FROM email_messages").fetchone()[0] == "delivered"  # the outbox transport
    assert _enrollment(conn, flow["id"])["step_id"] == "tag"
    fixed.advance(days=1)
    f.run_automations(conn)
    assert _runs(conn, flow["id"]) == [("hello", "sent"), ("wait", "waited")]
    fixed.advance(days=1, seconds=1)
    f.run_automations(conn)
    assert _runs(conn, flow["id"]) == [("hello", "sent"), ("wait", "waited"), ("tag", "done")]
    assert _enrollment(conn, flow["id"])["status"] == "completed"
    assert records.get_contact(conn, ws, world["ann"])["tags"][0]["name"] == "vip"
    # the automation's campaign is kept out of the campaign list and stays SENDING
    from marketing_cli.services.email import campaigns

    assert campaigns.list_campaigns(conn, ws)["campaigns"] == []
    assert conn.execute("SELECT status FROM campaigns").fetchone()[0] == "SENDING"
    email = stats.automation_stats(conn, ws, flow["id"])["versions"][0]["steps"][0]["email"]
    assert email["sent"] == 1 and email["delivered"] == 1


def test_a_skip_is_counted_with_its_reason(conn: Any, world: dict[str, Any]) -> None:
    ws = world["ws"]
    flow = _manual(conn, ws, [f.email_step("hello", world["sender"], "tag"), {"id": "tag", "type": "add_tag",
                                                                              "tag": "vip"}])
    records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "status": "UNSUBSCRIBED"})
    triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": world["ann"]})
    f.run_automations(conn)
    assert _messages(conn) == []
    assert _runs(conn, flow["id"]) == [("hello", "skipped"), ("tag", "done")]
    step = stats.automation_stats(conn, ws, flow["id"])["versions"][0]["steps"][0]
    assert step["skipped"] == {"the contact is UNSUBSCRIBED, not SUBSCRIBED": 1}


def test_wait_for_an_event_goes_on_when_it_comes(conn: Any, world: dict[str, Any], fixed: Clock) -> None:
    ws = world["ws"]
    flow = _manual(conn, ws, [
        {"id": "cart", "type": "wait_for_event", "event": {"type": "custom_event", "name": "purchase"},
         "timeout": {"hours": 4}, "next": "thanks", "timeout_next": "remind"},
        {"id": "thanks", "type": "add_tag", "tag": "vip"},
        {"id": "remind", "type": "set_field", "field": "city", "value": "Reminded"}])
    events.track_event(conn, ws, {"email_address": "ann@example.com", "event_name": "purchase"})  # before: ignored
    triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": world["ann"]})
    f.run_automations(conn)
    assert _enrollment(conn, flow["id"])["waiting"] == 1
    fixed.advance(hours=1)
    events.track_event(conn, ws, {"email_address": "ann@example.com", "event_name": "purchase"})
    f.run_automations(conn)
    assert _runs(conn, flow["id"]) == [("cart", "waiting"), ("thanks", "done")]
    assert _enrollment(conn, flow["id"])["status"] == "completed"


def test_wait_for_an_event_times_out(conn: Any, world: dict[str, Any], fixed: Clock) -> None:
    ws = world["ws"]
    flow = _manual(conn, ws, [
        {"id": "cart", "type": "wait_for_event", "event": {"type": "tag_added", "tag": "vip"},
         "timeout": {"hours": 4}, "next": "thanks", "timeout_next": "remind"},
        {"id": "thanks", "type": "exit"},
        {"id": "remind", "type": "set_field", "field": "city", "value": "Reminded"}])
    triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": world["ann"]})
    f.run_automations(conn)
    fixed.advance(hours=4, seconds=1)
    f.run_automations(conn)
    assert _runs(conn, flow["id"]) == [("cart", "waiting"), ("cart", "timeout"), ("remind", "done")]
    assert records.get_contact(conn, ws, world["ann"])["data"]["city"] == "Reminded"


def test_splits(conn: Any, world: dict[str, Any]) -> None:
    ws = world["ws"]
    records.upsert_contact(conn, ws, {"email_address": "ann@example.com", "fields": {"city": "Paris"}})
    segment = f.segment(conn, ws, "Parisians", {"condition": "AND", "filters": [
        {"type": "field", "field_id": world["city"], "operator": "eq", "value": "Paris"}]})
    conditions = [{"kind": "tag", "tag": "vip"}, {"kind": "field", "field": "city", "operator": "equals", "value": "Paris"},
                  {"kind": "segment", "segment_id": segment["id"]}, {"kind": "random", "percent": 100},
                  {"kind": "random", "percent": 0}, {"kind": "field", "field": "city", "operator": "exists"}]
    answers = []
    for condition in conditions:
        flow = _manual(conn, ws, [{"id": "s", "type": "split", "condition": condition, "yes": "y", "no": "n"},
                                  {"id": "y", "type": "exit"}, {"id": "n", "type": "exit"}])
        triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": world["ann"]})
        f.run_automations(conn)
        answers.append(_runs(conn, flow["id"])[0][1])
        flows.archive_automation(conn, ws, flow["id"])
    assert answers == ["no", "yes", "yes", "yes", "no", "yes"]


def test_split_on_an_earlier_email_opened(conn: Any, world: dict[str, Any], fixed: Clock) -> None:
    from marketing_cli.services.email import stats as email_stats

    ws = world["ws"]
    flow = _manual(conn, ws, [f.email_step("hello", world["sender"], "w"),
                              {"id": "w", "type": "wait", "duration": {"days": 1}, "next": "s"},
                              {"id": "s", "type": "split", "condition": {"kind": "email_activity", "step": "hello",
                                                                         "activity": "opened"}}])
    triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": world["ann"]})
    f.run_automations(conn)
    email_stats.record_open(conn, conn.execute("SELECT id FROM email_messages").fetchone()[0], machine=False)
    fixed.advance(days=1, seconds=1)
    f.run_automations(conn)
    assert _runs(conn, flow["id"])[-1] == ("s", "yes")


def test_a_goal_exits_and_counts(conn: Any, world: dict[str, Any], fixed: Clock) -> None:
    ws = world["ws"]
    flow = _manual(conn, ws, [{"id": "w", "type": "wait", "duration": {"days": 3}, "next": "g"},
                              {"id": "g", "type": "goal"}],
                   goal={"type": "custom_event", "name": "purchase"})
    triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": world["ann"]})
    f.run_automations(conn)
    events.track_event(conn, ws, {"email_address": "ann@example.com", "event_name": "purchase"})
    f.run_automations(conn)
    x = _enrollment(conn, flow["id"])
    assert (x["status"], x["exit_reason"]) == ("exited", "goal") and x["goal_reached_at"] is not None
    assert stats.automation_stats(conn, ws, flow["id"])["goals_reached"] == 1


def test_the_due_query_uses_the_partial_index(conn: Any) -> None:
    plan = query_plan(conn, steps.DUE_SQL, (clock.now(), 500))
    # SQLite: SEARCH ... USING INDEX automation_enrollments_due; PostgreSQL: Index Scan using it.
    assert re.search(r"USING INDEX automation_enrollments_due|Index (Only )?Scan using automation_enrollments_due",
                     plan), plan
    assert "Seq Scan" not in plan and "SCAN automation_enrollments" not in plan.replace(
        "SCAN automation_enrollments USING INDEX", ""), plan


def _many(conn: Any, ws: int, sender: int, n: int) -> dict[str, Any]:
    flow = _manual(conn, ws, [f.email_step("a", sender, "b"), f.email_step("b", sender)])
    for i in range(n):
        contact = f.contact(conn, ws, f"c{i}@example.com")
        triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": contact["id"]})
    return flow


def test_two_runners_at_once_write_one_message_per_step(conn: Any, world: dict[str, Any], db_path: Path) -> None:
    _many(conn, world["ws"], world["sender"], 40)
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def run() -> None:
        own = connect(db_path)
        try:
            barrier.wait()
            for _ in range(3):
                steps.run_due(own)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            own.close()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    counts = conn.execute("SELECT count(*), count(DISTINCT contact_id || v.subject) FROM email_messages m"
                          " JOIN campaign_variants v ON v.id = m.variant_id").fetchone()
    assert tuple(counts) == (80, 80)
    assert conn.execute("SELECT count(*) FROM automation_step_runs").fetchone()[0] == 80


def test_a_crash_inside_the_step_leaves_no_message_and_the_step_runs_once_later(
        conn: Any, world: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from marketing_cli.services.email import automated

    ws = world["ws"]
    flow = _manual(conn, ws, [f.email_step("a", world["sender"])])
    triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": world["ann"]})
    real = automated.queue_automated_message

    def write_then_crash(*args: Any) -> int:
        real(*args)
        raise RuntimeError("the runner died here")

    monkeypatch.setattr(automated, "queue_automated_message", write_then_crash)
    enrollment_id = steps.due_enrollments(conn)[0]
    with pytest.raises(RuntimeError):
        steps.run_enrollment(conn, enrollment_id)
    assert conn.execute("SELECT count(*) FROM email_messages").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM automation_step_runs").fetchone()[0] == 0
    monkeypatch.setattr(automated, "queue_automated_message", real)
    steps.run_due(conn)
    steps.run_due(conn)
    assert conn.execute("SELECT count(*) FROM email_messages").fetchone()[0] == 1


def test_a_failing_contact_is_put_back_and_the_others_go_on(conn: Any, world: dict[str, Any], fixed: Clock,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from marketing_cli.services.email import automated

    ws = world["ws"]
    flow = _manual(conn, ws, [f.email_step("a", world["sender"])])
    bob = f.contact(conn, ws, "bob@example.com")["id"]
    for contact_id in (world["ann"], bob):
        triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": contact_id})
    real = automated.queue_automated_message

    def fail_for_ann(conn_: Any, campaign_id: str, contact_id: str, email: str) -> int:
        if contact_id == world["ann"]:
            raise RuntimeError("a bug")
        return real(conn_, campaign_id, contact_id, email)

    real_batch = automated.queue_automated_messages

    def batch_fails_for_ann(conn_: Any, campaign_id: str, contact_ids: list[str]) -> None:
        if world["ann"] in contact_ids:
            raise RuntimeError("a bug")
        real_batch(conn_, campaign_id, contact_ids)

    monkeypatch.setattr(automated, "queue_automated_message", fail_for_ann)
    # The batch (drain.py) fails as a whole and is rolled back; each enrollment is then tried alone.
    monkeypatch.setattr(automated, "queue_automated_messages", batch_fails_for_ann)
    assert steps.run_due(conn) == 2
    assert [r[0] for r in conn.execute("SELECT email FROM email_messages")] == ["bob@example.com"]
    assert steps.due_enrollments(conn) == []  # ann waits RETRY_SECONDS
    monkeypatch.setattr(automated, "queue_automated_message", real)
    monkeypatch.setattr(automated, "queue_automated_messages", real_batch)
    fixed.advance(seconds=steps.RETRY_SECONDS + 1)
    steps.run_due(conn)
    assert sorted(r[0] for r in conn.execute("SELECT email FROM email_messages")) == ["ann@example.com",
                                                                                      "bob@example.com"]


@pytest.mark.slow
@pytest.mark.parametrize("path", ["batch", "one"])
def test_a_sigkill_between_claiming_and_committing_creates_no_second_message(
        conn: Any, world: dict[str, Any], db_path: Path, path: str) -> None:
    """`batch`: the drain's transaction of many steps (drain.py); `one`: one enrollment's step."""
    ws = world["ws"]
    flow = _manual(conn, ws, [f.email_step("a", world["sender"])])
    triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": world["ann"]})
    function = "queue_automated_messages" if path == "batch" else "queue_automated_message"
    run = "steps.run_due(own)" if path == "batch" else "steps.run_enrollment(own, steps.due_enrollments(own)[0])"
    script = textwrap.dedent(f"""
        import os, signal
        from marketing_cli.storage.db import connect
        from marketing_cli.services.automations import steps
        from marketing_cli.services.email import automated
        real = automated.{function}
        def write_then_die(*args):
            real(*args)
            os.kill(os.getpid(), signal.SIGKILL)
        automated.{function} = write_then_die
        own = connect({str(db_path)!r})
        {run}
    """)
    child = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                           capture_output=True, timeout=60, check=False)
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()
    assert conn.execute("SELECT count(*) FROM email_messages").fetchone()[0] == 0
    steps.run_due(conn)
    steps.run_due(conn)
    assert conn.execute("SELECT count(*) FROM email_messages").fetchone()[0] == 1
    assert _runs(conn, flow["id"]) == [("a", "sent")]


def test_deleting_a_step_in_a_new_version_never_touches_older_contacts(conn: Any, world: dict[str, Any],
                                                                       fixed: Clock) -> None:
    """Mautic #16262: a step deleted from a live campaign re-sent one email 11,500 times."""
    ws, sender = world["ws"], world["sender"]
    wait = {"type": "wait", "duration": {"days": 1}}
    v1 = [f.email_step("one", sender, "w1"), {"id": "w1", **wait, "next": "two"},
          f.email_step("two", sender, "w2"), {"id": "w2", **wait, "next": "three"},
          f.email_step("three", sender)]
    flow = f.automation(conn, ws, {"name": "Series", "triggers": [{"type": "manual"}], "steps": v1})
    early = [f.contact(conn, ws, f"early{i}@example.com")["id"] for i in range(20)]
    for contact_id in early:
        triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": contact_id})
    f.run_automations(conn)  # everyone got "one" and waits before "two"
    v2 = [f.email_step("one", sender, "w1"), {"id": "w1", **wait, "next": "three"}, f.email_step("three", sender)]
    flows.update_automation(conn, ws, flow["id"], {"name": "Series", "triggers": [{"type": "manual"}], "steps": v2})
    flows.publish_automation(conn, ws, flow["id"])
    late = [f.contact(conn, ws, f"late{i}@example.com")["id"] for i in range(5)]
    for contact_id in late:
        triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": contact_id})
    for _ in range(4):
        fixed.advance(days=1, seconds=1)
        f.run_automations(conn)
    sent = _messages(conn)
    assert len(sent) == len(set(sent))  # zero duplicate sends
    got = {}
    for email, subject in sent:
        got.setdefault(email, []).append(subject)
    assert all(got[f"early{i}@example.com"] == ["Step one", "Step two", "Step three"] for i in range(20))
    assert all(got[f"late{i}@example.com"] == ["Step one", "Step three"] for i in range(5))
    versions = {r[0] for r in conn.execute("SELECT v.version FROM automation_enrollments x JOIN automation_versions v"
                                           " ON v.id = x.version_id WHERE x.contact_id LIKE '%'")}
    assert versions == {1, 2}


class _Hook(BaseHTTPRequestHandler):
    calls: ClassVar[list[tuple[dict[str, str], bytes]]] = []
    answers: ClassVar[list[int]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).calls.append((dict(self.headers), body))
        self.send_response(type(self).answers.pop(0) if type(self).answers else 200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_a_webhook_is_signed_retried_and_delivered_once(conn: Any, world: dict[str, Any], fixed: Clock,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MKT_ALLOW_PRIVATE_URLS", "1")
    server = HTTPServer(("127.0.0.1", 0), _Hook)
    _Hook.calls, _Hook.answers = [], [500]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        ws = world["ws"]
        url = f"http://127.0.0.1:{server.server_port}/hook"
        flow = _manual(conn, ws, [{"id": "h", "type": "webhook", "url": url, "payload": {"coupon": "X1"}}])
        triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": world["ann"]})
        f.run_automations(conn)  # the 500: tried again later
        assert conn.execute("SELECT status, attempts FROM automation_webhooks").fetchone()[:] == ("pending", 1)
        fixed.advance(seconds=10)
        f.run_automations(conn)
        f.run_automations(conn)
        assert conn.execute("SELECT status FROM automation_webhooks").fetchone()[0] == "delivered"
        assert len(_Hook.calls) == 2
        headers, body = _Hook.calls[-1]
        secret = flows.get_automation(conn, ws, flow["id"])["webhook_secret"]
        expected = hmac.new(secret.encode(), headers["X-Mkt-Timestamp"].encode() + b"." + body,
                            hashlib.sha256).hexdigest()
        assert headers["X-Mkt-Signature"] == f"sha256={expected}"
        sent = json.loads(body)
        assert sent["payload"] == {"coupon": "X1"} and sent["contact"]["email_address"] == "ann@example.com"
        assert _Hook.calls[0][1] == body  # the same body (and id) on the retry
    finally:
        server.shutdown()
        server.server_close()


def test_a_webhook_to_a_private_address_fails_for_good(conn: Any, world: dict[str, Any]) -> None:
    ws = world["ws"]
    flow = _manual(conn, ws, [{"id": "h", "type": "webhook", "url": "http://127.0.0.1:9/hook"}])
    triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": world["ann"]})
    f.run_automations(conn)
    row = conn.execute("SELECT status, last_error FROM automation_webhooks").fetchone()
    assert row["status"] == "failed" and row["last_error"]


def test_the_run_job_queues_itself_for_the_next_due_step(conn: Any, world: dict[str, Any]) -> None:
    ws = world["ws"]
    flow = _manual(conn, ws, [{"id": "w", "type": "wait", "duration": {"hours": 5}, "next": "x"},
                              {"id": "x", "type": "exit"}])
    triggers.enroll_contact(conn, ws, flow["id"], {"contact_id": world["ann"]})
    f.run_automations(conn)
    queued = conn.execute("SELECT run_at FROM jobs WHERE type = ? AND status = 'queued'", (runner.JOB,)).fetchone()
    assert queued["run_at"] == _enrollment(conn, flow["id"])["next_run_at"]
    assert jobs.list_jobs(conn, status="failed") == []
