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

from ipfi_cli.cli.batch import (DataArg, NJobsOpt, RecordWriter, number, prepare, stderr_console,
                                write_records)
from ipfi_cli.cli.common import (
    PANEL_ESTIMATOR, PANEL_OUTPUT, CliError, DebugOpt, DropOpt, FeaturesOpt, FormatOpt, GroupOpt, LossOpt,
    OutputFormatOpt, OutputOpt, QuietOpt, RepeatsOpt, Sampling, SeedOpt, TargetOpt, Task, TaskOpt,
    ThreadsOpt, TrustOpt, VerboseOpt, DelimiterOpt, NaValuesOpt, NoDefaultNaOpt, OnBadRow, OnBadRowOpt, reporting,
    say, usage_error,
)
from ipfi_cli.cli.model_options import (
    ClassesOpt, HeaderOpt, MaxRequestRowsOpt, ModelOpt, ModelUrlOpt, Protocol, ProtocolOpt, RetriesOpt, RetryWaitOpt,
    TimeoutOpt, model_source,
)

PANEL_COMPARE = "Comparison"

LearnOpt = Annotated[bool, typer.Option(
    "--learn", help="The model learns as it goes (river learn_one): compare iPFI with interval PFI "
    "(Experiment B) instead of batch PFI.", rich_help_panel=PANEL_COMPARE)]
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
    "model calls. Default: 0.001.", rich_help_panel=PANEL_ESTIMATOR, show_default=False)]
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
    "--trace-every", min=1, help="Keep the traces every N rows.", rich_help_panel=PANEL_OUTPUT)]


