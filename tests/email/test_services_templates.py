"""Templates service: every Create Template message, the three code formats, ZIP and URL safety."""

from __future__ import annotations

import base64
import io
import os
import zipfile
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.kernel import outbound
from marketing_cli.services.email import template_url, template_zip, templates
from tests import factories

B64 = base64.b64encode(b"<p>Hello {{contact.first_name}}</p>").decode("ascii")


def create(conn: Any, ws: int, body: Any) -> dict[str, Any]:
    return templates.create_template(conn, ws, body)


def fails(conn: Any, ws: int, body: Any) -> tuple[int, str]:
    with pytest.raises(MktError) as caught:
        templates.create_template(conn, ws, body)
    return caught.value.status, caught.value.message


def code(fmt: str, **extra: Any) -> dict[str, Any]:
    return {"name": "T", "type": "code", "import_format": fmt, **extra}


def count(conn: Any) -> int:
    return conn.execute("SELECT COUNT(*) FROM templates").fetchone()[0]


# --- the specification's messages -------------------------------------------------------------

@pytest.mark.parametrize("body, message", [
    ([], "Invalid request body."),
    ("name", "Invalid request body."),
    ({"type": "editor"}, "Please provide a name for this template."),
    ({"name": "", "type": "editor"}, "Please provide a name for this template."),
    ({"name": " \t\n", "type": "editor"}, "Please provide a name for this template."),
    ({"name": "x" * 256, "type": "editor"}, "Template name must not exceed 255 characters."),
    ({"name": 5, "type": "editor"}, "The member 'name' must be a string."),
    ({"name": "T"}, "You must provide a valid template type. Must be 'editor' or 'code'."),
    ({"name": "T", "type": "html"}, "You must provide a valid template type. Must be 'editor' or 'code'."),
    ({"name": "T", "type": 1}, "You must provide a valid template type. Must be 'editor' or 'code'."),
    ({"name": "T", "type": "code"}, "The import format is required for coded templates. Must be 'html', 'zip', or 'url'."),
    (code("pdf"), "Please provide a valid import format. Must be 'html', 'zip', or 'url'."),
    (code(["html"]), "Please provide a valid import format. Must be 'html', 'zip', or 'url'."),
    (code("html"), "Please provide the content_base64 field for HTML and ZIP coded templates."),
    (code("zip", content_base64=""), "Please provide the content_base64 field for HTML and ZIP coded templates."),
    (code("html", content_base64="not base64!"), "We were unable to decode the base64 content."),
    (code("html", content_base64="PHA+"[:3]), "We were unable to decode the base64 content."),
    (code("html", content_base64="PHA-Pg__"), "We were unable to decode the base64 content."),
    (code("zip", content_base64="é"), "We were unable to decode the base64 content."),
    (code("html", content_base64=12), "We were unable to decode the base64 content."),
    (code("url"), "The url field is required for URL-based coded templates."),
    (code("url", url=""), "The url field is required for URL-based coded templates."),
    (code("url", url="ftp://example.com/t.html"), "The url must start with http:// or https://"),
    (code("url", url="javascript:alert(1)"), "The url must start with http:// or https://"),
    (code("url", url="example.com/t.html"), "The url must start with http:// or https://"),
    (code("url", url=["http://example.com"]), "The url must start with http:// or https://"),
    ({"name": "T", "type": "editor", "body_json": "{}"}, "The member 'body_json' must be an object."),
])
def test_create_template_messages(conn, workspace, body, message) -> None:
    assert fails(conn, workspace["id"], body) == (400, message)
    assert count(conn) == 0


def test_name_of_255_characters_is_accepted_and_trimmed(conn, workspace) -> None:
    created = create(conn, workspace["id"], {"name": "  " + "n" * 255 + " ", "type": "editor"})
    assert created["name"] == "n" * 255


def test_storage_failure_is_the_specification_500(conn, workspace, engine) -> None:
    if engine == "postgresql":
        conn.execute("CREATE FUNCTION fail_store() RETURNS trigger LANGUAGE plpgsql AS"
                     " $$ BEGIN RAISE EXCEPTION 'disk is full'; END $$")
        conn.execute("CREATE TRIGGER fail_store BEFORE INSERT ON template_assets FOR EACH ROW"
                     " EXECUTE FUNCTION fail_store()")
    else:
        conn.execute("CREATE TRIGGER fail_store BEFORE INSERT ON template_assets "
                     "BEGIN SELECT RAISE(ABORT, 'disk is full'); END")
    archive = factories.zip_bytes({"index.html": "<p>x</p>", "logo.png": b"\x89PNG"})
    status, message = fails(conn, workspace["id"], code("zip", content_base64=base64.b64encode(archive).decode()))
    assert (status, message) == (500, "We had an internal issue while processing your template.")
    assert count(conn) == 0  # the template row went with the failed asset


