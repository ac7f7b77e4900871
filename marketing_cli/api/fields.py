"""/v1 fields endpoints: (being built)."""

from __future__ import annotations

routes: list = []
