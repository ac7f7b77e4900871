"""Shared fixtures: every test gets its own database file; nothing touches real data.

    db_path    a fresh database file path (MKT_DB points at it)
    conn       a connection to it (schema applied)
    workspace  {"id", "api_key", ...}: a workspace created with create_workspace
    client     an httpx client calling create_app(db_path) in the test's thread (tests/asgi_client.py); errors answered 500
    auth       headers carrying the workspace's key
    cli        run `mkt` through typer's CliRunner against db_path
    cli_json   the same with --json appended, returning the parsed stdout
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from marketing_cli.storage.db import connect
from tests.factories import error_of  # noqa: F401 - kept for modules of other branches

# Pinned before any test module is imported: rich consoles created while modules load
# (collection) read COLUMNS once, and would otherwise be 80 wide under xdist.
os.environ["COLUMNS"] = "200"
os.environ["NO_COLOR"] = "1"
os.environ["TERM"] = "dumb"

# Hypothesis keeps the examples that failed in a database (.hypothesis/examples by default) and
# replays them first: a run then depends on the runs before it. MKT_HYPOTHESIS_DATABASE names
# the folder it uses instead (.ci/run gives an empty one, so CI runs as a fresh clone does).
if os.environ.get("MKT_HYPOTHESIS_DATABASE"):
    from hypothesis import settings as _hypothesis_settings
    from hypothesis.database import DirectoryBasedExampleDatabase

    _hypothesis_settings.register_profile(
        "mkt", database=DirectoryBasedExampleDatabase(os.environ["MKT_HYPOTHESIS_DATABASE"]))
    _hypothesis_settings.load_profile("mkt")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--engine", choices=("sqlite", "postgresql"), default=os.environ.get("MKT_TEST_ENGINE", "sqlite"),
                     help="the database engine the tests run on (tests/engines.py starts PostgreSQL itself)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sqlite_only: the test is about the SQLite file itself (skipped on PostgreSQL)")
    config.addinivalue_line("markers", "postgresql_only: the test is about PostgreSQL (run by --engine postgresql)")
    config.addinivalue_line("markers", "engine_neutral: the test touches no database (docs, packaging, the code's "
                                       "structure): it runs once, in the SQLite half")


# The fixtures through which a test reaches the engine the run picked (--engine): a test whose
# fixtures lead to none of them (not counting the autouse _env's MKT_DB) runs the same code,
# SQLite or none, in both halves.
ENGINE_FIXTURES = frozenset({"engine", "postgres_server", "db_path", "new_db"})
REACHES_NO_ENGINE = pytest.StashKey[bool]()
CHECK_NEUTRAL = os.environ.get("MKT_TEST_CHECK_NEUTRAL") == "1"  # see _env


def reaches_engine(item: pytest.Item) -> bool:
    """Whether the test's fixture closure, the autouse _env aside, includes a fixture of
    ENGINE_FIXTURES. A test that opens the database MKT_DB names without asking for one of them
    (a CliRunner without --db, a subprocess) is stopped by _env's guard: it must ask for db_path."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return True  # not a plain test function: run it in both halves
    todo = [name for name in info.initialnames if name != "_env"]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        definitions = info.name2fixturedefs.get(name)
        if definitions:
            todo.extend(definitions[-1].argnames)
    return bool(seen & ENGINE_FIXTURES)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    postgresql = config.getoption("--engine") == "postgresql"
    for item in items:  # (a postgresql_only test is about PostgreSQL whatever its fixtures)
        item.stash[REACHES_NO_ENGINE] = not reaches_engine(item) and not item.get_closest_marker("postgresql_only")
    if postgresql:
        from tests.engines import ported

        not_yet = pytest.mark.skip(reason="not yet ported to PostgreSQL (tests/engines.py POSTGRESQL_SUITES, issue 22)")
        neutral = pytest.mark.skip(reason="touches no database: run once, by the SQLite half")
        no_engine = pytest.mark.skip(reason="reaches no database engine: run once, by the SQLite half")
        for item in items:
            if item.get_closest_marker("engine_neutral"):
                item.add_marker(neutral)
            elif not ported(item.nodeid):
                item.add_marker(not_yet)
            elif item.stash[REACHES_NO_ENGINE] and not CHECK_NEUTRAL:
                item.add_marker(no_engine)
    default = "about the SQLite file itself" if postgresql else "about PostgreSQL: --engine postgresql"
    other = "sqlite_only" if postgresql else "postgresql_only"
    for item in items:
        marker = item.get_closest_marker(other)
        if marker:  # sqlite_only(reason="...") says why in the skip line
            item.add_marker(pytest.mark.skip(reason=marker.kwargs.get("reason", default)))
    # The slow tests first (a stable sort: the order is otherwise kept). pytest-xdist hands tests
    # out in this order: a test of minutes handed out last kept one worker busy while the other
    # had nothing left to do; first, the other worker runs the short ones meanwhile. And one at a
    # time (pyproject.toml: --maxschedchunk=1): xdist's first hand-out is otherwise a quarter of
    # each worker's share in one block, which gave one worker all 64 slow tests in a row (the
    # PostgreSQL half ran its two fleet tests last, 9 minutes in, while the other worker had
    # run out of work).
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def engine(request: pytest.FixtureRequest) -> str:
    return request.config.getoption("--engine")


