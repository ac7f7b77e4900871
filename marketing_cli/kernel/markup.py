"""Where each merge tag of an HTML template sits: a tokenizer of the template, run once.

`regions(text, tags)` reads the template the way an HTML5 parser's tokenizer does (WHATWG
"13.2.5 Tokenization", the states that matter for where a value lands) and cuts it into
regions, each with the context a merge tag inside it would be rendered in:

    TEXT       data, RCDATA (`<title>`, `<textarea>`), the inside of `<plaintext>`
    COMMENT    an ordinary comment, a doctype, a bogus comment (`<!x>`, `<?x>`, `</1>`)
    ATTRIBUTE  an attribute value: double-quoted, single-quoted or unquoted
    STYLE      the text of a `<style>` element (CSS)
    REFUSED    where no value can go: `<script>` and the other raw-text elements (`xmp`,
               `iframe`, `noembed`, `noframes`, `noscript`), a tag's name, an attribute's
               name, the space between attributes, an end tag

The inside of an Outlook conditional comment (`<!--[if mso]> ... <![endif]-->`) is markup
to Outlook, so it is tokenized as markup; its regions carry `in_comment` (a value there must
not be able to end the comment for the other clients).

Merge tags are opaque to the tokenizer: the caller passes their spans, and each is read as
a run of `x` (a harmless value: a letter is text, a name character, a value character and
a CSS identifier character in every state). A fallback that holds `"` or `>` therefore
cannot change what the rest of the template means; the renderer guarantees that what it
writes in place of a tag is read the same way (escaped for its context, or the same run of
`x` where no value can go).

Raw-text elements end at the first `</name` followed by a blank, `/` or `>`, as in the
tokenizer. A `<script>` whose text holds `<!--` may not end there (the script's "escaped"
states), so everything after such a script is REFUSED. Foreign content (`<svg>`, `<math>`,
where `<style>` is not raw text and CDATA sections exist) is read as HTML: the cleaner
removes it from every variant.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TEXT, COMMENT, ATTRIBUTE, STYLE, REFUSED = "text", "comment", "attribute", "style", "refused"

RAW_TEXT = frozenset({"style", "script", "xmp", "iframe", "noembed", "noframes", "noscript"})
RCDATA = frozenset({"title", "textarea"})
_BLANKS = "\t\n\f\r "
_NAME_END = re.compile(r"[\t\n\f\r />]")
_ATTRIBUTE_NAME_END = re.compile(r"[\t\n\f\r /=>]")
_UNQUOTED_END = re.compile(r"[\t\n\f\r >]")
_NOT_BLANK = re.compile(r"[^\t\n\f\r ]")
_COMMENT_END = re.compile(r"--!?>")
_CONDITIONAL = re.compile(r"\[if\s[^\]>]*\]>", re.IGNORECASE)
_ENDIF = "<![endif]"


@dataclass(frozen=True)
class Region:
    """A span [start, end) of the template and the context of a tag inside it."""

    start: int
    end: int
    kind: str
    in_comment: bool = False
    element: str = ""  # ATTRIBUTE: the element's name, lower case
    attribute: str = ""  # ATTRIBUTE: the attribute's name, lower case
    quote: str = ""  # ATTRIBUTE: '"', "'" or "" (unquoted)


def masked(text: str, tags: list[tuple[int, int]]) -> str:
    """The template with every tag span read as a run of `x` of the same length."""
    if not tags:
        return text
    out, at = [], 0
    for start, end in tags:
        out.append(text[at:start])
        out.append("x" * (end - start))
        at = end
    out.append(text[at:])
    return "".join(out)


def regions(text: str, tags: list[tuple[int, int]]) -> list[Region]:
    """The template cut into contiguous regions (module docstring), in order."""
    scanner = _Scanner(masked(text, tags))
    scanner.markup(0, len(scanner.text), False)
    return scanner.out


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.out: list[Region] = []

    def emit(self, start: int, end: int, kind: str, in_comment: bool, **attribute: str) -> None:
        if end > start:
            self.out.append(Region(start, end, kind, in_comment, **attribute))

    def markup(self, i: int, end: int, in_comment: bool) -> None:
        text = self.text
        while i < end:
            lt = text.find("<", i, end)
            if lt < 0:
                self.emit(i, end, TEXT, in_comment)
                return
            self.emit(i, lt, TEXT, in_comment)
            i = self.after_lt(lt, end, in_comment)

    def after_lt(self, lt: int, end: int, in_comment: bool) -> int:
        """Reads what begins at a `<`; returns where the data state resumes."""
        text = self.text
        nxt = text[lt + 1] if lt + 1 < end else ""
        if text.startswith("<!--", lt) and lt + 4 <= end:
            return self.comment(lt, end, in_comment)
        if nxt in ("!", "?"):
            return self.bogus(lt, lt + 1, end, in_comment)
        if nxt == "/":
            after = text[lt + 2] if lt + 2 < end else ""
            if after.isascii() and after.isalpha():
                tag_end, _ = self.tag(lt, lt + 2, end, in_comment, closing=True)
                return tag_end
            if after == ">":
                self.emit(lt, lt + 3, REFUSED, in_comment)
                return lt + 3
            if not after:
                self.emit(lt, end, TEXT, in_comment)
                return end
            return self.bogus(lt, lt + 2, end, in_comment)
        if nxt.isascii() and nxt.isalpha():
            tag_end, name = self.tag(lt, lt + 1, end, in_comment, closing=False)
            if tag_end >= end or name is None:
                return tag_end
            if name in RAW_TEXT:
                return self.raw_text(name, tag_end, end, in_comment)
            if name in RCDATA:
                close = self.find_end_tag(name, tag_end, end)
                self.emit(tag_end, close, TEXT, in_comment)
                return close
            if name == "plaintext":
                self.emit(tag_end, end, TEXT, in_comment)
                return end
            return tag_end
        self.emit(lt, lt + 1, TEXT, in_comment)
        return lt + 1

    def comment(self, lt: int, end: int, in_comment: bool) -> int:
        text = self.text
        start = lt + 4
        for abrupt in (">", "->"):  # `<!-->` and `<!--->` are empty comments
            if text.startswith(abrupt, start):
                self.emit(lt, start + len(abrupt), COMMENT, in_comment)
                return start + len(abrupt)
        found = _COMMENT_END.search(text, start, end)
        close, after = (found.start(), found.end()) if found else (end, end)
        condition = _CONDITIONAL.match(text, start, close)
        if condition and not in_comment and text.endswith(_ENDIF, start, close) and \
                condition.end() <= close - len(_ENDIF):
            self.emit(lt, condition.end(), COMMENT, in_comment)
            self.markup(condition.end(), close - len(_ENDIF), True)
            self.emit(close - len(_ENDIF), after, COMMENT, in_comment)
        else:
            self.emit(lt, after, COMMENT, in_comment)
        return after

    def bogus(self, lt: int, start: int, end: int, in_comment: bool) -> int:
        gt = self.text.find(">", start, end)
        after = end if gt < 0 else gt + 1
        self.emit(lt, after, COMMENT, in_comment)
        return after

    def tag(self, lt: int, name_start: int, end: int, in_comment: bool, *, closing: bool) -> tuple[int, str | None]:
        """Reads a start or end tag; returns (where it ends, its lower-case name, None when the
        text ended inside it: the parser then drops the tag)."""
        text = self.text
        found = _NAME_END.search(text, name_start, end)
        j = found.start() if found else end
        name = text[name_start:j].lower()
        quiet = lt  # start of the current stretch of the tag that holds no value
        while True:
            blank = _NOT_BLANK.search(text, j, end)
            j = blank.start() if blank else end
            if j >= end:
                self.emit(quiet, end, REFUSED, in_comment)
                return end, None
            if text[j] == ">":
                self.emit(quiet, j + 1, REFUSED, in_comment)
                return j + 1, name
            if text[j] == "/":
                j += 1
                continue
            found = _ATTRIBUTE_NAME_END.search(text, j + 1, end)  # a first `=` belongs to the name
            k = found.start() if found else end
            attribute = text[j:k].lower()
            blank = _NOT_BLANK.search(text, k, end)
            k = blank.start() if blank else end
            if k >= end or text[k] != "=":
                j = k
                continue
            blank = _NOT_BLANK.search(text, k + 1, end)
            v = blank.start() if blank else end
            if v >= end:
                self.emit(quiet, end, REFUSED, in_comment)
                return end, None
            quote = text[v] if text[v] in "\"'" else ""
            if text[v] == ">":
                j = v
                continue
            if quote:
                close = text.find(quote, v + 1, end)
                if close < 0:
                    self.emit(quiet, end, REFUSED, in_comment)
                    return end, None
                value_start, value_end, j = v + 1, close, close + 1
            else:
                found = _UNQUOTED_END.search(text, v, end)
                value_start = v
                value_end = j = found.start() if found else end
            self.emit(quiet, value_start, REFUSED, in_comment)
            kind = REFUSED if closing else ATTRIBUTE
            self.emit(value_start, value_end, kind, in_comment, element=name, attribute=attribute, quote=quote)
            quiet = value_end

    def find_end_tag(self, name: str, start: int, end: int) -> int:
        """Where `</name` followed by a blank, `/` or `>` begins (or the end)."""
        pattern = re.compile(r"</" + re.escape(name) + r"(?=[\t\n\f\r />])", re.IGNORECASE)
        found = pattern.search(self.text, start, end)
        return found.start() if found else end

    def raw_text(self, name: str, start: int, end: int, in_comment: bool) -> int:
        close = self.find_end_tag(name, start, end)
        if name == "script" and "<!--" in self.text[start:close]:
            close = end  # the script's escaped states may run past this end tag: all of it refused
        self.emit(start, close, STYLE if name == "style" else REFUSED, in_comment)
        return close
