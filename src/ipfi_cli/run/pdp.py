"""The streaming loop behind ``ipfi pdp``: incremental partial-dependence curves as long-format records.

Each record is one point of one feature's curve after one row: ``row``, ``feature``, ``grid``
(the grid value), ``pd`` (the smoothed partial dependence there). Records are written every
``every`` rows and after the last row. No target is needed: the curves are the model's own.

Bad rows (unreadable, a value that is not a finite number, a row the model fails on) follow
``on_bad_row`` as in ``explain``: ``fail`` stops at the first, after the records due before it
and the last good row's, so nothing computed is lost; ``skip`` leaves them out, counts them and
says how many at the end.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ipfi_cli.core.params import DEFAULT_ALPHA
from ipfi_cli.errors import InputError, IpfiError, ModelCallError, RunError, ServiceError
from ipfi_cli.models.loading import load_predictor
from ipfi_cli.run.labels import LabelMatcher
from ipfi_cli.run.plan import InputSpec
from ipfi_cli.run.rows import RowChecker
from ipfi_cli.run.settings import ModelSpec, ReadSpec
from ipfi_cli.run.setup import check_readable, model_columns
from ipfi_cli.text import quoted

PDP_FIELDS = ["row", "feature", "grid", "pd"]


@dataclass(frozen=True)
class Curves:
    """The Estimator panel: which features' curves, over which grid, smoothed how."""

    features: Sequence[str]
    target_class: Any = None  # --class: a classifier's curve is this class's probability
    grid_size: int = 10
    grid: Mapping[str, list[float]] | None = None  # fixed grids (--grid), the others follow the quantiles
    alpha: float = DEFAULT_ALPHA
    smoothing: str = "exponential"
    warm_up: int = 20  # rows that only set the grid


@dataclass(frozen=True)
class PDPSettings:
    """What ``ipfi pdp`` was asked to do, one value per help panel.

    >>> settings = PDPSettings(ModelSpec("model.joblib"), InputSpec("rows.csv"), Curves(["age"], grid_size=5))
    >>> settings.curves.grid_size, settings.every, settings.reading.on_bad_row
    (5, 1000, 'fail')
    """

    model: ModelSpec  # its path and --trust
    inputs: InputSpec
    curves: Curves
    target: str | None = None  # a column to leave out of the model's inputs (the curves need no label)
    drop: Sequence[str] | None = None  # more columns a model without named inputs does not take
    every: int = 1000  # the curves every this many rows (and after the last)
    reading: ReadSpec = field(default_factory=ReadSpec)


def _row_values(row: Any, columns: list[str], features: Sequence[str], source: str) -> list[Any]:
    """The row's model inputs: numbers as floats; a tracked feature's value a number (missing: NaN,
    left out of its grid as scikit-learn's ``partial_dependence`` does; the curve replaces it), any
    other column's text or missing value as read, for a model whose own pipeline encodes or imputes it
    (a model that cannot take it fails on the row, which is then a bad row naming the column)."""
    out: list[Any] = []
    where = {"source": source, "row": row.number, "line": row.line}
    tracked = set(features)
    for column in columns:
        if column not in row.values:
            raise InputError("missing from the row", column=column, **where)
        value = row.values[column]
        if type(value) is str and column not in tracked:
            out.append(value)
            continue
        try:
            number = float(value) if isinstance(value, (int, float, str)) else None
        except OverflowError:  # an int of hundreds of digits
            raise InputError(f"a number of {len(str(abs(value)))} digits, too large for a float; models cannot "
                             "use it", column=column, **where) from None
        except ValueError:
            number = None
        if number is None:
            needs = "numbers" if column in tracked else "numbers or text"
            raise InputError(f"partial dependence needs {needs}, got {str(value)[:40]!r}", column=column,
                             **where) from None
        if math.isinf(number):  # the grid's quantiles and every curve would be inf or moved
            raise InputError(f"{number} is not a finite number (a number too large for a float, such as 1e400, "
                             "reads as inf); models cannot use it", column=column, **where)
        out.append(number)
    return out


