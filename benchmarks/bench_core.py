"""Speed and memory of the iPFI core against the model calls it cannot avoid.

Run::

    python benchmarks/bench_core.py            # about 2-3 minutes
    python benchmarks/bench_core.py --quick    # about 30 seconds, fewer rows and repeats
    python benchmarks/bench_core.py --rows 4000 --repeats 5 --threads 2

Every figure is compared with a *floor* measured in the same run on the same rows:

1. Static scikit-learn ``HistGradientBoostingClassifier`` on river's Agrawal stream
   (9 features, M = 10, so 1 + 9 * 10 = 91 model rows per stream row): per-row time of
   ``explain_one`` and of ``explain_many`` in micro-batches, against the floor: predicting
   the very same perturbed rows (recorded in an untimed run) in large batches.
   Target: explain_many / floor <= 1.5.
2. A river ``HoeffdingTreeClassifier`` learning prequentially (explain row t, then
   ``learn_one``): per-row time against the bare calls the row needs: the same 91
   ``predict_one`` (zero-one loss) or ``predict_proba_one`` (log loss) calls on the same
   perturbed dicts, built before the timed region, plus one ``learn_one``.
   Target: <= 1.1 (the cost-of-a-row issue: <= 1.05). ipfi asks the model once per distinct
   perturbed row (a quarter repeat on Agrawal), the bare calls ask every one. And reservoir
   size 10,000 against 100, both reservoirs full (filled
   beforehand, untimed): target ratio about 1. The explainer alone (a constant model) is
   also shown for 100 / 1,000 / 10,000: its work per row does not depend on the size, but
   the 90 reads per row from a larger reservoir miss the CPU caches more often.
3. 200 numeric features: iPFI's time beyond the model calls, per feature per row, for a
   vectorised linear model (block path; target <= 5 microseconds; cross-checked with a model
   that returns zeros) and for a river-like model whose ``predict_one`` returns a constant
   (records path: the cost of building 2,000 dicts of 200 values per row).
4. Memory: pickled size and tracemalloc-traced memory of an explainer after 1k and 50k rows.

Timing: ``time.perf_counter``; one warm-up run, then every measurement is repeated and the
repeats of the measurements that are compared are interleaved (A, B, A, B, ...), so a burst
of load from other processes hits both. Ratios use the best (minimum) time of each side;
the ratio of medians is printed beside it as a check. Model thread pools (OpenMP, BLAS) are
limited to ``--threads`` (default 1): on a shared 2-core machine multi-threaded predictions
are too noisy to compare, and iPFI itself runs in one thread. ``--only 13`` runs parts 1 and 3.
"""

from __future__ import annotations

import argparse
import gc
import pickle
import platform
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

AGRAWAL_FEATURES = ["salary", "commission", "age", "elevel", "car", "zipcode", "hvalue", "hyears", "loan"]
M = 10  # n_repeats, as in the paper


# -- settings ----------------------------------------------------------------------------------
@dataclass
class Settings:
    rows: int  # stream rows for the HGB explain_many / floor and the memory check's first point
    one_rows: int  # rows timed with explain_one on the HGB (about 2 ms each)
    river_rows: int  # prequential rows on the Hoeffding tree
    wide_rows: int  # rows of the 200-feature stream (block path)
    wide_record_rows: int  # rows of the 200-feature stream (records path, ~3 ms each)
    memory_rows: tuple[int, int]  # stream lengths compared by the memory check
    repeats: int
    batch: int  # explain_many micro-batch (stream rows per model call)
    floor_chunk: int  # model rows per call of the floor
    train_rows: int
    threads: int
    seed: int

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Settings:
        if args.quick:
            rows = args.rows or 1500
            return cls(rows=rows, one_rows=min(rows, 200), river_rows=min(rows, 400), wide_rows=100,
                       wide_record_rows=15, memory_rows=(1_000, 10_000), repeats=args.repeats or 3,
                       batch=args.batch, floor_chunk=args.floor_chunk, train_rows=5_000,
                       threads=args.threads, seed=args.seed)
        rows = args.rows or 4000
        return cls(rows=rows, one_rows=min(rows, 600), river_rows=min(rows, 1200), wide_rows=300,
                   wide_record_rows=40, memory_rows=(1_000, 50_000), repeats=args.repeats or 5,
                   batch=args.batch, floor_chunk=args.floor_chunk, train_rows=20_000,
                   threads=args.threads, seed=args.seed)


