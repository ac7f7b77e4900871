"""services/email/senders.py: sender identities on the workspace's own domains."""

from __future__ import annotations

import pytest

from marketing_cli.errors import MktError
from marketing_cli.services.email import senders
from tests import factories as f

KEYS = {"id", "display_name", "local_part", "domain_name", "domain_id", "domain_verified", "created_at"}


@pytest.fixture
def domain(conn, workspace):
    return f.domain(conn, workspace["id"], "example.com")


def add(conn, ws, domain_id, local_part="news", display_name="News Team"):
    return senders.add_sender_identity(conn, ws, {"domain_id": domain_id, "local_part": local_part,
                                                  "display_name": display_name})


def error(conn, ws, body):
    with pytest.raises(MktError) as info:
        senders.add_sender_identity(conn, ws, body)
    assert senders.list_sender_identities(conn, ws) == []  # nothing written
    return info.value.status, info.value.message


def test_add_answers_the_identity(conn, workspace, domain):
    s = add(conn, workspace["id"], domain["id"], " news ", "  News Team ")
    assert set(s) == KEYS
    assert s["id"] >= 1 and s["created_at"].endswith("Z")
    assert {k: s[k] for k in KEYS - {"id", "created_at"}} == {
        "display_name": "News Team", "local_part": "news", "domain_name": "example.com", "domain_id": domain["id"],
        "domain_verified": False}
    assert senders.get_sender_identity(conn, workspace["id"], s["id"]) == s
    assert senders.list_sender_identities(conn, workspace["id"]) == [s]


def test_domain_verified_follows_the_domain(conn, workspace, dns_server):
    d = f.verified_domain(conn, workspace["id"], dns_server)
    s = add(conn, workspace["id"], d["id"])
    assert s["domain_verified"] is True


@pytest.mark.parametrize("local_part", ["a", "first.last", "news+promo", "o'brien", "x_y-z", "A" * 64, "Sales"])
def test_valid_local_parts(conn, workspace, domain, local_part):
    assert add(conn, workspace["id"], domain["id"], local_part)["local_part"] == local_part


@pytest.mark.parametrize("local_part", ["a b", "a..b", ".a", "a.", "x@y", "a" * 65, "ü", '"quoted"', "a,b", "a<b"])
def test_invalid_local_parts(conn, workspace, domain, local_part):
    status, message = error(conn, workspace["id"], {"domain_id": domain["id"], "local_part": local_part,
                                                    "display_name": "News"})
    assert status == 400
    assert message.startswith(f"The local part '{local_part}' is not valid in an email address: ")


@pytest.mark.parametrize("body, expected", [
    (["news"], senders.INVALID_BODY),
    ("news", senders.INVALID_BODY),
    ({"local_part": "news", "display_name": "News"}, "Please provide a valid domain ID."),
    ({"domain_id": "abc", "local_part": "news", "display_name": "News"}, "Please provide a valid domain ID."),
    ({"domain_id": 0, "local_part": "news", "display_name": "News"}, "Please provide a valid domain ID."),
    ({"domain_id": True, "local_part": "news", "display_name": "News"}, "Please provide a valid domain ID."),
    ({"domain_id": "DOMAIN", "display_name": "News"}, "Please provide a valid domain ID."),
    ({"domain_id": "DOMAIN", "display_name": "News"}, senders.LOCAL_PART_REQUIRED),
    ({"domain_id": "DOMAIN", "local_part": "  ", "display_name": "News"}, senders.LOCAL_PART_REQUIRED),
    ({"domain_id": "DOMAIN", "local_part": 5, "display_name": "News"}, "The member 'local_part' must be a string."),
    ({"domain_id": "DOMAIN", "local_part": "news"}, senders.DISPLAY_NAME_REQUIRED),
    ({"domain_id": "DOMAIN", "local_part": "news", "display_name": " "}, senders.DISPLAY_NAME_REQUIRED),
    ({"domain_id": "DOMAIN", "local_part": "news", "display_name": ["x"]},
     "The member 'display_name' must be a string."),
    ({"domain_id": "DOMAIN", "local_part": "news", "display_name": "x" * 101}, senders.DISPLAY_NAME_LENGTH),
    ({"domain_id": "DOMAIN", "local_part": "news", "display_name": "News\r\nBcc: all@example.com"},
     senders.DISPLAY_NAME_CONTROL),
    ({"domain_id": "DOMAIN", "local_part": "news", "display_name": "News\x00"}, senders.DISPLAY_NAME_CONTROL),
])
def test_bad_bodies(conn, workspace, domain, body, expected):
    if isinstance(body, dict) and body.get("domain_id") == "DOMAIN":
        if expected == "Please provide a valid domain ID.":
            body = {k: v for k, v in body.items() if k != "domain_id"}
        else:
            body = {**body, "domain_id": domain["id"]}
    assert error(conn, workspace["id"], body) == (400, expected)


def test_display_name_of_100_characters_is_kept(conn, workspace, domain):
    assert add(conn, workspace["id"], domain["id"], display_name="é" * 100)["display_name"] == "é" * 100


