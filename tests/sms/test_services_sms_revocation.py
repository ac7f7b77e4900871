"""The revocation rules (services/sms/revocation.py) on the labelled replies of
tests/data/sms_replies_labelled.csv, and the table they are read from (the built-in one and an
operator's copy named by MKT_SMS_REVOCATION_PHRASES)."""

from __future__ import annotations

import csv
import logging
import re
from pathlib import Path

import pytest

from marketing_cli.errors import MktError
from marketing_cli.services.sms import revocation

DATA = Path(__file__).resolve().parents[1] / "data" / "sms_replies_labelled.csv"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "sms.md"


def labelled() -> list[dict[str, str]]:
    with open(DATA, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def figures() -> dict[str, tuple[int, int]]:
    """label -> (replies the rules revoked, replies of that label), on the built-in table."""
    table = revocation.parse_table(revocation.BUILT_IN.read_text(encoding="utf-8"), "built-in")
    out: dict[str, tuple[int, int]] = {}
    for row in labelled():
        revoked = revocation.read_reply(row["text"], table).action == revocation.REVOKED
        hits, total = out.get(row["label"], (0, 0))
        out[row["label"]] = (hits + revoked, total + 1)
    return out


def test_the_labelled_set_is_large_balanced_and_explained() -> None:
    rows = labelled()
    assert len(rows) >= 200
    assert {r["label"] for r in rows} == {"keyword", "phrase", "none"}
    assert all(r["note"].strip() and r["language"] in ("en", "es", "fr") for r in rows)
    revocations = sum(r["label"] != "none" for r in rows)
    assert 0.4 <= revocations / len(rows) <= 0.6
    assert {r["language"] for r in rows if r["label"] == "phrase"} == {"en", "es", "fr"}
    for word in ("stop", "quit", "end", "revoke", "opt out", "cancel", "unsubscribe", "stopall", "optout", "stop all"):
        assert sum(" ".join(revocation.words(r["text"])) == word for r in rows if r["label"] == "keyword") >= 1, word


def test_recall_and_false_positives_on_the_labelled_replies() -> None:
    """The issue's bar: every reply led by one of the law's words revokes, at least 95% of the
    other revocations do, and at most 2% of the non-revocations are read as one. docs/sms.md
    states the same figures (this test fails when they drift apart)."""
    found = figures()
    keyword_hits, keywords = found["keyword"]
    phrase_hits, phrases = found["phrase"]
    flagged, others = found["none"]
    assert keyword_hits == keywords
    assert phrase_hits / phrases >= 0.95
    assert flagged / others <= 0.02
    docs = DOCS.read_text(encoding="utf-8")
    for label, (hits, total) in found.items():
        assert f"| {label} | {total} | {hits} |" in docs, (label, hits, total)


@pytest.mark.parametrize(("reply", "rule"), [
    ("STOP", "keyword:stop"), ("Stop please", "keyword:stop"), ("STOP!!", "keyword:stop"),
    ("opt-out", "keyword:opt out"), ("  stop all 🙏", "keyword:stop all"), ("Who is this? Stop", "keyword:stop"),
    ("I don't know you, stop", "keyword:stop"), ("Please no more", "alone:no more"),
    ("please stop texting me", "keyword:stop"), ("Can you stop texting me?", "phrase:en:stop texting"),
    ("I don't want those texts", "phrase:en:don't want * texts"), ("no más mensajes", "phrase:es:no mas mensajes"),
    ("Je ne veux plus recevoir ça", "phrase:fr:ne veux plus recevoir"), ("BAJA", "keyword:baja"),
])
def test_revocations(reply: str, rule: str) -> None:
    reading = revocation.read_reply(reply, revocation.current_table())
    assert (reading.action, reading.rule) == ("revoked", rule)


@pytest.mark.parametrize(("reply", "aside"), [
    ("when do you stop selling bread?", None), ("don't stop the deals", None), ("stopover in Paris?", None),
    ("Don't stop texting me!", "negated:en:stop texting"), ("never stop sending me deals", "negated:en:stop sending"),
    ("Did you stop sending the deals?", "question:en:stop sending"),
    ("Remove the cheese please", None), ("Start date of the sale?", None), ("", None), ("🛑", None),
])
def test_non_revocations_and_what_was_set_aside(reply: str, aside: str | None) -> None:
    reading = revocation.read_reply(reply, revocation.current_table())
    assert (reading.action, reading.rule) == ("none", aside)


@pytest.mark.parametrize(("reply", "rule"), [("START", "start:start"), ("unstop!", "start:unstop"),
                                             ("ok start", "start:start")])
def test_start_or_unstop_alone_resubscribes(reply: str, rule: str) -> None:
    assert revocation.read_reply(reply, revocation.current_table()) == revocation.Reading("resubscribed", rule)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "revocation.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_an_operator_table_replaces_the_built_in_one_but_never_the_law(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, "kind,language,text,source\nphrase,de,keine sms mehr,Betreiber\n"
                           "confirmation,de,{name}: abgemeldet. START zum Anmelden.,Betreiber\n")
    monkeypatch.setenv(revocation.TABLE_ENV, str(path))
    table = revocation.current_table()
    assert table.origin == str(path)
    assert revocation.read_reply("Bitte keine SMS mehr", table).rule == "phrase:de:keine sms mehr"
    assert revocation.read_reply("REVOKE", table).rule == "keyword:revoke"  # the law's words stay
    assert revocation.read_reply("stop texting me", table).action == "revoked"  # (STOP first)
    assert revocation.read_reply("please stop texting me", table).action == "none"  # its leads are gone too
    assert revocation.read_reply("remove me", table).action == "none"  # the built-in phrases are gone
    assert revocation.confirmation_text(table, "de", "Laden") == "Laden: abgemeldet. START zum Anmelden."
    assert revocation.confirmation_text(table, "fr", "Laden") == revocation.DEFAULT_CONFIRMATION.format(name="Laden")
    shown = revocation.show_table()
    assert shown["table"] == str(path) and {"kind": "keyword", "language": "en", "text": "OPT OUT",
                                            "source": revocation.LAW_SOURCE} in shown["rows"]
    path.write_text(path.read_text() + "phrase,de,nicht mehr schreiben,Betreiber\n", encoding="utf-8")
    assert revocation.read_reply("bitte nicht mehr schreiben").action == "revoked"  # read again, no restart


