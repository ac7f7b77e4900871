"""Which SMS replies revoke consent to texts (47 CFR 64.1200(a)(10)-(12)), from a table of
rules kept as data, and the reading of one reply (docs/sms.md "Replies and revocation").

Since 2025-04-11 each of STOP, QUIT, END, REVOKE, OPT OUT, CANCEL and UNSUBSCRIBE revokes,
and so does "any other reasonable means". The table (`revocation.csv` beside this module, or
the operator's copy named by MKT_SMS_REVOCATION_PHRASES, read again when it changes) holds
rows of kind, language, text and source. A reply is read in three steps, each on words
(compared without case or accents; punctuation, apostrophes and emoji separate words, so
"opt-out" is "opt out" and "stop" never matches "stopover"):

1. keyword: the reply's first words, after any `lead` words ("please", "ok"), are a keyword
   ("Stop please", "STOP!!", "opt-out"), or a sentence or a clause is a keyword on its own,
   leads aside ("Who is this? Stop", "I don't know you, stop"). Always a revocation: the law
   names these words, so neither a question mark nor anything after them sets them aside.
   An `alone` row revokes only as a whole sentence or clause ("No more!", "Remove"): words
   too common to revoke at the head of a longer reply ("Remove the cheese please").
2. phrase: a phrase of the table stands anywhere in the reply ("please stop texting me",
   "no más mensajes", "je ne veux plus recevoir vos SMS"; a `*` in a phrase stands for zero
   to two words: "don't want * texts" matches "don't want your texts") and is not set aside
   by either rule below, each applied to the phrase's own language only:
   - negation: a `negation` ends right before the phrase, or one word before it, in the same
     clause ("don't stop texting me", "never stop sending me deals");
   - question: its sentence ends with "?" and opens with a `question` ("when do you stop
     sending the catalogue?", "did you stop sending the deals?"). A request phrased as a
     question ("can you remove me?", "how do I unsubscribe?") opens otherwise and revokes.
3. resubscribe: the whole reply, leads aside, is START or UNSTOP (the word alone: a new
   consent must be unmistakable, so "Start date of the sale?" changes nothing).

Anything else does nothing. The ten keywords of the law and of carriers (the seven, plus
STOPALL, OPTOUT and STOP ALL) are always in force, even when an operator's copy leaves them
out; a copy that cannot be read when a reply arrives is logged and the built-in table reads
the reply (a revocation is never lost to a typo), while `mkt serve` and `mkt jobs run`
refuse to start on it, as on a broken quiet-hours table. Nothing here touches the database.
"""

from __future__ import annotations

import csv
import io
import logging
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.kernel.data_tables import DataTable

log = logging.getLogger("mkt.sms")

TABLE_ENV = "MKT_SMS_REVOCATION_PHRASES"
BUILT_IN = Path(__file__).with_name("revocation.csv")
KINDS = ("keyword", "alone", "phrase", "lead", "negation", "question", "confirmation")
GAP = "*"  # in a phrase: any zero to MAX_GAP words ("don't want * texts")
MAX_GAP = 2
LAW_KEYWORDS = ("STOP", "QUIT", "END", "REVOKE", "OPT OUT", "CANCEL", "UNSUBSCRIBE", "STOPALL", "OPTOUT", "STOP ALL")
LAW_SOURCE = "47 CFR 64.1200(a)(10) and carriers' keywords (always in force)"
RESUBSCRIBE = ("START", "UNSTOP")
DEFAULT_CONFIRMATION = "{name}: You are unsubscribed and will get no more texts from us. Reply START to resubscribe."
MAX_CONFIRMATION = 320  # two GSM-7 segments
REVOKED, RESUBSCRIBED, NONE = "revoked", "resubscribed", "none"
ACTIONS = (REVOKED, RESUBSCRIBED, NONE)
_LANGUAGE = re.compile(r"^[a-z]{2,3}$")
_WORD = re.compile(r"[^\W_]+")
_PATTERN_WORD = re.compile(r"[^\W_]+|\*")
# A sentence ends at . ! ? ; … or a line break; a clause (the reach of a negation) at , : ( ) " – —.
_SENTENCE = re.compile(r"([^.!?;…\n\r]*)([.!?;…\n\r]*)")
_CLAUSE = re.compile(r"[,:()\"“”«»\u2013\u2014]")

