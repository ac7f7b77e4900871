"""/v1 segments endpoints: (being built)."""

from __future__ import annotations

routes: list = []
