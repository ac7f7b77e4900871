"""Contact import (CSV) and export (CSV, JSON Lines): services/bulk.py."""

from __future__ import annotations

import csv
import io
import json
import threading
from typing import Any

import pytest

from marketing_cli.errors import MktError
from marketing_cli.kernel import clock
from marketing_cli.services.account import billing, workspaces
from marketing_cli.services.contacts import batches, bulk, fields, importer, records, tags


@pytest.fixture
def ws(conn: Any, workspace: dict[str, Any]) -> int:
    """A workspace with one custom field of each type (merge tags below) and a phone field."""
    wid = workspace["id"]
    for body in (
        {"label": "City", "merge_tag": "city", "type": "TEXT"},
        {"label": "Age", "merge_tag": "age", "type": "NUMBER"},
        {"label": "VIP", "merge_tag": "vip", "type": "BOOLEAN"},
        {"label": "Birthday", "merge_tag": "birthday", "type": "DATE"},
        {"label": "Plan", "merge_tag": "plan", "type": "DROPDOWN_SINGLE", "definition": "free,pro"},
        {"label": "Topics", "merge_tag": "topics", "type": "DROPDOWN_MULTIPLE", "definition": "news,deals,tips"},
        {"label": "Country", "merge_tag": "country", "type": "COUNTRY"},
        {"label": "Phone", "merge_tag": "phone_number", "type": "TEXT", "default_region": "US"},
    ):
        fields.create_field(conn, wid, body)
    return wid


def run(conn: Any, ws: int, text: str, **kwargs: Any) -> dict[str, Any]:
    return bulk.import_contacts(conn, ws, io.StringIO(text), **kwargs)


def by_email(conn: Any, ws: int, email: str) -> dict[str, Any]:
    row = conn.execute("SELECT id FROM contacts WHERE workspace_id = ? AND email = ?", (ws, email)).fetchone()
    assert row is not None, email
    return records.get_contact(conn, ws, row["id"])


def count(conn: Any, ws: int) -> int:
    return conn.execute("SELECT count(*) FROM contacts WHERE workspace_id = ?", (ws,)).fetchone()[0]


# --- header mapping ----------------------------------------------------------------------

def test_columns_match_merge_tags_labels_and_aliases_ignoring_case(conn: Any, ws: int) -> None:
    result = run(conn, ws, "E-Mail,First Name,CITY,birthday,Phone,Status\n"
                           "Ann@Example.com,Ann,Paris,1990-02-03,(201) 555-0123,unsubscribed\n")
    assert result["columns"] == {"E-Mail": "email_address", "First Name": "first_name", "CITY": "city",
                                 "birthday": "birthday", "Phone": "phone_number", "Status": "status"}
    assert (result["created"], result["updated"], result["skipped"]) == (1, 0, 0)
    contact = by_email(conn, ws, "ann@example.com")
    assert contact["status"] == "UNSUBSCRIBED"
    assert contact["data"]["first_name"] == "Ann"
    assert contact["data"]["city"] == "Paris"
    assert contact["data"]["birthday"] == "1990-02-03"
    assert contact["data"]["phone_number"] == "+12015550123"


def test_map_overrides_and_skips_columns(conn: Any, ws: int) -> None:
    result = run(conn, ws, "Courriel,Ville,Notes\nbo@example.com,Lyon,whatever\n",
                 mapping={"courriel": "email_address", "Ville": "city", "Notes": ""})
    assert result["created"] == 1
    assert by_email(conn, ws, "bo@example.com")["data"]["city"] == "Lyon"


def test_unknown_columns_stop_the_import_before_any_write(conn: Any, ws: int) -> None:
    with pytest.raises(MktError) as err:
        run(conn, ws, "email,Shoe size,Pet\nann@example.com,42,cat\n")
    assert err.value.status == 400
    assert "'Shoe size', 'Pet'" in err.value.message and "--ignore-unknown" in err.value.message
    assert count(conn, ws) == 0
    assert conn.execute("SELECT count(*) FROM contact_io_locks").fetchone()[0] == 0


def test_ignore_unknown_skips_those_columns(conn: Any, ws: int) -> None:
    result = run(conn, ws, "email,Shoe size\nann@example.com,42\n", ignore_unknown=True)
    assert result["created"] == 1 and result["columns"] == {"email": "email_address"}


@pytest.mark.parametrize(("header", "mapping", "message"), [
    ("email,city\n", {"city": "town"}, "We were unable to find a field with the merge_tag town"),
    ("email,city\n", {"Ville": "city"}, "A column mapping (--map / map=) names a column the file does not have: 'Ville'."),
    ("email,City,Town\n", {"Town": "city"}, "The columns 'City' and 'Town' both map to 'city'."),
    ("first_name,city\n", None, "The file has no email_address column (map one with --map 'Column=email_address'; "
     "API: map=Column=email_address)."),
    ("", None, "The file is empty: the first line must name the columns."),
])
def test_header_errors(conn: Any, ws: int, header: str, mapping: dict[str, str] | None, message: str) -> None:
    with pytest.raises(MktError) as err:
        run(conn, ws, header + "ann@example.com,Paris\n" if header else "", mapping=mapping)
    assert (err.value.status, err.value.message) == (400, message)
    assert count(conn, ws) == 0


