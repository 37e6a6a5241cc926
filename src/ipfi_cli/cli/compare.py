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

import time
from typing import Annotated, Any, Optional

import typer

from ipfi_cli.cli.errors import reporting, usage_error
from ipfi_cli.cli.learn_options import model_spec
from ipfi_cli.cli.model_options import (
    DEFAULT_CONCURRENCY,
    DEFAULT_MAX_ANSWER_MB,
    DEFAULT_MAX_REQUEST_ROWS,
    DEFAULT_MODEL_WAIT,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    ClassesOpt,
    ConcurrencyOpt,
    HeaderOpt,
    MaxAnswerMbOpt,
    MaxRequestRowsOpt,
    ModelOpt,
    ModelUrlOpt,
    ModelWaitOpt,
    Protocol,
    ProtocolOpt,
    RetriesOpt,
    TimeoutOpt,
)
from ipfi_cli.cli.monitor_options import (
    MetricsLabelOpt,
    MetricsTextfileOpt,
    PushgatewayOpt,
    PushJobOpt,
    PushLabelOpt,
    monitor_settings,
)
from ipfi_cli.cli.options import (
    DEFAULT_MAX_ROWS,
    PANEL_ESTIMATOR,
    PANEL_OUTPUT,
    AllowUnknownCategoriesOpt,
    DataArg,
    DebugOpt,
    DecimalOpt,
    DelimiterOpt,
    DropOpt,
    EmptyCoalitionOpt,
    FeaturesOpt,
    FormatOpt,
    GroupOpt,
    InnerOpt,
    LossOpt,
    MaxRowsOpt,
    MethodName,
    NaValuesOpt,
    NJobsOpt,
    NoDefaultNaOpt,
    OnBadRowOpt,
    OutputFormatOpt,
    OutputOpt,
    PermutationsOpt,
    QuietOpt,
    RepeatsOpt,
    Sampling,
    SeedOpt,
    SkipInitialSpaceOpt,
    TargetOpt,
    TaskOpt,
    TextOpt,
    ThreadsOpt,
    TrustOpt,
    VerboseOpt,
    check_outputs,
    draw_seed,
    input_spec,
    pfi_params,
    selection,
    value,
)
from ipfi_cli.core.params import DEFAULT_ALPHA, DEFAULT_REPEATS, DEFAULT_RESERVOIR_SIZE, DEFAULT_SAMPLING
from ipfi_cli.io.targets import data_files
from ipfi_cli.run.settings import DEFAULT_PUSH_JOB
from ipfi_cli.run.signals import hold_until_exit

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


