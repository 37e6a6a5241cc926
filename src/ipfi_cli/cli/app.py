"""The ``ipfi`` Typer application and its console-script entry point :func:`main`.

Adding a command is one line at the bottom: ``add_command(module.function)``. The
command's docstring is its help; shared options and helpers live in
:mod:`ipfi_cli.cli.options`. Command modules import only Typer and the standard library
at module level (heavy libraries inside the command body), so ``ipfi --help`` stays fast.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Annotated, Any, cast

import typer
from typer.core import TyperGroup

from ipfi_cli import __version__
from ipfi_cli.cli.errors import EXIT_CODES_HELP, EXIT_INTERRUPTED, interrupted, interruption_said
from ipfi_cli.cli.options import PICKLE_WARNING
from ipfi_cli.run.signals import hold_until_exit


def _no_type_for_flags() -> None:
    """Help panels show no type for a flag (Typer shows ``<bool>`` beside ``--learn``, which takes no
    value); every other option keeps its ``<int>``/``<float>``/... type."""
    from typer.core import TyperOption

    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is None:  # Typer before 0.27 shows make_metavar(), skipping only the text BOOLEAN
        make = getattr(TyperOption, "make_metavar")  # noqa: B009 - not in newer Typer's stubs
        if getattr(make, "_ipfi_flags", False):
            return

        def make_metavar(self: Any, *args: Any, **kwargs: Any) -> str:
            return "BOOLEAN" if getattr(self, "is_flag", False) else make(self, *args, **kwargs)
        make_metavar._ipfi_flags = True  # type: ignore[attr-defined]
        setattr(TyperOption, "make_metavar", make_metavar)  # noqa: B010
        return
    if getattr(shown, "_ipfi_flags", False):
        return

    def display_type_rich(self: Any, ctx: Any) -> str | None:
        return None if getattr(self, "is_flag", False) else shown(self, ctx)
    display_type_rich._ipfi_flags = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_no_type_for_flags()


def _one_line(error: Any) -> str:
    """A usage error as one line: its message (pydantic's ``Value error,`` prefix dropped, which
    newer Typer puts before a bad choice) and where to read the options."""
    from ipfi_cli.cli.config import config_hint

    hint = config_hint(error)  # a bad value from --config: named by its key and file
    if hint is not None and hasattr(error, "param_hint"):
        error.param_hint = hint
    message = error.format_message().replace("Value error, ", "")
    ctx = getattr(error, "ctx", None)
    where = f"; see '{ctx.command_path} -h'" if ctx is not None else ""
    return " ".join(message.split()).rstrip(".") + where


class _OneLineUsageErrors(TyperGroup):
    """The ``ipfi`` group: a usage error is one ``ipfi: usage error: ...`` line on stderr and exit 2
    (Typer draws a usage line, a hint and a boxed message), so scripts can grep and log it."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True, windows_expand_args: bool = True,
             **extra: Any) -> Any:
        def run_group() -> Any:
            return super(_OneLineUsageErrors, self).main(args, prog_name, complete_var, False, windows_expand_args,
                                                         **extra)

        if not standalone_mode:
            return run_group()
        # Typer's own click (vendored in Typer 0.26+): its classes are on BadParameter's line
        usage_error, click_exception = (
            cast("type[Exception]", next(kind for kind in typer.BadParameter.__mro__ if kind.__name__ == name))
            for name in ("UsageError", "ClickException"))
        try:
            result = run_group()
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM outside Typer's own catch
            result = EXIT_INTERRUPTED
        except usage_error as error:
            if type(error).__name__ == "NoArgsIsHelpError":  # the help was shown already
                sys.exit(getattr(error, "exit_code", 2))
            from ipfi_cli.cli.errors import say

            say(_one_line(error), "usage error")
            sys.exit(getattr(error, "exit_code", 2))
        except click_exception as error:
            error.show()  # type: ignore[attr-defined]
            sys.exit(getattr(error, "exit_code", 1))
        except typer.Abort:
            print("Aborted!", file=sys.stderr)
            sys.exit(1)
        hold_until_exit()  # the command is over: a Ctrl-C now changes nothing
        if result == EXIT_INTERRUPTED and not interruption_said():
            # Typer turns a Ctrl-C or SIGTERM that no command caught (while parsing the options) into
            # exit 130 with no word
            interrupted("interrupted")
        sys.exit(result if isinstance(result, int) else 0)


app = typer.Typer(
    cls=_OneLineUsageErrors,
    name="ipfi",
    help="Incremental permutation feature importance (iPFI) for models on data streams.\n\n"
         "Run 'ipfi COMMAND --help' for a command's options. " + PICKLE_WARNING,
    epilog=EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"ipfi {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    # a plain bool flag: Typer then skips its (pydantic-based) coercion, keeping --help fast
    version: Annotated[bool, typer.Option(
        "--version", help="Print the version and exit.", callback=_version, is_eager=True)] = False,
) -> None:
    """Incremental permutation feature importance (iPFI) for models on data streams."""


def add_command(function: Callable[..., Any], name: str | None = None, *, config: bool = False) -> None:
    """Register a command; its docstring is the help, the exit codes are the epilog. With ``config``
    it also takes ``--config FILE`` and ``--print-config`` (:mod:`ipfi_cli.cli.config`)."""
    if config:
        from ipfi_cli.cli.config import configurable

        function = configurable(function)
    app.command(name, epilog=EXIT_CODES_HELP)(function)


# -- commands: one line each -----------------------------------------------------------------------
from ipfi_cli.cli import explain as _explain  # noqa: E402

add_command(_explain.explain, config=True)
from ipfi_cli.cli import batch as _batch  # noqa: E402
from ipfi_cli.cli import compare as _compare  # noqa: E402
from ipfi_cli.cli import merge as _merge  # noqa: E402
from ipfi_cli.cli import plot as _plot  # noqa: E402

add_command(_batch.batch, config=True)
add_command(_compare.compare, config=True)
from ipfi_cli.cli import pdp as _pdp  # noqa: E402

add_command(_plot.plot)
add_command(_pdp.pdp, config=True)
add_command(_merge.merge)


def fixed_hash_seed(argv: list[str]) -> None:
    """Run a model command under ``PYTHONHASHSEED=6640`` when its model may depend on string
    hashing (see :mod:`ipfi_cli.cli.hash_seed`)."""
    from ipfi_cli.cli.hash_seed import fix_hash_seed

    fix_hash_seed(argv)


def main() -> None:
    """Console-script entry point (``ipfi``)."""
    fixed_hash_seed(sys.argv)
    app(prog_name="ipfi")
