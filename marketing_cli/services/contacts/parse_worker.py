"""An import's rows read and checked in a worker process while this process writes (SQLite).

On SQLite the writer runs in the importing process and is mostly Python, holding the GIL, so
a reading thread overlapped nothing (storage/dialect.contacts_import_reads_ahead). A process
has its own GIL: the worker reads the file, checks every row and sends each batch, pickled,
through a pipe; this process unpickles it and writes it. The two overlap when the machine has
a core free, and on a loaded machine two busy processes get two shares of it.

- Made by fork(), so the worker has the file's reader (its position past the header), the
  row parser and its checks exactly as this process built them: the same code reads the
  same rows, so the report's lines and messages are the same as reading here. The worker never
  touches the database and ends with os._exit (no atexit, no flush of inherited buffers).
- At most one batch ahead: the pipe holds a few KiB, so the worker waits in `send` with its
  next batch while a batch is written (memory: a batch here, a batch there).
- Ctrl-C reaches both processes; the worker ignores it and this process stops it (SIGKILL,
  then waits for it), as it does on any error or early exit. An error in the worker (a
  file-level MktError, a decoding error) is raised here, as reading here would have raised it.
- Used for a file of at least WORKER_MIN_BYTES by a caller that asks for it (the CLI): a
  server process (many threads, an event loop) is not forked.
"""

from __future__ import annotations

import gc
import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection, Pipe
from typing import Any

from marketing_cli.errors import MktError

# A batch goes through the pipe in parts of this many rows, so neither process holds a whole
# batch's pickle (some 3.7 MB for 20,000 rows) beside the batch itself.
PART_ROWS = 2_000

# Below this size (about 13,000 rows of issue 42's list) the fork and the pickling cost more than
# the overlap buys.
WORKER_MIN_BYTES = 1 << 20


def worth_a_worker(source: Any) -> bool:
    """Whether `source` is a file on disk of at least WORKER_MIN_BYTES."""
    if not hasattr(os, "fork"):
        return False
    try:  # its size (the header already read is a line: tell() is refused once a file was iterated)
        return os.fstat(source.fileno()).st_size >= WORKER_MIN_BYTES
    except (AttributeError, OSError, ValueError):  # not a file on disk (a list, a pipe, a closed file)
        return False


def _error(exc: BaseException) -> bytes:
    if isinstance(exc, MktError):
        return pickle.dumps(("mkt", (exc.status, exc.message, exc.detail)))
    try:
        return pickle.dumps(("error", exc))
    except Exception:  # noqa: BLE001 - an exception pickle cannot carry: its text
        return pickle.dumps(("error", RuntimeError(f"{type(exc).__name__}: {exc}")))


def _work(make: Callable[[threading.Event], Iterator[Any]], out: Connection) -> None:
    try:
        for item in make(threading.Event()):
            contacts = item.contacts
            for start in range(0, len(contacts), PART_ROWS):
                out.send_bytes(pickle.dumps(("part", contacts[start:start + PART_ROWS]), protocol=pickle.HIGHEST_PROTOCOL))
            out.send_bytes(pickle.dumps(("batch", item._replace(contacts=None)), protocol=pickle.HIGHEST_PROTOCOL))
            del item, contacts
            gc.collect(1)  # the importer's way with the collector (importer._few_collections)
        out.send_bytes(pickle.dumps(("end", None)))
    except BaseException as exc:  # noqa: BLE001 - handed to the importing process, raised there
        out.send_bytes(_error(exc))


def worker_batches(make: Callable[[threading.Event], Iterator[Any]]) -> Iterator[Any]:
    """`make(stop)`'s items (importer._Batch: named tuples with a list of `contacts`), made in a
    forked worker process one ahead of the caller (see above)."""
    incoming, out = Pipe(duplex=False)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()  # nothing buffered here is written twice
        except (AttributeError, OSError, ValueError):
            pass
    pid = os.fork()
    if pid == 0:  # the worker
        code = 0
        try:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the importing process's to handle
            incoming.close()
            _work(make, out)
        except BaseException:  # noqa: BLE001 - the pipe is gone (the importer stopped): nothing to tell
            code = 1
        finally:
            os._exit(code)
    out.close()
    finished = False
    contacts: list[Any] = []
    try:
        while True:
            try:
                message = pickle.loads(incoming.recv_bytes())
            except EOFError:
                raise RuntimeError("The import's reading process ended before the file did.") from None
            kind = message[0]
            if kind == "part":
                contacts += message[1]
                continue
            if kind == "end":
                finished = True
                return
            if kind == "mkt":
                raise MktError(*message[1])
            if kind == "error":
                raise message[1]
            # handed over without a name here keeping it: the caller frees a written batch before
            # the next one is unpickled (one batch in this process, not two)
            message = [message[1]._replace(contacts=contacts)]
            contacts = []
            yield message.pop()
    finally:
        incoming.close()
        if not finished:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        os.waitpid(pid, 0)