def compare(
    data: DataArg,
    model: ModelOpt = None,
    target: TargetOpt = None,
    trust: TrustOpt = None,
    model_url: ModelUrlOpt = None,
    protocol: ProtocolOpt = Protocol.auto,
    header: HeaderOpt = None,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT,
    max_request_rows: MaxRequestRowsOpt = DEFAULT_MAX_REQUEST_ROWS,
    max_answer_mb: MaxAnswerMbOpt = DEFAULT_MAX_ANSWER_MB,
    retries: RetriesOpt = DEFAULT_RETRIES,
    model_wait: ModelWaitOpt = DEFAULT_MODEL_WAIT,
    concurrency: ConcurrencyOpt = DEFAULT_CONCURRENCY,
    classes: ClassesOpt = None,
    threads: ThreadsOpt = None,
    learn: LearnOpt = False,
    learn_first: LearnFirstOpt = False,
    method: Annotated[MethodName, typer.Option(
        "--method", help="pfi: iPFI against batch PFI; sage: iSAGE against batch SAGE of the same game (--inner "
        "imputations per coalition; --permutations samples). SAGE needs a static model.",
        rich_help_panel=PANEL_ESTIMATOR)] = "pfi",
    inner: InnerOpt = None,
    empty_coalition: EmptyCoalitionOpt = "imputed",
    permutations: PermutationsOpt = 2000,
    max_rows: MaxRowsOpt = DEFAULT_MAX_ROWS,
    orderings: OrderingsOpt = 1,
    keep_order: KeepOrderOpt = False,
    sampling: SamplingsOpt = None,
    alpha: AlphasOpt = None,
    repeats: RepeatsOpt = DEFAULT_REPEATS,
    reservoir_size: ReservoirOpt = DEFAULT_RESERVOIR_SIZE,
    interval: IntervalOpt = 1000,
    drift_at: DriftOpt = None,
    normalisation: NormalisationOpt = "sum",
    seed: SeedOpt = None,
    n_jobs: NJobsOpt = None,
    features: FeaturesOpt = None,
    drop: DropOpt = None,
    group: GroupOpt = None,
    loss: LossOpt = None,
    task: TaskOpt = "auto",
    input_format: FormatOpt = None,
    na_values: NaValuesOpt = None,
    no_default_na: NoDefaultNaOpt = False,
    delimiter: DelimiterOpt = None,
    decimal: DecimalOpt = None,
    text: TextOpt = None,
    skip_initial_space: SkipInitialSpaceOpt = False,
    allow_unknown_categories: AllowUnknownCategoriesOpt = False,
    on_bad_row: OnBadRowOpt = "fail",
    output: OutputOpt = None,
    output_format: OutputFormatOpt = None,
    traces: TracesOpt = None,
    trace_every: TraceEveryOpt = 1,
    metrics_textfile: MetricsTextfileOpt = None,
    metrics_label: MetricsLabelOpt = None,
    pushgateway: PushgatewayOpt = None,
    push_job: PushJobOpt = DEFAULT_PUSH_JOB,
    push_label: PushLabelOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Compare iPFI with batch PFI (static model) or interval PFI (--learn).

    Static model: the rows are streamed in --orderings random orders with uniform and geometric sampling; each run's final estimate is compared with batch PFI (computed once) by the paper's error, summarised as median and IQR. Learning model (--learn): iPFI over the stream vs interval PFI every --interval rows, errors before and after --drift-at. One record per method, feature and ordering (or window) on stdout; a summary table on stderr; --traces FILE for `ipfi plot`.
    """
    monitor = monitor_settings(metrics_textfile=metrics_textfile, metrics_label=metrics_label, pushgateway=pushgateway,
                               push_job=push_job, push_label=push_label)
    check_outputs({"--output": output, "--traces": traces, "--metrics-textfile": metrics_textfile},
                  {"DATA": data_files(data), "--model": model},
                  written_at_end=("--output", "--traces", "--metrics-textfile"))
    started = time.time()
    with reporting(debug):
        from ipfi_cli.evaluation.metrics import NORMALISATIONS

        if normalisation not in NORMALISATIONS:
            raise usage_error(f"choose one of {', '.join(NORMALISATIONS)}", "--normalisation")
        if not learn and (drift_at is not None):
            raise usage_error("--drift-at needs --learn (a static model has no drift to locate)", "--drift-at")
        if learn_first and not learn:
            raise usage_error("--learn-first is the order of learning and explaining: it needs --learn",
                              "--learn-first")
        if learn and (orderings != 1 or keep_order):
            raise usage_error("--orderings/--keep-order are for a static model; --learn streams the file once",
                              "--orderings")
        if learn and value(method) == "sage":
            raise usage_error("SAGE is compared on a static model (batch SAGE); interval SAGE for --learn is "
                              "not implemented", "--method")
        if keep_order and orderings != 1:
            raise usage_error("--keep-order streams the file's own order: use it with one ordering", "--keep-order")
        alphas = [pfi_params(a, repeats, DEFAULT_SAMPLING, reservoir_size).alpha
                  for a in dict.fromkeys(alpha or [DEFAULT_ALPHA])]
        samplings = [value(s) for s in sampling] if sampling else (["geometric"] if learn else ["uniform", "geometric"])
        from ipfi_cli.cli.ui import TerminalReporter
        from ipfi_cli.models.loading import load_predictor
        from ipfi_cli.run.dataset import load_dataset

        inputs = input_spec(data, input_format, na_values, no_default_na, delimiter, text, decimal,
                            skip_initial_space)
        chosen = selection(target, task, loss, features, drop, group, allow_unknown_categories)
        seed = draw_seed(seed)
        spec = model_spec(model, model_url, protocol, header, timeout, max_request_rows, max_answer_mb, retries,
                          model_wait, concurrency, classes, trust, learn=learn, save_model=None)
        model, http = spec.path, spec.http
        reporter = TerminalReporter(live=False, quiet=quiet)
        dataset = load_dataset(load_predictor(model, learn=learn, trust=spec.trust, http=http), inputs,
                               chosen, reporter, learn=learn, on_bad_row=value(on_bad_row), verbose=verbose,
                               max_rows=None if learn else max_rows, seed=seed, keep_before_failure=learn)
        fmt = value(output_format)
        if verbose:
            reporter.message(f"model {dataset.loaded.description}; {len(dataset.frame)} rows; loss "
                             f"{dataset.loss.name}; samplings {', '.join(samplings)}; alpha "
                             f"{', '.join(f'{a:g}' for a in alphas)}; seed {seed}")
        common = dict(loss=dataset.loss, n_repeats=repeats, reservoir_size=reservoir_size,
                      features=dataset.features, groups=dataset.groups, seed=seed, n_jobs=n_jobs,
                      normalisation=normalisation)
        if value(method) == "sage":
            if dataset.features is not None and set(dataset.features) != set(dataset.columns) - {
                    c for members in (dataset.groups or {}).values() for c in members}:
                raise usage_error("SAGE shares the loss among all the model's inputs: drop --features (--group "
                                  "is fine)", "--features")
            common.update(method="sage", n_inner=inner, empty=value(empty_coalition), permutations=permutations,
                          features=None)
        if traces:
            from ipfi_cli.core.groups import resolve_groups
            from ipfi_cli.run.checks import check_output_names

            explained = None if value(method) == "sage" else dataset.features  # SAGE explains every column
            check_output_names(list(resolve_groups(dataset.columns, explained, dataset.groups)), True, dataset.source)
        if learn:
            records = _compare_learning(dataset, samplings, alphas, interval, drift_at, common, output, fmt, traces,
                                        trace_every, quiet, learn_first, reporter)
        else:
            records = _compare_static(dataset, samplings, alphas, orderings, not keep_order, common, output, fmt,
                                      traces, trace_every, quiet, verbose, reporter)
        if monitor is not None:
            from ipfi_cli.run.metrics import comparison_families
            from ipfi_cli.run.monitor import publish

            publish(monitor, comparison_families(records, dataset.loss.name), started)


def _write_traces(path: str, names: list[str], table: list[dict[str, Any]]) -> None:
    from ipfi_cli.io.writers import write_records

    write_records(path, None, ["method", "row", *names], table)


def _compare_static(dataset: Any, samplings: list[str], alphas: list[float], orderings: int, shuffle: bool,
                    common: dict[str, Any], output: str | None, fmt: str | None, traces: str | None,
                    trace_every: int, quiet: bool, verbose: bool, reporter: Any) -> list[dict[str, Any]]:
    from ipfi_cli.cli.ui import show_static_comparison
    from ipfi_cli.evaluation import RECORD_FIELDS, compare_static
    from ipfi_cli.io.writers import write_records

    results = []
    batch = None
    started = time.perf_counter()

    def progress(run: Any) -> None:
        if verbose:
            reporter.message(f"{run.sampling} sampling, ordering {run.ordering}: error {run.error:.4f} "
                             f"({run.seconds:.1f} s)")

    for a in alphas:
        result = compare_static(dataset.loaded.predictor, dataset.frame, dataset.targets, dataset.columns,
                                orderings=orderings, samplings=samplings, shuffle=shuffle, alpha=a, batch=batch,
                                keep_traces=traces is not None, trace_every=trace_every, on_run=progress, **common)
        if batch is None:
            batch, batch_seconds = result.batch, result.batch_seconds
        results.append(result)
    reference = results[0].reference
    records = [r.as_dict() for r in results[0].records() if r.method == reference]
    for result in results:
        records.extend(r.as_dict() for r in result.records() if r.method != reference)
    write_records(output, fmt, RECORD_FIELDS, records)
    hold_until_exit()  # the result is written: a Ctrl-C now would only cut the traces or the table short
    from ipfi_cli.run.checks import all_zero_warning

    zero = all_zero_warning(batch.mean, len(dataset.frame)) if batch is not None else None
    if zero:
        reporter.message(f"the batch reference: {zero}", "warning")
    if traces:
        table = [row for result in results for row in result.trace_table() if row["method"] != reference]
        table += [row for row in results[0].trace_table() if row["method"] == reference]
        _write_traces(traces, results[0].names, table)
    if not quiet:
        show_static_comparison(results, batch_seconds, time.perf_counter() - started)
    return records


def _compare_learning(dataset: Any, samplings: list[str], alphas: list[float], interval: int,
                      drift_at: int | None, common: dict[str, Any], output: str | None, fmt: str | None,
                      traces: str | None, trace_every: int, quiet: bool, learn_first: bool = False,
                      reporter: Any = None) -> list[dict[str, Any]]:
    import numpy as np

    from ipfi_cli.cli.ui import show_learning_comparison
    from ipfi_cli.evaluation import RECORD_FIELDS, compare_learning
    from ipfi_cli.io.writers import write_records

    n = len(dataset.frame)
    stopped = dataset.failure  # a bad row ended the stream: the windows before it are written, then it is said
    if stopped is not None and (interval > n or (drift_at is not None and not 0 < drift_at < n)):
        raise _stopped_by(stopped, "no window was finished before it: nothing was written")
    if drift_at is not None and not 0 < drift_at < n:
        raise usage_error(f"the drift row must lie inside the stream (1 to {n - 1})", "--drift-at")
    if interval > n:
        raise usage_error(f"the interval ({interval} rows) is longer than the data ({n} rows)", "--interval")
    stream = zip(dataset.frame.to_dict("records"), dataset.targets)
    result = compare_learning(dataset.loaded.predictor, stream, dataset.columns, interval=interval,
                              samplings=samplings, alphas=alphas, drift_at=drift_at, trace_every=trace_every,
                              learn_first=learn_first, **common)
    records = [r.as_dict() for r in result.records()]
    write_records(output, fmt, RECORD_FIELDS, records)
    hold_until_exit()  # the result is written: a Ctrl-C now would only cut the traces or the table short
    if traces:
        _write_traces(traces, result.names, result.trace_table())
    empty = [p.row for p in result.intervals if not (np.asarray(p.result.mean) > 0).any()]
    if empty and reporter is not None:
        shown = ", ".join(f"{row:,}" for row in empty[:5]) + (f" and {len(empty) - 5} more" if len(empty) > 5 else "")
        reporter.message(f"interval PFI is 0 or below for every feature in the window(s) ending at row {shown} (the "
                         "model used no feature on those rows): the error there only says whether iPFI is 0 too (0) or "
                         "not (its normalised total: 1.0 with --normalisation sum)", "warning")
    if stopped is not None:
        last = result.intervals[-1].row if result.intervals else 0
        raise _stopped_by(stopped, f"wrote the records{' and traces' if traces else ''} of the "
                          f"{len(result.intervals)} window(s) before it (rows 1 to {last:,})")
    if not quiet:
        show_learning_comparison(result)
    return records


def _stopped_by(error: Any, what: str) -> Any:
    """The bad row that ended a ``--learn`` stream, saying what was written before it."""
    from ipfi_cli.errors import InputError

    return InputError(f"{error}; {what}")
