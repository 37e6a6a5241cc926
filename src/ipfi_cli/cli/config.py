"""``--config FILE`` and ``--print-config``: a command's options as a TOML file, one table per help panel.

The file mirrors ``--help``, so any option's place in it is found there:

* **Tables**: one per help panel, named by the panel's title in lower case, without its
  parenthesis, its words joined by ``-``: ``[input]``, ``[model]``, ``[served-model]``,
  ``[estimator]``, ``[output]``, ``[checkpoints-and-resume]``, ``[change-detection]``,
  ``[late-labels]``, ``[one-explainer-per-key]``, ``[monitoring]``, ``[comparison]``,
  ``[display-and-errors]``. Options ``--help`` lists under "Options" go in ``[options]``; the
  ``INPUT``/``DATA`` argument is ``input``/``data`` in ``[input]``.
* **Keys**: the option's long name without its leading dashes, as typed on the command line
  (``max-request-rows = 5000``, ``no-live = true``; ``--skip-seen/--no-skip-seen`` is
  ``skip-seen = false``). A repeatable option takes a list (``features = ["age", "salary"]``)
  or one string. Values have the option's type: ``repeats = "3"`` is refused.
* **The command line wins**: an option given as a flag overrides the file (the file fills
  click's ``default_map``, so every option keeps its checks).

A table or key the command does not have, or a value of the wrong type, is a usage error (exit 2)
naming the key and the file. ``--print-config`` prints the options of the command line (with
``--config``'s, and the defaults) as such a file, and exits without running; ``--meta`` records
the same tables (``"config"``, with the seed the run drew). Either one, fed back with
``--config``, runs the same settings (``--config`` also reads a ``--meta`` file's ``"config"``).
Secrets are left out of both, and said so in a comment: ``--header`` values, and URLs with a
password, a query or (``--webhook``, ``--pushgateway``, whose token is often the path) a path.

New options of any panel are keys at once: the tables are read from the command's parameters.
Only the standard library is imported here, and only when a file is read (``ipfi --help`` stays fast).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, Optional, get_args, get_origin

import typer

from ipfi_cli.cli.errors import usage_error
from ipfi_cli.text import quoted

#: a file's name is quoted whole in messages (up to this many characters): the user needs all of it
PATH_LIMIT = 4096


def _named(path: object) -> str:
    return quoted(path, limit=PATH_LIMIT)

PANEL_CONFIG = "Configuration file"
#: the table of options --help lists without a panel, and of the INPUT/DATA argument
DEFAULT_TABLE, ARGUMENT_TABLE = "options", "input"
#: the options of this module: not keys of the file
OWN = ("config", "print_config")
#: options whose URL's path is often a token (as --meta shows them: ipfi_cli.io.urls.shown_url)
TOKEN_PATHS = ("webhook", "pushgateway")

#: the effective options of the command running now (for ``--meta``), set by :func:`configurable`
_running: contextvars.ContextVar[dict[str, dict[str, Any]] | None] = contextvars.ContextVar("config", default=None)


def table_name(panel: str | None) -> str:
    """The config table of a help panel.

    >>> table_name("Served model (--model-url)"), table_name("Display and errors"), table_name(None)
    ('served-model', 'display-and-errors', 'options')
    """
    if not panel:
        return DEFAULT_TABLE
    return re.sub(r"[^a-z0-9]+", "-", re.sub(r"\(.*?\)", "", panel).lower()).strip("-")


@dataclass(frozen=True)
class Key:
    """One option of a command as a config key."""

    table: str
    key: str
    name: str  # the parameter's name (click's ``default_map`` key)
    kind: type  # bool, int, float or str
    many: bool  # a repeatable option: a list


def _kind(param: Any) -> tuple[type, bool]:
    """The value type of a parameter, and whether it repeats (from Typer's annotation, or click's type)."""
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    many = bool(getattr(param, "multiple", False)) or getattr(param, "nargs", 1) != 1
    if annotation is None:  # Typer before 0.29: click's parameter type
        name = getattr(getattr(param, "type", None), "name", "text")
        annotation = {"boolean": bool, "integer": int, "integer range": int, "float": float,
                      "float range": float}.get(name, str)
    if get_origin(annotation) in (list, tuple):
        annotation = get_args(annotation)[0]
    if annotation is bool or getattr(param, "is_flag", False):
        return bool, many
    return (annotation if annotation in (int, float) else str), many


def keys_of(command: Any) -> list[Key]:
    """The config keys of a click command, in ``--help``'s order."""
    found = []
    for param in command.params:
        if param.name is None or param.name in OWN or not param.expose_value:
            continue
        kind, many = _kind(param)
        if param.param_type_name == "argument":
            found.append(Key(ARGUMENT_TABLE, param.name, param.name, kind, many))
            continue
        long = next((o for o in param.opts if o.startswith("--")), param.opts[0])
        found.append(Key(table_name(getattr(param, "rich_help_panel", None)), long.lstrip("-"), param.name, kind,
                         many))
    return found


