"""/v1 tags endpoints: (being built)."""

from __future__ import annotations

routes: list = []
