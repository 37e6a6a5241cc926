"""Coverage and width of iPFI's confidence bounds (``--bounds-method``), against a known truth.

Two models on river's ``Agrawal(classification_function=1)`` stream (alpha 0.001, M 10,
delta 0.05 unless told otherwise), each over ``--orderings`` independent streams
(stream seed ``1000 + k``, explainer seed ``k``) and both samplers:

* ``oracle``: the generator's own rule, static. Under the zero-one loss the truth is exact:
  PFI(salary) = 80/169, PFI(age) = 16600/48373 (tests/core/test_agrawal_oracle.py checks
  these by enumeration); the other features are exactly 0 and so are their bounds, so only
  salary and age are scored.
* ``learning``: an online logistic regression (numpy SGD, step 0.05, on 18 age x salary
  band indicators and the 9 standardised features), explained then taught in steps of
  ``LEARN_EVERY`` rows (each row is explained by the model that has not learned it yet).
  Its estimate's expectation is the weighted mean of the changing model's PFI,
  ``sum_s w_s PFI(h_s) / sum_s w_s`` with iPFI's weights; ``PFI(h_s)`` is computed every
  ``TRUTH_EVERY`` rows on ``TRUTH_ROWS`` fresh rows drawn from a pool of 200,000 rows of the
  generator (another seed), one permutation. That truth is itself noisy (an sd of about
  0.002 for salary and age after smoothing, against an iPFI error of about 0.005 at 20,000
  rows), which can only lower the measured coverage. Scored on the features whose truth
  exceeds 0.01 at the checkpoint.

At rows ``--checkpoints`` it records, per feature, the estimate, the truth and each
method's half-width. A finished (model, sampling, ordering) is appended to ``--out`` (CSV),
so a stopped run continues where it stopped; the summary is printed from the CSV:
coverage (share of |estimate - truth| <= half-width) and the ratio of the median
half-width to the 95th percentile of the actual error (1.0 would be a bound exactly as
wide as needed for 95 % coverage). Targets for the calibrated method: coverage >= 93 %
and ratio <= 1.3.

    python benchmarks/bounds_coverage.py [--orderings 50] [--models oracle,learning] [--summary-only]
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

import numpy as np
from river.datasets import synth

from ipfi_cli.core import IPFIEstimator
from ipfi_cli.core.choices import BOUNDS_METHODS
from ipfi_cli.models import FunctionPredictor

SCRIPT_VERSION = "2"  # 2: the realisations bound counts each row as donor too (core.influence)
LEARN_EVERY, TRUTH_EVERY, TRUTH_ROWS = 10, 200, 10_000
COLUMNS = ["salary", "commission", "age", "elevel", "car", "zipcode", "hvalue", "hyears", "loan"]
ORACLE_TRUTH = np.array([80 / 169, 0, 16600 / 48373, 0, 0, 0, 0, 0, 0])
FIELDS = ["script_version", "model", "sampling", "reservoir", "alpha", "repeats", "delta", "ordering", "rows",
          "feature", "estimate", "truth", *BOUNDS_METHODS, "cpu_seconds"]
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "experiments" / "results" / "bounds_coverage.csv"


def agrawal(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rows = list(synth.Agrawal(classification_function=1, seed=seed).take(n))
    return np.array([[x[c] for c in COLUMNS] for x, _ in rows], dtype=float), np.array([y for _, y in rows])


def oracle(block: np.ndarray) -> np.ndarray:
    """The generator's function 1 on a block (salary column 0, age column 2)."""
    salary, age = block[:, 0], block[:, 2]
    return np.where(age < 40, (50000 <= salary) & (salary <= 100000),
                    np.where(age < 60, (75000 <= salary) & (salary <= 125000),
                             (25000 <= salary) & (salary <= 75000))).astype(int)


