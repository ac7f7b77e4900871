"""Output and errors for every command.

`emit(value, as_json, human)` prints exactly the API's `data` value as JSON with
`--json`, else whatever `human(value)` renders for a person. `table` builds the tables
(cli/listing.py: fitted to the terminal, ids never cut); the list commands' `--wide` and
`-q` (`WideOption`, `QuietOption`) reach `emit`. `MktGroup` turns an MktError from any
command into its message on stderr and exit code 1.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from marketing_cli.cli.listing import WIDE_OFFERED, Listing
from marketing_cli.errors import MktError
from marketing_cli.storage.encoding import dumps

JsonOption = Annotated[bool, typer.Option("--json", help="Print the API's JSON `data` value instead of a table.")]


# rich is imported on first use: `--json` output never needs it, and importing
# rich.console costs a sixth of a command's start-up.
@cache
def _consoles() -> tuple[Any, Any]:
    from rich.console import Console

    return Console(highlight=False), Console(stderr=True, highlight=False)


def __getattr__(name: str) -> Any:
    """`from marketing_cli.cli.output import console, err_console` builds them on first import."""
    if name == "console":
        return _consoles()[0]
    if name == "err_console":
        return _consoles()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class MktGroup(TyperGroup):
    """The root group.

    - Every MktError from any command becomes its message (and its detail, if any) on
      stderr and exit code 1.
    - Resource sub-apps (`lazy`: command name -> (module, help)) are imported and turned into click
      groups only when a command of theirs runs. Typer converts every command's signature
      at start-up otherwise, which costs about 1.5 ms per command on every invocation; the
      root `--help` lists them from their help text alone.
    """

    lazy: dict[str, tuple[str, str]] = {}
    _listing = False

    def main(self, args: Sequence[str] | None = None, *a: Any, standalone_mode: bool = True, **kw: Any) -> Any:
        from marketing_cli.kernel.inputs import check_text

        args = list(sys.argv[1:] if args is None else args)
        try:
            for arg in args:
                check_text(arg)
        except MktError as exc:
            _consoles()[1].print(exc.message, markup=False, soft_wrap=True)
            sys.exit(2)
        args = global_options_first(args)
        if not standalone_mode:
            return super().main(args, *a, standalone_mode=False, **kw)
        # typer's standalone mode prints a usage error as the usage text and a boxed message;
        # run it non-standalone and print one line instead (docs/cli.md, "Conventions").
        try:
            code = super().main(args, *a, standalone_mode=False, **kw)
        except typer.TyperException as exc:  # a usage error: unknown option, missing argument, bad value
            if exc.format_message().strip():  # (a group run bare has printed its help and says nothing more)
                sys.stderr.write(one_line_usage_error(exc) + "\n")
            sys.exit(exc.exit_code)
        except typer.Abort:
            sys.stderr.write("Aborted.\n")
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except MktError as exc:
            _consoles()[1].print(exc.message, markup=False, soft_wrap=True)
            if exc.detail:
                _consoles()[1].print(exc.detail, markup=False, soft_wrap=True)
            raise typer.Exit(1) from None
        except OverflowError:  # a number option beyond SQLite's 64 bits
            _consoles()[1].print("A number in the command is out of range.", markup=False)
            raise typer.Exit(1) from None
        except Exception as exc:  # a read-only database, a full disk: one line, not a traceback
            mapped = _storage_error(exc)
            if mapped is None:
                raise
            _consoles()[1].print(mapped.message, markup=False, soft_wrap=True)
            raise typer.Exit(1) from None

    def list_commands(self, ctx: Any) -> list[str]:
        return [*super().list_commands(ctx), *(name for name in self.lazy if name not in self.commands)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None or cmd_name not in self.lazy:
            return command
        module_name, help_text = self.lazy[cmd_name]
        if self._listing:  # the root --help needs only the name and the help text
            return TyperGroup(name=cmd_name, help=help_text)
        import importlib

        sub_app = importlib.import_module(module_name).app
        group = typer.main.get_group(sub_app)
        group.name = cmd_name
        self.commands[cmd_name] = group
        return group

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


def one_line_usage_error(error: Any) -> str:
    """`mkt tags create: Missing argument 'name'. See `mkt tags create --help`.`"""
    message = " ".join(error.format_message().split())
    if message and message[-1] not in ".!?":
        message += "."
    ctx = getattr(error, "ctx", None)
    return f"{ctx.command_path}: {message} See `{ctx.command_path} --help`." if ctx is not None else message


ROOT_VALUE_OPTIONS = ("--db", "--workspace")


def global_options_first(args: list[str]) -> list[str]:
    """`mkt tags list --db X --workspace 2` reads as `mkt --db X --workspace 2 tags list`, and
    `mkt --json tags list` as `mkt tags list --json`: the global options and `--json` are
    accepted before or after the subcommand. Nothing after `--` moves."""
    end = args.index("--") if "--" in args else len(args)
    head, tail = args[:end], args[end:]
    moved: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(head):
        arg = head[i]
        if arg in ROOT_VALUE_OPTIONS and i + 1 < len(head):
            moved += head[i:i + 2]
            i += 2
            continue
        if arg.split("=", 1)[0] in ROOT_VALUE_OPTIONS and "=" in arg:
            moved.append(arg)
        else:
            rest.append(arg)
        i += 1
    # --json before the first word that is not an option (the subcommand) belongs to the command
    first_word = next((n for n, arg in enumerate(rest) if not arg.startswith("-")), len(rest))
    if "--json" in rest[:first_word] and first_word < len(rest):
        rest = [arg for n, arg in enumerate(rest) if not (n < first_word and arg == "--json")] + ["--json"]
    return moved + rest + tail


def _storage_error(exc: Exception) -> MktError | None:
    import sqlite3

    from marketing_cli.storage.db import storage_error

    # DatabaseError: a retired SQLite database's triggers refuse writes with RAISE(ABORT), an IntegrityError
    return storage_error(exc) if isinstance(exc, sqlite3.DatabaseError) else None


WideOption = Annotated[bool, typer.Option("--wide", help="Show every column, however wide the table gets.")]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="Print only the ids, one per line.")]


def emit(value: Any, as_json: bool, human: Callable[[Any], Any] | None = None, *,
         wide: bool | None = None, quiet: bool = False) -> None:
    """Print `value`: its JSON with `as_json`, else what `human(value)` renders.

    `wide` and `quiet` are the list commands' `--wide` and `-q` (they change only the human
    output): a `Listing` then shows every column at its full width, or only its key column.
    A command without `--wide` leaves `wide` None, and its tables' note of hidden columns then
    names a wider terminal, not an option the command would refuse (listing.WIDE_OFFERED).
    """
    token = WIDE_OFFERED.set(wide is not None)
    try:
        _emit(value, as_json, human, wide=bool(wide), quiet=quiet)
    finally:
        WIDE_OFFERED.reset(token)


def _emit(value: Any, as_json: bool, human: Callable[[Any], Any] | None, *, wide: bool, quiet: bool) -> None:
    if as_json:
        sys.stdout.write(dumps(value, pretty=True) + "\n")
        return
    rendered = human(value) if human else None
    if rendered is None:
        _consoles()[0].print_json(dumps(value, pretty=True))
        return
    if isinstance(rendered, Listing) and quiet:
        sys.stdout.write("".join(key + "\n" for key in rendered.key_values()))
        return
    if isinstance(rendered, Listing) and wide:
        from rich.console import Console

        rendered.wide = True
        console = _consoles()[0]
        Console(highlight=False, width=max(console.width, rendered.full_width())).print(rendered)
        return
    _consoles()[0].print(rendered)


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None, *,
          key: int = 0, droppable: bool = True, hint: str = "--wide", drop: Sequence[str] = ()) -> Listing:
    """A table that fits the terminal without cutting an id, a date or a header (see `Listing`)."""
    return Listing(columns, rows, title, key=key, droppable=droppable, hint=hint, drop=drop)


def pairs(mapping: dict[str, Any], title: str | None = None) -> Any:
    """A two-column key/value table."""
    from rich.table import Table

    t = Table(title=title, show_header=False, box=None, padding=(0, 2))
    t.add_column(style="bold", no_wrap=True)
    t.add_column(overflow="fold")  # a long value (a URL, JSON) folds: nothing of it is cut
    for key, value in mapping.items():
        t.add_row(key, "" if value is None else str(value))
    return t


def usage_error(message: str) -> typer.Exit:
    """A usage error: one line on stderr, exit code 2 (raise what this returns)."""
    _consoles()[1].print(message, markup=False, soft_wrap=True)
    return typer.Exit(2)


def json_option(text: str | None, option: str, *, member: str | None = None, expect: type | None = None) -> Any:
    """The value of a JSON option: inline JSON, `-` (stdin) or `@FILE`; None when not given.

    Text that is not JSON (or not of the `expect`ed type) is a usage error: one line on
    stderr naming the option, exit code 2. A value the API would refuse (text that is not
    valid Unicode) is refused with the API's message, naming the same member: `member` is
    the request member the option fills (None: the option is the whole body).
    """
    if text is None:
        return None
    from marketing_cli.kernel.inputs import check_unicode, parse_json

    if text == "-":
        text = sys.stdin.read()
    elif text.startswith("@"):
        from pathlib import Path

        try:
            text = Path(text[1:]).read_text(encoding="utf-8", errors="surrogateescape")
        except OSError as exc:
            raise usage_error(f"{option}: cannot read {text[1:]}: {exc.strerror}.") from None
    try:
        value = parse_json(text)
    except (ValueError, RecursionError) as exc:
        raise usage_error(f"{option} is not valid JSON: {exc}.") from None
    check_unicode(value, member or "body")
    names = {dict: "a JSON object", list: "a JSON array"}
    if expect is not None and not isinstance(value, expect):
        raise usage_error(f"{option} must be {names[expect]}.")
    return value
