"""The ``ipfi`` Typer application and its console-script entry point :func:`main`.

Adding a command is one line at the bottom: ``add_command(module.function)``. The
command's docstring is its help; shared options and helpers live in
:mod:`ipfi_cli.cli.options`. Command modules import only Typer and the standard library
at module level (heavy libraries inside the command body), so ``ipfi --help`` stays fast.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer

from ipfi_cli import __version__
from ipfi_cli.cli.errors import EXIT_CODES_HELP
from ipfi_cli.cli.options import PICKLE_WARNING

app = typer.Typer(
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


def add_command(function: Callable[..., Any], name: str | None = None) -> None:
    """Register a command; its docstring is the help, the exit codes are the epilog."""
    app.command(name, epilog=EXIT_CODES_HELP)(function)


# -- commands: one line each -----------------------------------------------------------------------
from ipfi_cli.cli import explain as _explain  # noqa: E402

add_command(_explain.explain)
from ipfi_cli.cli import batch as _batch  # noqa: E402
from ipfi_cli.cli import compare as _compare  # noqa: E402
from ipfi_cli.cli import merge as _merge  # noqa: E402
from ipfi_cli.cli import plot as _plot  # noqa: E402

add_command(_batch.batch)
add_command(_compare.compare)
add_command(_plot.plot)
add_command(_merge.merge)


#: commands that run models: they run with a fixed string-hash seed (see :func:`fixed_hash_seed`)
MODEL_COMMANDS = ("explain", "batch", "compare")


def fixed_hash_seed(argv: list[str]) -> None:
    """Run a model command under ``PYTHONHASHSEED=0`` (re-executing this process once).

    Python randomises string hashing per process, so the iteration order of a set of
    strings, such as the columns of river's ``compose.Select``, differs from run to run, and
    with it the order of floating-point sums inside the model: the last digits of the
    numbers would change between processes with the same ``--seed``. A fixed hash seed
    makes every run, and every resume, byte-identical. An explicit ``PYTHONHASHSEED``
    number is kept (the user chose it); help and ``plot`` need no model and start at once.
    """
    current = os.environ.get("PYTHONHASHSEED", "random")
    if current != "random" or os.name == "nt" or len(argv) < 2 or argv[1] not in MODEL_COMMANDS \
            or "--help" in argv or "-h" in argv:
        return
    os.environ["PYTHONHASHSEED"] = "0"
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, [sys.executable, "-m", "ipfi_cli", *argv[1:]])
    except OSError:  # cannot re-execute (no interpreter path): run as is
        del os.environ["PYTHONHASHSEED"]


def main() -> None:
    """Console-script entry point (``ipfi``)."""
    fixed_hash_seed(sys.argv)
    app(prog_name="ipfi")
