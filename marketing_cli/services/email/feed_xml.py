"""A feed's bytes read within bounds: the charset, well-formed XML without entities, and
feedparser run in a child process under a CPU-time and a memory bound.

A feed is a document a third party writes, read when a series is made (in the API request)
and at every occurrence (on the job runner), so what reading it may cost is bounded here:

1. **Size**: at most MAX_BYTES (the fetch stops there too).
2. **Charset** (`to_utf8`, in the caller's process): a byte-order mark, else the charset the
   answer's Content-Type declares, else the XML declaration's, else UTF-8; only a charset a
   browser reads (kernel/outbound.TEXT_CODECS), so `charset=unicode_escape` is a 400, not a
   500, and ISO-8859-1, windows-1252 and UTF-16 feeds are read. The text goes on as UTF-8.
3. **Shape** (`check_xml`, expat, before feedparser sees a byte): well-formed XML, no entity
   declared (no billion laughs, no external entity), at most MAX_DEPTH levels, MAX_ATTRIBUTES
   attributes on an element, MAX_ELEMENTS elements and MAX_ATTRIBUTES_IN_ALL attributes. feedparser's strict parser reads the
   attributes of an element one by one through `getValueByQName` (100,000 attributes on one
   element: about 3 minutes), and 5 MiB of nested tags took 106 s and 700 MB.
4. **CPU and memory**: the check and feedparser run in a child process (`python -m
   marketing_cli.services.email.feed_xml`) whose CPU time is cut at CPU_SECONDS by the kernel
   (SIGPROF's default action ends it wherever it is, C code included) and whose address space
   is MEMORY_BYTES. Why a process: the shape caps do not bound everything feedparser does
   (its author parsing is quadratic in the text's length: an `<author>` of 16 KB of digits
   takes 0.9 s, of 5 MiB hours), a thread cannot be stopped, and a signal handler runs only
   between bytecodes. Starting the child costs about 0.2 s, paid once per fetch.
5. **feedparser's `bozo` flag** is a failure, not a warning: a feed cut short or with crossed
   tags is refused, never sent as an empty item.

The entity check is the standard library's expat with its declaration handlers refusing:
defusedxml does the same over the same parser, as fast (0.025 s against 0.029 s for a 5 MiB
feed), and would have been a dependency that still needs the caps added by hand.

feedparser's own HTML sanitizer and relative-URI resolution are off: the item HTML is
cleaned by html_clean (nh3) where it is rendered, and the sanitizer was the costliest part
(7.8 s for 4.6 MiB of HTML in CDATA, 0.03 s without it).
"""

from __future__ import annotations

import calendar
import codecs
import hashlib
import html
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel import outbound

MAX_BYTES = 5 * 1024 * 1024
MAX_DEPTH = 64  # Atom content carries XHTML, which nests; a feed itself is 4 or 5 deep
MAX_ATTRIBUTES = 64  # on one element (namespace declarations count)
MAX_ELEMENTS = 50_000  # a 5,000-item feed of ten elements each
MAX_ATTRIBUTES_IN_ALL = 100_000
CPU_SECONDS = 1.5
MEMORY_BYTES = 512 * 1024 * 1024
WALL_SECONDS = 20.0  # the child's wall-clock backstop, on a machine too busy to give it its CPU

NOT_A_FEED = "The url did not return an RSS or Atom feed."
TOO_LARGE = "The feed is larger than 5 MiB."
BAD_CHARSET = "The feed declares the charset '{charset}', which mkt does not read."
NOT_TEXT = "The feed is not text in the charset it declares ({codec})."
NOT_XML = "The feed is not well-formed XML: {detail}."
ENTITIES = "The feed declares entities (<!ENTITY ...>), which mkt does not read."
TOO_DEEP = f"The feed nests elements more than {MAX_DEPTH} deep."
TOO_MANY_ATTRIBUTES = f"An element of the feed has more than {MAX_ATTRIBUTES} attributes."
TOO_MANY_ELEMENTS = f"The feed has more than {MAX_ELEMENTS:,} elements."
TOO_MANY_ATTRIBUTES_IN_ALL = f"The feed has more than {MAX_ATTRIBUTES_IN_ALL:,} attributes in all."
TOO_COSTLY = f"Reading the feed took more than {CPU_SECONDS:g} s of processor time."
TOO_BIG_IN_MEMORY = f"Reading the feed needed more than {MEMORY_BYTES // 2**20} MiB of memory."
NOT_READ = "The feed could not be read ({why})."

