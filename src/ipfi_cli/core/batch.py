"""Batch PFI (the paper's eq. 3) and interval PFI, the baselines iPFI is compared with.

Batch PFI of group ``S`` on ``N`` rows with ``M`` random permutations ``pi_m``::

    PFI(S) = N / (N - 1) * 1/M * sum_m 1/N * sum_n [loss(h(x_n with S from x_pi_m(n)), y_n) - loss(h(x_n), y_n)]

The ``N / (N - 1)`` factor makes it unbiased: a permutation's fixed points contribute
zero, and on average ``1`` of the ``N`` rows is one. Each group gets its own random
stream (``SeedSequence(seed).spawn``), so groups are permuted independently and the
result does not depend on ``n_jobs``.

>>> import numpy as np
>>> from ipfi_cli.models import FunctionPredictor
>>> rng = np.random.default_rng(0)
>>> X = rng.random((2000, 2))
>>> y = (X[:, 0] > 0.5).astype(int)
>>> result = batch_pfi(FunctionPredictor(lambda B: (B[:, 0] > 0.5).astype(int)), X, y,
...                    ["a", "b"], loss="zero-one", n_repeats=5, seed=0)
>>> [round(v, 1) for v in result.mean]
[0.5, 0.0]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from ipfi_cli.core.groups import resolve_groups
from ipfi_cli.core.losses import Loss, Output, UnmeasurableError, get_loss, unmeasurable
from ipfi_cli.core.predictor import Predictor

#: ``runner(function, shared, tasks) -> [function(*task, *shared) for task in tasks]``, run anywhere
TaskRunner = Callable[[Callable[..., Any], Sequence[Any], Sequence[Sequence[Any]]], list[Any]]


@dataclass(frozen=True)
class PFIResult:
    """Batch PFI per feature or group.

    ``values[g, m]`` is repeat ``m``'s scaled estimate; ``mean`` averages the repeats;
    ``std`` is their standard deviation with ``ddof=1`` (the spread of one repeat, not
    the standard error of the mean: divide by ``sqrt(n_repeats)`` for that).
    """

    names: list[str]
    values: np.ndarray
    n_rows: int
    baseline_loss: float

    @property
    def mean(self) -> list[float]:
        return cast(list[float], self.values.mean(axis=1).tolist())

    @property
    def std(self) -> list[float]:
        if self.values.shape[1] < 2:
            return [float("nan")] * len(self.names)
        return cast(list[float], self.values.std(axis=1, ddof=1).tolist())

    @property
    def n_repeats(self) -> int:
        return int(self.values.shape[1])

    def as_dict(self) -> dict[str, float]:
        return dict(zip(self.names, self.mean))


def as_block(rows: Any, columns: Sequence[str], *, exact: bool = False) -> np.ndarray:
    """Rows (a 2-D array, a DataFrame or a list of dicts) as a 2-D array in ``columns`` order:
    float64 when every column is numeric, else object.

    ``exact`` keeps every value as it came (an object block: an ``int`` stays an ``int``), for
    a model that takes records: a river ``OneHotEncoder`` that learned the category ``2``
    does not know ``2.0``.

    >>> import pandas as pd
    >>> frame = pd.DataFrame({"store": [1, 2], "x": [0.5, 1.5]})
    >>> as_block(frame, ["store", "x"]).tolist(), as_block(frame, ["store", "x"], exact=True).tolist()
    ([[1.0, 0.5], [2.0, 1.5]], [[1, 0.5], [2, 1.5]])
    """
    if hasattr(rows, "to_numpy") and hasattr(rows, "columns"):
        frame = rows[list(columns)]
        numeric = not exact and all(kind in "biuf" for kind in (dt.kind for dt in frame.dtypes))
        return cast(np.ndarray, frame.to_numpy(dtype=np.float64 if numeric else object))
    if isinstance(rows, np.ndarray):
        if rows.ndim != 2 or rows.shape[1] != len(columns):
            raise ValueError(f"expected rows with {len(columns)} columns, got shape {rows.shape}")
        return rows
    values = [[r[c] for c in columns] for r in rows]
    block = np.array(values, dtype=object)
    if exact:
        return block
    try:
        return block.astype(np.float64)
    except (TypeError, ValueError):
        return block


def _predict(model: Predictor, block: np.ndarray, columns: Sequence[str], loss: Loss,
             targets: np.ndarray) -> np.ndarray:
    if loss.proba_class is not None:  # a label-free loss compares one class's probability
        targets = np.full(len(block), None, dtype=object)
        targets[:] = [loss.proba_class] * len(block)
    output_targets = targets if loss.output is Output.PROBA else None
    if getattr(model, "supports_batch", False):
        return np.asarray(model.predict_block(block, columns, loss.output, output_targets))
    records = [dict(zip(columns, r)) for r in block.tolist()]
    if loss.output is Output.PROBA:
        return np.array([model.predict_records([r], loss.output, t)[0] for r, t in zip(records, targets)])
    return np.asarray(model.predict_records(records, loss.output, None))


def _losses(model: Predictor, block: np.ndarray, columns: Sequence[str], loss: Loss,
            targets: np.ndarray) -> np.ndarray:
    predicted = np.asarray(_predict(model, block, columns, loss, targets))
    if predicted.dtype.kind in "US":
        predicted = predicted.astype(object)
    return loss.compute(targets, predicted)


#: the cells (rows x columns) of the permuted copies one model call predicts at most: several repeats
#: of a small table go in one call (one request to a served model instead of one per repeat)
STACK_CELLS = 1 << 22


def _group_repeats(cols: list[int], seed: np.random.SeedSequence, model: Predictor, block: np.ndarray,
                   columns: Sequence[str], loss: Loss, targets: np.ndarray, n_repeats: int,
                   baseline: np.ndarray) -> np.ndarray:
    """The ``n_repeats`` values of one group; the permuted copies are predicted as many repeats at a
    time as :data:`STACK_CELLS` allows, from the same permutations as one at a time."""
    rng = np.random.default_rng(seed)
    n = len(block)
    per_call = max(1, STACK_CELLS // max(1, n * block.shape[1]))
    values = np.empty(n_repeats)
    for start in range(0, n_repeats, per_call):
        count = min(per_call, n_repeats - start)
        permuted = np.tile(block, (count, 1))
        for m in range(count):
            order = rng.permutation(n)
            permuted[m * n:(m + 1) * n, cols] = block[order][:, cols]
        losses = _losses(model, permuted, columns, loss, np.tile(targets, count)).reshape(count, n)
        values[start:start + count] = n / (n - 1) * (losses - baseline).mean(axis=1)
    return values


def batch_pfi(
    model: Predictor,
    rows: Any,
    targets: Sequence[Any] | np.ndarray,
    columns: Sequence[str],
    *,
    loss: str | Loss = "zero-one",
    n_repeats: int = 10,
    features: Sequence[str] | None = None,
    groups: Mapping[str, Sequence[str]] | None = None,
    seed: int | None = None,
    n_jobs: int | None = None,
    runner: TaskRunner | None = None,
) -> PFIResult:
    """Batch PFI of a fixed model on ``rows`` (see the module docstring for the formula).

    ``n_jobs`` runs groups in parallel with joblib (its ``parallel_config`` picks the
    backend); ``runner`` runs them elsewhere (``runner(function, shared, tasks)`` returns
    ``[function(*task, *shared) for task in tasks]`` in order; for example on a Dask cluster,
    :func:`ipfi_cli.run.distributed.dask_runner`). The numbers are the same either way.
    """
    columns = [str(c) for c in columns]
    loss = get_loss(loss)
    resolved = resolve_groups(columns, features, groups)
    block = as_block(rows, columns, exact=not getattr(model, "supports_batch", False))
    target_array = np.empty(len(block), dtype=object)
    target_array[:] = list(targets)
    if len(block) < 2:
        raise ValueError(f"batch PFI needs at least 2 rows, got {len(block)}")
    if n_repeats < 1:
        raise ValueError(f"n_repeats must be at least 1, got {n_repeats}")
    if loss.relative:  # label-free: the unperturbed predictions are the targets (baseline loss 0)
        reference = np.asarray(_predict(model, block, columns, loss, target_array))
        target_array = reference.astype(object) if reference.dtype.kind in "US" else reference
    baseline = _losses(model, block, columns, loss, target_array)
    why = unmeasurable(loss, float(baseline.mean()), len(block))
    if why is not None:
        raise UnmeasurableError(why)
    seeds = np.random.SeedSequence(seed).spawn(len(resolved))
    tasks = [(cols, s) for cols, s in zip(resolved.values(), seeds)]
    shared: tuple[Any, ...] = (model, block, columns, loss, target_array, n_repeats, baseline)
    if runner is not None:
        values = runner(_group_repeats, shared, tasks)
    elif n_jobs is None or n_jobs == 1:
        values = [_group_repeats(cols, s, *shared) for cols, s in tasks]
    else:
        from joblib import Parallel, delayed

        values = Parallel(n_jobs=n_jobs)(delayed(_group_repeats)(cols, s, *shared) for cols, s in tasks)
    result = np.array(values, dtype=np.float64)
    if not np.isfinite(result).all():
        raise UnmeasurableError(unmeasurable(loss, float("inf"), len(block)) or "")
    return PFIResult(list(resolved), result, len(block), float(baseline.mean()))


@dataclass
class IntervalPFIEstimator:
    """Batch PFI over consecutive windows of a stream, with the model as it is at each window's end.

    Call :meth:`update` for every row (after the model learned it, in a prequential
    loop); it returns a :class:`PFIResult` when a window of ``interval`` rows is full.
    Window ``k`` uses seed ``SeedSequence(seed).spawn`` child ``k``.
    """

    model: Predictor
    columns: Sequence[str]
    interval: int
    loss: str | Loss = "zero-one"
    n_repeats: int = 10
    features: Sequence[str] | None = None
    groups: Mapping[str, Sequence[str]] | None = None
    seed: int | None = None
    n_jobs: int | None = None
    _rows: list[Any] = field(default_factory=list, init=False, repr=False)
    _targets: list[Any] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.interval < 2:
            raise ValueError(f"interval must be at least 2 rows, got {self.interval}")
        self._seed_sequence = np.random.SeedSequence(self.seed)

    def update(self, x: Mapping[str, Any], y: Any) -> PFIResult | None:
        self._rows.append(x)
        self._targets.append(y)
        if len(self._rows) < self.interval:
            return None
        return self.flush()

    def flush(self) -> PFIResult | None:
        """Compute PFI on the rows gathered so far (at least 2), and start a new window."""
        if len(self._rows) < 2:
            return None
        (window_seed,) = self._seed_sequence.spawn(1)
        result = batch_pfi(self.model, self._rows, self._targets, self.columns, loss=self.loss,
                           n_repeats=self.n_repeats, features=self.features, groups=self.groups,
                           seed=int(window_seed.generate_state(1)[0]), n_jobs=self.n_jobs)
        self._rows, self._targets = [], []
        return result