Words = tuple[str, ...]


def fold(text: str) -> str:
    """Compatibility forms, accents dropped, case folded: "ÉTÉ" and "été" are "ete"."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()


def words(text: str) -> Words:
    """The words of `text` as the rules compare them."""
    return tuple(_WORD.findall(fold(text)))


# --- the table ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    kind: str
    language: str
    text: str
    source: str
    words: Words


@dataclass(frozen=True)
class Table:
    rows: tuple[Row, ...]
    origin: str                          # "built-in" or the operator's file path
    keywords: tuple[Row, ...] = field(default=(), compare=False)       # longest first
    alone: tuple[Row, ...] = field(default=(), compare=False)          # longest first
    phrases: dict[str, tuple[Row, ...]] = field(default_factory=dict, compare=False)  # by first word
    leads: tuple[Words, ...] = field(default=(), compare=False)        # longest first
    negations: dict[str, tuple[Words, ...]] = field(default_factory=dict, compare=False)  # by language
    questions: dict[str, tuple[Words, ...]] = field(default_factory=dict, compare=False)
    confirmations: dict[str, str] = field(default_factory=dict, compare=False)


def _check_confirmation(text: str, where: str) -> None:
    try:
        text.format(name="x")
    except (KeyError, IndexError, ValueError):
        raise MktError(400, f"{where}: a confirmation may use {{name}} (the workspace's name) and no other "
                            "{...} placeholder.") from None
    if len(text) > MAX_CONFIRMATION:
        raise MktError(400, f"{where}: a confirmation is at most {MAX_CONFIRMATION} characters.")


def parse_table(text: str, origin: str) -> Table:
    """The rows of a revocation CSV (comment lines start with #); a 400 naming the first bad line."""
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip() and not line.lstrip().startswith("#")]
    if not lines or [c.strip() for c in next(csv.reader([lines[0][1]]))][:3] != ["kind", "language", "text"]:
        raise MktError(400, f"{origin}: the first row must be the header kind,language,text,source.")
    rows: list[Row] = []
    for n, line in lines[1:]:
        cells = [c.strip() for c in next(csv.reader(io.StringIO(line)))]
        where = f"{origin} line {n}"
        if len(cells) < 3:
            raise MktError(400, f"{where}: expected kind,language,text[,source].")
        kind, language, value = cells[0].lower(), cells[1].lower(), cells[2]
        if kind not in KINDS:
            raise MktError(400, f"{where}: '{cells[0]}' is not a kind ({', '.join(KINDS)}).")
        if not _LANGUAGE.match(language):
            raise MktError(400, f"{where}: '{cells[1]}' is not a language code (en, es, fr ...).")
        pattern = tuple(_PATTERN_WORD.findall(fold(value))) if kind == "phrase" else words(value)
        if kind == "confirmation":
            _check_confirmation(value, where)
        elif not [w for w in pattern if w != GAP]:
            raise MktError(400, f"{where}: '{value}' has no word to match.")
        elif pattern[0] == GAP or pattern[-1] == GAP or any(a == b == GAP for a, b in zip(pattern, pattern[1:])):
            raise MktError(400, f"{where}: '{value}': a {GAP} stands between two words.")
        rows.append(Row(kind, language, value, ", ".join(cells[3:]).strip(), pattern))
    given = {r.words for r in rows if r.kind == "keyword"}
    rows += [Row("keyword", "en", k, LAW_SOURCE, words(k)) for k in LAW_KEYWORDS if words(k) not in given]
    return _index(tuple(rows), origin)