# -- timing helpers ----------------------------------------------------------------------------
@dataclass
class Timing:
    """Repeated timings (seconds) of one measurement, and the units it is divided into."""

    label: str
    units: int  # e.g. stream rows: figures are per unit
    times: list[float] = field(default_factory=list)
    best_total: float | None = None  # set by paired_rows: the sum of every row's fastest repeat

    @property
    def best(self) -> float:
        total = self.best_total if self.best_total is not None else min(self.times)
        return total / self.units

    @property
    def median(self) -> float:
        return statistics.median(self.times) / self.units


def interleaved(cases: dict[str, tuple[int, Callable[[], float]]], repeats: int) -> dict[str, Timing]:
    """Run each case once as warm-up, then ``repeats`` rounds of every case in turn.

    A case is ``(units, run)``; ``run()`` does its own untimed set-up and returns the
    seconds of its timed region.
    """
    timings = {name: Timing(name, units) for name, (units, _) in cases.items()}
    for _, run in cases.values():
        run()
    for _ in range(repeats):
        for name, (_, run) in cases.items():
            gc.collect()
            timings[name].times.append(run())
    return timings


def paired_rows(cases: dict[Any, Callable[[], Callable[[int], None]]], n_rows: int,
                repeats: int) -> dict[Any, Timing]:
    """Time the cases row by row, side by side: for each row, every case's step runs back to
    back (the order alternating between rows), so a burst of load hits all cases alike.

    A case is a factory that builds fresh state (untimed) and returns ``step(i)``, the work of
    row ``i``. Round 0 is a warm-up. ``best`` is the sum over rows of each row's fastest
    repeat (every repeat does the same work on each row), ``median`` the median total.
    """
    names = list(cases)
    times = {name: np.zeros((repeats, n_rows)) for name in names}
    clock = time.perf_counter
    for r in range(repeats + 1):
        gc.collect()
        steps = [(name, make()) for name, make in cases.items()]
        for i in range(n_rows):
            for name, step in steps if i % 2 == 0 else reversed(steps):
                start = clock()
                step(i)
                elapsed = clock() - start
                if r:
                    times[name][r - 1, i] = elapsed
    return {name: Timing(str(name), n_rows, t.sum(axis=1).tolist(), best_total=float(t.min(axis=0).sum()))
            for name, t in times.items()}


def fmt_time(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:8.3f} ms"
    return f"{seconds * 1e6:8.2f} us"


class Report:
    """Collects lines of the table and the targets' verdicts."""

    def __init__(self) -> None:
        self.verdicts: list[tuple[str, str, str, bool | None]] = []

    @staticmethod
    def section(title: str, columns: tuple[str, str] = ("best", "median")) -> None:
        print(f"\n== {title}")
        print(f"   {'measurement':<72} {columns[0]:>11} {columns[1]:>11}")

    @staticmethod
    def timing(label: str, timing: Timing) -> None:
        print(f"   {label:<72} {fmt_time(timing.best):>11} {fmt_time(timing.median):>11}")

    @staticmethod
    def value(label: str, best: str, median: str = "") -> None:
        print(f"   {label:<72} {best:>11} {median:>11}")

    def ratio(self, label: str, num: Timing, den: Timing, target: float | None = None,
              approx: bool = False) -> float:
        best = num.best / den.best
        median = num.median / den.median
        note = ""
        if target is not None:
            met = abs(best - 1.0) <= target if approx else best <= target
            goal = f"~1 (within {target:.2f})" if approx else f"<= {target}"
            note = f"   target {goal}: {'MET' if met else 'MISSED'}"
            self.verdicts.append((label, goal, f"{best:.3f}", met))
        print(f"   {label:<72} {best:>11.3f} {median:>11.3f}{note}")
        return best

    def check(self, label: str, goal: str, measured: str, met: bool) -> None:
        self.verdicts.append((label, goal, measured, met))

    def summary(self) -> None:
        print("\n== Targets")
        width = max((len(label) for label, *_ in self.verdicts), default=10)
        for label, goal, measured, met in self.verdicts:
            print(f"   {label:<{width}} {measured:>11}   {goal:<16} {'MET' if met else 'MISSED'}")


