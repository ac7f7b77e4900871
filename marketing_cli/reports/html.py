"""A campaign report as one self-contained HTML page: `render(report) -> str`.

`report` is the dict of services/email/report.py `campaign_report` (kind "email") or
services/sms/report.py `campaign_report` (kind "sms"). The page holds everything it shows:
the stylesheet inline, the charts as inline SVG drawn here, no script, no image, no font and
no URL that a browser would fetch, so it can be mailed around and opened offline.

Every value from the data (campaign names, URLs, countries, OS names: user data or
derived from it) goes through `esc` (html.escape, quotes included), and markup is built
only by `el`, which escapes every text child and attribute value: a campaign named
`<script>` is shown as text. Nothing is written into a `style` attribute, so a page that
serves `STYLESHEET` from its own origin and `body(report)` as its content works under a
Content-Security-Policy of `'self'` (the dashboard): the SVG colours are presentation
attributes, which a CSP does not govern.

Charts:
- the funnel: one bar per step, its length the step's share of the first;
- the timeline: one small bar chart per series (each scaled to its own maximum) over the
  report's `chart`, whose bucket (a minute to a day) follows the span of the activity, so
  a send whose every event fell in one hour fills its chart as a month-long one does; the
  table below lists the API's hourly and daily buckets that saw an event;
- the variants: the rates of A and B side by side as bars.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

from marketing_cli.kernel.money import cents

BLUE, GREEN, ORANGE, GREY = "#2563eb", "#16a34a", "#ea580c", "#9ca3af"
CHART_W, CHART_H, PAD = 640, 120, 36

STYLESHEET = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;background:#f8fafc;color:#0f172a}
main{max-width:60rem;margin:0 auto;padding:1.5rem}
h1{font-size:1.6rem;margin:.2rem 0}h2{font-size:1.15rem;margin:1.8rem 0 .6rem}h3{font-size:1rem;margin:1rem 0 .3rem}
.meta{color:#475569;margin:.2rem 0}
section{background:#fff;border:1px solid #e2e8f0;border-radius:8px;padding:.4rem 1rem 1rem;margin:1rem 0}
table{border-collapse:collapse;margin:.4rem 0;font-variant-numeric:tabular-nums}
th,td{padding:.25rem .8rem .25rem 0;text-align:left;vertical-align:top}
td.n,th.n{text-align:right}
thead th{border-bottom:1px solid #cbd5e1}
.url{word-break:break-all;max-width:36rem}
svg{display:block;max-width:100%;height:auto}
.grid{display:flex;flex-wrap:wrap;gap:1.5rem}
details{margin:.4rem 0}
.empty{color:#64748b}
"""


class Safe(str):
    """Markup that is already escaped (what `el` and `esc` return)."""


def esc(value: Any) -> Safe:
    """Text as HTML: escaped unless it is Safe already."""
    return value if isinstance(value, Safe) else Safe(escape("" if value is None else str(value), quote=True))


def el(tag: str, *children: Any, **attrs: Any) -> Safe:
    """<tag attrs>children</tag>, every attribute value and text child escaped.

    An attribute `class_` is written `class`, `data_points` `data-points`; None leaves it out."""
    text = "".join(f' {name.rstrip("_").replace("_", "-")}="{escape(str(value), quote=True)}"'
                   for name, value in attrs.items() if value is not None)
    return Safe(f"<{tag}{text}>" + "".join(esc(c) for c in children if c is not None) + f"</{tag}>")


def _join(parts: Iterable[Any]) -> Safe:
    return Safe("".join(esc(p) for p in parts))


def _n(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def _pct(part: int, whole: int) -> str:
    return f"{part * 100 / whole:.1f}%" if whole else "-"


# ------------------------------------------------------------------ tables


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], numeric: Sequence[int] = ()) -> Safe:
    """A table; the columns whose index is in `numeric` align right (numbers get thousands commas)."""
    head = el("thead", el("tr", *(el("th", h, class_="n" if i in numeric else None) for i, h in enumerate(headers))))
    body = el("tbody", *(el("tr", *(el("td", _n(v) if i in numeric else v,
                                       class_="n" if i in numeric else ("url" if headers[i] == "URL" else None))
                                    for i, v in enumerate(row))) for row in rows))
    return el("table", head, body)


def _breakdown(title: str, rows: list[dict[str, Any]], key: str, count: str, label: str) -> Safe:
    if not rows:
        return el("div", el("h3", title), el("p", "None yet.", class_="empty"))
    total = sum(r[count] for r in rows)
    return el("div", el("h3", title), table([label, "count", "share"],
                                            [(r[key], r[count], _pct(r[count], total)) for r in rows], (1, 2)))


