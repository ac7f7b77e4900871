"""The dashboard of `mkt serve` (api/dashboard.py) through the ASGI test client: signing in and
out, the cookie's flags, the security headers of every answer, and that each figure is the API's.

The browser's view of the same pages: tests/platform/test_e2e_dashboard_browser.py. Another
workspace's key on these pages: tests/platform/test_api_cross_workspace.py.
"""

from __future__ import annotations

import re
from html import unescape
from typing import Any

import pytest
from starlette.testclient import TestClient

from marketing_cli.api import dashboard
from marketing_cli.kernel.money import cents
from tests import engines, factories

ORIGIN = {"Origin": "http://testserver"}


@pytest.fixture
def browser(app: Any) -> Any:
    """A client that keeps cookies and follows no redirect by itself, like a browser tab we drive."""
    with TestClient(app, raise_server_exceptions=False, follow_redirects=False) as client:
        yield client


def sign_in(client: Any, key: str, headers: dict[str, str] = ORIGIN) -> Any:
    return client.post("/dashboard/sign-in", data={"api_key": key}, headers=headers)


def assert_protected(response: Any) -> None:
    for name, value in dashboard.HEADERS.items():
        assert response.headers.get(name) == value, (response.request.url, name)
    csp = response.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp and "'unsafe-inline'" not in csp


def test_every_page_sends_a_stranger_to_the_sign_in_page(browser: Any, conn: Any, workspace: dict) -> None:
    campaign = factories.email_campaign(conn, workspace["id"])
    assert browser.get("/").headers["location"] == "/dashboard/"
    for path in ("/dashboard/", f"/dashboard/campaigns/{campaign['id']}", f"/dashboard/sms-campaigns/{campaign['id']}",
                 "/dashboard/nothing/here", "/dashboard/?page=2"):
        r = browser.get(path)
        assert (r.status_code, r.headers["location"]) == (303, "/dashboard/sign-in"), path
        assert_protected(r)
    r = browser.get("/dashboard/sign-in")
    assert r.status_code == 200 and 'action="/dashboard/sign-in"' in r.text and 'method="post"' in r.text
    assert "<script" not in r.text and "style=" not in r.text
    assert_protected(r)
    # A key in the Authorization header is the API's way, not the dashboard's: no cookie, no page.
    r = browser.get("/dashboard/", headers={"Authorization": f"Bearer {workspace['api_key']}"})
    assert r.status_code == 303


def test_a_wrong_key_gets_401_and_no_cookie(browser: Any, workspace: dict) -> None:
    wrong = workspace["api_key"][:-2] + "xx"
    r = sign_in(browser, wrong)
    assert r.status_code == 401 and "set-cookie" not in r.headers
    assert "The API key you provided is invalid or has been revoked." in r.text
    assert wrong not in r.text and 'type="password"' in r.text
    assert_protected(r)
    r = sign_in(browser, "   ")
    assert r.status_code == 401 and "Please provide an API key." in r.text and "set-cookie" not in r.headers
    assert browser.get("/dashboard/").status_code == 303


def test_the_right_key_is_kept_in_a_strict_httponly_cookie(browser: Any, workspace: dict) -> None:
    r = sign_in(browser, workspace["api_key"])
    assert (r.status_code, r.headers["location"]) == (303, "/dashboard/")
    assert_protected(r)
    cookie = r.headers["set-cookie"]
    flags = {part.strip().split("=")[0].lower(): part.strip() for part in cookie.split(";")[1:]}
    assert cookie.startswith(f"{dashboard.COOKIE}={workspace['api_key']};")
    assert "httponly" in flags and flags["samesite"].lower() == "samesite=strict" and flags["path"] == "Path=/dashboard"
    assert "secure" not in flags and "max-age" not in flags and "expires" not in flags  # http: a session cookie
    assert workspace["api_key"] not in r.headers["location"]
    page = browser.get("/dashboard/")
    assert page.status_code == 200 and "Test workspace" in page.text and 'action="/dashboard/sign-out"' in page.text
    assert_protected(page)


def test_over_https_the_cookie_is_secure(app: Any, workspace: dict) -> None:
    with TestClient(app, base_url="https://testserver", follow_redirects=False) as client:
        r = sign_in(client, workspace["api_key"], {"Origin": "https://testserver"})
        assert r.status_code == 303 and "; secure" in r.headers["set-cookie"].lower()


