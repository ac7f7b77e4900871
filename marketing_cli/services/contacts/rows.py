"""One CSV row checked and normalised into a contact row, column by column.

RowParser is built once per import from the mapped header (services/contacts/columns.py): each
column gets its index and its normaliser up front, so parsing a row is a loop over
prepared columns with no switch on types. A row with problems yields every reason at
once (the importer reports them with the row's line number).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from marketing_cli.services.contacts import records, tags, values
from marketing_cli.services.contacts.columns import column_normaliser, split_tag_names, status_normaliser
from marketing_cli.services.contacts.values import EMAIL_TAG, PHONE_TAG, FieldMap

EMAIL_REQUIRED = records.UPSERT_EMAIL_REQUIRED
IDENTITY_REQUIRED = records.UPSERT_IDENTITY_REQUIRED


class ContactRow:
    """One contact of a batch: a file row, or several rows with the same key merged."""

    __slots__ = ("line", "lines", "cells", "email", "phone", "data", "status", "sms_status", "tags")

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

    def merge(self, later: ContactRow) -> None:
        self.lines += 1
        self.data.update(later.data)
        self.phone = later.phone or self.phone
        self.status = later.status or self.status
        self.sms_status = later.sms_status or self.sms_status
        if later.tags:
            self.tags = (self.tags or []) + later.tags


class RowParser:
    """Cells of one row -> a ContactRow, or the reason it is rejected."""

    def __init__(self, ncols: int, columns: dict[int, str], fields: FieldMap, allow_without_email: bool,
                 date_format: str | None = None, day_first: bool | None = None) -> None:
        self.ncols = ncols
        self.allow_without_email = allow_without_email
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

    def parse(self, line: int, cells: list[str]) -> ContactRow | str:
        """The row's normalised values, or the reason to reject it (all its reasons at once)."""
        if len(cells) != self.ncols:
            return f"The row has {len(cells)} values; the header has {self.ncols} columns."
        reasons: list[str] | None = None
        data: dict[str, Any] = {}
        for index, key, normalise in self.data_cols:
            raw = cells[index]
            if raw:
                try:
                    value = normalise(raw)
                except ValueError as exc:
                    if reasons is None:
                        reasons = []
                    reasons.append(str(exc))
                    continue
                if value is not None:
                    data[key] = value
        email = phone = status = sms_status = None
        tag_names = None
        try:
            if self.email_idx >= 0 and cells[self.email_idx].strip():
                email = values.normalize_email(cells[self.email_idx])
        except ValueError as exc:
            reasons = (reasons or []) + [str(exc)]
        if self.phone_idx >= 0 and cells[self.phone_idx].strip():
            try:
                phone = values.normalize_phone(cells[self.phone_idx], self.phone_region)
            except ValueError as exc:
                reasons = (reasons or []) + [self._phone_reason(cells[self.phone_idx], exc)]
        if self.status_idx >= 0 and cells[self.status_idx]:
            try:
                status = self.status_of(cells[self.status_idx])
            except ValueError as exc:
                reasons = (reasons or []) + [str(exc)]
        if self.sms_idx >= 0 and cells[self.sms_idx]:
            try:
                sms_status = self.sms_of(cells[self.sms_idx])
            except ValueError as exc:
                reasons = (reasons or []) + [str(exc)]
        if self.tags_idx >= 0 and cells[self.tags_idx]:
            tag_names = split_tag_names(cells[self.tags_idx]) or None
            if tag_names and any(len(name) > tags.MAX_NAME for name in tag_names):
                reasons = (reasons or []) + [tags.NAME_LENGTH]
        if email is None and reasons is None:
            if not self.allow_without_email:
                reasons = [EMAIL_REQUIRED]
            elif phone is None:
                reasons = [IDENTITY_REQUIRED]
        if reasons:
            return " ".join(reasons)
        return ContactRow(line, cells, email, phone, data, status, sms_status, tag_names)