# ------------------------------------------------------------------ charts


def svg(width: int, height: int, title: str, *children: Any, **attrs: Any) -> Safe:
    return el("svg", el("title", title), *children, viewBox=f"0 0 {width} {height}",
              width=width, height=height, role="img", **attrs)


def funnel_svg(steps: Sequence[tuple[str, int]], title: str = "Funnel") -> Safe:
    """One bar per (label, count), its length the share of the first step."""
    first = steps[0][1] if steps else 0
    row_h, label_w, bar_w = 30, 110, 380
    bars = []
    for i, (label, count) in enumerate(steps):
        y = i * row_h + 4
        width = round(bar_w * count / first) if first else 0
        bars += [el("text", label, x=0, y=y + 17, fill="#0f172a", font_size=13),
                 el("rect", x=label_w, y=y, width=bar_w, height=row_h - 8, fill="#e2e8f0", rx=3),
                 el("rect", x=label_w, y=y, width=width, height=row_h - 8, fill=BLUE, rx=3, class_="step",
                    data_count=count),
                 el("text", f"{count:,} ({_pct(count, first)})", x=label_w + bar_w + 8, y=y + 17,
                    fill="#0f172a", font_size=13)]
    return svg(label_w + bar_w + 140, row_h * len(steps) + 8, title, *bars, class_="funnel")


STEP_NAMES = {1: "minute", 5: "5 minutes", 15: "15 minutes", 60: "hour", 1440: "day"}


def _tick(start: str, minutes: int) -> str:
    """A bucket's start as an axis label: '13:05', '11-21 13h' or '11-21'."""
    return start[11:16] if minutes < 60 else f"{start[5:10]} {start[11:13]}h" if minutes == 60 else start[5:10]


