"""Tail latency of `mkt serve` while the heaviest accepted search runs (docs/reliability.md).

Row: p99 of GET /v1/workspace from 4 sequential clients while another client runs a
search of 250 CONTAINS conditions over every contact in a loop, against the p99 of the
same clients with nothing else running, in the same run on the same server. Latencies
are measured in Python (httpx), so no `wrk` is needed; the client's own overhead is in
both figures alike.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from common import free_port, python_cmd, row, server

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

CONDITIONS = 250
CLIENTS = 4


def _setup_db(directory: Path, contacts: int) -> tuple[Path, str]:
    from marketing_cli.services.contacts import bulk
    from marketing_cli.storage.db import connect

    db = directory / "bench.db"
    out = subprocess.run(python_cmd("-m", "marketing_cli", "--db", str(db), "init", "--name", "Bench", "--json"),
                         capture_output=True, text=True, check=True).stdout
    subprocess.run(python_cmd("-m", "marketing_cli", "--db", str(db), "billing", "allowance", "set", "contacts",
                              "100000000"), capture_output=True, check=True)
    csv_text = "email,first_name\n" + "".join(f"person{i}@example.com,Name{i}\n" for i in range(contacts))
    conn = connect(db)
    bulk.import_contacts(conn, 1, csv_text.splitlines(keepends=True))
    conn.close()
    return db, json.loads(out)["api_key"]


def _heavy_search_body() -> dict:
    # Every condition matches every contact, so each row is tested against all of them.
    return {"fields": [{"merge_tag": "email_address", "operator": "CONTAINS", "value": "example"}
                       for i in range(CONDITIONS)], "limit": 10}


def _p99_ms(base: str, key: str, seconds: float) -> tuple[float, int, float]:
    latencies: list[float] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def client() -> None:
        mine = []
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
            while time.monotonic() < deadline:
                started = time.perf_counter()
                http.get("/v1/workspace").raise_for_status()
                mine.append(time.perf_counter() - started)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statistics.quantiles(latencies, n=100)[98] * 1000, len(latencies), statistics.median(latencies) * 1000


def run(quick: bool) -> list[dict]:
    contacts = 20_000 if quick else 100_000
    seconds = 4 if quick else 15
    with tempfile.TemporaryDirectory() as tmp:
        db, key = _setup_db(Path(tmp), contacts)
        port = free_port()
        with server(python_cmd("-m", "marketing_cli", "--db", str(db), "serve", "--port", str(port),
                               "--no-bootstrap"), port) as base:
            _p99_ms(base, key, 1)  # warm up
            idle, idle_n, idle_median = _p99_ms(base, key, seconds)
            stop = threading.Event()
            searches: list[float] = []

            def heavy() -> None:
                body = _heavy_search_body()
                with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=300) as http:
                    while not stop.is_set():
                        started = time.perf_counter()
                        r = http.post("/v1/contacts/search", json=body)
                        r.raise_for_status()
                        searches.append(time.perf_counter() - started)

            thread = threading.Thread(target=heavy)
            thread.start()
            time.sleep(0.5)
            loaded, loaded_n, loaded_median = _p99_ms(base, key, seconds)
            stop.set()
            thread.join()
    print(f"alone: {idle_n} requests, median {idle_median:.1f} ms, p99 {idle:.1f} ms; beside the search loop: "
          f"{loaded_n} requests, median {loaded_median:.1f} ms, p99 {loaded:.1f} ms; {len(searches)} searches, "
          f"median {statistics.median(searches):.2f} s")
    name = (f"GET /v1/workspace p99 while a {CONDITIONS}-CONTAINS search over {contacts:,} contacts "
            f"(median {statistics.median(searches):.2f} s) runs in a loop")
    return [row(name, loaded, "ms", "p99 with nothing else running", idle, loaded / idle, "ratio <= 10",
                loaded / idle <= 10)]
