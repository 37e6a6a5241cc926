"""``ipfi compare``: iPFI against batch PFI (static model) or interval PFI (``--learn``).

* Static model (the paper's Experiment A): the rows are streamed in ``--orderings``
  random orders with each ``--sampling`` strategy; each run's final iPFI estimate is
  compared with batch PFI of the same model on the same rows, computed once.
* Learning model (Experiment B, ``--learn``): one prequential pass; iPFI explains each
  row before the model learns it, and interval PFI is batch PFI of the model as it is
  at the end of every ``--interval`` rows; each window is compared with iPFI at its end,
  and with ``--drift-at`` the errors are summarised before and after the drift.

Error: both vectors clipped at 0 and divided by their sum (``--normalisation sum``, the
paper's evaluation code), then the sum of the absolute differences (0 to 2).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from ipfi_cli.cli.errors import reporting, usage_error
from ipfi_cli.cli.file_options import (
    DATA_ARGUMENT,
    END_MONITOR_OPTIONS,
    FILE_DISPLAY_OPTIONS,
    FILE_INPUT_OPTIONS,
    FILE_MODEL_OPTIONS,
    SELECTION_OPTIONS,
    THREADS_OPTIONS,
    file_display,
    file_input,
    file_model,
    file_rows,
    file_selection,
)
from ipfi_cli.cli.learn_options import SERVED_MODEL_OPTIONS
from ipfi_cli.cli.monitor_options import (
    monitor_settings,
)
from ipfi_cli.cli.options import (
    DEFAULT_MAX_ROWS,
    PANEL_ESTIMATOR,
    PANEL_OUTPUT,
    EmptyCoalitionOpt,
    InnerOpt,
    MaxRowsOpt,
    MethodName,
    NJobsOpt,
    OutputFormatOpt,
    OutputOpt,
    PermutationsOpt,
    RepeatsOpt,
    Sampling,
    SeedOpt,
    check_outputs,
    draw_seed,
    pfi_params,
    value,
)
from ipfi_cli.cli.signature import build, option, with_options
from ipfi_cli.cli.ui import TerminalReporter, show_learning_comparison, show_static_comparison
from ipfi_cli.core.params import DEFAULT_ALPHA, DEFAULT_REPEATS, DEFAULT_RESERVOIR_SIZE, DEFAULT_SAMPLING
from ipfi_cli.io.targets import data_files

if TYPE_CHECKING:  # the run's values are imported when the command runs (only the run's modules load)
    from ipfi_cli.run.compare import CompareEstimator, CompareOutput, Comparison

PANEL_COMPARE = "Comparison"

LearnOpt = Annotated[bool, typer.Option(
    "--learn", help="The model learns as it goes (river learn_one): compare iPFI with interval PFI "
    "(Experiment B) instead of batch PFI.", rich_help_panel=PANEL_COMPARE)]
LearnFirstOpt = Annotated[bool, typer.Option(
    "--learn-first", help="With --learn: the model learns each row before it is explained (the order of the "
    "paper's published code), so iPFI, like interval PFI, measures the model on rows it has learned. Without it, "
    "each row is explained first (prequential): the importance for rows the model has not seen.",
    rich_help_panel=PANEL_COMPARE)]
OrderingsOpt = Annotated[int, typer.Option(
    "--orderings", "-K", min=1, help="Static model: random orderings of the rows to stream; the summary "
    "gives the median and IQR of the error over them (the paper: 10).", rich_help_panel=PANEL_COMPARE)]
KeepOrderOpt = Annotated[bool, typer.Option(
    "--keep-order", help="Static model: stream the rows in the file's order (one ordering) instead of "
    "shuffling them.", rich_help_panel=PANEL_COMPARE)]
SamplingsOpt = Annotated[Optional[list[Sampling]], typer.Option(
    "--sampling", "-s", help="Sampling strategies to run (repeatable). Default: uniform and geometric for a "
    "static model, geometric with --learn.", rich_help_panel=PANEL_COMPARE, show_default=False)]
AlphasOpt = Annotated[Optional[list[float]], typer.Option(
    "--alpha", "-a", help="Smoothing rate(s) of iPFI (repeatable). With --learn extra alphas cost no extra "
    f"model calls. Default: {DEFAULT_ALPHA:g}.", rich_help_panel=PANEL_ESTIMATOR, show_default=False)]
ReservoirOpt = Annotated[int, typer.Option(
    "--reservoir-size", "-L", min=1, help="Rows each iPFI reservoir keeps.", rich_help_panel=PANEL_ESTIMATOR)]
IntervalOpt = Annotated[int, typer.Option(
    "--interval", help="With --learn: rows per interval PFI window (the paper: 2000).", min=2,
    rich_help_panel=PANEL_COMPARE)]
DriftOpt = Annotated[Optional[int], typer.Option(
    "--drift-at", help="With --learn: the row (1-based count) where a drift happens; errors are also "
    "summarised for windows ending at or before it and after it.", rich_help_panel=PANEL_COMPARE,
    show_default=False, metavar="ROW")]
NormalisationOpt = Annotated[str, typer.Option(
    "--normalisation", help="How both vectors are mapped to [0, 1] before the error: sum (clip at 0, divide "
    "by the sum: the paper's), max (clip, divide by the max) or minmax.", rich_help_panel=PANEL_COMPARE)]
TracesOpt = Annotated[Optional[str], typer.Option(
    "--traces", help="Also write the traces for `ipfi plot` to FILE (CSV, or JSONL for .jsonl): "
    "method,row,<features>; iPFI of ordering 0 (static) or of the stream (--learn), then batch or "
    "interval PFI.", rich_help_panel=PANEL_OUTPUT, show_default=False, metavar="FILE")]
TraceEveryOpt = Annotated[int, typer.Option(
    "--trace-every", min=1, help="Keep the traces after rows N, 2N, ... and the last (as explain --every; with "
    "--learn also at each window's end).", rich_help_panel=PANEL_OUTPUT)]


CompareMethodOpt = Annotated[MethodName, typer.Option(
    "--method", help="pfi: iPFI against batch PFI; sage: iSAGE against batch SAGE of the same game (--inner "
    "imputations per coalition; --permutations samples). SAGE needs a static model.",
    rich_help_panel=PANEL_ESTIMATOR)]

# the panels, in the order --help shows them (the ones batch shares: ipfi_cli.cli.file_options)
LEARN_OPTIONS = [option("learn", LearnOpt, False), option("learn_first", LearnFirstOpt, False)]
SAGE_OPTIONS = [option("method", CompareMethodOpt, "pfi"), option("inner", InnerOpt, None),
                option("empty_coalition", EmptyCoalitionOpt, "imputed"), option("permutations", PermutationsOpt, 2000)]
COMPARISON_OPTIONS = [
    option("max_rows", MaxRowsOpt, DEFAULT_MAX_ROWS), option("orderings", OrderingsOpt, 1),
    option("keep_order", KeepOrderOpt, False), option("sampling", SamplingsOpt, None), option("alpha", AlphasOpt, None),
    option("repeats", RepeatsOpt, DEFAULT_REPEATS), option("reservoir_size", ReservoirOpt, DEFAULT_RESERVOIR_SIZE),
    option("interval", IntervalOpt, 1000), option("drift_at", DriftOpt, None),
    option("normalisation", NormalisationOpt, "sum"), option("seed", SeedOpt, None), option("n_jobs", NJobsOpt, None)]
OUTPUT_OPTIONS = [option("output", OutputOpt, None), option("output_format", OutputFormatOpt, None),
                  option("traces", TracesOpt, None), option("trace_every", TraceEveryOpt, 1)]


def comparison(learn: bool, learn_first: bool, orderings: int, keep_order: bool, sampling: list[Any] | None,
               interval: int, drift_at: int | None, normalisation: str) -> Comparison:
    """The Comparison panel as one value; options that do not go together are usage errors."""
    from ipfi_cli.evaluation.metrics import NORMALISATIONS
    from ipfi_cli.run.compare import Comparison

    if normalisation not in NORMALISATIONS:
        raise usage_error(f"choose one of {', '.join(NORMALISATIONS)}", "--normalisation")
    if not learn and (drift_at is not None):
        raise usage_error("--drift-at needs --learn (a static model has no drift to locate)", "--drift-at")
    if learn_first and not learn:
        raise usage_error("--learn-first is the order of learning and explaining: it needs --learn", "--learn-first")
    if learn and (orderings != 1 or keep_order):
        raise usage_error("--orderings/--keep-order are for a static model; --learn streams the file once",
                          "--orderings")
    if keep_order and orderings != 1:
        raise usage_error("--keep-order streams the file's own order: use it with one ordering", "--keep-order")
    return Comparison(learn_first=learn_first, orderings=orderings, keep_order=keep_order,
                      samplings=tuple(value(s) for s in sampling or ()), interval=interval, drift_at=drift_at,
                      normalisation=normalisation)


def compare_estimator(learn: bool, method: Any, inner: int | None, empty_coalition: Any, permutations: int,
                      alpha: list[float] | None, repeats: int, reservoir_size: int,
                      n_jobs: int | None) -> CompareEstimator:
    """The Estimator panel as one value (each alpha checked as explain checks its one)."""
    from ipfi_cli.run.compare import CompareEstimator

    if learn and value(method) == "sage":
        raise usage_error("SAGE is compared on a static model (batch SAGE); interval SAGE for --learn is "
                          "not implemented", "--method")
    alphas = tuple(pfi_params(a, repeats, DEFAULT_SAMPLING, reservoir_size).alpha
                   for a in dict.fromkeys(alpha or [DEFAULT_ALPHA]))
    return CompareEstimator(method=value(method), alphas=alphas, repeats=repeats, reservoir_size=reservoir_size,
                            inner=inner, empty_coalition=value(empty_coalition), permutations=permutations,
                            n_jobs=n_jobs)


def compare_output(output: str | None, output_format: Any, traces: str | None, trace_every: int) -> CompareOutput:
    from ipfi_cli.run.compare import CompareOutput

    return CompareOutput(path=output, format=value(output_format), traces=traces, trace_every=trace_every)


@with_options(DATA_ARGUMENT, FILE_MODEL_OPTIONS, SERVED_MODEL_OPTIONS, THREADS_OPTIONS, LEARN_OPTIONS, SAGE_OPTIONS,
              COMPARISON_OPTIONS, SELECTION_OPTIONS, FILE_INPUT_OPTIONS, OUTPUT_OPTIONS, END_MONITOR_OPTIONS,
              FILE_DISPLAY_OPTIONS)
def compare(**o: Any) -> None:
    """Compare iPFI with batch PFI (static model) or interval PFI (--learn).

    Static model: the rows are streamed in --orderings random orders with uniform and geometric sampling; each run's final estimate is compared with batch PFI (computed once) by the paper's error, summarised as median and IQR. Learning model (--learn): iPFI over the stream vs interval PFI every --interval rows, errors before and after --drift-at. One record per method, feature and ordering (or window) on stdout; a summary table on stderr; --traces FILE for `ipfi plot`.
    """
    monitor = build(monitor_settings, o)
    if o["traces"] == "-" and o["output"] in (None, "-"):
        raise usage_error("'-' is standard output, where the records go already; give --traces a file, or the "
                          "records one with -o", "--traces")
    check_outputs({"--output": o["output"], "--traces": o["traces"], "--metrics-textfile": o["metrics_textfile"]},
                  {"DATA": data_files(o["data"]), "--model": o["model"]},
                  written_at_end=("--output", "--traces", "--metrics-textfile"))
    with reporting(o["debug"]):
        from ipfi_cli.evaluation.command import run_compare
        from ipfi_cli.run.compare import CompareSettings

        chosen = build(comparison, o)
        estimator = build(compare_estimator, o)
        inputs, selected = file_input(o), file_selection(o)
        settings = CompareSettings(
            model=file_model(o, learn=o["learn"]), inputs=inputs, selection=selected, estimator=estimator,
            comparison=chosen, rows=build(file_rows, o), output=build(compare_output, o), monitor=monitor,
            display=build(file_display, o), seed=draw_seed(o["seed"]))
        outcome = run_compare(settings, TerminalReporter(live=False, quiet=o["quiet"]))
        if not o["quiet"]:
            if outcome.learning is not None:
                show_learning_comparison(outcome.learning)
            else:
                show_static_comparison(outcome.results or [], outcome.batch_seconds, outcome.seconds)
