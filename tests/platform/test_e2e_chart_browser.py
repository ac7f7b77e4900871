"""The report's timeline charts as Chromium draws them, for activity in one hour, one day and
one month: each series' bars must be on the screen and spread across the chart's width.

The report page (reports/html.py, the same body the dashboard shows) is written to a file
with everything but the timeline hidden, photographed by Debian's headless Chromium
(`--screenshot`) and the PNG read back here: the pixels of each series' colour are counted
and their horizontal extent measured. A chart drawn as one point per hour on a fixed 72-hour
axis (the old chart) left a send read within the hour with no mark at all, and a day's
activity in a third of the width. Without Chromium the test is skipped, unless
MKT_REQUIRE_BROWSER=1 (CI), where it fails.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path
from typing import Any

import pytest

from marketing_cli.reports import html
from marketing_cli.services.email import report as email_report
from tests import factories

WIDTH, HEIGHT = 800, 900
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--hide-scrollbars", "--force-device-scale-factor=1", "--lang=en-US",
         f"--window-size={WIDTH},{HEIGHT}")
# only the timeline section (the second of the page) and no numbers table under it
ONLY_THE_CHARTS = "<style>main>section:not(:nth-of-type(2)),main>header,details{display:none}</style>"
COLOURS = {"blue": (0x25, 0x63, 0xEB), "green": (0x16, 0xA3, 0x4A), "orange": (0xEA, 0x58, 0x0C)}
PLOT = html.CHART_W - html.PAD - 30  # the width of a chart's plot area, in pixels at scale 1


def chromium() -> str:
    """Debian's Chromium, as the other browser tests find it: skip without it, fail when
    MKT_REQUIRE_BROWSER=1."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("MKT_REQUIRE_BROWSER") == "1":
            pytest.fail("MKT_REQUIRE_BROWSER=1 but no chromium on PATH (apt-get install -y chromium)")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    return found


def pixels(png: bytes) -> list[bytes]:
    """The rows of an 8-bit RGB or RGBA PNG, unfiltered, as RGB bytes (enough of PNG for Chromium's)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height, depth, colour = struct.unpack(">IIBB", png[16:26])
    assert depth == 8 and colour in (2, 6) and png[28] == 0  # not interlaced
    data, at = b"", 8
    while at < len(png):
        size, kind = struct.unpack(">I4s", png[at:at + 8])
        if kind == b"IDAT":
            data += png[at + 8:at + 8 + size]
        at += 12 + size
    raw, step = zlib.decompress(data), 3 if colour == 2 else 4
    stride, rows, previous = width * step, [], bytearray(width * step)
    for y in range(height):
        line = raw[y * (stride + 1):(y + 1) * (stride + 1)]
        kind, row = line[0], bytearray(line[1:])
        for i in range(stride):
            left = row[i - step] if i >= step else 0
            up, corner = previous[i], previous[i - step] if i >= step else 0
            if kind == 1:
                row[i] = (row[i] + left) & 255
            elif kind == 2:
                row[i] = (row[i] + up) & 255
            elif kind == 3:
                row[i] = (row[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                row[i] = (row[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        rows.append(bytes(row) if step == 3 else bytes(b for j in range(0, stride, 4) for b in row[j:j + 3]))
        previous = row
    return rows


def ink(rows: list[bytes], rgb: tuple[int, int, int]) -> tuple[int, int]:
    """(how many pixels have exactly this colour, the width of the band of columns holding them)."""
    colour = bytes(rgb)
    columns: set[int] = set()
    count = 0
    for row in rows:
        at = row.find(colour)
        while at != -1:
            if at % 3 == 0:
                columns.add(at // 3)
                count += 1
            at = row.find(colour, at + 1)
    return count, (max(columns) - min(columns) + 1 if columns else 0)


def photograph(browser: str, page: str, folder: Path) -> list[bytes]:
    (folder / "report.html").write_text(page.replace("</head>", ONLY_THE_CHARTS + "</head>"), encoding="utf-8")
    done = subprocess.run([browser, *FLAGS, f"--user-data-dir={folder / 'profile'}",
                           f"--screenshot={folder / 'charts.png'}", (folder / "report.html").as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return pixels((folder / "charts.png").read_bytes())


@pytest.mark.parametrize("span", ["hour", "day", "month"])
def test_the_charts_show_activity_in_one_hour_one_day_and_one_month(conn: Any, workspace: dict, tmp_path: Path,
                                                                     span: str) -> None:
    browser = chromium()
    world = factories.email_span_world(conn, workspace["id"], span)
    page = html.render(email_report.campaign_report(conn, workspace["id"], world["id"]))
    rows = photograph(browser, page, tmp_path)
    assert len(rows) == HEIGHT and len(rows[0]) == WIDTH * 3
    seen = {name: ink(rows, rgb) for name, rgb in COLOURS.items()}  # opens, clicks, unsubscribes
    for name, (count, extent) in seen.items():
        assert count >= 40, (span, name, seen)  # bars, not a stray pixel
        # twelve opens and clicks from the start to the end of the activity; four unsubscribes
        # from the first recipient's to the tenth's
        assert extent >= (0.8 if name != "orange" else 0.6) * PLOT, (span, name, seen)