_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
_DECLARATION = re.compile(rb"""^\s*<\?xml[^>]*?\bencoding\s*=\s*["']([A-Za-z0-9._:-]{1,40})["']""")
_DECLARED_ENCODING = re.compile(r"""^(\s*<\?xml[^>]*?\bencoding\s*=\s*)(["'])[^"']*\2""")


class Refused(Exception):
    """A feed refused for its shape (the message says why)."""


# --- the charset (in the caller's process) ----------------------------------------------------

def _charset(data: bytes, declared: str | None) -> str:
    for bom, name in _BOMS:
        if data.startswith(bom):
            return name
    if declared:
        return declared
    if data.startswith((b"<\x00?\x00", b"\x00<\x00?")):  # UTF-16 without a mark
        return "utf-16-le" if data[0] == 0x3C else "utf-16-be"
    match = _DECLARATION.match(data[:512])
    return match.group(1).decode("ascii") if match else "utf-8"


def to_utf8(data: bytes, declared: str | None) -> bytes:
    """The document as UTF-8, its XML declaration saying so; MktError(400) when its charset
    is not one mkt reads or its bytes are not text in it."""
    charset = _charset(data, declared)
    codec = outbound.text_codec(charset)
    if codec is None:
        raise MktError(400, BAD_CHARSET.format(charset=charset[:40]))
    try:
        text = data.decode("utf-8-sig" if codec == "utf-8" else codec)
    except UnicodeDecodeError:
        raise MktError(400, NOT_TEXT.format(codec=codec)) from None
    return _DECLARED_ENCODING.sub(r'\1"utf-8"', text, count=1).encode("utf-8")


# --- the bounded read (the caller's side) -------------------------------------------------------

def read(data: bytes | str, declared: str | None = None) -> dict[str, Any]:
    """The feed as plain data ({"title", "url", "items": [...]}) or MktError(400) naming the problem."""
    if isinstance(data, str):
        data, declared = data.encode("utf-8"), "utf-8"
    if len(data) > MAX_BYTES:
        raise MktError(400, TOO_LARGE)
    document = to_utf8(data, declared)
    root = str(Path(__file__).resolve().parents[3])  # the child imports this very code
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    try:
        done = subprocess.run([sys.executable, "-m", __name__], input=document, capture_output=True,
                              timeout=WALL_SECONDS, env=env, check=False)
    except subprocess.TimeoutExpired:
        raise MktError(400, NOT_READ.format(why=f"no answer within {WALL_SECONDS:g} s")) from None
    if done.returncode == -signal.SIGPROF or done.returncode == -signal.SIGXCPU:
        raise MktError(400, TOO_COSTLY)
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        raise MktError(400, NOT_READ.format(why=f"the reader stopped with status {done.returncode}")) from None
    if "error" in answer:
        raise MktError(400, answer["error"])
    return answer["feed"]


# --- the child's side -------------------------------------------------------------------------