# --- bad rows ------------------------------------------------------------------------

BAD_ROWS = (
    "email,age,vip,birthday,plan,topics,country,status,sms_status\n"   # line 1
    "ok1@example.com,30,yes,2000-01-31,pro,\"news,tips\",fr,,\n"        # 2
    "not-an-email,30,,,,,,,\n"                                           # 3
    "a@example.com,thirty,,,,,,,\n"                                      # 4
    "b@example.com,,maybe,,,,,,\n"                                       # 5
    "c@example.com,,,2000-02-30,,,,,\n"                                  # 6
    "d@example.com,,,,gold,,,,\n"                                        # 7
    "e@example.com,,,,,\"news,sports\",,,\n"                             # 8
    "f@example.com,,,,,,XX,,\n"                                          # 9
    "g@example.com,,,,,,,ACTIVE,\n"                                      # 10
    "h@example.com,,,,,,,,OPTED_OUT\n"                                   # 11
    ",5,,,,,,,\n"                                                        # 12
    "i@example.com,1\n"                                                  # 13
    "\"j@example.com\",2,no,,free,\"deals\",de,cleaned,blocked\n"        # 14
    "k@example.com,x,,,gold,,,,\n"                                       # 15
)


def test_bad_rows_are_reported_by_line_while_good_rows_go_in(conn: Any, ws: int) -> None:
    """--bad-cells reject-row: any bad cell rejects its row, with every reason (imports before issue 38)."""
    result = run(conn, ws, BAD_ROWS, bad_cells="reject-row")
    assert (result["rows"], result["created"], result["skipped"]) == (14, 2, 12)
    reasons = {e["line"]: e["reason"] for e in result["errors"]}
    assert sorted(reasons) == [3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 15]
    assert reasons[3].startswith("'not-an-email' is not a valid email address")
    assert reasons[4] == "Field 'age' must be a number."
    assert reasons[5] == "Field 'vip' must be true or false."
    assert reasons[6].startswith("Field 'birthday' must be a date")
    assert reasons[7] == "Field 'plan' must be one of: free, pro."
    assert reasons[8] == "Field 'topics' must be one of: news, deals, tips."
    assert reasons[9].startswith("Field 'country' must be an ISO 3166-1 alpha-2 country code")
    assert reasons[10] == "The status you provided is not valid."
    assert reasons[11] == records.SMS_STATUS_INVALID
    assert reasons[12] == "Email address is required for upsert operation."
    assert reasons[13] == "The row has 2 values; the header has 9 columns."
    assert reasons[15] == "Field 'age' must be a number. Field 'plan' must be one of: free, pro."  # every reason
    ok = by_email(conn, ws, "ok1@example.com")["data"]
    assert (ok["age"], ok["vip"], ok["topics"], ok["country"]) == (30, True, ["news", "tips"], "FR")
    j = by_email(conn, ws, "j@example.com")
    assert (j["status"], j["sms_status"], j["data"]["vip"]) == ("CLEANED", "BLOCKED", False)
    assert result["cells_left_out"] == 0 and result["left_out"] == []
    assert {r["kind"]: r["count"] for r in result["rejections"]} == {
        "cell": 7, "email": 1, "status": 2, "no_email": 1, "width": 1}


def test_a_bad_optional_cell_is_left_out_and_the_contact_imported(conn: Any, ws: int) -> None:
    """The default: a cell that does not fit its field is left out, reported by line and column,
    and the rest of the row goes in; the email address and the statuses still reject the row."""
    result = run(conn, ws, BAD_ROWS)
    assert (result["rows"], result["created"], result["skipped"], result["bad_cells"]) == (14, 9, 5, "leave-out")
    assert [e["line"] for e in result["errors"]] == [3, 10, 11, 12, 13]
    assert result["cells_left_out"] == 8
    assert [(c["line"], c["column"]) for c in result["left_out"]] == [
        (4, "age"), (5, "vip"), (6, "birthday"), (7, "plan"), (8, "topics"), (9, "country"), (15, "age"),
        (15, "plan")]
    assert result["left_out"][0]["reason"] == "Field 'age' must be a number."
    assert result["left_out_by_column"][:2] == [{"column": "age", "count": 2}, {"column": "plan", "count": 2}]
    a = by_email(conn, ws, "a@example.com")
    assert a["data"]["age"] is None and a["status"] == "SUBSCRIBED"
    k = by_email(conn, ws, "k@example.com")["data"]
    assert (k["age"], k["plan"]) == (None, None)
    assert result["rows"] == result["created"] + result["updated"] + result["skipped"]


def test_a_bad_optional_cell_never_erases_the_value_a_contact_has(conn: Any, ws: int) -> None:
    run(conn, ws, "email,age,phone\nann@example.com,40,+12015550123\n")
    result = run(conn, ws, "email,age,phone,city\nann@example.com,forty,12,Paris\n")
    assert (result["updated"], result["skipped"], result["cells_left_out"]) == (1, 0, 2)
    ann = by_email(conn, ws, "ann@example.com")["data"]
    assert (ann["age"], ann["phone_number"], ann["city"]) == (40, "+12015550123", "Paris")


