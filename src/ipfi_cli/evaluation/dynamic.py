"""Experiment B: a learning model, iPFI traces vs interval PFI every ``interval`` rows.

One prequential pass (:func:`~ipfi_cli.core.prequential.explain_then_learn`) drives
everything, so the model learns each row exactly once whatever is compared:

* one :class:`~ipfi_cli.core.IPFIEstimator` per sampling strategy explains row ``t``
  with the model ``h_t``; extra smoothing rates (``alphas[1:]``) reuse that explainer's
  per-row contributions (``last_contributions``) through the core's own
  :class:`~ipfi_cli.core.ExponentialMean`, so a second alpha costs no model call;
* after the model learned the row, :class:`~ipfi_cli.core.IntervalPFIEstimator` gathers it and
  computes batch PFI of the model as it is at the end of each window of ``interval`` rows.

At each window's end the iPFI estimate after that row is compared with the window's
interval PFI (the paper's error, :func:`~ipfi_cli.evaluation.metrics.importance_error`).
With ``drift_at`` the errors are summarised over the whole stream, before the drift
(windows ending at or before row ``drift_at``) and after it, as in the supplement's tables.

>>> import numpy as np
>>> from river import linear_model
>>> from ipfi_cli.models import as_predictor
>>> rng = np.random.default_rng(0)
>>> stream = [({"a": a, "b": b}, 2.0 * a) for a, b in rng.random((600, 2))]
>>> result = compare_learning(as_predictor(linear_model.LinearRegression()), stream, ["a", "b"],
...                           interval=200, loss="absolute", alphas=(0.01, 0.05), seed=0, drift_at=300)
>>> [t.label for t in result.traces], [p.row for p in result.intervals]
(['ipfi-geometric-0.01', 'ipfi-geometric-0.05'], [200, 400, 600])
>>> sorted(result.summary()["ipfi-geometric-0.01"])
['after', 'before', 'whole']
"""

from __future__ import annotations

import collections
import itertools
import os
import pickle
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ipfi_cli.core import ExponentialMean, IntervalPFIEstimator, IPFIEstimator, PFIResult, explain_then_learn
from ipfi_cli.core.losses import Loss
from ipfi_cli.core.params import DEFAULT_ALPHA
from ipfi_cli.core.predictor import Predictor
from ipfi_cli.evaluation.metrics import ErrorSummary, importance_error, summarise
from ipfi_cli.evaluation.records import FeatureComparison, compare_vectors, sampling_slot


@dataclass
class Trace:
    """iPFI estimates of one (sampling, alpha) over the stream."""

    sampling: str
    alpha: float
    rows: list[int] = field(default_factory=list)  # rows seen (1-based) when recorded
    values: list[np.ndarray] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"ipfi-{self.sampling}-{self.alpha:g}"

    def array(self) -> np.ndarray:
        return np.array(self.values)


@dataclass(frozen=True)
class IntervalPoint:
    """Interval PFI of one window: rows ``start + 1 .. row`` (1-based), model as at row ``row``."""

    start: int
    row: int
    result: PFIResult
    ipfi: dict[str, np.ndarray]  # each trace's estimate after row ``row``, by label
    errors: dict[str, float]