# -- data ---------------------------------------------------------------------------------------
def agrawal(n: int, seed: int) -> list[tuple[dict[str, Any], int]]:
    from river.datasets import synth

    return list(synth.Agrawal(classification_function=1, seed=seed).take(n))


class RecordingPredictor:
    """Wraps a predictor and keeps a copy of every block / list of records it is asked for."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.supports_batch = inner.supports_batch
        self.blocks: list[np.ndarray] = []
        self.records: list[list[dict[str, Any]]] = []

    def predict_block(self, block, columns, output, targets):
        self.blocks.append(block.copy())
        return self.inner.predict_block(block, columns, output, targets)

    def predict_records(self, records, output, target):
        self.records.append(list(records))
        return self.inner.predict_records(records, output, target)


class ConstantRiverModel:
    """A river-like classifier with (almost) free predictions: isolates the explainer's cost."""

    def predict_one(self, x: dict[str, Any]) -> int:
        return 0

    def predict_proba_one(self, x: dict[str, Any]) -> dict[int, float]:
        return {0: 1.0}

    def learn_one(self, x: dict[str, Any], y: Any) -> None:
        pass


def linear_label(block: np.ndarray) -> np.ndarray:
    """A cheap vectorised classifier of the 200-feature stream (module level so it pickles)."""
    return (block @ WIDE_WEIGHTS > 0.0).astype(np.int64)


def zeros_label(block: np.ndarray) -> np.ndarray:
    """A model that costs (almost) nothing: isolates the explainer's own cost on the block path."""
    return np.zeros(len(block), dtype=np.int64)


WIDE_FEATURES = [f"x{i:03d}" for i in range(200)]
WIDE_WEIGHTS = np.random.default_rng(12345).normal(size=len(WIDE_FEATURES))


def agrawal_label(block: np.ndarray) -> np.ndarray:
    """Agrawal function 1 on a block (salary, age): a picklable static model for the memory check."""
    salary, age = block[:, 0], block[:, 2]
    return np.where(age < 40, (salary >= 50_000) & (salary <= 100_000),
                    np.where(age < 60, (salary >= 75_000) & (salary <= 125_000),
                             (salary >= 25_000) & (salary <= 75_000))).astype(np.int64)


# -- 1. static HGB -------------------------------------------------------------------------------
def bench_hgb(s: Settings, report: Report) -> None:
    import pandas as pd
    from sklearn.ensemble import HistGradientBoostingClassifier

    from ipfi_cli.core import IPFIEstimator
    from ipfi_cli.models import as_predictor

    train = agrawal(s.train_rows, s.seed + 1)
    frame = pd.DataFrame([x for x, _ in train], columns=AGRAWAL_FEATURES)
    model = HistGradientBoostingClassifier(random_state=0).fit(frame, [y for _, y in train])
    predictor = as_predictor(model)
    stream = agrawal(s.rows, s.seed + 7)
    xs = [x for x, _ in stream]
    ys = [y for _, y in stream]

    def explainer(model_: Any) -> IPFIEstimator:
        return IPFIEstimator(model_, AGRAWAL_FEATURES, loss="zero-one", n_repeats=M,
                              sampling="geometric", reservoir_size=100, seed=s.seed)

    # the perturbed rows, recorded once (untimed): the floor predicts exactly these
    recorder = RecordingPredictor(predictor)
    explainer(recorder).explain_many(xs, ys)
    model_rows = np.concatenate(recorder.blocks)
    chunks = [pd.DataFrame(model_rows[i:i + s.floor_chunk], columns=AGRAWAL_FEATURES)
              for i in range(0, len(model_rows), s.floor_chunk)]
    n_one = s.one_rows

    def run_one() -> float:
        ex = explainer(predictor)
        start = time.perf_counter()
        for x, y in zip(xs[:n_one], ys[:n_one]):
            ex.explain_one(x, y)
        return time.perf_counter() - start

    def run_many() -> float:
        ex = explainer(predictor)
        start = time.perf_counter()
        for i in range(0, len(xs), s.batch):
            ex.explain_many(xs[i:i + s.batch], ys[i:i + s.batch])
        return time.perf_counter() - start

    def run_floor() -> float:
        start = time.perf_counter()
        for chunk in chunks:
            model.predict(chunk)
        return time.perf_counter() - start

    t = interleaved({"one": (n_one, run_one), "many": (len(xs), run_many), "floor": (len(xs), run_floor)},
                    s.repeats)
    report.section(f"1. static HistGradientBoostingClassifier, agrawal, {len(AGRAWAL_FEATURES)} features, "
                   f"M={M}: {len(model_rows) / (len(xs) - 1):.0f} model rows per stream row")
    report.value("stream rows (explain_many, floor) / (explain_one)", f"{len(xs)}", f"{n_one}")
    report.timing("explain_one, per row", t["one"])
    report.timing(f"explain_many, batches of {s.batch} rows, per row", t["many"])
    report.timing(f"floor: model.predict on the same rows in chunks of {s.floor_chunk}, per row",
                  t["floor"])
    report.ratio("ratio explain_many / floor", t["many"], t["floor"], target=1.5)
    report.ratio("ratio explain_one / floor", t["one"], t["floor"])


