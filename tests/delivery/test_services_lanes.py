"""Provider lanes and the relay's push-back (issue 39 section 2): replies read by rules kept as
data, lanes by domain and by cached MX, each lane's rate cut, suspended and grown back for the
workspace as a whole, and the proof through a real SMTP server (aiosmtpd) that answers the
Gmail lane `421 4.7.28` for a while: nothing fails, nothing is sent twice, every message is
delivered, and the other lanes do not wait for Gmail, with two workers on both engines."""

from __future__ import annotations

import sqlite3
import threading
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.delivery import lane_view, lanes, record, replies, sender, shaping
from marketing_cli.storage import db
from tests import factories
from tests.smtp_server import SmtpServer

HTML = '<p>Hi {{contact.first_name|there}}, <a href="{{unsubscribe_url}}">unsubscribe</a></p>'
UNUSUAL = ("421 4.7.28 [192.0.2.1] Our system has detected an unusual rate of unsolicited mail originating "
           "from your IP address. To protect our users from spam, mail sent from your IP address has been "
           "temporarily rate limited.")
FAST_RATES = ("lane,rate,start,floor,decrease,increase,every,source\n"
              "gmail,0,40,2,0.5,40,0.5,test\nother,0,40,2,0.5,40,0.5,test\n")


# --- the reply rules --------------------------------------------------------------------------------


@pytest.mark.parametrize(("error", "lane", "cls", "action"), [
    (f"the SMTP server refused the recipient: {UNUSUAL}", "gmail", "throttle", "slow"),
    ("the SMTP server refused the message: 454 Throttling failure: Maximum sending rate exceeded.", "other",
     "throttle", "slow"),
    ("the SMTP server refused the recipient: 451 4.7.1 Rate limited, try again later", "microsoft", "throttle",
     "slow"),
    ("the SMTP server refused the recipient: 421 4.7.0 [TSS04] Messages from 192.0.2.1 temporarily deferred due "
     "to unexpected volume or user complaints", "yahoo", "throttle", "suspend"),
    ("the SMTP server refused the recipient: 451 4.3.0 Mailbox busy, try again later", "gmail", "transient", ""),
    ("the SMTP server refused the recipient: 550 5.1.1 No such user here", "gmail", "permanent", ""),
    ("cannot reach the SMTP server 127.0.0.1:25: [Errno 111] Connection refused", "other", "transient", ""),
    ("sending failed: RuntimeError: the SMTP library broke", "other", "transient", ""),
])
def test_each_reply_is_read_by_its_code_status_and_text(error: str, lane: str, cls: str, action: str) -> None:
    reply = replies.classify(error, lane, permanent=error.startswith("the SMTP server refused") and ": 5" in error)
    assert reply.cls == cls, reply
    assert (reply.rule.action if reply.rule else "") == action


def test_a_yahoo_rule_holds_in_the_yahoo_lane_only() -> None:
    text = "the SMTP server refused the recipient: 421 4.7.0 [TSS04] Messages from 192.0.2.1 temporarily deferred"
    assert replies.classify(text, "yahoo", False).rule.duration == 2 * 3600
    elsewhere = replies.classify(text, "gmail", False)  # KumoMTA's default rule: slowed, not suspended
    assert (elsewhere.cls, elsewhere.rule.action) == ("throttle", "slow")


def test_an_operators_rules_replace_the_shipped_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = tmp_path / "replies.csv"
    mine.write_text("lane,code,status,text,class,action,duration,source\n"
                    "*,451,4.3.*,,throttle,suspend,90s,our relay says 4.3.x when it is full\n")
    monkeypatch.setenv(replies.TABLE_ENV, str(mine))
    reply = replies.classify("the SMTP server refused the recipient: 451 4.3.0 Mailbox busy", "other", False)
    assert (reply.cls, reply.rule.action, reply.rule.duration, reply.shown) == (
        "throttle", "suspend", 90.0, "451 4.3.0 Mailbox busy")
    assert replies.classify("the SMTP server refused the recipient: 550 5.1.1 Gone", "other", True).cls == \
        "permanent"  # (no row: the first digit)