@pytest.fixture(scope="session")
def postgres_server(engine: str) -> Iterator[Any]:
    if engine != "postgresql":
        yield None
        return
    from tests.engines import PostgresServer

    server = PostgresServer()
    yield server
    server.stop()


@pytest.fixture(autouse=True, scope="session")
def _job_handlers() -> None:
    """The services' job handlers, registered as `mkt jobs run` and serve's worker register them,
    so a test that runs jobs does not depend on which test module imported a service first."""
    from marketing_cli import services

    services.load_job_handlers()


@pytest.fixture
def db_path(tmp_path: Path, postgres_server: Any) -> Iterator[Any]:
    """The test's database: a file path on SQLite, a fresh database's URL on PostgreSQL."""
    if postgres_server is None:
        yield tmp_path / "mkt.db"
        return
    url = postgres_server.fresh()
    yield url
    postgres_server.drop(url)


@pytest.fixture(autouse=True)
def _env(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
         db_path: Any) -> Iterator[None]:
    # A test that reaches no engine (REACHES_NO_ENGINE) runs in the SQLite half only. Guarded:
    # its MKT_DB is a file of its own that must not exist after the test (opening it creates
    # it); with MKT_TEST_CHECK_NEUTRAL=1 the PostgreSQL half runs these tests with MKT_DB naming
    # a database that does not exist, and fails one that tried to connect to it (the server's log).
    neutral = request.node.stash.get(REACHES_NO_ENGINE, False)
    if neutral and CHECK_NEUTRAL and isinstance(db_path, str):
        server = request.getfixturevalue("postgres_server")
        untouched = f"mkt_untouched_{os.getpid()}_{abs(hash(request.node.nodeid))}"
        monkeypatch.setenv("MKT_DB", server.url(untouched))
    elif neutral:
        untouched = tmp_path / "untouched-mkt.db"
        monkeypatch.setenv("MKT_DB", str(untouched))
    else:
        monkeypatch.setenv("MKT_DB", str(db_path))
    monkeypatch.setenv("MKT_CONFIG_DIR", str(tmp_path / "config"))  # `mkt workspace use` writes here
    monkeypatch.delenv("MKT_WORKSPACE", raising=False)
    monkeypatch.delenv("MKT_SMTP_URL", raising=False)
    monkeypatch.setenv("MKT_OUTBOX", str(tmp_path / "outbox"))
    # SMS quiet hours depend on the hour; tests of other things run at any hour of the wall clock.
    monkeypatch.setenv("MKT_SMS_QUIET_HOURS", str(Path(__file__).parent / "data" / "quiet-hours-none.csv"))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("TERM", "dumb")
    yield
    if not neutral:
        return
    if isinstance(untouched, Path):
        opened = untouched.exists()
    else:
        log = Path(request.getfixturevalue("postgres_server").folder) / "log"
        opened = untouched in log.read_text(errors="replace")
    assert not opened, (f"{request.node.nodeid} opened the database MKT_DB names without asking for a fixture "
                        f"that picks the engine: ask for db_path, or the PostgreSQL half skips it")