# -- 2. river Hoeffding tree, prequential -----------------------------------------------------------
def bench_river(s: Settings, report: Report) -> None:
    from river import tree

    from ipfi_cli.core import IPFIEstimator
    from ipfi_cli.models import as_predictor

    stream = agrawal(s.river_rows, s.seed + 7)

    def explainer(model_: Any, loss: str, size: int = 100) -> IPFIEstimator:
        return IPFIEstimator(model_, AGRAWAL_FEATURES, loss=loss, n_repeats=M, sampling="geometric",
                              reservoir_size=size, seed=s.seed)

    # the perturbed dicts depend only on the rows and the seed, not on the model: record them once
    recorder = RecordingPredictor(as_predictor(ConstantRiverModel()))
    ex = explainer(recorder, "zero-one")
    for x, y in stream:
        ex.explain_one(x, y)
    per_row = [[]] + recorder.records  # the first row is only stored, not explained
    assert len(per_row) == len(stream)

    # the prequential step of explain_then_learn: explain row t with h_t, then learn it
    def ipfi(loss: str) -> Callable[[], Callable[[int], None]]:
        def make() -> Callable[[int], None]:
            predictor = as_predictor(tree.HoeffdingTreeClassifier())
            ex = explainer(predictor, loss)

            def step(i: int) -> None:
                x, y = stream[i]
                ex.explain_one(x, y)
                predictor.learn_one(x, y)
            return step
        return make

    def bare(proba: bool) -> Callable[[], Callable[[int], None]]:
        def make() -> Callable[[int], None]:
            model = tree.HoeffdingTreeClassifier()
            predict = model.predict_proba_one if proba else model.predict_one
            learn = model.learn_one

            def step(i: int) -> None:
                [predict(r) for r in per_row[i]]
                learn(*stream[i])
            return step
        return make

    n = len(stream)
    t = paired_rows({"ipfi01": ipfi("zero-one"), "bare01": bare(False),
                     "ipfilog": ipfi("log"), "barelog": bare(True)}, n, s.repeats)
    report.section(f"2. river HoeffdingTreeClassifier learning prequentially, agrawal, M={M}, "
                   f"{n} rows, reservoir 100")
    report.timing("zero-one: explain_one + learn_one, per row", t["ipfi01"])
    report.timing("zero-one: bare 91 x predict_one + learn_one, per row", t["bare01"])
    report.value("zero-one: iPFI's time beyond the bare calls, per row", fmt_time(t["ipfi01"].best - t["bare01"].best),
                 fmt_time(t["ipfi01"].median - t["bare01"].median))
    report.ratio("ratio zero-one iPFI / bare", t["ipfi01"], t["bare01"], target=1.1)
    distinct = sum(len({tuple(r.items()) for r in rows}) for rows in per_row)
    total = sum(len(rows) for rows in per_row)
    report.value("distinct perturbed rows (ipfi asks each once; the bare calls ask all)",
                 f"{distinct / total:.1%}", f"{total:,} rows")
    report.timing("log: explain_one + learn_one, per row", t["ipfilog"])
    report.timing("log: bare 91 x predict_proba_one + learn_one, per row", t["barelog"])
    report.value("log: iPFI's time beyond the bare calls, per row", fmt_time(t["ipfilog"].best - t["barelog"].best),
                 fmt_time(t["ipfilog"].median - t["barelog"].median))
    report.ratio("ratio log iPFI / bare", t["ipfilog"], t["barelog"], target=1.1)

    # reservoir size: explainers whose reservoirs were filled beforehand (untimed) with 10,500
    # other rows through a constant model, then explaining the same stream for a fresh tree
    fill = agrawal(10_500, s.seed + 11)
    sizes = (100, 1_000, 10_000)
    filled: dict[int, bytes] = {}
    for size in sizes:
        ex = explainer(as_predictor(ConstantRiverModel()), "zero-one", size)
        for x, y in fill:
            ex.explain_one(x, y)
        filled[size] = pickle.dumps(ex)

    short_stream = stream[:600]

    def filled_tree(size: int) -> Callable[[], Callable[[int], None]]:
        def make() -> Callable[[int], None]:
            ex = pickle.loads(filled[size])
            ex.model = predictor = as_predictor(tree.HoeffdingTreeClassifier())

            def step(i: int) -> None:
                x, y = short_stream[i]
                ex.explain_one(x, y)
                predictor.learn_one(x, y)
            return step
        return make

    timed = agrawal(2_000, s.seed + 13)  # the explainer alone is fast: more rows for a stable figure

    def filled_constant(size: int) -> Callable[[], Callable[[int], None]]:
        def make() -> Callable[[int], None]:
            ex = pickle.loads(filled[size])

            def step(i: int) -> None:
                ex.explain_one(*timed[i])
            return step
        return make

    n_short = len(short_stream)
    t = paired_rows({"tree100": filled_tree(100), "tree10000": filled_tree(10_000)}, n_short, s.repeats)
    report.timing(f"full reservoir 100: explain_one + learn_one, first {n_short} rows, per row", t["tree100"])
    report.timing(f"full reservoir 10,000: explain_one + learn_one, first {n_short} rows, per row",
                  t["tree10000"])
    report.ratio("ratio reservoir 10,000 / 100 (tree, full reservoirs)", t["tree10000"], t["tree100"],
                 target=0.1, approx=True)
    t = paired_rows({size: filled_constant(size) for size in sizes}, len(timed), s.repeats)
    for size in sizes:
        report.timing(f"explainer alone (constant model), full reservoir {size:,}, per row", t[size])
    report.ratio("ratio reservoir 10,000 / 100 (explainer alone)", t[10_000], t[100])


