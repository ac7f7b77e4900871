"""The one decoder of the files users send (CSV imports, over HTTP and from the CLI).

A file is checked to be UTF-8 from its first byte to its last BEFORE any of it is
imported, whichever face it came through: the API reads the body (bounded by its size
cap) and decodes it with `decode_text`; the CLI checks the file in a first streaming pass
(`open_text`: binary chunks, constant memory, then reopened as text; standard input is
spooled to a temporary file while it is checked). A bad byte anywhere is one 400 naming
the line and the byte offset (counted from 0 in the file as sent), and nothing is
written: both faces answer the same file the same way (tests/contacts/test_data_paths.py).

A byte-order mark at the start is dropped (Excel writes one); line endings are kept as
sent (`newline=""`), which the csv module needs.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Iterable
from typing import BinaryIO, TextIO

from marketing_cli.errors import MktError

NOT_UTF8 = "The file is not UTF-8 text ({reason} at line {line}, byte {offset}): nothing was imported."
CHUNK = 1 << 20
_SPOOL_IN_MEMORY = 16 << 20


def _error(reason: str, line: int, offset: int) -> MktError:
    return MktError(400, NOT_UTF8.format(reason=reason, line=line, offset=offset))


def check_utf8(chunks: Iterable[bytes]) -> None:
    """MktError(400) naming the line and byte offset of the first byte that is not UTF-8.

    The chunks may split a character anywhere: an incomplete sequence at the end of a
    chunk is carried into the next one.
    """
    carry = b""
    base = 0  # offset in the file of carry's first byte
    lines = 1  # line number at `base`
    for chunk in chunks:
        data = carry + chunk
        try:
            data.decode("utf-8")
            good = len(data)
        except UnicodeDecodeError as exc:
            if exc.end == len(data) and exc.reason == "unexpected end of data":
                good = exc.start  # a character cut by the chunk boundary: wait for the rest
            else:
                raise _error(exc.reason, lines + data.count(b"\n", 0, exc.start), base + exc.start) from None
        lines += data.count(b"\n", 0, good)
        base += good
        carry = data[good:]
    if carry:
        try:
            carry.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _error(exc.reason, lines + carry.count(b"\n", 0, exc.start), base + exc.start) from None


def decode_text(data: bytes) -> str:
    """A whole file's bytes as text (a byte-order mark dropped), or MktError(400)."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        check_utf8([data])  # names the line and offset
        raise  # unreachable: check_utf8 raised


def _chunks(handle: BinaryIO) -> Iterable[bytes]:
    while block := handle.read(CHUNK):
        yield block


def open_text(path: str) -> TextIO:
    """A file checked to be UTF-8 throughout, open as text for the csv module, or MktError(400)."""
    try:
        with open(path, "rb") as handle:
            check_utf8(_chunks(handle))
        return open(path, encoding="utf-8-sig", newline="")
    except OSError as exc:
        raise MktError(400, f"Cannot read {path}: {exc.strerror or exc}.") from None


def spool_text(stream: BinaryIO) -> TextIO:
    """A stream (standard input) copied to a temporary file while it is checked, then open
    as text from the start; or MktError(400)."""
    spool = tempfile.SpooledTemporaryFile(max_size=_SPOOL_IN_MEMORY)
    try:
        def copied() -> Iterable[bytes]:
            for block in _chunks(stream):
                spool.write(block)
                yield block

        check_utf8(copied())
        spool.seek(0)
        return io.TextIOWrapper(spool, encoding="utf-8-sig", newline="")  # closing it closes the spool
    except BaseException:
        spool.close()
        raise


def count_lines(path: str | os.PathLike[str], chunk: int = CHUNK) -> int:
    """Newlines in a file, read in binary chunks (for a progress bar's total; fast)."""
    total = 0
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            total += block.count(b"\n")
    return total
