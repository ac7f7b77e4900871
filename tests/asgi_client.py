"""The HTTP tests' client: the app called in the test's own thread, one request at a time.

Starlette's TestClient runs the app on an event loop in a second thread (anyio's blocking
portal) and crosses between the threads for every ASGI message: about eight hand-overs a
request. One shard of the robustness sweep (8,488 requests, SQLite, a quiet machine) took
21.6 s through TestClient and 7.5 s through this client. The tests call the app one request
at a time, so `InlineClient` runs each request to completion on an
event loop of the calling thread (httpx's ASGITransport inside `loop.run_until_complete`):
no thread to cross, except the one the app itself uses for a synchronous endpoint.

It answers as TestClient does where the tests rely on it: base URL http://testserver,
redirects followed unless asked otherwise, the User-Agent "testclient", the client address
("testclient", 50000), the app's exceptions answered 500 (raise_server_exceptions=False),
and, as a context manager, the app's lifespan run (its state given to every request).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Self

import httpx


class _Chunks(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


class _Inline(httpx.BaseTransport):
    """Hands each request to the client's serving task and runs the loop until it is answered."""

    def __init__(self, client: InlineClient) -> None:
        self.client = client

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if not isinstance(request.stream, httpx.AsyncByteStream):  # a body from an iterator: its chunks, as sent
            request.stream = _Chunks(list(request.stream))  # type: ignore[arg-type]
        answer = self.client.loop.create_future()
        self.client.queue.put_nowait((request, answer))
        status, headers, body = self.client.loop.run_until_complete(answer)
        # The raw body: the client decodes it as the headers say (a gzip body included).
        return httpx.Response(status, headers=headers, stream=httpx.ByteStream(body), request=request)


class InlineClient(httpx.Client):
    """An httpx.Client over `app`, run in this thread (see the module docstring)."""

    def __init__(self, app: Any, *, follow_redirects: bool = True, **kwargs: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.queue: asyncio.Queue[tuple[httpx.Request, asyncio.Future[Any]]] = asyncio.Queue()
        self.app = app
        self.lifespan_state: dict[str, Any] | None = None
        self._lifespan: Any = None

        async def with_state(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if self.lifespan_state is not None:  # as a server does: a shallow copy per request
                scope["state"] = dict(self.lifespan_state)
            await app(scope, receive, send)

        self.asgi = httpx.ASGITransport(app=with_state, raise_app_exceptions=False, client=("testclient", 50000))
        # One long-lived task answers every request: the app's synchronous endpoints run in
        # anyio's worker threads, which live as long as the task that first used them (a task
        # per request would start a thread, and a database connection, for each request).
        self.serving = self.loop.create_task(self._serve())
        kwargs.setdefault("base_url", "http://testserver")
        super().__init__(transport=_Inline(self), follow_redirects=follow_redirects,
                         headers={"user-agent": "testclient"}, **kwargs)

    async def _serve(self) -> None:
        while True:
            request, answer = await self.queue.get()
            try:
                response = await self.asgi.handle_async_request(request)
                body = b"".join([chunk async for chunk in response.aiter_raw()])
                answer.set_result((response.status_code, response.headers.raw, body))
            except Exception as error:  # noqa: BLE001 - the transport's own, for the caller (the app's: a 500)
                answer.set_exception(error)

    def __enter__(self) -> Self:
        self._lifespan = self.app.router.lifespan_context(self.app)
        state = self.loop.run_until_complete(self._lifespan.__aenter__())
        self.lifespan_state = dict(state or {})
        super().__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self._lifespan is not None:
                self.loop.run_until_complete(self._lifespan.__aexit__(None, None, None))
        finally:
            super().__exit__(*exc)
            self.close_loop()

    def close_loop(self) -> None:
        self.serving.cancel()
        try:
            self.loop.run_until_complete(self.serving)
        except asyncio.CancelledError:
            pass
        self.loop.run_until_complete(self.loop.shutdown_default_executor())
        self.loop.close()
