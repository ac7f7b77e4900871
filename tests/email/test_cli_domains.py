"""`mkt domains add/list/show/verify` and `mkt senders add/list/show`: --json is the API's data."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import factories as f


def test_add_list_show_json_equals_the_api(cli_json, client, auth, workspace):
    added = cli_json("domains", "add", "Example.com")
    assert added["domain_name"] == "example.com" and added["verified"] is False
    assert cli_json("domains", "show", str(added["id"])) == client.get(f"/v1/domains/{added['id']}",
                                                                      headers=auth).json()["data"] == added
    assert cli_json("domains", "list") == client.get("/v1/domains", headers=auth).json()["data"] == [added]


def test_show_for_a_person_lists_the_records_to_publish(cli, cli_json, workspace):
    d = cli_json("domains", "add", "example.com")
    result = cli("domains", "show", str(d["id"]))
    assert result.exit_code == 0
    out = result.stdout
    assert "not verified" in out and f"mkt domains verify {d['id']}" in out
    for record in d["dns_records"]:
        assert record["host"] in out
    assert "publish: v=spf1 a mx ~all" in out and "publish: v=DMARC1; p=none" in out
    assert "mandatory" in out and "verified" in out
    dkim_value = d["dns_records"][1]["value"]
    assert dkim_value in out.replace("\n", "")  # folded at the terminal's edge, every character there
    listing = cli("domains", "list").stdout
    assert "example.com" in listing and "0/4" in listing
    assert "example.com is a reserved name" in out  # RFC 2606: no one but IANA publishes its records


def test_verify_exits_0_and_shows_what_was_found(cli, cli_json, workspace, dns_server):
    d = cli_json("domains", "add", "example.com")
    dkim = d["dns_records"][1]
    dns_server.add("TXT", "example.com", "v=spf1 include:_spf.other.example ~all")
    result = cli("domains", "verify", str(d["id"]))
    assert result.exit_code == 0, result.stderr
    assert "not verified" in result.stdout
    assert "found:   v=spf1 include:_spf.other.example ~all" in result.stdout
    assert "found:   nothing" in result.stdout
    as_json = cli_json("domains", "verify", str(d["id"]))
    assert as_json["verified"] is False and [r["verified"] for r in as_json["dns_records"]] == [False] * 4
    dns_server.publish(d, only={f"TXT {dkim['host']}"})
    verified = cli_json("domains", "verify", str(d["id"]))
    assert verified["verified"] is True and verified == cli_json("domains", "show", str(d["id"]))
    result = cli("domains", "verify", str(d["id"]))
    assert result.exit_code == 0 and "verified" in result.stdout and "not verified" not in result.stdout


def test_verify_when_dns_fails_still_exits_0(cli, cli_json, workspace, dns_server):
    d = cli_json("domains", "add", "example.com")
    dns_server.failing.update(r["host"] for r in d["dns_records"])
    result = cli("domains", "verify", str(d["id"]))
    assert result.exit_code == 0
    assert "lookup failed: the DNS server failed to answer" in result.stdout


def test_domain_errors_exit_1_with_the_api_message(cli, cli_json, workspace, conn):
    for args, message in [
        (("domains", "show", "abc"), "Please provide a valid domain ID."),
        (("domains", "show", "77"), "We were unable to find the domain."),
        (("domains", "verify", "0"), "Please provide a valid domain ID."),
        (("domains", "add", "10.0.0.1"), "Please provide a valid domain name, such as example.com."),
        (("domains", "add", " "), "Please provide a domain name."),
    ]:
        result = cli(*args)
        assert (result.exit_code, result.stderr.strip()) == (1, message), args
    cli_json("domains", "add", "example.com")
    result = cli("domains", "add", "example.com")
    assert (result.exit_code, result.stderr.strip()) == (
        1, "The domain example.com has already been added to this workspace.")
    result = cli("domains", "add", "example.org")
    message, detail = result.stderr.strip().split("\n")  # the API's message, then what to do about it
    assert (result.exit_code, message) == (1, "Billing limit error")
    assert detail.startswith("domains: the free plan allows 1 and 1 are used.")
    assert len(cli_json("domains", "list")) == 1


def test_senders_add_list_show(cli, cli_json, client, auth, workspace):
    d = cli_json("domains", "add", "example.com")
    s = cli_json("senders", "add", "--domain-id", str(d["id"]), "--local-part", "news", "--display-name", "News Team")
    assert {k: s[k] for k in ("display_name", "local_part", "domain_name", "domain_id", "domain_verified")} == {
        "display_name": "News Team", "local_part": "news", "domain_name": "example.com", "domain_id": d["id"],
        "domain_verified": False}
    assert cli_json("senders", "list") == client.get("/v1/sender-identities", headers=auth).json()["data"] == [s]
    assert cli_json("senders", "show", str(s["id"])) == s
    human = cli("senders", "add", "--domain-id", str(d["id"]), "--local-part", "info", "--display-name", "Info")
    assert human.exit_code == 0
    assert "Info <info@example.com>" in human.stdout and "not verified yet" in human.stdout
    listing = cli("senders", "list").stdout
    assert "news@example.com" in listing and "info@example.com" in listing


def test_senders_errors(cli, cli_json, workspace, conn):
    other = f.workspace(conn, "Other")
    theirs = f.domain(conn, other["id"], "other.example")
    for args, message in [
        (("--domain-id", "x", "--local-part", "news", "--display-name", "N"), "Please provide a valid domain ID."),
        (("--domain-id", str(theirs["id"]), "--local-part", "news", "--display-name", "N"),
         "We were unable to find the domain."),
    ]:
        result = cli("--workspace", str(workspace["id"]), "senders", "add", *args)
        assert (result.exit_code, result.stderr.strip()) == (1, message)
    result = cli("--workspace", str(workspace["id"]), "senders", "add", "--local-part", "news")
    assert result.exit_code == 2  # usage: a required option is missing
    result = cli("--workspace", str(workspace["id"]), "senders", "show", "5")
    assert (result.exit_code, result.stderr.strip()) == (1, "We were unable to find the sender identity.")
    assert cli_json("--workspace", str(workspace["id"]), "senders", "list") == []


@pytest.mark.slow
def test_a_real_mkt_process_verifies_through_mkt_dns_server(db_path, workspace, dns_server):
    """`python -m marketing_cli` in its own process: MKT_DNS_SERVER read from the environment."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "MKT_DNS_SERVER": dns_server.address}

    def mkt(*args):
        done = subprocess.run([sys.executable, "-m", "marketing_cli", "--db", str(db_path), *args, "--json"],
                              env=env, cwd=root, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    added = mkt("domains", "add", "example.com")
    assert mkt("domains", "verify", str(added["id"]))["verified"] is False
    dns_server.publish(added)
    verified = mkt("domains", "verify", str(added["id"]))
    assert verified["verified"] is True and all(r["verified"] for r in verified["dns_records"])


# --- a staging domain: a reserved name, `mkt domains mark-verified` (operator only) ----------


def test_add_says_a_reserved_name_can_never_be_delivered_publicly(cli, cli_json, workspace, conn):
    f.allow_domains(conn, workspace["id"])
    result = cli("domains", "add", "news.example.test")
    assert result.exit_code == 0, result.stderr
    out = " ".join(result.stdout.split())  # rich folds lines at the terminal's edge
    assert "news.example.test is a reserved name" in out
    assert "mail from it can never be delivered publicly" in out
    assert "`mkt domains mark-verified 1` (operator, without DNS)" in out
    added = cli_json("domains", "show", "1")
    assert (added["reserved_name"], added["verified_by"]) == (True, None)
    real = cli("domains", "add", "mail.acme-shop.com")
    assert real.exit_code == 0 and "reserved" not in real.stdout and "mark-verified" not in real.stdout
    assert cli_json("domains", "show", "2")["reserved_name"] is False


def test_the_reported_defect_domains_add_then_senders_add(cli, cli_json, workspace):
    d = cli_json("domains", "add", "news.example.test")
    result = cli("senders", "add", "--domain-id", str(d["id"]), "--local-part", "news", "--display-name", "News")
    assert result.exit_code == 0, result.stderr
    assert "News <news@news.example.test>" in result.stdout
    bad = cli("senders", "add", "--domain-id", str(d["id"]), "--local-part", "a b", "--display-name", "News")
    assert (bad.exit_code, bad.stderr.strip()) == (1, ("The local part 'a b' is not valid in an email address: The "
                                                       "email address contains invalid characters before the "
                                                       "@-sign: SPACE."))


def test_mark_verified_then_undo(cli, cli_json, client, auth, workspace, caplog):
    import logging

    d = cli_json("domains", "add", "news.example.test")
    with caplog.at_level(logging.WARNING, logger="mkt.domains"):
        result = cli("domains", "mark-verified", str(d["id"]))
    assert result.exit_code == 0, result.stderr
    assert "verified by operator" in result.stdout and "news.example.test is a reserved name" in result.stdout
    assert "marked verified by the operator, without a DNS check" in caplog.text
    marked = cli_json("domains", "show", str(d["id"]))
    assert (marked["verified"], marked["verified_by"]) == (True, "operator")
    assert marked == client.get(f"/v1/domains/{d['id']}", headers=auth).json()["data"]
    assert "verified by operator" in cli("domains", "show", str(d["id"])).stdout
    listing = cli("domains", "list").stdout
    assert "by operator" in listing and "0/4" in listing
    assert cli_json("senders", "add", "--domain-id", str(d["id"]), "--local-part", "news",
                    "--display-name", "News")["domain_verified"] is True
    undone = cli_json("domains", "mark-verified", str(d["id"]), "--undo")
    assert (undone["verified"], undone["verified_by"]) == (False, None)
    assert undone == cli_json("domains", "show", str(d["id"]))
    assert "by operator" not in cli("domains", "list").stdout


def test_mark_verified_errors_exit_1_and_change_nothing(cli, cli_json, workspace, conn):
    other = f.workspace(conn, "Other")
    theirs = f.domain(conn, other["id"], "their.example.test")
    for args, message in [
        (("domains", "mark-verified", "abc"), "Please provide a valid domain ID."),
        (("domains", "mark-verified", "0", "--undo"), "Please provide a valid domain ID."),
        (("domains", "mark-verified", str(theirs["id"])), "We were unable to find the domain."),
    ]:
        result = cli("--workspace", str(workspace["id"]), *args)
        assert (result.exit_code, result.stderr.strip()) == (1, message), args
    assert cli("--workspace", str(workspace["id"]), "domains", "mark-verified").exit_code == 2  # ID is required
    assert cli_json("--workspace", str(other["id"]), "domains", "show", str(theirs["id"]))["verified"] is False
