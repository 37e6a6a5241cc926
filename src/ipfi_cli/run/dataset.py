"""A whole input made ready for the batch-mode commands (``batch``, ``compare``).

The rows go through the same reader (:mod:`ipfi_cli.io.readers`) and the same row checks
(:class:`~ipfi_cli.run.rows.RowChecker`) as ``ipfi explain``: one file means the same
values and the same bad rows to every command, with the same messages.

The good rows are then screened with the model (:func:`screen_rows`): a row it cannot take
(an unseen category, a text where it needs a number) is named with its column, as
``ipfi explain`` names it, and stops the command or is skipped with ``--on-bad-row skip``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ipfi_cli.core.losses import Loss, Output
from ipfi_cli.errors import InputError, IpfiError, RunError, ServiceError
from ipfi_cli.models.loading import LoadedModel
from ipfi_cli.run import setup
from ipfi_cli.run.checks import labels_match_nothing
from ipfi_cli.run.plan import InputSpec, RunPlan, Selection, plan_run
from ipfi_cli.run.report import Reporter
from ipfi_cli.run.rows import rows_frame


@dataclass
class Dataset:
    """A whole data file made ready for the core: the run's plan, its rows and labels."""

    plan: RunPlan
    frame: Any  # pandas DataFrame of the model's columns
    targets: list[Any]
    #: with ``keep_before_failure``: the bad row that ended the input early (the rows before it are kept)
    failure: IpfiError | None = None

    @property
    def loaded(self) -> LoadedModel:
        return self.plan.loaded

    @property
    def columns(self) -> list[str]:
        return self.plan.columns

    @property
    def features(self) -> list[str] | None:
        return self.plan.features

    @property
    def groups(self) -> dict[str, list[str]]:
        return self.plan.groups

    @property
    def loss(self) -> Loss:
        return self.plan.loss

    @property
    def source(self) -> str:
        return self.plan.source


def load_dataset(loaded: LoadedModel, inputs: InputSpec, selection: Selection, reporter: Reporter, *,
                 learn: bool = False, on_bad_row: str = "fail", verbose: bool = False,
                 max_rows: int | None = None, seed: int | None = None,
                 keep_before_failure: bool = False) -> Dataset:
    """Read the whole input for ``loaded``: the run's plan (:func:`~ipfi_cli.run.plan.plan_run`), then
    every row, checked and screened with the model, and the labels converted.

    Bad rows stop with their :class:`~ipfi_cli.errors.InputError` (``on_bad_row="fail"``) or are
    counted and left out. With ``max_rows``, at most that many good rows are kept, a uniform
    sample of them all (:class:`RowSample`, drawn with ``seed``) in input order, and a note says so.

    ``keep_before_failure`` (``compare --learn``, which streams): a row that stops the command ends the
    input instead; the rows before it are the dataset's and the error is its ``failure``, for the
    command to raise once it has written what those rows gave (as ``ipfi explain`` does).
    """

    plan, reader = plan_run(loaded, inputs, selection, learn=learn, say=reporter.message, streaming=False,
                            on_bad_row=on_bad_row)

    def on_skip(error: Any) -> None:
        if verbose:
            reporter.message(f"skipped {error}", "warning")

    stopped: IpfiError | None = None
    served = setup.served_model(loaded)
    if served is not None:  # the rows' answers when screened are the baseline's: asked once
        served.remember_answers(True)
    with reader:
        checker = plan.row_checker(on_bad_row=on_bad_row, on_skip=on_skip, say=reporter.message)
        sample = RowSample(max_rows, seed)
        columns = plan.columns
        for batch in reader.batches(SCREEN_ROWS):
            good, failure = checker.check(batch)
            # a row the model cannot take before the bad row `failure` is the first to report
            try:
                screened = screen_rows(good, plan.predictor, plan.columns, plan.loss.output, plan.source, checker)
            except StopAtRow as stop:
                if not keep_before_failure:
                    raise
                screened, failure = stop.before, stop
            # kept compact: the model's inputs as a tuple and the label (a row's dict weighs about 3x)
            sample.extend([(tuple([r.values[c] for c in columns]), r.label) for r in screened])
            if failure is not None:
                if not keep_before_failure:
                    raise failure
                stopped = failure
                break
        if served is not None:
            served.remember_answers(False)
        empty_rows = getattr(reader, "empty_rows_summary", None)  # CSV rows of empty fields, skipped
        for noted in (reader.noted_missing_summary(), empty_rows() if empty_rows is not None else None):
            if noted:
                reporter.message(noted, "note")
    skipped = checker.skipped_summary()
    if skipped:
        reporter.message(skipped, "warning")
    for line in (plan.labels.unknown_summary(), plan.labels.spelling_summary()):
        if line:
            reporter.message(line, "warning")
    if plan.labels.none_matched:
        raise RunError(f"{plan.source}: {labels_match_nothing(plan.labels)}")
    rows = sample.rows()
    if sample.seen > len(rows):
        reporter.message(f"explained a uniform sample of {len(rows):,} of the {sample.seen:,} good rows "
                         f"(--max-rows {max_rows:,}; drawn with the seed)", "note")
    if stopped is not None and len(rows) < 2:
        raise stopped
    if len(rows) < 2:
        why = checker.all_bad() if checker.skipped and not rows else \
            "the input has no rows" if not rows else f"{len(rows)} good row(s); batch PFI needs at least 2"
        raise RunError(f"{plan.source}: no data to explain: {why}")
    import pandas as pd

    frame = pd.DataFrame.from_records([inputs for inputs, _ in rows], columns=list(plan.columns))
    return Dataset(plan, frame, [label for _, label in rows], stopped)


