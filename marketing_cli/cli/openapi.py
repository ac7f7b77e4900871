"""`mkt openapi`: the OpenAPI 3.1 document that `mkt serve` answers at GET /v1/openapi.json."""

from __future__ import annotations

import typer

from marketing_cli.cli.registry import HELP

app = typer.Typer(help=HELP["openapi"])


@app.callback(invoke_without_command=True)
def openapi() -> None:
    """Print the API's OpenAPI 3.1 document (JSON), as GET /v1/openapi.json answers it."""
    import sys

    from marketing_cli.api.openapi import cli_document
    from marketing_cli.storage.encoding import dumps

    sys.stdout.write(dumps(cli_document(), pretty=True) + "\n")