def _index(rows: tuple[Row, ...], origin: str) -> Table:
    def by_language(kind: str) -> dict[str, tuple[Words, ...]]:
        out: dict[str, list[Words]] = {}
        for r in rows:
            if r.kind == kind:
                out.setdefault(r.language, []).append(r.words)
        return {k: tuple(v) for k, v in out.items()}

    phrases: dict[str, list[Row]] = {}
    for r in rows:
        if r.kind == "phrase":
            phrases.setdefault(r.words[0], []).append(r)
    confirmations: dict[str, str] = {}
    for r in rows:
        if r.kind == "confirmation":
            confirmations.setdefault(r.language, r.text)  # the first row of a language
    return Table(rows, origin,
                 keywords=tuple(sorted((r for r in rows if r.kind == "keyword"), key=lambda r: -len(r.words))),
                 alone=tuple(sorted((r for r in rows if r.kind == "alone"), key=lambda r: -len(r.words))),
                 phrases={k: tuple(sorted(v, key=lambda r: -len(r.words))) for k, v in phrases.items()},
                 leads=tuple(sorted({r.words for r in rows if r.kind == "lead"}, key=len, reverse=True)),
                 negations=by_language("negation"), questions=by_language("question"), confirmations=confirmations)


TABLE = DataTable(TABLE_ENV, BUILT_IN, parse_table, "revocation table")


def current_table() -> Table:
    """The table in effect: the operator's (MKT_SMS_REVOCATION_PHRASES) or the built-in one, read
    again when the file changes (modification time and size). Raises on a file that cannot be read
    or parsed (`check_environment`, `mkt sms revocation-phrases show`)."""
    return TABLE.current()


def table_for_replies() -> Table:
    """The table a reply is read with: the one in effect, or the built-in one (logged) when the
    operator's copy cannot be read or parsed now: a revocation must never be lost to a typo."""
    try:
        return current_table()
    except MktError as exc:
        log.error("%s The built-in revocation table reads the replies meanwhile.", exc.message)
        return TABLE.shipped()


def check_environment() -> None:
    """`mkt jobs run` and `mkt serve` refuse to start on a revocation table they cannot read or parse."""
    current_table()


def table_text() -> str:
    """The table in effect as CSV (`mkt sms revocation-phrases show --csv`: a copy to edit)."""
    return TABLE.text()


def show_table() -> dict[str, Any]:
    """`mkt sms revocation-phrases show --json`: where the table comes from and its rows."""
    table = current_table()
    return {"table": table.origin, "rows": [{"kind": r.kind, "language": r.language, "text": r.text,
                                             "source": r.source} for r in table.rows]}


def check_file(path: str) -> dict[str, Any]:
    """`mkt sms revocation-phrases check FILE`: the rows of each kind and the languages, or a 400."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MktError(400, f"Cannot read {path}: {exc}.") from None
    table = parse_table(text, path)
    return {"rows": len(table.rows), "kinds": {k: sum(1 for r in table.rows if r.kind == k) for k in KINDS},
            "languages": sorted({r.language for r in table.rows})}


def confirmation_text(table: Table, language: str | None, name: str) -> str:
    """The confirmation in the reply's language (English, else the built-in wording, when none)."""
    template = (table.confirmations.get(language or "en") or table.confirmations.get("en")
                or DEFAULT_CONFIRMATION)
    return template.format(name=name)


# --- reading a reply ------------------------------------------------------------------------

@dataclass(frozen=True)
class Reading:
    action: str                 # revoked, resubscribed, none
    rule: str | None            # 'keyword:stop', 'phrase:en:stop texting', 'start:unstop'; none: what was set aside
    language: str | None = None  # the language of the row that revoked (the confirmation's)


