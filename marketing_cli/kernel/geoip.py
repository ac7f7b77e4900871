"""Country (and, with a City database, time zone) of an open or a click from its IP
address, with an optional MaxMind database.

    geo = GeoIP(path)          # `mkt serve --geoip PATH`; None: no database
    geo.country("81.2.69.160") -> "GB"
    geo.time_zone("81.2.69.160") -> "Europe/London"   # GeoLite2-City's location.time_zone; else None

The database is any MaxMind DB (`.mmdb`) file with a `country` record: GeoLite2-Country,
GeoLite2-City, GeoIP2-Country/City, or the DB-IP "lite" country databases in the same
format. It is read with the `maxminddb` library (its C extension, memory-mapped), opened
once; lookups are a few microseconds. One GeoIP may be shared by threads (maxminddb's
readers are safe for concurrent reads); a lookup racing `close()` answers "Unknown".

The answer is the ISO 3166-1 alpha-2 code of the `country` record (the country where the
address is used), else of `registered_country` (where the block is registered), upper
case; "Unknown" when there is no database, the address does not parse, is not a
public internet address (private, loopback, link-local, shared CGNAT space...), is an
IPv6 address and the database holds IPv4 only, or the database has no country for it.
IPv4-mapped IPv6 addresses (`::ffff:a.b.c.d`, how a dual-stack server sees IPv4 clients)
are looked up as the IPv4 address.

A path that does not exist or is not a MaxMind DB is refused when the GeoIP is made
(GeoIPError, a ValueError, naming the path and the reason), so a wrong `--geoip` fails at
start-up rather than silently counting every click as Unknown.
"""

from __future__ import annotations

import ipaddress
import os
from functools import cache
from typing import Any

UNKNOWN = "Unknown"


class GeoIPError(ValueError):
    """The GeoIP database cannot be opened."""


class GeoIP:
    """Country lookups in one MaxMind database, or "Unknown" for everything without one."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = None if path is None else os.fspath(path)
        self._reader: Any = None
        if self.path is None:
            return
        import maxminddb

        if os.path.isdir(self.path):
            raise GeoIPError(f"GeoIP database {self.path}: is a directory, not a .mmdb file.")
        try:
            self._reader = maxminddb.open_database(self.path)
        except FileNotFoundError:
            raise GeoIPError(f"GeoIP database {self.path}: no such file.") from None
        except (maxminddb.InvalidDatabaseError, ValueError, OSError) as exc:
            raise GeoIPError(f"GeoIP database {self.path}: not a MaxMind DB file ({exc}).") from None

    def country(self, ip: str | None) -> str:
        """The ISO 3166-1 alpha-2 code for a client address, or "Unknown"."""
        return _iso_code(self._record(ip))

    def time_zone(self, ip: str | None) -> str | None:
        """The IANA time zone of the address's city (GeoLite2-City's `location.time_zone`), or
        None: no database, a country-only database, no location, or a name zoneinfo does not know."""
        from marketing_cli.kernel.localtime import canonical_zone

        record = self._record(ip)
        location = record.get("location") if isinstance(record, dict) else None
        name = location.get("time_zone") if isinstance(location, dict) else None
        return canonical_zone(name) if isinstance(name, str) else None

    def _record(self, ip: str | None) -> Any:
        reader = self._reader  # one read: close() may run in another thread
        if reader is None or not ip:
            return None
        try:
            address = ipaddress.ip_address(ip.strip())
        except ValueError:
            return None
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if not address.is_global:
            return None
        try:
            return reader.get(address)
        except ValueError:  # an IPv6 address in an IPv4-only database, or a closed reader
            return None

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def __enter__(self) -> GeoIP:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _iso_code(record: Any) -> str:
    if not isinstance(record, dict):
        return UNKNOWN
    for key in ("country", "registered_country"):
        entry = record.get(key)
        code = entry.get("iso_code") if isinstance(entry, dict) else None
        if isinstance(code, str) and len(code) == 2 and code.isascii() and code.isalpha():
            return code.upper()
    return UNKNOWN


@cache
def _shared(path: str | None) -> GeoIP:
    return GeoIP(path)


def country_of(ip: str | None) -> str:
    """The country of an open or a click, from the database named by MKT_GEOIP (`mkt serve --geoip`)."""
    return _shared(os.environ.get("MKT_GEOIP") or None).country(ip)


def time_zone_of(ip: str | None) -> str | None:
    """The time zone of the city of an open or a click (a City database named by MKT_GEOIP), or None."""
    return _shared(os.environ.get("MKT_GEOIP") or None).time_zone(ip)