@pytest.fixture
def new_db(tmp_path: Path, postgres_server: Any) -> Iterator[Callable[..., Any]]:
    """`new_db(name, empty=False)`: a further database of the test's own (tests/engines.new_database):
    a file in tmp_path on SQLite, a fresh database on PostgreSQL (dropped after the test)."""
    from tests.engines import new_database

    made: list[Any] = []

    def make(name: str = "mkt.db", *, empty: bool = False) -> Any:
        made.append(new_database(postgres_server, tmp_path, name, empty=empty))
        return made[-1]

    yield make
    if postgres_server is not None:
        for url in made:
            postgres_server.drop(url)


_SQLITE_TEMPLATE: list[Path] = []


def _from_template(request: pytest.FixtureRequest, db_path: Path) -> None:
    """Put a copy of a freshly migrated file (made once per process) at `db_path`, made 0600 as
    connect() makes a new file. Migrating a new file step by step costs 150-350 ms on these
    machines, more than most tests take; a copy costs a millisecond (the PostgreSQL half copies
    a migrated template database likewise, tests/engines.py)."""
    if not _SQLITE_TEMPLATE:
        template = request.getfixturevalue("tmp_path_factory").mktemp("template") / "mkt.db"
        connect(template).close()  # the last connection closed: the WAL is checkpointed into the file
        _SQLITE_TEMPLATE.append(template)
    with open(_SQLITE_TEMPLATE[0], "rb") as source:
        data = source.read()
    handle = os.open(db_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    with os.fdopen(handle, "wb") as target:
        target.write(data)


@pytest.fixture
def conn(request: pytest.FixtureRequest, db_path: Path) -> Iterator[Any]:
    if isinstance(db_path, Path) and not db_path.exists() and db_path.parent.is_dir():
        _from_template(request, db_path)
    connection = connect(db_path)
    yield connection
    connection.close()


@pytest.fixture
def workspace(conn: Any) -> dict[str, Any]:
    from marketing_cli.services.account import workspaces

    created = workspaces.create_workspace(conn, "Test workspace")
    return {"id": created["workspace"]["id"], "api_key": created["api_key"], **created["workspace"]}


@pytest.fixture
def app(db_path: Path, conn: Any) -> Iterator[Any]:
    from marketing_cli.api.app import create_app

    application = create_app(db_path)
    yield application
    application.state.db.close()  # a test that called the app without its lifespan leaves connections


@pytest.fixture
def client(app: Any) -> Iterator[Any]:
    from tests.asgi_client import InlineClient

    with InlineClient(app) as test_client:
        yield test_client


@pytest.fixture
def auth(workspace: dict[str, Any]) -> dict[str, str]:
    return {"Authorization": f"Bearer {workspace['api_key']}"}


@pytest.fixture
def runner() -> Any:
    from typer.testing import CliRunner

    return CliRunner()


@pytest.fixture
def cli(runner: Any, db_path: Path) -> Callable[..., Any]:
    from marketing_cli.cli.main import app

    def invoke(*args: str, input: str | None = None) -> Any:
        return runner.invoke(app, ["--db", str(db_path), *args], input=input, catch_exceptions=False)

    return invoke


@pytest.fixture
def cli_json(cli: Callable[..., Any]) -> Callable[..., Any]:
    def invoke(*args: str) -> Any:
        result = cli(*args, "--json")
        assert result.exit_code == 0, result.stderr or result.stdout
        return json.loads(result.stdout)

    return invoke


@pytest.fixture
def segment_world(conn: Any, workspace: dict[str, Any]) -> dict[str, Any]:
    """Three contacts, a City field and a vip tag (the API and CLI segment tests)."""
    from marketing_cli.services.contacts import fields, tags
    from tests.factories import filter_contact as add_contact

    ws = workspace["id"]
    city = fields.create_field(conn, ws, {"label": "City", "merge_tag": "city", "type": "TEXT"})["id"]
    vip = tags.create_tag(conn, ws, {"name": "vip"})["id"]
    add_contact(conn, ws, "a@x.io", data={city: "Paris"}, tags=(vip,), delivered=2, opens=2)
    add_contact(conn, ws, "b@x.io", data={city: "Lyon"}, delivered=2, opens=0)
    add_contact(conn, ws, "c@x.io", phone="+447911123401", tags=(vip,), delivered=1, opens=0)
    return {"ws": ws, "city": city, "vip": vip}


# --- A real DNS server for sending-domain verification (domains work) -------------------


class LocalDNS:
    """A real DNS server (dnslib) on 127.0.0.1, UDP and TCP on one free port.

    It answers from `records` ({(host, TYPE): [value, ...]}; a TXT value may be a list of
    strings, sent as several character-strings); a host it has no record for at all is
    NXDOMAIN, a host in `failing` gets SERVFAIL. A question about a host that has a CNAME is
    answered as a recursive resolver does: the CNAME, then the target's records (one level).
    `publish(domain)` serves every record of a Domain as the API lists it, TXT values longer
    than 255 bytes split into several strings the way DNS providers publish them.
    """

    def __init__(self) -> None:
        self.records: dict[tuple[str, str], list[Any]] = {}
        self.failing: set[str] = set()
        self.queries: list[tuple[str, str]] = []
        self._servers: list[Any] = []
        self.port = 0

    @staticmethod
    def split(value: str, size: int = 255) -> list[str]:
        return [value[i:i + size] for i in range(0, len(value), size)] or [""]

    def add(self, rtype: str, host: str, value: Any) -> None:
        self.records.setdefault((host.rstrip(".").lower(), rtype), []).append(value)

    def remove(self, rtype: str, host: str) -> None:
        self.records.pop((host.rstrip(".").lower(), rtype), None)

    def publish(self, domain: dict[str, Any], *, only: set[str] | None = None) -> None:
        for record in domain["dns_records"]:
            if only is not None and record["type"] + " " + record["host"] not in only:
                continue
            value = record["value"]
            if record["type"] == "TXT":
                value = self.split(value)
            elif record["type"] == "MX":
                value = (record["priority"], value)
            self.add(record["type"], record["host"], value)

    def resolve(self, request: Any, handler: Any) -> Any:
        from dnslib import CNAME, MX, QTYPE, RCODE, RR, TXT

        reply = request.reply()
        host = str(request.q.qname).rstrip(".").lower()
        rtype = QTYPE[request.q.qtype]
        self.queries.append((host, rtype))
        if host in self.failing:
            reply.header.rcode = RCODE.SERVFAIL
            return reply
        if not any(known == host for known, _ in self.records):
            reply.header.rcode = RCODE.NXDOMAIN
            return reply
        owner = request.q.qname
        aliases = self.records.get((host, "CNAME"), [])
        if rtype != "CNAME" and aliases:  # a recursive resolver's answer: the CNAME, then its target's records
            reply.add_answer(RR(owner, QTYPE.CNAME, rdata=CNAME(aliases[0]), ttl=60))
            host, owner = aliases[0].rstrip(".").lower(), aliases[0]
        for value in self.records.get((host, rtype), []):
            if rtype == "TXT":
                rdata = TXT(value if isinstance(value, list) else [value])
            elif rtype == "MX":
                rdata = MX(value[1], value[0])
            else:
                rdata = CNAME(value)
            reply.add_answer(RR(owner, request.q.qtype, rdata=rdata, ttl=60))
        return reply

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        from dnslib.server import DNSLogger, DNSServer

        quiet = DNSLogger("-request,-reply,-truncated,-error", logf=lambda *_: None)
        for _ in range(20):
            udp = DNSServer(self, address="127.0.0.1", port=0, logger=quiet)
            port = udp.server.server_address[1]
            try:
                tcp = DNSServer(self, address="127.0.0.1", port=port, tcp=True, logger=quiet)
            except OSError:
                udp.server.server_close()
                continue
            self.port, self._servers = port, [udp, tcp]
            for server in self._servers:  # a short poll interval: stop() waits for one poll
                server.thread = threading.Thread(target=server.server.serve_forever, kwargs={"poll_interval": 0.02},
                                                 daemon=True)
                server.thread.start()
            return
        raise RuntimeError("no free port for the test DNS server")

    def stop(self) -> None:
        for server in self._servers:
            server.stop()
            server.server.server_close()
            server.thread.join(timeout=5)
        self._servers = []


_DKIM_KEYS: list[tuple[str, str]] = []
_dkim_turn = [0]


@pytest.fixture(autouse=True)
def _domains_test_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No operator DNS or SPF setting leaks in from the environment (`dns_server` sets one).

    Adding a domain generates an RSA-2048 key, 0.1-0.8 s on this machine: domains made in
    tests take real key pairs in turn from a pool of four made once per process, so two
    domains in a row still differ. test_services_domains checks the real generator."""
    from marketing_cli.services.email import domains

    monkeypatch.delenv("MKT_DNS_SERVER", raising=False)
    monkeypatch.delenv("MKT_SPF_MECHANISMS", raising=False)

    real = domains._new_key

    def pooled() -> tuple[str, str]:
        if not _DKIM_KEYS:
            _DKIM_KEYS.extend(real() for _ in range(4))
        _dkim_turn[0] += 1
        return _DKIM_KEYS[_dkim_turn[0] % len(_DKIM_KEYS)]

    monkeypatch.setattr(domains, "_new_key", pooled)


@pytest.fixture
def dns_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalDNS]:
    """A LocalDNS that `MKT_DNS_SERVER` points at for the test's duration."""
    server = LocalDNS()
    server.start()
    monkeypatch.setenv("MKT_DNS_SERVER", server.address)
    try:
        yield server
    finally:
        server.stop()
# --- a real `mkt serve` process (end-to-end tests) ------------------------------------------


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mkt(db: Path, *args: str) -> Any:
    """`mkt --db DB ARGS --json` in a subprocess; the parsed output (exit 0 asserted)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "marketing_cli", "--db", str(db), *args, "--json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


class Server:
    """`mkt serve` on a free port until stop(); output() is everything it printed."""

    def __init__(self, db: Path, *extra: str, preexec_fn: Callable[[], Any] | None = None) -> None:
        import subprocess
        import sys
        import time

        import httpx

        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        from tests.engines import log_folder

        self.log_path = log_folder(db) / f"serve-{self.port}.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "marketing_cli", "--db", str(db), "serve", "--port", str(self.port),
             "--worker-interval", "0.2", *extra],
            stdout=self.log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            preexec_fn=preexec_fn,
        )
        deadline = time.monotonic() + 60  # a loaded machine: the start alone has taken 20 s
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.output()
            try:
                httpx.get(self.base + "/v1/sms-rates", timeout=0.5)
                return
            except httpx.HTTPError:
                time.sleep(0.1)
        self.stop()
        raise AssertionError("server did not start:\n" + self.output())

    def output(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text()

    def stop(self, sig: int | None = None) -> int:
        import signal

        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM if sig is None else sig)
        try:
            code = self.proc.wait(20)
        except Exception:
            self.proc.kill()
            code = self.proc.wait(5)
        self.log.close()
        return code
