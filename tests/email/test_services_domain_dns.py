"""Domain verification against a real DNS server (the conftest `dns_server`, dnslib on localhost)."""

from __future__ import annotations

import socket

import pytest

from marketing_cli.services.email import dns_check as domain_dns
from marketing_cli.services.email import domains
from tests import factories as f


@pytest.fixture
def domain(conn, workspace):
    return f.domain(conn, workspace["id"], "example.com")


def verify(conn, workspace, domain):
    return domains.verify_domain_report(conn, workspace["id"], domain["id"])


def flags(d):
    return [r["verified"] for r in d["dns_records"]]


def test_every_published_record_verifies_and_long_txt_strings_are_joined(conn, workspace, domain, dns_server):
    dns_server.publish(domain)
    dkim = domain["dns_records"][1]
    served = dns_server.records[(dkim["host"], "TXT")][0]
    assert len(served) == 2 and len(served[0]) == 255  # the DKIM value goes out as two strings
    report = verify(conn, workspace, domain)
    assert report["domain"]["verified"] is True and flags(report["domain"]) == [True] * 4
    assert report["checks"][1]["found"] == [dkim["value"]] and report["checks"][1]["error"] is None
    assert domains.get_domain(conn, workspace["id"], domain["id"]) == report["domain"]
    assert (dkim["host"], "TXT") in dns_server.queries


def test_the_dkim_record_alone_verifies_the_domain(conn, workspace, domain, dns_server):
    dkim = domain["dns_records"][1]
    dns_server.publish(domain, only={f"TXT {dkim['host']}"})
    d = domains.verify_domain(conn, workspace["id"], domain["id"])
    assert d["verified"] is True and flags(d) == [False, True, False, False]


def test_a_missing_dkim_record_leaves_the_domain_unverified(conn, workspace, domain, dns_server):
    spf, dkim, dmarc, rp = domain["dns_records"]
    dns_server.publish(domain, only={f"TXT {spf['host']}", f"TXT {dmarc['host']}", f"CNAME {rp['host']}"})
    report = verify(conn, workspace, domain)
    assert report["domain"]["verified"] is False and flags(report["domain"]) == [True, False, True, True]
    assert report["checks"][1] == {"purpose": "dkim", "type": "TXT", "host": dkim["host"], "found": [],
                                   "verified": False, "error": None}


def test_a_dkim_record_with_another_key_does_not_verify(conn, workspace, domain, dns_server):
    other = f.domain(conn, f.workspace(conn, "Other")["id"], "example.com")
    dns_server.add("TXT", domain["dns_records"][1]["host"], dns_server.split(other["dns_records"][1]["value"]))
    report = verify(conn, workspace, domain)
    assert report["domain"]["verified"] is False
    assert report["checks"][1]["found"] == [other["dns_records"][1]["value"]]


def test_dkim_may_be_written_with_spaces_and_without_v_or_k(conn, workspace, domain, dns_server):
    key = domain["dns_records"][1]["value"].split("p=", 1)[1]
    spaced = " ".join(key[i:i + 64] for i in range(0, len(key), 64))
    dns_server.add("TXT", domain["dns_records"][1]["host"], dns_server.split(f"p={spaced} ;t=s"))
    assert domains.verify_domain(conn, workspace["id"], domain["id"])["verified"] is True


def test_a_wrong_dkim_version_does_not_verify(conn, workspace, domain, dns_server):
    value = domain["dns_records"][1]["value"].replace("DKIM1", "DKIM2")
    dns_server.add("TXT", domain["dns_records"][1]["host"], dns_server.split(value))
    assert domains.verify_domain(conn, workspace["id"], domain["id"])["verified"] is False


def test_spf_merged_with_other_senders_verifies_but_two_spf_records_do_not(conn, workspace, domain, dns_server):
    dns_server.add("TXT", "example.com", "google-site-verification=abc")
    dns_server.add("TXT", "example.com", "v=spf1 include:_spf.google.com MX a -all")
    assert flags(domains.verify_domain(conn, workspace["id"], domain["id"]))[0] is True
    dns_server.add("TXT", "example.com", "v=spf1 a mx ~all")
    assert flags(domains.verify_domain(conn, workspace["id"], domain["id"]))[0] is False  # SPF permerror


def test_spf_without_our_mechanisms_does_not_verify(conn, workspace, domain, dns_server):
    dns_server.add("TXT", "example.com", "v=spf1 include:_spf.google.com ~all")
    assert flags(domains.verify_domain(conn, workspace["id"], domain["id"]))[0] is False


