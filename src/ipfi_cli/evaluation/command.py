"""``ipfi compare``'s run: :func:`run_compare` reads the whole input, runs Experiment A (static model)
or B (``--learn``) as its :class:`~ipfi_cli.run.compare.CompareSettings` say, and writes the records
and traces. Unlike the rest of :mod:`ipfi_cli.evaluation` it writes files; the table is the command's."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ipfi_cli.core.groups import resolve_groups
from ipfi_cli.errors import InputError, UsageError
from ipfi_cli.evaluation import RECORD_FIELDS, compare_learning, compare_static
from ipfi_cli.io.writers import write_records
from ipfi_cli.models.loading import load_predictor
from ipfi_cli.run.checks import all_zero_warning, check_output_names
from ipfi_cli.run.compare import CompareSettings
from ipfi_cli.run.dataset import load_dataset
from ipfi_cli.run.metrics import comparison_families
from ipfi_cli.run.monitor import publish
from ipfi_cli.run.report import Reporter
from ipfi_cli.run.signals import hold_until_exit


@dataclass
class CompareOutcome:
    """What a comparison found, for the command's table: ``results`` (one
    :class:`~ipfi_cli.evaluation.static.StaticComparison` per alpha) or ``learning``."""

    records: list[dict[str, Any]]
    results: list[Any] | None = None  # static model
    batch_seconds: float = 0.0
    seconds: float = 0.0
    learning: Any = None  # --learn: the LearningComparison


def run_compare(settings: CompareSettings, reporter: Reporter) -> CompareOutcome:
    """Compare iPFI with batch PFI (static model) or interval PFI (a learning model); the records (and
    traces) are written, the metrics published; messages go to ``reporter``."""

    started = time.time()
    spec, learn, estimator = settings.model, settings.model.learn, settings.estimator
    samplings = list(settings.comparison.samplings_run(learn))
    alphas = list(dict.fromkeys(estimator.alphas))
    dataset = load_dataset(load_predictor(spec.path, learn=learn, trust=spec.trust, http=spec.http),
                           settings.inputs, settings.selection, reporter, learn=learn,
                           on_bad_row=settings.rows.on_bad_row, verbose=settings.display.verbose,
                           max_rows=None if learn else settings.rows.max_rows, seed=settings.seed,
                           keep_before_failure=learn)
    if settings.display.verbose:
        reporter.message(f"model {dataset.loaded.description}; {len(dataset.frame)} rows; loss "
                         f"{dataset.loss.name}; samplings {', '.join(samplings)}; alpha "
                         f"{', '.join(f'{a:g}' for a in alphas)}; seed {settings.seed}")
    common: dict[str, Any] = dict(
        loss=dataset.loss, n_repeats=estimator.repeats, reservoir_size=estimator.reservoir_size,
        features=dataset.features, groups=dataset.groups, seed=settings.seed, n_jobs=estimator.n_jobs,
        normalisation=settings.comparison.normalisation)
    if estimator.method == "sage":
        if dataset.features is not None and set(dataset.features) != set(dataset.columns) - {
                c for members in (dataset.groups or {}).values() for c in members}:
            raise UsageError("SAGE shares the loss among all the model's inputs: drop --features (--group "
                             "is fine)", "--features")
        common.update(method="sage", n_inner=estimator.inner, empty=estimator.empty_coalition,
                      permutations=estimator.permutations, features=None)
    if settings.output.traces:

        explained = None if estimator.method == "sage" else dataset.features  # SAGE explains every column
        check_output_names(list(resolve_groups(dataset.columns, explained, dataset.groups)), True, dataset.source)
    if learn:
        outcome = _compare_learning(dataset, settings, samplings, alphas, common, reporter)
    else:
        outcome = _compare_static(dataset, settings, samplings, alphas, common, reporter)
    if settings.monitor is not None:

        publish(settings.monitor, comparison_families(outcome.records, dataset.loss.name), started)
    return outcome


def _write_traces(path: str, names: list[str], table: list[dict[str, Any]]) -> None:

    write_records(path, None, ["method", "row", *names], table)


def _compare_static(dataset: Any, settings: CompareSettings, samplings: list[str], alphas: list[float],
                    common: dict[str, Any], reporter: Reporter) -> CompareOutcome:

    output, comparison = settings.output, settings.comparison
    results = []
    batch = None
    batch_seconds = 0.0
    started = time.perf_counter()

    def progress(run: Any) -> None:
        if settings.display.verbose:
            reporter.message(f"{run.sampling} sampling, ordering {run.ordering}: error {run.error:.4f} "
                             f"({run.seconds:.1f} s)")

    for a in alphas:
        result = compare_static(dataset.loaded.predictor, dataset.frame, dataset.targets, dataset.columns,
                                orderings=comparison.orderings, samplings=samplings,
                                shuffle=not comparison.keep_order, alpha=a, batch=batch,
                                keep_traces=output.traces is not None, trace_every=output.trace_every,
                                on_run=progress, **common)
        if batch is None:
            batch, batch_seconds = result.batch, result.batch_seconds
        results.append(result)
    reference = results[0].reference
    records = [r.as_dict() for r in results[0].records() if r.method == reference]
    for result in results:
        records.extend(r.as_dict() for r in result.records() if r.method != reference)
    write_records(output.path, output.format, RECORD_FIELDS, records)
    hold_until_exit()  # the result is written: a Ctrl-C now would only cut the traces or the table short
    zero = all_zero_warning(batch.mean, len(dataset.frame)) if batch is not None else None
    if zero:
        reporter.message(f"the batch reference: {zero}", "warning")
    if output.traces:
        table = [row for result in results for row in result.trace_table() if row["method"] != reference]
        table += [row for row in results[0].trace_table() if row["method"] == reference]
        _write_traces(output.traces, results[0].names, table)
    return CompareOutcome(records, results=results, batch_seconds=batch_seconds,
                          seconds=time.perf_counter() - started)


def _compare_learning(dataset: Any, settings: CompareSettings, samplings: list[str], alphas: list[float],
                      common: dict[str, Any], reporter: Reporter) -> CompareOutcome:

    output, interval, drift_at = settings.output, settings.comparison.interval, settings.comparison.drift_at
    n = len(dataset.frame)
    stopped = dataset.failure  # a bad row ended the stream: the windows before it are written, then it is said
    if stopped is not None and (interval > n or (drift_at is not None and not 0 < drift_at < n)):
        raise _stopped_by(stopped, "no window was finished before it: nothing was written")
    if drift_at is not None and not 0 < drift_at < n:
        raise UsageError(f"the drift row must lie inside the stream (1 to {n - 1})", "--drift-at")
    if interval > n:
        raise UsageError(f"the interval ({interval} rows) is longer than the data ({n} rows)", "--interval")
    stream = zip(dataset.frame.to_dict("records"), dataset.targets)
    result = compare_learning(dataset.loaded.predictor, stream, dataset.columns, interval=interval,
                              samplings=samplings, alphas=alphas, drift_at=drift_at, trace_every=output.trace_every,
                              learn_first=settings.comparison.learn_first, **common)
    records = [r.as_dict() for r in result.records()]
    write_records(output.path, output.format, RECORD_FIELDS, records)
    hold_until_exit()  # the result is written: a Ctrl-C now would only cut the traces or the table short
    if output.traces:
        _write_traces(output.traces, result.names, result.trace_table())
    empty = [p.row for p in result.intervals if not (np.asarray(p.result.mean) > 0).any()]
    if empty:
        shown = ", ".join(f"{row:,}" for row in empty[:5]) + (f" and {len(empty) - 5} more" if len(empty) > 5 else "")
        reporter.message(f"interval PFI is 0 or below for every feature in the window(s) ending at row {shown} (the "
                         "model used no feature on those rows): the error there only says whether iPFI is 0 too (0) or "
                         "not (its normalised total: 1.0 with --normalisation sum)", "warning")
    if stopped is not None:
        last = result.intervals[-1].row if result.intervals else 0
        raise _stopped_by(stopped, f"wrote the records{' and traces' if output.traces else ''} of the "
                          f"{len(result.intervals)} window(s) before it (rows 1 to {last:,})")
    return CompareOutcome(records, learning=result)


def _stopped_by(error: Any, what: str) -> InputError:
    """The bad row that ended a ``--learn`` stream, saying what was written before it."""
    return InputError(f"{error}; {what}")