# -- reading ---------------------------------------------------------------------------------------
def _load(path: str) -> dict[str, Any]:
    """The tables of a TOML file, or the ``"config"`` of a ``--meta`` JSON file."""
    import json
    import tomllib

    try:
        with open(path, "rb") as file:
            raw = file.read()
    except OSError as error:
        raise usage_error(f"cannot read {_named(path)}: {error.strerror or error}", "--config") from None
    if raw.lstrip()[:1] == b"{":  # a --meta file: its "config" (null: an option not given)
        try:
            meta = json.loads(raw)
        except ValueError as error:
            raise usage_error(f"{_named(path)} is not JSON ({error})", "--config") from None
        config = meta.get("config") if isinstance(meta, dict) else None
        if not isinstance(config, dict):
            raise usage_error(f"{_named(path)}: a JSON file must be an ipfi --meta file with a \"config\"",
                              "--config")
        return {table: {key: v for key, v in keys.items() if v is not None} if isinstance(keys, dict) else keys
                for table, keys in config.items()}
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise usage_error(f"{_named(path)} is not TOML: {error}", "--config") from None


_TYPE_NAMES = {bool: "true or false", int: "a whole number", float: "a number", str: "a string"}


def _checked(key: Key, value: Any, where: str) -> Any:
    """``value`` if it has the key's type (a repeatable key's one value becomes a list)."""
    values = value if key.many and isinstance(value, list) else [value]
    for one in values:
        fits = (isinstance(one, bool) if key.kind is bool
                else isinstance(one, (int, float)) and not isinstance(one, bool) if key.kind is float
                else isinstance(one, key.kind) and not isinstance(one, bool))
        if not fits:
            wanted = _TYPE_NAMES[key.kind] + (" or a list of them" if key.many else "")
            got = "a list" if isinstance(one, list) else "a table" if isinstance(one, dict) else quoted(one)
            raise usage_error(f"{where}: expected {wanted}, got {got}", "--config")
    return values if key.many else value


def _close(wrong: str, known: list[str]) -> str:
    import difflib

    match = difflib.get_close_matches(wrong, known, n=1)
    return f" (did you mean {match[0]}?)" if match else ""


def config_defaults(tables: dict[str, Any], command: Any, path: str) -> dict[str, Any]:
    """``default_map`` of a command from a config file's tables; an unknown table or key, or a
    value of the wrong type, is a usage error naming it and the file."""
    keys = keys_of(command)
    by_place = {(k.table, k.key): k for k in keys}
    tables_known = list(dict.fromkeys(k.table for k in keys))
    shown = _named(path)
    defaults: dict[str, Any] = {}
    for table, entries in tables.items():
        if table not in tables_known:
            elsewhere = [k.table for k in keys if k.key == table]
            hint = (f" ({table} is a key of [{elsewhere[0]}])" if elsewhere
                    else _close(table, tables_known))
            raise usage_error(f"{shown}: no table [{quoted(table)[1:-1]}] in ipfi {command.name}'s options{hint}",
                              "--config")
        if not isinstance(entries, dict):
            raise usage_error(f"{shown}: {quoted(table)[1:-1]} must be a table ([{table}])", "--config")
        for name, value in entries.items():
            key = by_place.get((table, name))
            where = f"{shown}: [{table}] {quoted(name)[1:-1]}"
            if key is None:
                elsewhere = [k.table for k in keys if k.key in (name, name.replace("_", "-"))]
                hint = (f" (it is {name.replace('_', '-')} in [{elsewhere[0]}])" if elsewhere
                        else _close(name, [k.key for k in keys if k.table == table]))
                raise usage_error(f"{where}: no such option of ipfi {command.name}{hint}", "--config")
            defaults[key.name] = _checked(key, value, where)
    return defaults


def read_config(ctx: typer.Context, path: Optional[str]) -> Optional[str]:
    """``--config``'s callback (eager): the file's values become the command's defaults, which the
    flags given override."""
    if path is None or ctx.resilient_parsing:
        return path
    defaults = config_defaults(_load(path), ctx.command, path)
    ctx.default_map = {**(ctx.default_map or {}), **defaults}
    ctx.meta["ipfi.config"] = {key.name: (path, key.table, key.key) for key in keys_of(ctx.command)
                               if key.name in defaults}
    return path


def config_hint(error: Any) -> str | None:
    """Where a bad value came from when it came from ``--config``: ``'repeats' in [estimator] of run.toml``
    (for the app's one-line usage errors), else ``None``."""
    ctx, param = getattr(error, "ctx", None), getattr(error, "param", None)
    if ctx is None or param is None or param.name is None:
        return None
    place = ctx.meta.get("ipfi.config", {}).get(param.name)
    source = ctx.get_parameter_source(param.name)
    if place is None or source is None or source.name != "DEFAULT_MAP":
        return None
    path, table, key = place
    return f"'{key}' in [{table}] of {_named(path)}"


