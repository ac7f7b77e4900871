"""The tracking paths (CONTRACT section 7), answered without an API key.

They live below the workspace's tracking base URL; a base URL with a path (a reverse
proxy's `https://example.com/mkt`) is served too, with or without that prefix forwarded.
Errors here are small pages, not the API's JSON body: a person's browser shows them.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from marketing_cli.api.calls import call
from marketing_cli.api.responses import read_body
from marketing_cli.errors import MktError
from marketing_cli.services.email import tracking

NO_STORE = {"Cache-Control": "no-store, max-age=0"}


def _not_found(exc: MktError) -> Response:
    return HTMLResponse(f"<!doctype html><title>Not found</title><p>{exc.message}</p>", 404, headers=NO_STORE)


async def open_pixel(request: Request) -> Response:
    body = await call(request, tracking.track_open, request.path_params["token"], request.headers.get("user-agent"))
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
    token = request.path_params["token"]
    if request.method == "POST":  # RFC 8058: "List-Unsubscribe=One-Click", or the page's form; past the limit, 413
        await read_body(request, max_bytes=tracking.UNSUBSCRIBE_MAX_BYTES)
    try:
        if request.method == "POST":
            page = await call(request, tracking.unsubscribe, token)
        else:
            page = await call(request, tracking.unsubscribe_page, token)
    except MktError as exc:
        return _not_found(exc)
    return HTMLResponse(page, headers=NO_STORE)


def _routes(prefix: str) -> list[Route]:
    return [
        Route(prefix + "/t/o/{token}", open_pixel, methods=["GET"]),
        Route(prefix + "/t/c/{token}/{link_id}", click, methods=["GET"]),
        Route(prefix + "/t/u/{token}", unsubscribe, methods=["GET", "POST"]),
    ]


routes = [*_routes(""), *_routes("/{prefix:path}")]
