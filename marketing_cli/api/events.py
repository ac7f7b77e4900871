"""/v1 events endpoints: (being built)."""

from __future__ import annotations

routes: list = []
