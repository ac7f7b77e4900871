"""services/email/domains.py: adding domains, their records and keys, reading them, the signing key."""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding

from marketing_cli.errors import MktError
from marketing_cli.services.account import billing
from marketing_cli.services.email import domains
from tests import factories as f

REAL_NEW_KEY = domains._new_key  # taken before conftest's pool replaces it for each test


def error(fn, *args):
    with pytest.raises(MktError) as info:
        fn(*args)
    return info.value.status, info.value.message


def test_add_domain_answers_the_spec_domain_with_four_records(conn, workspace):
    d = domains.add_domain(conn, workspace["id"], "example.com")
    assert set(d) == {"id", "domain_code", "domain_name", "verified", "dns_records", "verified_by", "reserved_name"}
    assert d["domain_name"] == "example.com" and d["verified"] is False
    assert (d["verified_by"], d["reserved_name"]) == (None, True)  # extensions; example.com is RFC 2606's
    assert d["domain_code"].startswith("mkt") and len(d["domain_code"]) == 11
    for record in d["dns_records"]:
        assert set(record) == {"type", "host", "value", "mandatory", "verified"}  # no priority: no MX
        assert record["verified"] is False and not record["host"].endswith(".")
    spf, dkim, dmarc, return_path = d["dns_records"]
    assert (spf["type"], spf["host"], spf["value"], spf["mandatory"]) == ("TXT", "example.com", "v=spf1 a mx ~all",
                                                                          False)
    assert (dkim["type"], dkim["host"], dkim["mandatory"]) == ("TXT", "mkt._domainkey.example.com", True)
    assert dkim["value"].startswith("v=DKIM1; k=rsa; p=MII")
    assert (dmarc["type"], dmarc["host"], dmarc["value"], dmarc["mandatory"]) == (
        "TXT", "_dmarc.example.com", "v=DMARC1; p=none", False)
    assert return_path == {"type": "CNAME", "host": f"{d['domain_code']}.example.com", "value": "example.com",
                           "mandatory": False, "verified": False}


def test_spf_mechanisms_come_from_the_operator_setting(conn, workspace, monkeypatch):
    monkeypatch.setenv("MKT_SPF_MECHANISMS", "  ip4:192.0.2.10   include:_spf.relay.example ")
    d = domains.add_domain(conn, workspace["id"], "example.com")
    assert d["dns_records"][0]["value"] == "v=spf1 ip4:192.0.2.10 include:_spf.relay.example ~all"


def test_dkim_record_publishes_the_public_half_of_the_signing_key(conn, workspace):
    d = domains.add_domain(conn, workspace["id"], "example.com")
    name, selector, pem = domains.dkim_signing_key(conn, d["id"])
    assert (name, selector) == ("example.com", "mkt")
    assert pem.startswith("-----BEGIN PRIVATE KEY-----")  # PKCS#8
    key = serialization.load_pem_private_key(pem.encode(), password=None)
    assert key.key_size == 2048
    published = d["dns_records"][1]["value"].split("p=", 1)[1]
    public = serialization.load_der_public_key(base64.b64decode(published))
    signature = key.sign(b"message", padding.PKCS1v15(), hashes.SHA256())
    public.verify(signature, b"message", padding.PKCS1v15(), hashes.SHA256())  # raises if they do not pair
    assert len(d["dns_records"][1]["value"]) > 255  # published as several strings (see the DNS tests)


def test_the_key_generator_makes_a_fresh_rsa_2048_pair_each_time():
    pem, public = REAL_NEW_KEY()
    key = serialization.load_pem_private_key(pem.encode(), password=None)
    assert key.key_size == 2048 and key.public_key().public_numbers().e == 65537
    der = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert base64.b64decode(public) == der
    assert REAL_NEW_KEY()[1] != public


def test_no_answer_ever_shows_the_private_key(conn, workspace):
    d = domains.add_domain(conn, workspace["id"], "example.com")
    pem = domains.dkim_signing_key(conn, d["id"])[2]
    secret_line = pem.splitlines()[5]
    for answer in (d, domains.get_domain(conn, workspace["id"], d["id"]), domains.list_domains(conn, workspace["id"])):
        text = json.dumps(answer)
        assert "PRIVATE" not in text and secret_line not in text


def test_each_domain_gets_its_own_key_and_code(conn, workspace):
    f.allow_domains(conn, workspace["id"])
    a = domains.add_domain(conn, workspace["id"], "a.example")
    b = domains.add_domain(conn, workspace["id"], "b.example")
    assert a["domain_code"] != b["domain_code"]
    assert a["dns_records"][1]["value"] != b["dns_records"][1]["value"]


@pytest.mark.parametrize("given, stored", [
    ("Example.COM", "example.com"),
    ("  mail.example.com.  ", "mail.example.com"),
    ("bücher.example", "xn--bcher-kva.example"),
    ("xn--bcher-kva.example", "xn--bcher-kva.example"),
    ("a-b.c0.example.co.uk", "a-b.c0.example.co.uk"),
    pytest.param(("a" * 56 + ".") * 4 + "co", ("a" * 56 + ".") * 4 + "co", id="230-characters-the-longest-kept"),
])
def test_names_are_stored_in_idna_lower_case_without_the_final_dot(conn, workspace, given, stored):
    d = domains.add_domain(conn, workspace["id"], given)
    assert d["domain_name"] == stored
    assert d["dns_records"][1]["host"] == f"mkt._domainkey.{stored}"


