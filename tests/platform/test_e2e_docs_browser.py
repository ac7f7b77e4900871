"""`/docs` in a real headless browser: the vendored Redoc renders the document `mkt serve` serves.

Debian's Chromium loads the page from a real `mkt serve`, runs its scripts (Redoc fetches
/v1/openapi.json and renders it) and dumps the resulting DOM. Without Chromium the test is
skipped, unless MKT_REQUIRE_BROWSER=1 (CI's .ci/run sets it and installs Chromium first),
where a missing browser is a failure.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from marketing_cli.api.openapi import TITLE
from tests.conftest import Server, mkt

BROWSER_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--virtual-time-budget=15000")


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("MKT_REQUIRE_BROWSER") == "1":
            pytest.fail("MKT_REQUIRE_BROWSER=1 but no chromium on PATH (apt-get install -y chromium)")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    return found


def rendered_dom(browser: str, url: str, profile: Path) -> str:
    """The DOM after the page's scripts ran, as Chromium dumps it."""
    done = subprocess.run([browser, *BROWSER_FLAGS, f"--user-data-dir={profile}", "--dump-dom", url],
                          capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_docs_page_renders_every_operation_in_chromium(tmp_path: Path, new_db: Callable[..., Any]) -> None:
    browser = chromium()
    db = new_db()
    mkt(db, "init", "--name", "Docs")
    server = Server(db)
    try:
        dom = rendered_dom(browser, server.base + "/docs", tmp_path / "profile")
        log = server.output()  # before this test asks for the document itself
        document = httpx.get(server.base + "/v1/openapi.json", timeout=10).json()
    finally:
        assert server.stop() == 0
    # The page itself is a stub: everything below was written by Redoc from the served document.
    assert "redoc-wrap" in dom
    title = re.search(r"<h1[^>]*>(.*?)</h1>", dom, re.S)
    assert title is not None and html.unescape(re.sub(r"<[^>]+>", "", title.group(1))) == \
        f"{TITLE} ({document['info']['version']})"
    operations = [(op["operationId"], op["summary"]) for ops in document["paths"].values() for op in ops.values()]
    assert len(operations) > 50
    missing = [op_id for op_id, _ in operations if f'operation/{op_id}"' not in dom]
    assert missing == []
    text = html.unescape(dom)
    for summary in ("Create a contact", "Create a segment", "Schedule an SMS campaign", "Find a contact by phone number"):
        assert summary in text
    assert all(summary.strip() in text for _, summary in operations)
    assert "Something went wrong" not in dom  # Redoc's own error page
    assert '"GET /docs/redoc.standalone.js HTTP/1.1" 200' in log
    assert '"GET /v1/openapi.json HTTP/1.1" 200' in log  # fetched by the page, not by this test alone
