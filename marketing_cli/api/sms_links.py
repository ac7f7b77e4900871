"""SMS short links below the tracking base URL (CONTRACT section 8), without an API key:
`GET /s/{token}` answers 302 to the original URL and records the click. Mounted like
api/tracking.py (with or without the base URL's path); errors are a small page."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from marketing_cli.api.calls import call
from marketing_cli.errors import MktError
from marketing_cli.services.sms import links as sms_links

NO_STORE = {"Cache-Control": "no-store, max-age=0"}


async def short_link(request: Request) -> Response:
    client = request.client.host if request.client else None
    try:
        url = await call(request, sms_links.track_click, request.path_params["token"],
                         request.headers.get("user-agent"), client)
    except MktError as exc:
        return HTMLResponse(f"<!doctype html><title>Not found</title><p>{exc.message}</p>", exc.status,
                            headers=NO_STORE)
    return RedirectResponse(url, 302, headers=NO_STORE)


routes = [Route("/s/{token}", short_link, methods=["GET"]), Route("/{prefix:path}/s/{token}", short_link,
                                                                   methods=["GET"])]
