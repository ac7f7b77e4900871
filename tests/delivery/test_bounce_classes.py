"""Bounce classes (services/delivery/bounce_classes.py): the shipped rules against a labelled set
of real bounce texts (tests/data/bounces), the providers' codes the issue names, the table as
data, and what a class does to the contact and the sending domain."""

from __future__ import annotations

import csv
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.services.delivery import bounce_classes, bounces
from marketing_cli.services.delivery.bounce_classes import CLASSES, classify, classify_reply, parse_table
from tests import factories

LABELS = Path(__file__).parent.parent / "data" / "bounces" / "labels.csv"
REPORTS = Path(__file__).parent.parent / "data" / "reports"


def labelled() -> list[dict[str, str]]:
    with LABELS.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


# --- the labelled set -------------------------------------------------------------------------

@pytest.mark.engine_neutral
def test_the_labelled_set_is_real_sourced_and_large_enough() -> None:
    rows = labelled()
    assert len(rows) >= 150
    assert all(r["source"].startswith("https://github.com/sisimai/set-of-emails/blob/") for r in rows)
    assert all(r["licence"].startswith("BSD-2-Clause") for r in rows)
    assert {r["class"] for r in rows} <= set(CLASSES)
    assert len({r["class"] for r in rows}) == len(CLASSES)  # every class is represented


@pytest.mark.engine_neutral
def test_at_least_95_percent_agreement_on_the_texts_mkt_classifies() -> None:
    """Reports (RFC 3464) and texts that carry an SMTP reply: what `mkt bounces import` and the
    transport see. The figure (docs/sending.md) is printed for both scopes."""
    rows = labelled()
    scope = [r for r in rows if r["scope"] in ("rfc3464", "smtp-reply")]
    agree = [r for r in scope if classify(r["text"], r["status"] or None) == r["class"]]
    everything = sum(classify(r["text"], r["status"] or None) == r["class"] for r in rows)
    print(f"agreement: {len(agree)}/{len(scope)} in scope, {everything}/{len(rows)} on every row")
    assert len(scope) >= 150
    assert len(agree) / len(scope) >= 0.95, Counter(
        (r["class"], classify(r["text"], r["status"] or None)) for r in scope if r not in agree).most_common(5)


# --- the providers' codes named by the issue ----------------------------------------------------

@pytest.mark.engine_neutral
@pytest.mark.parametrize(("text", "expected"), [
    ("550-5.7.26 Unauthenticated email from example.com is not accepted due to domain's DMARC policy", "authentication_failure"),
    ("550 5.7.515 Access denied, sending domain EXAMPLE.COM doesn't meet the required authentication level",
     "authentication_failure"),
    ("550 5.7.1 Our system has detected that this message is likely unsolicited mail. To reduce the amount of spam "
     "sent to Gmail, this message has been blocked.", "reputation_block"),
    ("421 4.7.28 Our system has detected an unusual rate of unsolicited mail originating from your IP address",
     "reputation_block"),
    ("421 4.7.0 [TSS04] Messages from 192.0.2.1 temporarily deferred due to unexpected volume or user complaints",
     "reputation_block"),
    ("550 5.1.1 The email account that you tried to reach does not exist.", "unknown_user"),
    ("452 4.2.2 The recipient's inbox is out of storage space.", "mailbox_full"),
    ("552 5.3.4 Your message exceeded Google's message size limits.", "message_too_large"),
    # Microsoft words a missing mailbox 5.1.10, the code RFC 7505 gives a null MX: the text decides
    ("550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup", "unknown_user"),
    ("556 5.1.10 Recipient address has null MX", "unknown_domain"),
    ("451 4.3.0 Mailbox busy", "other_transient"),
    ("554 5.0.0 something nobody wrote a rule for", "other_permanent"),
])
def test_the_replies_the_providers_document(text: str, expected: str) -> None:
    assert classify(text) == expected


@pytest.mark.engine_neutral
def test_a_refusal_without_a_code_is_read_by_the_transport_verdict() -> None:
    assert classify_reply("cannot reach the SMTP server relay:25: timed out", permanent=False) == "other_transient"
    assert classify_reply("the message could not be composed: ValueError", permanent=True) == "other_permanent"
    assert classify_reply("the SMTP server refused the recipient: 550 5.1.1 No such user here") == "unknown_user"


# --- the table is data ---------------------------------------------------------------------------

@pytest.mark.engine_neutral
@pytest.mark.parametrize(("text", "message"), [
    ("kind,code,pattern,source\n", "must begin with the header class,code,pattern,source"),
    ("class,code,pattern,source\nbad_class,,x,s\n", "line 2: unknown class 'bad_class'"),
    ("class,code,pattern,source\nunknown_user,5.1,,s\n", "line 2: '5.1' is not a status code"),
    ("class,code,pattern,source\nunknown_user,,,s\n", "line 2: a rule needs a code, a pattern or both"),
    ("class,code,pattern,source\nunknown_user,,x,\n", "line 2: every rule names its source"),
    ("class,code,pattern,source\nunknown_user,,(,s\n", "line 2: the pattern does not compile"),
])
def test_a_broken_table_is_refused_with_its_line(text: str, message: str) -> None:
    with pytest.raises(MktError) as caught:
        parse_table(text, "mine.csv")
    assert message in caught.value.message


