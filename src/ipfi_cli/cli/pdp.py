"""``ipfi pdp``: incremental partial-dependence curves of a static model on a stream."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ipfi_cli.cli.errors import EXIT_INTERRUPTED, reporting, say, usage_error
from ipfi_cli.cli.explainer_options import SmoothingOpt
from ipfi_cli.cli.model_options import ModelOpt
from ipfi_cli.cli.options import (
    PANEL_ESTIMATOR,
    PANEL_MODEL,
    PANEL_OUTPUT,
    DebugOpt,
    DecimalOpt,
    DelimiterOpt,
    FormatOpt,
    InputArg,
    NaValuesOpt,
    NoDefaultNaOpt,
    OnBadRowOpt,
    OutputFormatOpt,
    OutputOpt,
    QuietOpt,
    SkipInitialSpaceOpt,
    TextOpt,
    ThreadsOpt,
    TrustOpt,
    check_outputs,
    input_spec,
    split_names,
    value,
)
from ipfi_cli.cli.ui import TerminalReporter
from ipfi_cli.core.params import DEFAULT_ALPHA
from ipfi_cli.io.targets import data_files
from ipfi_cli.io.writers import write_records
from ipfi_cli.run.settings import ModelSpec, ReadSpec


def pdp(
    input: InputArg = None,
    model: ModelOpt = None,
    feature: Annotated[Optional[list[str]], typer.Option(
        "--feature", help="A numeric model input whose curve to track (comma-separated, repeatable).",
        rich_help_panel=PANEL_ESTIMATOR, show_default=False, metavar="COL")] = None,
    target: Annotated[Optional[str], typer.Option(
        "--target", "-t", help="A label column to leave out of the model's inputs (the curves need no label).",
        rich_help_panel=PANEL_MODEL, show_default=False, metavar="COL")] = None,
    target_class: Annotated[Optional[str], typer.Option(
        "--class", help="For a classifier (required): the curve is the probability of this class, found as labels "
        "find it (1 finds 1.0, dole finds Dole). A regressor's curve is its predicted value.",
        rich_help_panel=PANEL_MODEL, show_default=False, metavar="LABEL")] = None,
    drop: Annotated[Optional[list[str]], typer.Option(
        "--drop", help="Input columns the model does not take, such as ids and dates (comma-separated, repeatable). "
        "A model that names its inputs gets just those anyway.", rich_help_panel=PANEL_MODEL, show_default=False,
        metavar="COLS")] = None,
    trust: TrustOpt = None,
    threads: ThreadsOpt = None,
    grid_size: Annotated[int, typer.Option(
        "--grid-size", min=2, help="Points per curve, evenly spaced between the feature's 5 % and 95 % quantiles "
        "in the warm-up rows; the grid then stays.", rich_help_panel=PANEL_ESTIMATOR)] = 10,
    grid: Annotated[Optional[list[str]], typer.Option(
        "--grid", help="Fixed grid values for a feature, FEATURE=V1,V2,... (repeatable; every fixed grid has the "
        "same length, which is then the grid size) instead of one from the warm-up rows' quantiles.",
        rich_help_panel=PANEL_ESTIMATOR, show_default=False,
        metavar="FEATURE=VALUES")] = None,
    alpha: Annotated[float, typer.Option(
        "--alpha", "-a", help="Smoothing: the weight of the newest row, in (0, 1].",
        rich_help_panel=PANEL_ESTIMATOR)] = DEFAULT_ALPHA,
    smoothing: SmoothingOpt = "exponential",
    warm_up: Annotated[int, typer.Option(
        "--warm-up", min=0, help="Rows that only set the grid (their 5 % and 95 % quantiles) before the first "
        "curve point; at least 2 for a feature without --grid.",
        rich_help_panel=PANEL_ESTIMATOR)] = 20,
    every: Annotated[int, typer.Option(
        "--every", "-e", min=1, help="Write the curves every N rows (and after the last row).",
        rich_help_panel=PANEL_OUTPUT)] = 1000,
    input_format: FormatOpt = None,
    na_values: NaValuesOpt = None,
    no_default_na: NoDefaultNaOpt = False,
    delimiter: DelimiterOpt = None,
    decimal: DecimalOpt = None,
    text: TextOpt = None,
    skip_initial_space: SkipInitialSpaceOpt = False,
    output: OutputOpt = None,
    output_format: OutputFormatOpt = None,
    on_bad_row: OnBadRowOpt = "fail",
    quiet: QuietOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Incremental partial dependence (iPDP) of a static model.

    Per chosen feature: the model's mean prediction as the feature moves over a grid, folded in
    row by row. Records (long format: row, feature, grid, pd) go to stdout as CSV or JSONL, every
    --every rows and after the last row (also when a bad row stops the run). No label is needed.
    Notes and warnings (the model's versions, how its columns were matched) go to stderr; --quiet
    leaves only errors.
    """
    features = split_names(feature)
    if not features:
        raise usage_error("name at least one feature", "--feature")
    if not 0.0 < alpha <= 1.0:
        raise usage_error(f"must be in (0, 1], got {alpha}", "--alpha")
    if model is None:
        raise usage_error("give the model", "--model")
    grids = parse_grids(grid, features)
    if warm_up < 2 and any(f not in (grids or {}) for f in features):
        raise usage_error(f"a feature's grid comes from the warm-up rows' quantiles: give at least 2, got {warm_up} "
                          "(or the grid, with --grid)", "--warm-up")
    check_outputs({"--output": output}, {"INPUT": data_files(input), "--model": model})
    with reporting(debug):
        from ipfi_cli.run.pdp import PDP_FIELDS, Curves, PDPSettings, pdp_records

        settings = PDPSettings(
            model=ModelSpec(model, trust=split_names(trust)),
            inputs=input_spec(input, input_format, na_values, no_default_na, delimiter, text, decimal,
                              skip_initial_space),
            curves=Curves(features=features, target_class=target_class, grid_size=grid_size, grid=grids, alpha=alpha,
                          smoothing=value(smoothing), warm_up=warm_up),
            target=target, drop=split_names(drop), every=every, reading=ReadSpec(on_bad_row=value(on_bad_row)))
        reporter = TerminalReporter(live=False, quiet=quiet)
        try:
            write_records(output, value(output_format), PDP_FIELDS, pdp_records(settings, say=reporter.message),
                          keep_on_error=True)
        except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM
            rows = getattr(stop, "rows", None)
            say("interrupted" + (f" after {rows:,} rows" if rows is not None else "")
                + "; every record written is complete")
            raise typer.Exit(EXIT_INTERRUPTED) from None


