"""The CSS cleaner: one rule for style sheets and style attributes, read through escapes and
comments; what is kept is kept byte for byte."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from marketing_cli.kernel import css as css_clean
from marketing_cli.kernel.css import MAX_NESTING, clean_declarations, clean_style_sheet

PROPERTY = settings(max_examples=150, derandomize=True, database=None, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


# --- what goes ------------------------------------------------------------------------------------

@pytest.mark.parametrize("declaration", [
    "background:url(javascript:alert(1))",
    "background:url( 'javascript:alert(1)' )",
    'background:url("JaVaScRiPt:alert(1)")',
    r"background:url(\6a avascript:alert(1))",
    r"background:url(java\9 script:alert(1))",
    "background:url(vbscript:msgbox(1))",
    "background:url(data:image/svg+xml;base64,PHN2Zz4=)",
    "background:url(file:///etc/passwd)",
    "background:image-set('javascript:alert(1)' 1x)",
    "width:expression(alert(1))",
    "width:EXPRESSION(alert(1))",
    "width:expression/**/(alert(1))",
    "width:ex/**/pression(alert(1))",
    r"width:\65xpression(alert(1))",
    r"width:\000065 xpression(alert(1))",
    "width:expression\t(alert(1))",
    r"x:\6a avascript:alert(1)",
    "x:java/**/script:alert(1)",
    "behavior:url(https://evil.example/x.htc)",
    "*behavior:url(x.htc)",
    "_behavior:url(x.htc)",
    "-ms-behavior:url(x.htc)",
    r"beh\61vior:url(x.htc)",
    "be/**/havior:url(x.htc)",
    "-moz-binding:url(https://evil.example/x.xml#xss)",
    "@import url(https://evil.example/x.css)",
    r"@\69mport 'x.css'",
    "background:url(a(b))",  # a bad URL: browsers drop it, its text cannot be judged
])
def test_refused_declarations_go_in_attributes_and_in_rules(declaration: str) -> None:
    assert clean_declarations(f"color:red;{declaration};margin:0") == "color:red;margin:0"
    assert clean_declarations(f"{declaration}") == ""
    assert clean_style_sheet(f"p{{color:red;{declaration};margin:0}}") == "p{color:red;margin:0}"
    assert clean_style_sheet(f"p {{ color:red; {declaration} }}") == "p { color:red;  }"


@pytest.mark.parametrize("rule", [
    "@import url(https://evil.example/x.css);",
    "@import 'https://evil.example/x.css' screen;",
    "@IMPORT url(x.css);",
    r"@\69mport url(x.css);",
    "@im/**/port url(x.css);",
    "@namespace svg url(javascript:alert(1));",
    "@-moz-document url(javascript:alert(1)) { p { color: red } }",
    "p:after{content:url(javascript:alert(1))}",  # not a refused selector: the rule keeps `p:after{}`
])
def test_refused_rules_go_whole(rule: str) -> None:
    kept = "p:after{}" if rule.startswith("p:after") else ""
    assert clean_style_sheet(f"a{{b:c}}\n{rule}\nd{{e:f}}") == f"a{{b:c}}\n{kept}\nd{{e:f}}"


def test_media_and_other_group_rules_are_cleaned_inside() -> None:
    css = ("@media only screen and (max-width: 620px) {\n  @import url(x.css);\n  .a { width: 100% !important; "
           "background: url(javascript:alert(1)); }\n  .b { behavior: url(x.htc) }\n}\n"
           "@supports (display:grid) { .c { display: grid; x: expression(alert(1)) } }")
    assert clean_style_sheet(css) == ("@media only screen and (max-width: 620px) {\n  \n  .a { width: 100% !important; "
                                      " }\n  .b {  }\n}\n@supports (display:grid) { .c { display: grid;  } }")


def test_font_face_keeps_https_sources_and_loses_the_others() -> None:
    css = ("@font-face { font-family: 'Lato'; src: url(data:font/woff2;base64,d09GMgAB) format('woff2'); "
           "font-weight: 400 }\n@font-face { font-family: 'Lato'; src: url(https://fonts.example/lato.woff2) "
           "format('woff2'), url('/fonts/lato.woff') format('woff'); }")
    assert clean_style_sheet(css) == ("@font-face { font-family: 'Lato';  font-weight: 400 }\n@font-face { "
                                      "font-family: 'Lato'; src: url(https://fonts.example/lato.woff2) format('woff2'), "
                                      "url('/fonts/lato.woff') format('woff'); }")


def test_a_nested_rule_counts_as_one_declaration() -> None:
    assert clean_style_sheet("a{color:red; &:hover{behavior:url(x.htc)} ; margin:0}") == "a{color:red;  margin:0}"
    assert clean_style_sheet("a{color:red; b{c:d} e:f}") == "a{color:red; b{c:d} e:f}"


# --- what stays, byte for byte ----------------------------------------------------------------------

@pytest.mark.parametrize("css", [
    "p { margin: 0 }",
    "/* <body> */ p { margin: 0 }",
    ".btn a:hover { background-color: #0b5ed7 !important; }",
    "@media (prefers-color-scheme: dark) { .card { background-color: #1f1f1f !important; } }",
    "body { background: url(https://cdn.example/bg.png) no-repeat; font-family: 'Segoe UI', \"Lato\", Arial; }",
    "td { background-image: url(images/bg.jpg); } .\\31 0col { width: 10% }",
    "a { color: {{contact.brand_color}}; background: url({{contact.avatar_url}}) }",
    "a{b:c;;d:e;}\r\n@media x{y{z:1}}\f",
    ":root { color-scheme: light dark; } u+0-7f, a[href^='http'] { x: y }",
    "<!-- p { margin: 0 } -->",
])
def test_safe_style_sheets_are_kept_as_written(css: str) -> None:
    assert clean_style_sheet(css) == css


def test_kept_parts_around_a_removal_are_untouched() -> None:
    css = "p{ color : RED ;\r\n  x:expression(1) ;\r\n  font-family:'Lato' /* brand */ }"
    assert clean_style_sheet(css) == "p{ color : RED ;\r\n  \r\n  font-family:'Lato' /* brand */ }"
    assert clean_declarations("color:red; x:url(javascript:1) ; margin:0") == "color:red;  margin:0"


@pytest.mark.parametrize(("css", "cleaned"), [
    ("p{color:red;x:expression(alert(1))", "p{color:red;"),  # a block the text never closes
    ("@media x{p{color:red;x:expression(1)", "@media x{p{color:red;"),
    ("p{color:red}@media x{q{c:d}", "p{color:red}@media x{q{c:d}"),
    ("p{color:red;x:url(javascript:alert(1)", "p{color:red;"),  # an unterminated url()
    ("p{color:red;x:'javascript:alert(1)", "p{color:red;"),  # an unterminated string
    ("p{color:red} /* x:expression(1)", "p{color:red} /* x:expression(1)"),  # an unterminated comment
])
def test_unterminated_text(css: str, cleaned: str) -> None:
    assert clean_style_sheet(css) == cleaned


def test_deep_nesting_loses_the_css_without_a_recursion_error() -> None:
    assert clean_style_sheet("a" + "{" * (MAX_NESTING + 1) + "b:c") == ""
    assert clean_declarations("x:" + "(" * 10_000) == ""
    shallow = "a" + "{" * MAX_NESTING + "b:c" + "}" * MAX_NESTING
    assert clean_style_sheet(shallow) == shallow


def test_the_result_is_cleaned_until_it_is_stable_else_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    assert css_clean._until_stable("p{x:expression(1)}", sheet=True) == "p{}"
    monkeypatch.setattr(css_clean._Pass, "run", lambda self, sheet: self.text[1:])  # a pass that never settles
    assert clean_style_sheet("p{x:expression(1)}") == ""


# --- properties -------------------------------------------------------------------------------------

SAFE_DECLARATIONS = [
    "color:red", "margin:0 auto", "width:100% !important", "font-family:'Segoe UI', Arial, sans-serif",
    "background:url(https://cdn.example/a.png) no-repeat", "background-image:url('images/b.jpg')",
    "padding:{{contact.pad}}px", "border:1px solid #eeeeee", "mso-line-height-rule:exactly", "--brand:#e63946",
    "content:'\\201C'", "/* note: 12% */", "display:none!important",
]
REFUSED_DECLARATIONS = [
    "x:expression(alert(1))", "x:expression/**/(alert(1))", "x:ex/**/pression(1)", "x:\\65 xpression(1)",
    "b:url(javascript:alert(1))", "b:url(\\6a avascript:alert(1))", "b:url('JAVASCRIPT:alert(1)')",
    "b:url(vbscript:x)", "b:url(data:text/html,x)", "behavior:url(x.htc)", "*behavior:url(x.htc)",
    "-moz-binding:url(x.xml#a)", "beh\\61vior:url(x.htc)", "@import url(x.css)", "x:java/**/script:1",
]
SELECTORS = ["p", ".card td", "a:hover", "table.wrapper > tr", "#main", ".\\31 0col"]
BLANKS = st.sampled_from(["", " ", "\n", "\r\n  ", "\t"])


def declarations(items: list[str]) -> st.SearchStrategy[str]:
    return st.lists(st.tuples(BLANKS, st.sampled_from(items), BLANKS), max_size=6).map(
        lambda parts: ";".join(f"{a}{d}{b}" for a, d, b in parts))


def sheets(items: list[str]) -> st.SearchStrategy[str]:
    rule = st.tuples(st.sampled_from(SELECTORS), declarations(items)).map(lambda r: f"{r[0]} {{{r[1]}}}")
    media = st.lists(rule, max_size=3).map(lambda rs: "@media only screen and (max-width:600px) {" + "\n".join(rs) + "}")
    return st.lists(st.one_of(rule, media), max_size=5).map("\n".join)


def readable(css: str) -> str:
    """An independent reading: CSS escapes decoded, comments and blanks removed, lower case."""
    css = re.sub(r"/\*.*?(\*/|\Z)", "", css, flags=re.DOTALL)
    css = re.sub(r"\\([0-9a-fA-F]{1,6})[ \t\n]?", lambda m: chr(int(m.group(1), 16)), css)
    css = re.sub(r"\\(.)", r"\1", css)
    return re.sub(r"\s+", "", css).replace("'", "").replace('"', "").lower()


def is_cut_from(kept: str, original: str) -> bool:
    """`kept` is `original` with some pieces cut out: nothing added, nothing rewritten."""
    rest = iter(original)
    return all(char in rest for char in kept)


@PROPERTY
@given(sheets(SAFE_DECLARATIONS))
def test_property_safe_sheets_come_out_unchanged(css: str) -> None:
    assert clean_style_sheet(css) == css


@PROPERTY
@given(declarations(SAFE_DECLARATIONS))
def test_property_safe_attributes_come_out_unchanged(css: str) -> None:
    assert clean_declarations(css) == css


@PROPERTY
@given(st.one_of(sheets(SAFE_DECLARATIONS + REFUSED_DECLARATIONS),
                 declarations(SAFE_DECLARATIONS + REFUSED_DECLARATIONS)))
def test_property_nothing_refused_survives_and_nothing_is_rewritten(css: str) -> None:
    for clean in (clean_style_sheet, clean_declarations):
        cleaned = clean(css)
        assert is_cut_from(cleaned, css)
        assert clean(cleaned) == cleaned
        text = readable(cleaned)
        for word in ("expression(", "javascript:", "vbscript:", "@import", "behavior:", "binding:", "url(data:"):
            assert word not in text, (css, cleaned)


@PROPERTY
@given(st.lists(st.sampled_from(SAFE_DECLARATIONS + REFUSED_DECLARATIONS), max_size=8))
def test_property_each_safe_declaration_stays_and_each_refused_one_goes(items: list[str]) -> None:
    kept = [item for item in items if item not in REFUSED_DECLARATIONS]
    assert clean_declarations("".join(f"{item};" for item in items)) == "".join(f"{item};" for item in kept)


CSS_ALPHABET = st.sampled_from(list("abcdeilnoprstuvx:;{}()[]'\"\\/*@ \n\t-_#.,!%0123456789") + [
    "url(", "expression", "javascript", "script:", "behavior", "binding", "@import", "/*", "*/", "\\6a ", "image-set(",
    "data:", "http:", "<!--", "-->", "{{", "}}"])


@PROPERTY
@given(st.lists(CSS_ALPHABET, max_size=40).map("".join))
def test_property_any_text_is_cleaned_without_error_and_only_by_cuts(css: str) -> None:
    for clean in (clean_style_sheet, clean_declarations):
        cleaned = clean(css)
        assert is_cut_from(cleaned, css)
        assert clean(cleaned) == cleaned


@PROPERTY
@given(st.lists(CSS_ALPHABET, max_size=40).map("".join))
def test_property_the_quick_check_lets_through_only_what_the_full_pass_keeps(css: str) -> None:
    if css_clean._plainly_safe(css):
        assert css_clean._Pass(css).run(sheet=True) == css
        assert css_clean._Pass(css).run(sheet=False) == css
