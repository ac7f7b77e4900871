"""One CSV row checked and normalised into a contact row, column by column.

RowParser is built once per import from the mapped header (services/contacts/columns.py): each
column gets its index and its normaliser up front, so parsing a row is a loop over
prepared columns with no switch on types. A row with problems yields every reason at
once (the importer reports them with the row's line number), and the kind of problem that
rejected it (REJECTION_KINDS: the summary counts rejections by kind).

Bad optional cells (BAD_CELLS): by default ("leave-out") a cell that does not fit its
column (a number, a date, an option, a phone number, a tag name) is left out and the
contact is imported without it: one stray cell must not cost a subscriber. The cell is
reported with its line, column and reason once the contact is written (`ContactRow.left_out`,
reported by batches.py). What decides who the
contact is or whether it may be mailed still rejects the row: the email address, the phone
number of a row without one (it is the key), the status and SMS status (a mistyped
UNSUBSCRIBED must never import as SUBSCRIBED), and a required field's value. "reject-row"
rejects any row with a bad cell, as imports did before.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, NamedTuple

from marketing_cli.errors import MktError
from marketing_cli.services.contacts import records, tags, values
from marketing_cli.services.contacts.columns import column_normaliser, split_tag_names, status_normaliser
from marketing_cli.services.contacts.values import EMAIL_TAG, PHONE_TAG, FieldMap

EMAIL_REQUIRED = records.UPSERT_EMAIL_REQUIRED
IDENTITY_REQUIRED = records.UPSERT_IDENTITY_REQUIRED
LEAVE_OUT, REJECT_ROW = "leave-out", "reject-row"
# A contact's data as the batch writes it (compact, UTF-8 kept as it is).
dumps_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
BAD_CELLS = (LEAVE_OUT, REJECT_ROW)
BAD_CELLS_INVALID = "The bad cells option must be leave-out or reject-row (--bad-cells / bad_cells=)."


class Rejection(NamedTuple):
    """Why a row is rejected: the reasons (one text) and the kind that counts it in the summary."""

    kind: str
    reason: str


def check_bad_cells(value: Any) -> str:
    """What the import does with a bad optional cell: BAD_CELLS, or 400."""
    text = value.strip().lower() if isinstance(value, str) else value
    if text not in BAD_CELLS:
        raise MktError(400, BAD_CELLS_INVALID)
    return text


class ContactRow:
    """One contact of a batch: a file row, or several rows with the same key merged."""

    __slots__ = ("line", "lines", "cells", "email", "phone", "data", "status", "sms_status", "tags", "merged",
                 "left_out", "data_json")

    def __init__(self, line: int, cells: list[str], email: str | None, phone: str | None, data: dict[str, Any],
                 status: str | None, sms_status: str | None, tags: list[str] | None) -> None:
        self.line = line
        self.lines = 1
        self.cells = cells
        self.email = email
        self.phone = phone
        self.data = data
        self.status = status
        self.sms_status = sms_status
        self.tags = tags
        self.merged: list[tuple[int, list[str]]] | None = None  # (line, cells) of the later rows merged in
        self.left_out: list[tuple[int, int, str]] | None = None  # (line, column index, reason): bad cells left out
        self.data_json: str | None = None  # `data` as JSON text (dumps_json), made by the parse worker

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled by the parse worker (parse_worker.py) as one call of its values: a third of the
        time pickle's own way with __slots__ takes (a dict of them per row). The worker also
        writes `data` as the JSON text the batch writes (data_json), so the writing process does
        not encode it again (about 5 us a row off the writer)."""
        return _contact_row, (self.line, self.lines, self.cells, self.email, self.phone, self.data, self.status,
                              self.sms_status, self.tags, self.merged, self.left_out,
                              self.data_json if self.data_json is not None else dumps_json(self.data))

    def file_rows(self) -> list[tuple[int, list[str]]]:
        """(line, cells) of every file row this contact stands for: each one is reported if it is rejected."""
        return [(self.line, self.cells), *(self.merged or ())]

    def merge(self, later: ContactRow) -> None:
        self.lines += 1
        self.data_json = None  # the merged data is encoded where it is written
        self.merged = [*(self.merged or ()), *later.file_rows()]
        if later.left_out:
            self.left_out = [*(self.left_out or ()), *later.left_out]
        self.data.update(later.data)
        self.phone = later.phone or self.phone
        self.status = later.status or self.status
        self.sms_status = later.sms_status or self.sms_status
        if later.tags:
            self.tags = (self.tags or []) + later.tags


def _contact_row(line: int, lines: int, cells: list[str], email: str | None, phone: str | None, data: dict[str, Any],
                 status: str | None, sms_status: str | None, tags: list[str] | None,
                 merged: list[tuple[int, list[str]]] | None, left_out: list[tuple[int, int, str]] | None,
                 data_json: str | None) -> ContactRow:
    row = ContactRow(line, cells, email, phone, data, status, sms_status, tags)
    row.lines, row.merged, row.left_out, row.data_json = lines, merged, left_out, data_json
    return row


