"""The code's shape: arrows point one way, no circles, one builder of each thing, declared
dependencies match the imported ones, tests do not import each other, and an upgraded
database has exactly the schema of a new one (compared with sqlite-utils' introspection).

The layers (docs/architecture.md draws them), each allowed to import only those below it:

    faces        cli/, api/ (cli may start api for `mkt serve`; api never imports cli)
    presentation reports/: what both faces render (the HTML report); imported only by the faces
    deletion     services/deletion               (what uses a resource, and its delete: reads every domain)
    privacy      services/privacy                (a person erased or exported: reads every domain; beside deletion)
    estimates    services/estimates              (a campaign's future per group of recipients: reads email, sms, delivery)
    automations  services/automations            (flows over contacts, email, delivery and sms)
    delivery     services/delivery               (a message, for a person, now -> the relay's answer)
    domains      services/email, services/sms    (never each other)
                 services/contacts
                 services/account
    jobs         jobs/ (the queue, leases, the runner), services/__init__ (the job registry)
    storage      storage/ (both engines, dialect, field SQL, the JSON encoder, copy/)
    kernel       kernel/: pure helpers every domain shares
    errors       errors.py

No module is longer than MAX_MODULE_LINES unless LONGER_MODULES says why.

Every import counts, a lazy one inside a function included: a circle through a lazy
import is still a circle, only hidden from the interpreter.
"""

from __future__ import annotations

import ast
import re
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.engine_neutral  # touches no database: run once, in the SQLite half

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "marketing_cli"
# Import name -> distribution name, for the third-party packages the code imports.
DISTRIBUTIONS = {
    "anyio": "anyio", "starlette": "starlette", "uvicorn": "uvicorn", "typer": "typer", "rich": "rich",
    "sqlite_utils": "sqlite-utils", "phonenumbers": "phonenumbers", "nh3": "nh3", "dateutil": "python-dateutil",
    "platformdirs": "platformdirs", "httpx": "httpx", "httpcore": "httpcore", "email_validator": "email-validator", "dns": "dnspython",
    "cryptography": "cryptography", "orjson": "orjson", "idna": "idna", "ua_parser": "ua-parser",
    "maxminddb": "maxminddb", "certifi": "certifi", "httptools": "httptools", "tinycss2": "tinycss2",
    "charset_normalizer": "charset-normalizer", "feedparser": "feedparser", "psycopg": "psycopg", "psycopg_pool": "psycopg-pool", "yaml": "pyyaml",
}

