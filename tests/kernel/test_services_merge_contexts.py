"""Merge tags in HTML by context: contact data can never become markup, script or active CSS.

The contexts (kernel/markup.py) and the escaping and judging (kernel/merge_contexts.py), on the cases
the old look-back defeated, then a property test: whatever the values, the rendered HTML
parses (html.parser) into the same tags and attributes as with a harmless value, no URL
attribute carries a refused scheme and no CSS holds a refused construct.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from marketing_cli.errors import MktError
from marketing_cli.kernel import css, markup
from marketing_cli.kernel.merge import TAG, compile_template
from marketing_cli.kernel.merge_contexts import Values
from marketing_cli.kernel.merge_fallbacks import check_fallbacks

PROPERTY = settings(max_examples=300, derandomize=True, database=None, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def render(template: str, **values: str) -> str:
    return compile_template(template, html=True).render(Values({f"contact.{k}": v for k, v in values.items()}))


# --- the cases of the issue --------------------------------------------------------------------

def test_two_tags_side_by_side_in_a_url_attribute_are_judged_together() -> None:
    html = '<a href="{{contact.a}}{{contact.b}}">x</a>'
    assert render(html, a="java", b="script:alert(1)") == '<a href="">x</a>'
    assert render(html, a="JaVa\t", b="ScRiPt:alert(1)") == '<a href="">x</a>'
    assert render(html, a="https://shop.example", b="/p?a=1&b=2") == \
        '<a href="https://shop.example/p?a=1&amp;b=2">x</a>'
    with_fallbacks = '<a href="{{contact.a|https://a.example}}{{contact.b|/x}}">x</a>'
    assert render(with_fallbacks, a="java", b="script:alert(1)") == '<a href="https://a.example/x">x</a>'


def test_a_long_attribute_is_still_a_url_attribute() -> None:
    html = '<a title="t" class="' + "c " * 40 + '" data-x="' + "y" * 80 + '"   href = \n "{{contact.a}}">x</a>'
    out = render(html, a="javascript:alert(1)")
    assert 'href = \n ""' in out
    long_url = '<a href="https://shop.example/' + "p/" * 40 + '{{contact.a}}">x</a>'
    assert render(long_url, a="javascript:alert(1)").endswith('p/javascript:alert(1)">x</a>')  # a path, not a scheme


def test_an_unquoted_attribute_is_written_quoted() -> None:
    assert render("<a href={{contact.a}} title=y>x</a>", a="https://a.example x onmouseover=alert(1)>") == \
        '<a href="https://a.example x onmouseover=alert(1)&gt;" title=y>x</a>'
    assert render("<td title={{contact.a}}>x</td>", a="a onclick=alert(1)") == \
        '<td title="a onclick=alert(1)">x</td>'
    assert render("<a href={{contact.a}} title=y>x</a>", a="") == '<a href="" title=y>x</a>'


def test_quotes_of_either_kind_cannot_end_the_attribute() -> None:
    assert render("<p title='{{contact.a}}'>x</p>", a="' onmouseover='alert(1)") == \
        "<p title='&#x27; onmouseover=&#x27;alert(1)'>x</p>"
    assert render('<p title="{{contact.a}}">x</p>', a='" onmouseover="alert(1)') == \
        '<p title="&quot; onmouseover=&quot;alert(1)">x</p>'


def test_a_style_attribute_is_css() -> None:
    html = '<p style="color: {{contact.color}}; font-family: \'{{contact.font}}\'">x</p>'
    assert render(html, color="#ff0000", font="Open Sans") == \
        '<p style="color: #ff0000; font-family: \'Open Sans\'">x</p>'
    out = render(html, color='red; background: url("javascript:alert(1)")', font="a'; behavior: url(x.htc); '")
    assert css.clean_declarations(_attribute(out, "style")) == _attribute(out, "style")
    assert ";" not in out.split("color:")[1].split(";")[0].replace("\\3b ", "")  # the value ended no declaration
    assert render(html, color="rgb(0, 0, 0)", font="x") == '<p style="color: rgb(0, 0, 0); font-family: \'x\'">x</p>'
    assert render(html, color="expression(alert(1))", font="x") == '<p style="color: ; font-family: \'x\'">x</p>'


def test_url_in_css_keeps_the_url_rules() -> None:
    html = '<td style="background-image: url({{contact.a}})">x</td>'
    assert render(html, a="https://cdn.example/a.png") == \
        '<td style="background-image: url(https://cdn.example/a.png)">x</td>'
    assert render(html, a="javascript:alert(1)") == '<td style="background-image: url()">x</td>'
    assert render(html, a="data:image/svg+xml,<svg onload=alert(1)>") == '<td style="background-image: url()">x</td>'
    assert render(html, a="a b).png") == '<td style="background-image: url(a\\20 b\\29 .png)">x</td>'
    assert render(html, a="x) ; behavior: url(y.htc") == '<td style="background-image: url()">x</td>'


def test_srcset_candidates_are_each_judged() -> None:
    html = '<img srcset="{{contact.a}} 1x, {{contact.b}} 2x">'
    assert render(html, a="https://c.example/a.png", b="https://c.example/b.png") == \
        '<img srcset="https://c.example/a.png 1x, https://c.example/b.png 2x">'
    assert render(html, a="https://c.example/a.png", b="javascript:alert(1)") == '<img srcset=" 1x,  2x">'
    # a value cannot add a candidate: its blanks and commas are percent-encoded
    assert render(html, a="https://c.example/a.png 1x, javascript:alert(1)", b="") == \
        '<img srcset="https://c.example/a.png%201x%2C%20javascript:alert(1) 1x,  2x">'


def test_a_value_cannot_close_a_style_element() -> None:
    html = "<style>.x{color:{{contact.a}}} .y{content:'{{contact.b}}'}</style><p>{{contact.a}}</p>"
    out = render(html, a="red}</style><script>alert(1)</script>", b="'</style><img src=x onerror=alert(1)>")
    assert out.count("</style>") == 1 and "<script" not in out and "<img" not in out
    assert css.clean_style_sheet(out[7:out.index("</style>")]) == out[7:out.index("</style>")]


def test_a_value_in_a_style_element_cannot_bring_refused_css() -> None:
    html = "<style>.x{background:url({{contact.a}})} .y{color:{{contact.b}}}</style>"
    assert render(html, a="javascript:alert(1)", b="expression(alert(1))") == \
        "<style>.x{background:url()} .y{color:}</style>"
    assert render(html, a="https://a.example/i.png", b="red") == \
        "<style>.x{background:url(https://a.example/i.png)} .y{color:red}</style>"


def test_no_value_goes_into_a_script_or_a_name() -> None:
    assert render('<script>var a = "{{contact.a}}";</script>', a='";alert(1);"') == \
        '<script>var a = "xxxxxxxxxxxxx";</script>'
    assert render("<a {{contact.a}}>x</a>", a="onclick=alert(1)") == "<a xxxxxxxxxxxxx>x</a>"
    assert render('<p on{{contact.a}}="1">x</p>', a="click") == '<p onxxxxxxxxxxxxx="1">x</p>'


def test_comments_cannot_be_ended_by_a_value() -> None:
    assert render("<!-- {{contact.a}} -->", a="--><script>alert(1)</script>") == \
        "<!-- &#45;&#45;&gt;&lt;script&gt;alert(1)&lt;/script&gt; -->"
    assert render("<!-- {{contact.a}}> -->", a="--") == "<!-- &#45;&#45;> -->"


def test_conditional_comments_are_markup_inside() -> None:
    html = '<!--[if mso]><v:roundrect href="{{contact.a}}"><p>{{contact.b}}></p></v:roundrect><![endif]-->'
    assert render(html, a="javascript:alert(1)", b="--") == \
        '<!--[if mso]><v:roundrect href=""><p>&#45;&#45;></p></v:roundrect><![endif]-->'
    assert render(html, a="https://a.example", b="b") == \
        '<!--[if mso]><v:roundrect href="https://a.example"><p>b></p></v:roundrect><![endif]-->'


def test_fallbacks_are_rendered_like_values() -> None:
    html = '<p>Hi {{contact.a|Tom &amp; Jerry}}</p><a href="{{contact.b|javascript:alert(1)}}">x</a>'
    assert render(html, a="", b="") == '<p>Hi Tom &amp; Jerry</p><a href="">x</a>'
    assert render("<p>{{contact.a|<b>hi</b>}}</p>", a="") == "<p>&lt;b&gt;hi&lt;/b&gt;</p>"


def test_urls_the_template_begins_stand() -> None:
    assert render('<a href="/p/{{contact.a}}">x</a>', a="javascript:alert(1)") == \
        '<a href="/p/javascript:alert(1)">x</a>'
    assert render('<a href="sms:{{contact.a}}">x</a>', a="+15550100") == '<a href="sms:+15550100">x</a>'
    assert render('<a href="{{contact.a}}">x</a>', a="mailto:a@example.com") == '<a href="mailto:a@example.com">x</a>'
    assert render('<a href="{{contact.a}}">x</a>', a="www.example.com") == '<a href="">x</a>'


def test_entities_of_the_template_cannot_join_a_value() -> None:
    # `&co` + `lon` + `;` would read `&colon;` (a `:`) if the literal were written back as it was
    out = render('<a href="/x&co{{contact.a}};y">x</a>', a="lon")
    assert out == '<a href="/x&amp;colon;y">x</a>'


def test_unknown_tags_are_left_as_written_and_escaped_for_their_place() -> None:
    html = '<p title="{{nope}}">{{ nope | x }}</p>'
    assert compile_template(html, html=True).render(Values({})) == html


def test_plain_text_is_left_alone() -> None:
    template = compile_template('Hi {{contact.a|there}} "<b>"')
    assert template.render(Values({"contact.a": "<script>"})) == 'Hi <script> "<b>"'


# --- fallbacks checked when HTML is saved ------------------------------------------------------

@pytest.mark.parametrize(("html", "reason"), [
    ('<a href="{{contact.site|javascript:alert(1)}}">x</a>', "href takes only an http(s), mailto or tel URL"),
    ('<img srcset="{{contact.a|data:x}} 1x">', "srcset takes only http(s) or relative URLs"),
    ('<p style="color: {{contact.c|red;behavior:url(x.htc)}}">x</p>', "CSS there cannot hold"),
    ("<style>p{color:{{contact.c|expression(alert(1))}}}</style>", "it is CSS the cleaner refuses"),
    ("<p>{{contact.x|<b>hi</b>}}</p>", "it holds markup"),
    ('<p title="{{contact.x|a"onclick="b}}">x</p>', 'it holds the " that ends the attribute value'),
    ("<p title={{contact.x|a b}}>x</p>", "it holds a blank"),
])
def test_a_fallback_that_would_not_stand_is_refused_on_save(html: str, reason: str) -> None:
    with pytest.raises(MktError) as refused:
        check_fallbacks(html)
    assert refused.value.status == 400 and reason in refused.value.message
    assert refused.value.message.startswith("The fallback of {{contact.")


@pytest.mark.parametrize("html", [
    '<a href="{{contact.site|https://example.org}}">x</a>',
    '<a href="{{unsubscribe_url}}">u</a><p>Hi {{contact.first_name|there}} &amp; co</p>',
    "<p style=\"color: {{contact.c|#333}}; font-family: '{{contact.f|Open Sans}}'\">x</p>",
    '<img srcset="{{contact.a|https://c.example/a.png}} 1x">',
    "<script>{{contact.x|</script>}}</script>",  # the cleaner removes scripts: nothing to refuse
    "<p>{{contact.x|a &lt; b}}</p>",
    "<style>p{font-family:{{contact.f|Open Sans}}}</style>",  # a blank is no attribute's end here
])
def test_fallbacks_that_stand_are_accepted(html: str) -> None:
    check_fallbacks(html)


# --- the property ------------------------------------------------------------------------------

TEMPLATES = [
    # text, quoted and unquoted attributes, two tags side by side, a long attribute
    ('<p class="intro" title="{{contact.a}}{{contact.b}}">Hi {{contact.a}}, {{contact.b|there}}</p>'
     "<td title='{{contact.b}}' width={{contact.a}}>x</td><textarea>{{contact.a}}</textarea>"),
    # URL attributes
    ('<a href="{{contact.a}}{{contact.b}}">a</a><a href={{contact.a}}>b</a><img src="{{contact.b}}" alt="{{contact.a}}">'
     '<a title="' + "t" * 60 + '" href="{{contact.a|https://a.example}}">c</a>'
     '<img srcset="{{contact.a}} 1x, {{contact.b}} 2x"><form action="{{contact.b}}"></form>'
     '<table background="{{contact.a}}"><tr><td>x</td></tr></table><a href="https://t.example/{{contact.a}}">d</a>'),
    # CSS in attributes and in a style element
    ('<p style="color: {{contact.a}}; font-family: \'{{contact.b}}\'; background: url({{contact.a}})">x</p>'
     '<div style=width:{{contact.b}}>y</div>'
     "<style>.x{color:{{contact.a}}} .y{content:\"{{contact.b}}\"} /* {{contact.a}} */ "
     ".z{background-image:url('{{contact.b}}')}</style><p>z</p>"),
    # comments, conditional comments, script
    ("<!-- {{contact.a}} --><!--[if mso]><v:rect href=\"{{contact.b}}\" style=\"width:{{contact.a}}\">"
     "<p>{{contact.a}}</p></v:rect><![endif]--><script>var a = '{{contact.b}}';</script><p>{{contact.b}}</p>"),
]

HOSTILE = st.sampled_from([
    '" onmouseover="alert(1)', "' onmouseover='alert(1)", "x onmouseover=alert(1)", "</style><script>alert(1)",
    "javascript:alert(1)", " JaVa\tScRiPt:alert(1)", "data:text/html,<script>", "expression(alert(1))",
    "red;behavior:url(x.htc)", "}</style><img src=x onerror=alert(1)>", "-->", "--!>", "<!--", "*/", "\\", "\0",
    "url(javascript:x)", "@import 'x.css';", "\\6a avascript:alert(1)", "&quot;", "&#x27;", ">", "'", '"',
])
VALUES = st.one_of(HOSTILE, st.text(alphabet=st.sampled_from(list("\"'<>&\\\n\r\t\0 ;:{}()/*-!=`,%#@xyz\u2028é")),
                                    max_size=30), st.text(max_size=30), st.lists(HOSTILE, max_size=3).map("".join))

URL_NAMES = {"href", "src", "action", "background", "srcset"}


class _Structure(HTMLParser):
    """Tags and their attribute names, in order (conditional comments read as markup); URL
    attribute values, style attributes and style sheets on the side."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.shape: list[Any] = []
        self.urls: list[str] = []
        self.styles: list[str] = []
        self.sheets: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.shape.append(("start", tag, tuple(name for name, _ in attrs)))
        for name, value in attrs:
            if name in URL_NAMES:
                self.urls.append((name, value or ""))
            if name == "style":
                self.styles.append(value or "")

    def handle_endtag(self, tag: str) -> None:
        self.shape.append(("end", tag))

    def handle_data(self, data: str) -> None:
        if self.lasttag == "style" and self.cdata_elem == "style":
            self.sheets.append(data)

    def handle_comment(self, data: str) -> None:
        inner = re.fullmatch(r"\[if [^\]]*\]>(.*)<!\[endif\]", data, re.DOTALL)
        self.shape.append(("comment", inner is not None))
        if inner is not None:
            nested = _structure(inner.group(1))
            self.shape.append(nested.shape)
            self.urls += nested.urls
            self.styles += nested.styles