def compare(
    data: DataArg,
    model: ModelOpt = None,
    target: TargetOpt = ...,  # type: ignore[assignment]
    trust: TrustOpt = None,
    model_url: ModelUrlOpt = None,
    protocol: ProtocolOpt = Protocol.auto,
    header: HeaderOpt = None,
    timeout: TimeoutOpt = 30.0,
    max_request_rows: MaxRequestRowsOpt = 5000,
    retries: RetriesOpt = 5,
    retry_wait: RetryWaitOpt = 30.0,
    classes: ClassesOpt = None,
    threads: ThreadsOpt = None,
    learn: LearnOpt = False,
    orderings: OrderingsOpt = 1,
    keep_order: KeepOrderOpt = False,
    sampling: SamplingsOpt = None,
    alpha: AlphasOpt = None,
    repeats: RepeatsOpt = 10,
    reservoir_size: ReservoirOpt = 100,
    interval: IntervalOpt = 1000,
    drift_at: DriftOpt = None,
    normalisation: NormalisationOpt = "sum",
    seed: SeedOpt = None,
    n_jobs: NJobsOpt = None,
    features: FeaturesOpt = None,
    drop: DropOpt = None,
    group: GroupOpt = None,
    loss: LossOpt = None,
    task: TaskOpt = Task.auto,
    input_format: FormatOpt = None,
    na_values: NaValuesOpt = None,
    no_default_na: NoDefaultNaOpt = False,
    delimiter: DelimiterOpt = None,
    on_bad_row: OnBadRowOpt = OnBadRow.fail,
    output: OutputOpt = None,
    output_format: OutputFormatOpt = None,
    traces: TracesOpt = None,
    trace_every: TraceEveryOpt = 1,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Compare iPFI with batch PFI (static model) or interval PFI (--learn).

    Static model: the rows are streamed in --orderings random orders with uniform and geometric sampling; each run's final estimate is compared with batch PFI (computed once) by the paper's error, summarised as median and IQR. Learning model (--learn): iPFI over the stream vs interval PFI every --interval rows, errors before and after --drift-at. One record per method, feature and ordering (or window) on stdout; a summary table on stderr; --traces FILE for `ipfi plot`.
    """
    with reporting(debug):
        from ipfi_cli.evaluation.metrics import NORMALISATIONS

        if normalisation not in NORMALISATIONS:
            raise usage_error(f"choose one of {', '.join(NORMALISATIONS)}", "--normalisation")
        if not learn and (drift_at is not None):
            raise usage_error("--drift-at needs --learn (a static model has no drift to locate)", "--drift-at")
        if learn and (orderings != 1 or keep_order):
            raise usage_error("--orderings/--keep-order are for a static model; --learn streams the file once",
                              "--orderings")
        if keep_order and orderings != 1:
            raise usage_error("--keep-order streams the file's own order: use it with one ordering", "--keep-order")
        alphas = list(dict.fromkeys(alpha or [0.001]))
        for a in alphas:
            if not 0.0 < a <= 1.0:
                raise usage_error(f"alpha must be in (0, 1], got {a}", "--alpha")
        samplings = [s.value for s in sampling] if sampling else (["geometric"] if learn else ["uniform", "geometric"])
        model, http = model_source(model, model_url, protocol=protocol, header=header, timeout=timeout,
                                   max_request_rows=max_request_rows, retries=retries, retry_wait=retry_wait,
                                   classes=classes)
        prepared = prepare(data, model, target, input_format=input_format.value if input_format else None,
                           task=task, loss=loss, features=features, drop=drop, group=group, learn=learn,
                           trust=trust, on_bad_row=on_bad_row.value, na_values=na_values,
                           no_default_na=no_default_na, delimiter=delimiter, quiet=quiet, verbose=verbose,
                           http=http)
        fmt = output_format.value if output_format else None
        if verbose and not quiet:
            say(f"model {prepared.loaded.description}; {len(prepared.frame)} rows; loss {prepared.loss.name}; "
                f"samplings {', '.join(samplings)}; alpha {', '.join(f'{a:g}' for a in alphas)}; seed {seed}")
        common = dict(loss=prepared.loss, n_repeats=repeats, reservoir_size=reservoir_size,
                      features=prepared.features, groups=prepared.groups, seed=seed, n_jobs=n_jobs,
                      normalisation=normalisation)
        if learn:
            _compare_learning(prepared, samplings, alphas, interval, drift_at, common, output, fmt, traces,
                              trace_every, quiet)
        else:
            _compare_static(prepared, samplings, alphas, orderings, not keep_order, common, output, fmt, traces,
                            trace_every, quiet, verbose)


def _write_traces(path: str, names: list[str], table: list[dict[str, Any]]) -> None:
    from ipfi_cli.io.writers import atomic_write, output_format_for

    def write(stream: Any) -> None:
        writer = RecordWriter(stream, ["method", "row", *names], output_format_for(path))
        for record in table:
            writer.write(record)

    try:
        atomic_write(path, write)
    except OSError as error:
        raise CliError(f"{path}: cannot write ({error.strerror or error})") from None


def _compare_static(prepared: Any, samplings: list[str], alphas: list[float], orderings: int, shuffle: bool,
                    common: dict[str, Any], output: str | None, fmt: str | None, traces: str | None,
                    trace_every: int, quiet: bool, verbose: bool) -> None:
    from ipfi_cli.evaluation import RECORD_FIELDS, compare_static

    results = []
    batch = None
    started = time.perf_counter()

    def progress(run: Any) -> None:
        if verbose and not quiet:
            say(f"{run.sampling} sampling, ordering {run.ordering}: error {run.error:.4f} ({run.seconds:.1f} s)")

    for a in alphas:
        result = compare_static(prepared.loaded.predictor, prepared.frame, prepared.targets, prepared.columns,
                                orderings=orderings, samplings=samplings, shuffle=shuffle, alpha=a, batch=batch,
                                keep_traces=traces is not None, trace_every=trace_every, on_run=progress, **common)
        if batch is None:
            batch, batch_seconds = result.batch, result.batch_seconds
        results.append(result)
    records = [r.as_dict() for r in results[0].records() if r.method == "batch"]
    for result in results:
        records.extend(r.as_dict() for r in result.records() if r.method != "batch")
    write_records(output, fmt, RECORD_FIELDS, records)
    if traces:
        table = [row for result in results for row in result.trace_table() if row["method"] != "batch"]
        table += [row for row in results[0].trace_table() if row["method"] == "batch"]
        _write_traces(traces, results[0].names, table)
    if not quiet:
        _static_summary(results, batch_seconds, time.perf_counter() - started)


def _static_summary(results: list[Any], batch_seconds: float, seconds: float) -> None:
    import numpy as np
    from rich.table import Table

    first = results[0]
    console = stderr_console(False)
    n_runs = sum(len(r.runs) for r in results)
    console.print(f"compare: {first.batch.n_rows:,} rows, {first.settings['orderings']} ordering(s), "
                  f"{first.settings['loss']} loss; batch PFI {batch_seconds:.1f} s, {n_runs} iPFI run(s), "
                  f"{seconds:.1f} s in all.")
    console.print(f"Error: {first.normalisation}-normalised L1 distance of each run's final estimate to batch PFI.")
    table = Table()
    for column in ("sampling", "alpha", "runs", "median error", "IQR", "Q1", "Q3"):
        table.add_column(column, justify="left" if column == "sampling" else "right")
    for result in results:
        for sampling, s in result.summary().items():
            table.add_row(sampling, f"{result.settings['alpha']:g}", str(s.n), number(s.median), number(s.iqr),
                          number(s.q1), number(s.q3))
    console.print(table)
    features = Table()
    features.add_column("feature")
    features.add_column("batch PFI (std)", justify="right")
    columns = [(result, s) for result in results for s in result.samplings]
    for result, s in columns:
        features.add_column(f"iPFI {s} {result.settings['alpha']:g}" + (" (median)" if len(result.runs) > 2 else ""),
                            justify="right")
    medians = {(id(result), s): np.median([run.estimates for run in result.runs if run.sampling == s], axis=0)
               for result, s in columns}
    order = sorted(range(len(first.names)), key=lambda j: -first.batch.mean[j])
    for j in order:
        features.add_row(first.names[j], f"{number(first.batch.mean[j])} ({number(first.batch.std[j])})",
                         *(number(float(medians[(id(result), s)][j])) for result, s in columns))
    console.print(features)


def _compare_learning(prepared: Any, samplings: list[str], alphas: list[float], interval: int,
                      drift_at: int | None, common: dict[str, Any], output: str | None, fmt: str | None,
                      traces: str | None, trace_every: int, quiet: bool) -> None:
    from ipfi_cli.evaluation import RECORD_FIELDS, compare_learning

    n = len(prepared.frame)
    if drift_at is not None and not 0 < drift_at < n:
        raise usage_error(f"the drift row must lie inside the stream (1 to {n - 1})", "--drift-at")
    if interval > n:
        raise usage_error(f"the interval ({interval} rows) is longer than the data ({n} rows)", "--interval")
    stream = zip(prepared.frame.to_dict("records"), prepared.targets)
    result = compare_learning(prepared.loaded.predictor, stream, prepared.columns, interval=interval,
                              samplings=samplings, alphas=alphas, drift_at=drift_at, trace_every=trace_every,
                              **common)
    write_records(output, fmt, RECORD_FIELDS, [r.as_dict() for r in result.records()])
    if traces:
        _write_traces(traces, result.names, result.trace_table())
    if not quiet:
        _learning_summary(result)


def _learning_summary(result: Any) -> None:
    from rich.table import Table

    console = stderr_console(False)
    console.print(f"compare --learn: {result.n_rows:,} rows, {len(result.intervals)} window(s) of "
                  f"{result.settings['interval']:,} rows, {result.settings['loss']} loss, {result.seconds:.1f} s.")
    console.print(f"Error: {result.normalisation}-normalised L1 distance to interval PFI at each window's end, "
                  "median (IQR).")
    parts = ["whole", "before", "after"] if result.drift_at is not None else ["whole"]
    label = result.traces[0].label if result.traces else ""
    counts = {p: len(result.errors(label, p)) for p in parts} if label else {p: 0 for p in parts}
    table = Table()
    table.add_column("sampling")
    table.add_column("alpha", justify="right")
    titles = {"whole": "whole", "before": f"before (<= {result.drift_at})", "after": f"after (> {result.drift_at})"}
    for part in parts:
        table.add_column(f"{titles[part]}, n={counts[part]}", justify="right")
    summary = result.summary()
    for trace in result.traces:
        table.add_row(trace.sampling, f"{trace.alpha:g}",
                      *(f"{number(summary[trace.label][p].median, 3)} ({number(summary[trace.label][p].iqr, 3)})"
                        for p in parts))
    console.print(table)
