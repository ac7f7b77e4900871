"""What the root options (--db, --workspace) give every command: a connection, a workspace."""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

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
        from marketing_cli.db import resolve_db_path

        return resolve_db_path(self.db_option)

    def conn(self) -> sqlite3.Connection:
        """The database's connection. The file must exist: only `mkt init` and `mkt serve` create
        one (`db.create_database_file`), so a mistyped --db is an error, not a new empty database."""
        if self._conn is None:
            from marketing_cli.db import connect

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
        ids = [row[0] for row in conn.execute("SELECT id FROM workspaces ORDER BY id LIMIT 2")]
        if not ids:
            raise MktError(400, f"No workspace in {self.db_path} yet: create one with `mkt init --name NAME`.")
        if len(ids) > 1:
            raise MktError(400, "This database holds several workspaces: choose one with --workspace ID "
                                "(or MKT_WORKSPACE); `mkt workspace list` shows them.")
        return ids[0]


def state(ctx: typer.Context) -> State:
    root = ctx.find_root()
    if not isinstance(root.obj, State):
        env = os.environ.get("MKT_WORKSPACE")
        root.obj = State(workspace_option=parse_digits(env))
    return root.obj