def test_a_bad_cell_of_a_required_field_or_a_key_still_rejects_the_row(conn: Any, ws: int) -> None:
    fields.create_field(conn, ws, {"label": "Score", "merge_tag": "score", "type": "NUMBER", "required": True})
    workspaces.update_operator_settings(conn, ws, allow_contacts_without_email=True)
    result = run(conn, ws, "email,phone,score,age\na@example.com,,high,1\n,12,5,2\nb@example.com,12,5,x\n")
    assert [(e["line"], e["reason"].split(":")[0]) for e in result["errors"]] == [
        (2, "Field 'score' must be a number."), (3, "phone number is invalid")]
    assert [r["kind"] for r in result["rejections"]] == ["required", "phone"]
    assert [(c["line"], c["column"]) for c in result["left_out"]] == [(4, "phone"), (4, "age")]  # column order
    assert result["created"] == 1


def test_line_numbers_count_physical_lines_across_quoted_newlines_and_blank_lines(conn: Any, ws: int) -> None:
    text = 'email,city\n"a@example.com","two\nlines"\n\nbad,Paris\n'
    result = run(conn, ws, text)
    assert result["errors"] == [{"line": 5, "reason": result["errors"][0]["reason"]}]
    assert by_email(conn, ws, "a@example.com")["data"]["city"] == "two\nlines"


def test_errors_file_holds_rejected_rows_with_line_and_reason(conn: Any, ws: int) -> None:
    out = io.StringIO()
    run(conn, ws, "email,age\nok@example.com,1\nbad,2\nx@example.com,old\n", errors_out=out, bad_cells="reject-row")
    rows = list(csv.reader(io.StringIO(out.getvalue())))
    assert rows[0] == ["line", "reason", "email", "age"]
    assert [r[0] for r in rows[1:]] == ["3", "4"]
    assert rows[2][1:] == ["Field 'age' must be a number.", "x@example.com", "old"]


def test_error_list_is_capped_but_skipped_counts_all(conn: Any, ws: int) -> None:
    text = "email\n" + "bad\n" * 30
    result = run(conn, ws, text, max_errors=10)
    assert result["skipped"] == 30 and len(result["errors"]) == 10


def test_required_field_missing_rejects_new_contacts_only(conn: Any, ws: int) -> None:
    run(conn, ws, "email\nold@example.com\n")
    fields.create_field(conn, ws, {"label": "Company", "merge_tag": "company", "type": "TEXT", "required": True})
    result = run(conn, ws, "email,city\nold@example.com,Rome\nnew@example.com,Rome\n")
    assert (result["created"], result["updated"]) == (0, 1)
    assert result["errors"] == [{"line": 3, "reason": "Field 'Company' is required."}]


# --- update semantics, duplicates, defaults ------------------------------------------

def test_existing_contacts_get_non_empty_values_merged(conn: Any, ws: int) -> None:
    records.create_contact(conn, ws, {"fields": {"email_address": "ann@example.com", "first_name": "Ann",
                                                  "city": "Paris", "age": 40}, "status": "UNSUBSCRIBED"})
    before = by_email(conn, ws, "ann@example.com")
    result = run(conn, ws, "email,first_name,city,age\nANN@example.com,,Berlin,\n", default_status="CLEANED")
    assert (result["created"], result["updated"]) == (0, 1)
    after = by_email(conn, ws, "ann@example.com")
    assert after["id"] == before["id"]
    assert after["data"]["first_name"] == "Ann" and after["data"]["age"] == 40  # empty cells erase nothing
    assert after["data"]["city"] == "Berlin"
    assert after["status"] == "UNSUBSCRIBED"  # --status is for new contacts only
    assert after["updated_at"] >= before["updated_at"]


def test_reimporting_the_same_values_leaves_updated_at_alone(conn: Any, ws: int) -> None:
    run(conn, ws, "email,city\nann@example.com,Paris\n")
    before = by_email(conn, ws, "ann@example.com")
    conn.execute("UPDATE contacts SET updated_at = '2020-01-01T00:00:00.000Z'")
    result = run(conn, ws, "email,city\nann@example.com,Paris\n")
    assert result["updated"] == 1
    assert by_email(conn, ws, "ann@example.com")["updated_at"] == "2020-01-01T00:00:00.000Z"
    assert before["data"] == by_email(conn, ws, "ann@example.com")["data"]


def test_duplicate_rows_in_the_file_merge_in_file_order(conn: Any, ws: int) -> None:
    text = "email,city,age,status\na@example.com,Paris,1,\nA@example.com,,2,UNSUBSCRIBED\nb@example.com,Oslo,,\n"
    for batch_size in (100, 1):  # within one batch and across batches
        result = run(conn, ws, text.replace("a@", f"a{batch_size}@").replace("A@", f"A{batch_size}@"),
                     batch_size=batch_size)
        assert (result["created"], result["updated"]) == ((2, 1) if batch_size == 100 else (1, 2))
        a = by_email(conn, ws, f"a{batch_size}@example.com")
        assert (a["data"]["city"], a["data"]["age"], a["status"]) == ("Paris", 2, "UNSUBSCRIBED")