class OnlineLogistic:
    """Logistic regression taught by plain SGD one row at a time, on band indicators and scaled inputs."""

    scale = np.array([150000, 75000, 80, 4, 20, 9, 1e6, 30, 5e5])

    def __init__(self, step: float = 0.05) -> None:
        self.step = step
        self.weights = np.zeros(18 + 9 + 1)

    @staticmethod
    def features(block: np.ndarray) -> np.ndarray:
        age_band = np.digitize(block[:, 2], [40, 60])                  # 0, 1, 2
        salary_band = np.clip((block[:, 0] - 25000) // 25000, 0, 5)     # 0..5
        cells = np.zeros((len(block), 18))
        cells[np.arange(len(block)), (age_band * 6 + salary_band).astype(int)] = 1.0
        return np.hstack([cells, block / OnlineLogistic.scale, np.ones((len(block), 1))])

    def predict(self, block: np.ndarray) -> np.ndarray:
        return (self.features(block) @ self.weights > 0).astype(int)

    def learn(self, row: np.ndarray, y: int) -> None:
        z = self.features(row[None, :])[0]
        p = 1.0 / (1.0 + np.exp(-z @ self.weights))
        self.weights += self.step * (y - p) * z


def pfi_of(predict, pool_X: np.ndarray, pool_y: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
    """Permutation importance of a classifier on ``n`` rows drawn from the pool (zero-one loss)."""
    pick = rng.choice(len(pool_X), n, replace=False)
    X, y = pool_X[pick], pool_y[pick]
    base = predict(X) != y
    out = np.empty(X.shape[1])
    for j in range(X.shape[1]):
        Xp = X.copy()
        Xp[:, j] = X[rng.permutation(n), j]
        out[j] = np.mean((predict(Xp) != y).astype(float) - base)
    return out


def run_oracle(args, sampling: str, k: int, checkpoints: list[int]) -> list[dict]:
    X, y = agrawal(max(checkpoints), 1000 + k)
    explainer = IPFIEstimator(FunctionPredictor(oracle), COLUMNS, alpha=args.alpha, n_repeats=args.repeats,
                               sampling=sampling, reservoir_size=args.reservoir, seed=k, bounds_method="realisations")
    records, done = [], 0
    for rows in checkpoints:
        explainer.explain_many(X[done:rows], y[done:rows])
        done = rows
        widths = {m: explainer.bound_array(args.delta, m) for m in BOUNDS_METHODS}
        estimate = explainer.importance_array()
        for j in (0, 2):
            records.append({"rows": rows, "feature": COLUMNS[j], "estimate": estimate[j], "truth": ORACLE_TRUTH[j],
                            **{m: widths[m][j] for m in BOUNDS_METHODS}})
    return records


def run_learning(args, sampling: str, k: int, checkpoints: list[int], pool: tuple[np.ndarray, np.ndarray]
                 ) -> list[dict]:
    X, y = agrawal(max(checkpoints), 1000 + k)
    model = OnlineLogistic()
    explainer = IPFIEstimator(FunctionPredictor(model.predict), COLUMNS, alpha=args.alpha, n_repeats=args.repeats,
                               sampling=sampling, reservoir_size=args.reservoir, seed=k, bounds_method="realisations")
    truth_rng = np.random.default_rng(10_000 + k)
    alpha, decay = args.alpha, 1.0 - args.alpha
    weighted, weight = np.zeros(len(COLUMNS)), 0.0   # sum_s w_s PFI(h_s) and sum_s w_s over explained rows
    pfi = np.zeros(len(COLUMNS))
    records = []
    for begin in range(0, max(checkpoints), LEARN_EVERY):
        end = begin + LEARN_EVERY
        if begin % TRUTH_EVERY == 0:
            pfi = pfi_of(model.predict, pool[0], pool[1], truth_rng, TRUTH_ROWS)
        explainer.explain_many(X[begin:end], y[begin:end])
        for t in range(begin, end):
            if t > 0:                                    # the first row is not explained
                weighted = weighted * decay + alpha * pfi
                weight = weight * decay + alpha
            model.learn(X[t], int(y[t]))
        if end in checkpoints:
            truth = weighted / weight
            widths = {m: explainer.bound_array(args.delta, m) for m in BOUNDS_METHODS}
            estimate = explainer.importance_array()
            for j, name in enumerate(COLUMNS):
                if truth[j] > 0.01:
                    records.append({"rows": end, "feature": name, "estimate": estimate[j], "truth": truth[j],
                                    **{m: widths[m][j] for m in BOUNDS_METHODS}})
    return records


def done_runs(path: Path) -> set[tuple[str, str, int, int]]:
    if not path.is_file():
        return set()
    with path.open() as f:
        return {(r["model"], r["sampling"], int(r["reservoir"]), int(r["ordering"])) for r in csv.DictReader(f)}


def append(path: Path, rows: list[dict]) -> None:
    new = not path.is_file()
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, FIELDS)
        if new:
            writer.writeheader()
        writer.writerows(rows)
        f.flush()
        os.fsync(f.fileno())


def summary(path: Path) -> None:
    import pandas as pd

    frame = pd.read_csv(path)
    frame["error"] = (frame["estimate"] - frame["truth"]).abs()
    print(f"{path.name}: {frame.groupby(['model', 'sampling', 'reservoir']).ordering.nunique().to_dict()} orderings; "
          f"coverage = share of |error| <= half-width; ratio = median half-width / q95 of |error|")
    for (model, sampling, reservoir), part in frame.groupby(["model", "sampling", "reservoir"]):
        print(f"\n{model}, {sampling} sampling, reservoir {reservoir}, delta {part['delta'].iloc[0]}")
        header = f"{'rows':>7} {'feature':>10} {'n':>4} {'q95|err|':>9}" + "".join(
            f" {m + ' cov':>17} {'ratio':>6}" for m in BOUNDS_METHODS)
        print(header)
        groups = list(part.groupby(["rows", "feature"])) + [(("all", "all"), part)]
        for (rows, feature), cell in groups:
            q95 = cell["error"].quantile(0.95)
            line = f"{rows!s:>7} {feature:>10} {len(cell):>4} {q95:9.4f}"
            for m in BOUNDS_METHODS:
                line += f" {(cell['error'] <= cell[m]).mean():17.1%} {cell[m].median() / q95:6.2f}"
            print(line)
    seconds = frame.groupby(["model", "sampling", "reservoir", "ordering"]).cpu_seconds.first()
    print(f"\nCPU time of the runs in the file: {seconds.sum():.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orderings", type=int, default=50)
    parser.add_argument("--models", default="oracle,learning")
    parser.add_argument("--samplings", default="uniform,geometric")
    parser.add_argument("--checkpoints", default="1000,2000,5000,10000,20000")
    parser.add_argument("--alpha", type=float, default=0.001)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--reservoir", type=int, default=100)
    parser.add_argument("--delta", type=float, default=0.05)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--summary-only", action="store_true")
    args = parser.parse_args()
    if not args.summary_only:
        checkpoints = sorted(int(c) for c in args.checkpoints.split(","))
        done = done_runs(args.out)
        pool = None
        for model in args.models.split(","):
            for sampling in args.samplings.split(","):
                for k in range(args.orderings):
                    if (model, sampling, args.reservoir, k) in done:
                        continue
                    start = time.process_time()
                    if model == "oracle":
                        records = run_oracle(args, sampling, k, checkpoints)
                    else:
                        if pool is None:
                            pool = agrawal(200_000, 999_999)
                        records = run_learning(args, sampling, k, checkpoints, pool)
                    seconds = time.process_time() - start
                    common = {"script_version": SCRIPT_VERSION, "model": model, "sampling": sampling,
                              "reservoir": args.reservoir, "alpha": args.alpha, "repeats": args.repeats,
                              "delta": args.delta, "ordering": k, "cpu_seconds": round(seconds, 2)}
                    append(args.out, [{**common, **r} for r in records])
                    print(f"{model} {sampling} ordering {k}: {seconds:.1f} s CPU", file=sys.stderr, flush=True)
    summary(args.out)


if __name__ == "__main__":
    main()
