"""Flow documents within bounds on both faces (issue 40, item 2): a document nests at most 32
levels, checked at input; YAML is read without aliases and without building anything deeper
than that. A hostile set is stored through the API and the CLI, then every automation that
was stored is read back and driven through every operation: no 500, no traceback. Before: a
webhook payload nested 256 to 990 levels was stored and every answer holding it was a 500
(orjson's depth limit); a YAML flow nested 600 deep was a RecursionError traceback; a 700-byte
YAML alias bomb ran 60 s to 5.6 GB."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from marketing_cli.services.account import billing
from marketing_cli.services.automations import format as flow_format

TOO_DEEP = "The automation nests objects and arrays more than 32 levels deep (at '{path}')."


def nest(levels: int, leaf: Any = "x") -> Any:
    value = leaf
    for _ in range(levels):
        value = {"a": value}
    return value


def nested_text(levels: int) -> str:
    """`nest(levels)` as JSON text (the json module's encoder stops near 1,000 levels)."""
    return '{"a":' * levels + '"x"' + "}" * levels


def hook(payload: str, name: str = "Deep") -> str:
    return ('{"name": "%s", "triggers": [{"type": "manual"}], "steps": [{"id": "h", "type": "webhook", '
            '"url": "https://hooks.example.org/x", "payload": %s}]}' % (name, payload))


def deep_path(prefix: str, levels: int) -> str:
    path = prefix + ".a" * levels
    return path if len(path) <= 80 else path[:77] + "..."


# name -> (document, the refusal or None when it is stored); a payload sits 3 levels down: 29 more fit
JSON_SET: dict[str, tuple[str, str | None]] = {
    "a payload at the limit": (hook(nested_text(29)), None),
    "a payload one level past it": (hook(nested_text(30)), TOO_DEEP.format(path=deep_path("steps[0].payload", 29))),
    "a payload nested 256": (hook(nested_text(256)), TOO_DEEP.format(path=deep_path("steps[0].payload", 29))),
    # (or, where the thread's stack is shorter, the body is no JSON the decoder can read: a 400 too)
    "a payload nested 990": (hook(nested_text(990)), "nests or unreadable"),
    "a payload of arrays nested 300": (hook('{"l": ' + "[" * 300 + "]" * 300 + "}"), "nests"),
    "a wide payload": (hook(json.dumps({f"k{i}": i for i in range(5000)})), None),
    "a set_field value nested 300": ('{"name": "Set", "triggers": [{"type": "manual"}], "steps": [{"id": "s", '
                                     '"type": "set_field", "field": "city", "value": %s}]}' % nested_text(300),
                                     "nests"),
    "a trigger's 'from' nested 300": ('{"name": "Trig", "triggers": [{"type": "field_updated", "field": "city", '
                                      '"from": %s}], "steps": [{"id": "e", "type": "exit"}]}' % nested_text(300),
                                      "nests"),
}


def refusal_matches(message: str, expected: str) -> bool:
    nests = message.startswith("The automation nests objects and arrays more than 32 levels deep (at '")
    unreadable = message.startswith(("Invalid request body", "--file is not valid JSON"))
    return (message == expected or (expected == "nests" and nests)
            or (expected == "nests or unreadable" and (nests or unreadable)))


YAML_SET: dict[str, tuple[str, str | None]] = {
    "an alias bomb": ("name: Bomb\ntriggers: [{type: manual}]\nlol: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
                      + "".join(f"l{n}: &{n} [{', '.join(['*' + p] * 9)}]\n" for p, n in zip("abcde", "bcdef"))
                      + "steps:\n  - {id: h, type: webhook, url: 'https://hooks.example.org/x', payload: {x: *f}}\n",
                      "an alias (*a) repeats a value"),
    "a merge key": ("base: &t {type: manual}\nname: Merge\ntriggers:\n  - <<: *t\nsteps: [{id: e, type: exit}]\n",
                    "an alias (*t) repeats a value"),
    "flow collections nested 600": ("name: Deep\ntriggers: " + "[" * 600 + "]" * 600 + "\nsteps: []\n",
                                    "objects and arrays nest more than 32 levels deep"),
    "block mappings nested 600": ("name: Deep\ntriggers: [{type: manual}]\nsteps:\n  - id: h\n    type: webhook\n"
                                  "    url: https://hooks.example.org/x\n    payload:\n"
                                  + "".join("      " + "  " * i + "a:\n" for i in range(600))
                                  + "      " + "  " * 600 + "b: 1\n",
                                  "objects and arrays nest more than 32 levels deep"),
    "a file over 1 MiB": ("name: Big\n" + "# padding\n" * 110_000, "is larger than 1 MiB"),
    "a YAML flow at the limit": ("name: Edge\ntriggers: [{type: manual}]\nsteps:\n  - id: h\n    type: webhook\n"
                                 "    url: https://hooks.example.org/x\n    payload: " + json.dumps(nest(29)) + "\n",
                                 None),
}


@pytest.fixture
def allowed(conn: Any, workspace: dict[str, Any]) -> int:
    billing.set_allowance(conn, workspace["id"], "automations", 50)
    return workspace["id"]


def no_traceback(result: Any) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in (result.stdout + (result.stderr or ""))


def test_the_depth_check_walks_without_recursion() -> None:
    assert flow_format.too_deep(nest(31)) is None and flow_format.too_deep(nest(32)) is None
    assert flow_format.too_deep(nest(33)) == ".".join(["a"] * 32)
    assert flow_format.too_deep(nest(100_000)) is not None  # no RecursionError


def test_the_hostile_set_is_stored_or_refused_then_every_stored_flow_reads_back(
        client: Any, auth: dict[str, str], cli: Any, allowed: int, tmp_path: Path) -> None:
    for name, (doc, refusal) in JSON_SET.items():
        answer = client.post("/v1/automations", headers={**auth, "Content-Type": "application/json"}, content=doc)
        path = tmp_path / f"{abs(hash(name))}.json"
        path.write_text(doc)
        done = cli("automations", "create", "--file", str(path), "--json")
        no_traceback(done)
        if refusal is None:
            assert answer.status_code == 201 and done.exit_code == 0, (name, answer.text, done.stderr)
        else:
            assert answer.status_code == 400 and refusal_matches(answer.json()["error"]["message"], refusal), (
                name, answer.text)
            usage = refusal == "nests or unreadable" and "is not valid JSON" in done.stderr  # a usage error: 2
            assert done.exit_code == (2 if usage else 1) and refusal_matches(done.stderr.strip(), refusal), (
                name, done.stderr)
    for name, (text, refusal) in YAML_SET.items():
        path = tmp_path / f"{abs(hash(name))}.yaml"
        path.write_text(text)
        done = cli("automations", "create", "--file", str(path), "--json")
        no_traceback(done)
        if refusal is None:
            assert done.exit_code == 0, (name, done.stderr)
        else:
            assert done.exit_code == 2 and refusal in done.stderr, (name, done.stderr)
    stored = client.get("/v1/automations", headers=auth)
    assert stored.status_code == 200
    ids = [a["id"] for a in stored.json()["data"]]
    assert len(ids) == 2 * 2 + 1  # the two JSON documents that stand, on both faces, and the YAML one
    for aid in ids:
        shown = client.get(f"/v1/automations/{aid}", headers=auth)
        assert shown.status_code == 200
        assert client.put(f"/v1/automations/{aid}", headers=auth, json=shown.json()["data"]["flow"]).status_code == 200
        for action in ("publish", "pause", "resume"):
            assert client.post(f"/v1/automations/{aid}/{action}", headers=auth).status_code == 200, action
        assert client.get(f"/v1/automations/{aid}/versions/1", headers=auth).status_code == 200
        for args in (("show", str(aid)), ("version", str(aid), "1"), ("list",), ("archive", str(aid))):
            done = cli("automations", *args, "--json")
            no_traceback(done)
            assert done.exit_code == 0, (args, done.stderr)
        assert client.get(f"/v1/automations/{aid}", headers=auth).json()["data"]["status"] == "ARCHIVED"


def test_json_past_what_the_decoder_reads_is_refused_on_both_faces(client: Any, auth: dict[str, str], cli: Any,
                                                                   allowed: int, tmp_path: Path) -> None:
    text = '{"name": "x", "triggers": ' + "[" * 100_000 + "]" * 100_000 + ', "steps": []}'
    answer = client.post("/v1/automations", headers={**auth, "Content-Type": "application/json"}, content=text)
    assert answer.status_code == 400
    path = tmp_path / "deep.json"
    path.write_text(text)
    done = cli("automations", "create", "--file", str(path))
    no_traceback(done)
    assert done.exit_code == 2 and "is not valid JSON" in done.stderr
    assert client.get("/v1/automations", headers=auth).json()["data"] == []
