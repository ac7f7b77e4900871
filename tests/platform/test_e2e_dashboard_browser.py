"""The dashboard as a person sees it: a real `mkt serve`, Debian's headless Chromium, a sign-in
typed into the form, and every figure on the pages compared with the API's answer.

Chromium is driven over the DevTools protocol (`--remote-debugging-port`, a small client
over the `websockets` package that uvicorn[standard] brings): the key is typed into the
sign-in form and sent with Enter, as a person would; the pages are then read from the DOM
that Chromium built, under the page's own Content-Security-Policy (a CSP violation, a
stylesheet that did not apply or a script would show here), and photographed at 1280x900.

The screenshots in docs/ come from this test:

    MKT_SCREENSHOTS=docs python3 -m pytest tests/platform/test_e2e_dashboard_browser.py

Without Chromium the test is skipped, unless MKT_REQUIRE_BROWSER=1 (CI), where it fails.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import struct
import subprocess
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from marketing_cli.kernel.money import cents
from tests import factories
from tests.conftest import Server, free_port

WIDTH, HEIGHT = 1280, 900
CDP_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-extensions", "--hide-scrollbars", "--force-device-scale-factor=1", "--lang=en-US",
             f"--window-size={WIDTH},{HEIGHT}")


def chromium() -> str:
    """Debian's Chromium, as tests/platform/test_e2e_docs_browser.py finds it (test modules
    import no other test module): skip without it, fail when MKT_REQUIRE_BROWSER=1."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("MKT_REQUIRE_BROWSER") == "1":
            pytest.fail("MKT_REQUIRE_BROWSER=1 but no chromium on PATH (apt-get install -y chromium)")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    return found