def test_forms_from_another_origin_are_refused(browser: Any, workspace: dict) -> None:
    for headers in ({}, {"Origin": "http://evil.example"}, {"Origin": "null"}, {"Origin": "https://testserver"},
                    {"Origin": "null", "Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"},
                    {"Origin": "http://evil.example", "Sec-Fetch-Site": "same-origin"}):
        r = sign_in(browser, workspace["api_key"], headers)
        assert r.status_code == 403 and "set-cookie" not in r.headers, headers
        assert_protected(r)
    # What Chromium sends from a page served with Referrer-Policy: no-referrer.
    assert sign_in(browser, workspace["api_key"], {"Origin": "null", "Sec-Fetch-Site": "same-origin"}).status_code == 303
    r = browser.post("/dashboard/sign-out", headers={"Origin": "http://evil.example"})
    assert r.status_code == 403 and "set-cookie" not in r.headers
    assert browser.get("/dashboard/").status_code == 200  # still signed in


def test_sign_out_clears_the_cookie(browser: Any, workspace: dict) -> None:
    sign_in(browser, workspace["api_key"])
    r = browser.post("/dashboard/sign-out", headers=ORIGIN)
    assert (r.status_code, r.headers["location"]) == (303, "/dashboard/sign-in")
    cookie = r.headers["set-cookie"]
    assert cookie.startswith(f'{dashboard.COOKIE}="";') and "Max-Age=0" in cookie and "Path=/dashboard" in cookie
    assert_protected(r)
    assert browser.get("/dashboard/").headers["location"] == "/dashboard/sign-in"


def test_a_revoked_key_is_signed_out_at_once(browser: Any, conn: Any, workspace: dict) -> None:
    from marketing_cli.services.account import keys

    sign_in(browser, workspace["api_key"])
    assert browser.get("/dashboard/").status_code == 200
    for key in keys.list_keys(conn, workspace["id"]):
        keys.revoke_key(conn, workspace["id"], key["id"])
    r = browser.get("/dashboard/")
    assert r.headers["location"] == "/dashboard/sign-in" and "Max-Age=0" in r.headers["set-cookie"]  # dropped
    assert dashboard.COOKIE not in browser.cookies


def _links(text: str) -> list[str]:
    return [unescape(h) for h in re.findall(r'href="([^"]+)"', text)]


def test_the_key_is_in_no_url_and_no_page_and_every_page_is_protected(browser: Any, conn: Any,
                                                                       workspace: dict) -> None:
    email = factories.email_timeline_world(conn, workspace["id"], factories.timeline_start(100))
    factories.sms_timeline_world(conn, workspace["id"], factories.timeline_start(30))
    key = workspace["api_key"]
    first = sign_in(browser, key)
    seen, todo = set(), ["/dashboard/", first.headers["location"]]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        r = browser.get(path)
        assert r.status_code == 200, path
        assert_protected(r)
        assert key not in r.text and key[4:16] not in r.text, path
        assert "<script" not in r.text and " style=" not in r.text and not re.search(r"<[^>]* on\w+=", r.text), path
        todo += [link for link in _links(r.text) if link.startswith("/dashboard") and link not in seen]
    assert all(key not in url for url in seen)
    assert f"/dashboard/campaigns/{email['id']}" in seen and any(p.startswith("/dashboard/sms-campaigns/") for p in seen)
    assert "/dashboard/dashboard.css" in seen
    css = browser.get("/dashboard/dashboard.css")
    assert css.headers["content-type"].startswith("text/css") and ".bar{" in css.text


def test_unknown_campaigns_and_pages_are_404(browser: Any, conn: Any, workspace: dict) -> None:
    sign_in(browser, workspace["api_key"])
    campaign = factories.email_campaign(conn, workspace["id"])
    for path in ("/dashboard/campaigns/0123456789abcdef01234567", "/dashboard/campaigns/nope",
                 f"/dashboard/sms-campaigns/{campaign['id']}", "/dashboard/campaigns/%20", "/dashboard/elsewhere"):
        r = browser.get(path)
        assert r.status_code == 404 and r.headers["content-type"].startswith("text/html"), path
        assert_protected(r)
    assert browser.get(f"/dashboard/campaigns/{campaign['id']}").status_code == 200  # a draft has a report too
    assert browser.get("/dashboard/?page=99999999999999999999").status_code == 200


def _stat(row: str, name: str) -> str:
    found = re.search(rf'data-stat="{name}">([^<]*)<', row)
    assert found is not None, (name, row)
    return found.group(1)


