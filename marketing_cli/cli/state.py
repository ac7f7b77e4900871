"""What the root options (--db, --workspace) give every command: a connection, a workspace;
and the operator's settings file, which remembers a default workspace per database.

Which workspace a command acts on: `--workspace ID` (or MKT_WORKSPACE), else the one
`mkt workspace use ID` remembered for this database, else the database's only workspace.
The settings file is `settings.json` in `platformdirs.user_config_dir("mkt")` (MKT_CONFIG_DIR
overrides the folder): `{"default_workspace": {"<absolute database path>": id}}`.
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer

from marketing_cli.errors import MktError
from marketing_cli.kernel.numbers import parse_digits


@dataclass
class State:
    db_option: str | None = None
    workspace_option: int | None = None
    _conn: sqlite3.Connection | None = field(default=None, repr=False)

    @property
    def db_path(self) -> Path:
        from marketing_cli.storage.db import resolve_db_path

        return resolve_db_path(self.db_option)

    def conn(self) -> sqlite3.Connection:
        """The database's connection. The file must exist: only `mkt init` and `mkt serve` create
        one (`db.create_database_file`), so a mistyped --db is an error, not a new empty database."""
        if self._conn is None:
            from marketing_cli.storage.db import connect

            self._conn = connect(self.db_path, create=False)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def workspace_id(self) -> int:
        conn = self.conn()
        if self.workspace_option is not None:
            if conn.execute("SELECT 1 FROM workspaces WHERE id = ?", (self.workspace_option,)).fetchone() is None:
                raise MktError(404, f"There is no workspace {self.workspace_option} in {self.db_path}.")
            return self.workspace_option
        remembered = remembered_workspace(self.db_path)
        if remembered is not None:
            if conn.execute("SELECT 1 FROM workspaces WHERE id = ?", (remembered,)).fetchone() is None:
                raise MktError(404, f"The default workspace {remembered} (`mkt workspace use`) is no longer in "
                                    f"{self.db_path}: pick another with `mkt workspace use ID`.")
            return remembered
        rows = conn.execute("SELECT id, name FROM workspaces ORDER BY id LIMIT 6").fetchall()
        if not rows:
            raise MktError(400, f"No workspace in {self.db_path} yet: create one with `mkt init --name NAME`.")
        if len(rows) > 1:
            listed = ", ".join(f"{r[0]} ({r[1]})" for r in rows[:5]) + (", ..." if len(rows) > 5 else "")
            raise MktError(400, f"This database holds several workspaces ({listed}): run `mkt workspace use ID` "
                                "to make one the default, or add --workspace ID to the command.")
        return rows[0][0]


def state(ctx: typer.Context) -> State:
    root = ctx.find_root()
    if not isinstance(root.obj, State):
        env = os.environ.get("MKT_WORKSPACE")
        root.obj = State(workspace_option=parse_digits(env))
    return root.obj


# --- the settings file ---------------------------------------------------------------------

def settings_path() -> Path:
    folder = os.environ.get("MKT_CONFIG_DIR")
    if not folder:
        import platformdirs

        folder = platformdirs.user_config_dir("mkt")
    return Path(folder) / "settings.json"


def read_settings() -> dict:
    """The settings file's content; {} when it is missing or unreadable (a setting is a convenience)."""
    try:
        value = json.loads(settings_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _db_key(db_path: Any) -> str:
    """The settings file's key for a database: the file's absolute path, or the URL without its password."""
    from marketing_cli.storage.postgres.url import DatabaseUrl

    if isinstance(db_path, DatabaseUrl):
        return str(db_path)
    return str(Path(db_path).expanduser().resolve())


def remembered_workspace(db_path: Path) -> int | None:
    value = read_settings().get("default_workspace", {})
    found = value.get(_db_key(db_path)) if isinstance(value, dict) else None
    return found if isinstance(found, int) and not isinstance(found, bool) else None


def remember_workspace(db_path: Path, workspace_id: int | None) -> Path:
    """Store (None: forget) the default workspace of this database; returns the settings file.
    Written to a temporary file and renamed, so a reader never sees half a file."""
    settings = read_settings()
    defaults = settings.get("default_workspace")
    if not isinstance(defaults, dict):
        defaults = {}
    if workspace_id is None:
        defaults.pop(_db_key(db_path), None)
    else:
        defaults[_db_key(db_path)] = workspace_id
    settings["default_workspace"] = defaults
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(temporary, path)
    return path
