"""``ipfi batch``: batch PFI of a static model on a whole file (the paper's eq. 3).

Its signature is its panels' option lists (:mod:`ipfi_cli.cli.signature`); they make a
:class:`~ipfi_cli.run.batch.BatchSettings` that :func:`~ipfi_cli.run.batch.run_batch` runs; the
table is drawn here.
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
    EmptyCoalitionOpt,
    MaxRowsOpt,
    MethodName,
    NJobsOpt,
    OutputFormatOpt,
    OutputOpt,
    PermutationsOpt,
    SchedulerOpt,
    SeedOpt,
    WorkersOpt,
    check_outputs,
    draw_seed,
    value,
)
from ipfi_cli.cli.signature import build, option, with_options
from ipfi_cli.cli.ui import TerminalReporter, show_batch_table, show_sage_table
from ipfi_cli.core.params import DEFAULT_REPEATS
from ipfi_cli.io.targets import data_files
from ipfi_cli.text import quoted

if TYPE_CHECKING:  # the run's values are imported when the command runs (only the run's modules load)
    from ipfi_cli.run.batch import BatchMethod, Spread

BatchRepeatsOpt = Annotated[int, typer.Option(
    "--repeats", "-M", min=1, help="Random permutations of the whole data per feature (M; the paper uses 10).",
    rich_help_panel=PANEL_ESTIMATOR)]
BatchMethodOpt = Annotated[MethodName, typer.Option(
    "--method", help="pfi: batch permutation feature importance; sage: batch SAGE (Shapley values of the loss, "
    "the baseline of explain --method sage).", rich_help_panel=PANEL_ESTIMATOR)]
BackgroundOpt = Annotated[int, typer.Option(
    "--background", min=1, help="With --method sage: rows drawn (with --seed) whose values stand in for "
    "absent features: --inner K of them drawn per coalition, or with --inner all every coalition's prediction "
    "averaged over all of them.", rich_help_panel=PANEL_ESTIMATOR)]
BatchInnerOpt = Annotated[Optional[str], typer.Option(
    "--inner", help="With --method sage: draw K background rows per coalition, the game explain --method sage "
    "--inner K estimates (its baseline). Default: explain's, 2 with the squared loss (both then estimate Covert "
    "et al.'s SAGE), else 1 (the Shapley values of the loss under one random imputation). all: every "
    "background row averaged (Covert et al.'s SAGE, as sage-importance's MarginalImputer).",
    rich_help_panel=PANEL_ESTIMATOR, show_default=False, metavar="K|all")]

METHOD_OPTIONS = [
    option("repeats", BatchRepeatsOpt, DEFAULT_REPEATS), option("method", BatchMethodOpt, "pfi"),
    option("permutations", PermutationsOpt, 2000), option("background", BackgroundOpt, 64),
    option("inner", BatchInnerOpt, None), option("empty_coalition", EmptyCoalitionOpt, "imputed")]
ROWS_AND_SPREAD_OPTIONS = [
    option("max_rows", MaxRowsOpt, DEFAULT_MAX_ROWS), option("seed", SeedOpt, None), option("n_jobs", NJobsOpt, None),
    option("workers", WorkersOpt, None), option("scheduler", SchedulerOpt, None)]
OUTPUT_OPTIONS = [option("output", OutputOpt, None), option("output_format", OutputFormatOpt, None)]


def batch_method(repeats: int, method: Any, permutations: int, background: int, inner: str | None,
                 empty_coalition: Any) -> BatchMethod:
    """The Estimator panel as one value (``--inner`` parsed)."""
    from ipfi_cli.run.batch import BatchMethod

    return BatchMethod(name=value(method), repeats=repeats, permutations=permutations, background=background,
                       inner=parse_inner(inner), empty_coalition=value(empty_coalition))


def spread(n_jobs: int | None, workers: int | None, scheduler: str | None) -> Spread:
    from ipfi_cli.run.batch import Spread

    return Spread(n_jobs=n_jobs, workers=workers, scheduler=scheduler)


@with_options(DATA_ARGUMENT, FILE_MODEL_OPTIONS, SERVED_MODEL_OPTIONS, THREADS_OPTIONS, METHOD_OPTIONS,
              ROWS_AND_SPREAD_OPTIONS, SELECTION_OPTIONS, FILE_INPUT_OPTIONS, OUTPUT_OPTIONS, END_MONITOR_OPTIONS,
              FILE_DISPLAY_OPTIONS)
def batch(**o: Any) -> None:
    """Batch PFI of a static model on a whole file (the baseline iPFI approximates).

    Per feature or group: the mean increase in loss over --repeats random permutations of all rows (with the unbiased N/(N-1) scaling), its standard deviation over the repeats (ddof=1) and the number of repeats. Records go to stdout (CSV or JSONL), a table to stderr. The file is read whole; at most --max-rows of its rows are kept (a uniform sample of them all beyond that, said in a note).

    With --method sage: batch SAGE (Covert et al.'s permutation estimator, the baseline of explain --method sage): per feature its Shapley value of the loss, its standard error, and the explained loss the values add up to.
    """
    monitor = build(monitor_settings, o)
    check_outputs({"--output": o["output"], "--metrics-textfile": o["metrics_textfile"]},
                  {"DATA": data_files(o["data"]), "--model": o["model"]},
                  written_at_end=("--output", "--metrics-textfile"))
    with reporting(o["debug"]):
        from ipfi_cli.run.batch import BatchSettings, run_batch

        inputs, chosen = file_input(o), file_selection(o)
        method = build(batch_method, o)  # --inner checked before the data is read
        settings = BatchSettings(
            model=file_model(o), inputs=inputs, selection=chosen, method=method, spread=build(spread, o),
            rows=build(file_rows, o), output=o["output"], output_format=value(o["output_format"]), monitor=monitor,
            display=build(file_display, o), seed=draw_seed(o["seed"]))
        reporter = TerminalReporter(live=False, quiet=o["quiet"])
        outcome = run_batch(settings, reporter)
        if not o["quiet"]:
            if outcome.method == "sage":
                show_sage_table(outcome.result, outcome.loss_name, outcome.n_rows, outcome.seconds,
                                outcome.game or "")
            else:
                show_batch_table(outcome.result, outcome.loss_name, outcome.seconds)
            if outcome.requests_note is not None:
                reporter.message(outcome.requests_note, "note")


def parse_inner(inner: str | None) -> int | str | None:
    """``--inner``: a number of background rows drawn per coalition, ``"all"`` (every background row
    averaged, Covert et al.'s game) or ``None`` (not given: explain's default, see :func:`sage_inner`)."""
    if inner is None:
        return None
    if inner.strip().lower() == "all":
        return "all"
    try:
        count = int(inner.strip())
    except ValueError:
        raise usage_error(f"expected a number of background rows per coalition or all, got {quoted(inner)}",
                          "--inner") from None
    if count < 1:
        raise usage_error(f"at least 1 background row per coalition, got {count}", "--inner")
    return count
