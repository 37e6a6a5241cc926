"""The "Output" panel's options of ``ipfi explain`` beside the shared ``--output``/``--output-format``:
how often a trace record is written, its confidence bounds, and the ``--meta`` sidecar."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from ipfi_cli.cli.options import PANEL_OUTPUT, BoundsMethod, OutputFormatOpt, OutputOpt, value
from ipfi_cli.cli.signature import option
from ipfi_cli.run.settings import OutputSpec

EveryOpt = Annotated[int, typer.Option(
        "--every", "-e", min=1, help="Write a record every N explained rows (rows skipped as bad are not counted; the "
        "last row is always "
        "written).",
        rich_help_panel=PANEL_OUTPUT)]
BoundsOpt = Annotated[bool, typer.Option(
        "--bounds", help="Add a <feature>_bound column per feature: the confidence half-width at level "
        "--delta, by --bounds-method.", rich_help_panel=PANEL_OUTPUT)]
BoundsMethodOpt = Annotated[BoundsMethod, typer.Option(
        "--bounds-method", help="How bounds are computed: chebyshev (the paper's; assumes independent rows, "
        "no distribution; conservative), normal (independent rows, normal quantile; too narrow when reservoir "
        "rows are reused for long) or realisations (calibrated: counts each row as explained row and as the "
        "replacement drawn for later rows, and the spread of the M realisations; needs --repeats 2 or more).",
        rich_help_panel=PANEL_OUTPUT)]
DeltaOpt = Annotated[float, typer.Option(
        "--delta", help="Bounds hold with probability 1 - delta (approximately; see the docs); from 1e-10. "
        "Bounds need --alpha at most 0.5.",
        rich_help_panel=PANEL_OUTPUT)]
MetaOpt = Annotated[Optional[str], typer.Option(
        "--meta", help="Write a JSON sidecar here at the end: seed, all settings, library versions, rows "
        "seen, final importances.", rich_help_panel=PANEL_OUTPUT, show_default=False, metavar="FILE")]


OUTPUT_OPTIONS = [option("output", OutputOpt, None), option("output_format", OutputFormatOpt, None),
                  option("every", EveryOpt, 1), option("bounds", BoundsOpt, False),
                  option("bounds_method", BoundsMethodOpt, "chebyshev"), option("delta", DeltaOpt, 0.05),
                  option("meta", MetaOpt, None)]


def output_spec(output: str | None, output_format: Any, every: int, bounds: bool, bounds_method: Any, delta: float,
                meta: str | None) -> OutputSpec:
    """The panel as one value (the bounds' options are checked with the estimator's:
    :func:`~ipfi_cli.cli.explain_checks.check_bounds_options`)."""
    return OutputSpec(path=output, format=value(output_format), every=every, bounds=bounds, delta=delta,
                      bounds_method=value(bounds_method), meta=meta)