# --- editor and html --------------------------------------------------------------------------

def test_editor_template_is_an_empty_document(conn, workspace) -> None:
    created = create(conn, workspace["id"], {"name": "Blank", "type": "EDITOR"})
    assert created["type"] == "EDITOR" and created["body_json"] == {} and created["body_html"] is None
    assert created["import_format"] is None and created["size"] == 2 and created["assets"] == []
    assert created["created_at"].endswith("Z") and created["created_at"] == created["updated_at"]


def test_editor_template_keeps_a_given_document(conn, workspace) -> None:
    document = {"rows": [{"columns": [{"blocks": [{"type": "text", "text": "Hi {{contact.first_name}}"}]}]}]}
    created = create(conn, workspace["id"], {"name": "Doc", "type": "editor", "body_json": document})
    assert created["body_json"] == document
    assert templates.get_template(conn, workspace["id"], created["id"])["body_json"] == document


def test_html_template_is_stored_as_uploaded(conn, workspace) -> None:
    html = '<html><body><p>Hé {{contact.first_name}}</p><script>track()</script></body></html>'
    created = factories.code_template(conn, workspace["id"], html, name="Raw")
    assert created["type"] == "CODE" and created["import_format"] == "html"
    assert created["body_html"] == html and created["size"] == len(html.encode("utf-8"))
    assert created["body_json"] is None and created["entry_file"] is None and created["source_url"] is None
    assert templates.template_html(conn, workspace["id"], created["id"]) == html


def test_html_base64_may_be_wrapped_and_a_bom_is_dropped(conn, workspace) -> None:
    encoded = base64.encodebytes("\ufeff<p>wrapped</p>".encode("utf-8") * 20).decode("ascii")
    assert "\n" in encoded
    created = create(conn, workspace["id"], code("HTML", content_base64=encoded))
    assert created["body_html"].startswith("<p>wrapped</p>")


@pytest.mark.parametrize("content, message", [
    ("<p>caf\xe9</p>".encode("latin-1"), "The template HTML must be UTF-8 text."),
    (b"  \n ", "The template HTML is empty."),
])
def test_html_content_must_be_utf8_text(conn, workspace, content, message) -> None:
    assert fails(conn, workspace["id"], code("html", content_base64=base64.b64encode(content).decode())) == (400, message)


def test_html_over_the_limit_is_refused(conn, workspace, monkeypatch) -> None:
    monkeypatch.setattr(template_zip, "MAX_HTML_BYTES", 100)
    body = code("html", content_base64=base64.b64encode(b"<p>" + b"x" * 100 + b"</p>").decode())
    assert fails(conn, workspace["id"], body) == (400, "The template HTML is larger than 5 MiB.")


# --- reading ----------------------------------------------------------------------------------

def test_list_get_and_not_found(conn, workspace) -> None:
    ws = workspace["id"]
    first = factories.code_template(conn, ws, "<p>one</p>", name="One")
    second = create(conn, ws, {"name": "Two", "type": "editor"})
    listed = templates.list_templates(conn, ws)
    assert [t["id"] for t in listed] == [first["id"], second["id"]]
    assert set(listed[0]) == {"id", "name", "type", "import_format", "size", "asset_count", "created_at", "updated_at"}
    assert templates.get_template(conn, ws, str(first["id"])) == first
    other = factories.workspace(conn, "Other workspace")
    assert templates.list_templates(conn, other["id"]) == []
    for bad in (first["id"], "abc", 0, -1, "9999"):
        with pytest.raises(MktError) as caught:
            templates.get_template(conn, other["id"], bad)
        assert (caught.value.status, caught.value.message) == (404, "We could not find the template you are looking for.")


def test_template_html_of_an_editor_template(conn, workspace) -> None:
    created = create(conn, workspace["id"], {"name": "Doc", "type": "editor"})
    with pytest.raises(MktError) as caught:
        templates.template_html(conn, workspace["id"], created["id"])
    assert caught.value.status == 400
    assert caught.value.message == f"Template {created['id']} is an editor template: it has no HTML."
    with pytest.raises(MktError) as caught:
        templates.template_html(conn, workspace["id"], 777)
    assert caught.value.status == 404


# --- ZIP --------------------------------------------------------------------------------------