@pytest.mark.parametrize(("row", "says"), [
    ("*,421,,,throttle,,,x", "a throttle's action is slow or suspend"),
    ("*,4xx,,,transient,slow,,x", "only a throttle has an action"),
    ("*,421,,,throttle,suspend,,x", "a suspension needs a duration"),
    ("*,42,,,transient,,,x", "is not a reply code"),
    ("*,421,4.7,(,transient,,,x", "not a regular expression"),
    ("hotmail,421,,,transient,,,x", "is not a lane"),
])
def test_a_bad_rule_is_refused_with_its_line(row: str, says: str) -> None:
    with pytest.raises(MktError) as caught:
        replies.parse_table(f"# a comment\nlane,code,status,text,class,action,duration,source\n{row}\n", "mine.csv")
    assert "mine.csv line 3" in caught.value.message and says in caught.value.message


# --- the lanes ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("domain", "lane"), [
    ("gmail.com", "gmail"), ("GoogleMail.com", "gmail"), ("yahoo.co.uk", "yahoo"), ("yahoo.com.br", "yahoo"),
    ("aol.com", "yahoo"), ("hotmail.fr", "microsoft"), ("outlook.com", "microsoft"), ("live.co.uk", "microsoft"),
    ("msn.com", "microsoft"), ("icloud.com", "apple"), ("me.com", "apple"), ("mac.com", "apple"),
    ("live.nation.com", None), ("yahoo.example.org", None), ("example.com", None),
])
def test_the_consumer_domains_have_their_lane(domain: str, lane: str | None) -> None:
    assert lanes.domain_lane(domain) == lane


def test_workspace_and_365_domains_go_by_their_cached_mx(conn: sqlite3.Connection, dns_server: Any) -> None:
    dns_server.add("MX", "acme.io", (10, "aspmx.l.google.com"))
    dns_server.add("MX", "acme.io", (20, "alt1.aspmx.l.google.com"))
    dns_server.add("MX", "contoso.io", (0, "contoso-io.mail.protection.outlook.com"))
    dns_server.add("MX", "small.io", (10, "mx.small.io"))
    table = lanes.TABLE.current()
    found = lanes.resolve_domains(conn, ["acme.io", "contoso.io", "small.io", "nowhere.io", "shop.example"], table)
    assert found == {"acme.io": "gmail", "contoso.io": "microsoft", "small.io": "other", "nowhere.io": "other"}
    asked = len(dns_server.queries)
    assert ("shop.example", "MX") not in dns_server.queries  # (RFC 2606 names are never looked up)
    again = lanes.resolve_domains(conn, ["acme.io", "contoso.io"], table)
    assert again == {"acme.io": "gmail", "contoso.io": "microsoft"} and len(dns_server.queries) == asked  # cached
    cached = dict(conn.execute("SELECT domain, mx FROM mail_domain_lanes").fetchall())
    assert cached["acme.io"] == "aspmx.l.google.com"
    later = clock.format_ts(clock.utcnow() + timedelta(days=2))
    conn.execute("UPDATE mail_domain_lanes SET expires_at = ?", (clock.now(),))  # expired: looked up again
    assert lanes.resolve_domains(conn, ["acme.io"], table) == {"acme.io": "gmail"} and len(dns_server.queries) > asked
    assert conn.execute("SELECT expires_at FROM mail_domain_lanes WHERE domain = 'acme.io'").fetchone()[0] < later


def test_the_send_job_gives_each_new_message_its_lane_once(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                         verified_dns: None) -> None:
    emails = ["a@gmail.com", "b@yahoo.fr", "c@hotmail.com", "d@icloud.com", "e@shop.example"]
    campaign_id = factories.sending_campaign(conn, workspace["id"], emails, html=HTML)
    assert lanes.assign_lanes(conn, campaign_id) == {"gmail": 1, "yahoo": 1, "microsoft": 1, "apple": 1}
    got = dict(conn.execute("SELECT email, lane FROM email_messages WHERE campaign_id = ?", (campaign_id,)).fetchall())
    assert got == {"a@gmail.com": "gmail", "b@yahoo.fr": "yahoo", "c@hotmail.com": "microsoft",
                   "d@icloud.com": "apple", "e@shop.example": None}  # (NULL reads as `other`)
    assert lanes.assign_lanes(conn, campaign_id) == {}  # nothing new since its last pass


