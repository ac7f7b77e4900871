"""The merge-tag renderer: values, escaping, defaults, fallbacks, unknown tags, compiled once."""

from __future__ import annotations

from typing import Any

import pytest

from marketing_cli.kernel import merge as m
from marketing_cli.services.contacts import merge_tags as tags
from tests import factories as f


def test_contact_values_are_escaped_in_html_but_not_in_text(conn: Any, workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    f.contact(conn, ws, "ann@example.com", first_name='<b>Ann</b> & "Co"')
    row = conn.execute("SELECT * FROM contacts WHERE email = 'ann@example.com'").fetchone()
    values = tags.Renderer(conn, ws).values_for(row)
    html = m.compile_template("<p>Hi {{contact.first_name}}, {{contact.email_address}}</p>", html=True)
    text = m.compile_template("Hi {{ contact.first_name }}")
    assert html.render(values) == "<p>Hi &lt;b&gt;Ann&lt;/b&gt; &amp; &quot;Co&quot;, ann@example.com</p>"
    assert text.render(values) == 'Hi <b>Ann</b> & "Co"'


def test_defaults_fallbacks_and_empty_values(conn: Any, workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    f.field(conn, ws, "city", default_value="Paris")
    f.field(conn, ws, "plan")
    renderer = tags.Renderer(conn, ws)
    template = m.compile_template("[{{contact.city}}] [{{contact.plan}}] [{{contact.plan|free}}] "
                                  "[{{ contact.first_name | there }}] [{{contact.city|Rome}}]")
    assert template.render(renderer.values_for(None)) == "[Paris] [] [free] [there] [Paris]"
    f.contact(conn, ws, "bo@example.com", first_name="Bo", city="Lyon", plan="pro")
    row = conn.execute("SELECT * FROM contacts WHERE email = 'bo@example.com'").fetchone()
    assert template.render(renderer.values_for(row)) == "[Lyon] [pro] [pro] [Bo] [Lyon]"


def test_typed_values_render_as_text(conn: Any, workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    f.field(conn, ws, "age", "NUMBER")
    f.field(conn, ws, "vip", "BOOLEAN")
    f.field(conn, ws, "likes", "DROPDOWN_MULTIPLE", definition="tea,cake,jam")
    f.contact(conn, ws, "cy@example.com", age=41, vip=True, likes=["tea", "jam"])
    row = conn.execute("SELECT * FROM contacts WHERE email = 'cy@example.com'").fetchone()
    out = m.compile_template("{{contact.age}}|{{contact.vip}}|{{contact.likes}}").render(tags.Renderer(conn, ws)
                                                                                        .values_for(row))
    assert out == "41|true|tea, jam"


def test_workspace_system_and_action_tags(conn: Any, workspace: dict[str, Any]) -> None:
    renderer = tags.Renderer(conn, workspace["id"], preview_text="Sale <today>", now="2026-11-23T08:00:00.000Z")
    values = renderer.values_for(None, actions={"unsubscribe_url": "https://t.example/u/1?a=1&b=2"})
    template = m.compile_template('{{workspace.name}} {{preview_text}} {{current_date}} {{server_time}} '
                                  '<a href="{{unsubscribe_url}}">x</a> [{{view_online_url}}]', html=True)
    assert template.render(values) == ('Test workspace Sale &lt;today&gt; 2026-11-23 2026-11-23T08:00:00.000Z '
                                       '<a href="https://t.example/u/1?a=1&amp;b=2">x</a> []')


def test_every_listed_merge_tag_is_known(conn: Any, workspace: dict[str, Any]) -> None:
    from marketing_cli.services.contacts.merge_tags import list_merge_tags

    f.field(conn, workspace["id"], "city")
    listed = "".join(t["tag"] for t in list_merge_tags(conn, workspace["id"]))
    assert tags.find_unknown_tags(conn, workspace["id"], listed) == []


def test_unknown_tags_are_reported_and_left_as_written(conn: Any, workspace: dict[str, Any]) -> None:
    ws = workspace["id"]
    text = "{{contact.nickname}} {{ nope | x }} {{contact.first_name}} {{contact.nickname}} {{#if}} {{ }}"
    assert tags.find_unknown_tags(conn, ws, text) == ["{{contact.nickname}}", "{{nope}}"]
    rendered = m.compile_template(text).render(tags.Renderer(conn, ws).values_for(None))
    assert rendered == "{{contact.nickname}} {{ nope | x }}  {{contact.nickname}} {{#if}} {{ }}"


def test_a_tag_name_never_reaches_sql(conn: Any, workspace: dict[str, Any]) -> None:
    hostile = "{{contact.x'); DROP TABLE contacts; --}} {{contact.first_name|'; DROP TABLE fields; --}}"
    assert tags.find_unknown_tags(conn, workspace["id"], hostile) == []  # not even a tag
    m.compile_template(hostile).render(tags.Renderer(conn, workspace["id"]).values_for(None))
    assert conn.execute("SELECT COUNT(*) FROM fields").fetchone()[0] > 0


def test_compiled_once_renders_many(conn: Any, workspace: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """A template is parsed once and rendered per recipient without parsing again (its speed
    is bench_email_send's: a timed loop here failed only on a loaded machine)."""
    ws = workspace["id"]
    html = ("<table><tr><td>Hi {{contact.first_name|friend}}</td></tr>" * 20 +
            '<a href="{{unsubscribe_url}}">Unsubscribe</a>{{workspace.name}}</table>')
    template = m.compile_template(html, html=True)
    assert len(template.parts) == 45 and set(template.names) == {"contact.first_name", "unsubscribe_url",
                                                                 "workspace.name"}
    renderer = tags.Renderer(conn, ws)
    row = {"email": "a@example.com", "phone": None, "data": '{"%d": "Ann"}' % renderer.fields.by_tag["first_name"].id}

    def parsed_again(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a compiled template was parsed again to render it")

    monkeypatch.setattr(m, "compile_template", parsed_again)
    outs = [template.render(renderer.values_for(row, actions={"unsubscribe_url": f"https://u/{i}"}))
            for i in range(1_000)]
    assert all(out.count("Hi Ann") == 20 for out in outs)
    assert [out.count(f'href="https://u/{i}"') for i, out in enumerate(outs)] == [1] * 1_000


def test_a_value_cannot_make_a_link_active_content() -> None:
    from marketing_cli.kernel.merge import compile_template
    from marketing_cli.kernel.merge_contexts import Values

    html = compile_template('<a href="{{contact.website|https://example.org}}">site</a> '
                            "<img src='{{contact.avatar}}'> <p>{{contact.website}}</p>", html=True)
    hostile = Values({"contact.website": " JaVa\tScRiPt:alert(1)", "contact.avatar": "data:image/png;base64,x"})
    assert html.render(hostile) == ('<a href="https://example.org">site</a> <img src=\'\'> '
                                    "<p> JaVa\tScRiPt:alert(1)</p>")  # as text it is harmless (and escaped)
    fine = Values({"contact.website": "https://shop.example/?a=1&b=2", "contact.avatar": "https://cdn.example/a.png"})
    assert html.render(fine) == ('<a href="https://shop.example/?a=1&amp;b=2">site</a> '
                                 "<img src='https://cdn.example/a.png'> <p>https://shop.example/?a=1&amp;b=2</p>")
    text = compile_template("Visit {{contact.website}}")  # plain text and subjects are not HTML
    assert text.render(hostile) == "Visit  JaVa\tScRiPt:alert(1)"
