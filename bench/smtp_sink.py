"""An SMTP sink that takes DELAY seconds to answer each message (the DATA command), as a slow
provider does; every message is accepted and dropped.

    python bench/smtp_sink.py PORT DELAY [--aiosmtpd]      (until SIGTERM)

The email benches run the sink on the same 2 cores as the system they measure, so what the
sink costs per message is taken from mkt's workers and the PostgreSQL server. The default
sink is therefore a plain asyncio Protocol (`LeanSink`) that speaks just the SMTP mkt's
transport uses (smtplib): a 220 greeting, EHLO with its capabilities (SIZE, 8BITMIME,
SMTPUTF8; no PIPELINING, no STARTTLS) and HELO, MAIL, RCPT (checked in order), DATA with
its end found as CRLF.CRLF anywhere in the stream (dot-stuffed lines inside never match it;
the message itself is not kept), RSET, NOOP and QUIT; anything else is 502. With DELAY
the final 250 of DATA is sent DELAY seconds after the message ended, and what the client
sends meanwhile waits for it. Measured CPU a message (2026-11-26): 10 smtplib connections
sending 3,000 messages of 4 KB, aiosmtpd's sink 1.37 ms (it parses every address with the
standard library's email header parser, reads DATA line by line and logs each command),
this one 0.32 ms; inside bench_email_workers.py (PostgreSQL, server answering at once)
aiosmtpd's 1.0-1.5 ms, this one 0.22-0.37 ms (docs/performance.md, "Email workers").
`--aiosmtpd` runs the aiosmtpd sink instead (the same answers and delay), for comparison.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading

CAPABILITIES = (b"250-mkt-bench-sink\r\n250-SIZE 33554432\r\n250-8BITMIME\r\n250-SMTPUTF8\r\n"
                b"250 HELP\r\n")
END = b"\r\n.\r\n"


class LeanSink(asyncio.Protocol):
    """One SMTP session: commands line by line, DATA until CRLF.CRLF, each message dropped."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.buffer = b""  # command bytes not yet a whole line
        self.tail: bytes | None = None  # in DATA: the last bytes seen (the end may straddle reads)
        self.held: bytes | None = None  # while the delayed 250 is pending: what the client sent meanwhile
        self.mail = self.rcpt = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.transport.write(b"220 mkt-bench-sink ESMTP\r\n")  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        if self.held is not None:
            self.held += data
            return
        while data:
            if self.tail is not None:  # inside DATA: look for the end, keep nothing else
                seen = self.tail + data
                end = seen.find(END)
                if end == -1:
                    self.tail = seen[-4:]
                    return
                data, self.tail = seen[end + len(END):], None
                self.mail = self.rcpt = False
                if self.delay:
                    self.held = data
                    asyncio.get_running_loop().call_later(self.delay, self._accepted)
                    return
                self.transport.write(b"250 OK\r\n")  # type: ignore[attr-defined]
                continue
            self.buffer += data
            data = b""
            while self.tail is None and self.held is None:
                line, found, rest = self.buffer.partition(b"\r\n")
                if not found:
                    if len(self.buffer) > 4096:
                        self.transport.write(b"500 Line too long\r\n")  # type: ignore[attr-defined]
                        self.transport.close()
                    return
                self.buffer = rest
                self._command(line)
            if self.tail is not None:  # DATA began: the rest of this read is the message
                data, self.buffer = self.buffer, b""

    def _accepted(self) -> None:
        if self.transport.is_closing():  # type: ignore[attr-defined]
            return
        self.transport.write(b"250 OK\r\n")  # type: ignore[attr-defined]
        held, self.held = self.held, None
        if held:
            self.data_received(held)

    def _command(self, line: bytes) -> None:
        verb = line[:4].upper()
        write = self.transport.write  # type: ignore[attr-defined]
        if verb == b"EHLO":
            self.mail = self.rcpt = False
            write(CAPABILITIES)
        elif verb == b"HELO":
            self.mail = self.rcpt = False
            write(b"250 mkt-bench-sink\r\n")
        elif verb == b"MAIL":
            if self.mail:
                write(b"503 Error: nested MAIL command\r\n")
            else:
                self.mail = True
                write(b"250 OK\r\n")
        elif verb == b"RCPT":
            if not self.mail:
                write(b"503 Error: need MAIL command\r\n")
            else:
                self.rcpt = True
                write(b"250 OK\r\n")
        elif verb == b"DATA":
            if not self.rcpt:
                write(b"503 Error: need RCPT command\r\n")
            else:
                self.tail = b"\r\n"  # the CRLF that ended the DATA line: a message may be empty
                write(b"354 End data with <CR><LF>.<CR><LF>\r\n")
        elif verb == b"RSET":
            self.mail = self.rcpt = False
            write(b"250 OK\r\n")
        elif verb == b"NOOP":
            write(b"250 OK\r\n")
        elif verb == b"QUIT":
            write(b"221 Bye\r\n")
            self.transport.close()
        else:
            write(b"502 Command not implemented\r\n")


def _lean(port: int, delay: float) -> None:
    async def serve() -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        server = await loop.create_server(lambda: LeanSink(delay), "127.0.0.1", port, backlog=128)
        async with server:
            await stop.wait()

    asyncio.run(serve())


class SlowSink:
    """aiosmtpd's handler (`--aiosmtpd`)."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    async def handle_DATA(self, server, session, envelope) -> str:  # noqa: ANN001 - aiosmtpd's hook
        if self.delay:
            await asyncio.sleep(self.delay)
        return "250 OK"


def _aiosmtpd(port: int, delay: float) -> None:
    from aiosmtpd.controller import Controller

    controller = Controller(SlowSink(delay), hostname="127.0.0.1", port=port)
    controller.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    controller.stop()


def main() -> None:
    port, delay = int(sys.argv[1]), float(sys.argv[2])
    (_aiosmtpd if "--aiosmtpd" in sys.argv[3:] else _lean)(port, delay)


if __name__ == "__main__":
    main()
