"""An SMS message's merge tags: the one language of every channel, rendered per recipient in
SQL where it can be.

The language is email's: `kernel/merge.py` parses the message (`{{name}}` and
`{{name|fallback}}`, spaces allowed) and `services/contacts/merge_tags.py` says which tags the
workspace defines and what they hold. A tag renders as in an email's text part:

- `{{contact.<merge_tag>}}`: the contact's value as `format_value` writes it, else the
  field's default value, else the tag's fallback, else nothing;
- `{{workspace.name}}`, `{{server_time}}`, `{{current_date}}`, `{{preview_text}}`: the same
  text for every recipient (the value, else the fallback), so it joins the written text once;
- `{{unsubscribe_url}}`, `{{view_online_url}}`, `{{preferences_url}}`: refused, SMS has no such
  links (recipients reply STOP); a tag the workspace does not define, and `{{` that does not
  open a tag, are refused too (`check_message`, at update, at schedule and at expansion), so
  an SMS never carries a raw `{{...}}`.

Expansion renders a whole batch in one SQL statement (`values_sql`, `body_sql`,
`measure_sql`); `register_renderer` gives that statement the Python functions it falls back
on: `mkt_sms_render` (the whole message through email's own `Renderer` and `Template`, for
values SQL cannot write as `format_value` does: BOOLEAN, multiple choice, a NUMBER that is
not whole) and `mkt_sms_measure` (texts outside the GSM-7 ASCII fast path).
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel.merge import ACTION_NAMES, compile_template
from marketing_cli.services.contacts import merge_tags
from marketing_cli.services.contacts.values import EMAIL_TAG, PHONE_TAG
from marketing_cli.services.sms.segments import GSM_BASIC, MULTI_GSM, SINGLE_GSM, count_segments
from marketing_cli.storage import dialect, field_sql

UNKNOWN_MERGE_TAG = "The merge tag {tag} is not a contact field of this workspace."
UNKNOWN_TAG = "The merge tag {tag} is not a merge tag of this workspace."
DID_YOU_MEAN = " Did you mean {tag}?"
UNSUPPORTED_TAG = ("The merge tag {tag} cannot be used in an SMS: an SMS has no unsubscribe, view online or "
                   "preferences link (recipients reply STOP to opt out).")
NOT_A_TAG = ("The message contains '{text}', which is not a merge tag: write {{{{contact.<merge_tag>}}}}, "
             "or {{{{contact.<merge_tag>|fallback}}}} for a fallback.")

# Printable ASCII of the GSM basic table (no `, no extension characters) and LF: one septet each.
FAST_CLASS = "\n -Z_a-z"
# The same with the basic table's other letters (é, ñ, Ø, Δ ...; not CR, whose CR LF pair a segment
# never splits, nor ESC): where SQL cannot call Python, a first name with an accent is measured by
# arithmetic too instead of by the plpgsql mkt_sms_measure (SQLite's GLOB keeps the ASCII class).
WIDE_FAST_CLASS = FAST_CLASS + "".join(ch for ch in GSM_BASIC if ord(ch) > 127)
_NOT_A_TAG = re.compile(r"\{\{(?:[^{}]{0,40}\}\}|[^{}]{0,20})")
_PYTHON_TYPES = ("BOOLEAN", "DROPDOWN_MULTIPLE")  # values whose text SQL does not write as format_value does


def check_message(conn: sqlite3.Connection, workspace_id: int, message: str) -> None:
    """400 naming the first thing of `message` an SMS cannot send: text that looks like a tag
    and is not one, a tag of email's links, or a tag the workspace does not define."""
    template = compile_template(message)
    for part in template.parts:
        if isinstance(part, str) and "{{" in part:
            raise MktError(400, NOT_A_TAG.format(text=_NOT_A_TAG.search(part).group(0)))  # type: ignore[union-attr]
    for name in template.names:
        if name in ACTION_NAMES:
            raise MktError(400, UNSUPPORTED_TAG.format(tag=f"{{{{{name}}}}}"))
    unknown = merge_tags.find_unknown_tags(conn, workspace_id, message)
    if unknown:
        tag = unknown[0]
        if tag.startswith("{{contact."):
            raise MktError(400, UNKNOWN_MERGE_TAG.format(tag=tag))
        hint = f"contact.{tag[2:-2]}"
        known = merge_tags.known_tag_names(conn, workspace_id)
        raise MktError(400, UNKNOWN_TAG.format(tag=tag) + (DID_YOU_MEAN.format(tag=f"{{{{{hint}}}}}")
                                                           if hint in known else ""))


@dataclass(frozen=True)
class ContactTag:
    """A `{{contact.x}}` part: where its value is (email, phone or data[key]), the field's type,
    and the text it renders when the contact has no value (the default, else the fallback)."""

    source: str
    key: str
    type: str
    empty: str