@pytest.mark.engine_neutral
def test_the_operator_replaces_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = tmp_path / "classes.csv"
    mine.write_text("class,code,pattern,source\nrate_limit,,nyan,our postmaster's note\n"
                    "other_permanent,5.x.x,,RFC 3463\n", encoding="utf-8")
    monkeypatch.setenv(bounce_classes.TABLE_ENV, str(mine))
    assert classify("550 5.1.1 nyan") == "rate_limit"
    assert classify("550 5.1.1 user unknown") == "other_permanent"
    monkeypatch.delenv(bounce_classes.TABLE_ENV)
    assert classify("550 5.1.1 user unknown") == "unknown_user"


@pytest.mark.engine_neutral
def test_every_shipped_rule_names_its_source() -> None:
    with bounce_classes.BUILT_IN.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert rows and all(r["source"].strip() for r in rows)
    assert bounce_classes.TABLE.shipped().rows == len(rows)


# --- what a class does -----------------------------------------------------------------------------

def report(address: str, status: str, diagnostic: str) -> bytes:
    """postfix_hard.eml for another recipient, status and diagnostic."""
    data = (REPORTS / "postfix_hard.eml").read_text(encoding="utf-8")
    data = data.replace("Status: 5.1.1", f"Status: {status}")
    head, _, tail = data.partition("Diagnostic-Code: smtp; ")
    tail = tail.split("\n\n", 1)[1] if "\n\n" in tail else ""
    data = head + f"Diagnostic-Code: smtp; {diagnostic}\n\n" + tail
    return data.replace("nobody@example.org", address).replace("Nobody@Example.org", address).encode("utf-8")


@pytest.fixture
def sent(conn: sqlite3.Connection, workspace: dict[str, Any]) -> dict[str, Any]:
    """A campaign sent (as message rows) to four contacts."""
    ws = workspace["id"]
    emails = ["gone@example.org", "good@example.org", "full@example.org", "fine@example.org"]
    campaign = factories.email_campaign(conn, ws)
    conn.execute("UPDATE campaigns SET sender_identity_id = ? WHERE id = ?",
                 (factories.campaign_sender(conn, ws), campaign["id"]))
    factories.email_recipients(conn, ws, campaign, emails)
    return {"ws": ws, "campaign": campaign}


def status_of(conn: sqlite3.Connection, email: str) -> str:
    return conn.execute("SELECT status FROM contacts WHERE email = ?", (email,)).fetchone()[0]


def test_a_reputation_block_is_hard_but_cleans_nobody_and_counts_against_the_domain(
        conn: sqlite3.Connection, sent: dict[str, Any]) -> None:
    ws = sent["ws"]
    result = bounces.import_reports(conn, ws, [
        ("block.eml", report("good@example.org", "5.7.1", "550 5.7.1 Our system has detected that this message is "
                                                            "likely unsolicited mail (spam)")),
        ("gone.eml", report("gone@example.org", "5.1.1", "550 5.1.1 user unknown"))])
    entries = {e["email_address"]: e for f in result["files"] for e in f["entries"]}
    assert (entries["good@example.org"]["type"], entries["good@example.org"]["bounce_class"]) == ("hard", "reputation_block")
    assert entries["good@example.org"]["contact_status"] == "SUBSCRIBED"
    assert entries["gone@example.org"]["contact_status"] == "CLEANED"
    assert status_of(conn, "good@example.org") == "SUBSCRIBED" and status_of(conn, "gone@example.org") == "CLEANED"
    total = conn.execute("SELECT total_bounces FROM contacts WHERE email = 'good@example.org'").fetchone()[0]
    assert total == 0  # a block says nothing about the recipient
    rows = bounces.domain_bounce_classes(conn, ws)
    assert {(r["bounce_class"], r["messages"], r["against_domain"]) for r in rows} == {
        ("reputation_block", 1, True), ("unknown_user", 1, False)}
    assert {r["domain_name"] for r in rows} == {"example.com"}


def test_a_full_mailbox_cleans_only_when_repeated(conn: sqlite3.Connection, workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    for n in range(bounces.SOFT_BOUNCE_LIMIT):
        campaign = factories.email_campaign(conn, ws, name=f"Issue {n}")
        factories.email_recipients(conn, ws, campaign, ["full@example.org"])
        bounces.import_reports(conn, ws, [("full.eml", report("full@example.org", "5.2.2", "552 5.2.2 Mailbox full"))])
        expected = "CLEANED" if n + 1 == bounces.SOFT_BOUNCE_LIMIT else "SUBSCRIBED"
        assert status_of(conn, "full@example.org") == expected, n


def test_a_hand_recorded_hard_bounce_still_cleans(conn: sqlite3.Connection, sent: dict[str, Any]) -> None:
    answer = bounces.record_bounce(conn, sent["ws"], {"email_address": "fine@example.org", "type": "hard"})
    assert answer["contact_status"] == "CLEANED"
    row = conn.execute("SELECT bounce_type, bounce_class FROM email_messages WHERE email = 'fine@example.org'").fetchone()
    assert (row["bounce_type"], row["bounce_class"]) == ("hard", None)