def parse_grids(specs: list[str] | None, features: list[str]) -> dict[str, list[float]] | None:
    """``["age=20,40,60"]`` -> ``{"age": [20.0, 40.0, 60.0]}``: finite, increasing, at least two, one
    length for all, for features given with --feature; anything else is a usage error.

    >>> parse_grids(["age = 20, 40,60"], ["age", "bmi"])
    {'age': [20.0, 40.0, 60.0]}
    """
    import math

    if not specs:
        return None
    grids: dict[str, list[float]] = {}
    for spec in specs:
        name, sep, text = spec.partition("=")
        name = name.strip()
        if not sep or not name:
            raise usage_error(f"expected FEATURE=V1,V2,..., got {spec!r}", "--grid")
        if name not in features:
            raise usage_error(f"{name!r} is not a --feature ({', '.join(features)})", "--grid")
        if name in grids:
            raise usage_error(f"{name!r} is given twice", "--grid")
        try:
            values = [float(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise usage_error(f"expected numbers after {name}=, got {text!r}", "--grid") from None
        if len(values) < 2 or not all(map(math.isfinite, values)) or any(b <= a for a, b in zip(values, values[1:])):
            raise usage_error(f"{name}: give at least two finite values in increasing order, got {text!r}", "--grid")
        grids[name] = values
    lengths = {len(v) for v in grids.values()}
    if len(lengths) > 1:
        raise usage_error("every fixed grid must have the same number of values (" +
                          ", ".join(f"{k}: {len(v)}" for k, v in grids.items()) + ")", "--grid")
    return grids

