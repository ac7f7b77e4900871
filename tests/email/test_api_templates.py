"""/v1/templates over HTTP: envelope A, the specification's messages, the 16 MiB body limit."""

from __future__ import annotations

import base64

import pytest

from tests import factories
from tests.conftest import error_of

HTML = "<html><body><p>Hi {{contact.first_name}}</p></body></html>"


def b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode("utf-8") if isinstance(data, str) else data).decode("ascii")


def test_create_list_and_get(client, auth) -> None:
    r = client.post("/v1/templates", json={"name": "Welcome", "type": "code", "import_format": "html",
                                           "content_base64": b64(HTML)}, headers=auth)
    assert r.status_code == 201 and r.json()["error"] is None
    created = r.json()["data"]
    assert created["name"] == "Welcome" and created["type"] == "CODE" and created["body_html"] == HTML
    r = client.post("/v1/templates", json={"name": "Blank", "type": "editor"}, headers=auth)
    assert r.status_code == 201 and r.json()["data"]["body_json"] == {}
    r = client.get("/v1/templates", headers=auth)
    assert r.status_code == 200 and r.json()["error"] is None
    assert [(t["name"], t["type"]) for t in r.json()["data"]] == [("Welcome", "CODE"), ("Blank", "EDITOR")]
    assert "body_html" not in r.json()["data"][0]
    r = client.get(f"/v1/templates/{created['id']}", headers=auth)
    assert r.status_code == 200 and r.json() == {"error": None, "data": created}


def test_zip_import_over_http(client, auth) -> None:
    archive = factories.zip_bytes({"mail/index.html": HTML, "mail/img/logo.png": b"\x89PNG"})
    r = client.post("/v1/templates", json={"name": "Zip", "type": "code", "import_format": "zip",
                                           "content_base64": b64(archive)}, headers=auth)
    assert r.status_code == 201
    data = r.json()["data"]
    assert data["entry_file"] == "mail/index.html"
    assert data["assets"] == [{"path": "img/logo.png", "content_type": "image/png", "size": 4}]


@pytest.mark.parametrize("body, message", [
    ({"type": "editor"}, "Please provide a name for this template."),
    ({"name": "y" * 256, "type": "editor"}, "Template name must not exceed 255 characters."),
    ({"name": "T", "type": "layout"}, "You must provide a valid template type. Must be 'editor' or 'code'."),
    ({"name": "T", "type": "code"}, "The import format is required for coded templates. Must be 'html', 'zip', or 'url'."),
    ({"name": "T", "type": "code", "import_format": "mjml"},
     "Please provide a valid import format. Must be 'html', 'zip', or 'url'."),
    ({"name": "T", "type": "code", "import_format": "zip"},
     "Please provide the content_base64 field for HTML and ZIP coded templates."),
    ({"name": "T", "type": "code", "import_format": "html", "content_base64": "%%%"},
     "We were unable to decode the base64 content."),
    ({"name": "T", "type": "code", "import_format": "url"}, "The url field is required for URL-based coded templates."),
    ({"name": "T", "type": "code", "import_format": "url", "url": "gopher://x"},
     "The url must start with http:// or https://"),
    ({"name": "T", "type": "code", "import_format": "url", "url": "http://127.0.0.1:9/"},
     "The url points to a private, loopback or reserved network address, which is not allowed."),
])
def test_create_messages(client, auth, body, message) -> None:
    assert error_of(client.post("/v1/templates", json=body, headers=auth)) == (400, message)


@pytest.mark.parametrize("raw", [b"{", b"", b"[1]", b'"x"', b"null"])
def test_body_that_is_not_an_object(client, auth, raw) -> None:
    r = client.post("/v1/templates", content=raw, headers={**auth, "Content-Type": "application/json"})
    assert error_of(r) == (400, "Invalid request body.")


