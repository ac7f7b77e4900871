"""HTTP throughput of `mkt serve` against a bare async Starlette endpoint on the same uvicorn settings.

Rows: GET /v1/workspace (authentication + workspace + billing read) and
POST /v1/contacts/upsert (a write per request), each as requests/s beside the bare
endpoint measured in the same run with the same wrk settings (-t2 -c32).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

from common import free_port, python_cmd, row, server, wrk_rps

UPSERT_LUA = """
local counter = 0
request = function()
  counter = counter + 1
  local body = string.format('{"email_address":"bench-%d-%d@example.com","fields":{"first_name":"Bench"}}',
                             math.random(1, 1000000000), counter)
  return wrk.format("POST", "/v1/contacts/upsert", {["Content-Type"] = "application/json",
                    ["Authorization"] = "Bearer KEY"}, body)
end
"""


def _setup_db(directory: Path) -> tuple[Path, str]:
    db = directory / "bench.db"
    out = subprocess.run(python_cmd("-m", "marketing_cli", "--db", str(db), "init", "--name", "Bench", "--json"),
                         capture_output=True, text=True, check=True).stdout
    key = json.loads(out)["api_key"]
    subprocess.run(python_cmd("-m", "marketing_cli", "--db", str(db), "billing", "allowance", "set", "contacts",
                              "100000000"), capture_output=True, check=True)
    return db, key


def run(quick: bool) -> list[dict]:
    seconds = 3 if quick else 10
    with tempfile.TemporaryDirectory() as tmp:
        db, key = _setup_db(Path(tmp))
        port = free_port()
        with server(python_cmd("bench/bare_app.py", str(port)), port) as base:
            bare = wrk_rps(base + "/ok", seconds)
        port = free_port()
        cmd = python_cmd("-m", "marketing_cli", "--db", str(db), "serve", "--port", str(port), "--no-bootstrap")
        with server(cmd, port) as base:
            headers = {"Authorization": f"Bearer {key}"}
            workspace = wrk_rps(base + "/v1/workspace", seconds, headers=headers)
            try:
                upsert = wrk_rps(base + "/v1/contacts/upsert", seconds, lua=UPSERT_LUA.replace("KEY", key))
            except RuntimeError as exc:  # the endpoint is not there yet, or answered errors
                upsert = None
                print(f"upsert row skipped: {exc}")
    rows = [row("GET /v1/workspace", workspace, "req/s", "bare async endpoint", bare, workspace / bare,
                "ratio >= 0.40", workspace / bare >= 0.40)]
    if upsert is not None:
        rows.append(row("POST /v1/contacts/upsert (new contact each)", upsert, "req/s", "GET /v1/workspace", workspace,
                        upsert / workspace, "reported (write vs read)", True))
    return rows
