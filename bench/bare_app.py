"""The baseline of the HTTP benchmarks: a bare `async def` Starlette JSON endpoint, served
by uvicorn with exactly the settings `mkt serve` uses (marketing_cli.cli.serve.uvicorn_settings)."""

from __future__ import annotations

import sys

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from marketing_cli.api import limits
from marketing_cli.cli.serve import uvicorn_settings


async def ok(request: Request) -> JSONResponse:
    return JSONResponse({"data": {"ok": True}})


app = Starlette(routes=[Route("/", ok), Route("/ok", ok)])

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), **uvicorn_settings(max_connections=limits.MAX_CONNECTIONS,
                                                                             header_timeout=limits.HEADER_TIMEOUT))