def zip_body(files: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return code("zip", content_base64=base64.b64encode(factories.zip_bytes(files, **kw)).decode())


def test_multi_file_zip_in_a_top_folder(conn, workspace) -> None:
    index = '<html><head><link rel="stylesheet" href="css/style.css"></head><body><img src="images/logo.png"></body></html>'
    files = {
        "spring-sale/index.html": index,
        "spring-sale/css/style.css": "body { color: #333; }",
        "spring-sale/images/logo.png": b"\x89PNG\r\n\x1a\n" + bytes(range(256)),
        "spring-sale/about.html": "<p>about</p>",
        "__MACOSX/spring-sale/._index.html": b"junk",
        "spring-sale/.DS_Store": b"junk",
    }
    created = create(conn, workspace["id"], zip_body(files))
    assert created["import_format"] == "zip" and created["entry_file"] == "spring-sale/index.html"
    assert created["body_html"] == index
    assert created["assets"] == [
        {"path": "about.html", "content_type": "text/html", "size": 12},
        {"path": "css/style.css", "content_type": "text/css", "size": 21},
        {"path": "images/logo.png", "content_type": "image/png", "size": 264},
    ]
    assert templates.template_asset(conn, workspace["id"], created["id"], "images/logo.png") == (
        "image/png", files["spring-sale/images/logo.png"])
    assert templates.list_templates(conn, workspace["id"])[0]["asset_count"] == 3


@pytest.mark.parametrize("files, entry", [
    ({"index.html": "<p>i</p>", "page.html": "<p>p</p>"}, "index.html"),
    ({"INDEX.HTM": "<p>i</p>", "img/a.gif": b"GIF89a"}, "INDEX.HTM"),
    ({"newsletter.html": "<p>n</p>", "a.png": b"x"}, "newsletter.html"),
    ({"a/mail.html": "<p>n</p>", "b/a.png": b"x"}, "a/mail.html"),
])
def test_zip_entry_file(conn, workspace, files, entry) -> None:
    assert create(conn, workspace["id"], zip_body(files))["entry_file"] == entry


def test_zip_bomb_is_refused(conn, workspace) -> None:
    # 4 MiB of zeros deflate to about 4 KiB: a ratio of 1000 (a real bomb nests or repeats this)
    body = zip_body({"index.html": "<p>x</p>", "bomb.css": b"\0" * (4 * 1024 * 1024)})
    assert fails(conn, workspace["id"], body) == (
        400, "The ZIP archive member 'bomb.css' expands more than 100 times its compressed size.")


def test_zip_expanding_past_the_total_limit_is_refused(conn, workspace, monkeypatch) -> None:
    monkeypatch.setattr(template_zip, "MAX_TOTAL_BYTES", 1000)
    body = zip_body({"index.html": "<p>x</p>", "a.bin": os.urandom(600), "b.bin": os.urandom(600)})
    assert fails(conn, workspace["id"], body) == (400, "The ZIP archive expands to more than 25 MiB.")


def test_zip_headers_that_lie_about_sizes_do_not_help(conn, workspace, monkeypatch) -> None:
    """The sizes are counted while reading: a member that declares 10 bytes and holds more fails."""
    monkeypatch.setattr(template_zip, "MAX_TOTAL_BYTES", 1000)
    data = bytearray(factories.zip_bytes({"index.html": "<p>" + "x" * 5000 + "</p>"}))
    for offset in range(len(data) - 4):  # patch the uncompressed size in the central directory
        if data[offset:offset + 4] == b"PK\x01\x02":
            data[offset + 24:offset + 28] = (10).to_bytes(4, "little")
    body = code("zip", content_base64=base64.b64encode(bytes(data)).decode())
    status, message = fails(conn, workspace["id"], body)
    assert status == 400 and message in ("The ZIP archive expands to more than 25 MiB.",
                                         "The content is not a valid ZIP archive.")


@pytest.mark.parametrize("name", ["../evil.html", "a/../../evil.html", "/etc/cron.d/evil", "C:/evil.html",
                                  "..\\evil.html", "a\\..\\..\\evil.html"])
def test_zip_path_traversal_is_refused(conn, workspace, name) -> None:
    body = zip_body({"index.html": "<p>x</p>", name: "<p>evil</p>"})
    assert fails(conn, workspace["id"], body) == (400, f"The ZIP archive member '{name}' has an unsafe path.")


def test_zip_symlink_is_refused(conn, workspace) -> None:
    body = zip_body({"index.html": "<p>x</p>", "passwd": "/etc/passwd"}, symlinks=("passwd",))
    assert fails(conn, workspace["id"], body) == (400, "The ZIP archive member 'passwd' is a link; links are not allowed.")


def test_zip_encrypted_member_is_refused(conn, workspace) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("index.html", "<p>x</p>")
    data = bytearray(buffer.getvalue())
    for signature, flag_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = data.find(signature)
        data[at + flag_at] |= 0x1
    body = code("zip", content_base64=base64.b64encode(bytes(data)).decode())
    assert fails(conn, workspace["id"], body) == (400, "The ZIP archive member 'index.html' is encrypted.")


def test_zip_with_too_many_files_is_refused(conn, workspace, monkeypatch) -> None:
    monkeypatch.setattr(template_zip, "MAX_FILES", 3)
    body = zip_body({"index.html": "<p>x</p>", **{f"img/{i}.gif": b"GIF" for i in range(3)}})
    assert fails(conn, workspace["id"], body) == (400, "The ZIP archive holds more than 500 files.")


def test_zip_larger_than_the_limit_is_refused(conn, workspace, monkeypatch) -> None:
    monkeypatch.setattr(template_zip, "MAX_ARCHIVE_BYTES", 1000)
    body = zip_body({"index.html": "<p>x</p>", "noise.bin": os.urandom(1000)})
    assert fails(conn, workspace["id"], body) == (400, "The ZIP archive is larger than 10 MiB.")


@pytest.mark.parametrize("files, message", [
    ({"a.png": b"x", "b.css": "p{}"}, "The ZIP archive has no HTML file: add an index.html."),
    ({"a.html": "<p>a</p>", "b.html": "<p>b</p>"},
     "The ZIP archive has several HTML files and no index.html: name the entry file index.html."),
    ({"index.html": b"\xff\xfe<\x00p\x00>\x00"}, "The template HTML must be UTF-8 text."),
    ({}, "The ZIP archive has no HTML file: add an index.html."),
])
def test_zip_without_a_usable_entry_file(conn, workspace, files, message) -> None:
    assert fails(conn, workspace["id"], zip_body(files)) == (400, message)


def test_not_a_zip(conn, workspace) -> None:
    body = code("zip", content_base64=base64.b64encode(b"<p>I am HTML</p>").decode())
    assert fails(conn, workspace["id"], body) == (400, "The content is not a valid ZIP archive.")


# --- URL --------------------------------------------------------------------------------------

PAGE = b"<html><body><p>Fetched {{contact.first_name}}</p></body></html>"


@pytest.fixture(scope="module")
def pages() -> Any:
    html = {"Content-Type": "text/html; charset=utf-8"}
    routes = {
        "/page.html": (200, html, PAGE),
        "/latin1.html": (200, {"Content-Type": "text/html; charset=iso-8859-1"}, "<p>café</p>".encode("latin-1")),
        "/redirect": (302, {"Location": "/page.html"}, b""),
        "/to-ftp": (301, {"Location": "ftp://127.0.0.1/page.html"}, b""),
        "/to-file": (302, {"Location": "file:///etc/passwd"}, b""),
        "/loop": (302, {"Location": "/loop"}, b""),
        "/big": (200, html, b"x" * (template_url.MAX_BYTES + 1)),
        "/gone": (410, html, b"gone"),
        "/empty": (200, html, b""),
    }
    with factories.PageServer(routes) as server:
        yield server


@pytest.fixture
def allow_private(monkeypatch) -> None:
    monkeypatch.setenv("MKT_ALLOW_PRIVATE_URLS", "1")


def test_url_import(conn, workspace, pages, allow_private) -> None:
    created = create(conn, workspace["id"], code("url", url=pages.url("/page.html")))
    assert created["import_format"] == "url" and created["body_html"] == PAGE.decode()
    assert created["source_url"] == pages.url("/page.html")


def test_url_import_follows_an_http_redirect(conn, workspace, pages, allow_private) -> None:
    created = create(conn, workspace["id"], code("url", url=pages.url("/redirect")))
    assert created["body_html"] == PAGE.decode() and created["source_url"] == pages.url("/page.html")


def test_url_import_reads_the_declared_charset(conn, workspace, pages, allow_private) -> None:
    assert create(conn, workspace["id"], code("url", url=pages.url("/latin1.html")))["body_html"] == "<p>café</p>"


@pytest.mark.parametrize("path, message", [
    ("/to-ftp", "The url redirected to an address that does not start with http:// or https://"),
    ("/to-file", "The url redirected to an address that does not start with http:// or https://"),
    ("/loop", "The url redirected more than 5 times."),
    ("/big", "The page at the url is larger than 5 MiB."),
    ("/gone", "We could not fetch the url: the server answered 410."),
    ("/empty", "The page at the url is empty."),
])
def test_url_import_refusals(conn, workspace, pages, allow_private, path, message) -> None:
    assert fails(conn, workspace["id"], code("url", url=pages.url(path))) == (400, message)
    assert count(conn) == 0


def test_private_addresses_are_refused_by_default(conn, workspace, pages, monkeypatch) -> None:
    monkeypatch.delenv("MKT_ALLOW_PRIVATE_URLS", raising=False)
    private = "The url points to a private, loopback or reserved network address, which is not allowed."
    for url in (pages.url("/page.html"), pages.url("/page.html").replace("127.0.0.1", "localhost"),
                "http://[::1]/", "http://10.1.2.3/", "http://169.254.169.254/latest/meta-data/",
                "https://192.168.0.1/", "http://0.0.0.0/", "HTTP://100.64.0.1/"):
        assert fails(conn, workspace["id"], code("url", url=url)) == (400, private), url


def test_a_redirect_to_a_private_address_is_checked_again(conn, workspace, monkeypatch) -> None:
    """The first hop is allowed (as if public), the redirect's target is not."""
    checked = []

    def resolve(host: str, port: int) -> str:
        checked.append(host)
        if len(checked) == 1:
            return "127.0.0.1"
        raise MktError(400, template_url.PRIVATE)

    monkeypatch.setattr(outbound, "resolve", resolve)
    routes = {"/": (302, {"Location": "http://internal.example/admin"}, b"")}
    with factories.PageServer(routes) as server:
        assert fails(conn, workspace["id"], code("url", url=server.url("/")))[1] == template_url.PRIVATE
    assert checked == ["127.0.0.1", "internal.example"]


@pytest.mark.parametrize("address, public", [
    ("8.8.8.8", True), ("2606:4700:4700::1111", True), ("127.0.0.1", False), ("::1", False),
    ("10.0.0.1", False), ("172.16.5.4", False), ("192.168.1.1", False), ("169.254.169.254", False),
    ("100.64.0.1", False), ("0.0.0.0", False), ("224.0.0.1", False), ("240.0.0.1", False),
    ("::ffff:127.0.0.1", False), ("fe80::1%eth0", False), ("fc00::1", False),
])
def test_which_addresses_are_public(address, public) -> None:
    assert outbound.is_public(address) is public


def test_unknown_host_and_refused_connection(conn, workspace, allow_private) -> None:
    assert fails(conn, workspace["id"], code("url", url="http:///path")) == (
        400, "We could not fetch the url: the url has no host name.")
    for url in ("http://a:b/", "http://example.com:99999/", "http://\x00/"):
        assert fails(conn, workspace["id"], code("url", url=url)) == (
            400, "We could not fetch the url: the url is not valid."), url
    assert fails(conn, workspace["id"], code("url", url="http://no-such-host.invalid/")) == (
        400, "We could not find the host of the url: no-such-host.invalid.")
    with factories.PageServer({}) as server:
        url = server.url("/")
    assert fails(conn, workspace["id"], code("url", url=url)) == (
        400, "We could not fetch the url: the connection to its server failed.")


def test_https_goes_to_the_checked_address_with_the_host_name_for_tls(conn, workspace, allow_private, monkeypatch,
                                                                     tmp_path) -> None:
    """https://localhost:PORT/ is requested from 127.0.0.1 (the address that was checked) while
    the TLS server name and the certificate check use `localhost`."""
    import datetime
    import http.server
    import ssl
    import threading

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    (tmp_path / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                         serialization.PrivateFormat.PKCS8,
                                                         serialization.NoEncryption()))
    seen: dict[str, str] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            seen["host"] = self.headers["Host"]
            body = b"<p>over TLS</p>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    server.socket = server_context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    client_context = ssl.create_default_context(cafile=str(tmp_path / "cert.pem"))
    monkeypatch.setattr(outbound, "tls", lambda: client_context)
    resolved: list[str] = []
    real_resolve = outbound.resolve
    monkeypatch.setattr(outbound, "resolve", lambda host, port: resolved.append(host) or real_resolve(host, port))
    try:
        port = server.server_address[1]
        created = create(conn, workspace["id"], code("url", url=f"https://localhost:{port}/t.html"))
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert created["body_html"] == "<p>over TLS</p>" and created["source_url"] == f"https://localhost:{port}/t.html"
    assert resolved == ["localhost"] and seen["host"] == f"localhost:{port}"


def test_a_fallback_that_would_not_stand_is_refused_on_upload(conn, workspace) -> None:
    html = b'<p style="color: {{contact.color|red;behavior:url(x.htc)}}">Hi</p>'
    status, message = fails(conn, workspace["id"], code("html", content_base64=base64.b64encode(html).decode()))
    assert status == 400 and message.startswith("The fallback of {{contact.color}} cannot stand where it is written: ")
    assert count(conn) == 0