def _block(values: list[list[Any]]) -> Any:
    """The rows' inputs as one array: floats when every value is a number, else objects."""
    import numpy as np

    try:
        return np.array(values, dtype=np.float64)
    except ValueError:  # text
        block = np.empty((len(values), len(values[0]) if values else 0), dtype=object)
        block[:, :] = values
        return block


def _class(predictor: Any, settings: PDPSettings) -> Any:
    """The class whose probability the curve shows, as the model names it; ``None`` for a regressor."""
    wanted = settings.curves.target_class
    if wanted is None:
        if predictor.is_classifier:
            raise RunError("the model is a classifier: give --class LABEL (the curves show that class's probability)"
                           + (f"; its classes: {', '.join(map(str, predictor.classes))}" if predictor.classes else ""))
        return None
    if not predictor.has_proba:
        raise RunError("--class needs a model that gives class probabilities")
    classes = predictor.classes
    if classes:
        # the rule labels follow: --class 1 finds the class 1.0, --class dole finds Dole, yes the 1 of a 0/1 model
        found = LabelMatcher(classification=True, classes=classes).find(wanted)
        if found is None:
            raise RunError(f"--class {quoted(str(wanted))} is not one of the model's classes: "
                           f"{', '.join(map(str, classes))}")
        return found[0]
    return wanted


def pdp_records(settings: PDPSettings, say: Callable[[str, str | None], None] | None = None
                ) -> Iterator[dict[str, Any]]:
    """Load the model and open the input now (their errors come before any output), then return the
    records: each row read is folded into the curves (see the module docstring). ``say(text, kind)``
    gets the notes and warnings (the model's, how its columns were matched), as explain says them.

    An input with no rows (an empty JSONL file, or only bad lines: the first is the error) is
    refused as explain, batch and compare refuse it: ``the input has no rows``.
    """
    from ipfi_cli.core.pdp import IPDPEstimator
    s = settings
    loaded = load_predictor(s.model.path, trust=s.model.trust)
    if say is not None:
        for line in loaded.warnings:
            say(line, "warning")
    reader = s.inputs.open()
    try:
        source = reader.name
        if not reader.columns:  # no row gave columns: there is none, or only bad ones
            bad = [row.error for row in reader if row.error is not None]
            if bad and s.reading.on_bad_row == "fail":
                raise bad[0]
            raise RunError(f"{source}: no curve point: " + (f"all {len(bad):,} row(s) were bad; the first: {bad[0]}"
                                                             if bad else "the input has no rows"))
        notes: list[str] = []
        columns = model_columns(loaded, reader.columns, s.target or "", source, check_target=s.target is not None,
                                drop=s.drop, choose="--drop", notes=notes)
        if say is not None:
            for note in notes:
                say(note, "note")
        check_readable(reader, [*columns, s.target])
        missing = [f for f in s.curves.features if f not in columns]
        if missing:
            raise RunError(f"{source}: --feature {', '.join(missing)} is not among the model's inputs "
                           f"({', '.join(columns)})")
        curves = s.curves
        pdp = IPDPEstimator(loaded.predictor, columns, list(curves.features), grid_size=curves.grid_size,
                            grid=None if curves.grid is None else dict(curves.grid), alpha=curves.alpha,
                            smoothing=curves.smoothing, warm_up=curves.warm_up,
                            target_class=_class(loaded.predictor, s))
    except BaseException:
        reader.close()
        raise
    return _loop(settings, reader, pdp, columns, say)


