"""The read-only dashboard of `mkt serve`: `/` (redirects to `/dashboard/`), the workspace's
email and SMS campaigns with their numbers, the SMS balance and spend, and each campaign's
report (reports/html.py's `body`, the same page `GET /v1/campaigns/:id/report` answers).

It is not the API (no /v1 path, not in the OpenAPI document) but it answers only what the
API would answer the same key: every figure comes from the services the API calls.

Signing in: the form at `/dashboard/sign-in` takes an API key, checked exactly as the API
checks `Authorization: Bearer` (api/auth.py `key_workspace`), and keeps it in a cookie that
scripts cannot read (HttpOnly), that no other site's page or link sends (SameSite=Strict),
sent only over https when served over https (Secure), and only to `/dashboard` (Path): the
API, the tracking paths and the webhooks never see it. Every request checks the key again,
so a revoked key signs the browser out at once. The key never appears in a URL or a page.

Read-only: the only POSTs are the sign-in and the sign-out, and they change no row (the
key's `last_used_at`, as on any API call, aside). Cross-site requests are refused twice:
the cookie is SameSite=Strict, and a POST whose `Origin` is not the dashboard's own gets a
403 (`_same_origin`). Every answer carries a Content-Security-Policy that allows the page's own origin only
(no script at all; the stylesheet is the file `/dashboard/dashboard.css`), forbids framing,
and sends no Referer; and `Cache-Control: no-store`, so a shared machine's cache keeps no
report. Pages are built with reports/html.py's `el`, which escapes every value.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from marketing_cli.api.auth import key_workspace
from marketing_cli.api.calls import call
from marketing_cli.api.responses import read_body
from marketing_cli.errors import MktError
from marketing_cli.kernel.money import cents
from marketing_cli.kernel.numbers import parse_digits
from marketing_cli.reports import email as email_report
from marketing_cli.reports import html
from marketing_cli.reports.html import Safe, el
from marketing_cli.services.account import keys, workspaces
from marketing_cli.services.delivery import deliverability
from marketing_cli.services.email import variant_html
from marketing_cli.services.estimates import views as estimates
from marketing_cli.services.sms import ledger
from marketing_cli.services.sms import report as sms_report

BASE = "/dashboard"
COOKIE = "mkt_dashboard"
PER_PAGE = 50
SIGN_IN, SIGN_OUT, STYLESHEET_PATH = f"{BASE}/sign-in", f"{BASE}/sign-out", f"{BASE}/dashboard.css"
ICON_PATH = f"{BASE}/icon.svg"  # named by every page, so browsers do not ask for /favicon.ico (a 404)
ICON = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" '
        'fill="#0f172a"/><polyline points="5,24 12,14 18,19 27,7" fill="none" stroke="#60a5fa" stroke-width="3"/></svg>')

CONTENT_SECURITY_POLICY = ("default-src 'self'; script-src 'none'; object-src 'none'; base-uri 'none'; "
                           "form-action 'self'; frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CONTENT_SECURITY_POLICY, "X-Frame-Options": "DENY",
           "Referrer-Policy": "no-referrer", "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}

FOREIGN_ORIGIN = "This form can only be sent from the dashboard's own pages."
NOT_FOUND = "We could not find the campaign you are looking for."
PAGE_NOT_FOUND = "There is no such page in the dashboard."
NO_PREVIEW = "This variant has no preview image yet."

STYLESHEET = html.STYLESHEET + """
.bar{display:flex;align-items:center;gap:1rem;background:#0f172a;color:#f8fafc;padding:.6rem 1.5rem}
.bar a{color:#f8fafc;text-decoration:none;font-weight:600}.bar .ws{color:#cbd5e1}
.bar form{margin:0 0 0 auto}
button{font:inherit;padding:.35rem .9rem;border-radius:6px;border:1px solid #cbd5e1;background:#fff;cursor:pointer}
.bar button{background:#1e293b;color:#f8fafc;border-color:#334155}
.cards{display:flex;flex-wrap:wrap;gap:1rem;margin:1rem 0}
.card{background:#fff;border:1px solid #e2e8f0;border-radius:8px;padding:.7rem 1.1rem;min-width:10rem}
.card .label{color:#475569;font-size:.85rem}.card .value{font-size:1.5rem;font-weight:600}
a{color:#1d4ed8}
.signin{max-width:26rem;margin:4rem auto}
.signin input{font:inherit;width:100%;box-sizing:border-box;padding:.45rem;margin:.4rem 0 .8rem;
border:1px solid #cbd5e1;border-radius:6px}
.error{color:#b91c1c}
.pages{display:flex;gap:1rem}
.back{max-width:60rem;margin:0 auto;padding:1rem 1.5rem 0}.back a+a{margin-left:1.5rem}
"""


# ------------------------------------------------------------------ responses


def page(title: str, content: Any, *, status: int = 200, workspace: str | None = None) -> Response:
    """A whole page: the bar (with the sign-out when signed in) over `content`."""
    bar: list[Any] = [el("a", "mkt dashboard", href=f"{BASE}/")]
    if workspace is not None:
        bar += [el("span", workspace, class_="ws"),
                el("form", el("button", "Sign out", type="submit"), method="post", action=SIGN_OUT)]
    document = "<!doctype html>\n" + el(
        "html", Safe('<head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">'),
        el("title", f"{title} · mkt"), Safe(f'<link rel="stylesheet" href="{STYLESHEET_PATH}"><link rel="icon" href="{ICON_PATH}"></head>'),
        el("body", el("header", *bar, class_="bar"), content), lang="en")
    return Response(document + "\n", status_code=status, media_type="text/html", headers=HEADERS)


def redirect(url: str) -> Response:
    return RedirectResponse(url, status_code=303, headers=HEADERS)


def error_page(status: int, message: str, workspace: str | None = None) -> Response:
    return page("Error", el("main", el("h1", message), el("p", el("a", "Back to the campaigns", href=f"{BASE}/"))),
                status=status, workspace=workspace)


def _forget(request: Request, response: Response) -> Response:
    response.delete_cookie(COOKIE, path=BASE, httponly=True, samesite="strict", secure=request.url.scheme == "https")
    return response


def to_sign_in(request: Request) -> Response:
    """The answer to a page asked without a valid cookie; a stale one (a key revoked since) is dropped."""
    response = redirect(SIGN_IN)
    return _forget(request, response) if COOKIE in request.cookies else response


def _signed_in(request: Request) -> int | None:
    """The workspace of the cookie's key, or None (no cookie, or a key revoked since)."""
    secret = request.cookies.get(COOKIE)
    if not secret:
        return None
    try:
        return key_workspace(request, secret)
    except MktError as exc:
        if exc.status == 401:
            return None
        raise


def _same_origin(request: Request) -> bool:
    """A form sent from the dashboard's own page. Browsers send `Origin: null` on a form POST
    from a page served with `Referrer-Policy: no-referrer` (as these are): then the Fetch
    Metadata header that browsers set and no page can, `Sec-Fetch-Site: same-origin`, decides."""
    origin = request.headers.get("origin")
    if origin == f"{request.url.scheme}://{request.url.netloc}":
        return True
    return origin in (None, "null") and request.headers.get("sec-fetch-site") == "same-origin"


def _workspace_name(conn: Any, workspace_id: int) -> str:
    return workspaces.get_workspace_info(conn, workspace_id)["workspace"]["name"]


# ------------------------------------------------------------------ sign-in and sign-out


def sign_in_form(message: str | None = None) -> Safe:
    return el("main", el("section", el("h1", "Sign in"),
                         el("p", "Enter an API key of the workspace (mkt keys create). It is kept in a cookie of this "
                                 "browser until you sign out or close it.", class_="meta"),
                         el("p", message, class_="error", role="alert") if message else None,
                         el("form", el("label", "API key", for_="api_key"),
                            Safe('<input id="api_key" name="api_key" type="password" autocomplete="off" '
                                 'required autofocus>'),
                            el("button", "Sign in", type="submit"), method="post", action=SIGN_IN)),
              class_="signin")


async def sign_in_page(request: Request) -> Response:
    return page("Sign in", sign_in_form())


async def sign_in(request: Request) -> Response:
    if not _same_origin(request):
        return error_page(403, FOREIGN_ORIGIN)
    form = parse_qs((await read_body(request, max_bytes=4096)).decode("utf-8", "replace"), keep_blank_values=True)
    secret = (form.get("api_key") or [""])[0].strip()
    try:
        if not secret:
            raise MktError(401, keys.MISSING)
        key_workspace(request, secret)
    except MktError as exc:
        if exc.status != 401:
            raise
        return page("Sign in", sign_in_form(exc.message), status=401)
    response = redirect(f"{BASE}/")
    response.set_cookie(COOKIE, secret, path=BASE, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https")
    return response


async def sign_out(request: Request) -> Response:
    if not _same_origin(request):
        return error_page(403, FOREIGN_ORIGIN)
    return _forget(request, redirect(SIGN_IN))


# ------------------------------------------------------------------ the pages


def overview_data(conn: Any, workspace_id: int, page_number: Any) -> dict[str, Any]:
    """Everything the campaigns page shows, read in one worker thread."""
    return {"workspace": _workspace_name(conn, workspace_id),
            "email": estimates.email_summaries(conn, workspace_id, page=page_number, limit=PER_PAGE),
            "sms": estimates.sms_summaries(conn, workspace_id, page=page_number, limit=PER_PAGE),
            "money": ledger.spending(conn, workspace_id),
            "deliverability": deliverability.report(conn, workspace_id)}


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _card(label: str, value: str, name: str) -> Safe:
    return el("div", el("div", label, class_="label"), el("div", value, class_="value", data_stat=name), class_="card")


def _cell(value: Any, stat: str) -> Safe:
    return el("td", value, class_="n", data_stat=stat)


def _future(c: dict[str, Any]) -> tuple[Safe, Safe]:
    """The scheduled and "to come" cells: the next occurrence (a series', the next zone's) and
    the estimate's summary, as GET /v1/campaigns answers them (services/estimates)."""
    from marketing_cli.services.estimates.groups import next_release

    est = c.get("estimate") or {"recipients": 0, "groups": []}
    parts = []
    for state, word in (("now", "now"), ("waiting", "waiting"), ("held", "held"), ("over_cap", "over cap"),
                        ("skipped", "skipped")):
        count = sum(g["recipients"] for g in est["groups"] if g["state"] == state)
        if count:
            parts.append(f"{count:,} {word}")
    upcoming = next_release(est) if est["groups"] else None
    text = ", ".join(parts) + (f"; next {upcoming['until']}" if upcoming else "") if parts else "-"
    return el("td", c.get("scheduled_at") or "-", data_stat="scheduled_at"), el("td", text, data_stat="estimate")


def _status(c: dict[str, Any]) -> str:
    return "DRAFT (series)" if c["status"] == "DRAFT" and c.get("scheduled_at") else c["status"]


def _email_table(listed: dict[str, Any]) -> Safe:
    if not listed["campaigns"]:
        return el("p", "No email campaigns.", class_="empty")
    head = el("thead", el("tr", el("th", "campaign"), el("th", "status"), el("th", "scheduled"), el("th", "to come"),
                          *(el("th", h, class_="n") for h in ("sent", "delivered", "opened", "clicked", "bounced",
                                                               "unsubscribed"))))
    rows = [el("tr", el("td", el("a", c["name"], href=f"{BASE}/campaigns/{c['id']}")), el("td", _status(c)),
               *_future(c),
               _cell(_count(c["sent"]), "sent"),
               *(_cell(_count(c[k]), k) for k in ("delivered", "opened", "clicked", "bounced", "unsubscribed")),
               data_campaign=c["id"], class_="campaign") for c in listed["campaigns"]]
    return el("table", head, el("tbody", *rows), class_="campaigns", data_kind="email")


def _sms_table(listed: dict[str, Any]) -> Safe:
    if not listed["campaigns"]:
        return el("p", "No SMS campaigns.", class_="empty")
    head = el("thead", el("tr", el("th", "campaign"), el("th", "status"), el("th", "scheduled"), el("th", "to come"),
                          *(el("th", h, class_="n") for h in ("sent", "delivered", "failed", "clicked", "STOP",
                                                               "cost ($)"))))
    rows = [el("tr", el("td", el("a", c["name"], href=f"{BASE}/sms-campaigns/{c['id']}")), el("td", c["status"]),
               *_future(c),
               *(_cell(_count(c[k]), k) for k in ("sent", "delivered", "failed", "clicked", "unsubscribed")),
               _cell(cents(c["total_cost"]), "total_cost"), data_campaign=c["id"], class_="campaign")
            for c in listed["campaigns"]]
    return el("table", head, el("tbody", *rows), class_="campaigns", data_kind="sms")


def _pager(data: dict[str, Any]) -> Safe:
    current = data["email"]["pagination"]["current_page"]
    last = max(data["email"]["pagination"]["total_pages"], data["sms"]["pagination"]["total_pages"], 1)
    if last == 1:
        return Safe("")
    links = [el("a", "Newer", href=f"{BASE}/?page={current - 1}") if current > 1 else None,
             el("span", f"Page {current} of {last}"),
             el("a", "Older", href=f"{BASE}/?page={current + 1}") if current < last else None]
    return el("p", *links, class_="pages")


def overview(data: dict[str, Any]) -> Safe:
    money = data["money"]
    email_total = data["email"]["pagination"]["total_count"]
    sms_total = data["sms"]["pagination"]["total_count"]
    return el("main", el("h1", "Campaigns"),
              el("div", _card("SMS balance ($)", cents(money["balance"]), "balance"),
                 _card("Reserved by queued SMS ($)", cents(money["reserved"]), "reserved"),
                 _card("SMS spend ($)", cents(money["spent"]), "spent"), class_="cards"),
              el("section", el("h2", f"Email campaigns ({email_total:,})"), _email_table(data["email"])),
              el("section", el("h2", f"SMS campaigns ({sms_total:,})"), _sms_table(data["sms"])),
              _pager(data),
              el("section", el("h2", f"Deliverability over the last {data['deliverability']['days']} days"),
                 html.deliverability_table(data["deliverability"]["rows"])),
              el("p", "Opened and clicked count each recipient once. Read-only: change campaigns with mkt or the "
                      "/v1 API.", class_="meta"))


def _page_number(text: str | None) -> int:
    number = parse_digits(text, 7)
    return number if number else 1


async def campaigns_page(request: Request) -> Response:
    workspace_id = _signed_in(request)
    if workspace_id is None:
        return to_sign_in(request)
    data = await call(request, overview_data, workspace_id, _page_number(request.query_params.get("page")))
    return page("Campaigns", overview(data), workspace=data["workspace"])


def _report_data(conn: Any, workspace_id: int, kind: str, campaign_id: str) -> tuple[str, dict[str, Any] | None]:
    name = _workspace_name(conn, workspace_id)
    build = email_report.campaign_report if kind == "email" else sms_report.campaign_report
    try:
        return name, build(conn, workspace_id, campaign_id)
    except MktError as exc:
        if exc.status in (400, 404):  # malformed, missing or another workspace's: all the same
            return name, None
        raise


async def _report_page(request: Request, kind: str) -> Response:
    workspace_id = _signed_in(request)
    if workspace_id is None:
        return to_sign_in(request)
    name, data = await call(request, _report_data, workspace_id, kind, request.path_params["campaign_id"])
    if data is None:
        return error_page(404, NOT_FOUND, name)
    title = data["campaign"].get("name") or data["campaign"]["id"]
    links = [el("a", "← All campaigns", href=f"{BASE}/")]
    for variant in data["campaign"].get("variants") or () if kind == "email" else ():
        if variant.get("preview_url"):
            links.append(el("a", f"Preview of variant {variant['type']}",
                            href=f"{BASE}/campaigns/{data['campaign']['id']}/variants/{variant['type']}/preview"))
    back = el("nav", *links, class_="back")
    return page(title, Safe(back + html.body(data)), workspace=name)


async def email_campaign_page(request: Request) -> Response:
    return await _report_page(request, "email")


def _preview(conn: Any, workspace_id: int, campaign_id: str, variant_type: str) -> tuple[str, bytes] | None:
    try:
        return variant_html.get_variant_preview(conn, workspace_id, campaign_id, variant_type)
    except MktError as exc:
        if exc.status in (400, 404):  # malformed, missing, another workspace's or not drawn yet
            return None
        raise


async def variant_preview(request: Request) -> Response:
    """A variant's thumbnail in the signed-in session: the image a campaign's `preview_url` names
    under /v1, which wants an API key the browser does not send (the cookie stays on /dashboard)."""
    workspace_id = _signed_in(request)
    if workspace_id is None:
        return to_sign_in(request)
    found = await call(request, _preview, workspace_id, request.path_params["campaign_id"],
                       request.path_params["variant_type"])
    if found is None:
        name = await call(request, _workspace_name, workspace_id)
        return error_page(404, NO_PREVIEW, name)
    content_type, body = found
    return Response(body, media_type=content_type, headers=HEADERS)


async def sms_campaign_page(request: Request) -> Response:
    return await _report_page(request, "sms")


async def stylesheet(request: Request) -> Response:
    return Response(STYLESHEET, media_type="text/css", headers=HEADERS)


async def icon(request: Request) -> Response:
    return Response(ICON, media_type="image/svg+xml", headers=HEADERS)


async def unknown_page(request: Request) -> Response:
    workspace_id = _signed_in(request)
    if workspace_id is None:
        return to_sign_in(request)
    name = await call(request, _workspace_name, workspace_id)
    return error_page(404, PAGE_NOT_FOUND, name)


async def root(request: Request) -> Response:
    return redirect(f"{BASE}/")


routes = [
    Route("/", root, methods=["GET"], include_in_schema=False),
    Route(BASE, root, methods=["GET"], include_in_schema=False),
    Route(f"{BASE}/", campaigns_page, methods=["GET"], include_in_schema=False),
    Route(SIGN_IN, sign_in_page, methods=["GET"], include_in_schema=False),
    Route(SIGN_IN, sign_in, methods=["POST"], include_in_schema=False),
    Route(SIGN_OUT, sign_out, methods=["POST"], include_in_schema=False),
    Route(STYLESHEET_PATH, stylesheet, methods=["GET"], include_in_schema=False),
    Route(ICON_PATH, icon, methods=["GET"], include_in_schema=False),
    Route(BASE + "/campaigns/{campaign_id}", email_campaign_page, methods=["GET"], include_in_schema=False),
    Route(BASE + "/sms-campaigns/{campaign_id}", sms_campaign_page, methods=["GET"], include_in_schema=False),
    Route(BASE + "/campaigns/{campaign_id}/variants/{variant_type}/preview", variant_preview, methods=["GET"],
          include_in_schema=False),
    Route(BASE + "/{rest:path}", unknown_page, methods=["GET"], include_in_schema=False),
]
