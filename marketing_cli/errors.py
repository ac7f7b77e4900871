"""The one error type of mkt.

    MktError(status, message[, detail])   every failure a user can cause or see
      status 400, 401, 404, 409, 413, 429 ...   the HTTP status the API answers with
      message                                   the specification's exact text

Services raise it; the HTTP face renders it as CONTRACT section 4's body
(`marketing_cli/api/responses.py`), the CLI prints the message to stderr and exits 1
(`marketing_cli/cli/output.py`). Anything else that escapes is a bug: the API answers
500 with a generic message and logs the traceback.
"""

from __future__ import annotations


class MktError(Exception):
    """`detail`, when given, says more than the specification's fixed message allows (for
    example which rule a `Validation error` broke): the CLI prints it on a second line; the
    API body stays exactly as CONTRACT section 4 fixes it."""

    def __init__(self, status: int, message: str, detail: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.detail = detail

    def __repr__(self) -> str:
        return f"MktError({self.status}, {self.message!r})"