# -- writing ---------------------------------------------------------------------------------------
def _secret(key: Key, value: Any) -> str | None:
    """Why a value is left out of a printed config (``None``: it is not a secret)."""
    if key.name == "header":
        return "its values are secrets"
    if not isinstance(value, str) or "://" not in value:
        return None
    if "@" in value:  # user information, whatever a parser makes of a password holding '/', '#' or '?'
        return "the URL has a user or a password"
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value)
    except ValueError:
        return "a URL that may hold a secret"
    if parts.password is not None or parts.query or parts.fragment:
        return "the URL has a password or a query"
    if key.name in TOKEN_PATHS and parts.path not in ("", "/"):
        return "the URL's path is often its token"
    return None


def _plain(value: Any) -> Any:
    """A parameter's value as the config writes it (an Enum's string, a list for a tuple)."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def effective_config(ctx: Any, keep: tuple[str, ...] = ()) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The options of a parsed command as tables (values that are ``None`` left out, but for the keys
    in ``keep``), and the keys left out as secrets, each with its reason."""
    tables: dict[str, dict[str, Any]] = {}
    left_out = []
    for key in keys_of(ctx.command):
        value = _plain(ctx.params.get(key.name))
        if (value is None or value == []) and key.key not in keep:  # not given (a repeatable option: no value)
            continue
        why = next(filter(None, (_secret(key, v) for v in value)), None) if isinstance(value, list) \
            else _secret(key, value)
        if why:
            left_out.append(f"[{key.table}] {key.key}: {why}")
            continue
        if isinstance(value, str) and any("\ud800" <= c <= "\udfff" for c in value):
            left_out.append(f"[{key.table}] {key.key}: not valid UTF-8")
            continue
        tables.setdefault(key.table, {})[key.key] = value
    return tables, left_out


def _toml_value(value: Any) -> str:
    import json

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)  # a float's repr reads back as the same float
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False).replace("\x7f", "\\u007f")


def config_text(command: str, tables: dict[str, dict[str, Any]], left_out: list[str]) -> str:
    """The TOML of a config (``--print-config``)."""
    lines = [f"# ipfi {command}: the options of this run; run it again with: ipfi {command} --config FILE"]
    lines += [f"# left out, {why}" for why in left_out]
    if not any("seed" in keys for keys in tables.values()):
        lines.append("# seed not given: each run draws one (said with --verbose, and in --meta's config)")
    for table, keys in tables.items():
        lines += ["", f"[{table}]", *(f"{key} = {_toml_value(v)}" for key, v in keys.items())]
    return "\n".join(lines) + "\n"


def running_config() -> dict[str, dict[str, Any]] | None:
    """The effective options of the command running now (seed kept, ``None`` when not given),
    for ``--meta``; ``None`` outside a configurable command."""
    return _running.get()


# -- the options and the command wrapper ---------------------------------------------------------
def _read_config_callback(ctx: typer.Context, value: Optional[str]) -> Optional[str]:
    return read_config(ctx, value)


ConfigOpt = Annotated[Optional[str], typer.Option(
    "--config", is_eager=True, callback=_read_config_callback, help="Read the options from this TOML file: one "
    "table per help panel ([input], [model], [estimator], [served-model], ...: the panel's title in lower case, "
    "words joined by '-'; [options] for the options listed under Options), keys as the long options without "
    "their dashes (repeats = 3, max-request-rows = 500). Options given as flags override it. Also reads the "
    "\"config\" of a --meta file.", rich_help_panel=PANEL_CONFIG, show_default=False, metavar="FILE")]
PrintConfigOpt = Annotated[bool, typer.Option(
    "--print-config", help="Print the options of this command line (with --config's and the defaults) as a "
    "--config file on stdout, and exit without running. Header values and URLs with a password or token are "
    "left out (said in a comment).", rich_help_panel=PANEL_CONFIG)]


def _added_parameters() -> Iterator[inspect.Parameter]:
    kind = inspect.Parameter.KEYWORD_ONLY
    yield inspect.Parameter("config", kind, default=None, annotation=ConfigOpt)
    yield inspect.Parameter("print_config", kind, default=False, annotation=PrintConfigOpt)
    yield inspect.Parameter("ipfi_context", kind, annotation=typer.Context)


def configurable(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` as a command with ``--config`` and ``--print-config`` (the Typer signature grows by
    the two; the function itself receives only its own options)."""
    signature = inspect.signature(function, eval_str=True)

    @functools.wraps(function)
    def command(*args: Any, config: str | None = None, print_config: bool = False,
                ipfi_context: Any = None, **options: Any) -> Any:
        if print_config:
            tables, left_out = effective_config(ipfi_context)
            typer.echo(config_text(ipfi_context.command.name, tables, left_out), nl=False)
            raise typer.Exit(0)
        tables, _ = effective_config(ipfi_context, keep=("seed",))
        token = _running.set(tables)
        try:
            return function(*args, **options)
        finally:
            _running.reset(token)

    added = list(_added_parameters())
    command.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*signature.parameters.values(), *added])
    command.__annotations__ = {**{name: p.annotation for name, p in signature.parameters.items()},
                               **{p.name: p.annotation for p in added},
                               "return": signature.return_annotation}
    return command