def test_storage_failure(client, auth, conn, engine) -> None:
    if engine == "postgresql":
        conn.execute("CREATE FUNCTION fail_store() RETURNS trigger LANGUAGE plpgsql AS"
                     " $$ BEGIN RAISE EXCEPTION 'disk I/O'; END $$")
        conn.execute("CREATE TRIGGER fail_store BEFORE INSERT ON templates FOR EACH ROW EXECUTE FUNCTION fail_store()")
    else:
        conn.execute("CREATE TRIGGER fail_store BEFORE INSERT ON templates BEGIN SELECT RAISE(FAIL, 'disk I/O'); END")
    r = client.post("/v1/templates", json={"name": "T", "type": "editor"}, headers=auth)
    assert error_of(r) == (500, "We had an internal issue while processing your template.")


def test_body_limit_is_16_mib(client, auth) -> None:
    big = "<p>" + "x" * (2 * 1024 * 1024) + "</p>"  # 2.7 MiB in base64: past the default 1 MiB
    r = client.post("/v1/templates", json={"name": "Big", "type": "code", "import_format": "html",
                                           "content_base64": b64(big)}, headers=auth)
    assert r.status_code == 201 and r.json()["data"]["size"] == len(big)
    r = client.post("/v1/templates", content=b" " * (16 * 1024 * 1024 + 1), headers=auth)
    assert error_of(r) == (413, "The request body is too large: the limit is 16384 KiB.")


def test_not_found_and_auth(client, auth) -> None:
    message = "We could not find the template you are looking for."
    for path in ("/v1/templates/1", "/v1/templates/abc", "/v1/templates/0", "/v1/templates/99999999999999999999"):
        assert error_of(client.get(path, headers=auth)) == (404, message)
    assert error_of(client.get("/v1/templates")) == (401, "Please provide an API key.")
    assert error_of(client.post("/v1/templates", json={}, headers={"Authorization": "Bearer nope"})) == (
        401, "The API key you provided is invalid or has been revoked.")


def test_another_workspace_cannot_see_it(client, auth, conn) -> None:
    created = client.post("/v1/templates", json={"name": "Mine", "type": "editor"}, headers=auth).json()["data"]
    other = factories.workspace(conn, "Other workspace")
    headers = {"Authorization": f"Bearer {other['api_key']}"}
    assert client.get("/v1/templates", headers=headers).json()["data"] == []
    assert error_of(client.get(f"/v1/templates/{created['id']}", headers=headers))[0] == 404


def test_url_import_over_http(client, auth, monkeypatch) -> None:
    monkeypatch.setenv("MKT_ALLOW_PRIVATE_URLS", "1")
    with factories.PageServer({"/t.html": (200, {"Content-Type": "text/html"}, HTML.encode())}) as server:
        r = client.post("/v1/templates", json={"name": "Web", "type": "code", "import_format": "url",
                                               "url": server.url("/t.html")}, headers=auth)
    assert r.status_code == 201 and r.json()["data"]["body_html"] == HTML
    assert r.json()["data"]["source_url"] == server.url("/t.html")


def test_asset_download(client, auth) -> None:
    archive = factories.zip_bytes({"index.html": HTML, "img/logo.png": b"\x89PNG\r\n", "page two.html": "<p>2</p>"})
    created = client.post("/v1/templates", json={"name": "Zip", "type": "code", "import_format": "zip",
                                                 "content_base64": b64(archive)}, headers=auth).json()["data"]
    r = client.get(f"/v1/templates/{created['id']}/assets/img/logo.png", headers=auth)
    assert r.status_code == 200 and r.content == b"\x89PNG\r\n" and r.headers["content-type"] == "image/png"
    assert r.headers["x-content-type-options"] == "nosniff" and r.headers["content-disposition"] == "attachment"
    r = client.get(f"/v1/templates/{created['id']}/assets/page%20two.html", headers=auth)
    assert r.status_code == 200 and r.content == b"<p>2</p>"
    assert error_of(client.get(f"/v1/templates/{created['id']}/assets/index.html", headers=auth)) == (
        404, "The template has no file named 'index.html'.")
    assert error_of(client.get("/v1/templates/999/assets/img/logo.png", headers=auth)) == (
        404, "We could not find the template you are looking for.")