def test_new_contacts_get_defaults_and_the_default_status(conn: Any, ws: int) -> None:
    fields.create_field(conn, ws, {"label": "Source", "merge_tag": "source", "type": "TEXT", "default_value": "csv"})
    run(conn, ws, "email,status\na@example.com,\nb@example.com,SUBSCRIBED\n", default_status="unconfirmed")
    a, b = by_email(conn, ws, "a@example.com"), by_email(conn, ws, "b@example.com")
    assert (a["status"], b["status"]) == ("UNCONFIRMED", "SUBSCRIBED")
    assert a["data"]["source"] == "csv" and a["sms_status"] == "SUBSCRIBED"
    assert conn.execute("SELECT sms_status FROM contacts WHERE email = 'a@example.com'").fetchone()[0] is None


def test_invalid_default_status_is_refused(conn: Any, ws: int) -> None:
    with pytest.raises(MktError) as err:
        run(conn, ws, "email\na@example.com\n", default_status="ACTIVE")
    assert err.value.message == "The status you provided is not valid."


def test_import_fires_no_automation_events(conn: Any, ws: int) -> None:
    records.create_contact(conn, ws, {"fields": {"email_address": "a@example.com"}, "status": "SUBSCRIBED"})
    tag = tags.create_tag(conn, ws, {"name": "vip"})
    before = conn.execute("SELECT count(*) FROM contact_events").fetchone()[0]
    run(conn, ws, "email,city,status\na@example.com,Paris,\nb@example.com,Rome,UNCONFIRMED\n", tag_ids=[tag["id"]])
    assert conn.execute("SELECT count(*) FROM contact_events").fetchone()[0] == before


# --- phone numbers -----------------------------------------------------------------

def test_rows_without_email_are_found_by_phone_when_the_workspace_allows_it(conn: Any, ws: int) -> None:
    workspaces.update_operator_settings(conn, ws, allow_contacts_without_email=True)
    run(conn, ws, "phone,city\n+1 201 555 0123,Paris\n")
    result = run(conn, ws, "phone,city,age\n(201) 555-0123,,7\n,Rome,\n")
    assert (result["created"], result["updated"]) == (0, 1)
    assert result["errors"] == [{"line": 3, "reason": records.UPSERT_IDENTITY_REQUIRED}]
    row = conn.execute("SELECT email, data FROM contacts WHERE phone = '+12015550123'").fetchone()
    assert row["email"] is None and count(conn, ws) == 1
    contact = records.get_contact_by_phone(conn, ws, "+12015550123")
    assert (contact["fields"]["city"], contact["fields"]["age"]) == ("Paris", 7)


def test_a_phone_number_stays_with_one_contact(conn: Any, ws: int) -> None:
    run(conn, ws, "email,phone\nowner@example.com,+12015550123\n")
    text = ("email,phone\nother@example.com,201-555-0123\nowner@example.com,+12015550123\n"
            "x@example.com,+12015550199\ny@example.com,+12015550199\nz@example.com,12\n")
    result = run(conn, ws, text, bad_cells="reject-row")
    assert (result["created"], result["updated"]) == (1, 1)
    reasons = {e["line"]: e["reason"] for e in result["errors"]}
    assert reasons[2] == records.PHONE_TAKEN.format(phone="+12015550123")
    assert reasons[5] == records.PHONE_TAKEN.format(phone="+12015550199")
    assert reasons[6].startswith("phone number is invalid")
    # by default the number is left out and the contact imported without it
    result = run(conn, ws, text.replace("@", "2@").replace("owner2@", "owner@"))
    assert (result["created"], result["updated"], result["skipped"]) == (4, 1, 0)
    left = {c["line"]: c["reason"] for c in result["left_out"]}  # x@example.com has +12015550199 since the run above
    assert left[2] == records.PHONE_TAKEN.format(phone="+12015550123") + " The number was left out."
    assert left[4] == left[5] == records.PHONE_TAKEN.format(phone="+12015550199") + " The number was left out."
    assert left[6].startswith("phone number is invalid")
    assert by_email(conn, ws, "other2@example.com")["data"]["phone_number"] is None
    assert by_email(conn, ws, "x@example.com")["data"]["phone_number"] == "+12015550199"


# --- tags --------------------------------------------------------------------------

def test_tag_option_tags_every_imported_contact(conn: Any, ws: int) -> None:
    vip = tags.create_tag(conn, ws, {"name": "vip"})["id"]
    news = tags.create_tag(conn, ws, {"name": "news"})["id"]
    records.create_contact(conn, ws, {"fields": {"email_address": "old@example.com"}, "status": "SUBSCRIBED",
                                       "tags": [news]})
    run(conn, ws, "email\nold@example.com\nnew@example.com\nbad\n", tag_ids=[vip, vip])
    assert sorted(t["id"] for t in by_email(conn, ws, "old@example.com")["tags"]) == sorted([vip, news])
    assert [t["id"] for t in by_email(conn, ws, "new@example.com")["tags"]] == [vip]