def test_a_broken_operator_table_stops_the_servers_but_never_a_revocation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv(revocation.TABLE_ENV, str(write(tmp_path, "kind,language,text\nphrase,english,stop it\n")))
    with pytest.raises(MktError) as caught:
        revocation.check_environment()
    assert caught.value.message.endswith("line 2: 'english' is not a language code (en, es, fr ...).")
    with caplog.at_level(logging.ERROR, logger="mkt.sms"):
        reading = revocation.read_reply("no más mensajes")
    assert reading.rule == "phrase:es:no mas mensajes"  # the built-in table read it
    assert "The built-in revocation table reads the replies meanwhile." in caplog.text
    monkeypatch.setenv(revocation.TABLE_ENV, str(tmp_path / "missing.csv"))
    assert revocation.read_reply("STOP").action == "revoked"


@pytest.mark.parametrize(("line", "message"), [
    ("word,en,stop,x", "line 2: 'word' is not a kind (keyword, alone, phrase, lead, negation, question, confirmation)."),
    ("phrase,EN1,stop,x", "line 2: 'EN1' is not a language code (en, es, fr ...)."),
    ("phrase,en,!!!,x", "line 2: '!!!' has no word to match."),
    ("phrase,en,* texts,x", "line 2: '* texts': a * stands between two words."),
    ("phrase,en,stop * * texts,x", "line 2: 'stop * * texts': a * stands between two words."),
    ("confirmation,en,{shop}: bye,x", "line 2: a confirmation may use {name} (the workspace's name) and no other "
                                      "{...} placeholder."),
    ("phrase", "line 2: expected kind,language,text[,source]."),
])
def test_a_bad_row_is_named_with_its_line(tmp_path: Path, line: str, message: str) -> None:
    path = write(tmp_path, "kind,language,text,source\n" + line + "\n")
    with pytest.raises(MktError) as caught:
        revocation.check_file(str(path))
    assert (caught.value.status, caught.value.message) == (400, f"{path} {message}")


def test_a_file_without_the_header_is_refused_and_the_built_in_table_checks(tmp_path: Path) -> None:
    with pytest.raises(MktError) as caught:
        revocation.check_file(str(write(tmp_path, "text,kind\nstop,keyword\n")))
    assert caught.value.message.endswith(": the first row must be the header kind,language,text,source.")
    checked = revocation.check_file(str(revocation.BUILT_IN))
    assert checked["languages"] == ["en", "es", "fr"] and checked["kinds"]["phrase"] >= 100
    assert re.match(r"^# SMS revocation rules", revocation.table_text())


def test_each_confirmation_is_one_segment_and_says_how_to_come_back() -> None:
    from marketing_cli.services.sms.segments import count_segments

    table = revocation.current_table()
    for language in ("en", "es", "fr"):
        text = revocation.confirmation_text(table, language, "A" * 40)
        assert count_segments(text).segments == 1, (language, text)
        assert "START" in text
