"""`postgresql://` URLs: which targets are one, and `DatabaseUrl`, which prints without its password.

A password in the URL never leaves the engine: `DatabaseUrl` prints without it (logs, errors,
`--help`, messages); `.url` holds the raw text, for psycopg and for nothing that prints.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

SCHEMES = ("postgresql://", "postgres://")


def is_url(target: object) -> bool:
    return isinstance(target, (str, DatabaseUrl)) and str(_raw(target)).startswith(SCHEMES)


def _raw(target: object) -> str:
    return target.url if isinstance(target, DatabaseUrl) else str(target)


class DatabaseUrl:
    """A `postgresql://` URL that prints without its password (logs, errors, `--help`, messages)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def __str__(self) -> str:
        parts = urlsplit(self.url)
        if parts.password is None:
            return self.url
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        user = f"{parts.username}:***@" if parts.username else ":***@"
        return urlunsplit((parts.scheme, user + host, parts.path, parts.query, parts.fragment))

    __repr__ = __str__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DatabaseUrl) and other.url == self.url

    def __hash__(self) -> int:
        return hash(self.url)