def _strip_leads(tokens: Words, leads: tuple[Words, ...], *, tail: bool = False) -> Words:
    changed = True
    while changed and tokens:
        changed = False
        for lead in leads:
            n = len(lead)
            if tokens[:n] == lead:
                tokens, changed = tokens[n:], True
                break
            if tail and len(tokens) > n and tokens[-n:] == lead:
                tokens, changed = tokens[:-n], True
                break
    return tokens


def _keyword(tokens: Words, rows: tuple[Row, ...], *, whole: bool) -> Row | None:
    for row in rows:
        n = len(row.words)
        if tokens[:n] == row.words and (not whole or len(tokens) == n):
            return row
    return None


def _sentences(text: str) -> list[tuple[list[Words], bool]]:
    """Each sentence as its clauses' words, and whether it is a question (ends with ?)."""
    out = []
    for match in _SENTENCE.finditer(fold(text)):
        body, end = match.groups()
        clauses = [c for c in (tuple(_WORD.findall(part)) for part in _CLAUSE.split(body)) if c]
        if clauses:
            out.append((clauses, "?" in end))
    return out


def _ends_at(tokens: Words, stop: int, candidates: tuple[Words, ...]) -> bool:
    return any(stop >= len(w) and tokens[stop - len(w):stop] == w for w in candidates)


def _matches(pattern: Words, tokens: Words, at: int) -> bool:
    """Whether `pattern` (words, and GAP for zero to MAX_GAP words) matches `tokens` from `at`."""
    if not pattern:
        return True
    if pattern[0] == GAP:
        return any(_matches(pattern[1:], tokens, at + skip) for skip in range(MAX_GAP + 1))
    return at < len(tokens) and tokens[at] == pattern[0] and _matches(pattern[1:], tokens, at + 1)


def _phrase(sentences: list[tuple[list[Words], bool]], table: Table) -> tuple[Row | None, str | None]:
    """The first phrase that revokes, or (None, the first one set aside and why)."""
    aside = None
    for clauses, question in sentences:
        opening = _strip_leads(tuple(w for clause in clauses for w in clause), table.leads)
        for tokens in clauses:
            for i, word in enumerate(tokens):
                for row in table.phrases.get(word, ()):
                    if not _matches(row.words, tokens, i):
                        continue
                    negations = table.negations.get(row.language, ())
                    if _ends_at(tokens, i, negations) or _ends_at(tokens, i - 1, negations):
                        aside = aside or f"negated:{row.language}:{row.text}"
                    elif question and any(opening[:len(q)] == q for q in table.questions.get(row.language, ())):
                        aside = aside or f"question:{row.language}:{row.text}"
                    else:
                        return row, None
    return None, aside


def read_reply(body: str, table: Table | None = None) -> Reading:
    """What a reply asks for (the module docstring's three steps)."""
    table = table or table_for_replies()
    everything = _strip_leads(words(body), table.leads)
    row = _keyword(everything, table.keywords, whole=False)
    sentences = _sentences(body)
    parts = [tuple(w for clause in clauses for w in clause) for clauses, _ in sentences]
    parts += [clause for clauses, _ in sentences if len(clauses) > 1 for clause in clauses]
    for part in parts if row is None else ():
        alone = _strip_leads(part, table.leads, tail=True)
        row = _keyword(alone, table.keywords, whole=True) or _keyword(alone, table.alone, whole=True)
        if row is not None:
            break
    if row is not None:
        return Reading(REVOKED, f"{row.kind}:" + " ".join(row.words), row.language)
    row, aside = _phrase(sentences, table)
    if row is not None:
        return Reading(REVOKED, f"phrase:{row.language}:{row.text}", row.language)
    alone = _strip_leads(everything, table.leads, tail=True)
    if len(alone) == 1 and alone[0] in {w.lower() for w in RESUBSCRIBE}:
        return Reading(RESUBSCRIBED, "start:" + alone[0])
    return Reading(NONE, aside)
