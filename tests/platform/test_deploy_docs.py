"""docs/deploy.md and examples/deploy/ stay true: the compose file parses and has the parts the
page promises, and every `mkt ...` command they name exists with the options they give it."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest
import typer
import yaml

from marketing_cli.cli.main import app

pytestmark = pytest.mark.engine_neutral  # files and --help only: run once, by the SQLite half

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "examples" / "deploy"


def _code(text: str, markdown: bool) -> list[str]:
    """The parts of a file that are commands: in Markdown the fenced blocks' lines and the
    `inline code`; elsewhere every line that is not a comment, and the `inline code` of comments."""
    parts, fenced = [], False
    for line in text.splitlines():
        if markdown and line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or (not markdown and not line.lstrip().startswith("#")):
            parts.append(re.sub(r"(^|\s)#.*$", "", line))  # a shell comment is not a command
        else:
            parts.extend(re.findall(r"`([^`]+)`", line))
    return parts


def _mkt_commands(text: str, markdown: bool) -> list[list[str]]:
    """Every `mkt ...` invocation in a file's commands: the words after `mkt` up to the command's end."""
    found = []
    for part in _code(text, markdown):
        for match in re.finditer(r"(?:^|(?<=[\s'\"(;])|(?<=bin/))mkt ((?:--?[a-z][\w-]*|[a-z][\w-]*)[^`\n;|&)]*)", part):
            command = match.group(1).split(" #")[0].replace("'", " ").replace('"', " ")
            found.append(shlex.split(command))
    return found


def _check(words: list[str]) -> str | None:
    """None when `mkt <words>` names a real command and options it has; else what is wrong."""
    command: click.Command = typer.main.get_command(app)
    ctx = click.Context(command)
    params = {opt for p in command.params for opt in p.opts + p.secondary_opts}
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("-"):
            name = word.split("=", 1)[0]
            if name not in params:
                return f"mkt {' '.join(words)}: no option {name}"
            takes_value = next(p for p in (*command.params,) if name in p.opts + p.secondary_opts)
            i += 1 if getattr(takes_value, "is_flag", False) or name in getattr(takes_value, "secondary_opts", []) \
                or "=" in word else 2
            continue
        if hasattr(command, "list_commands"):  # a group (the root loads its groups lazily)
            sub = command.get_command(ctx, word)
            if sub is None:
                return f"mkt {' '.join(words)}: no command {word!r}"
            command = sub
            ctx = click.Context(command)
            params = {opt for p in command.params for opt in p.opts + p.secondary_opts}
        i += 1  # a leaf command's argument
    if hasattr(command, "list_commands"):
        return f"mkt {' '.join(words)}: a group, not a command"
    return None


def _sources() -> dict[str, str]:
    pages = {"docs/deploy.md": (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")}
    for path in sorted(DEPLOY.iterdir()):
        pages[f"examples/deploy/{path.name}"] = path.read_text(encoding="utf-8")
    return pages


def test_compose_file_parses_and_runs_the_promised_processes() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))
    services = compose["services"]
    serves = [s for s in services.values() if s.get("command", [])[:2] == ["mkt", "serve"]]
    workers = [s for s in services.values() if "mkt jobs run" in " ".join(s.get("command", []))]
    assert len(serves) == 2 and len(workers) == 2
    assert services["postgres"]["image"].startswith("postgres:")
    assert services["caddy"]["image"].startswith("caddy:")
    for service in serves + workers:
        assert service["environment"]["MKT_DB"].startswith("postgresql://")
        assert service["depends_on"]["postgres"]["condition"] == "service_healthy"
    caddyfile = (DEPLOY / "Caddyfile").read_text(encoding="utf-8")
    assert "reverse_proxy api1:8000 api2:8000" in caddyfile
    assert (DEPLOY / "Dockerfile").is_file()


def test_every_mkt_command_in_the_deploy_docs_exists() -> None:
    checked, wrong = 0, []
    for source, text in _sources().items():
        if source.endswith("compose.yaml"):  # commands are lists there: join them back into lines
            compose = yaml.safe_load(text)
            text = "\n".join(" ".join(s["command"]) if isinstance(s.get("command"), list) else s.get("command", "")
                             for s in compose["services"].values())
        for words in _mkt_commands(text, source.endswith(".md")):
            checked += 1
            problem = _check(words)
            if problem:
                wrong.append(f"{source}: {problem}")
    assert wrong == []
    assert checked >= 20  # the page and the units name many commands: a parser that finds none is broken


def test_the_checker_catches_a_wrong_command() -> None:
    assert _check(["jobs", "run", "--lease-seconds", "30"]) is None
    assert _check(["--db", "x.db", "db", "status"]) is None
    assert _check(["jobs", "work"]) is not None
    assert _check(["serve", "--threads", "4"]) is not None  # (--workers is real: the job worker threads)
    assert _check(["serve", "--workers", "4"]) is None
    assert _check(["db"]) is not None


def test_units_use_real_commands_and_the_page_links_its_files() -> None:
    page = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    for unit in ("mkt-serve@.service", "mkt-jobs.service", "mkt-jobs.timer", "mkt-backup.service", "mkt.env"):
        assert (DEPLOY / unit).is_file(), unit
        assert unit in page, unit
    serve = (DEPLOY / "mkt-serve@.service").read_text(encoding="utf-8")
    assert "ExecStart=/opt/mkt/venv/bin/mkt serve --host 127.0.0.1 --port %i --no-bootstrap" in serve
    assert "SIZING_TABLE" not in page
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docs/deploy.md" in readme
