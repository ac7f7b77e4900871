"""A fast local stand-in for Twilio's Messages API, for the benchmarks (not Twilio).

    python bench/twilio_standin.py PORT ACCOUNT_SID AUTH_TOKEN

A bare ASGI app on uvicorn (httptools, uvloop), so that the stand-in is not what limits a
benchmark (tests/factories.py:TwilioStandIn, a thread per request, tops out near 170
requests per second). `POST /2010-04-01/Accounts/{SID}/Messages.json` with HTTP basic
auth SID:TOKEN and a form body (To, From, Body, StatusCallback): 201 and Twilio's message
JSON with a unique `sid`; a wrong account or password: 401 with Twilio's error JSON
(code 20003); a form without To or Body: 400 (code 21604). `GET /` answers 200 (a probe).
`GET /count` answers the number of messages taken so far; `GET /log` each of them as
[To, Body, the time it was taken (Unix seconds)], in the order taken (the tests that count who
was texted, and when, read it).
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import sys
import time
from urllib.parse import parse_qsl


def make_app(account_sid: str, auth_token: str):  # noqa: ANN201 - an ASGI callable
    path = f"/2010-04-01/Accounts/{account_sid}/Messages.json"
    expected = b"Basic " + base64.b64encode(f"{account_sid}:{auth_token}".encode())
    counter = itertools.count(1)
    prefix = f"{os.getpid() & 0xFFFFFFFF:08x}"
    taken = [0]
    log: list[list] = []

    async def send_json(send, status: int, body: dict) -> None:  # noqa: ANN001
        data = json.dumps(body).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
        await send({"type": "http.response.body", "body": data})

    async def app(scope, receive, send) -> None:  # noqa: ANN001
        if scope["type"] != "http":
            return
        if scope["method"] == "GET":
            answers = {"/count": {"count": taken[0]}, "/log": log}
            await send_json(send, 200, answers.get(scope["path"], {"ok": True}))
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        auth = dict(scope["headers"]).get(b"authorization", b"")
        if scope["path"] != path or auth != expected:
            await send_json(send, 401, {"code": 20003, "message": "Authenticate", "status": 401,
                                        "more_info": "https://www.twilio.com/docs/errors/20003"})
            return
        form = dict(parse_qsl(b"".join(chunks).decode(), keep_blank_values=True))
        if not form.get("To") or not form.get("Body"):
            await send_json(send, 400, {"code": 21604, "message": "A 'To' phone number is required.", "status": 400,
                                        "more_info": "https://www.twilio.com/docs/errors/21604"})
            return
        taken[0] += 1
        log.append([form["To"], form["Body"], time.time()])
        await send_json(send, 201, {
            "sid": f"SM{prefix}{next(counter):024x}", "account_sid": account_sid, "to": form["To"],
            "from": form.get("From"), "body": form["Body"], "status": "queued", "num_segments": "1",
            "price": None, "error_code": None, "error_message": None, "api_version": "2010-04-01",
            "date_created": "Mon, 23 Nov 2026 10:00:00 +0000"})

    return app


def main() -> None:
    import uvicorn

    port, account_sid, auth_token = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    uvicorn.run(make_app(account_sid, auth_token), host="127.0.0.1", port=port, log_level="warning",
                access_log=False, http="httptools", loop="uvloop", backlog=2048)


if __name__ == "__main__":
    main()