@pytest.mark.parametrize("name", [
    "192.0.2.1", "[2001:db8::1]", "2001:db8::1", "localhost", "example", "exa mple.com", "a_b.example.com",
    "-a.example.com", "a-.example.com", "example..com", "example.com..", "example.123", "http://example.com",
    "user@example.com", "x" * 64 + ".com", "*.example.com", "exam\x00ple.com",
    pytest.param("a." * 500_000 + "com", id="a-million-characters"),
    pytest.param(("a" * 56 + ".") * 4 + "com", id="231-characters"),  # its DKIM host would pass DNS's 253
])
def test_invalid_names_are_refused(conn, workspace, name):
    assert error(domains.add_domain, conn, workspace["id"], name) == (400, domains.INVALID_NAME)
    assert domains.list_domains(conn, workspace["id"]) == []


@pytest.mark.parametrize("name", [None, "", "   "])
def test_a_missing_name_is_refused(conn, workspace, name):
    assert error(domains.add_domain, conn, workspace["id"], name) == (400, domains.NAME_REQUIRED)


def test_create_domain_reads_the_body(conn, workspace):
    ws = workspace["id"]
    assert error(domains.create_domain, conn, ws, ["example.com"]) == (400, domains.INVALID_BODY)
    assert error(domains.create_domain, conn, ws, {}) == (400, domains.NAME_REQUIRED)
    assert error(domains.create_domain, conn, ws, {"domain_name": 5}) == (
        400, "The member 'domain_name' must be a string.")
    assert error(domains.create_domain, conn, ws, {"name": ["x"]}) == (400, "The member 'name' must be a string.")
    assert domains.create_domain(conn, ws, {"domain_name": "example.com"})["domain_name"] == "example.com"
    f.allow_domains(conn, ws)
    assert domains.create_domain(conn, ws, {"domain": "example.org"})["domain_name"] == "example.org"
    assert domains.create_domain(conn, ws, {"name": "example.net", "domain": None})["domain_name"] == "example.net"


def test_a_domain_is_added_once_per_workspace(conn, workspace):
    f.allow_domains(conn, workspace["id"])
    domains.add_domain(conn, workspace["id"], "example.com")
    assert error(domains.add_domain, conn, workspace["id"], "EXAMPLE.com.") == (
        400, "The domain example.com has already been added to this workspace.")
    assert len(domains.list_domains(conn, workspace["id"])) == 1


def test_two_workspaces_may_add_one_domain_under_different_selectors(conn, workspace):
    other = f.workspace(conn, "Other")
    first = domains.add_domain(conn, workspace["id"], "example.com")
    second = domains.add_domain(conn, other["id"], "example.com")
    assert first["dns_records"][1]["host"] == "mkt._domainkey.example.com"
    assert second["dns_records"][1]["host"] == "mkt2._domainkey.example.com"
    assert domains.dkim_signing_key(conn, second["id"])[1] == "mkt2"


def test_the_plan_allowance_bounds_domains_and_usage_is_counted(conn, workspace):
    ws = workspace["id"]
    assert billing.remaining(conn, ws, "domains") == 1  # the free plan
    domains.add_domain(conn, ws, "a.example")
    assert billing.usage(conn, ws, "domains") == 1
    assert error(domains.add_domain, conn, ws, "b.example") == (400, "Billing limit error")
    assert [d["domain_name"] for d in domains.list_domains(conn, ws)] == ["a.example"]
    billing.set_plan(conn, ws, "pro")
    domains.add_domain(conn, ws, "b.example")
    assert billing.usage(conn, ws, "domains") == 2


def test_list_and_get_see_only_the_workspace(conn, workspace):
    ws = workspace["id"]
    f.allow_domains(conn, ws)
    a = domains.add_domain(conn, ws, "a.example")
    b = domains.add_domain(conn, ws, "b.example")
    other = f.workspace(conn, "Other")
    theirs = domains.add_domain(conn, other["id"], "c.example")
    assert domains.list_domains(conn, ws) == [a, b]
    assert domains.get_domain(conn, ws, b["id"]) == b
    assert domains.get_domain(conn, ws, str(b["id"])) == b
    assert error(domains.get_domain, conn, ws, theirs["id"]) == (404, "We were unable to find the domain.")
    assert error(domains.verify_domain, conn, ws, theirs["id"]) == (404, "We were unable to find the domain.")
    assert error(domains.get_domain, conn, ws, 99999) == (404, "We were unable to find the domain.")


@pytest.mark.parametrize("bad", ["abc", "0", "-1", "1.5", "", None, True, 0, 2**63, "1e3", "12abc"])
def test_a_malformed_domain_id_is_refused(conn, workspace, bad):
    assert error(domains.get_domain, conn, workspace["id"], bad) == (400, "Please provide a valid domain ID.")
    assert error(domains.verify_domain, conn, workspace["id"], bad) == (400, "Please provide a valid domain ID.")


def test_signing_key_of_a_missing_domain(conn, workspace):
    assert error(domains.dkim_signing_key, conn, 424242) == (404, domains.NOT_FOUND)