# Layer of a module, by its longest matching prefix; what each layer may import besides itself.
LAYER_OF = {
    "marketing_cli.errors": "errors",
    "marketing_cli.kernel": "kernel",
    "marketing_cli.storage": "storage",
    "marketing_cli.jobs": "jobs",
    "marketing_cli.services": "jobs",  # services/__init__: the job registry (JOB_MODULES)
    "marketing_cli.services.account": "account",
    "marketing_cli.services.contacts": "contacts",
    "marketing_cli.services.email": "email",
    "marketing_cli.services.sms": "sms",
    "marketing_cli.services.delivery": "delivery",
    "marketing_cli.reports": "reports",
    "marketing_cli.services.automations": "automations",
    "marketing_cli.services.deletion": "deletion",
    "marketing_cli.services.privacy": "privacy",
    "marketing_cli.services.estimates": "estimates",
    "marketing_cli.api": "api",
    "marketing_cli.cli": "cli",
    "marketing_cli": "root",  # __init__ (the version) and __main__
}
_BELOW_DOMAINS = {"errors", "kernel", "storage", "jobs"}
ALLOWED = {
    "errors": set(),
    "kernel": {"errors"},
    "storage": {"errors", "kernel"},
    "jobs": {"errors", "kernel", "storage"},
    "account": _BELOW_DOMAINS,
    "contacts": _BELOW_DOMAINS | {"account"},
    "email": _BELOW_DOMAINS | {"account", "contacts"},
    "sms": _BELOW_DOMAINS | {"account", "contacts"},
    "delivery": _BELOW_DOMAINS | {"account", "contacts", "email"},
    "automations": _BELOW_DOMAINS | {"account", "contacts", "email", "sms", "delivery"},
    "deletion": _BELOW_DOMAINS | {"account", "contacts", "email", "sms", "delivery", "automations"},
    "privacy": _BELOW_DOMAINS | {"account", "contacts", "email", "sms", "delivery", "automations"},
    "estimates": _BELOW_DOMAINS | {"account", "contacts", "email", "sms", "delivery", "automations"},
    "reports": _BELOW_DOMAINS | {"account", "contacts", "email", "sms", "delivery", "automations", "estimates"},
    "api": _BELOW_DOMAINS | {"account", "contacts", "email", "sms", "delivery", "automations", "deletion", "privacy",
                             "estimates", "reports",
                             "root"},
    "cli": _BELOW_DOMAINS | {"account", "contacts", "email", "sms", "delivery", "automations", "deletion", "privacy",
                             "estimates", "reports",
                             "api", "root"},
    "root": set(LAYER_OF.values()),
}
FACE_LIBRARIES = ("typer", "starlette", "uvicorn", "rich", "click")


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def module_name(path: Path, package: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, lazy imports included, relative ones resolved."""
    modules = {module_name(p, package): p for p in package.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = here.split(".")[: len(here.split(".")) - node.level + 1]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                for alias in node.names:  # `from pkg import module` names the module itself
                    targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def layer(module: str) -> str:
    prefix = max((p for p in LAYER_OF if module == p or module.startswith(p + ".")), key=len)
    return LAYER_OF[prefix]


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} ({layer(a)}) -> {b} ({layer(b)})" for a, targets in graph.items() for b in targets
                  if layer(b) != layer(a) and layer(b) not in ALLOWED[layer(a)])


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_arrows_point_one_way() -> None:
    assert layer_violations(import_graph(PACKAGE)) == []


def test_no_circles_anywhere() -> None:
    assert circles(import_graph(PACKAGE)) == []


def test_every_module_has_a_layer() -> None:
    graph = import_graph(PACKAGE)
    assert all(layer(m) for m in graph) and len(graph) > 100


def _planted(tmp_path: Path, module: str, line: str) -> dict[str, set[str]]:
    """The import graph of a copy of the package with `line` added at the end of `module`'s file."""
    copy = tmp_path / "marketing_cli"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "static"))
    target = copy.joinpath(*module.split(".")[1:]).with_suffix(".py")
    target.write_text(target.read_text(encoding="utf-8") + "\n" + line + "\n", encoding="utf-8")
    return import_graph(copy)


def test_a_planted_email_to_sms_import_is_caught(tmp_path: Path) -> None:
    graph = _planted(tmp_path, "marketing_cli.services.email.campaigns",
                     "def _late():\n    from marketing_cli.services.sms import ledger")
    assert layer_violations(graph) == [
        "marketing_cli.services.email.campaigns (email) -> marketing_cli.services.sms.ledger (sms)"]


def test_a_planted_email_to_delivery_import_is_caught(tmp_path: Path) -> None:
    """Delivery stands above email (it sends email campaigns' messages): email never reaches up."""
    graph = _planted(tmp_path, "marketing_cli.services.email.schedule",
                     "def _late():\n    from marketing_cli.services.delivery import transport")
    assert layer_violations(graph) == [
        "marketing_cli.services.email.schedule (email) -> marketing_cli.services.delivery.transport (delivery)"]


def test_a_planted_storage_to_jobs_import_is_caught(tmp_path: Path) -> None:
    graph = _planted(tmp_path, "marketing_cli.storage.dialect", "from marketing_cli import jobs")
    assert layer_violations(graph) == ["marketing_cli.storage.dialect (storage) -> marketing_cli.jobs (jobs)"]


def test_a_planted_circle_is_caught(tmp_path: Path) -> None:
    # account/billing.py is imported by account/workspaces.py; a lazy import back closes a circle
    # that stays inside one layer, so only the circle rule can see it.
    graph = _planted(tmp_path, "marketing_cli.services.account.billing",
                     "def _late():\n    from marketing_cli.services.account import workspaces")
    assert layer_violations(graph) == []
    assert ["marketing_cli.services.account.billing", "marketing_cli.services.account.workspaces"] in circles(graph)


# A module holds one concern (docs/architecture.md: "Where does a new module go?"); past this
# many lines it holds several. A module that must stay longer is listed here with its reason.
MAX_MODULE_LINES = 500
LONGER_MODULES: dict[str, str] = {}


