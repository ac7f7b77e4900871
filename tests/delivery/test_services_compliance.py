"""The sender-compliance gate (services/delivery/compliance.py, sender_gate.py) against the test
DNS server serving the domain's records: each rule's pass, warn and fail, scheduling refused
with every failing rule named, the operator's override in the operator log, and flows."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.services.automations import flows
from marketing_cli.services.delivery import compliance, sender_gate
from marketing_cli.services.email import domains, senders
from tests import factories as f

NAME = "acme-shop.com"
RELAY = "smtps://mailer:secret@smtp.acme-relay.net:465"


@pytest.fixture
def public(monkeypatch: pytest.MonkeyPatch) -> None:
    """A workspace set up for public mail: an https tracking base and a TLS relay."""
    monkeypatch.setenv("MKT_PUBLIC_URL", "https://t.acme-shop.com")
    monkeypatch.setenv("MKT_SMTP_URL", RELAY)


def add(conn: sqlite3.Connection, ws: int, dns: Any, name: str = NAME, *, publish: bool = True) -> dict[str, Any]:
    """A domain whose records the DNS server publishes (all of them unless `publish` is False), verified."""
    f.allow_domains(conn, ws)
    added = domains.add_domain(conn, ws, name)
    if publish:
        dns.publish(added)
    else:
        dns.publish(added, only={f"TXT {r['host']}" for r in added["dns_records"] if "._domainkey." in r["host"]})
    return domains.verify_domain(conn, ws, added["id"])


def by_rule(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["rule"]: r for r in rows}


# --- the rules ----------------------------------------------------------------------------------

def test_a_domain_that_publishes_its_records_passes_every_rule(conn, workspace, dns_server, public) -> None:
    domain = add(conn, workspace["id"], dns_server)
    rows = compliance.check_domain(conn, workspace["id"], domain["id"])
    assert [r["rule"] for r in rows] == list(compliance.RULES)
    assert {r["rule"]: r["status"] for r in rows} == dict.fromkeys(compliance.RULES, "pass"), rows
    assert all(set(r) == {"rule", "status", "found", "fix"} and r["fix"] is None for r in rows)
    found = by_rule(rows)
    assert "for the return path" in found["spf"]["found"] and "p=none" in found["dmarc"]["found"]
    assert f"DKIM d={NAME}" in found["dmarc_aligned"]["found"]


def test_no_dmarc_fails_and_names_the_record_to_publish(conn, workspace, dns_server, public) -> None:
    domain = add(conn, workspace["id"], dns_server)
    dns_server.remove("TXT", f"_dmarc.{NAME}")
    rows = by_rule(compliance.check_domain(conn, workspace["id"], domain["id"]))
    assert rows["dmarc"]["status"] == "fail"
    assert f"_dmarc.{NAME}" in rows["dmarc"]["fix"] and "p=none" in rows["dmarc"]["fix"]
    assert rows["dmarc_aligned"]["status"] == "pass"  # DKIM d= is the From domain whatever the record says


def test_a_subdomain_inherits_the_dmarc_record_of_its_parent(conn, workspace, dns_server, public) -> None:
    domain = add(conn, workspace["id"], dns_server, f"news.{NAME}")
    dns_server.remove("TXT", f"_dmarc.news.{NAME}")
    dns_server.add("TXT", f"_dmarc.{NAME}", "v=DMARC1; p=reject; sp=quarantine")
    row = by_rule(compliance.check_domain(conn, workspace["id"], domain["id"]))["dmarc"]
    assert row["status"] == "pass" and f"inherited from {NAME}" in row["found"] and "p=quarantine" in row["found"]


def test_spf_fails_without_the_return_path_cname_or_with_two_records(conn, workspace, dns_server, public) -> None:
    domain = add(conn, workspace["id"], dns_server)
    rp = f"{domain['domain_code']}.{NAME}"
    dns_server.remove("CNAME", rp)
    row = by_rule(compliance.check_domain(conn, workspace["id"], domain["id"]))["spf"]
    assert row["status"] == "fail" and rp in row["found"] and f"CNAME {rp} -> {NAME}" in row["fix"]
    dns_server.add("CNAME", rp, NAME)
    dns_server.add("TXT", NAME, "v=spf1 include:_spf.other.net ~all")
    assert by_rule(compliance.check_domain(conn, workspace["id"], domain["id"]))["spf"]["found"].startswith("2 SPF")


def test_spf_past_ten_lookups_fails(conn, workspace, dns_server, public) -> None:
    domain = add(conn, workspace["id"], dns_server)
    dns_server.remove("TXT", NAME)
    dns_server.add("TXT", NAME, "v=spf1 a mx include:_spf1.acme-shop.com ~all")
    for n in range(1, 6):
        dns_server.add("TXT", f"_spf{n}.{NAME}", f"v=spf1 a mx include:_spf{n + 1}.{NAME} ~all")
    row = by_rule(compliance.check_domain(conn, workspace["id"], domain["id"]))["spf"]
    assert row["status"] == "fail" and "more than 10 DNS lookups" in row["found"]


def test_another_dkim_key_fails_dkim_and_strict_spf_alignment_fails_alignment(conn, workspace, dns_server,
                                                                               public) -> None:
    domain = add(conn, workspace["id"], dns_server)
    key_host = next(r["host"] for r in domain["dns_records"] if "_domainkey" in r["host"])
    dns_server.remove("TXT", key_host)
    dns_server.add("TXT", key_host, "v=DKIM1; k=rsa; p=QUJDRA==")
    dns_server.remove("TXT", f"_dmarc.{NAME}")
    dns_server.add("TXT", f"_dmarc.{NAME}", "v=DMARC1; p=none; aspf=s")
    rows = by_rule(compliance.check_domain(conn, workspace["id"], domain["id"]))
    assert rows["dkim"]["status"] == "fail" and "another key" in rows["dkim"]["found"]
    assert rows["dmarc_aligned"]["status"] == "fail" and "aspf=s" in rows["dmarc_aligned"]["found"]


def test_a_free_mail_from_domain_fails(conn, workspace, dns_server, public) -> None:
    f.allow_domains(conn, workspace["id"])
    domain = domains.add_domain(conn, workspace["id"], "gmail.com")
    row = by_rule(compliance.check_domain(conn, workspace["id"], domain["id"]))["free_mail_from"]
    assert row["status"] == "fail" and "free-mail" in row["found"] and row["fix"] == "send from a domain you own"


def test_a_reserved_name_is_not_looked_up_and_only_warns(conn, workspace, dns_server, public) -> None:
    domain = f.domain(conn, workspace["id"], "news.example.test")
    rows = by_rule(compliance.check_domain(conn, workspace["id"], domain["id"]))
    assert {rows[r]["status"] for r in ("spf", "dkim", "dmarc", "dmarc_aligned")} == {"warn"}
    assert "reserved name" in rows["spf"]["found"] and dns_server.queries == []


@pytest.mark.parametrize(("url", "status", "says"), [
    ("smtp://smtp.acme-relay.net:25", "fail", "plain SMTP"),
    ("smtp://127.0.0.1:2525", "warn", "a local relay"),
    ("smtp://smtp.acme-relay.net:587?starttls=1", "pass", "STARTTLS"),
    ("smtps://smtp.acme-relay.net:465?verify=0", "warn", "without checking its certificate"),
    (None, "warn", "outbox"),
])
def test_relay_tls(conn, workspace, monkeypatch, url, status, says) -> None:
    if url is None:
        monkeypatch.delenv("MKT_SMTP_URL", raising=False)
    else:
        monkeypatch.setenv("MKT_SMTP_URL", url)
    row = compliance._relay_tls(conn, workspace["id"])
    assert row["status"] == status and says in row["found"]
    assert "secret" not in row["found"]


@pytest.mark.parametrize(("base", "status"), [("https://t.acme-shop.com", "pass"), ("http://t.acme-shop.com", "fail"),
                                              ("http://127.0.0.1:8000", "warn"), ("http://mkt.localhost", "warn")])
def test_https_unsubscribe(conn, workspace, monkeypatch, base, status) -> None:
    monkeypatch.setenv("MKT_PUBLIC_URL", base)
    assert compliance._https_unsubscribe(conn, workspace["id"])["status"] == status


def test_a_dns_server_that_fails_fails_the_dns_rules(conn, workspace, dns_server, public) -> None:
    domain = add(conn, workspace["id"], dns_server)
    dns_server.failing.update({f"_dmarc.{NAME}", f"{domain['domain_code']}.{NAME}"})
    rows = by_rule(compliance.check_domain(conn, workspace["id"], domain["id"]))
    assert rows["dmarc"]["status"] == rows["spf"]["status"] == "fail"
    assert rows["dmarc"]["found"].startswith("DNS lookup failed")


def test_the_free_mail_list_is_data(conn, workspace, tmp_path, monkeypatch) -> None:
    mine = tmp_path / "free.csv"
    mine.write_text("domain,provider,source\nacme-shop.com,Acme,our own list\n", encoding="utf-8")
    monkeypatch.setenv(compliance.FREE_MAIL_ENV, str(mine))
    assert compliance._free_mail("news.acme-shop.com")["status"] == "fail"
    assert compliance._free_mail("gmail.com")["status"] == "pass"
    mine.write_text("name,source\nx,y\n", encoding="utf-8")
    with pytest.raises(MktError, match="must begin with the header domain,provider,source"):
        compliance._free_mail("gmail.com")


# --- scheduling ----------------------------------------------------------------------------------

def ready(conn: sqlite3.Connection, ws: int, name: str) -> str:
    f.contact(conn, ws, "reader@example.org")
    return f.ready_campaign(conn, ws, html="<p>Hi <a href='{{unsubscribe_url}}'>unsubscribe</a></p>", domain=name)["id"]


def test_scheduling_from_a_domain_without_dmarc_is_refused_naming_each_rule(conn, workspace, dns_server,
                                                                             public) -> None:
    ws = workspace["id"]
    add(conn, ws, dns_server, publish=False)  # the DKIM key only: verified, but no SPF, no DMARC
    campaign_id = ready(conn, ws, NAME)
    with pytest.raises(MktError) as refused:
        sender_gate.schedule_campaign(conn, ws, campaign_id, {"schedule_type": "NOW"})
    message = refused.value.message
    assert refused.value.status == 400 and NAME in message
    assert "spf:" in message and "dmarc:" in message and "fix: publish `v=DMARC1; p=none" in message
    assert "dkim:" not in message and "dmarc_aligned:" not in message
    assert conn.execute("SELECT status FROM campaigns WHERE id = ?", (campaign_id,)).fetchone()[0] == "DRAFT"


def test_the_operator_overrides_and_the_override_is_logged(conn, workspace, dns_server, public) -> None:
    ws = workspace["id"]
    add(conn, ws, dns_server, publish=False)
    campaign_id = ready(conn, ws, NAME)
    answer = sender_gate.schedule_campaign(conn, ws, campaign_id, {"schedule_type": "NOW"}, override=True)
    assert answer["status"] == "QUEUED" and answer["compliance_override"] == ["spf", "dmarc"]
    logged = conn.execute("SELECT action, detail, actor FROM operator_log WHERE workspace_id = ?", (ws,)).fetchall()
    assert [r["action"] for r in logged] == ["email.compliance.override"]
    assert campaign_id in logged[0]["detail"] and "--override-compliance" in logged[0]["detail"]
    assert "spf, dmarc" in logged[0]["detail"] and logged[0]["actor"]


def test_a_compliant_domain_schedules_and_logs_nothing(conn, workspace, dns_server, public) -> None:
    ws = workspace["id"]
    add(conn, ws, dns_server)
    campaign_id = ready(conn, ws, NAME)
    answer = sender_gate.schedule_campaign(conn, ws, campaign_id, {"schedule_type": "NOW"}, override=True)
    assert answer == {"id": campaign_id, "status": "QUEUED"}
    assert conn.execute("SELECT count(*) FROM operator_log").fetchone()[0] == 0


def test_refusals_before_the_gate_keep_their_order(conn, workspace, dns_server, public) -> None:
    """A campaign without a sender hears that first: the gate needs a sender to check."""
    campaign = f.campaign(conn, workspace["id"])
    with pytest.raises(MktError, match="configure a sender identity"):
        sender_gate.schedule_campaign(conn, workspace["id"], campaign["id"], {"schedule_type": "NOW"})
    assert dns_server.queries == []


# --- flows ------------------------------------------------------------------------------------------

def flow_from(conn: sqlite3.Connection, ws: int, sender_id: int) -> int:
    f.tag(conn, ws, "vip")
    return flows.create_automation(conn, ws, {"name": "Welcome", "triggers": [{"type": "tag_added", "tag": "vip"}],
                                              "steps": [f.email_step("hello", sender_id)]})["id"]


def test_a_flow_that_mails_from_a_failing_domain_is_not_activated(conn, workspace, dns_server, public) -> None:
    ws = workspace["id"]
    domain = add(conn, ws, dns_server, publish=False)
    sender = senders.add_sender_identity(conn, ws, {"domain_id": domain["id"], "local_part": "hello",
                                                    "display_name": "Acme"})
    automation = flow_from(conn, ws, sender["id"])
    with pytest.raises(MktError) as refused:
        flows.publish_automation(conn, ws, automation)
    assert refused.value.status == 400 and "automation" in refused.value.message and "dmarc:" in refused.value.message
    assert flows.get_automation(conn, ws, automation)["status"] == "DRAFT"
    dns_server.publish(domain)
    assert flows.publish_automation(conn, ws, automation)["status"] == "ACTIVE"
