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

Other encodings (`--encoding` / `encoding=`, or detected). A named encoding is checked the
same way, from the first byte to the last (a byte it cannot read is a 400 naming it, the
line and the offset). Without a name, a file that is not UTF-8 is re-read in another
encoding only when it looks like a file written in one throughout: bytes outside ASCII on
at least two lines and not one valid UTF-8 multi-byte character anywhere. Then
charset-normalizer names the encoding from the file's first MiB (cp1252 when it is one of
the encodings that read that sample best: Excel's Western default), the whole file is
checked in it, and the summary says which encoding was detected. Any other file that is
not UTF-8 (a UTF-8 file with a bad byte, a file with one stray byte) is refused as before,
with the line and offset of its first bad byte: it is never silently re-decoded.

The delimiter (`--delimiter` / `delimiter=`: comma, semicolon, tab or pipe) is otherwise
read from the header line: the candidate that occurs most often outside quotes (a comma on
a tie or when none occurs).
"""

from __future__ import annotations

import codecs
import io
import os
import re
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import BinaryIO, TextIO

from marketing_cli.errors import MktError

NAME_IT = " If it is in another encoding, name it with --encoding (API: encoding=)."
NOT_UTF8 = "The file is not UTF-8 text ({reason} at line {line}, byte {offset}): nothing was imported." + NAME_IT
NOT_IN = "The file is not {encoding} text ({reason} at line {line}, byte {offset}): nothing was imported."
DETECTED_WRONG = ("The file is not UTF-8 text, and it is not {encoding} (detected from its start) either ({reason} at "
                  "line {line}, byte {offset}): nothing was imported. Name its encoding with --encoding (API: "
                  "encoding=).")
UNKNOWN_ENCODING = ("Unknown text encoding {name!r} (--encoding / encoding=): give one Python knows, for example "
                    "utf-8, cp1252, latin-1, utf-16.")
DELIMITERS = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}
BAD_DELIMITER = ("The delimiter (--delimiter / delimiter=) must be one of: comma (,), semicolon (;), tab, pipe (|); "
                 "got {raw!r}.")
CHUNK = 1 << 20
SAMPLE = 1 << 20  # bytes charset-normalizer reads to name an encoding
_SPOOL_IN_MEMORY = 16 << 20
_NOT_FILE_ENCODINGS = frozenset({"idna", "punycode", "undefined", "unicode-escape", "raw-unicode-escape"})
_PREFERRED = "cp1252"
_UTF8 = "utf-8"


@dataclass(frozen=True)
class Decoding:
    """How a file's bytes were read: the codec's name, and whether it was detected."""

    encoding: str
    detected: bool = False


def check_encoding(name: str | None) -> str | None:
    """The codec name for `name` (None: UTF-8 or detected), or MktError(400)."""
    if name is None or not name.strip():
        return None
    try:
        info = codecs.lookup(name.strip())
    except (LookupError, ValueError):
        raise MktError(400, UNKNOWN_ENCODING.format(name=name)) from None
    if not getattr(info, "_is_text_encoding", True) or info.name in _NOT_FILE_ENCODINGS:
        raise MktError(400, UNKNOWN_ENCODING.format(name=name))
    return _UTF8 if info.name in ("utf-8", "utf-8-sig") else info.name


def check_delimiter(raw: str | None) -> str | None:
    """`,` `;` `|` or a tab (also by name: comma, semicolon, tab, pipe, \\t), None when not given; or MktError(400)."""
    if raw is None or raw == "":
        return None
    if raw in DELIMITERS:
        return raw
    text = raw.strip().lower()
    if text in ("\\t", "tab"):
        return "\t"
    for char, name in DELIMITERS.items():
        if text in (char, name):
            return char
    raise MktError(400, BAD_DELIMITER.format(raw=raw))


def sniff_delimiter(header: str) -> str:
    """The delimiter of a header line: the candidate seen most often outside quotes (comma on a tie or none)."""
    counts = dict.fromkeys(DELIMITERS, 0)
    quoted = False
    for char in header:
        if char == '"':
            quoted = not quoted
        elif not quoted and char in counts:
            counts[char] += 1
    best = max(counts, key=lambda c: (counts[c], c == ","))
    return best if counts[best] else ","


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


def check_in(chunks: Iterable[bytes], encoding: str, message: str = NOT_IN) -> None:
    """MktError(400) naming the line and byte offset of the first byte `encoding` cannot read."""
    decoder = codecs.getincrementaldecoder(encoding)("strict")
    base = 0  # offset in the file of the first byte of this chunk
    lines = 1
    for chunk in [*chunks, b""]:
        pending = decoder.getstate()[0]
        try:
            text = decoder.decode(chunk, final=not chunk)
        except UnicodeDecodeError as exc:
            data = pending + chunk
            try:
                newlines = data[:exc.start].decode(encoding, "replace").count("\n")
            except (ValueError, LookupError):
                newlines = data.count(b"\n", 0, exc.start)
            raise MktError(400, message.format(encoding=encoding, reason=exc.reason,
                                               line=lines + newlines,
                                               offset=base - len(pending) + exc.start)) from None
        except ValueError as exc:  # a codec that cannot decode at all ('undefined'), or a label error ('idna')
            raise MktError(400, message.format(encoding=encoding, reason=str(exc) or type(exc).__name__,
                                               line=lines, offset=base)) from None
        lines += text.count("\n")
        base += len(chunk)


_VALID_MULTIBYTE = re.compile(rb"[\xc2-\xdf][\x80-\xbf]|\xe0[\xa0-\xbf][\x80-\xbf]|[\xe1-\xec\xee\xef][\x80-\xbf]{2}"
                              rb"|\xed[\x80-\x9f][\x80-\xbf]|\xf0[\x90-\xbf][\x80-\xbf]{2}|[\xf1-\xf3][\x80-\xbf]{3}"
                              rb"|\xf4[\x80-\x8f][\x80-\xbf]{2}")
_NON_ASCII_LINE = re.compile(rb"[^\n]*[\x80-\xff]")


def _looks_legacy(chunks: Iterable[bytes]) -> bool:
    """Bytes outside ASCII on two lines or more, and no valid UTF-8 multi-byte character anywhere.

    Chunks are read with a one-line overlap, so a character or a line cut by a chunk
    boundary is seen whole.
    """
    lines_seen = 0
    carry = b""
    for chunk in chunks:
        data = carry + chunk
        cut = data.rfind(b"\n") + 1
        whole, carry = (data[:cut], data[cut:]) if cut else (b"", data)
        if whole.isascii():
            continue
        if _VALID_MULTIBYTE.search(whole):
            return False
        lines_seen += len(_NON_ASCII_LINE.findall(whole))
    if carry and not carry.isascii():
        if _VALID_MULTIBYTE.search(carry):
            return False
        lines_seen += 1
    return lines_seen >= 2


def _detect(sample: bytes) -> str | None:
    from charset_normalizer import from_bytes

    cut = sample.rfind(b"\n") + 1
    matches = list(from_bytes(sample[:cut] if 0 < cut < len(sample) else sample))
    if not matches:
        return None
    best = min(m.chaos for m in matches)
    for match in matches:
        if match.chaos <= best and _PREFERRED in match.could_be_from_charset:
            return _PREFERRED
    return codecs.lookup(matches[0].encoding).name


def _decide(chunks_of: Callable[[], Iterable[bytes]], sample: Callable[[], bytes],
            encoding: str | None) -> Decoding:
    """Check the file (read again by each call of `chunks_of`) and name its encoding, or MktError(400)."""
    if encoding is not None and encoding != _UTF8:
        check_in(chunks_of(), encoding)
        return Decoding(encoding)
    try:
        check_utf8(chunks_of())
        return Decoding(_UTF8)
    except MktError:
        if encoding is not None or not _looks_legacy(chunks_of()):
            raise
        found = _detect(sample())
        if found is None or found == _UTF8:
            raise
    check_in(chunks_of(), found, DETECTED_WRONG)
    return Decoding(found, detected=True)


def _codec(decoding: Decoding) -> str:
    return "utf-8-sig" if decoding.encoding == _UTF8 else decoding.encoding


def decode_text(data: bytes, encoding: str | None = None) -> tuple[str, Decoding]:
    """A whole file's bytes as text (a byte-order mark dropped) and how it was read, or MktError(400)."""
    decoding = _decide(lambda: [data], lambda: data[:SAMPLE], check_encoding(encoding))
    return data.decode(_codec(decoding)), decoding


