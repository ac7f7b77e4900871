"""GeoIP: country codes from a real MaxMind DB file (a tiny one written here, in the format
maxminddb reads), "Unknown" without one, and a clear error for a wrong path."""

from __future__ import annotations

import ipaddress
import struct
from pathlib import Path
from typing import Any

import pytest

from marketing_cli.kernel.geoip import UNKNOWN, GeoIP, GeoIPError

# --- a minimal MaxMind DB writer (format 2.0: search tree, data section, metadata) --------


def _encode(value: Any) -> bytes:
    def control(kind: int, size: int) -> bytes:
        assert size < 29
        if kind <= 7:
            return bytes([(kind << 5) | size])
        return bytes([size, kind - 7])  # extended type

    if isinstance(value, str):
        raw = value.encode()
        return control(2, len(raw)) + raw
    if isinstance(value, dict):
        return control(7, len(value)) + b"".join(_encode(k) + _encode(v) for k, v in value.items())
    if isinstance(value, list):
        return control(11, len(value)) + b"".join(map(_encode, value))
    if isinstance(value, tuple):  # (kind, int): 5 uint16, 6 uint32, 9 uint64
        kind, number = value
        raw = number.to_bytes((number.bit_length() + 7) // 8, "big")
        return control(kind, len(raw)) + raw
    raise TypeError(value)


def write_mmdb(path: Path, networks: dict[str, Any], ip_version: int = 4) -> None:
    data = b""
    nodes: list[list[Any]] = [[None, None]]
    bits = 32 if ip_version == 4 else 128
    for cidr, record in networks.items():
        net = ipaddress.ip_network(cidr)
        offset = len(data)
        data += _encode(record)
        address = int(net.network_address)
        if ip_version == 6 and net.version == 4:  # IPv4 lives under ::/96
            address, prefix = address, net.prefixlen + 96
        else:
            prefix = net.prefixlen
        node = 0
        for i in range(prefix):
            bit = (address >> (bits - 1 - i)) & 1
            if i == prefix - 1:
                nodes[node][bit] = ("data", offset)
            else:
                if nodes[node][bit] is None:
                    nodes.append([None, None])
                    nodes[node][bit] = ("node", len(nodes) - 1)
                node = nodes[node][bit][1]
    count = len(nodes)

    def record_value(rec: Any) -> int:
        if rec is None:
            return count
        return rec[1] if rec[0] == "node" else count + 16 + rec[1]

    tree = b"".join(struct.pack(">I", record_value(left))[1:] + struct.pack(">I", record_value(right))[1:]
                    for left, right in nodes)
    metadata = {"node_count": (6, count), "record_size": (5, 24), "ip_version": (5, ip_version),
                "database_type": "mkt-Test-Country", "languages": ["en"],
                "binary_format_major_version": (5, 2), "binary_format_minor_version": (5, 0),
                "build_epoch": (9, 1795420800), "description": {"en": "mkt test database"}}
    path.write_bytes(tree + b"\x00" * 16 + data + b"\xab\xcd\xefMaxMind.com" + _encode(metadata))


NETWORKS = {
    "81.2.69.0/24": {"country": {"iso_code": "GB", "names": {"en": "United Kingdom"}},
                     "registered_country": {"iso_code": "GB"}},
    "2.125.160.0/19": {"country": {"iso_code": "fr"}},  # lower case in the file
    "89.160.20.112/28": {"registered_country": {"iso_code": "SE"}},  # no country: the registered one
    "175.16.199.0/24": {"continent": {"code": "AS"}},  # no country at all
}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "GeoLite2-Country.mmdb"
    write_mmdb(path, NETWORKS)
    return path


def test_countries_from_the_database(db: Path) -> None:
    with GeoIP(db) as geo:
        assert geo.country("81.2.69.160") == "GB"
        assert geo.country(" 81.2.69.1 ") == "GB"
        assert geo.country("2.125.170.3") == "FR"
        assert geo.country("89.160.20.120") == "SE"
        assert geo.country("175.16.199.10") == UNKNOWN == "Unknown"
        assert geo.country("8.8.8.8") == UNKNOWN  # not in the database
        assert geo.country("::ffff:81.2.69.160") == "GB"  # IPv4-mapped, as a dual-stack server sees it
        assert geo.country("2001:4860:4860::8888") == UNKNOWN  # IPv6 in an IPv4-only database


@pytest.mark.parametrize("ip", ["10.1.2.3", "192.168.0.1", "127.0.0.1", "169.254.1.1", "100.64.0.1", "::1",
                                "fe80::1", "fe80::1%eth0", "fd00::1", "not an ip", "1.2.3.4\x00", "", None, "81.2.69.160/24", "999.1.1.1"])
def test_private_and_unparseable_addresses_are_unknown(db: Path, ip: str | None) -> None:
    with GeoIP(db) as geo:
        assert geo.country(ip) == UNKNOWN


def test_ipv6_database_holds_both_families(tmp_path: Path) -> None:
    path = tmp_path / "v6.mmdb"
    write_mmdb(path, {"81.2.69.0/24": {"country": {"iso_code": "GB"}},
                      "2a02:ec80::/29": {"country": {"iso_code": "DE"}}}, ip_version=6)
    with GeoIP(path) as geo:
        assert geo.country("2a02:ec80:1::5") == "DE"
        assert geo.country("81.2.69.7") == "GB"
        assert geo.country("2001:db8::1") == UNKNOWN  # documentation range: not global
        assert geo.country("2a02:ec80:1::5%eth0") == "DE"  # a scoped address


def test_without_a_database_everything_is_unknown() -> None:
    geo = GeoIP(None)
    assert geo.path is None
    assert geo.country("81.2.69.160") == UNKNOWN
    geo.close()
    geo.close()


def test_bad_paths_are_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(GeoIPError, match=r"GeoIP database .*missing\.mmdb: no such file\."):
        GeoIP(tmp_path / "missing.mmdb")
    with pytest.raises(GeoIPError, match="is a directory"):
        GeoIP(tmp_path)
    junk = tmp_path / "junk.mmdb"
    junk.write_bytes(b"this is not a MaxMind database" * 10)
    with pytest.raises(GeoIPError, match="not a MaxMind DB file"):
        GeoIP(junk)
    empty = tmp_path / "empty.mmdb"
    empty.write_bytes(b"")
    with pytest.raises(GeoIPError, match="not a MaxMind DB file"):
        GeoIP(empty)
    assert isinstance(GeoIPError("x"), ValueError)


def test_closed_reader_answers_unknown(db: Path) -> None:
    geo = GeoIP(str(db))
    assert geo.country("81.2.69.160") == "GB"
    geo.close()
    assert geo.country("81.2.69.160") == UNKNOWN


def test_the_time_zone_of_the_city_from_a_city_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from marketing_cli.kernel import geoip

    path = tmp_path / "GeoLite2-City.mmdb"
    write_mmdb(path, {
        "81.2.69.0/24": {"country": {"iso_code": "GB"}, "location": {"time_zone": "Europe/London"}},
        "2.125.160.0/19": {"country": {"iso_code": "FR"}, "location": {"time_zone": "Mars/Olympus_Mons"}},
        "89.160.20.112/28": {"country": {"iso_code": "SE"}},  # no location
    })
    with GeoIP(path) as geo:
        assert geo.time_zone("81.2.69.160") == "Europe/London"
        assert geo.country("81.2.69.160") == "GB"
        assert geo.time_zone("2.125.170.3") is None  # a name zoneinfo does not know
        assert geo.time_zone("89.160.20.120") is None
        assert geo.time_zone("10.0.0.1") is None
    with GeoIP(None) as geo:
        assert geo.time_zone("81.2.69.160") is None
    monkeypatch.setenv("MKT_GEOIP", str(path))
    assert geoip.time_zone_of("81.2.69.7") == "Europe/London"
