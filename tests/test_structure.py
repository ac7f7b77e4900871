"""The code's shape (issue 8, "Structure"): arrows point one way, one builder of each
thing, declared dependencies match the imported ones, tests do not import each other, and
an upgraded database has exactly the schema of a new one (compared with sqlite-utils'
introspection)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "marketing_cli"
# Core modules below the services: they must never import a service or a face.
CORE = ("db.py", "jobs.py", "leases.py", "field_sql.py", "kernel/ids.py", "kernel/clock.py", "errors.py")
# Import name -> distribution name, for the third-party packages the code imports.
DISTRIBUTIONS = {
    "anyio": "anyio", "starlette": "starlette", "uvicorn": "uvicorn", "typer": "typer", "rich": "rich",
    "sqlite_utils": "sqlite-utils", "phonenumbers": "phonenumbers", "nh3": "nh3", "dateutil": "python-dateutil",
    "platformdirs": "platformdirs", "httpx": "httpx", "email_validator": "email-validator", "dns": "dnspython",
    "cryptography": "cryptography", "orjson": "orjson", "idna": "idna", "ua_parser": "ua-parser",
    "maxminddb": "maxminddb", "certifi": "certifi", "httptools": "httptools",
}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("name", CORE)
def test_core_modules_import_no_service_and_no_face(name: str) -> None:
    found = [m for m in _imports(PACKAGE / name)
             if m.startswith(("marketing_cli.services", "marketing_cli.cli", "marketing_cli.api"))]
    assert found == [], f"{name} imports {found}"


def test_services_import_no_face() -> None:
    for path in (PACKAGE / "services").glob("*.py"):
        found = [m for m in _imports(path) if m.split(".")[0] in ("typer", "starlette", "uvicorn")
                 or m.startswith(("marketing_cli.cli", "marketing_cli.api"))]
        assert found == [], f"{path.name} imports {found}"


def test_one_builder_of_a_field_expression() -> None:
    """Only field_sql.py writes a field's JSON path into SQL."""
    built = re.compile(r"""\$\.\\?"\{""")  # '$."{...}"' or '$.\"{...}\"' in an f-string
    offenders = [str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py")
                 if p.name != "field_sql.py" and built.search(p.read_text(encoding="utf-8"))]
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
    for path in (ROOT / "tests").glob("*.py"):
        found = [m for m in _imports(path) if m.startswith("tests.test_")]
        assert found == [], f"{path.name} imports {found}"


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
    from marketing_cli import db

    new = tmp_path / "new.db"
    db.connect(new).close()
    old = tmp_path / "old.db"
    conn = db.connect(old, upgrade=False)
    db.migrate(conn, target=1)
    conn.close()
    db.connect(old).close()  # upgraded step by step from version 1
    assert _schema(old) == _schema(new)