def test_unknown_tag_id_is_refused_before_anything(conn: Any, ws: int) -> None:
    with pytest.raises(MktError) as err:
        run(conn, ws, "email\na@example.com\n", tag_ids=[999])
    assert (err.value.status, err.value.message) == (400, "Tag ID 999 does not exist in this workspace")
    assert count(conn, ws) == 0


def test_tags_column_adds_tags_by_name_creating_missing_ones(conn: Any, ws: int) -> None:
    vip = tags.create_tag(conn, ws, {"name": "VIP"})["id"]
    result = run(conn, ws, "email,tags\na@example.com,vip; Newsletter\nb@example.com,newsletter\n")
    assert result["tags_created"] == ["Newsletter"]
    names = {t["name"] for t in tags.list_tags(conn, ws)}
    assert names == {"VIP", "Newsletter"}
    assert {t["name"] for t in by_email(conn, ws, "a@example.com")["tags"]} == {"VIP", "Newsletter"}
    assert [t["name"] for t in by_email(conn, ws, "b@example.com")["tags"]] == ["Newsletter"]
    assert vip in [t["id"] for t in by_email(conn, ws, "a@example.com")["tags"]]


# --- dry run, batches, allowance -----------------------------------------------------

def test_dry_run_reports_what_would_happen_and_writes_nothing(conn: Any, ws: int) -> None:
    run(conn, ws, "email\nold@example.com\n")
    snapshot = conn.execute("SELECT * FROM contacts").fetchall()
    text = "email,city,tags\nold@example.com,Paris,x\nnew@example.com,Rome,y\nnew@example.com,Oslo,\nbad,,\n"
    result = run(conn, ws, text, dry_run=True, batch_size=2)
    assert (result["created"], result["updated"], result["skipped"], result["dry_run"]) == (1, 2, 1, True)
    assert result["tags_created"] == ["x", "y"]
    assert [tuple(r) for r in conn.execute("SELECT * FROM contacts").fetchall()] == [tuple(r) for r in snapshot]
    assert tags.list_tags(conn, ws) == []
    assert conn.execute("SELECT count(*) FROM contact_io_locks").fetchone()[0] == 0


def test_small_batches_import_everything(conn: Any, ws: int) -> None:
    text = "email,age\n" + "".join(f"u{i}@example.com,{i}\n" for i in range(23)) + "bad,1\n"
    seen = []
    result = run(conn, ws, text, batch_size=5, progress=seen.append)
    assert (result["created"], result["skipped"]) == (23, 1)
    assert seen == [5, 10, 15, 20, 24]
    assert count(conn, ws) == 23
    assert billing.usage(conn, ws, "contacts") == 23  # the counter trigger saw every row


def test_postgresql_parses_the_next_batch_while_one_is_written(conn: Any, ws: int, engine: str) -> None:
    """The reader thread runs on PostgreSQL only (dialect.contacts_import_reads_ahead), and is gone
    when the import returns; the rows, the report's order and the progress are the same."""
    seen: list[bool] = []

    def progress(rows: int) -> None:
        seen.append(any(t.name == "mkt-import-reader" for t in threading.enumerate()))

    text = ("email,age\n" + "".join(f"u{i}@example.com,{i}\n" for i in range(12)) + "bad,1\n"
            + "u0@example.com,x\n")
    result = run(conn, ws, text, batch_size=4, progress=progress, bad_cells="reject-row")
    assert seen[0] is (engine == "postgresql")
    assert not any(t.name == "mkt-import-reader" for t in threading.enumerate())
    assert (result["created"], result["skipped"]) == (12, 2)
    assert [e["line"] for e in result["errors"]] == [14, 15]


def test_a_failed_batch_stops_the_reader_before_the_error_leaves_the_import(conn: Any, ws: int,
                                                                           monkeypatch: Any) -> None:
    """A batch that fails (here the second) ends the import with its error, and no reader thread is
    left waiting, even while the error (and its traceback) is still held by the caller."""
    from marketing_cli.services.contacts import batches

    applied = []

    def failing(self: Any, batch: Any, lock: Any = None) -> None:
        applied.append(len(batch))
        if len(applied) == 2:
            raise MktError(503, "The connection to the database was lost: try again.")

    monkeypatch.setattr(batches.BatchWriter, "apply", failing)
    text = "email\n" + "".join(f"f{i}@example.com\n" for i in range(40))
    with pytest.raises(MktError) as caught:
        run(conn, ws, text, batch_size=4)
    assert applied == [4, 4] and caught.value.status == 503
    assert not any(t.name == "mkt-import-reader" for t in threading.enumerate())


def test_the_reader_hands_over_its_error_after_the_batches_before_it() -> None:
    """An error while reading ahead (here from the third batch) reaches the writer after the two
    batches before it, and the reader thread stops."""
    def make(stop: Any) -> Any:
        yield importer._Batch(1, [], [])
        yield importer._Batch(2, [], [])
        raise MktError(400, "broken")

    got = []
    with pytest.raises(MktError, match="broken"):
        for batch in importer._read_ahead(make):
            got.append(batch.rows)
    assert got == [1, 2]
    assert not any(t.name == "mkt-import-reader" for t in threading.enumerate())