@dataclass
class LearningComparison:
    names: list[str]
    traces: list[Trace]
    intervals: list[IntervalPoint]
    drift_at: int | None
    n_rows: int
    seconds: float
    losses: list[float] = field(default_factory=list)  # per-row prequential loss (model before learning)
    loss_rows: list[int] = field(default_factory=list)
    normalisation: str = "sum"
    settings: dict[str, Any] = field(default_factory=dict)
    cpu_seconds: float = 0.0  # CPU time of the run (this process's, summed over resumed parts)

    def errors(self, label: str, part: str = "whole") -> np.ndarray:
        points = self.intervals
        if part == "before":
            points = [p for p in points if self.drift_at is not None and p.row <= self.drift_at]
        elif part == "after":
            points = [p for p in points if self.drift_at is not None and p.row > self.drift_at]
        elif part != "whole":
            raise ValueError(f"part must be whole, before or after, got {part!r}")
        return np.array([p.errors[label] for p in points])

    def summary(self) -> dict[str, dict[str, ErrorSummary]]:
        """Per trace label: the error's summary over the whole stream (and before/after the drift)."""
        parts = ["whole"] + (["before", "after"] if self.drift_at is not None else [])
        return {t.label: {part: summarise(self.errors(t.label, part)) for part in parts} for t in self.traces}

    def trace_table(self) -> list[dict[str, Any]]:
        """Wide trace records for plotting: ``method, row, <one column per feature>``.

        ``method`` is each trace's label (``ipfi-<sampling>-<alpha>``), then ``interval``
        with ``row`` the window's last row (1-based); its value holds over the window.
        """
        out: list[dict[str, Any]] = []
        for trace in self.traces:
            for row, values in zip(trace.rows, trace.values):
                out.append({"method": trace.label, "row": row, **dict(zip(self.names, values.tolist()))})
        for point in self.intervals:
            out.append({"method": "interval", "row": point.row, **point.result.as_dict()})
        return out

    def records(self) -> list[FeatureComparison]:
        """Per interval point: interval PFI per feature, then each trace compared with it."""
        out: list[FeatureComparison] = []
        for point in self.intervals:
            reference = np.asarray(point.result.mean)
            std = point.result.std
            out.extend(FeatureComparison(method="interval", feature=name, importance=float(reference[j]),
                                         row=point.row, std=float(std[j]), n_repeats=point.result.n_repeats,
                                         reference=float(reference[j]))
                       for j, name in enumerate(self.names))
            for trace in self.traces:
                out.extend(compare_vectors(self.names, point.ipfi[trace.label], reference, method="ipfi",
                                           normalisation=self.normalisation, sampling=trace.sampling,
                                           alpha=trace.alpha, row=point.row))
        return out


class _Explainers:
    """Explains one row with every explainer (what explain_then_learn calls ``explainer``)."""

    def __init__(self, explainers: list[IPFIEstimator], extra: list[list[ExponentialMean]]) -> None:
        self.explainers = explainers
        self.extra = extra

    def explain_one(self, x: Mapping[str, Any], y: Any) -> list[np.ndarray]:
        out = []
        for explainer, smoothers in zip(self.explainers, self.extra):
            before = explainer.n_explained
            out.append(explainer.explain_one(x, y))
            if smoothers and explainer.n_explained > before:
                contributions = explainer.last_contributions.mean(axis=0)
                for smoother in smoothers:
                    smoother.update(contributions)
            for smoother in smoothers:
                out.append(np.array(smoother.mean, dtype=np.float64))
        return out


class _LearnThenWindow:
    """Learns the row, then hands it to interval PFI (what explain_then_learn calls ``learner``)."""

    def __init__(self, predictor: Predictor, interval: IntervalPFIEstimator) -> None:
        self.predictor = predictor
        self.interval = interval
        self.last: PFIResult | None = None

    def learn_one(self, x: dict[str, Any], y: Any) -> None:
        self.predictor.learn_one(x, y)
        self.last = self.interval.update(x, y)