def test_every_number_is_the_apis(browser: Any, client: Any, auth: dict, conn: Any, workspace: dict) -> None:
    email = factories.email_timeline_world(conn, workspace["id"], factories.timeline_start(100), name="<b>Spring</b>")
    sms_id = factories.sms_timeline_world(conn, workspace["id"], factories.timeline_start(30))
    sign_in(browser, workspace["api_key"])
    page = browser.get("/dashboard/").text
    assert "&lt;b&gt;Spring&lt;/b&gt;" in page and "<b>Spring" not in page

    row = re.search(rf'<tr data-campaign="{email["id"]}".*?</tr>', page).group(0)
    campaign = client.get(f"/v1/campaigns/{email['id']}", headers=auth).json()["data"]
    stats = client.get(f"/v1/campaigns/{email['id']}/statistics", headers=auth).json()["data"]["aggregate"]
    assert _stat(row, "sent") == f"{campaign['progress']['sent']:,}"
    for name in ("delivered", "opened", "clicked", "bounced", "unsubscribed"):
        assert _stat(row, name) == f"{stats[name]:,}", name

    row = re.search(rf'<tr data-campaign="{sms_id}".*?</tr>', page).group(0)
    sms = client.get(f"/v1/sms-campaigns/{sms_id}", headers=auth).json()["data"]["statistics"]
    cost = client.get(f"/v1/sms-campaigns/{sms_id}/statistics", headers=auth).json()["data"]["total_cost"]
    for name in ("sent", "delivered", "failed", "clicked", "unsubscribed"):
        assert _stat(row, name) == f"{sms[name]:,}", name
    assert _stat(row, "total_cost") == cents(cost)
    assert _stat(page, "spent") == cents(cost)  # the only campaign that cost anything; shown in cents
    from marketing_cli.services.sms import ledger

    assert _stat(page, "balance") == cents(ledger.show_balance(conn, workspace["id"])["balance"])

    report = browser.get(f"/dashboard/campaigns/{email['id']}").text
    timeline = client.get(f"/v1/campaigns/{email['id']}/timeline", headers=auth).json()["data"]
    buckets = [int(n) for n in re.findall(r'class="timeline" data-series="[^"]*" data-buckets="(\d+)"', report)]
    assert buckets == [98] * 3  # the chart's hours, from the start to the click at 97 h
    assert [b["start"] for b in timeline["hours"]][0] in report  # the hourly numbers under it
    bars = [int(n) for n in re.findall(r'class="bar" data-count="(\d+)"', report)]
    assert sum(bars) == sum(timeline["totals"][k] for k in ("unique_opens", "total_clicks", "unsubscribed"))
    counts = [int(n) for n in re.findall(r'class="step" data-count="(\d+)"', report)]
    assert counts == [campaign["progress"]["sent"], stats["delivered"], stats["opened"], stats["clicked"]]


def test_browsing_changes_no_row(browser: Any, conn: Any, workspace: dict) -> None:
    factories.email_timeline_world(conn, workspace["id"], factories.timeline_start(100))
    factories.sms_timeline_world(conn, workspace["id"], factories.timeline_start(30))
    tables = [t for t in engines.tables(conn) if t != "api_keys"]

    def dump() -> dict[str, list[tuple[Any, ...]]]:
        return {t: sorted(map(tuple, conn.execute(f'SELECT * FROM "{t}"')), key=repr) for t in tables}

    before = dump()
    sign_in(browser, workspace["api_key"])
    page = browser.get("/dashboard/").text
    for link in _links(page):
        browser.get(link)
    browser.post("/dashboard/sign-out", headers=ORIGIN)
    assert dump() == before


def test_a_variants_preview_opens_in_the_dashboard_session(browser: Any, conn: Any, workspace: dict) -> None:
    """The campaign's page links each variant's thumbnail under /dashboard, where the cookie goes
    (the /v1 preview_url wants an API key the browser does not send)."""
    from marketing_cli import jobs
    from marketing_cli.services.email import variant_html

    campaign = factories.email_campaign(conn, workspace["id"])
    path = f"/dashboard/campaigns/{campaign['id']}/variants/A/preview"
    assert browser.get(path).headers["location"] == "/dashboard/sign-in"
    sign_in(browser, workspace["api_key"])
    missing = browser.get(path)
    assert missing.status_code == 404 and dashboard.NO_PREVIEW in missing.text
    variant_html.set_variant_html(conn, workspace["id"], campaign["id"], "A", {"html": "<p>Hello there</p>"})
    jobs.run_due(conn)
    page = browser.get(f"/dashboard/campaigns/{campaign['id']}")
    assert f'href="{path}"' in page.text and "Preview of variant A" in page.text
    image = browser.get(path)
    assert image.status_code == 200 and image.headers["content-type"].startswith("image/svg+xml")
    assert image.content.startswith(b"<svg") and b"Hello there" in image.content
    assert_protected(image)
    other = factories.workspace(conn)
    browser.cookies.clear()
    sign_in(browser, other["api_key"])
    assert browser.get(path).status_code == 404  # another workspace's campaign: no image
