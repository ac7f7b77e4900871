"""The tracking paths (CONTRACT section 7), answered without an API key: the open pixel
(/t/o/), tracked links (/t/c/), the unsubscribe page (/t/u/), the view-online page (/t/v/)
and the double opt-in confirmation (/t/confirm/).

They live below the workspace's tracking base URL; a base URL with a path (a reverse
proxy's `https://example.com/mkt`) is served too, with or without that prefix forwarded.
Errors here are small pages, not the API's JSON body: a person's browser shows them.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from marketing_cli.api.calls import call
from marketing_cli.api.responses import read_body
from marketing_cli.errors import MktError
from marketing_cli.services.delivery import confirmation, tracking, view_online

NO_STORE = {"Cache-Control": "no-store, max-age=0"}
# The view-online page is campaign HTML with a contact's values in it, served on the API's
# own origin: it may load images, styles and fonts (as a mail client does) and nothing else
# runs (no script, no form, no frame, no plugin); `sandbox` gives it an opaque origin on top.
# No cache keeps it out of shared caches; no Referer keeps its token (in the URL) from the
# hosts of its images and links.
VIEW_ONLINE_CSP = ("default-src 'none'; img-src http: https: data:; style-src 'unsafe-inline' http: https:; "
                   "font-src http: https: data:; media-src http: https:; form-action 'none'; "
                   "frame-ancestors 'none'; base-uri 'none'; "
                   "sandbox allow-popups allow-popups-to-escape-sandbox allow-top-navigation-by-user-activation")
VIEW_ONLINE_HEADERS = {**NO_STORE, "Content-Security-Policy": VIEW_ONLINE_CSP, "X-Content-Type-Options": "nosniff",
                       "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY",
                       "X-Robots-Tag": "noindex, nofollow"}


def _not_found(exc: MktError) -> Response:
    """A small page with the error's status (404, or 410 for a message whose contact is gone)."""
    title = "Not found" if exc.status == 404 else "No longer available"
    return HTMLResponse(f"<!doctype html><title>{title}</title><p>{exc.message}</p>", exc.status, headers=NO_STORE)


async def open_pixel(request: Request) -> Response:
    client = request.client.host if request.client else None
    body = await call(request, tracking.track_open, request.path_params["token"], request.headers.get("user-agent"),
                      client)
    return Response(body, media_type="image/gif", headers=NO_STORE)


async def click(request: Request) -> Response:
    client = request.client.host if request.client else None
    try:
        url = await call(request, tracking.track_click, request.path_params["token"], request.path_params["link_id"],
                         request.headers.get("user-agent"), client)
    except MktError as exc:
        return _not_found(exc)
    return RedirectResponse(url, 302, headers=NO_STORE)


async def unsubscribe(request: Request) -> Response:
    # RFC 8058: "List-Unsubscribe=One-Click", or the page's form; past the limit, 413
    return await _page_and_form(request, tracking.unsubscribe_page, tracking.unsubscribe,
                                tracking.UNSUBSCRIBE_MAX_BYTES)


async def _page_and_form(request: Request, page: Any, act: Any, max_bytes: int) -> Response:
    """A public link that GET shows as a page and POST acts on (a mail scanner's GET changes
    nothing): the body is read within `max_bytes` (413 past it), an unknown token is 404. The
    POST's body, IP address and user agent go to the service: the consent ledger keeps them."""
    token = request.path_params["token"]
    body = await read_body(request, max_bytes=max_bytes) if request.method == "POST" else b""
    try:
        if request.method == "POST":
            html = await call(request, act, token, body=body, ip=request.client.host if request.client else None,
                              user_agent=request.headers.get("user-agent"))
        else:
            html = await call(request, page, token)
    except MktError as exc:
        return _not_found(exc)
    return HTMLResponse(html, headers=NO_STORE)


async def view_online_page(request: Request) -> Response:
    try:
        page = await call(request, view_online.view_online_page, request.path_params["token"])
    except MktError as exc:
        return _not_found(exc)
    return HTMLResponse(page, headers=VIEW_ONLINE_HEADERS)


async def confirm(request: Request) -> Response:
    """Double opt-in: GET shows a button, POST confirms (services/delivery/confirmation.py)."""
    return await _page_and_form(request, confirmation.confirmation_page, confirmation.confirm,
                                confirmation.CONFIRM_MAX_BYTES)


def _routes(prefix: str) -> list[Route]:
    return [
        Route(prefix + "/t/o/{token}", open_pixel, methods=["GET"]),
        Route(prefix + "/t/c/{token}/{link_id}", click, methods=["GET"]),
        Route(prefix + "/t/u/{token}", unsubscribe, methods=["GET", "POST"]),
        Route(prefix + "/t/v/{token}", view_online_page, methods=["GET"]),
        Route(prefix + "/t/confirm/{token}", confirm, methods=["GET", "POST"]),
    ]


routes = [*_routes(""), *_routes("/{prefix:path}")]