# --- the lanes' rates ---------------------------------------------------------------------------------


def _state(conn: sqlite3.Connection, ws: int, lane: str) -> sqlite3.Row:
    return conn.execute("SELECT * FROM lane_state WHERE workspace_id = ? AND lane = ?", (ws, lane)).fetchone()


def test_a_throttle_cuts_its_lane_once_an_interval_down_to_the_floor_and_clean_replies_grow_it_back(
        conn: sqlite3.Connection, workspace: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    ws, moment = workspace["id"], [clock.utcnow()]
    monkeypatch.setattr(clock, "utcnow", lambda: moment[0])
    reply = replies.classify(f"the SMTP server refused the recipient: {UNUSUAL}", "gmail", False)
    shaper = shaping.Shaper(ws)
    shaper.observe(conn, {"gmail": reply}, set())
    state = _state(conn, ws, "gmail")
    assert (state["rate"], state["suspended_until"]) == (10.0, None)  # start 20/s x 0.5
    assert state["reason"].startswith("421 4.7.28 [192.0.2.1] Our system has detected an unusual rate")
    shaper.observe(conn, {"gmail": reply}, set())
    assert _state(conn, ws, "gmail")["rate"] == 10.0  # (one cut an interval, whichever worker saw it)
    for _ in range(12):
        moment[0] += timedelta(seconds=10)
        shaper.observe(conn, {"gmail": reply}, set())
    assert _state(conn, ws, "gmail")["rate"] == 0.17  # the floor: the lane keeps probing
    assert shaper.held(conn).keys() <= {"gmail"} and "other" not in shaper.states(conn)
    grown = []
    for _ in range(25):
        moment[0] += timedelta(seconds=10)
        shaper.observe(conn, {}, {"gmail", "other"})
        grown.append(_state(conn, ws, "gmail")["rate"])
    assert grown[:3] == [pytest.approx(1.17), pytest.approx(2.17), pytest.approx(3.17)]
    assert grown[-1] == 0  # back to its start: the lane has no rate of its own again
    assert _state(conn, ws, "other") is None


def test_a_suspending_rule_holds_the_lane_until_its_time(conn: sqlite3.Connection, workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    reply = replies.classify("the SMTP server refused the recipient: 421 4.7.0 [TSS04] Messages from 192.0.2.1 "
                             "temporarily deferred", "yahoo", False)
    shaper = shaping.Shaper(ws)
    shaper.observe(conn, {"yahoo": reply}, set())
    held = shaper.held(conn)
    assert list(held) == ["yahoo"] and 2 * 3600 - 5 < held["yahoo"] <= 2 * 3600
    assert clock.parse_ts(_state(conn, ws, "yahoo")["suspended_until"]) > clock.utcnow() + timedelta(hours=1.9)


def test_a_slowed_lane_books_the_starts_that_have_come_for_all_workers_and_leaves_the_rest_queued(
        conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None) -> None:
    ws = workspace["id"]
    emails = [f"g{i}@gmail.com" for i in range(10)] + [f"o{i}@shop.example" for i in range(10)]
    campaign_id = factories.sending_campaign(conn, ws, emails, html=HTML)
    lanes.assign_lanes(conn, campaign_id)
    conn.execute("INSERT INTO lane_state (workspace_id, lane, rate, next_at) VALUES (?, 'gmail', 2, 0)", (ws,))
    from marketing_cli import jobs
    from marketing_cli.services.delivery import claim

    first, second = shaping.Shaper(ws), shaping.Shaper(ws)  # two workers
    rows, _ = claim.claim_round(conn, campaign_id, 20, claim=jobs.Run("a", 30), workspace_id=ws, shaper=first)
    taken = Counter(r["lane"] or "other" for r in rows)
    assert taken == {"other": 10, "gmail": 1}  # 2/s: the start that has come; the next one in 0.5 s
    rows, _ = claim.claim_round(conn, campaign_id, 20, claim=jobs.Run("b", 30), workspace_id=ws, shaper=second)
    assert rows == [] and "gmail" in second.held(conn)  # the other worker finds the lane booked
    assert conn.execute("SELECT count(*) FROM email_messages WHERE campaign_id = ? AND status = 'queued'",
                        (campaign_id,)).fetchone()[0] == 9
    assert 0.2 <= second.held(conn)["gmail"] <= 0.5


def test_held_back_says_what_waits_and_why(conn: sqlite3.Connection, workspace: dict[str, Any],
                                          verified_dns: None) -> None:
    ws = workspace["id"]
    campaign_id = factories.sending_campaign(conn, ws, [f"g{i}@gmail.com" for i in range(1204)] + ["o@shop.example"],
                                             html=HTML)
    lanes.assign_lanes(conn, campaign_id)
    assert lane_view.held_back(conn, ws, campaign_id) == []
    until = clock.utcnow() + timedelta(minutes=30)
    conn.execute("INSERT INTO lane_state (workspace_id, lane, rate, next_at, suspended_until, reason) VALUES"
                 " (?, 'gmail', 0, 0, ?, ?)", (ws, clock.format_ts(until), "421 4.7.28 unusual rate"))
    [item] = lane_view.held_back(conn, ws, campaign_id)
    assert {k: item[k] for k in ("lane", "messages", "state", "opens_at", "until")} == {
        "lane": "gmail", "messages": 1204, "state": "suspended", "opens_at": clock.format_ts(until),
        "until": clock.format_ts(until)}  # (no rate of its own: all of them when it opens)
    assert item["line"] == (f"1,204 messages held back by the Gmail lane until {until:%H:%M} UTC: "
                            "421 4.7.28 unusual rate from the relay")


# --- transient replies ----------------------------------------------------------------------------------


def test_the_backoff_doubles_from_a_minute_with_jitter_up_to_hours() -> None:
    waits = [record.backoff(n) for n in range(12)]
    assert 48 <= waits[0] <= 72 and 96 <= waits[1] <= 144 and 192 <= waits[2] <= 288
    assert max(waits) <= 4 * 3600 * 1.2 and waits[-1] >= 4 * 3600 * 0.8
    assert len({round(record.backoff(3), 3) for _ in range(20)}) > 1  # jitter


def test_give_up_hours_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    assert record.give_up_hours() == 72
    monkeypatch.setenv(record.GIVE_UP_ENV, "12")
    assert record.give_up_hours() == 12
    monkeypatch.setenv(record.GIVE_UP_ENV, "soon")
    with pytest.raises(MktError, match="MKT_SEND_GIVE_UP_HOURS must be a number of hours"):
        record.check_environment()


# --- the proof: Gmail throttled, two workers ---------------------------------------------------------------


def _two_workers(db_path: Any, campaign_id: str) -> list[BaseException]:
    """The send job and one helper at once, each on its own connection (two `mkt jobs run`)."""
    errors: list[BaseException] = []

    def work(handler: Any) -> None:
        own = db.connect(db_path)
        try:
            handler(own, {"campaign_id": campaign_id})
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            own.close()
    threads = [threading.Thread(target=work, args=(h,)) for h in (sender.send, sender.help_send)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return errors


def test_gmail_throttled_nothing_fails_nothing_twice_and_the_other_lanes_do_not_wait(
        conn: sqlite3.Connection, workspace: dict[str, Any], db_path: Any, verified_dns: None, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace["id"]
    rates = tmp_path / "rates.csv"
    rates.write_text(FAST_RATES)
    monkeypatch.setenv(shaping.RATES_ENV, str(rates))
    monkeypatch.setenv("MKT_SEND_CONCURRENCY", "6")
    providers = ("gmail.com", "yahoo.com", "hotmail.com", "icloud.com")
    emails = [f"r{i}@{providers[i % 4]}" for i in range(240)]
    campaign_id = factories.sending_campaign(conn, ws, emails, html=HTML)
    with SmtpServer(push_back={"gmail.com": (UNUSUAL, 6.0)}) as server:
        monkeypatch.setenv("MKT_SMTP_URL", server.url)
        for _ in range(20):  # the send job comes back when a held lane opens (here: at once)
            assert _two_workers(db_path, campaign_id) == []
            status = conn.execute("SELECT status FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()[0]
            if status != "SENDING":
                break
    assert status == "SENT"
    assert Counter(r for m in server.messages for r in m.rcpt_tos) == Counter(emails)  # each once
    rows = conn.execute("SELECT email, lane, status, attempts FROM email_messages"
                        " WHERE campaign_id = ?", (campaign_id,)).fetchall()
    assert {r["status"] for r in rows} == {"delivered"} and {r["attempts"] for r in rows} == {1}  # not attempts
    pushed = [a for a in server.answers if a[2] == 421]
    assert pushed and {a[1].rpartition("@")[2] for a in pushed} == {"gmail.com"}
    state = _state(conn, ws, "gmail")
    assert state["reason"].startswith("421 4.7.28") and state["cut_at"] is not None
    accepted = [(at, address.rpartition("@")[2]) for at, address, code in server.answers if code == 250]
    last = {domain: max(at for at, d in accepted if d == domain) for domain in providers}
    assert max(last["yahoo.com"], last["hotmail.com"], last["icloud.com"]) < last["gmail.com"]  # no waiting for Gmail
    assert max(at for at, _, _ in pushed) < last["gmail.com"]


def test_show_watch_and_the_api_say_what_waits_and_why(conn: sqlite3.Connection, workspace: dict[str, Any],
                                                      verified_dns: None, client: Any, auth: dict[str, str],
                                                      cli: Any, cli_json: Any) -> None:
    ws = workspace["id"]
    campaign_id = factories.sending_campaign(conn, ws, [f"g{i}@gmail.com" for i in range(12)] + ["o@shop.example"],
                                             html=HTML)
    lanes.assign_lanes(conn, campaign_id)
    plain = client.get(f"/v1/campaigns/{campaign_id}", headers=auth).json()["data"]
    assert "held_back" not in plain
    until = clock.utcnow() + timedelta(minutes=20)
    conn.execute("INSERT INTO lane_state (workspace_id, lane, rate, next_at, suspended_until, reason) VALUES"
                 " (?, 'gmail', 0.5, 0, ?, '421 4.7.28 unusual rate')", (ws, clock.format_ts(until)))
    line = f"12 messages held back by the Gmail lane until {until:%H:%M} UTC: 421 4.7.28 unusual rate from the relay"
    data = client.get(f"/v1/campaigns/{campaign_id}", headers=auth).json()["data"]
    assert [(h["lane"], h["messages"], h["state"], h["line"]) for h in data["held_back"]] == [
        ("gmail", 12, "suspended", line)]
    item = data["held_back"][0]
    assert item["opens_at"] == clock.format_ts(until)
    assert clock.parse_ts(item["until"]) - clock.parse_ts(item["opens_at"]) == timedelta(seconds=24)  # 12 at 0.5/s
    shown = cli("campaigns", "show", campaign_id)
    assert shown.exit_code == 0 and "held back" in shown.stdout and "12 messages held back by the Gmail" in \
        shown.stdout.replace("\n", " ")
    assert cli_json("campaigns", "show", campaign_id)["held_back"] == data["held_back"]
    watched = cli("campaigns", "watch", campaign_id, "--once")
    assert watched.exit_code == 0 and line in watched.stdout


def test_a_send_whose_lanes_are_all_suspended_comes_back_when_one_opens(
        conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from marketing_cli import jobs

    ws = workspace["id"]
    campaign_id = factories.sending_campaign(conn, ws, [f"g{i}@gmail.com" for i in range(5)], html=HTML)
    until = clock.utcnow() + timedelta(hours=1)
    conn.execute("INSERT INTO lane_state (workspace_id, lane, rate, next_at, suspended_until, reason) VALUES"
                 " (?, 'gmail', 0, 0, ?, '421 4.7.28 unusual rate')", (ws, clock.format_ts(until)))
    with SmtpServer() as server:
        monkeypatch.setenv("MKT_SMTP_URL", server.url)
        jobs.run_due(conn)  # (a send that came back at once would run again here, and again)
    assert server.messages == []
    [job] = [j for j in jobs.list_jobs(conn, job_type="email.send") if j["status"] == "queued"]
    assert abs((clock.parse_ts(job["run_at"]) - until).total_seconds()) < 2  # not before, and no busy loop
    assert conn.execute("SELECT count(*) FROM email_messages WHERE status = 'queued' AND attempts = 0").fetchone()[0] == 5
    assert conn.execute("SELECT status FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()[0] == "SENDING"


def test_a_deferred_message_backs_off_and_is_not_failed_after_three_attempts(
        conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace["id"]
    campaign_id = factories.sending_campaign(conn, ws, ["busy@example.net", "ok@example.net"], html=HTML)
    with SmtpServer(defer=("busy@example.net",)) as server:
        monkeypatch.setenv("MKT_SMTP_URL", server.url)
        for attempt in range(5):
            started = clock.utcnow()
            sender.send(conn, {"campaign_id": campaign_id})
            row = conn.execute("SELECT status, attempts, retry_at, deferred_since, failure_reason FROM email_messages"
                               " WHERE email = 'busy@example.net'").fetchone()
            assert (row["status"], row["attempts"]) == ("queued", attempt + 1)
            wait = (clock.parse_ts(row["retry_at"]) - started).total_seconds()
            assert 60 * 2 ** attempt * 0.8 - 1 <= wait <= 60 * 2 ** attempt * 1.2 + 1, (attempt, wait)
            assert row["failure_reason"].endswith("451 4.3.0 Mailbox busy, try again later")
            conn.execute("UPDATE email_messages SET retry_at = NULL WHERE email = 'busy@example.net'")
        conn.execute("UPDATE email_messages SET deferred_since = ? WHERE email = 'busy@example.net'",
                     (clock.format_ts(clock.utcnow() - timedelta(hours=72)),))
        sender.send(conn, {"campaign_id": campaign_id})
    assert conn.execute("SELECT status FROM email_messages WHERE email = 'busy@example.net'").fetchone()[0] == "failed"
    assert conn.execute("SELECT status FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()[0] == "SENT"


def test_jobs_run_refuses_a_broken_rules_table(cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = tmp_path / "replies.csv"
    broken.write_text("lane,code,status,text,class,action,duration,source\n*,421,4.7.28,,throttle,,,x\n")
    monkeypatch.setenv(replies.TABLE_ENV, str(broken))
    result = cli("jobs", "run")
    assert result.exit_code == 1 and f"{broken} line 2: a throttle's action is slow or suspend" in result.stderr


def test_a_claim_leaving_a_lane_out_starts_where_it_found_the_others_last(
        conn: sqlite3.Connection, workspace: dict[str, Any], verified_dns: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from marketing_cli import jobs
    from marketing_cli.services.delivery import claim

    ws = workspace["id"]
    emails = [f"g{i}@gmail.com" for i in range(30)] + [f"o{i}@shop.example" for i in range(6)]
    campaign_id = factories.sending_campaign(conn, ws, emails, html=HTML)
    lanes.assign_lanes(conn, campaign_id)
    conn.execute("INSERT INTO lane_state (workspace_id, lane, rate, next_at, suspended_until) VALUES"
                 " (?, 'gmail', 0, 0, ?)", (ws, clock.format_ts(clock.utcnow() + timedelta(hours=1))))
    others = [r[0] for r in conn.execute("SELECT id FROM email_messages WHERE campaign_id = ? AND lane IS NULL"
                                         " ORDER BY id", (campaign_id,))]
    shaper, run = shaping.Shaper(ws), jobs.Run("a", 30)
    first, _ = claim.claim_round(conn, campaign_id, 2, claim=run, workspace_id=ws, shaper=shaper)
    assert [r["id"] for r in first] == others[:2]
    assert shaper.cursor(["gmail"], False) == others[0]  # the Gmail messages before it: not read again
    conn.execute("UPDATE email_messages SET status = 'queued' WHERE id = ?", (others[1],))  # back (a retry)
    second, _ = claim.claim_round(conn, campaign_id, 2, claim=run, workspace_id=ws, shaper=shaper)
    assert [r["id"] for r in second] == [others[1], others[2]]
    monkeypatch.setattr(shaping, "CURSOR_FRESH", 0.0)  # after a while, from the head again
    assert shaper.cursor(["gmail"], False) == 0 and shaper.cursor(["gmail"], True) == 0