def test_leaving_early_stops_the_reader_within_a_row() -> None:
    """A writer that stops (an error, Ctrl-C) leaves no thread reading the file behind, even one
    waiting to hand over a batch or still reading."""
    read = []

    def make(stop: Any) -> Any:
        for i in range(1_000_000):
            if stop.is_set():
                return
            read.append(i)
            yield importer._Batch(i, [], [])

    batches = importer._read_ahead(make)
    assert next(batches).rows == 0
    batches.close()
    assert not any(t.name == "mkt-import-reader" for t in threading.enumerate())
    assert len(read) < 10


def test_allowance_rejects_new_contacts_beyond_it_but_not_updates(conn: Any, ws: int) -> None:
    billing.set_allowance(conn, ws, "contacts", 3)
    run(conn, ws, "email\na@example.com\n")
    text = "email,city\n" + "".join(f"n{i}@example.com,X\n" for i in range(4)) + "a@example.com,Paris\n"
    result = run(conn, ws, text, batch_size=2)
    assert (result["created"], result["updated"], result["skipped"]) == (2, 1, 2)
    assert [e["reason"] for e in result["errors"]] == [batches.OVER_ALLOWANCE] * 2
    assert batches.OVER_ALLOWANCE.startswith("Billing limit error: ")
    assert [e["line"] for e in result["errors"]] == [4, 5]
    assert result["rejections"] == [{"kind": "allowance", "count": 2, "reason": (
        "over the contacts allowance of 3: mkt billing allowance set contacts N")}]
    assert billing.usage(conn, ws, "contacts") == 3
    assert by_email(conn, ws, "a@example.com")["data"]["city"] == "Paris"
    assert run(conn, ws, text, dry_run=True)["skipped"] == 2  # a dry run counts the allowance too


# --- the io lock ----------------------------------------------------------------------

def test_a_live_lock_refuses_import_and_export(conn: Any, ws: int) -> None:
    bulk.acquire_io_lock(conn, ws, "export", "someone-else")
    with pytest.raises(MktError) as err:
        run(conn, ws, "email\na@example.com\n")
    assert err.value.status == 409 and "Another contact export is running" in err.value.message
    with pytest.raises(MktError):
        bulk.export_contacts(conn, ws, io.StringIO())
    assert count(conn, ws) == 0
    assert run(conn, ws, "email\na@example.com\n", dry_run=True)["created"] == 1  # a dry run needs no lock


def test_an_expired_lock_is_taken_over(conn: Any, ws: int) -> None:
    conn.execute("INSERT INTO contact_io_locks VALUES (?, 'import', 'crashed', ?, ?)",
                 (ws, "2020-01-01T00:00:00.000Z", "2020-01-01T00:10:00.000Z"))
    assert run(conn, ws, "email\na@example.com\n")["created"] == 1
    assert conn.execute("SELECT count(*) FROM contact_io_locks").fetchone()[0] == 0


def test_field_changes_are_refused_while_an_import_runs(conn: Any, ws: int) -> None:
    refused = []

    def try_field_change(rows: int) -> None:
        assert bulk.io_in_progress(conn, ws)
        with pytest.raises(MktError) as err:
            fields.create_field(conn, ws, {"label": "Mid", "merge_tag": "mid", "type": "TEXT"})
        refused.append((err.value.message, getattr(err.value, "detail", None)))

    run(conn, ws, "email\na@example.com\nb@example.com\n", batch_size=1, progress=try_field_change)
    # The specification answers 400 "Validation error"; the cause is kept in `detail`.
    assert refused and set(refused) == {("Validation error", "An import or export is currently in progress.")}
    assert not bulk.io_in_progress(conn, ws)
    fields.create_field(conn, ws, {"label": "After", "merge_tag": "after", "type": "TEXT"})


def test_the_lock_is_released_when_an_import_fails(conn: Any, ws: int) -> None:
    def boom(rows: int) -> None:
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        run(conn, ws, "email\na@example.com\nb@example.com\n", batch_size=1, progress=boom)
    assert not bulk.io_in_progress(conn, ws)
    assert not conn.in_transaction


# --- export ----------------------------------------------------------------------------

def _seed(conn: Any, ws: int) -> None:
    vip = tags.create_tag(conn, ws, {"name": "vip"})["id"]
    news = tags.create_tag(conn, ws, {"name": "news"})["id"]
    records.create_contact(conn, ws, {
        "fields": {"email_address": "ann@example.com", "first_name": "Ann", "city": "Paris, FR", "age": 41.5,
                   "vip": True, "birthday": "1985-04-01", "plan": "pro", "topics": ["news", "tips"],
                   "country": "fr", "phone_number": "+33612345678"},
        "status": "UNSUBSCRIBED", "sms_status": "BLOCKED", "tags": [vip, news]})
    records.create_contact(conn, ws, {"fields": {"email_address": "bob@example.com", "age": 7, "vip": False,
                                                  "last_name": 'O"Neil'}, "status": "SUBSCRIBED"})
    records.create_contact(conn, ws, {"fields": {"email_address": "cy@example.com"}, "status": "CLEANED",
                                       "tags": [news]})


