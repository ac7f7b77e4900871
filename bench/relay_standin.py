"""A relay (smart host) that passes a provider's push-back on: RCPT TO an address at one of the
named domains is answered REPLY for SECONDS from the first such RCPT (Gmail's `421 4.7.28` ...
"unusual rate"), every other recipient is accepted; each delivered message is logged.

    python bench/relay_standin.py PORT LOG [DOMAIN=SECONDS ...]      (until SIGTERM)

LOG gets one line per answer: `<time.time()> <code> <address>`, 250 once the message's DATA
was accepted (so an address twice in the log with 250 was delivered twice), 421 for each
push-back. It is bench/smtp_sink.py's lean sink (the same SMTP, a fraction of aiosmtpd's CPU
a message) with the RCPT answer scripted.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from smtp_sink import LeanSink  # noqa: E402 - beside this file

REPLY = (b"421 4.7.28 [192.0.2.1] Our system has detected an unusual rate of unsolicited mail originating from "
         b"your IP address. To protect our users from spam, mail sent from your IP address has been temporarily "
         b"rate limited.\r\n")


class PushBackRelay(LeanSink):
    def __init__(self, push_back: dict[str, float], began: dict[str, float], log: list[str]) -> None:
        super().__init__(0.0)
        self.push_back, self.began, self.log = push_back, began, log
        self.rcpts: list[str] = []

    def _command(self, line: bytes) -> None:
        verb = line[:4].upper()
        if verb == b"RCPT" and self.mail:
            address = line.partition(b":")[2].strip().strip(b"<>").split(b">")[0].decode("utf-8", "replace")
            domain = address.rpartition("@")[2].lower()
            if domain in self.push_back:
                now = time.time()
                if now - self.began.setdefault(domain, now) < self.push_back[domain]:
                    self.log.append(f"{now:.6f} 421 {address}\n")
                    self.transport.write(REPLY)  # type: ignore[attr-defined]
                    return
            self.rcpts.append(address)
        elif verb in (b"MAIL", b"RSET", b"EHLO", b"HELO"):
            self.rcpts = []
        super()._command(line)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.rcpts and not self.rcpt and self.tail is None:  # the message's DATA ended: 250 sent
            now = time.time()
            self.log.extend(f"{now:.6f} 250 {address}\n" for address in self.rcpts)
            self.rcpts = []


def main() -> None:
    port, log_path = int(sys.argv[1]), Path(sys.argv[2])
    push_back = {k.lower(): float(v) for k, v in (arg.split("=") for arg in sys.argv[3:])}
    began: dict[str, float] = {}
    log: list[str] = []

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        server = await loop.create_server(lambda: PushBackRelay(push_back, began, log), "127.0.0.1", port, backlog=128)

        async def flush() -> None:
            while True:
                await asyncio.sleep(0.5)
                if log:
                    lines, log[:] = list(log), []
                    with log_path.open("a") as out:
                        out.writelines(lines)
        flusher = asyncio.create_task(flush())
        async with server:
            await stop.wait()
        flusher.cancel()
        with log_path.open("a") as out:
            out.writelines(log)

    asyncio.run(serve())


if __name__ == "__main__":
    main()