class Renderer:
    """One message of one workspace, split once into written text and contact tags.

    `parts` holds str (the written text, with the tags that are the same for every recipient
    already rendered into it) and ContactTag. `text` is the message as sent when it has no
    contact tag (`has_tags` False). Raises MktError(400) for a message `check_message` refuses.
    """

    def __init__(self, conn: sqlite3.Connection, workspace_id: int, message: str, *, now: str | None = None) -> None:
        check_message(conn, workspace_id, message)
        self.conn = conn
        self.template = compile_template(message)
        self.tags = merge_tags.Renderer(conn, workspace_id, now=now)
        fields = self.tags.fields
        parts: list[Any] = []
        for part in self.template.parts:
            if isinstance(part, str):
                parts.append(part)
                continue
            name, fallback = part[0], part[1]
            if not name.startswith("contact."):  # the workspace's or the moment's: one text for all
                parts.append(self.tags.shared.get(name) or fallback)
                continue
            f = fields.by_tag[name.removeprefix("contact.")]
            source = "email" if f.merge_tag == EMAIL_TAG else "phone" if f.merge_tag == PHONE_TAG else "data"
            parts.append(ContactTag(source, str(f.id), f.type, self.tags.defaults.get(name) or fallback))
        self.parts = _joined(parts)
        self.has_tags = any(isinstance(p, ContactTag) for p in self.parts)
        self.text = "" if self.has_tags else "".join(self.parts)

    @property
    def needs_python(self) -> bool:
        """Whether a tag's value needs Python to become text (then `mkt_sms_render` renders)."""
        return dialect.sms_python_in_sql(self.conn) and any(
            isinstance(p, ContactTag) and p.type in _PYTHON_TYPES for p in self.parts)

    def values_sql(self, table: str = "c") -> list[str]:
        """Each contact tag's text (its default or fallback applied) as an SQL expression over
        `table` (a contacts row), in the order of `parts`, so that expansion renders a million
        recipients without a Python call each. Only when not `needs_python`."""
        values = []
        for part in self.parts:
            if not isinstance(part, ContactTag):
                continue
            if part.source != "data":
                value = f"{table}.{part.source}"
            elif part.type == "NUMBER":  # whole numbers are written alike; Python writes the others
                value = dialect.sms_number_text(self.conn, field_sql.extract_expr(self.conn, part.key, table))
            elif part.type in _PYTHON_TYPES:  # (SQL that cannot call Python: SQL writes them as Python does)
                value = dialect.sms_value_text(self.conn, part.type, f"{table}.data", field_sql.path(part.key))
            else:
                value = f"CAST({field_sql.extract_expr(self.conn, part.key, table)} AS TEXT)"
            values.append(f"COALESCE(NULLIF({value}, ''), {sql_text(part.empty)})")
        return values

    def body_sql(self, value: str) -> str:
        """The rendering as an SQL expression, the i-th tag's text being `value.format(i)`."""
        pieces, number = [], 0
        for part in self.parts:
            if isinstance(part, str):
                pieces.append(sql_text(part))
            else:
                pieces.append(value.format(number))
                number += 1
        return " || ".join(pieces)

    def measure_sql(self, value: str) -> str:
        """The message's measure (segments * 2, plus 1 for UCS-2) as an SQL expression over the
        tags' texts (`value.format(i)`).

        When the written text and every tag's text are printable ASCII of the GSM basic table
        (no `, no extension characters) or LF (PostgreSQL: any character of the basic table
        but CR and ESC, WIDE_FAST_CLASS), a character is a septet and the count is
        arithmetic on lengths: the class test runs on the tags' texts only (a first name, not
        the whole message: GLOB costs about 2 us a row on 80 characters). Any other text is
        measured in Python (`mkt_sms_measure`, cached per text).
        """
        python = f"mkt_sms_measure({self.body_sql(value)})"
        written = "".join(p for p in self.parts if isinstance(p, str))
        fast = FAST_CLASS if dialect.sms_python_in_sql(self.conn) else WIDE_FAST_CLASS
        if re.search(f"[^{fast}]", written):
            return python
        count = sum(not isinstance(p, str) for p in self.parts)
        fits = " AND ".join(dialect.sms_fits_fast_class(self.conn, value.format(i), fast) for i in range(count))
        length = " + ".join([str(len(written))] + [f"length({value.format(i)})" for i in range(count)])
        return (f"CASE WHEN {fits} THEN (CASE WHEN {length} = 0 THEN 0 WHEN {length} <= {SINGLE_GSM} THEN 1"
                f" ELSE ({length} + {MULTI_GSM - 1}) / {MULTI_GSM} END) * 2 ELSE {python} END")

    def texts_sql(self, table: str = "c") -> str:
        """The columns a first step selects over `table` (a contacts row): each tag's text
        (v0, v1 ...), or the whole message from Python (body) when `needs_python`."""
        if self.needs_python:
            return f"mkt_sms_render({table}.email, {table}.phone, {table}.data) AS body"
        return ", ".join(f"{v} AS v{i}" for i, v in enumerate(self.values_sql(table)))

    def rendered_sql(self, step: str) -> tuple[str, str]:
        """(the body, its measure) as SQL over the columns of `texts_sql` in step `step`."""
        if self.needs_python:
            return f"{step}.body", f"mkt_sms_measure({step}.body)"
        return self.body_sql(f"{step}.v{{}}"), self.measure_sql(f"{step}.v{{}}")

    def render(self, email: str | None, phone: str | None, data: str | None) -> str:
        """One recipient's message, rendered by email's own code (the reference the SQL follows)."""
        return self.template.render(self.tags.values_for({"email": email, "phone": phone, "data": data}))


def sql_text(text: str) -> str:
    """A text as an SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def _joined(parts: list[Any]) -> list[Any]:
    """Adjacent texts joined, empty ones dropped."""
    out: list[Any] = []
    for part in parts:
        if isinstance(part, str):
            if not part:
                continue
            if out and isinstance(out[-1], str):
                out[-1] += part
                continue
        out.append(part)
    return out


def register_renderer(conn: sqlite3.Connection, renderer: Renderer) -> None:
    """mkt_sms_render, mkt_sms_number and mkt_sms_measure: what SQL cannot render or measure."""
    from marketing_cli.kernel.merge import format_value

    conn.create_function("mkt_sms_render", 3, renderer.render, deterministic=True)
    conn.create_function("mkt_sms_number", 1, format_value, deterministic=True)
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