#: rows read, checked and screened with the model at a time
SCREEN_ROWS = 1000
#: the spawn key of the sample's random stream: apart from batch PFI's (one per group, keys 0, 1, ...)
SAMPLE_STREAM = 0x5A3D1E


class RowSample:
    """At most ``limit`` of the rows offered, a uniform sample of them all (Algorithm R), in input order.

    While no more than ``limit`` rows came, every row is kept and no random number is drawn,
    so a file within the limit gives the numbers of an unlimited run.

    >>> sample = RowSample(3, seed=0)
    >>> sample.extend(list("abcdefgh"))
    >>> sample.seen, len(sample.rows()), sample.rows() == sorted(sample.rows())
    (8, 3, True)
    """

    def __init__(self, limit: int | None, seed: int | None) -> None:
        if limit is not None and limit < 2:
            raise ValueError(f"the sample needs at least 2 rows, got {limit}")
        self.limit = limit
        self._seed = seed
        self._rng: Any = None
        self._kept: list[tuple[int, Any]] = []
        self.seen = 0

    def extend(self, rows: list[Any]) -> None:
        limit, kept = self.limit, self._kept
        for row in rows:
            if limit is None or self.seen < limit:
                kept.append((self.seen, row))
            else:
                if self._rng is None:
                    import numpy as np

                    self._rng = np.random.default_rng(np.random.SeedSequence(self._seed, spawn_key=(SAMPLE_STREAM,)))
                slot = int(self._rng.integers(0, self.seen + 1))
                if slot < limit:
                    kept[slot] = (self.seen, row)
            self.seen += 1

    def rows(self) -> list[Any]:
        """The kept rows in the order they came."""
        return [row for _, row in sorted(self._kept, key=lambda item: item[0])]
class StopAtRow(InputError):
    """A row the model cannot take, which stops the command; ``before``: the good rows before it."""

    def __init__(self, message: str, before: list[Any]) -> None:
        super().__init__(message)
        self.before = before


#: rows tried as the reference that names a failing column
REFERENCE_TRIES = 20


def _predict(predictor: Any, block: Any, columns: list[str], output: Output, labels: list[Any]) -> None:
    """Predict ``block`` as batch PFI does (one call, or row by row for a per-record model)."""
    import numpy as np

    if getattr(predictor, "supports_batch", False):
        targets = np.array(labels, dtype=object) if output is Output.PROBA else None
        predictor.predict_block(block, columns, output, targets)
        return
    records = [dict(zip(columns, r)) for r in block.tolist()]
    for record, label in zip(records, labels):
        predictor.predict_records([record], output, label)


def screen_rows(rows: list[Any], predictor: Any, columns: list[str], output: Output, source: str,
                checker: Any) -> list[Any]:
    """The ``rows`` (good rows, in order) the model takes.

    One prediction of the whole block; if it fails, the block is bisected (iteratively, in
    order) down to the rows the model cannot take. Each is named with its column (see
    :mod:`ipfi_cli.run.failures`): with ``on_bad_row="fail"`` the first raises its
    :class:`~ipfi_cli.errors.InputError`, with ``"skip"`` they are counted by ``checker``
    and left out.
    """
    if not rows:
        return rows
    from ipfi_cli.core.batch import as_block

    block = as_block(rows_frame(rows, columns), columns)
    labels = [r.label for r in rows]
    try:
        _predict(predictor, block, columns, output, labels)
        return rows
    except ServiceError:  # the model cannot be reached: about no row
        raise
    except IpfiError:  # some row fails (the predictor is guarded): find which
        pass
    failing: list[tuple[int, BaseException]] = []
    reference: int | None = None
    stack = [(0, len(rows))]
    while stack:
        lo, hi = stack.pop()
        try:
            _predict(predictor, block[lo:hi], columns, output, labels[lo:hi])
        except ServiceError:  # the model cannot be reached: about no row
            raise
        except IpfiError as error:  # a row the model cannot take is in lo:hi
            if hi - lo == 1:
                failing.append((lo, error))
                if checker.on_bad_row == "fail":
                    break
            else:
                middle = (lo + hi) // 2
                stack += [(middle, hi), (lo, middle)]  # the first half first: rows stay in order
            continue
        if reference is None:
            reference = lo
    if not failing:  # the block fails, no part of it does (the model fails on the mix): the first row says so
        return rows
    from ipfi_cli.run.failures import failing_column, failure_message

    bad = {index for index, _ in failing}
    if reference is None:
        # a row the model takes, to name the failing column by (a few tries: the rows may all fail)
        trials = [i for i in range(len(rows)) if i not in bad][:REFERENCE_TRIES]
        reference = next((i for i in trials if _takes(predictor, block[i:i + 1], columns, output, labels[i])), None)
    for index, cause in failing:
        row = rows[index]
        column = failing_column(predictor, columns, row.values, row.label, output,
                                rows[reference].values if reference is not None else None)
        message = failure_message(source, row.number, row.line, row.values, columns, cause, column)
        if checker.on_bad_row == "fail":
            raise StopAtRow(message, [r for i, r in enumerate(rows[:index]) if i not in bad]) from cause
        checker.skip(message)
    return [r for i, r in enumerate(rows) if i not in bad]


def _takes(predictor: Any, block: Any, columns: list[str], output: Output, label: Any) -> bool:
    try:
        _predict(predictor, block, columns, output, [label])
    except ServiceError:  # the model cannot be reached: about no row
        raise
    except IpfiError:
        return False
    return True
