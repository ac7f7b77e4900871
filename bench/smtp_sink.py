"""An SMTP sink that takes DELAY seconds to answer each message (the DATA command), as a slow
provider does; every message is accepted and dropped.

    python bench/smtp_sink.py PORT DELAY      (until SIGTERM)
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading

from aiosmtpd.controller import Controller


class SlowSink:
    def __init__(self, delay: float) -> None:
        self.delay = delay

    async def handle_DATA(self, server, session, envelope) -> str:  # noqa: ANN001 - aiosmtpd's hook
        if self.delay:
            await asyncio.sleep(self.delay)
        return "250 OK"


def main() -> None:
    port, delay = int(sys.argv[1]), float(sys.argv[2])
    controller = Controller(SlowSink(delay), hostname="127.0.0.1", port=port)
    controller.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    controller.stop()


if __name__ == "__main__":
    main()
