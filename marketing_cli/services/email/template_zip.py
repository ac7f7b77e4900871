"""Reading a coded template from a ZIP archive, safely.

An archive is refused (400) when any member's path leaves the archive (`..`, an absolute
path, a drive letter), a member is a symbolic link or encrypted, or the archive passes a
limit: LIMITS below, each named in its message. Sizes are checked on the data as it is
read, never only on what the archive's headers declare. `__MACOSX/` folders and
`.DS_Store` files (what macOS's "Compress" adds) are skipped.

The entry file is `index.html` (or `index.htm`) at the top of the archive or in its single
top folder, else the only `.html` / `.htm` file. Every other file is kept as an asset under
its path relative to the entry file's folder's root (the single top folder, when there is
one, is dropped), which is where the entry file's relative links (`images/logo.png`) point.
"""

from __future__ import annotations

import io
import mimetypes
import posixpath
import re
import stat
import zipfile
from dataclasses import dataclass, field

from marketing_cli.errors import MktError

MIB = 1024 * 1024
MAX_ARCHIVE_BYTES = 10 * MIB      # the archive itself, as uploaded
MAX_FILES = 500                   # members that are files (folders not counted)
MAX_TOTAL_BYTES = 25 * MIB        # all members, uncompressed
MAX_RATIO = 100                   # uncompressed / compressed, per member ...
RATIO_FLOOR = 64 * 1024           # ... for members larger than this (tiny files compress wildly)
MAX_HTML_BYTES = 5 * MIB          # the entry file
MAX_PATH_BYTES = 1024             # a member's path, UTF-8: it keys the asset (PostgreSQL's btree entry: 2704 bytes)

NOT_ZIP = "The content is not a valid ZIP archive."
TOO_LARGE = "The ZIP archive is larger than 10 MiB."
TOO_MANY = "The ZIP archive holds more than 500 files."
TOO_BIG_UNPACKED = "The ZIP archive expands to more than 25 MiB."
BOMB = "The ZIP archive member '{name}' expands more than 100 times its compressed size."
UNSAFE_PATH = "The ZIP archive member '{name}' has an unsafe path."
PATH_TOO_LONG = "The ZIP archive member '{name}...' has a path longer than 1024 bytes."
LINK = "The ZIP archive member '{name}' is a link; links are not allowed."
ENCRYPTED = "The ZIP archive member '{name}' is encrypted."
DUPLICATE = "The ZIP archive holds '{name}' twice."
NO_ENTRY = "The ZIP archive has no HTML file: add an index.html."
SEVERAL_ENTRIES = "The ZIP archive has several HTML files and no index.html: name the entry file index.html."
HTML_TOO_LARGE = "The template HTML is larger than 5 MiB."
NOT_UTF8 = "The template HTML must be UTF-8 text."

_DRIVE = re.compile(r"[A-Za-z]:")
_JUNK = ("__MACOSX/",)
_JUNK_NAMES = (".DS_Store", "Thumbs.db")


@dataclass
class ZipTemplate:
    html: str
    entry_file: str
    assets: list[tuple[str, str, bytes]] = field(default_factory=list)  # (path, content type, data)


def _member_path(info: zipfile.ZipInfo) -> str | None:
    """The member's safe relative path, None for folders and junk; 400 for an unsafe one."""
    name = info.filename.replace("\\", "/")
    shown = info.filename[:200]
    if name.startswith("/") or _DRIVE.match(name) or "\x00" in name:
        raise MktError(400, UNSAFE_PATH.format(name=shown))
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise MktError(400, UNSAFE_PATH.format(name=shown))
    if stat.S_ISLNK(info.external_attr >> 16):
        raise MktError(400, LINK.format(name=shown))
    if info.is_dir() or not parts:
        return None
    if name.startswith(_JUNK) or parts[-1] in _JUNK_NAMES or parts[-1].startswith("._"):
        return None
    if info.flag_bits & 0x1:
        raise MktError(400, ENCRYPTED.format(name=shown))
    if len(name.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise MktError(400, PATH_TOO_LONG.format(name=shown))
    return "/".join(parts)


def _read(archive: zipfile.ZipFile, info: zipfile.ZipInfo, budget: int) -> bytes:
    """The member's bytes, counted as they come: the headers' sizes may lie."""
    chunks, size = [], 0
    with archive.open(info) as handle:
        while chunk := handle.read(64 * 1024):
            size += len(chunk)
            if size > budget:
                raise MktError(400, TOO_BIG_UNPACKED)
            if size > RATIO_FLOOR and size > MAX_RATIO * max(info.compress_size, 1):
                raise MktError(400, BOMB.format(name=info.filename[:200]))
            chunks.append(chunk)
    return b"".join(chunks)


def _entry(paths: list[str]) -> tuple[str, str]:
    """(entry path, prefix to drop from every path)."""
    tops = {p.split("/", 1)[0] for p in paths}
    prefix = ""
    if len(tops) == 1 and all("/" in p for p in paths):
        prefix = tops.pop() + "/"
    for index in ("index.html", "index.htm"):
        for candidate in (index, prefix + index):
            for path in paths:
                if path.lower() == candidate.lower():
                    return path, prefix
    pages = [p for p in paths if p.lower().endswith((".html", ".htm"))]
    if not pages:
        raise MktError(400, NO_ENTRY)
    if len(pages) > 1:
        raise MktError(400, SEVERAL_ENTRIES)
    return pages[0], prefix


def decode_html(data: bytes) -> str:
    if len(data) > MAX_HTML_BYTES:
        raise MktError(400, HTML_TOO_LARGE)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise MktError(400, NOT_UTF8) from None


def read_zip_template(data: bytes) -> ZipTemplate:
    if len(data) > MAX_ARCHIVE_BYTES:
        raise MktError(400, TOO_LARGE)
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError):
        raise MktError(400, NOT_ZIP) from None
    with archive:
        members: dict[str, zipfile.ZipInfo] = {}
        for info in archive.infolist():
            path = _member_path(info)
            if path is None:
                continue
            if path in members:
                raise MktError(400, DUPLICATE.format(name=path[:200]))
            members[path] = info
            if len(members) > MAX_FILES:
                raise MktError(400, TOO_MANY)
        if sum(info.file_size for info in members.values()) > MAX_TOTAL_BYTES:
            raise MktError(400, TOO_BIG_UNPACKED)
        entry, prefix = _entry(list(members))
        budget = MAX_TOTAL_BYTES
        contents: dict[str, bytes] = {}
        try:
            for path, info in members.items():
                contents[path] = _read(archive, info, budget)
                budget -= len(contents[path])
        except (zipfile.BadZipFile, NotImplementedError, ValueError, OSError, EOFError, RuntimeError):
            raise MktError(400, NOT_ZIP) from None
    html = decode_html(contents.pop(entry))
    assets = []
    for path, content in contents.items():
        relative = path[len(prefix):] if path.startswith(prefix) else path
        kind = mimetypes.guess_type(posixpath.basename(relative))[0] or "application/octet-stream"
        assets.append((relative, kind, content))
    return ZipTemplate(html=html, entry_file=entry, assets=assets)