def _chunks(handle: BinaryIO) -> Iterable[bytes]:
    while block := handle.read(CHUNK):
        yield block


def _reread(handle: BinaryIO) -> Iterable[bytes]:
    handle.seek(0)
    return _chunks(handle)


def _sample(handle: BinaryIO) -> bytes:
    handle.seek(0)
    return handle.read(SAMPLE)


def open_text(path: str, encoding: str | None = None) -> tuple[TextIO, Decoding]:
    """A file checked throughout (UTF-8, `encoding`, or detected), open as text for the csv
    module, and how it was read; or MktError(400)."""
    codec = check_encoding(encoding)
    try:
        with open(path, "rb") as handle:
            decoding = _decide(lambda: _reread(handle), lambda: _sample(handle), codec)
        return open(path, encoding=_codec(decoding), newline=""), decoding
    except OSError as exc:
        raise MktError(400, f"Cannot read {path}: {exc.strerror or exc}.") from None


def spool_text(stream: BinaryIO, encoding: str | None = None) -> tuple[TextIO, Decoding]:
    """A stream (standard input) copied to a temporary file, checked like a file, then open
    as text from the start, and how it was read; or MktError(400)."""
    codec = check_encoding(encoding)
    spool = tempfile.SpooledTemporaryFile(max_size=_SPOOL_IN_MEMORY)
    try:
        for block in _chunks(stream):
            spool.write(block)
        decoding = _decide(lambda: _reread(spool), lambda: _sample(spool), codec)  # type: ignore[arg-type]
        spool.seek(0)
        # closing the wrapper closes the spool
        return io.TextIOWrapper(spool, encoding=_codec(decoding), newline=""), decoding  # type: ignore[arg-type]
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