class RowParser:
    """Cells of one row -> a ContactRow, or the reason it is rejected."""

    def __init__(self, ncols: int, columns: dict[int, str], fields: FieldMap, allow_without_email: bool,
                 date_format: str | None = None, day_first: bool | None = None, bad_cells: str = LEAVE_OUT) -> None:
        self.ncols = ncols
        self.allow_without_email = allow_without_email
        self.leave_out = bad_cells == LEAVE_OUT
        self.required_cols: set[int] = set()  # a required field's bad value rejects the row
        self.email_idx = self.phone_idx = self.status_idx = self.sms_idx = self.tags_idx = -1
        self.data_cols: list[tuple[int, str, Callable[[str], Any]]] = []
        self.phone_region = fields.phone.default_region if fields.phone else None
        self.phone_field_id = fields.phone.id if fields.phone else 0
        for index, target in columns.items():
            if target == EMAIL_TAG:
                self.email_idx = index
            elif target == PHONE_TAG:
                self.phone_idx = index
            elif target == "status":
                self.status_idx = index
            elif target == "sms_status":
                self.sms_idx = index
            elif target == "tags":
                self.tags_idx = index
            else:
                f = fields.by_tag[target]
                self.data_cols.append((index, str(f.id), column_normaliser(f, date_format, day_first)))
                if f.required:
                    self.required_cols.add(index)
        self.status_of = status_normaliser(records.STATUSES, records.STATUS_INVALID)
        self.sms_of = status_normaliser(records.SMS_STATUSES, records.SMS_STATUS_INVALID)

    def _phone_reason(self, raw: str, exc: ValueError) -> str:
        """Why a phone number is refused, and for a number without +, which region read it and how to change it."""
        reason = f"phone number is invalid: {exc}"
        if raw.strip().startswith("+"):
            return reason
        how = (f"(mkt fields update {self.phone_field_id} --default-region CC; API: PATCH "
               f"/v1/fields/{self.phone_field_id} with default_region)")
        if self.phone_region is None:
            return (f"{reason} Set the phone_number field's default region {how}, or write the number with "
                    "+ and its country code.")
        return (f"{reason} It has no + country code, so it was read as a number of {self.phone_region}, the "
                f"phone_number field's default region: write it with + and its country code, or change the "
                f"default region {how}.")

    def parse(self, line: int, cells: list[str]) -> ContactRow | Rejection:
        """The row's normalised values, or why it is rejected (all its reasons at once, in column order)."""
        if len(cells) != self.ncols:
            return Rejection("width", f"The row has {len(cells)} values; the header has {self.ncols} columns.")
        reasons: list[str] | None = None
        kinds: set[str] = set()
        left_out: list[tuple[int, int, str]] | None = None  # bad optional cells, when they are left out
        data: dict[str, Any] = {}
        for index, key, normalise in self.data_cols:
            raw = cells[index]
            if raw:
                try:
                    value = normalise(raw)
                except ValueError as exc:
                    if self.leave_out and index not in self.required_cols:
                        left_out = (left_out or []) + [(line, index, str(exc))]
                    else:
                        reasons = (reasons or []) + [str(exc)]
                        kinds.add("required" if index in self.required_cols else "cell")
                    continue
                if value is not None:
                    data[key] = value
        email = phone = status = sms_status = None
        tag_names = None
        has_email = self.email_idx >= 0 and bool(cells[self.email_idx].strip())
        try:
            if has_email:
                email = values.normalize_email(cells[self.email_idx])
        except ValueError as exc:
            reasons = (reasons or []) + [str(exc)]
            kinds.add("email")
        if self.phone_idx >= 0 and cells[self.phone_idx].strip():
            try:
                phone = values.normalize_phone(cells[self.phone_idx], self.phone_region)
            except ValueError as exc:
                reason = self._phone_reason(cells[self.phone_idx], exc)
                if self.leave_out and has_email:  # optional beside an email address; the key of a row without
                    left_out = (left_out or []) + [(line, self.phone_idx, reason)]
                else:
                    reasons = (reasons or []) + [reason]
                    kinds.add("cell" if has_email else "phone")
        if self.status_idx >= 0 and cells[self.status_idx]:
            try:
                status = self.status_of(cells[self.status_idx])
            except ValueError as exc:
                reasons = (reasons or []) + [str(exc)]
                kinds.add("status")
        if self.sms_idx >= 0 and cells[self.sms_idx]:
            try:
                sms_status = self.sms_of(cells[self.sms_idx])
            except ValueError as exc:
                reasons = (reasons or []) + [str(exc)]
                kinds.add("status")
        if self.tags_idx >= 0 and cells[self.tags_idx]:
            tag_names = split_tag_names(cells[self.tags_idx]) or None
            if tag_names and any(len(name) > tags.MAX_NAME for name in tag_names):
                if self.leave_out:
                    left_out = (left_out or []) + [(line, self.tags_idx, tags.NAME_LENGTH)]
                    tag_names = None
                else:
                    reasons = (reasons or []) + [tags.NAME_LENGTH]
                    kinds.add("cell")
        if email is None and reasons is None:
            if not self.allow_without_email:
                return Rejection("no_email", EMAIL_REQUIRED)
            if phone is None:
                return Rejection("no_email", IDENTITY_REQUIRED)
        if reasons:
            return Rejection(next(k for k in REJECTION_KINDS if k in kinds), " ".join(reasons))
        row = ContactRow(line, cells, email, phone, data, status, sms_status, tag_names)
        row.left_out = sorted(left_out) if left_out else None  # in column order
        return row


# The kinds of rejection, most telling first (a row with several problems is counted under the
# first), each with what the import's summary says after the number of rows ("791 over the
# contacts allowance of 1,000: ...", "3 with an invalid email address").
REJECTION_KINDS = {
    "csv": "not valid CSV",
    "width": "with more or fewer values than the header has columns",
    "email": "with an invalid email address",
    "no_email": "with no email address (nor a phone number, where the workspace allows contacts without email)",
    "phone": "with no email address and an invalid phone number",
    "status": "with an invalid status or SMS status",
    "required": "with no valid value for a required field",
    "cell": "with a value that does not fit its column (--bad-cells reject-row)",
    "phone_taken": "with a phone number that belongs to another contact",
    "allowance": "over the contacts allowance of {allowed:,}: mkt billing allowance set contacts N",
}
