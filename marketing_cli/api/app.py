"""create_app(db_path): the `/v1` Starlette app over the service layer.

Handlers are `async def`: they authenticate, read the body, and run the (synchronous)
service in a worker thread with that thread's own connection (`api/calls.call`), so a
slow query or a write waiting for a lock never holds up the event loop and every other
request (docs/architecture.md). Long work goes to the job queue.
"""

from __future__ import annotations

import importlib
import os
import sqlite3
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect

from marketing_cli.api import rates, strict
from marketing_cli.api.auth import RateLimiter
from marketing_cli.api.responses import (
    ShutdownGuard,
    client_disconnect_handler,
    database_error_handler,
    http_error_handler,
    mkt_error_handler,
    server_error_handler,
)
from marketing_cli.errors import MktError
from marketing_cli.storage.db import Database

# One routes module per resource, each exporting `routes`.
ROUTE_MODULES = [
    # First: Twilio's delivery reports come in bursts of 1,000 a second, and the router tries
    # routes in order (no other path ends in /webhooks/twilio/status or /inbound).
    "marketing_cli.api.twilio",
    "marketing_cli.api.workspace",
    "marketing_cli.api.rates",
    "marketing_cli.api.merge_tags",
    "marketing_cli.api.contacts",
    "marketing_cli.api.privacy",  # DELETE /v1/contacts/{id}, .../personal-data, /v1/suppressions
    "marketing_cli.api.fields",
    "marketing_cli.api.tags",
    "marketing_cli.api.events",
    "marketing_cli.api.consents",
    "marketing_cli.api.segments",
    "marketing_cli.api.audience",
    "marketing_cli.api.campaigns",
    "marketing_cli.api.campaign_stats",
    "marketing_cli.api.campaign_sending",
    "marketing_cli.api.campaign_series",
    "marketing_cli.api.bounces",
    "marketing_cli.api.templates",
    "marketing_cli.api.domains",
    "marketing_cli.api.senders",
    "marketing_cli.api.deliverability",
    "marketing_cli.api.sms",
    "marketing_cli.api.openapi",
    "marketing_cli.api.dashboard",  # `/` and /dashboard/...: pages for people, not the API
    "marketing_cli.api.sms_links",
    "marketing_cli.api.sms_messages",
    "marketing_cli.api.sms_replies",
    "marketing_cli.api.automations",
    "marketing_cli.api.tracking",  # last: its prefixed paths match below any base path
]


def create_app(db_path: str | os.PathLike[str] | None = None, *, worker: bool = False,
               worker_interval: float = 1.0, lease_seconds: int | None = None,
               body_timeout: float | None = None, workers: int | None = None,
               workspace_share: int | None = None) -> Starlette:
    db = Database(db_path)
    routes = []
    for name in ROUTE_MODULES:
        routes.extend(importlib.import_module(name).routes)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, threading.Event]]:
        # `shutting_down` (request.state.shutting_down) is set by the server's protocol
        # (api/limits.py) as soon as a graceful stop begins, so long handlers can stop early.
        job_worker = None
        if worker:
            from marketing_cli import services
            from marketing_cli.jobs import Worker

            services.load_job_handlers()  # the worker claims only the job types it has handlers for
            job_worker = Worker(db.path, interval=worker_interval, lease_seconds=lease_seconds, workers=workers,
                                share=workspace_share)
            job_worker.start()
        try:
            yield {"shutting_down": threading.Event()}
        finally:
            # The graceful-shutdown time is over: requests still running SQL are stopped
            # (ShutdownGuard answers them 503) so that the process exits now.
            db.interrupt_all()
            if job_worker is not None:
                job_worker.stop()
            db.close()

    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(ShutdownGuard)],
        exception_handlers={
            MktError: mkt_error_handler,
            HTTPException: http_error_handler,
            ClientDisconnect: client_disconnect_handler,
            sqlite3.DatabaseError: database_error_handler,  # a retired SQLite database: an IntegrityError
            Exception: server_error_handler,
        },
    )
    app.state.db = db
    app.state.declared = strict.declarations(routes)  # what each operation accepts (api/strict.py)
    if body_timeout is not None:
        app.state.body_timeout = body_timeout
    app.state.public_rates_limiter = RateLimiter(60, 60.0, rates.PUBLIC_LIMIT)
    return app
