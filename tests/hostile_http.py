"""Real local servers that misbehave, and a network stand-in, for the outbound-call tests.

`HostileServer(kind, ...)` listens on 127.0.0.1 and answers every request one way:

    ok          status, headers and body as given
    slow_head   the status line and headers a byte at a time, every `interval` s, never done
    slow_body   a whole head (Content-Length 1,000,000), then the body a byte at a time
    endless     a 200 without a length (Connection: close), then bytes as fast as it can, for ever
    huge        a 200 declaring `size` bytes, then sending them as fast as it can
    redirect    a 302 to `location`

Each connection stops after `lasting` seconds at most (so code without a deadline ends the
test instead of hanging it). `requests` lists what arrived (method, path, headers, body);
`sent` the bytes written on each connection before it ended.

`NetStandIn(monkeypatch)` stands in for DNS and routing: `names[host]` is the list of
addresses a lookup answers, one per lookup (the last one repeats), as a TTL-0 name does;
`routes[address]` sends a connection to that address to a local port instead (a public
address can then be served by a local server). `lookups` and `connects` record what was asked.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any


class HostileServer:
    def __init__(self, kind: str, *, status: int = 200, headers: dict[str, str] | None = None, body: bytes = b"",
                 interval: float = 0.2, lasting: float = 8.0, size: int = 200 * 1024 * 1024,
                 location: str = "") -> None:
        self.kind, self.status, self.headers, self.body = kind, status, headers or {}, body
        self.interval, self.lasting, self.size, self.location = interval, lasting, size, location
        self.requests: list[dict[str, Any]] = []
        self.sent: list[int] = []
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._workers: list[threading.Thread] = []

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._listener.close()
        self._thread.join(5)
        for worker in self._workers:
            worker.join(5)

    def _accept(self) -> None:
        self._listener.settimeout(0.05)
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except (TimeoutError, OSError):
                continue
            worker = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._workers.append(worker)
            worker.start()

    def _read_request(self, conn: socket.socket) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        length = int(headers.get("content-length", "0") or 0)
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            body += chunk
        self.requests.append({"method": method, "path": path, "headers": headers, "body": body})

    def _serve(self, conn: socket.socket) -> None:
        sent = 0
        until = time.monotonic() + self.lasting

        def send(data: bytes) -> None:
            nonlocal sent
            conn.sendall(data)
            sent += len(data)

        def going() -> bool:
            return not self._stop.is_set() and time.monotonic() < until

        try:
            conn.settimeout(5)
            self._read_request(conn)
            if self.kind == "ok":
                extra = {"Content-Length": str(len(self.body)), **self.headers}
                send(_head(self.status, extra) + self.body)
            elif self.kind == "redirect":
                send(_head(302, {"Location": self.location, "Content-Length": "0"}))
            elif self.kind == "slow_head":
                head = _head(200, {"Content-Type": "text/html"})[:-2] + b"X-Slow: " + b"a" * 100_000
                for byte in head:
                    if not going():
                        break
                    send(bytes([byte]))
                    time.sleep(self.interval)
            elif self.kind == "slow_body":
                send(_head(200, {"Content-Type": "text/html", "Content-Length": "1000000"}))
                while going():
                    send(b"x")
                    time.sleep(self.interval)
            elif self.kind == "endless":
                send(_head(200, {"Content-Type": "text/html", "Connection": "close", **self.headers}))
                block = b"<p>endless</p>" * 4096
                while going():
                    send(block)
            elif self.kind == "huge":
                send(_head(200, {"Content-Type": "text/html", "Content-Length": str(self.size), **self.headers}))
                block = b"x" * 65536
                left = self.size
                while left > 0 and going():
                    send(block[:left])
                    left -= len(block)
        except OSError:  # the client hung up: what these servers are for
            pass
        finally:
            self.sent.append(sent)
            conn.close()


def _head(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} Whatever"] + [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class NetStandIn:
    def __init__(self, monkeypatch: Any) -> None:
        self.names: dict[str, list[str]] = {}
        self.routes: dict[str, int] = {}
        self.lookups: list[str] = []
        self.connects: list[tuple[str, int]] = []
        real_lookup, real_connect = socket.getaddrinfo, socket.create_connection

        def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
            name = host.decode() if isinstance(host, bytes) else host
            if name not in self.names:
                return real_lookup(host, port, *args, **kwargs)
            self.lookups.append(name)
            answers = self.names[name]
            address = answers.pop(0) if len(answers) > 1 else answers[0]
            return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, int(port or 0)))]

        def create_connection(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
            host, port = address[0], address[1]
            self.connects.append((host, port))
            if host in self.routes:
                return real_connect(("127.0.0.1", self.routes[host]), *args, **kwargs)
            return real_connect(address, *args, **kwargs)

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
        monkeypatch.setattr(socket, "create_connection", create_connection)
