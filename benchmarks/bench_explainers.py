"""Time per row of the explainer family: iSAGE against iPFI at the same M, and the cost of
conditional removal against marginal removal.

Run::

    python benchmarks/bench_explainers.py            # about 2 minutes
    python benchmarks/bench_explainers.py --quick    # about 30 seconds

1. A static scikit-learn ``HistGradientBoostingClassifier`` on river's Agrawal stream (9
   features, M = 10, zero-one loss), ``explain_many`` in micro-batches of 500 rows: iPFI
   (1 + 9 * 10 = 91 model rows per stream row) against iSAGE with one imputation per
   coalition (1 + 9 * 10 = 91 since the empty coalition is imputed like the others; 81 before).
   Target: iSAGE / iPFI <= 1.3 (set at 81 model rows). It also says each one's model
   time per row (and per model row) and the rest.
2. A river ``HoeffdingTreeClassifier`` (one ``predict_one`` per model row, the records path),
   ``explain_one`` per row, same M: iSAGE / iPFI.
3. Conditional removal on the model of part 1: iPFI with the Gaussian sampler and with the
   tree sampler against marginal iPFI, per row (the sampler's learning included).

CPU time (``time.process_time``: the machine is shared), one warm-up, then the rounds of
the compared explainers interleaved (A, B, A, B, ...); ratios of the best round of each,
the ratio of medians beside it. Model thread pools are limited to one thread.

Measured (2 cores shared with other long jobs, load 4 to 6; full runs of 5 rounds), part 1:
before iSAGE's micro-batch path (chains filled, donors drawn and folds done row by row)
iSAGE / iPFI was 1.69 (iPFI 84, iSAGE 142 us/row); with it, 1.29 to 1.33 (iSAGE 113 to
117 us/row), of which 6.5 us/row went to one numpy ``permuted`` and one ``integers`` call
per row: the orderings came from the reservoirs' random stream, and numpy's shuffle
consumes a variable number of words, so a micro-batch had to replay ``explain_one``'s calls
row by row. Since the orderings have a stream of their own, a micro-batch draws them with
one call and its reservoir integers with one request. Three runs of each, interleaved:
before 1.32, 1.32, 1.28 (medians 1.31, 1.30, 1.28; iSAGE 116 to 117 us/row, the rest 21
to 22.6), after 1.23, 1.25, 1.24 (medians 1.23, 1.25, 1.25; iPFI 86 to 89, iSAGE 107 to
109 us/row, the rest 13.8 to 14.3). The model alone takes iSAGE 93 to 95 us/row, 1150 to
1170 ns a model row, against iPFI's 77 to 79 (840 to 870 ns): iSAGE's rows mix the row with
donor rows, and the trees' branches are harder to predict than on iPFI's near copies of
one row (iPFI's rows shuffled cost the model 1250 ns a row). The rest, 14 us/row (iPFI's
9.5): drawing 2.8 (``_draw_many`` alone, 500-row micro-batches; 9.2 before), building the
chains 3.5, the losses 3.5, the folds 3. Part 2 (records, ``explain_one``, whose work is
unchanged) stays at 1.27 to 1.32, its run-to-run spread.

With the empty coalition imputed (91 model rows per row instead of 81, 12 % more; the values
are then SAGE's and a feature the model never reads gets 0): part 1 1.40 (medians 1.34; iPFI
85.8, iSAGE 120.1 us/row, the model 105.7 of it), part 2 1.43, one run of 5 rounds beside a
long experiment. 1.24 x 91 / 81 = 1.39: the model rows added account for the change.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import time
from collections.abc import Callable

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

AGRAWAL = ["salary", "commission", "age", "elevel", "car", "zipcode", "hvalue", "hyears", "loan"]
M = 10


def agrawal(n_rows: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    from river.datasets import synth

    X = np.empty((n_rows, len(AGRAWAL)))
    y = np.empty(n_rows, dtype=np.int64)
    for t, (x, label) in enumerate(itertools.islice(synth.Agrawal(classification_function=2, seed=seed), n_rows)):
        X[t] = [x[c] for c in AGRAWAL]
        y[t] = label
    return X, y


def interleaved(runs: dict[str, Callable[[], None]], rounds: int) -> dict[str, list[float]]:
    for run in runs.values():  # warm-up
        run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            start = time.process_time()
            run()
            times[name].append(time.process_time() - start)
    return times


class Timed:
    """A block predictor that adds up the CPU time and rows of its calls (the model's share)."""

    def __init__(self, inner: object) -> None:
        self.inner, self.seconds, self.rows = inner, 0.0, 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def predict_block(self, block: np.ndarray, *args: object) -> object:
        start = time.process_time()
        out = self.inner.predict_block(block, *args)  # type: ignore[attr-defined]
        self.seconds += time.process_time() - start
        self.rows += len(block)
        return out


def report(title: str, times: dict[str, list[float]], n_rows: int, reference: str) -> dict[str, float]:
    print(f"\n{title}")
    best_ref, median_ref = min(times[reference]), statistics.median(times[reference])
    ratios = {}
    for name, values in times.items():
        best, median = min(values), statistics.median(values)
        ratios[name] = best / best_ref
        print(f"  {name:<28} {1e6 * best / n_rows:9.1f} us/row (median {1e6 * median / n_rows:9.1f})  "
              f"x{best / best_ref:5.2f} of {reference} (medians x{median / median_ref:5.2f})")
    return ratios


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rows and rounds")
    args = parser.parse_args()
    rows, river_rows, rounds = (600, 200, 3) if args.quick else (2000, 600, 5)

    from river import tree
    from sklearn.ensemble import HistGradientBoostingClassifier

    from ipfi_cli.core.incremental import IPFIEstimator
    from ipfi_cli.core.sage import ISAGEEstimator
    from ipfi_cli.models import as_predictor

    X, y = agrawal(rows + 3000)
    model = as_predictor(HistGradientBoostingClassifier(max_iter=30, random_state=0).fit(X[:3000], y[:3000]))
    X, y = X[3000:], y[3000:]

    def static(make: Callable[[], IPFIEstimator]) -> Callable[[], None]:
        def run() -> None:
            explainer = make()
            for start in range(0, rows, 500):
                explainer.explain_many(X[start:start + 500], y[start:start + 500])
        return run

    timed = {"iPFI": Timed(model), "iSAGE (n_inner 1)": Timed(model)}
    model_share: dict[str, list[tuple[float, int]]] = {name: [] for name in timed}

    def static_timed(name: str, make: Callable[[Timed], IPFIEstimator]) -> Callable[[], None]:
        def run() -> None:
            predictor = timed[name]
            predictor.seconds, predictor.rows = 0.0, 0
            static(lambda: make(predictor))()
            model_share[name].append((predictor.seconds, predictor.rows))
        return run

    print(f"python {sys.version.split()[0]}, {rows} rows (static), {river_rows} rows (river), M = {M}, "
          f"{rounds} interleaved rounds, CPU time")
    times = interleaved({
        "iPFI": static_timed("iPFI", lambda m: IPFIEstimator(m, AGRAWAL, n_repeats=M, seed=0)),
        "iSAGE (n_inner 1)": static_timed("iSAGE (n_inner 1)",
                                          lambda m: ISAGEEstimator(m, AGRAWAL, n_repeats=M, seed=0)),
    }, rounds)
    ratios = report("1. static HistGradientBoosting, explain_many", times, rows, "iPFI")
    for name, shares in model_share.items():
        best = min(range(rounds), key=times[name].__getitem__)
        seconds, model_rows = shares[1 + best]  # after the warm-up
        print(f"  {name:<28} model {1e6 * seconds / rows:7.1f} us/row ({1e9 * seconds / model_rows:5.0f} ns a model "
              f"row), the rest {1e6 * (times[name][best] - seconds) / rows:5.1f} us/row")
    print(f"  -> iSAGE / iPFI = {ratios['iSAGE (n_inner 1)']:.2f} (target <= 1.3)")

    river_model = tree.HoeffdingTreeClassifier()
    for x, label in zip(X[:500].tolist(), y[:500].tolist()):
        river_model.learn_one(dict(zip(AGRAWAL, x)), label)
    river_predictor = as_predictor(river_model)
    dicts = [dict(zip(AGRAWAL, x)) for x in X[:river_rows].tolist()]

    def records(make: Callable[[], IPFIEstimator]) -> Callable[[], None]:
        def run() -> None:
            explainer = make()
            for x, label in zip(dicts, y[:river_rows].tolist()):
                explainer.explain_one(x, label)
        return run

    ratios = report("2. river HoeffdingTree, explain_one (records)", interleaved({
        "iPFI": records(lambda: IPFIEstimator(river_predictor, AGRAWAL, n_repeats=M, seed=0)),
        "iSAGE (n_inner 1)": records(lambda: ISAGEEstimator(river_predictor, AGRAWAL, n_repeats=M, seed=0)),
    }, rounds), river_rows, "iPFI")
    print(f"  -> iSAGE / iPFI = {ratios['iSAGE (n_inner 1)']:.2f}")

    ratios = report("3. conditional removal, static HistGradientBoosting, explain_many", interleaved({
        "iPFI marginal": static(lambda: IPFIEstimator(model, AGRAWAL, n_repeats=M, seed=0)),
        "iPFI conditional gaussian": static(lambda: IPFIEstimator(model, AGRAWAL, n_repeats=M, seed=0,
                                                                   removal="conditional")),
        "iPFI conditional tree": static(lambda: IPFIEstimator(model, AGRAWAL, n_repeats=M, seed=0,
                                                               removal="conditional", conditional_sampler="tree")),
    }, rounds), rows, "iPFI marginal")
    print(f"  -> overhead: gaussian x{ratios['iPFI conditional gaussian']:.2f}, "
          f"tree x{ratios['iPFI conditional tree']:.2f} of marginal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