def test_any_dmarc_policy_verifies(conn, workspace, domain, dns_server):
    dns_server.add("TXT", "_dmarc.example.com", "v=DMARC1;p=reject; rua=mailto:d@example.com")
    assert flags(domains.verify_domain(conn, workspace["id"], domain["id"]))[2] is True
    dns_server.remove("TXT", "_dmarc.example.com")
    dns_server.add("TXT", "_dmarc.example.com", "p=reject")
    assert flags(domains.verify_domain(conn, workspace["id"], domain["id"]))[2] is False


def test_cname_ignores_case_and_the_final_dot_but_not_another_target(conn, workspace, domain, dns_server):
    host = domain["dns_records"][3]["host"]
    dns_server.add("CNAME", host, "EXAMPLE.com.")
    assert flags(domains.verify_domain(conn, workspace["id"], domain["id"]))[3] is True
    dns_server.remove("CNAME", host)
    dns_server.add("CNAME", host, "bounces.elsewhere.example")
    assert flags(domains.verify_domain(conn, workspace["id"], domain["id"]))[3] is False


def test_a_record_removed_later_unverifies_the_domain(conn, workspace, domain, dns_server):
    dns_server.publish(domain)
    assert domains.verify_domain(conn, workspace["id"], domain["id"])["verified"] is True
    dns_server.remove("TXT", domain["dns_records"][1]["host"])
    d = domains.verify_domain(conn, workspace["id"], domain["id"])
    assert d["verified"] is False and flags(d) == [True, False, True, True]


def test_a_failing_lookup_keeps_what_the_last_check_found(conn, workspace, domain, dns_server):
    dns_server.publish(domain)
    assert domains.verify_domain(conn, workspace["id"], domain["id"])["verified"] is True
    dkim_host = domain["dns_records"][1]["host"]
    dns_server.failing.add(dkim_host)
    report = verify(conn, workspace, domain)
    assert report["domain"]["verified"] is True and flags(report["domain"]) == [True] * 4
    assert report["checks"][1]["verified"] is None and "SERVFAIL" in report["checks"][1]["error"]


def test_a_failing_lookup_on_a_new_domain_leaves_it_unverified(conn, workspace, domain, dns_server):
    dns_server.failing.update(r["host"] for r in domain["dns_records"])
    report = verify(conn, workspace, domain)
    assert report["domain"]["verified"] is False and flags(report["domain"]) == [False] * 4
    assert all(c["error"] and c["found"] is None for c in report["checks"])


def test_a_silent_dns_server_times_out_quickly_and_is_not_an_error(conn, workspace, domain, monkeypatch):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:  # bound, never answers
        silent.bind(("127.0.0.1", 0))
        monkeypatch.setenv("MKT_DNS_SERVER", f"127.0.0.1:{silent.getsockname()[1]}")
        monkeypatch.setattr(domain_dns, "DNS_TIMEOUT", 0.3)
        report = verify(conn, workspace, domain)
    assert report["domain"]["verified"] is False
    assert [c["error"] for c in report["checks"]] == ["no answer from the DNS server within 0.3 s"] * 4


@pytest.mark.parametrize("setting", ["nonsense:port", "127.0.0.1:0", "127.0.0.1:70000", ":53", "no-such-host.invalid:53"])
def test_an_unusable_dns_server_setting_is_reported_not_raised(conn, workspace, domain, monkeypatch, setting):
    monkeypatch.setenv("MKT_DNS_SERVER", setting)
    report = verify(conn, workspace, domain)
    assert report["domain"]["verified"] is False
    assert all(c["error"] == domain_dns.BAD_SERVER.format(value=setting) for c in report["checks"])


@pytest.mark.parametrize("setting, parsed", [
    ("127.0.0.1:5353", ("127.0.0.1", 5353)),
    ("127.0.0.1", ("127.0.0.1", 53)),
    ("[::1]:5353", ("::1", 5353)),
    ("::1", ("::1", 53)),
    (" 10.0.0.2:53 ", ("10.0.0.2", 53)),
    ("localhost:5300", None),
])
def test_parse_server(setting, parsed):
    host, port = domain_dns.parse_server(setting)
    if parsed is None:
        assert port == 5300 and host in {"127.0.0.1", "::1"}
    else:
        assert (host, port) == parsed


def test_the_verified_domain_factory_goes_through_dns(conn, workspace, dns_server):
    d = f.verified_domain(conn, workspace["id"], dns_server, "news.example.org")
    assert d["verified"] is True and d["domain_name"] == "news.example.org"