def check_xml(document: bytes) -> None:
    """Refused unless `document` is well-formed XML within the shape caps, with no entity declared."""
    from xml.parsers import expat

    parser = expat.ParserCreate(encoding="UTF-8")
    parser.ordered_attributes = True
    counts = {"depth": 0, "elements": 0, "attributes": 0}

    def start(name: str, attributes: list[str]) -> None:
        counts["depth"] += 1
        counts["elements"] += 1
        counts["attributes"] += len(attributes) // 2
        if counts["depth"] > MAX_DEPTH:
            raise Refused(TOO_DEEP)
        if len(attributes) // 2 > MAX_ATTRIBUTES:
            raise Refused(TOO_MANY_ATTRIBUTES)
        if counts["elements"] > MAX_ELEMENTS:
            raise Refused(TOO_MANY_ELEMENTS)
        if counts["attributes"] > MAX_ATTRIBUTES_IN_ALL:
            raise Refused(TOO_MANY_ATTRIBUTES_IN_ALL)

    def end(name: str) -> None:
        counts["depth"] -= 1

    def entity(*args: Any) -> None:
        raise Refused(ENTITIES)

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.EntityDeclHandler = entity
    parser.UnparsedEntityDeclHandler = entity
    parser.ExternalEntityRefHandler = entity
    try:
        parser.Parse(document, True)
    except expat.ExpatError as exc:
        raise Refused(NOT_XML.format(detail=f"{expat.ErrorString(exc.code)} at line {exc.lineno}, "
                                            f"column {exc.offset + 1}")) from None


def parse(document: bytes) -> dict[str, Any]:
    """check_xml, then feedparser; the feed as plain data (what `read` answers)."""
    import io

    import feedparser

    check_xml(document)
    parsed = feedparser.parse(io.BytesIO(document), sanitize_html=False, resolve_relative_uris=False)
    if parsed.get("bozo"):
        detail = str(parsed.get("bozo_exception") or "a malformed document").rstrip(".")
        raise Refused(NOT_XML.format(detail=detail[:200]))
    if not parsed.get("version") and not parsed.entries:
        raise Refused(NOT_A_FEED)
    meta = parsed.get("feed", {})
    return {"title": text(meta.get("title", "")), "url": http(meta.get("link", "")),
            "items": [_item(entry) for entry in parsed.entries]}


def _item(entry: Any) -> dict[str, Any]:
    summary = entry.get("summary", "") or ""
    content = "".join(part.get("value", "") for part in entry.get("content", []) or [])
    guid = entry.get("id") or entry.get("link") or hashlib.sha256(
        f"{entry.get('title', '')}\n{summary}".encode()).hexdigest()
    stamp = entry.get("published_parsed") or entry.get("updated_parsed")
    return {"guid": str(guid)[:2000], "title": text(entry.get("title", "")), "url": http(entry.get("link", "")),
            "summary_html": summary, "content_html": content or summary, "author": text(entry.get("author", "")),
            "published": calendar.timegm(stamp) if stamp else None}


def text(value: Any) -> str:
    """Feed text as plain text: tags dropped, references decoded (escaped again where it is written)."""
    import nh3

    plain = str(value or "")
    if "<" in plain or "&" in plain:
        plain = html.unescape(nh3.clean(plain, tags=set()))
    return " ".join(plain.split())


def http(url: Any) -> str:
    url = str(url or "").strip()
    return url if outbound.has_http_scheme(url) else ""


def _bound_self() -> None:
    """The child's limits: its address space, and its CPU time from here on."""
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
        seconds = int(CPU_SECONDS) + 2  # a backstop under the timer below (whole seconds only)
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds))
    except (ImportError, ValueError, OSError):  # not every system has them: the timer and the wall clock stay
        pass
    signal.signal(signal.SIGPROF, signal.SIG_DFL)
    signal.setitimer(signal.ITIMER_PROF, CPU_SECONDS)


def main() -> int:
    import feedparser  # noqa: F401 - imported before the clock starts: the bound is the parse's
    import nh3  # noqa: F401

    document = sys.stdin.buffer.read(MAX_BYTES * 2 + 1)
    _bound_self()
    try:
        answer: dict[str, Any] = {"feed": parse(document)}
    except Refused as exc:
        answer = {"error": str(exc)}
    except MemoryError:
        answer = {"error": TOO_BIG_IN_MEMORY}
    except RecursionError:
        answer = {"error": TOO_DEEP}
    signal.setitimer(signal.ITIMER_PROF, 0)
    sys.stdout.buffer.write(json.dumps(answer).encode("ascii"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