def _loop(s: PDPSettings, reader: Any, pdp: Any, columns: list[str],
          say: Callable[[str, str | None], None] | None = None) -> Iterator[dict[str, Any]]:


    source = reader.name
    checker = RowChecker(source=source, target=s.target or "", columns=columns, to_label=lambda label: None,
                         check_columns=False, learn=False, on_bad_row=s.reading.on_bad_row)
    last: tuple[int, Any, Any] | None = None  # the last row folded in: its number, grids and curves
    stop: tuple[InputError, BaseException | None] | None = None  # the bad row to stop at, and its cause
    try:
        for batch in reader.batches(s.reading.batch_size):
            rows, bad = checker.check(batch)
            if bad is not None:
                stop = (bad, None)
            good, values = [], []
            for row in rows:
                try:
                    values.append(_row_values(row, columns, s.curves.features, source))
                except InputError as error:
                    if s.reading.on_bad_row == "fail":
                        stop = (error, None)
                        break
                    checker.skip(error)
                    continue
                good.append(row)
            while good:
                array = _block(values)
                failure: InputError | None = None
                cause: BaseException | None = None
                try:
                    curves, grids = pdp.explain_many(array, return_grids=True)
                    done = len(good)
                except ModelCallError as error:  # the model failed on a row: the rows before it are folded in
                    failing = _failing_row(pdp, good, array, columns, source, error)
                    if failing is None:
                        raise
                    done, failure = failing
                    if done:
                        curves, grids = pdp.explain_many(array[:done], return_grids=True)
                    cause = error
                if done:
                    yield from _due(s, good[:done], curves, grids, pdp.n_seen)
                    last = (good[done - 1].number, grids[done - 1], curves[done - 1])
                if failure is None:
                    break
                if s.reading.on_bad_row == "fail":
                    stop = (failure, cause)
                    break
                checker.skip(failure)
                good, values = good[done + 1:], values[done + 1:]
            if stop is not None:
                break
        if last is not None and last[0] % s.every != 0 and pdp.n_explained:  # the last row's curves
            yield from _records(last[0], s.curves.features, last[1], last[2])
        if stop is not None:
            stopped, stopped_by = stop
            if stopped_by is not None:
                raise stopped from stopped_by
            raise stopped
        if not pdp.n_explained:
            seen = f"the input has {pdp.n_seen} row(s)" + (f" ({checker.skipped:,} bad ones skipped besides)"
                                                            if checker.skipped else "")
            raise RunError(f"{source}: no curve point: " + (
                f"{seen}, the warm-up takes {s.curves.warm_up}" if pdp.n_seen
                else checker.all_bad() if checker.skipped else "the input has no rows"))
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the curves after the last whole batch, as at the end
        if last is not None and last[0] % s.every != 0 and pdp.n_explained:
            yield from _records(last[0], s.curves.features, last[1], last[2])
        raise Interrupted(last[0] if last is not None else 0) from None
    finally:
        reader.close()
        summary = checker.skipped_summary()
        if summary and say is not None:
            say(summary, "warning")


class Interrupted(KeyboardInterrupt):
    """The run was interrupted after ``rows`` input rows; their curves are written."""

    def __init__(self, rows: int) -> None:
        super().__init__(rows)
        self.rows = rows


def _due(s: PDPSettings, rows: list[Any], curves: Any, grids: Any, n_seen: int) -> Iterator[dict[str, Any]]:
    """The records due after ``rows``, the last ``len(rows)`` of the ``n_seen`` rows folded in."""
    for i, row in enumerate(rows):
        if row.number % s.every == 0 and n_seen - len(rows) + i + 1 > s.curves.warm_up:
            yield from _records(row.number, s.curves.features, grids[i], curves[i])


def _failing_row(pdp: Any, good: list[Any], values: Any, columns: list[str], source: str,
                 error: ModelCallError) -> tuple[int, InputError] | None:
    """The first row of a batch the model fails on alone, and the error naming it (and its column, found
    with a row before it that the model takes); ``None`` when every row alone predicts."""
    from ipfi_cli.run.failures import failing_column, failure_message

    reference: dict[str, Any] | None = None
    for at, row in enumerate(good):
        x = dict(zip(columns, values[at].tolist()))
        try:
            pdp.model.predict_records([x], pdp.output, pdp.target_class)
        except ServiceError:  # the model cannot be reached: about no row
            raise
        except IpfiError as own:
            column = failing_column(pdp.model, columns, x, pdp.target_class, pdp.output, reference)
            return at, InputError(failure_message(source, row.number, row.line, x, columns, own, column))
        reference = x
    return None


def _records(number: int, features: Sequence[str], grids: Any, curves: Any) -> Iterator[dict[str, Any]]:
    for f, name in enumerate(features):
        for grid, value in zip(grids[f].tolist(), curves[f].tolist()):
            yield {"row": number, "feature": name, "grid": grid, "pd": value}