def test_no_module_is_longer_than_its_concern() -> None:
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert {m: n for m, n in long.items() if m not in LONGER_MODULES} == {}, "split it by concern (or list it, with why)"
    assert set(LONGER_MODULES) <= set(long), "a listed module is short again: take it off the list"
    assert len(LONGER_MODULES) <= 3


def test_services_and_kernel_import_no_face_library() -> None:
    """Nor does reports/: a renderer of plain dicts that the HTTP face and the CLI both call."""
    for path in [*(PACKAGE / "services").rglob("*.py"), *(PACKAGE / "kernel").rglob("*.py"),
                 *(PACKAGE / "reports").rglob("*.py")]:
        found = [m for m in _imports(path) if m.split(".")[0] in FACE_LIBRARIES]
        assert found == [], f"{path.relative_to(ROOT)} imports {found}"


def test_one_builder_of_a_field_expression() -> None:
    """Only field_sql.py writes a field's JSON path into SQL."""
    built = re.compile(r"""\$\.\\?"\{""")  # '$."{...}"' or '$.\"{...}\"' in an f-string
    offenders = [str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py")
                 if p.name != "field_sql.py" and built.search(p.read_text(encoding="utf-8"))]
    assert offenders == []


def test_one_reader_of_numbers_from_text() -> None:
    """kernel/numbers.py reads whole numbers from text; `isdigit()` and its kin accept
    characters `int()` refuses (a superscript digit answered a 500), so nothing else uses them."""
    allowed = PACKAGE / "kernel" / "numbers.py"
    offenders = [str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py")
                 if p != allowed and re.search(r"\.is(digit|decimal|numeric)\(", p.read_text(encoding="utf-8"))]
    assert offenders == []


def test_one_id_parser() -> None:
    """ids.parse_hex_id / parse_int_id are the only readers of ids from users."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if path != PACKAGE / "kernel" / "ids.py" and re.search(r"\bis_id\(|_HEX24|\[0-9a-f\]\{24\}", text):
            offenders.append(path.name)
    assert offenders == []


def test_declared_dependencies_match_the_imported_ones() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = {re.split(r"[<>=\[ ;]", d, maxsplit=1)[0].lower() for d in project["dependencies"]}
    test_extra = {re.split(r"[<>=\[ ;]", d, maxsplit=1)[0].lower() for d in project["optional-dependencies"]["test"]}
    imported = set()
    for path in PACKAGE.rglob("*.py"):
        imported.update(m.split(".")[0] for m in _imports(path))
    third_party = {m for m in imported if m not in sys.stdlib_module_names and m != "marketing_cli"}
    unknown = third_party - set(DISTRIBUTIONS)
    assert unknown == set(), f"add {unknown} to DISTRIBUTIONS and pyproject.toml"
    missing = {DISTRIBUTIONS[m] for m in third_party} - declared
    assert missing == set(), f"imported but not declared: {missing}"
    assert "pytest" not in declared and "pytest" in test_extra  # test-only packages stay in the extra


def test_no_test_module_imports_another() -> None:
    """Test modules share helpers (factories, conftest, the SMTP server) but never each other."""
    for path in (ROOT / "tests").rglob("*.py"):
        found = [m for m in _imports(path) if re.match(r"tests(\.\w+)*\.test_", m)]
        assert found == [], f"{path.relative_to(ROOT)} imports {found}"


def test_job_handlers_come_from_the_services_registry() -> None:
    from marketing_cli import jobs, services

    services.load_job_handlers()
    assert "segment.count" in jobs.load_handlers()
    assert "HANDLER_MODULES" not in vars(jobs)


def _schema(path: Path) -> dict[str, Any]:
    import sqlite_utils

    db = sqlite_utils.Database(path)
    try:
        return {
            "tables": {t.name: (t.columns_dict, sorted((i.name, tuple(i.columns), i.unique) for i in t.indexes))
                       for t in db.tables},
            "triggers": sorted(t.name for t in db.triggers),
            "views": sorted(db.view_names()),
        }
    finally:
        db.close()


def test_an_upgraded_database_has_the_schema_of_a_new_one(tmp_path: Path) -> None:
    from marketing_cli.storage import db

    new = tmp_path / "new.db"
    db.connect(new).close()
    old = tmp_path / "old.db"
    conn = db.connect(old, upgrade=False)
    db.migrate(conn, target=1)
    conn.close()
    db.connect(old).close()  # upgraded step by step from version 1
    assert _schema(old) == _schema(new)
