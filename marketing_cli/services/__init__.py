"""The service layer: one module per resource, plain functions over a sqlite3 connection.

Each public function takes the connection (and the workspace id where the resource is
workspace-scoped), checks its input, does its work in one transaction and returns exactly
the value the API puts in `data`. Both faces (marketing_cli/cli, marketing_cli/api) call
these functions and nothing else; no module here imports typer or Starlette.
"""
