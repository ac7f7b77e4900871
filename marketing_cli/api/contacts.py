"""/v1 contacts endpoints: (being built)."""

from __future__ import annotations

routes: list = []
