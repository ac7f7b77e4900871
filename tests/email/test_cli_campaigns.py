"""`mkt campaigns`: the same values and messages as the API, options, files and stdin."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from marketing_cli.services.delivery import test_emails
from marketing_cli.services.email import campaigns, variant_html
from tests import factories as f
from tests.smtp_server import SmtpServer


@pytest.fixture
def ws(workspace: dict[str, Any]) -> int:
    return workspace["id"]


def test_create_list_show_match_the_api(cli: Any, cli_json: Any, client: Any, auth: dict[str, str]) -> None:
    made = cli_json("campaigns", "create", "--name", "Spring", "--type", "ab_testing")
    assert made["type"] == "AB_TESTING" and made["status"] == "DRAFT" and len(made["variants"]) == 2
    assert client.get(f"/v1/campaigns/{made['id']}", headers=auth).json()["data"] == made
    assert cli_json("campaigns", "show", made["id"]) == made
    listed = cli_json("campaigns", "list", "--limit", "500", "--status", "DRAFT")
    assert listed == client.get("/v1/campaigns?limit=500&status=DRAFT", headers=auth).json()["data"]
    human = cli("campaigns", "show", made["id"])
    assert human.exit_code == 0 and "Spring" in human.stdout and "AB_TESTING" in human.stdout
    assert made["variants"][1]["id"] in human.stdout
    table = cli("campaigns", "list")
    assert table.exit_code == 0 and "Page 1 of 1 (1 campaign(s))" in table.stdout


def test_errors_exit_1_with_the_api_message(cli: Any, ws: int) -> None:
    for args, message in ((("create", "--name", " "), campaigns.NAME_REQUIRED),
                          (("create", "--name", "x", "--type", "BIG"), campaigns.TYPE_INVALID),
                          (("show", "nope"), campaigns.NOT_FOUND),
                          (("list", "--status", "OLD"), "Invalid status 'OLD'.")):
        result = cli("campaigns", *args)
        assert result.exit_code == 1 and result.stderr.strip() == message, args


def test_configure_with_options(cli: Any, cli_json: Any, conn: Any, ws: int) -> None:
    sender = f.campaign_sender(conn, ws)
    vip = f.tag(conn, ws, "vip")
    made = cli_json("campaigns", "create", "--name", "AB", "--type", "AB_TESTING")
    out = cli_json("campaigns", "configure", made["id"], "--sender-id", str(sender),
                   "--reply-to", "Help Desk <help@example.com>", "--audience-type", "TAGS", "--include-tag", str(vip),
                   "--subject-a", "Subject A", "--preview-a", "Preview A", "--subject-b", "Subject B")
    assert out["sender_identity"]["local_part"] == "news"
    assert out["reply_to"] == {"display_name": "Help Desk", "local_part": "help", "domain_name": "example.com"}
    assert out["audience"][0]["include_tag_ids"] == [vip]
    assert [(v["subject"], v["preview_text"]) for v in out["variants"]] == [("Subject A", "Preview A"),
                                                                            ("Subject B", None)]
    human = cli("campaigns", "configure", made["id"], "--subject-a", "Again A", "--subject-b", "Again B")
    assert human.exit_code == 0 and "Help Desk <help@example.com>" in human.stdout and "TAGS" in human.stdout


def test_configure_with_a_body_file_and_stdin(cli: Any, cli_json: Any, conn: Any, ws: int, tmp_path: Path) -> None:
    sender = f.campaign_sender(conn, ws)
    made = cli_json("campaigns", "create", "--name", "One")
    body = {"sender": {"sender_identity_id": sender}, "audience": {"type": "ENTIRE_AUDIENCE"},
            "variants": [{"type": "A", "subject": "From a file"}]}
    path = tmp_path / "body.json"
    path.write_text(json.dumps(body))
    out = cli_json("campaigns", "configure", made["id"], "--body", str(path), "--subject-a", "Option wins")
    assert out["variants"][0]["subject"] == "Option wins" and out["audience"][0]["type"] == "ENTIRE_AUDIENCE"
    result = cli("campaigns", "configure", made["id"], "--body", "-", "--json",
                 input=json.dumps({"variants": [{"type": "A", "subject": "From stdin"}]}))
    assert result.exit_code == 0 and json.loads(result.stdout)["variants"][0]["subject"] == "From stdin"


def test_configure_errors_and_usage_errors(cli: Any, cli_json: Any, ws: int, tmp_path: Path) -> None:
    made = cli_json("campaigns", "create", "--name", "One")
    result = cli("campaigns", "configure", made["id"], "--subject-a", "Hi")
    assert result.exit_code == 1 and result.stderr.strip() == campaigns.SUBJECT_TOO_SHORT
    result = cli("campaigns", "configure", made["id"], "--sender-id", "999")
    assert result.exit_code == 1 and result.stderr.strip() == campaigns.SENDER_NOT_FOUND
    for args in (("--reply-to", "x@example.com"), ("--preview-a", "p"), ("--include-tag", "1"),
                 ("--sender-id", "1", "--reply-to", "not an address"), ("--body", str(tmp_path / "missing.json"))):
        result = cli("campaigns", "configure", made["id"], *args)
        assert result.exit_code == 2 and result.stderr.strip(), args
    (tmp_path / "list.json").write_text("[1]")
    assert cli("campaigns", "configure", made["id"], "--body", str(tmp_path / "list.json")).exit_code == 2
    assert cli_json("campaigns", "show", made["id"])["variants"][0]["subject"] is None  # nothing written


def test_html_set_and_show(cli: Any, cli_json: Any, client: Any, auth: dict[str, str], conn: Any, ws: int,
                           tmp_path: Path) -> None:
    made = cli_json("campaigns", "create", "--name", "One")
    page = tmp_path / "email.html"
    page.write_text("<p onclick='x()'>Hello {{contact.nick}}</p><script>bad()</script>", encoding="utf-8")
    out = cli_json("campaigns", "html", "set", made["id"], "a", str(page))
    assert out["template_type"] == "CODE" and "<script" not in out["body_html"]
    assert out["warnings"] == [variant_html.UNKNOWN_TAG_WARNING.format(tag="{{contact.nick}}")]
    shown = cli_json("campaigns", "html", "show", made["id"], "A")
    assert shown == client.get(f"/v1/campaigns/{made['id']}/variants/A/html", headers=auth).json()["data"]
    raw = cli("campaigns", "html", "show", made["id"], "A")
    assert raw.exit_code == 0 and raw.stdout == shown["body_html"] + "\n"
    human = cli("campaigns", "html", "set", made["id"], "A", "-", input="<p>From stdin</p>")
    assert human.exit_code == 0 and "cleaned HTML stored" in human.stdout
    assert "From stdin" in cli_json("campaigns", "html", "show", made["id"], "A")["body_html"]
    template_id = f.code_template(conn, ws, "<p>From a template</p>")["id"]
    out = cli_json("campaigns", "html", "set", made["id"], "A", "--template", str(template_id))
    assert "From a template" in out["body_html"]


def test_html_errors(cli: Any, cli_json: Any, ws: int, tmp_path: Path) -> None:
    made = cli_json("campaigns", "create", "--name", "One")
    empty = tmp_path / "empty.html"
    empty.write_text("  ")
    result = cli("campaigns", "html", "set", made["id"], "A", str(empty))
    assert result.exit_code == 1 and result.stderr.strip() == variant_html.HTML_REQUIRED
    result = cli("campaigns", "html", "set", made["id"], "C", str(empty))
    assert result.exit_code == 1 and result.stderr.strip() == campaigns.VARIANT_TYPE_INVALID
    result = cli("campaigns", "html", "show", made["id"], "B")
    assert result.exit_code == 1 and result.stderr.strip() == campaigns.VARIANT_NOT_FOUND
    assert cli("campaigns", "html", "set", made["id"], "A", str(tmp_path / "missing.html")).exit_code == 2
    assert cli("campaigns", "html", "set", made["id"], "A").exit_code == 2
    bad = tmp_path / "latin1.html"
    bad.write_bytes(b"<p>caf\xe9</p>")
    assert cli("campaigns", "html", "set", made["id"], "A", str(bad)).exit_code == 2


def test_send_a_test_email_to_the_outbox_and_smtp(cli: Any, conn: Any, ws: int, tmp_path: Path) -> None:
    ready = f.ready_campaign(conn, ws, subject="Hi {{contact.first_name|you}}")
    result = cli("campaigns", "test", ready["id"], "--variant", "a", "--to", "me@example.org", "--json")
    assert result.exit_code == 0
    # Written to a file, and said so: not "sent to me@example.org".
    assert json.loads(result.stdout) == (f"A test email of variant A for me@example.org was written to the outbox "
                                         f"at {tmp_path / 'outbox'}: nothing was sent.")
    assert len(list((tmp_path / "outbox").glob("*.eml"))) == 1
    with SmtpServer(tls_dir=tmp_path, users={"u": "p"}) as server:
        result = cli("campaigns", "test", ready["id"], "--variant", "A", "--to", "you@example.org",
                     "--smtp-url", server.url)
    assert result.exit_code == 0 and result.stdout.strip() == "A test email of variant A was sent to you@example.org."
    assert server.messages[0].message["Subject"] == "Hi you" and server.logins == ["u"]


def test_test_email_errors(cli: Any, conn: Any, ws: int) -> None:
    made = f.campaign(conn, ws)
    result = cli("campaigns", "test", made["id"], "--variant", "A", "--to", "me@example.org")
    assert result.exit_code == 1 and result.stderr.strip() == test_emails.NO_SENDER
    result = cli("campaigns", "test", made["id"], "--variant", "A", "--to", "nope")
    assert result.exit_code == 1 and result.stderr.splitlines() == [
        test_emails.RECIPIENT_INVALID, "'nope' is not a valid email address: An email address must have an @-sign."]
    result = cli("campaigns", "test", made["id"], "--variant", "A", "--to", "a@example.org", "--smtp-url", "http://x")
    assert result.exit_code == 2 and "--smtp-url" in result.stderr