def test_export_csv_header_and_values(conn: Any, ws: int) -> None:
    _seed(conn, ws)
    out = io.StringIO()
    result = bulk.export_contacts(conn, ws, out)
    assert result == {"exported": 3, "format": "csv"}
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert list(rows[0]) == ["email_address", "first_name", "last_name", "city", "age", "vip", "birthday", "plan",
                             "topics", "country", "phone_number", "status", "sms_status", "tags", "created_at",
                             "updated_at"]
    ann, bob, cy = rows
    assert (ann["city"], ann["age"], ann["vip"], ann["topics"], ann["country"], ann["phone_number"]) == (
        "Paris, FR", "41.5", "true", "news,tips", "FR", "+33612345678")
    assert (ann["status"], ann["sms_status"], ann["tags"]) == ("UNSUBSCRIBED", "BLOCKED", "vip;news")
    assert (bob["age"], bob["vip"], bob["last_name"], bob["sms_status"], bob["city"]) == ("7", "false", 'O"Neil',
                                                                                          "SUBSCRIBED", "")
    assert cy["tags"] == "news"


def test_export_fields_option_and_unknown_field(conn: Any, ws: int) -> None:
    _seed(conn, ws)
    out = io.StringIO()
    bulk.export_contacts(conn, ws, out, fields=["age", "email_address"])
    lines = out.getvalue().splitlines()
    assert lines[0] == "age,email_address,status,sms_status,tags,created_at,updated_at"
    assert lines[1].startswith("41.5,ann@example.com,UNSUBSCRIBED,BLOCKED,vip;news,")
    with pytest.raises(MktError) as err:
        bulk.export_contacts(conn, ws, io.StringIO(), fields=["shoe"])
    assert err.value.message == "We were unable to find a field with the merge_tag shoe"
    with pytest.raises(MktError):
        bulk.export_contacts(conn, ws, io.StringIO(), fmt="xml")


def test_export_jsonl_is_the_api_contact_shape_in_created_order(conn: Any, ws: int) -> None:
    _seed(conn, ws)
    out = io.StringIO()
    bulk.export_contacts(conn, ws, out, fmt="jsonl", chunk_size=2)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [c["data"]["email_address"] for c in lines] == ["ann@example.com", "bob@example.com", "cy@example.com"]
    for line in lines:
        assert line == records.get_contact(conn, ws, line["id"])
    out = io.StringIO()
    bulk.export_contacts(conn, ws, out, fmt="jsonl", fields=["age"])
    assert json.loads(out.getvalue().splitlines()[1])["data"] == {"age": 7}


def test_export_streams_in_keyset_chunks_and_holds_the_lock(conn: Any, ws: int) -> None:
    run(conn, ws, "email\n" + "".join(f"u{i:02d}@example.com\n" for i in range(25)))
    # Equal created_at values inside a batch: the id breaks the tie, so no row is lost or repeated.
    seen: list[int] = []

    def check(n: int) -> None:
        assert bulk.io_in_progress(conn, ws)
        seen.append(n)

    out = io.StringIO()
    bulk.export_contacts(conn, ws, out, chunk_size=4, progress=check)
    emails = [r["email_address"] for r in csv.DictReader(io.StringIO(out.getvalue()))]
    assert emails == [f"u{i:02d}@example.com" for i in range(25)]
    assert seen == [4, 8, 12, 16, 20, 24, 25]
    assert not bulk.io_in_progress(conn, ws)


def test_export_never_shows_another_workspace(conn: Any, ws: int) -> None:
    other = workspaces.create_workspace(conn, "Other")["workspace"]["id"]
    run(conn, other, "email\nsecret@example.com\n")
    run(conn, ws, "email\nmine@example.com\n")
    out = io.StringIO()
    bulk.export_contacts(conn, ws, out)
    assert "mine@example.com" in out.getvalue() and "secret@example.com" not in out.getvalue()


# --- round trip ------------------------------------------------------------------------

def _comparable(conn: Any, ws: int) -> list[dict[str, Any]]:
    views = []
    for row in conn.execute("SELECT id FROM contacts WHERE workspace_id = ? ORDER BY email", (ws,)):
        view = records.get_contact(conn, ws, row["id"])
        views.append({"status": view["status"], "sms_status": view["sms_status"], "data": view["data"],
                      "tags": sorted(t["name"] for t in view["tags"])})
    return views