# -- 3. many features -----------------------------------------------------------------------------
def bench_wide(s: Settings, report: Report) -> None:
    from ipfi_cli.core import IPFIEstimator
    from ipfi_cli.models import FunctionPredictor, as_predictor

    d = len(WIDE_FEATURES)
    rng = np.random.default_rng(s.seed + 200)
    values = rng.normal(size=(s.wide_rows, d))
    xs = [dict(zip(WIDE_FEATURES, row)) for row in values.tolist()]
    ys = linear_label(values).tolist()
    function = FunctionPredictor(linear_label, vectorized=True, is_classifier=True)

    def explainer(model_: Any) -> IPFIEstimator:
        return IPFIEstimator(model_, WIDE_FEATURES, loss="zero-one", n_repeats=M, sampling="geometric",
                              reservoir_size=100, seed=s.seed)

    recorder = RecordingPredictor(function)
    ex = explainer(recorder)
    for x, y in zip(xs, ys):
        ex.explain_one(x, y)
    blocks = recorder.blocks

    def run_one() -> float:
        ex = explainer(function)
        start = time.perf_counter()
        for x, y in zip(xs, ys):
            ex.explain_one(x, y)
        return time.perf_counter() - start

    wide_batch = 16  # 16 * 2001 model rows of 200 values: 51 MB per call

    def run_many() -> float:
        ex = explainer(function)
        start = time.perf_counter()
        for i in range(0, n, wide_batch):
            ex.explain_many(values[i:i + wide_batch], ys[i:i + wide_batch])
        return time.perf_counter() - start

    def run_calls() -> float:
        start = time.perf_counter()
        for block in blocks:
            linear_label(block)
        return time.perf_counter() - start

    no_op = FunctionPredictor(zeros_label, vectorized=True, is_classifier=True)

    def run_no_op() -> float:  # a cross-check: the explainer's own cost, with a model that costs ~nothing
        ex = explainer(no_op)
        start = time.perf_counter()
        for x, y in zip(xs, ys):
            ex.explain_one(x, y)
        return time.perf_counter() - start

    n = len(xs)
    t = interleaved({"one": (n, run_one), "calls": (n, run_calls), "no_op": (n, run_no_op)}, s.repeats + 2)
    overhead = Timing("overhead", n * d, [a - b for a, b in zip(t["one"].times, t["calls"].times)])
    overhead_best = (t["one"].best - t["calls"].best) / d
    report.section(f"3. {d} numeric features, M={M}: {1 + d * M} model rows per stream row")
    report.value("stream rows (block path) / (records path)", f"{n}", f"{s.wide_record_rows}")
    report.timing("block path, linear model: explain_one, per row", t["one"])
    report.timing("block path: the model calls alone (same blocks), per row", t["calls"])
    report.value("block path: overhead per feature per row (best - best)", fmt_time(overhead_best),
                 fmt_time(overhead.median))
    report.check("block path: overhead per feature per row, 200 features", "<= 5 us",
                 f"{overhead_best * 1e6:.2f} us", overhead_best <= 5e-6)
    report.timing("block path, model returning zeros: explain_one, per row", t["no_op"])
    report.value("block path, model returning zeros: per feature per row", fmt_time(t["no_op"].best / d),
                 fmt_time(t["no_op"].median / d))

    # records path: one river-like model call per perturbed row, each on its own dict
    n_rec = s.wide_record_rows
    constant = ConstantRiverModel()
    river_like = as_predictor(constant)
    recorder = RecordingPredictor(river_like)
    ex = explainer(recorder)
    ex.explain_one(xs[0], ys[0])
    ex.explain_one(xs[1], ys[1])
    one_rows_records = recorder.records[0]  # 2001 dicts of 200 values; a constant model costs the same on any

    def run_records() -> float:
        ex = explainer(river_like)
        start = time.perf_counter()
        for x, y in zip(xs[:n_rec], ys[:n_rec]):
            ex.explain_one(x, y)
        return time.perf_counter() - start

    def run_record_calls() -> float:
        predict = constant.predict_one
        start = time.perf_counter()
        for _ in range(n_rec - 1):  # the first row is not explained
            [predict(r) for r in one_rows_records]
        return time.perf_counter() - start

    t2 = interleaved({"rec": (n_rec, run_records), "calls": (n_rec, run_record_calls)}, s.repeats)
    record_overhead = (t2["rec"].best - t2["calls"].best) / d
    median_overhead = (t2["rec"].median - t2["calls"].median) / d
    report.timing("records path, constant river-like model: explain_one, per row", t2["rec"])
    report.timing("records path: the 2001 predict_one calls alone, per row", t2["calls"])
    report.value("records path: overhead per feature per row (dicts built)", fmt_time(record_overhead),
                 fmt_time(median_overhead))

    t3 = interleaved({"many": (n, run_many), "calls": (n, run_calls)}, s.repeats)
    report.timing(f"block path: explain_many, batches of {wide_batch} rows, per row", t3["many"])
    report.value("block path, explain_many: overhead per feature per row",
                 fmt_time((t3["many"].best - t3["calls"].best) / d),
                 fmt_time((t3["many"].median - t3["calls"].median) / d))