def compare_learning(
    predictor: Predictor,
    stream: Iterable[tuple[Mapping[str, Any], Any]],
    columns: Sequence[str],
    *,
    interval: int,
    samplings: Sequence[str] = ("geometric",),
    alphas: Sequence[float] = (DEFAULT_ALPHA,),
    loss: str | Loss = "zero-one",
    n_repeats: int = 10,
    reservoir_size: int = 100,
    features: Sequence[str] | None = None,
    groups: Mapping[str, Sequence[str]] | None = None,
    seed: int | None = None,
    drift_at: int | None = None,
    trace_every: int = 1,
    n_jobs: int | None = None,
    normalisation: str = "sum",
    on_row: Callable[[int], None] | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
    learn_first: bool = False,
) -> LearningComparison:
    """Experiment B on one learning model and stream (see the module docstring).

    ``trace_every`` keeps the traces after rows ``trace_every``, 2 x ``trace_every``, ... (as
    ``explain --every``), at window ends and after the last row.
    ``on_row(rows_seen)`` is called after each row (progress display).

    ``checkpoint``: a file where the whole run (the model, the explainers, the window of
    interval PFI, the traces so far) is saved at the end of every window. When the file
    exists, the run continues from it: it skips the rows the saved run had seen, so give
    the same stream and settings (other settings, or a stream whose last skipped row differs,
    are refused). A run that stopped and
    continued ends with the numbers of one that never stopped; it goes on with the saved
    model, not with ``predictor``. The file is a pickle, which runs code when loaded: give
    only a file this function wrote.

    ``learn_first``: the model learns each row before it is explained (the order of the
    paper's published experiment code), instead of after (prequential, the default): iPFI
    then measures the model on the row it has just learned, as interval PFI measures the
    model at a window's end on rows it has learned.
    """
    if not predictor.can_learn:
        raise ValueError("the model cannot learn one row at a time (learn_one); "
                         "a learning comparison needs an incremental model such as a river model")
    if trace_every < 1:
        raise ValueError(f"trace_every must be at least 1, got {trace_every}")
    if not alphas:
        raise ValueError("give at least one alpha")
    columns = [str(c) for c in columns]
    samplings = list(dict.fromkeys(samplings))
    alphas = list(dict.fromkeys(float(a) for a in alphas))
    explainer_seeds, interval_seed = np.random.SeedSequence(seed).spawn(2)
    children = explainer_seeds.spawn(2)
    explainers: list[IPFIEstimator] = []
    extra: list[list[ExponentialMean]] = []
    traces: list[Trace] = []
    for sampling in samplings:
        explainer = IPFIEstimator(predictor, columns, loss=loss, alpha=alphas[0], n_repeats=n_repeats,
                                   sampling=sampling, reservoir_size=reservoir_size, features=features,
                                   groups=groups, seed=int(children[sampling_slot(sampling)].generate_state(1)[0]))
        explainers.append(explainer)
        extra.append([ExponentialMean(a, len(explainer.names)) for a in alphas[1:]])
        traces.extend(Trace(sampling, a) for a in alphas)
    names = explainers[0].names
    window = IntervalPFIEstimator(predictor, columns, interval, loss=loss, n_repeats=n_repeats, features=features,
                         groups=groups, seed=int(interval_seed.generate_state(1)[0]), n_jobs=n_jobs)
    fan_out = _Explainers(explainers, extra)
    learner = _LearnThenWindow(predictor, window)
    intervals: list[IntervalPoint] = []
    losses: list[float] = []
    loss_rows: list[int] = []
    start, cpu_start = time.perf_counter(), time.process_time()
    seen = 0
    window_start = 0
    settings = dict(interval=interval, samplings=samplings, alphas=alphas, n_repeats=n_repeats,
                    reservoir_size=reservoir_size, seed=seed, drift_at=drift_at,
                    loss=getattr(explainers[0].loss, "name", str(loss)))
    fingerprint = {**settings, "columns": columns, "features": features, "groups": groups,
                   "trace_every": trace_every, "normalisation": normalisation, "learn_first": learn_first,
                   "model": type(getattr(predictor, "model", predictor)).__qualname__}
    if checkpoint is not None and os.path.exists(checkpoint):
        with open(checkpoint, "rb") as f:
            saved = pickle.load(f)  # noqa: S301  # our own file (see the docstring)
        theirs = saved.get("fingerprint") or {}
        differ = sorted(k for k in {*fingerprint, *theirs} if theirs.get(k) != fingerprint.get(k))
        if differ:
            raise ValueError(f"the checkpoint {os.fspath(checkpoint)!r} is of another run (other {', '.join(differ)}); "
                             "remove it or give another file")
        fan_out, learner = saved["fan_out"], saved["learner"]
        explainers, traces, intervals = fan_out.explainers, saved["traces"], saved["intervals"]
        losses, loss_rows = saved["losses"], saved["loss_rows"]
        seen, window_start = saved["seen"], saved["window_start"]
        start -= saved["seconds"]
        cpu_start -= saved["cpu_seconds"]
        stream = iter(stream)
        skipped = collections.deque(itertools.islice(stream, seen), maxlen=1)  # another stream would give wrong numbers
        if "last_row" in saved and repr(skipped[0] if skipped else None) != saved["last_row"]:
            raise ValueError(f"the checkpoint {os.fspath(checkpoint)!r} was made on another stream (row {seen} "
                             "differs); give the stream it was made on, or remove it")
    last_row: list[Any] = [None]

    def remembered(rows: Iterable[Any]) -> Iterator[Any]:
        for row in rows:
            last_row[0] = row
            yield row

    stream = remembered(stream)
    estimates: Any = []
    steps = (_learn_then_explain if learn_first else explain_then_learn)(fan_out, learner, stream)  # type: ignore[arg-type]
    for estimates in steps:
        seen += 1
        losses.append(explainers[0].last_loss)
        loss_rows.append(seen)
        result = learner.last
        keep = result is not None or seen % trace_every == 0  # rows N, 2N, ... as explain --every
        if keep:
            for trace, values in zip(traces, estimates):
                trace.rows.append(seen)
                trace.values.append(values)
        if result is not None:
            now = {trace.label: values for trace, values in zip(traces, estimates)}
            reference = np.asarray(result.mean)
            errors = {label: importance_error(values, reference, normalisation) for label, values in now.items()}
            intervals.append(IntervalPoint(window_start, seen, result, now, errors))
            window_start = seen
            if checkpoint is not None:
                _save_checkpoint(checkpoint, {
                    "fingerprint": fingerprint, "fan_out": fan_out, "learner": learner, "traces": traces,
                    "intervals": intervals, "losses": losses, "loss_rows": loss_rows, "seen": seen,
                    "window_start": window_start, "last_row": repr(last_row[0]),
                    "seconds": time.perf_counter() - start,
                    "cpu_seconds": time.process_time() - cpu_start})
        if on_row is not None:
            on_row(seen)
    # the last, partial window is not flushed: its interval PFI would rest on fewer rows
    if traces and (not traces[0].rows or traces[0].rows[-1] != seen) and seen:
        for trace, values in zip(traces, estimates):
            trace.rows.append(seen)
            trace.values.append(values)
    return LearningComparison(names=names, traces=traces, intervals=intervals, drift_at=drift_at, n_rows=seen,
                              seconds=time.perf_counter() - start, losses=losses, loss_rows=loss_rows,
                              normalisation=normalisation, settings=settings,
                              cpu_seconds=time.process_time() - cpu_start)


def _learn_then_explain(explainer: _Explainers, learner: _LearnThenWindow,
                        stream: Iterable[tuple[Mapping[str, Any], Any]]) -> Iterator[list[np.ndarray]]:
    """:func:`~ipfi_cli.core.prequential.explain_then_learn` in the other order: learn the row, then explain it."""
    for x, y in stream:
        learner.learn_one(x if isinstance(x, dict) else dict(x), y)
        yield explainer.explain_one(x, y)


def _save_checkpoint(path: str | os.PathLike[str], state: dict[str, Any]) -> None:
    """Pickle ``state`` to ``path`` through a file beside it, so a stop while writing keeps the last one."""
    partial = f"{os.fspath(path)}.partial"
    with open(partial, "wb") as f:
        pickle.dump(state, f, protocol=pickle.HIGHEST_PROTOCOL)
        f.flush()
        os.fsync(f.fileno())
    os.replace(partial, path)