def test_export_then_import_reproduces_the_contacts(conn: Any, ws: int) -> None:
    _seed(conn, ws)
    out = io.StringIO()
    bulk.export_contacts(conn, ws, out)

    # Into a fresh workspace with the same field definitions...
    other = workspaces.create_workspace(conn, "Copy")["workspace"]["id"]
    for f in fields.list_fields(conn, ws):
        if not f["immutable"] and f["merge_tag"] not in ("first_name", "last_name"):
            body = {k: f[k] for k in ("label", "merge_tag", "type", "definition", "default_value", "required",
                                      "default_region") if f.get(k) is not None}
            fields.create_field(conn, other, body)
    result = run(conn, other, out.getvalue())
    assert (result["created"], result["skipped"]) == (3, 0)
    assert _comparable(conn, other) == _comparable(conn, ws)

    # ... and back into the same workspace: nothing changes.
    before = conn.execute("SELECT * FROM contacts WHERE workspace_id = ? ORDER BY id", (ws,)).fetchall()
    result = run(conn, ws, out.getvalue())
    assert (result["created"], result["updated"]) == (0, 3)
    after = conn.execute("SELECT * FROM contacts WHERE workspace_id = ? ORDER BY id", (ws,)).fetchall()
    assert [dict(r) for r in after] == [dict(r) for r in before]


def test_import_timestamps_are_utc(conn: Any, ws: int) -> None:
    started = clock.now()
    run(conn, ws, "email\na@example.com\n")
    contact = by_email(conn, ws, "a@example.com")
    assert contact["created_at"].endswith("Z") and contact["created_at"] >= started


def test_internationalised_addresses_go_in_and_a_non_ascii_local_part_is_imported_with_a_warning(
        conn: Any, ws: int) -> None:
    text = ("email\nann@example.org\nGül.Kowalski.6@Example.com\nann@Bücher.de\nbob@xn--bcher-kva.de\n"
            "jürgen@bücher.de\n")
    for dry_run in (True, False):
        result = run(conn, ws, text, dry_run=dry_run)
        assert (result["created"], result["skipped"], result["warned"]) == (5, 0, 2)
        assert result["warnings"] == [
            {"line": 3, "reason": "gül.kowalski.6@example.com has non-ASCII characters before the @: only an SMTP "
                                  "server that offers SMTPUTF8 (RFC 6531) can deliver to it; through another server "
                                  "its messages fail."},
            {"line": 6, "reason": importer.NEEDS_SMTPUTF8.format(email="jürgen@bücher.de")}]
    stored = sorted(r[0] for r in conn.execute("SELECT email FROM contacts WHERE workspace_id = ?", (ws,)))
    assert stored == ["ann@bücher.de", "ann@example.org", "bob@bücher.de", "gül.kowalski.6@example.com",
                      "jürgen@bücher.de"]  # a Unicode domain is stored in Unicode, sent in IDNA form


def test_the_warning_list_is_capped_but_warned_counts_all(conn: Any, ws: int) -> None:
    result = run(conn, ws, "email\n" + "".join(f"ü{i}@example.org\n" for i in range(5)), max_errors=2)
    assert result["warned"] == 5 and [w["line"] for w in result["warnings"]] == [2, 3]


# --- the summary: every rejected row counted, listed and filed once, by reason ---------

@pytest.mark.parametrize("batch_size", [100, 2])
def test_every_rejected_file_row_is_one_error_and_one_line_of_the_errors_file(conn: Any, ws: int,
                                                                              batch_size: int) -> None:
    """Rows repeating a key were rejected as one: `skipped` counted 2, `errors` and the file held 1."""
    billing.set_allowance(conn, ws, "contacts", 1)
    text = ("email,city\na@example.com,X\nb@example.com,Y\nB@example.com,Z\nc@example.com,\nbad,\n"
            "c@example.com,W\n")
    out = io.StringIO()
    result = run(conn, ws, text, errors_out=out, batch_size=batch_size)
    filed = list(csv.reader(io.StringIO(out.getvalue())))[1:]
    assert result["skipped"] == len(result["errors"]) == len(filed) == 5
    assert sorted(e["line"] for e in result["errors"]) == sorted(int(r[0]) for r in filed) == [3, 4, 5, 6, 7]
    assert {int(r[0]): r[2:] for r in filed} == {  # each row with its own cells
        3: ["b@example.com", "Y"], 4: ["B@example.com", "Z"], 5: ["c@example.com", ""], 6: ["bad", ""],
        7: ["c@example.com", "W"]}
    assert result["rows"] == result["created"] + result["updated"] + result["skipped"] == 6
    assert result["rejections"] == [
        {"kind": "allowance", "count": 4, "reason": "over the contacts allowance of 1: mkt billing allowance set "
                                                    "contacts N"},
        {"kind": "email", "count": 1, "reason": "with an invalid email address"}]
    dry = run(conn, ws, text.replace("a@", "z@"), dry_run=True, batch_size=batch_size)
    assert dry["skipped"] == len(dry["errors"]) == 6


def test_a_rejection_the_kinds_do_not_know_is_counted_under_its_own_reason() -> None:
    report = importer._Report(["email"], None, 10)
    report.reject(2, ["x"], "This person asked to be erased.", "erased")
    report.reject(3, ["y"], "This person asked to be erased.", "erased")
    report.reject(4, ["z"], "Email address is required for upsert operation.", "no_email")
    assert report.rejections(lambda: 0) == [
        {"kind": "other", "count": 2, "reason": "This person asked to be erased."},
        {"kind": "no_email", "count": 1, "reason": importer.REJECTION_KINDS["no_email"]}]