# -- 4. memory -----------------------------------------------------------------------------------
def bench_memory(s: Settings, report: Report) -> None:
    from ipfi_cli.core import IPFIEstimator
    from ipfi_cli.models import FunctionPredictor, as_predictor

    short, long = s.memory_rows
    stream = agrawal(long, s.seed + 21)
    xs = [x for x, _ in stream]
    ys = [y for _, y in stream]
    report.section(f"4. memory of the explainer's state (agrawal, M={M}, reservoir 100; block path: a "
                   "vectorised function, records path: a constant river-like model)",
                   (f"{short:,} rows", f"{long:,} rows"))
    results = []
    for label, model in (("block path", FunctionPredictor(agrawal_label)),
                         ("records path", as_predictor(ConstantRiverModel()))):
        sizes, current, peaks = [], [], []
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        ex = IPFIEstimator(model, AGRAWAL_FEATURES, loss="zero-one", n_repeats=M, sampling="geometric",
                            reservoir_size=100, seed=s.seed)
        done = 0
        for stop in (short, long):
            tracemalloc.reset_peak()
            if model.supports_batch:
                for i in range(done, stop, 1000):
                    ex.explain_many(xs[i:min(i + 1000, stop)], ys[i:min(i + 1000, stop)])
            else:
                for i in range(done, stop):
                    ex.explain_one(xs[i], ys[i])
            done = stop
            gc.collect()
            now, peak = tracemalloc.get_traced_memory()
            current.append(now - base)
            peaks.append(peak - base)
            sizes.append(len(pickle.dumps(ex)))
        tracemalloc.stop()
        print(f"   {label + ': pickled bytes':<72} {sizes[0]:>11,} {sizes[1]:>11,}")
        print(f"   {label + ': traced bytes held':<72} {current[0]:>11,} {current[1]:>11,}")
        print(f"   {label + ': traced peak in the segment':<72} {peaks[0]:>11,} {peaks[1]:>11,}")
        results.append((label, sizes, current))
    for label, sizes, current in results:
        # object reservoirs pickle the stored values themselves, so the size wobbles with them
        growth = sizes[1] / sizes[0] - 1.0
        held = current[1] / current[0]
        report.check(f"memory, {label}: pickle growth {short:,} -> {long:,} rows", "< 2 %",
                     f"{growth:+.2%}", growth < 0.02)
        report.check(f"memory, {label}: traced held {long:,} / {short:,} rows", "~1 (within 0.1)",
                     f"{held:.3f}", abs(held - 1.0) <= 0.1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=None,
                        help="stream rows for the HistGradientBoosting part (default 4000, quick 1500)")
    parser.add_argument("--quick", action="store_true", help="fewer rows and repeats: about 30 s")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats (default 5, quick 3)")
    parser.add_argument("--batch", type=int, default=256, help="explain_many micro-batch, stream rows")
    parser.add_argument("--floor-chunk", type=int, default=65_536, help="model rows per floor call")
    parser.add_argument("--threads", type=int, default=1, help="model thread pools (OpenMP/BLAS) limit")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default="1234", help="which parts to run, e.g. 12")
    args = parser.parse_args(argv)
    s = Settings.from_args(args)

    import river
    import sklearn
    from threadpoolctl import threadpool_limits

    print("iPFI core benchmark")
    print(f"   python {platform.python_version()}, numpy {np.__version__}, scikit-learn {sklearn.__version__}, "
          f"river {river.__version__}, {platform.machine()}")
    print(f"   settings: {s}")
    print("   times are per stream row unless stated; 'best' = minimum over repeats, 'median' = median;")
    print("   ratios: best / best and median / median of measurements interleaved in the same run;")
    print("   part 2 runs its cases row by row side by side, and its 'best' sums each row's fastest repeat")
    report = Report()
    started = time.perf_counter()
    parts = {"1": bench_hgb, "2": bench_river, "3": bench_wide, "4": bench_memory}
    with threadpool_limits(limits=s.threads):
        for key, part in parts.items():
            if key in args.only:
                part_started = time.perf_counter()
                part(s, report)
                print(f"   ({time.perf_counter() - part_started:.0f} s)")
    report.summary()
    print(f"\n   total {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
