"""The "Input" and "Display and errors" panels of ``ipfi explain``: the shared reading options of
:mod:`ipfi_cli.cli.options`, ``--batch-size`` and ``--no-live``; their values are the
:class:`~ipfi_cli.run.plan.InputSpec` (:func:`~ipfi_cli.cli.options.input_spec`),
:class:`~ipfi_cli.run.settings.ReadSpec` (:func:`read_spec`) and
:class:`~ipfi_cli.run.settings.Display` (:func:`display`)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ipfi_cli.cli.errors import usage_error
from ipfi_cli.cli.options import (
    PANEL_DISPLAY,
    PANEL_INPUT,
    DebugOpt,
    DecimalOpt,
    DelimiterOpt,
    FormatOpt,
    InputArg,
    NaValuesOpt,
    NoDefaultNaOpt,
    OnBadRowOpt,
    QuietOpt,
    SkipInitialSpaceOpt,
    TextOpt,
    VerboseOpt,
    value,
)
from ipfi_cli.cli.signature import option
from ipfi_cli.run.settings import Display, ReadSpec

BatchSizeOpt = Annotated[int, typer.Option(
    "--batch-size", min=1, help="At most this many rows per model call for a static model, and per "
    "micro-batch (rows already waiting are batched; a slow stream is never held back; with --learn the "
    "model still learns row by row).", rich_help_panel=PANEL_INPUT)]
NoLiveOpt = Annotated[bool, typer.Option(
    "--no-live", help="No live table on stderr; a summary table at the end instead.", rich_help_panel=PANEL_DISPLAY)]

INPUT_ARGUMENT = [option("input", InputArg, None)]
INPUT_OPTIONS = [
    option("input_format", FormatOpt, None), option("na_values", NaValuesOpt, None),
    option("no_default_na", NoDefaultNaOpt, False), option("delimiter", DelimiterOpt, None),
    option("decimal", DecimalOpt, None), option("text", TextOpt, None),
    option("skip_initial_space", SkipInitialSpaceOpt, False), option("batch_size", BatchSizeOpt, 1000)]
DISPLAY_OPTIONS = [option("on_bad_row", OnBadRowOpt, "fail"), option("verbose", VerboseOpt, False),
                   option("quiet", QuietOpt, False), option("no_live", NoLiveOpt, False),
                   option("debug", DebugOpt, False)]


def read_spec(batch_size: int, on_bad_row: Any) -> ReadSpec:
    """How the rows are taken in: micro-batches of at most ``batch_size``, and what a bad row does."""
    return ReadSpec(batch_size=batch_size, on_bad_row=value(on_bad_row))


def display(verbose: bool, quiet: bool, no_live: bool, debug: bool) -> Display:
    """What the run says on stderr; ``--quiet`` with ``--verbose`` is a usage error."""
    if quiet and verbose:
        raise usage_error("use either --quiet or --verbose, not both", "--quiet")
    return Display(verbose=verbose, quiet=quiet, live=not no_live, debug=debug)
