"""An SMS message's merge tags rendered per recipient, in SQL where it can be.

`Renderer` splits the message once; expansion then renders a whole batch in one SQL
statement (`values_sql`, `body_sql`, `measure_sql`), and `register_renderer` gives that
statement the two Python functions it falls back on (`mkt_sms_render` for values SQL
cannot turn into text, `mkt_sms_measure` for texts outside the GSM-7 ASCII fast path).
"""

from __future__ import annotations

import json
import re
import sqlite3
from typing import Any

from marketing_cli import field_sql
from marketing_cli.services.sms.segments import MULTI_GSM, SINGLE_GSM, count_segments

CONTACT_TAG = re.compile(r"\{\{\s*contact\.([A-Za-z0-9_]+)\s*\}\}")
# Printable ASCII of the GSM basic table (no `, no extension characters) and LF: one septet each.
FAST_CLASS = "\n -Z_a-z"
_OUTSIDE_FAST_CLASS = re.compile(f"[^{FAST_CLASS}]")


class Renderer:
    """Renders `{{contact.<merge_tag>}}` for one recipient (email, phone, the data JSON).

    Only contact fields are SMS merge tags; a missing value renders as the field's default
    value, else as nothing; other `{{...}}` text is left as written.
    """

    def __init__(self, conn: sqlite3.Connection, workspace_id: int, template: str) -> None:
        from marketing_cli.services.contacts.values import EMAIL_TAG, PHONE_TAG, load_fields

        fields = load_fields(conn, workspace_id)
        self.parts: list[Any] = []  # str, or (source, key, default)
        position = 0
        for match in CONTACT_TAG.finditer(template):
            self.parts.append(template[position:match.start()])
            f = fields.by_tag.get(match.group(1))
            if f is None:
                self.parts.append(("none", None, None))
            elif f.merge_tag == EMAIL_TAG:
                self.parts.append(("email", None, f.default_value))
            elif f.merge_tag == PHONE_TAG:
                self.parts.append(("phone", None, f.default_value))
            else:
                self.parts.append(("data", str(f.id), f.default_value))
            position = match.end()
        self.parts.append(template[position:])
        self.has_tags = len(self.parts) > 1
        self.values_sql = self._values_sql(fields) if self.has_tags else None

    @staticmethod
    def _literal(text: str) -> str:
        return "'" + text.replace("'", "''") + "'"

    def _values_sql(self, fields: Any) -> list[str] | None:
        """Each tag's text (its default applied) as an SQL expression over `c` (a contacts row),
        in the order of `parts`, so that expansion renders a million recipients without a Python
        call each; None when a field's values need Python to become text (BOOLEAN, DROPDOWN_MULTIPLE)."""
        values = []
        for part in self.parts:
            if isinstance(part, str):
                continue
            source, key, default = part
            if source == "none":
                values.append("''")
                continue
            if source == "data":
                if fields.by_id[int(key)].type in ("BOOLEAN", "DROPDOWN_MULTIPLE"):
                    return None
                value = f"CAST({field_sql.value_expr(key, 'c')} AS TEXT)"
            else:
                value = f"c.{source}"
            values.append(f"COALESCE(NULLIF({value}, ''), {self._literal(default or '')})")
        return values

    def body_sql(self, value: str) -> str:
        """The rendering as an SQL expression, the i-th tag's text being `value.format(i)`."""
        pieces, number = [], 0
        for part in self.parts:
            if isinstance(part, str):
                if part:
                    pieces.append(self._literal(part))
            else:
                pieces.append(value.format(number))
                number += 1
        return " || ".join(pieces)

    def measure_sql(self, value: str) -> str:
        """The message's measure (segments * 2, plus 1 for UCS-2) as an SQL expression over the
        tags' texts (`value.format(i)`).

        When the written text and every tag's text are printable ASCII of the GSM basic table
        (no `, no extension characters) or LF, a character is a septet and the count is
        arithmetic on lengths: the class test runs on the tags' texts only (a first name, not
        the whole message: GLOB costs about 2 us a row on 80 characters). Any other text is
        measured in Python (`mkt_sms_measure`, cached per text).
        """
        python = f"mkt_sms_measure({self.body_sql(value)})"
        written = "".join(p for p in self.parts if isinstance(p, str))
        if _OUTSIDE_FAST_CLASS.search(written):
            return python
        count = sum(not isinstance(p, str) for p in self.parts)
        fits = " AND ".join(f"{value.format(i)} NOT GLOB '*[^{FAST_CLASS}]*'" for i in range(count))
        length = " + ".join([str(len(written))] + [f"length({value.format(i)})" for i in range(count)])
        return (f"CASE WHEN {fits} THEN (CASE WHEN {length} = 0 THEN 0 WHEN {length} <= {SINGLE_GSM} THEN 1"
                f" ELSE ({length} + {MULTI_GSM - 1}) / {MULTI_GSM} END) * 2 ELSE {python} END")

    @staticmethod
    def _text(value: Any) -> str:
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, list):
            return ", ".join(str(v) for v in value)
        return str(value)

    def render(self, email: str | None, phone: str | None, data: str | None) -> str:
        values = json.loads(data) if data and data != "{}" else {}
        out = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
                continue
            source, key, default = part
            value = email if source == "email" else phone if source == "phone" else values.get(key) \
                if source == "data" else None
            text = self._text(value)
            out.append(text if text else (default or ""))
        return "".join(out)



def register_renderer(conn: sqlite3.Connection, renderer: Renderer) -> None:
    """mkt_sms_render and mkt_sms_measure: the merge-tag texts SQL cannot render or measure."""
    conn.create_function("mkt_sms_render", 3, renderer.render, deterministic=True)
    cache: dict[str, int] = {}

    def measure(text: str) -> int:
        """segments * 2, plus 1 for UCS-2 (one Python call per recipient, cached per text)."""
        got = cache.get(text)
        if got is None:
            if len(cache) > 100_000:
                cache.clear()
            result = count_segments(text)
            got = cache[text] = result.segments * 2 + (result.encoding == "UCS-2")
        return got

    conn.create_function("mkt_sms_measure", 1, measure, deterministic=True)

