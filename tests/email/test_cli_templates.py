"""`mkt templates create/list/show`: the same records as /v1/templates."""

from __future__ import annotations

from pathlib import Path

from tests import factories

HTML = "<html><body><p>Hi {{contact.first_name}}</p><script>x()</script></body></html>"


def test_create_from_each_source_and_compare_with_the_api(cli_json, cli, client, auth, workspace, tmp_path,
                                                         monkeypatch) -> None:
    page = tmp_path / "welcome.html"
    page.write_text(HTML, encoding="utf-8")
    archive = tmp_path / "mail.zip"
    archive.write_bytes(factories.zip_bytes({"index.html": HTML, "css/a.css": "p{}"}))

    from_html = cli_json("templates", "create", "--name", "Welcome", "--html", str(page))
    assert from_html["import_format"] == "html" and from_html["body_html"] == HTML
    from_zip = cli_json("templates", "create", "--name", "Zipped", "--zip", str(archive))
    assert from_zip["entry_file"] == "index.html" and [a["path"] for a in from_zip["assets"]] == ["css/a.css"]
    editor = cli_json("templates", "create", "--name", "Doc", "--editor", "--body-json", '{"rows": []}')
    assert editor["type"] == "EDITOR" and editor["body_json"] == {"rows": []}
    monkeypatch.setenv("MKT_ALLOW_PRIVATE_URLS", "1")
    with factories.PageServer({"/p": (200, {"Content-Type": "text/html"}, HTML.encode())}) as server:
        from_url = cli_json("templates", "create", "--name", "Web", "--url", server.url("/p"))
    assert from_url["source_url"] == server.url("/p") and from_url["body_html"] == HTML

    listed = cli_json("templates", "list")
    assert listed == client.get("/v1/templates", headers=auth).json()["data"]
    assert [t["name"] for t in listed] == ["Welcome", "Zipped", "Doc", "Web"]
    shown = cli_json("templates", "show", str(from_zip["id"]))
    assert shown == client.get(f"/v1/templates/{from_zip['id']}", headers=auth).json()["data"] == from_zip


def test_html_from_stdin_and_show_html(cli, cli_json, workspace) -> None:
    result = cli("templates", "create", "--name", "Piped", "--html", "-", "--json", input=HTML)
    assert result.exit_code == 0, result.stderr
    shown = cli("templates", "show", "1", "--html")
    assert shown.exit_code == 0 and shown.stdout == HTML  # as uploaded: cleaning happens for a campaign


def test_human_output(cli, workspace, tmp_path) -> None:
    archive = tmp_path / "mail.zip"
    archive.write_bytes(factories.zip_bytes({"news/index.html": HTML, "news/logo.png": b"\x89PNG"}))
    created = cli("templates", "create", "--name", "News", "--zip", str(archive))
    assert created.exit_code == 0
    assert "news/index.html" in created.stdout and "logo.png (4 B)" in created.stdout
    listed = cli("templates", "list")
    assert listed.exit_code == 0 and "News" in listed.stdout and "zip" in listed.stdout


def test_usage_errors_exit_2(cli, workspace, tmp_path) -> None:
    page = tmp_path / "p.html"
    page.write_text(HTML)
    cases = [
        (("--name", "T"), "Give exactly one of --editor, --html FILE, --zip FILE or --url URL."),
        (("--name", "T", "--editor", "--html", str(page)), "Give exactly one of --editor, --html FILE, --zip FILE or --url URL."),
        (("--name", "T", "--html", str(page), "--body-json", "{}"), "--body-json goes with --editor."),
        (("--name", "T", "--editor", "--body-json", "[1]"), "--body-json must be a JSON object."),
        (("--name", "T", "--zip", str(tmp_path / "missing.zip")),
         f"--zip: cannot read {tmp_path / 'missing.zip'}: No such file or directory."),
    ]
    for args, message in cases:
        result = cli("templates", "create", *args)
        assert result.exit_code == 2 and result.stderr.strip() == message, (args, result.stderr)
    result = cli("templates", "show", "1", "--html", "--json")
    assert result.exit_code == 2 and result.stderr.strip() == "--html and --json cannot be used together."


def test_service_errors_exit_1_and_write_nothing(cli, cli_json, workspace, tmp_path: Path) -> None:
    bad = tmp_path / "bad.zip"
    bad.write_bytes(factories.zip_bytes({"index.html": "<p>x</p>", "../../etc/evil": "x"}))
    result = cli("templates", "create", "--name", "T", "--zip", str(bad))
    assert result.exit_code == 1
    assert result.stderr.strip() == "The ZIP archive member '../../etc/evil' has an unsafe path."
    result = cli("templates", "create", "--name", "T", "--url", "http://127.0.0.1:9/")
    assert result.exit_code == 1 and "private, loopback or reserved" in result.stderr
    result = cli("templates", "create", "--name", " ", "--editor")
    assert result.exit_code == 1 and result.stderr.strip() == "Please provide a name for this template."
    result = cli("templates", "show", "42")
    assert result.exit_code == 1 and result.stderr.strip() == "We could not find the template you are looking for."
    assert cli_json("templates", "list") == []


def test_asset_to_stdout_and_to_a_file(cli, workspace, tmp_path) -> None:
    archive = tmp_path / "mail.zip"
    archive.write_bytes(factories.zip_bytes({"index.html": HTML, "css/a.css": "p { color: red }"}))
    assert cli("templates", "create", "--name", "Z", "--zip", str(archive)).exit_code == 0
    result = cli("templates", "asset", "1", "css/a.css")
    assert result.exit_code == 0 and result.stdout == "p { color: red }"
    target = tmp_path / "out.css"
    assert cli("templates", "asset", "1", "css/a.css", "--output", str(target)).exit_code == 0
    assert target.read_text() == "p { color: red }"
    result = cli("templates", "asset", "1", "css/b.css")
    assert result.exit_code == 1 and result.stderr.strip() == "The template has no file named 'css/b.css'."