def test_only_the_workspaces_own_domains(conn, workspace, domain):
    other = f.workspace(conn, "Other")
    theirs = f.domain(conn, other["id"], "other.example")
    assert error(conn, workspace["id"], {"domain_id": theirs["id"], "local_part": "news", "display_name": "N"}) == (
        404, "We were unable to find the domain.")
    assert error(conn, workspace["id"], {"domain_id": 99999, "local_part": "news", "display_name": "N"}) == (
        404, "We were unable to find the domain.")


def test_duplicates_are_refused_whatever_the_case(conn, workspace, domain):
    f.allow_domains(conn, workspace["id"])
    add(conn, workspace["id"], domain["id"], "news")
    with pytest.raises(MktError) as info:
        add(conn, workspace["id"], domain["id"], "NEWS")
    assert info.value.message == "The sender identity NEWS@example.com already exists in this workspace."
    second = f.domain(conn, workspace["id"], "example.org")
    assert add(conn, workspace["id"], second["id"], "news")["domain_name"] == "example.org"
    assert len(senders.list_sender_identities(conn, workspace["id"])) == 2


def test_get_and_list_see_only_the_workspace(conn, workspace, domain):
    mine = add(conn, workspace["id"], domain["id"])
    other = f.workspace(conn, "Other")
    theirs = f.sender(conn, other["id"])
    assert senders.list_sender_identities(conn, workspace["id"]) == [mine]
    assert senders.list_sender_identities(conn, other["id"]) == [theirs]
    assert senders.get_sender_identity(conn, workspace["id"], theirs["id"]) is None
    assert senders.get_sender_identity(conn, workspace["id"], str(mine["id"])) == mine
    for bad in (None, "abc", 0, -1, True, 2**70, "1.0"):
        assert senders.get_sender_identity(conn, workspace["id"], bad) is None


def test_show_messages(conn, workspace, domain):
    mine = add(conn, workspace["id"], domain["id"])
    assert senders.show_sender_identity(conn, workspace["id"], mine["id"]) == mine
    with pytest.raises(MktError) as info:
        senders.show_sender_identity(conn, workspace["id"], "abc")
    assert (info.value.status, info.value.message) == (400, "Please provide a valid sender identity ID.")
    with pytest.raises(MktError) as info:
        senders.show_sender_identity(conn, workspace["id"], mine["id"] + 1)
    assert (info.value.status, info.value.message) == (404, "We were unable to find the sender identity.")


# --- reserved names: a staging setup's domains (.test, .localhost ...) ----------------------


@pytest.mark.parametrize("name", ["news.example.test", "mail.localhost", "x.invalid", "printer.local", "home.arpa",
                                  "abc.onion", "mail.example", "example.com"])
def test_senders_on_reserved_names_are_accepted_like_their_domains(conn, workspace, name):
    """email-validator refuses every address on most of these whatever its options; the
    domain was checked when it was added, so only the local part is judged here."""
    d = f.domain(conn, workspace["id"], name)
    s = add(conn, workspace["id"], d["id"], "news")
    assert (s["local_part"], s["domain_name"], s["domain_verified"]) == ("news", name, False)


def test_a_bad_local_part_on_a_reserved_name_blames_the_local_part(conn, workspace):
    d = f.domain(conn, workspace["id"], "news.example.test")
    for local_part, reason in [
        ("a b", "The email address contains invalid characters before the @-sign: SPACE."),
        ("a..b", "An email address cannot have two periods in a row."),
        ("ü", "Internationalized characters before the @-sign are not supported: 'ü'."),
    ]:
        assert error(conn, workspace["id"], {"domain_id": d["id"], "local_part": local_part,
                                             "display_name": "N"}) == (
            400, f"The local part '{local_part}' is not valid in an email address: {reason}")
    message = error(conn, workspace["id"], {"domain_id": d["id"], "local_part": "a b", "display_name": "N"})[1]
    assert "after the @" not in message and "reserved" not in message


def test_an_address_too_long_as_a_whole_names_the_address(conn, workspace):
    name = ("a" * 56 + ".") * 4 + "co"  # 230 characters, the longest domain kept
    d = f.domain(conn, workspace["id"], name)
    local = "b" * 30
    assert error(conn, workspace["id"], {"domain_id": d["id"], "local_part": local, "display_name": "N"}) == (
        400, (f"The address {local}@{name} is too long: an email address holds at most 254 characters "
              "(7 too many); use a shorter local part or domain."))
    assert add(conn, workspace["id"], d["id"], "b" * 23)["local_part"] == "b" * 23  # 254 characters: the limit


def test_contacts_keep_refusing_addresses_on_reserved_names(conn, workspace):
    """Only sending identities take reserved names: a contact at news.example.test is still refused."""
    from marketing_cli.services.contacts.values import normalize_email

    for address in ("ann@news.example.test", "ann@mail.localhost", "ann@x.invalid"):
        with pytest.raises(ValueError, match="special-use or reserved name"):
            normalize_email(address)
    assert normalize_email("Ann@Example.com") == "ann@example.com"  # unchanged: example.com is deliverable syntax
