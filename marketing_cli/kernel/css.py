"""Cleaning CSS: what can run code or fetch a style sheet goes, every other byte stays.

One rule for both places an email holds CSS: `clean_style_sheet(css)` for the text of a
`<style>` element, `clean_declarations(css)` for a `style` attribute. It refuses:

- `expression(`, `javascript:`, `vbscript:` and `livescript:` anywhere in a declaration, a
  selector or an at-rule's prelude (old Internet Explorer ran CSS expressions and script
  URLs from CSS);
- a URL, in `url()` or as a string in `src()`, `image()`, `image-set()` or `cross-fade()`,
  whose scheme is not http or https (`data:`, `file:`, `cid:` ... go; relative URLs and
  merge tags stay, read as `safe_url` reads an HTML attribute);
- the properties that bind code to an element: `behavior` (IE's HTC files) and `binding`
  (`-moz-binding`, Firefox's XBL), with any vendor prefix or IE hack (`*behavior`);
- `@import` (a style sheet from elsewhere, which nothing here gets to clean);
- a declaration holding a bad URL or a bad string (`url(a(b))`, a string broken by a new
  line): browsers drop those anyway, and their text cannot be judged.

It reads CSS the way a browser does, with tinycss2's tokenizer (CSS Syntax Level 3), before
it judges: escapes are decoded (`\\6a avascript:` is `javascript:`), comments are removed and
what they separated is joined (`expression/**/(` and `ex/**/pression(`, as old IE read
them), whitespace and invisible characters are dropped and case is folded.

What is removed is the smallest unit that holds the construct: inside a rule's block and
in a `style` attribute, the declaration up to and with its `;`; in a style sheet, the whole
rule when its selector or at-rule prelude is refused (an `@import` up to its `;`, an
`@media` with its block). Blocks of `@media`, `@supports` and other at-rules are style
sheets themselves; those of `@font-face`, `@page` ... are declarations. A nested rule
inside a declaration block (CSS nesting) counts as one declaration.

Everything else is kept exactly as written: nothing is re-serialised, the removals are cut
out of the original text by the source positions tinycss2 reports (a construct's span runs
from its first token to the first token after it), so a layout without a refused construct
comes out byte for byte the same. The result is cleaned again until nothing changes, so no
cut can join two harmless halves into something refused.

Cost: the tokenizer is pure Python, about 0.1-0.3 ms for a `style` attribute. Most
attributes skip it: `_plainly_safe` lets through text that holds none of the words a
refused construct needs and nothing (an escape, a comment) that could hide one.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence

import tinycss2
from tinycss2.ast import (
    AtKeywordToken,
    Comment,
    CurlyBracketsBlock,
    DimensionToken,
    FunctionBlock,
    HashToken,
    IdentToken,
    LiteralToken,
    Node,
    NumberToken,
    ParenthesesBlock,
    ParseError,
    PercentageToken,
    SquareBracketsBlock,
    StringToken,
    URLToken,
    WhitespaceToken,
)

CSS_URL_SCHEMES = frozenset({"http", "https"})
SCRIPT_IN_CSS = re.compile(r"expression\(|javascript:|vbscript:|livescript:")
CODE_PROPERTIES = frozenset({"behavior", "binding"})
URL_FUNCTIONS = frozenset({"url", "src", "image", "image-set", "-webkit-image-set", "cross-fade", "-webkit-cross-fade"})
DECLARATION_AT_RULES = frozenset({"font-face", "page", "viewport", "-ms-viewport", "counter-style", "property"})
MAX_PASSES = 4  # a removal that uncovers another costs one pass; adversarial text past this loses all its CSS
# Blocks and functions nested deeper than this: the whole text goes. Real style sheets nest a
# handful of levels (@media > rule > url(), a merge tag's {{ }}); the judging walks recurse.
MAX_NESTING = 32

_INVISIBLE = re.compile(r"[\x00-\x20\x7f-\x9f\u00ad\u200b-\u200f\u2028\u2029\u2060-\u2064\ufeff]+")
_SCHEME = re.compile(r"([a-z][a-z0-9+.\-]*):")
_MERGE_TAG = re.compile(r"\{\{[^{}]*\}\}")
_HACK_AND_PREFIX = re.compile(r"^[*_]*(?:-[a-z0-9]+-)?")
_PIECES = re.compile(r"[;{}]")


# --- URLs (the HTML cleaner reads attribute URLs with the same function) ----------------------

def safe_url(value: str, schemes: frozenset[str]) -> bool:
    """True for a URL a browser would not run: a scheme in `schemes`, or relative (`#top`, `/x`,
    `{{unsubscribe_url}}`). Read the way a browser reads it (entities and CSS escapes are
    already decoded by the parser): whitespace, control and invisible characters go, case
    folds. A merge tag may hold a colon (`{{contact.site|default:https://a.example}}`): the
    URL is also accepted when what is left without its merge tags is safe."""
    return _safe_plain_url(value, schemes) or _safe_plain_url(_MERGE_TAG.sub("", value), schemes)


def _safe_plain_url(value: str, schemes: frozenset[str]) -> bool:
    squeezed = _INVISIBLE.sub("", value).lower()
    scheme = _SCHEME.match(squeezed)
    if scheme is None:
        # No scheme before the first ':' (a relative URL), but a colon before any '/', '?' or
        # '#' means a scheme the regex did not accept (`java\x01script:` squeezed is caught above).
        head = re.split(r"[/?#]", squeezed, maxsplit=1)[0]
        return ":" not in head
    return scheme.group(1) in schemes


def squeeze(text: str) -> str:
    """Text as a browser compares it: invisible characters and whitespace removed, lower case."""
    return _INVISIBLE.sub("", text).lower()


# --- the public entry points ------------------------------------------------------------------

def clean_style_sheet(css: str) -> str:
    """The text of a `<style>` element with every refused construct cut out (module docstring)."""
    return _until_stable(css, sheet=True)


def clean_declarations(css: str) -> str:
    """The value of a `style` attribute with every refused declaration cut out."""
    return _until_stable(css, sheet=False)


def _until_stable(css: str, *, sheet: bool) -> str:
    if _plainly_safe(css):
        return css
    for _ in range(MAX_PASSES):
        cleaned = _Pass(css).run(sheet)
        if cleaned == css:
            return css
        css = cleaned
    return ""


# Every refused construct needs one of these words in the text once blanks, quotes and
# stray closing brackets are gone, or an escape or a comment to hide it.
_NEEDED_WORDS = re.compile(r"expression|script|url\(|src\(|image|cross-fade|@import|behavior|binding")
_QUOTES_AND_CLOSERS = str.maketrans("", "", "\"')]}")


def _plainly_safe(css: str) -> bool:
    """True when no token can be refused, seen without tokenizing (most `style` attributes):
    no escape, no comment, none of the words every refused construct holds, no string that a
    line break could turn into a bad string, and no more brackets than MAX_NESTING. The tests
    check that the full pass keeps every text this lets through."""
    if "\\" in css or "/*" in css:
        return False
    if ('"' in css or "'" in css) and ("\n" in css or "\r" in css or "\f" in css):
        return False
    if css.count("{") + css.count("(") + css.count("[") > MAX_NESTING:
        return False
    return _NEEDED_WORDS.search(squeeze(css).translate(_QUOTES_AND_CLOSERS)) is None


# --- judging a run of tokens ------------------------------------------------------------------

def _children(node: Node) -> list[Node] | None:
    if isinstance(node, CurlyBracketsBlock | ParenthesesBlock | SquareBracketsBlock):
        return node.content
    if isinstance(node, FunctionBlock):
        return node.arguments
    return None


_BRACKETS = {CurlyBracketsBlock: ("{", "}"), ParenthesesBlock: ("(", ")"), SquareBracketsBlock: ("[", "]")}


def _read(nodes: Sequence[Node], out: list[str]) -> bool:
    """Appends what the tokens say, decoded (escapes resolved, quotes, blanks and comments
    gone), to `out`; True as soon as a token is refused by itself: a URL with a refused
    scheme, a bad URL or a bad string."""
    for node in nodes:
        kind = type(node)
        if kind is WhitespaceToken or kind is Comment:
            continue
        if kind is IdentToken or kind is StringToken or kind is LiteralToken:
            out.append(node.value)
        elif kind is URLToken:
            if not safe_url(node.value, CSS_URL_SCHEMES):
                return True
            out.append(f"url({node.value})")
        elif kind is FunctionBlock:
            if node.lower_name in URL_FUNCTIONS and any(
                    type(arg) is StringToken and not safe_url(arg.value, CSS_URL_SCHEMES) for arg in node.arguments):
                return True
            out.append(node.name + "(")
            if _read(node.arguments, out):
                return True
            out.append(")")
        elif kind in _BRACKETS:
            opening, closing = _BRACKETS[kind]
            out.append(opening)
            if _read(node.content, out):
                return True
            out.append(closing)
        elif kind is AtKeywordToken:
            out.append("@" + node.value)
        elif kind is HashToken:
            out.append("#" + node.value)
        elif kind is ParseError:
            if node.kind in ("bad-url", "bad-string"):
                return True
        elif kind is DimensionToken:
            out.append(node.representation + node.unit)
        elif kind is NumberToken or kind is PercentageToken:
            out.append(node.representation)
        else:  # unicode ranges
            out.append(node.serialize())
    return False


def _depth(nodes: Sequence[Node]) -> int:
    """How deep blocks and functions nest in these tokens (without recursion: the text is anyone's)."""
    deepest, stack = 0, [(nodes, 0)]
    while stack:
        level, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((children, depth + 1) for node in level if (children := _children(node)) is not None)
    return deepest


def _refused(nodes: Sequence[Node]) -> bool:
    """The rule, the same for a declaration, a selector and an at-rule's prelude: a refused
    URL or an unreadable token anywhere; script anywhere in the decoded text; and in any
    piece of it between `;`, `{` and `}` (a nested rule's declarations included), an
    `@import` or a property that binds code."""
    out: list[str] = []
    if _read(nodes, out):
        return True
    decoded = squeeze("".join(out))
    if SCRIPT_IN_CSS.search(decoded):
        return True
    for piece in _PIECES.split(decoded):
        if piece.startswith("@import"):
            return True
        if ":" in piece and _HACK_AND_PREFIX.sub("", piece.split(":", 1)[0], count=1) in CODE_PROPERTIES:
            return True
    return False


def _at_rule_name(nodes: Sequence[Node]) -> str | None:
    """`import` for `@import`, `@\\69mport` and `@im/**/port`: the at-keyword and the names a
    comment (not a blank) joins to it."""
    if not nodes or not isinstance(nodes[0], AtKeywordToken):
        return None
    name = [nodes[0].value]
    for node in nodes[1:]:
        if isinstance(node, IdentToken):
            name.append(node.value)
        elif not isinstance(node, Comment):
            break
    return squeeze("".join(name))


# --- splitting a list of tokens into rules or declarations ------------------------------------

def _is_filler(node: Node) -> bool:
    return isinstance(node, WhitespaceToken | Comment) or (
        isinstance(node, LiteralToken) and node.value in ("<!--", "-->"))


def _is_semicolon(node: Node) -> bool:
    return isinstance(node, LiteralToken) and node.value == ";"


def _ends_declaration(first: Node, node: Node) -> bool:
    return _is_semicolon(node)


def _ends_rule(first: Node, node: Node) -> bool:
    return isinstance(node, CurlyBracketsBlock) or (isinstance(first, AtKeywordToken) and _is_semicolon(node))


def _items(nodes: Sequence[Node], ends: Callable[[Node, Node], bool]) -> Iterator[tuple[int, int]]:
    """(start, stop) index ranges of the rules or declarations in `nodes`: each from its first
    token to its terminator (`;` or the rule's block) included; the whitespace and comments
    between them belong to none. An unterminated last one stops before its trailing blanks."""
    i, n = 0, len(nodes)
    while i < n:
        if _is_filler(nodes[i]):
            i += 1
            continue
        j = i
        while j < n:
            j += 1
            if ends(nodes[i], nodes[j - 1]):
                break
        else:
            while j > i + 1 and _is_filler(nodes[j - 1]):
                j -= 1
        yield i, j
        i = j


# --- one pass over the text -------------------------------------------------------------------

class _Pass:
    """Parses the text once and collects the spans to cut, in offsets of the original text.

    tinycss2 reports where each token starts (line and column, counted after it turned CRLF
    into LF); a token list's spans follow from the starts of the tokens after them. Where a
    list ends inside a `{}` block, the block's `}` is the character before the next token,
    unless the text ended first: a `;` appended to the text tells which blocks it left open
    (they hold the `;`), and is dropped again before anything is judged.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        normal = text.replace("\r\n", "\n").replace("\r", "\n").replace("\f", "\n")
        self.line_starts = [0, *(m.end() for m in re.finditer("\n", normal))]
        self.crlf = [m.start() - k for k, m in enumerate(re.finditer("\r\n", text))]  # in `normal`
        self.cuts: list[tuple[int, int]] = []
        self.open_blocks: set[int] = set()

    def offset(self, node: Node) -> int:
        at = self.line_starts[node.source_line - 1] + node.source_column - 1
        return at + bisect_left(self.crlf, at)

    def parse(self) -> list[Node]:
        nodes = tinycss2.parse_component_value_list(self.text + ";")
        level = nodes
        while level:
            last = level[-1]
            if _is_semicolon(last):
                level.pop()
                break
            children = _children(last)
            if children is None:  # an unterminated comment, string or url() swallowed the `;`
                break
            self.open_blocks.add(id(last))
            level = children
        return nodes

    def run(self, sheet: bool) -> str:
        nodes = self.parse()
        if _depth(nodes) > MAX_NESTING:
            return ""
        if sheet:
            self.rules(nodes, len(self.text))
        else:
            self.declarations(nodes, len(self.text))
        out, at = [], 0
        for start, stop in self.cuts:
            out.append(self.text[at:start])
            at = stop
        out.append(self.text[at:])
        return "".join(out)

    def stop(self, nodes: Sequence[Node], j: int, end: int) -> int:
        return self.offset(nodes[j]) if j < len(nodes) else end

    def inside(self, block: CurlyBracketsBlock, end: int) -> int:
        """Where the content of a block that ends at `end` ends (before its `}`, if it has one)."""
        return end if id(block) in self.open_blocks else end - 1

    def rules(self, nodes: list[Node], end: int) -> None:
        for i, j in _items(nodes, _ends_rule):
            block = nodes[j - 1] if isinstance(nodes[j - 1], CurlyBracketsBlock) else None
            prelude = nodes[i:j - 1] if block is not None else nodes[i:j]
            stop = self.stop(nodes, j, end)
            if _refused(prelude):
                self.cuts.append((self.offset(nodes[i]), stop))
            elif block is not None:
                name = _at_rule_name(prelude)
                if name is None or name in DECLARATION_AT_RULES:
                    self.declarations(block.content, self.inside(block, stop))
                else:
                    self.rules(block.content, self.inside(block, stop))

    def declarations(self, nodes: list[Node], end: int) -> None:
        for i, j in _items(nodes, _ends_declaration):
            if _refused(nodes[i:j]):
                self.cuts.append((self.offset(nodes[i]), self.stop(nodes, j, end)))


# --- merge-tag values in CSS (kernel/merge_contexts.py) ---------------------------------------

NORMAL, STRING, URL, COMMENT = "normal", "string", "url", "comment"
_URL_OPENING = re.compile(r"url\s*$", re.IGNORECASE)


def placements(text: str, offsets: Sequence[int]) -> list[tuple[str, int, int]]:
    """For each offset of `text` (a merge tag, read as one identifier character): where it sits
    (NORMAL, inside a STRING, an unquoted URL or a COMMENT) and the span (start, end) of the
    smallest unit that holds it: a declaration with its `;`, or a selector or at-rule prelude
    (without its `{`). A value escaped for its place cannot move these borders, so the unit is
    what the renderer judges after the value is in."""
    wanted = dict.fromkeys(offsets)
    found: dict[int, str] = {}
    borders: list[int] = []
    state, quote, depth, i, n = NORMAL, "", 0, 0, len(text)
    while i < n:
        if i in wanted:
            found[i] = state
        c = text[i]
        if state == NORMAL:
            if c == "\\":
                i += 2
                continue
            if c == "/" and text.startswith("*", i + 1):
                state, i = COMMENT, i + 2
                continue
            if c in "\"'":
                state, quote = STRING, c
            elif c == "(":
                depth += 1
                rest = text[i + 1:i + 64].lstrip(" \t\n\r\f")
                if _URL_OPENING.search(text, max(0, i - 8), i) and not rest.startswith(("'", '"')):
                    state = URL
            elif c == ")":
                depth = max(0, depth - 1)
            elif c in "{}":
                depth = 0
                borders.append(i)
            elif c == ";" and depth == 0:
                borders.append(i)
        elif state == STRING:
            if c == "\\":
                i += 2
                continue
            if c == quote or c == "\n":
                state = NORMAL
        elif state == COMMENT:
            if c == "*" and text.startswith("/", i + 1):
                state, i = NORMAL, i + 2
                continue
        else:  # URL
            if c == "\\":
                i += 2
                continue
            if c == ")":
                state, depth = NORMAL, max(0, depth - 1)
        i += 1
    result = []
    for offset in offsets:
        at = bisect_left(borders, offset)
        start = borders[at - 1] + 1 if at else 0
        end = n
        if at < len(borders):
            end = borders[at] + 1 if text[borders[at]] == ";" else borders[at]
        result.append((found.get(offset, COMMENT), start, end))
    return result


_KEEP = {NORMAL: "A-Za-z0-9 #%+._,-", COMMENT: "A-Za-z0-9 #%+._-",
         STRING: "A-Za-z0-9 #%+._,:/?=@~!$*-", URL: "A-Za-z0-9#%+._,:/?=@~!$*-"}
_ESCAPED = {(where, dash): re.compile("[^" + (keep if dash else keep.replace("-", "")) + "]")
            for where, keep in _KEEP.items() for dash in (True, False)}
_WITH_PARENTHESES = {dash: re.compile("[^()" + (_KEEP[NORMAL] if dash else _KEEP[NORMAL].replace("-", "")) + "]")
                     for dash in (True, False)}


def _balanced(value: str) -> bool:
    depth = 0
    for c in value:
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def _hex(match: re.Match[str]) -> str:
    c = match.group()
    return "\\fffd " if c == "\0" else f"\\{ord(c):x} "


def escape_value(value: str, where: str, *, dash: bool = True) -> str:
    """A value as CSS reads it back unchanged in `where` (NORMAL, STRING, URL, COMMENT), with
    every character that could end a string, a URL, a comment, a declaration or a block (or
    an HTML attribute or `<style>` element around the CSS: quotes, `&`, `<`) written as a
    hex escape (`\\3b `). `dash=False` escapes `-` too (CSS inside an HTML comment, where
    `-->` would end it). Elsewhere in a declaration, balanced parentheses stay
    (`rgb(0,0,0)`): what a function could carry is judged after (`refused_fragment`)."""
    pattern = _ESCAPED[where, dash]
    if where == NORMAL and "(" in value and _balanced(value):
        pattern = _WITH_PARENTHESES[dash]
    return value if pattern.search(value) is None else pattern.sub(_hex, value)


def refused_fragment(css: str) -> bool:
    """Whether a declaration or a prelude holds a construct `clean_style_sheet` refuses."""
    if _plainly_safe(css):
        return False
    nodes = tinycss2.parse_component_value_list(css)
    return _depth(nodes) > MAX_NESTING or _refused(nodes)
