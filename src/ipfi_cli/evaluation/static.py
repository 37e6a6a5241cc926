"""Experiment A: iPFI of a static model over random orderings of the data vs batch PFI.

Batch PFI does not depend on the order of the rows, so it is computed **once** on the
whole data and every iPFI run (each sampling strategy on each ordering) is compared
with it. Each iPFI run streams the rows of one ordering through
:meth:`IPFIEstimator.explain_many` in chunks (one model call per chunk), and its final
estimates are compared with batch PFI using :func:`~ipfi_cli.evaluation.metrics.importance_error`.
Runs are independent, so ``n_jobs`` spreads them (and batch PFI's groups) over joblib workers.

Seeds: ``SeedSequence(seed)`` spawns one child for batch PFI, one per ordering (the
permutation) and one per (ordering, sampling) run (the explainer), so a run's numbers
depend neither on ``n_jobs`` nor on which other samplings are run.

>>> import numpy as np
>>> from ipfi_cli.models import FunctionPredictor
>>> rng = np.random.default_rng(0)
>>> X = rng.random((3000, 3))
>>> y = (X[:, 0] + 0.5 * X[:, 1] > 0.75).astype(int)
>>> model = FunctionPredictor(lambda B: (B[:, 0] + 0.5 * B[:, 1] > 0.75).astype(int))
>>> result = compare_static(model, X, y, ["a", "b", "c"], orderings=3, alpha=0.01, n_repeats=5, seed=0)
>>> sorted(result.summary())
['geometric', 'uniform']
>>> result.summary()["uniform"].median < 0.1
True
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ipfi_cli.core import batch_pfi
from ipfi_cli.core.batch import as_block
from ipfi_cli.core.explainer import make_explainer
from ipfi_cli.core.losses import Loss, get_loss
from ipfi_cli.core.params import DEFAULT_ALPHA
from ipfi_cli.core.predictor import Predictor
from ipfi_cli.evaluation.metrics import ErrorSummary, importance_error, summarise
from ipfi_cli.evaluation.records import FeatureComparison, compare_vectors, sampling_slot

#: how many model rows (time steps x evaluation block rows) one explain_many call may build
CHUNK_MODEL_ROWS = 400_000


@dataclass(frozen=True)
class StaticRun:
    """One iPFI run: a sampling strategy on one ordering of the rows."""

    sampling: str
    ordering: int
    estimates: np.ndarray  # (G,) after the last row
    error: float
    seconds: float
    trace_rows: np.ndarray | None = None  # stream positions (0-based) of the trace rows
    trace: np.ndarray | None = None  # (T, G) estimates after those rows


@dataclass
class StaticComparison:
    """Batch PFI once, and every iPFI run compared with it."""

    names: list[str]
    batch: Any  # a PFIResult, or with method "sage" a SAGEResult (its std is a standard error)
    batch_seconds: float
    runs: list[StaticRun]
    normalisation: str = "sum"
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def samplings(self) -> list[str]:
        return list(dict.fromkeys(run.sampling for run in self.runs))

    def errors(self, sampling: str) -> np.ndarray:
        return np.array([run.error for run in self.runs if run.sampling == sampling])

    def summary(self) -> dict[str, ErrorSummary]:
        """Median and IQR of the error per sampling strategy (the paper's Table 1)."""
        return {s: summarise(self.errors(s)) for s in self.samplings}

    def trace_table(self) -> list[dict[str, Any]]:
        """Wide trace records of the runs that kept traces, then batch PFI at the last row.

        ``method`` is ``ipfi-<sampling>-<alpha>`` (``row`` 1-based position in that
        ordering) or ``batch`` (one record, ``row`` = number of rows: it covers them all).
        """
        alpha = self.settings.get("alpha", float("nan"))
        out: list[dict[str, Any]] = []
        for run in self.runs:
            if run.trace is None or run.trace_rows is None:
                continue
            label = f"{self.incremental}-{run.sampling}-{alpha:g}"
            for row, values in zip(run.trace_rows.tolist(), run.trace.tolist()):
                out.append({"method": label, "row": row + 1, **dict(zip(self.names, values))})
        out.append({"method": self.reference, "row": self.batch.n_rows, **self.batch.as_dict()})
        return out

    @property
    def incremental(self) -> str:
        """The incremental method's name in records: ``ipfi`` or ``isage``."""
        return "isage" if self.settings.get("method") == "sage" else "ipfi"

    @property
    def reference(self) -> str:
        """The batch method's name in records: ``batch`` (PFI) or ``batch-sage``."""
        return "batch-sage" if self.settings.get("method") == "sage" else "batch"

    def records(self) -> list[FeatureComparison]:
        """Batch PFI per feature, then every run's per-feature comparison with it."""
        reference = np.asarray(self.batch.mean)
        out = [FeatureComparison(method=self.reference, feature=name, importance=float(reference[j]),
                                 std=float(self.batch.std[j]), n_repeats=self.batch.n_repeats,
                                 reference=float(reference[j]))
               for j, name in enumerate(self.names)]
        for run in self.runs:
            out.extend(compare_vectors(self.names, run.estimates, reference, method=self.incremental,
                                       normalisation=self.normalisation, sampling=run.sampling,
                                       ordering=run.ordering, alpha=self.settings.get("alpha")))
        return out


def _run(predictor: Predictor, block: np.ndarray, targets: np.ndarray, columns: list[str],
         order: np.ndarray, sampling: str, ordering: int, explainer_seed: int, reference: np.ndarray,
         options: dict[str, Any], keep_trace: bool, trace_every: int, normalisation: str) -> StaticRun:
    start = time.perf_counter()
    options = dict(options)
    explainer = make_explainer(options.pop("method"), predictor, columns, sampling=sampling, seed=explainer_seed,
                               **options)
    chunk = max(1, CHUNK_MODEL_ROWS // getattr(explainer, "block_rows", 1 + len(columns)))
    trace_rows: list[np.ndarray] = []
    trace: list[np.ndarray] = []
    n = len(order)
    for begin in range(0, n, chunk):
        index = order[begin:begin + chunk]
        estimates = explainer.explain_many(block[index], targets[index].tolist())
        if keep_trace:
            positions = np.arange(begin, begin + len(index))
            keep = ((positions + 1) % trace_every == 0) | (positions == n - 1)  # rows N, 2N, ... as --every
            trace_rows.append(positions[keep])
            trace.append(estimates[keep])
    final = explainer.importance_array()
    return StaticRun(sampling=sampling, ordering=ordering, estimates=final,
                     error=importance_error(final, reference, normalisation),
                     seconds=time.perf_counter() - start,
                     trace_rows=np.concatenate(trace_rows) if keep_trace else None,
                     trace=np.concatenate(trace) if keep_trace else None)


def compare_static(
    predictor: Predictor,
    rows: Any,
    targets: Sequence[Any],
    columns: Sequence[str],
    *,
    orderings: int = 1,
    samplings: Sequence[str] = ("uniform", "geometric"),
    shuffle: bool = True,
    loss: str | Loss = "zero-one",
    alpha: float = DEFAULT_ALPHA,
    n_repeats: int = 10,
    reservoir_size: int = 100,
    features: Sequence[str] | None = None,
    groups: Mapping[str, Sequence[str]] | None = None,
    seed: int | None = None,
    n_jobs: int | None = None,
    normalisation: str = "sum",
    keep_traces: bool = False,
    trace_every: int = 1,
    batch: Any = None,
    on_run: Callable[[StaticRun], None] | None = None,
    skip: Collection[tuple[int, str]] = (),
    method: str = "pfi",
    n_inner: int | None = None,
    permutations: int = 2000,
    empty: str = "imputed",
) -> StaticComparison:
    """Experiment A on one model and data set (see the module docstring).

    ``orderings`` random permutations of the rows are streamed (``shuffle=False``
    with one ordering keeps the rows' own order). ``batch`` may pass a batch PFI
    already computed on the same rows (it is not recomputed). ``keep_traces`` keeps
    ordering 0's estimates after rows ``trace_every``, 2 x ``trace_every``, ... and the last, for
    plotting. ``on_run`` is called with each finished run (in submission order), e.g. to write partial results.
    ``skip`` lists ``(ordering, sampling)`` runs not to do (finished by an earlier, stopped
    call with the same seed): the others get exactly the numbers they would have had.

    ``method="sage"`` compares iSAGE (``n_inner`` imputations per coalition, by default
    :func:`~ipfi_cli.core.sage_game.default_inner`'s; the empty coalition scored as ``empty``
    says; like with like) with batch SAGE of the same game (:func:`~ipfi_cli.core.sage.batch_sage` with ``n_inner``
    background rows drawn per coalition from all the rows, ``permutations`` samples); ``batch``
    may then pass a batch SAGE result.
    """
    columns = [str(c) for c in columns]
    block = as_block(rows, columns, exact=not getattr(predictor, "supports_batch", False))
    target_array = np.empty(len(block), dtype=object)
    target_array[:] = list(targets)
    if orderings < 1:
        raise ValueError(f"orderings must be at least 1, got {orderings}")
    if not shuffle and orderings != 1:
        raise ValueError("without shuffling there is only one ordering (the rows' own)")
    if trace_every < 1:
        raise ValueError(f"trace_every must be at least 1, got {trace_every}")
    samplings = list(dict.fromkeys(samplings))
    root = np.random.SeedSequence(seed)
    batch_seed, order_seeds, run_seeds = root.spawn(3)
    order_children = order_seeds.spawn(orderings)
    run_children = [s.spawn(2) for s in run_seeds.spawn(orderings)]  # [ordering][uniform, geometric]
    for s in samplings:
        sampling_slot(s)  # an unknown sampling fails before any work

    if method == "sage" and n_inner is None:
        from ipfi_cli.core.sage_game import default_inner

        n_inner = default_inner(get_loss(loss), empty)
    start = time.perf_counter()
    if batch is None and method == "sage":
        from ipfi_cli.core.sage import batch_sage

        batch = batch_sage(predictor, block, target_array, columns, loss=loss, n_permutations=permutations,
                           n_inner=n_inner, groups=groups, seed=int(batch_seed.generate_state(1)[0]), empty=empty)
    elif batch is None:
        batch = batch_pfi(predictor, block, target_array, columns, loss=loss, n_repeats=n_repeats,
                          features=features, groups=groups,
                          seed=int(batch_seed.generate_state(1)[0]), n_jobs=n_jobs)
    batch_seconds = time.perf_counter() - start
    reference = np.asarray(batch.mean)

    options: dict[str, Any] = dict(method=method, loss=loss, alpha=alpha, n_repeats=n_repeats,
                                   reservoir_size=reservoir_size, features=features, groups=groups)
    if method == "sage":
        options["n_inner"] = n_inner
        options["empty"] = empty
    n = len(block)
    tasks = []
    for k in range(orderings):
        order = np.random.default_rng(order_children[k]).permutation(n) if shuffle else np.arange(n)
        for sampling in samplings:
            run_seed = int(run_children[k][sampling_slot(sampling)].generate_state(1)[0])
            if (k, sampling) in skip:
                continue
            tasks.append((order, sampling, k, run_seed, keep_traces and k == 0))
    args = (predictor, block, target_array, columns)
    runs: list[StaticRun] = []
    if n_jobs is None or n_jobs == 1 or len(tasks) == 1:
        for order, sampling, k, run_seed, trace in tasks:
            run = _run(*args, order, sampling, k, run_seed, reference, options, trace, trace_every, normalisation)
            runs.append(run)
            if on_run is not None:
                on_run(run)
    else:
        from joblib import Parallel, delayed

        parallel = Parallel(n_jobs=n_jobs, return_as="generator")
        for run in parallel(delayed(_run)(*args, order, sampling, k, run_seed, reference, options, trace,
                                          trace_every, normalisation)
                            for order, sampling, k, run_seed, trace in tasks):
            runs.append(run)
            if on_run is not None:
                on_run(run)
    settings = dict(options, orderings=orderings, samplings=samplings, shuffle=shuffle, seed=seed,
                    n_rows=n, loss=getattr(options["loss"], "name", options["loss"]))
    if method == "sage":
        settings["permutations"] = permutations
    return StaticComparison(names=list(batch.names), batch=batch, batch_seconds=batch_seconds, runs=runs,
                            normalisation=normalisation, settings=settings)