def _structure(html: str) -> _Structure:
    parser = _Structure()
    parser.feed(html)
    parser.close()
    return parser


def _attribute(html: str, name: str) -> str:
    found = _structure(html)
    return found.styles[0] if name == "style" else found.urls[0][1]


@pytest.mark.parametrize("template", TEMPLATES)
@PROPERTY
@given(a=VALUES, b=VALUES)
def test_property_values_never_change_the_structure(template: str, a: str, b: str) -> None:
    compiled = compile_template(template, html=True)
    harmless = _structure(compiled.render(Values({"contact.a": "ok", "contact.b": "ok"})))
    found = _structure(compiled.render(Values({"contact.a": a, "contact.b": b})))
    assert found.shape == harmless.shape
    for name, url in found.urls:
        for candidate in url.split(",") if name == "srcset" else [url]:
            assert css.safe_url(candidate.strip().split(" ")[0], frozenset({"http", "https", "mailto", "tel"})), url
    for style in found.styles:
        assert css.clean_declarations(style) == style
    for sheet in found.sheets:
        assert css.clean_style_sheet(sheet) == sheet


HTML_PIECES = st.sampled_from([
    "<p>", "</p>", "<a href=\"", "\">", "<img src=", " ", ">", "<style>", "</style>", "<script>", "</script>",
    "<!--", "-->", "<!--[if mso]>", "<![endif]-->", "'", '"', "=", "style=\"", "x", "<", "/", "<textarea>",
    "</textarea>", "{{contact.a}}", "{{contact.b|f}}", "{{contact.a|\">}}", "&amp;", "&", "<!x>", "<?x>",
])


@PROPERTY
@given(pieces=st.lists(HTML_PIECES, max_size=25))
def test_property_regions_cover_the_template_and_hold_whole_tags(pieces: list[str]) -> None:
    text = "".join(pieces)
    spans = [m.span() for m in TAG.finditer(text)]
    regions = markup.regions(text, spans)
    at = 0
    for region in regions:
        assert region.start == at and region.end > region.start
        at = region.end
    assert at == len(text)
    for start, end in spans:
        assert any(r.start <= start and end <= r.end for r in regions)
    compile_template(text, html=True).render(Values({"contact.a": "<'\"&", "contact.b": ""}))