class Tab:
    """One page of a Chromium started with --remote-debugging-port: send(method, **params) -> result."""

    def __init__(self, browser: str, profile: Path) -> None:
        from websockets.sync.client import connect

        port = free_port()
        self.proc = subprocess.Popen([browser, *CDP_FLAGS, f"--remote-debugging-port={port}",
                                      f"--user-data-dir={profile}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline, target = time.monotonic() + 60, None
        while target is None:
            assert self.proc.poll() is None, "chromium exited"
            assert time.monotonic() < deadline, "chromium's DevTools port never answered"
            try:
                pages = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=2).json()
                target = next((p for p in pages if p["type"] == "page"), None)
            except httpx.HTTPError:
                pass
            if target is None:
                time.sleep(0.2)
        # entered as a context manager: websockets 17 warns about a bare connect()
        self.ws = connect(target["webSocketDebuggerUrl"], max_size=64 * 1024 * 1024, open_timeout=30).__enter__()
        self.events: list[dict[str, Any]] = []
        self._id = 0

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=90))
            if message.get("id") == self._id:
                assert "error" not in message, (method, message["error"])
                return message["result"]
            self.events.append(message)

    def value(self, expression: str) -> Any:
        """A JavaScript expression's value, evaluated by DevTools (the page itself runs no script)."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    def wait_for(self, path: str) -> None:
        """Until the page at `path` (and its stylesheet) finished loading."""
        deadline = time.monotonic() + 60
        while self.value("location.pathname + location.search + ' ' + document.readyState") != f"{path} complete":
            assert time.monotonic() < deadline, self.value("location.href + ' ' + document.body.innerText")
            time.sleep(0.1)

    def goto(self, url: str, path: str) -> None:
        self.send("Page.navigate", url=url)
        self.wait_for(path)

    def screenshot(self, path: Path) -> None:
        data = base64.b64decode(self.send("Page.captureScreenshot", format="png")["data"])
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", data[16:24]) == (WIDTH, HEIGHT)
        path.write_bytes(data)

    def close(self) -> None:
        self.ws.close()
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


ROWS = """[...document.querySelectorAll('tr.campaign')].map(tr => [tr.dataset.campaign,
  Object.fromEntries([...tr.querySelectorAll('[data-stat]')].map(td => [td.dataset.stat, td.textContent]))])"""
CARDS = """Object.fromEntries([...document.querySelectorAll('.card [data-stat]')].map(e => [e.dataset.stat, e.textContent]))"""
REPORT = """({
  steps: [...document.querySelectorAll('rect.step')].map(r => +r.dataset.count),
  series: [...document.querySelectorAll('svg.timeline')].map(g => [g.dataset.series, +g.dataset.buckets,
           g.querySelectorAll('rect.bar').length]),
  inked: [...document.querySelectorAll('svg.timeline rect.bar')].filter(r => r.getBBox().height >= 2).length,
  maxima: [...document.querySelectorAll('svg.timeline text')].map(t => t.textContent).filter(t => t.startsWith('max ')),
  tables: [...document.querySelectorAll('main table')].map(t => [...t.rows].map(r => [...r.cells].map(c => c.textContent))),
  styled: getComputedStyle(document.querySelector('header.bar')).display,
})"""


def n(value: int) -> str:
    return f"{value:,}"


def world(db: Any) -> dict[str, Any]:
    """A workspace with a sent email campaign (opens and clicks at known hours, over 100 hours)
    and a sent SMS campaign, built through the services as the timeline tests build them."""
    from marketing_cli.services.account import workspaces
    from marketing_cli.storage.db import connect

    conn = connect(db)
    try:
        created = workspaces.create_workspace(conn, "Acme Outdoor")
        wid = created["workspace"]["id"]
        sms_id = factories.sms_timeline_world(conn, wid, factories.timeline_start(30), name="Weekend SMS offer")
        email = factories.email_timeline_world(conn, wid, factories.timeline_start(100), name="Spring sale")
        return {"key": created["api_key"], "email": email["id"], "sms": sms_id}
    finally:
        conn.close()


def test_the_dashboard_in_chromium_shows_the_apis_numbers(tmp_path: Path, new_db: Callable[..., Any]) -> None:
    browser = chromium()
    db = new_db()
    data = world(db)
    shots = Path(os.environ.get("MKT_SCREENSHOTS") or tmp_path)
    server = Server(db)
    api = httpx.Client(base_url=server.base, headers={"Authorization": f"Bearer {data['key']}"}, timeout=30)
    tab = None
    try:
        campaign = api.get(f"/v1/campaigns/{data['email']}").json()["data"]
        stats = api.get(f"/v1/campaigns/{data['email']}/statistics").json()["data"]
        timeline = api.get(f"/v1/campaigns/{data['email']}/timeline").json()["data"]
        sms = api.get(f"/v1/sms-campaigns/{data['sms']}").json()["data"]["statistics"]
        sms_cost = api.get(f"/v1/sms-campaigns/{data['sms']}/statistics").json()["data"]["total_cost"]

        tab = Tab(browser, tmp_path / "profile")
        for domain in ("Page", "Runtime", "Log", "Network"):
            tab.send(f"{domain}.enable")
        tab.send("Emulation.setDeviceMetricsOverride", width=WIDTH, height=HEIGHT, deviceScaleFactor=1, mobile=False)

        # A person opens the server's address, lands on the sign-in form, types the key, presses Enter.
        tab.goto(server.base + "/", "/dashboard/sign-in")
        tab.value("document.getElementById('api_key').focus()")
        tab.send("Input.insertText", text=data["key"])
        for kind in ("keyDown", "keyUp"):
            tab.send("Input.dispatchKeyEvent", type=kind, key="Enter", code="Enter", windowsVirtualKeyCode=13,
                     **({"text": "\r"} if kind == "keyDown" else {}))
        tab.wait_for("/dashboard/")
        [cookie] = tab.send("Network.getCookies", urls=[server.base + "/dashboard/"])["cookies"]
        assert (cookie["httpOnly"], cookie["sameSite"], cookie["path"], cookie["session"]) == (
            True, "Strict", "/dashboard", True)
        assert tab.value("document.cookie") == ""  # HttpOnly: no script on the page could read it

        # The campaigns page: each figure is the API's.
        assert tab.value(REPORT.replace("main table", "nothing"))["styled"] == "flex"  # dashboard.css applied
        rows = dict(tab.value(ROWS))
        assert set(rows) == {data["email"], data["sms"]}
        # sent and completed: no next occurrence, nothing still to come (services/estimates)
        assert rows[data["email"]] == {"sent": n(campaign["progress"]["sent"]), "scheduled_at": "-", "estimate": "-",
                                       **{k: n(stats["aggregate"][k]) for k in ("delivered", "opened", "clicked",
                                                                                "bounced", "unsubscribed")}}
        assert rows[data["sms"]] == {**{k: n(sms[k]) for k in ("sent", "delivered", "failed", "clicked",
                                                               "unsubscribed")}, "total_cost": cents(sms_cost),
                                 "scheduled_at": "-", "estimate": "-"}
        cards = tab.value(CARDS)  # people read cents; the API's figures keep every digit
        assert cards["spent"] == cents(sms_cost) and cards["reserved"] == "0.00"
        assert cards["balance"] == cents(Decimal(50) - Decimal(sms_cost))  # sms_ready's top-up less the cost
        tab.screenshot(shots / "dashboard-campaigns.png")

        # One campaign's report, reached by its link.
        tab.value(f"document.querySelector('a[href=\"/dashboard/campaigns/{data['email']}\"]').click()")
        tab.wait_for(f"/dashboard/campaigns/{data['email']}")
        page = tab.value(REPORT)
        agg = stats["aggregate"]
        assert page["steps"] == [campaign["progress"]["sent"], agg["delivered"], agg["opened"], agg["clicked"]]
        hours, days = len(timeline["hours"]), len(timeline["days"])
        assert (hours, days) == (72, 2)
        # the chart: the 98 hours from the start to the click at 97 h, a bar per hour with events
        # (first opens in 2 hours, clicks in 2, the unsubscribe in 1), each drawn
        assert page["series"] == [["First opens", 98, 2], ["Clicks", 98, 2], ["Unsubscribes", 98, 1]]
        assert page["inked"] == 5
        maxima = [max(b[key] for b in (*timeline["hours"], *timeline["days"]))  # no hour or day holds more
                  for key in ("unique_opens", "total_clicks", "unsubscribed")]
        assert page["maxima"] == [f"max {m:,}" for m in maxima]
        tables = {tuple(t[0]): t[1:] for t in page["tables"]}
        assert tables[("", "count", "share")][:3] == [
            [label, n(agg[key]), f"{agg[key] * 100 / agg['delivered']:.1f}%"]
            for label, key in (("Bounced", "bounced"), ("Unsubscribed", "unsubscribed"), ("Complained", "complained"))]
        names = list(timeline["totals"])
        assert tables[("start", *names)][-1] == ["total", *(n(timeline["totals"][k]) for k in names)]
        assert tables[("URL", "clicks", "unique")] == [[x["url"], n(x["total_clicks"]), n(x["unique_clicks"])]
                                                       for x in stats["link_activity"]]
        tab.screenshot(shots / "dashboard-report.png")

        # Signing out, with the bar's button.
        tab.value("document.querySelector('form[action=\"/dashboard/sign-out\"] button').click()")
        tab.wait_for("/dashboard/sign-in")
        assert tab.send("Network.getCookies", urls=[server.base + "/dashboard/"])["cookies"] == []
        tab.goto(server.base + f"/dashboard/campaigns/{data['email']}", "/dashboard/sign-in")

        problems = [e["params"]["entry"]["text"] for e in tab.events if e["method"] == "Log.entryAdded"
                    and e["params"]["entry"]["level"] in ("error", "warning")]
        assert problems == []  # no CSP violation, no failed load
    finally:
        api.close()
        if tab is not None:
            tab.close()
        log = server.output()
        assert server.stop() == 0
    assert data["key"] not in log and data["key"][4:16] not in log  # in no URL the server saw
    assert " 404 " not in log and " 403 " not in log
    assert '"POST /dashboard/sign-in HTTP/1.1" 303' in log and '"GET /dashboard/dashboard.css HTTP/1.1" 200' in log