def bars_svg(buckets: Sequence[dict[str, Any]], key: str, label: str, colour: str, minutes: int) -> Safe:
    """One bar per bucket of the report's chart (x is time: empty buckets keep their place), its
    height the bucket's share of the series' maximum; a bucket with any event is at least 2px
    high, so a lone event is never invisible."""
    values = [b[key] for b in buckets]
    top = max(values, default=0)
    x0, width, height, top_y = PAD + 20, CHART_W - PAD - 30, CHART_H - 46, 22  # the plot under the title line
    slot = width / max(1, len(values))
    bar = max(1.0, slot - 1 if slot >= 4 else slot)
    bars = [el("rect", x=round(x0 + i * slot, 1), y=round(top_y + height - h, 1), width=round(bar, 1), height=round(h, 1),
               fill=colour, class_="bar", data_count=v)
            for i, v in enumerate(values) if v and top
            for h in [max(2.0, v * height / top)]]
    marks = sorted({0, len(values) - 1, *range(0, len(values), max(1, len(values) // 4))})
    ticks = [el("text", _tick(buckets[i]["start"], minutes), x=round(x0 + (i + 0.5) * slot, 1), y=CHART_H - 6,
                fill="#64748b", font_size=11, text_anchor="middle")
             for i in marks if i == len(values) - 1 or len(values) - 1 - i >= max(1, len(values) // 8)]
    return svg(CHART_W, CHART_H, f"{label} per {STEP_NAMES.get(minutes, f'{minutes} minutes')}",
               el("text", label, x=0, y=14, fill="#0f172a", font_size=13, font_weight="bold"),
               el("text", f"max {top:,}", x=CHART_W - 4, y=14, fill="#64748b", font_size=11, text_anchor="end"),
               el("line", x1=x0, y1=top_y + height, x2=x0 + width, y2=top_y + height, stroke="#cbd5e1"),
               *ticks, *bars, class_="timeline", data_series=label, data_buckets=len(values))


# ------------------------------------------------------------------ sections


def _header(report: dict[str, Any]) -> Safe:
    campaign, timeline = report["campaign"], report["timeline"]
    kind = "Email campaign" if report["kind"] == "email" else "SMS campaign"
    started = timeline["started_at"] or "not started"
    return el("header", el("h1", campaign.get("name") or campaign["id"]),
              el("p", f"{kind} {campaign['id']} · {campaign['status']} · send started {started}", class_="meta"),
              el("p", f"Report generated {report['generated_at']} (UTC).", class_="meta"))


def _funnel(report: dict[str, Any]) -> Safe:
    stats, totals = report["statistics"], report["timeline"]["totals"]
    agg = stats["aggregate"]
    if report["kind"] == "email":
        sent = (report["campaign"].get("progress") or {}).get("sent", totals["sent"])
        steps = [("Sent", sent), ("Delivered", agg["delivered"]), ("Opened", agg["opened"]),
                 ("Clicked", agg["clicked"])]
        others = [("Bounced", agg["bounced"]), ("Unsubscribed", agg["unsubscribed"]),
                  ("Complained", agg["complained"])]
        base = agg["delivered"]
        note = "Opened and clicked count each recipient once; shares in the table are of delivered messages."
    else:
        steps = [("Sent", agg["sent"]), ("Delivered", agg["delivered"]), ("Clicked", agg["clicked"])]
        others = [("Failed", agg["failed"]), ("STOP replies", agg["unsubscribed"]), ("Suppressed", agg["suppressed"])]
        base = agg["sent"]
        note = f"Clicked counts each recipient once; shares in the table are of sent messages. Cost: ${cents(stats['total_cost'])}."
    return el("section", el("h2", "Funnel"), funnel_svg(steps),
              table(["", "count", "share"], [(label, n, _pct(n, base)) for label, n in others], (1, 2)),
              el("p", note, class_="meta"))


def timeline_series(kind: str) -> list[tuple[str, str, str]]:
    """(bucket member, label, colour) of the series a report draws."""
    if kind == "email":
        return [("unique_opens", "First opens", BLUE), ("total_clicks", "Clicks", GREEN),
                ("unsubscribed", "Unsubscribes", ORANGE)]
    return [("delivered", "Delivered", BLUE), ("total_clicks", "Clicks", GREEN),
            ("unsubscribed", "STOP replies", ORANGE)]


def _timeline(report: dict[str, Any]) -> Safe:
    tl, chart = report["timeline"], report.get("chart")
    if not tl["hours"] or not chart:
        return el("section", el("h2", "Timeline"), el("p", "The send has not started.", class_="empty"))
    names = [k for k in tl["totals"]]
    minutes, buckets = chart["minutes"], chart["buckets"]
    step = STEP_NAMES.get(minutes, f"{minutes} minutes")
    parts: list[Any] = [el("h2", "Timeline"),
                        el("p", f"Per {step} from {buckets[0]['start']} to the last event (UTC); the bucket "
                                "follows the span of the activity.", class_="meta"),
                        el("div", *(bars_svg(buckets, key, label, colour, minutes)
                                    for key, label, colour in timeline_series(report["kind"])), class_="grid")]
    busy = [b for b in (*tl["hours"], *tl["days"]) if any(b[n] and b[n] != "0.00" for n in names)]
    parts.append(el("details", el("summary", f"The numbers: {len(busy)} hours or days with events, and the totals"),
                    table(["start", *names], [(b["start"], *(b[n] for n in names)) for b in busy]
                          + [("total", *(tl["totals"][n] for n in names))], range(1, len(names) + 1))))
    return el("section", *parts)


def _links(report: dict[str, Any]) -> Safe:
    links = report["statistics"]["link_activity"][:10]
    if not links:
        return el("section", el("h2", "Top links"), el("p", "No tracked links.", class_="empty"))
    return el("section", el("h2", "Top links"),
              table(["URL", "clicks", "unique"], [(x["url"], x["total_clicks"], x["unique_clicks"]) for x in links],
                    (1, 2)))


def _audience(report: dict[str, Any]) -> Safe:
    s = report["statistics"]
    parts: list[Any] = []
    if report["kind"] == "email":
        parts.append(_breakdown("Providers (deliveries)", s["delivered_by_provider"], "service_provider",
                                "delivery_count", "provider"))
    else:
        rows = report["by_provider"]
        parts.append(el("div", el("h3", "Providers (messages)"),
                        table(["provider", "messages"], [(r["provider"], r["messages"]) for r in rows], (1,))
                        if rows else el("p", "None yet.", class_="empty")))
    parts += [_breakdown("Devices (first clicks)", s["clicks_by_device_type"], "device_type", "click_count", "device"),
              _breakdown("Operating systems (first clicks)", s["clicks_by_os"], "operating_system", "click_count", "OS"),
              _breakdown("Countries (first clicks)", s["clicks_by_country"], "country", "click_count", "country")]
    section = [el("h2", "Providers, devices and countries"), el("div", *parts, class_="grid")]
    if report["kind"] == "sms" and report["by_country"]:
        section += [el("h3", "Recipients by country"),
                    table(["country", "messages", "sent", "delivered", "charged ($)"],
                          [(r["country"], r["messages"], r["sent"], r["delivered"], r["charged"])
                           for r in report["by_country"]], (1, 2, 3, 4))]
    return el("section", *section)


VARIANT_ROWS = ("delivered", "opened", "clicked", "bounced", "unsubscribed", "complained")


def _variants(report: dict[str, Any]) -> Safe:
    if report["kind"] != "email" or len(report["statistics"]["variant_stats"]) < 2:
        return Safe("")
    types = {v["id"]: v["type"] for v in report["campaign"].get("variants", [])}
    variants = report["statistics"]["variant_stats"]
    names = [types.get(v["variant_id"], "?") for v in variants]
    rows = [("id", *(v["variant_id"] for v in variants))]
    rows += [(k, *(f"{v[k]:,} ({_pct(v[k], v['delivered'])})" if k != "delivered" else f"{v[k]:,}"
                   for v in variants)) for k in VARIANT_ROWS]
    bars = [(f"{name} {metric}", v[metric] * 1000 // v["delivered"] if v["delivered"] else 0)
            for metric in ("opened", "clicked") for name, v in zip(names, variants, strict=True)]
    return el("section", el("h2", "Variants"), table(["", *names], rows),
              _rates_svg(bars), el("p", "Bars: opened and clicked as shares of delivered.", class_="meta"))


def _rates_svg(bars: Sequence[tuple[str, int]]) -> Safe:
    """Per-mille rates as bars of a 0-100% scale."""
    row_h, label_w, bar_w = 26, 110, 380
    parts = []
    for i, (label, permille) in enumerate(bars):
        y = i * row_h + 4
        parts += [el("text", label, x=0, y=y + 15, fill="#0f172a", font_size=13),
                  el("rect", x=label_w, y=y, width=bar_w, height=row_h - 8, fill="#e2e8f0", rx=3),
                  el("rect", x=label_w, y=y, width=round(bar_w * permille / 1000), height=row_h - 8,
                     fill=GREEN if "clicked" in label else BLUE, rx=3),
                  el("text", f"{permille / 10:.1f}%", x=label_w + bar_w + 8, y=y + 15, fill="#0f172a", font_size=13)]
    return svg(label_w + bar_w + 80, row_h * len(bars) + 8, "Variant rates", *parts, class_="variants")


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def deliverability_table(rows: list[dict[str, Any]]) -> Safe:
    """The rows of services/delivery/deliverability.py: per sending domain and provider lane."""
    if not rows:
        return el("p", "No message answered yet.", class_="empty")
    return table(["domain", "lane", "sent", "delivered", "deferred", "bounced", "complaints", "rate now", "warm-up",
                  "bounced by class"],
                 [(r["domain"], r["lane"], r["sent"], f"{r['delivered']:,} ({_rate(r['delivered_rate'])})",
                   f"{r['deferred']:,} ({_rate(r['deferred_rate'])})", f"{r['bounced']:,} ({_rate(r['bounce_rate'])})",
                   f"{r['complained']:,} ({_rate(r['complaint_rate'])})",
                   "-" if r["rate_now"] is None else f"{r['rate_now']:g}/s",
                   "-" if r["warmup_day"] is None else f"day {r['warmup_day']}, cap {r['warmup_cap']:,}",
                   ", ".join(f"{cls} {n:,}" for cls, n in r["bounced_by_class"].items()) or "-") for r in rows],
                 (2,))


def _deliverability(report: dict[str, Any]) -> Safe:
    """An email report's section (reports/email.py adds its rows), per sending domain and lane."""
    if "deliverability" not in report:
        return Safe("")
    return el("section", el("h2", "Deliverability"), deliverability_table(report["deliverability"]))


def body(report: dict[str, Any]) -> Safe:
    """The report's content (a <main>), without the page around it or its stylesheet."""
    return el("main", _header(report), _funnel(report), _deliverability(report), _timeline(report), _variants(report),
              _links(report), _audience(report))


def render(report: dict[str, Any]) -> str:
    """The whole page: one self-contained HTML document."""
    title = f"{report['campaign'].get('name') or report['campaign']['id']}: campaign report"
    return ("<!doctype html>\n" +
            el("html", Safe('<head><meta charset="utf-8">'
                            '<meta name="viewport" content="width=device-width,initial-scale=1">'),
               el("title", title), el("style", Safe(STYLESHEET)), Safe("</head>"), el("body", body(report)),
               lang="en") + "\n")


def _style_hash() -> str:
    import base64
    import hashlib

    return base64.b64encode(hashlib.sha256(STYLESHEET.encode()).digest()).decode()


# The page over HTTP (GET /v1/campaigns/:id/report): nothing may load, and only the page's
# own stylesheet applies (by its hash), so a value that slipped through escaping could still
# neither run nor fetch anything.
CONTENT_SECURITY_POLICY = f"default-src 'none'; style-src 'sha256-{_style_hash()}'; base-uri 'none'; form-action 'none'"
PAGE_HEADERS = {"Content-Security-Policy": CONTENT_SECURITY_POLICY, "X-Content-Type-Options": "nosniff",
                "Cache-Control": "no-store"}
