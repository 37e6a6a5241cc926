"""Fidelity of iPFI on the Agrawal oracle (issue 2's fidelity targets); prints figures.

The model is river's ``Agrawal(classification_function=1)`` rule itself, so under the
zero-one loss the truth is PFI(salary) = 80/169, PFI(age) = 16600/48373, all others 0.
For each sampler and ``--seeds`` stream/explainer seeds (alpha 0.001, M 10) it prints the
largest error after 1,000 rows and the median absolute error after 20,000 rows.

    python benchmarks/fidelity_agrawal.py [--seeds 10]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from river.datasets import synth

from ipfi_cli.core import IPFIEstimator
from ipfi_cli.models import FunctionPredictor

COLUMNS = ["salary", "commission", "age", "elevel", "car", "zipcode", "hvalue", "hyears", "loan"]
TRUTH = np.array([80 / 169, 0, 16600 / 48373, 0, 0, 0, 0, 0, 0])


def oracle(block: np.ndarray) -> np.ndarray:
    """The generator's function 1 on a block (salary column 0, age column 2)."""
    salary, age = block[:, 0], block[:, 2]
    return np.where(age < 40, (50000 <= salary) & (salary <= 100000),
                    np.where(age < 60, (75000 <= salary) & (salary <= 125000),
                             (25000 <= salary) & (salary <= 75000))).astype(int)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--rows", type=int, default=20_000)
    args = parser.parse_args()
    print(f"agrawal oracle, alpha 0.001, M 10, {args.seeds} seeds (stream seed 100+s, explainer seed s)")
    for sampling in ("uniform", "geometric"):
        start = time.perf_counter()
        early, final = [], []
        for seed in range(args.seeds):
            data = list(synth.Agrawal(classification_function=1, seed=100 + seed).take(args.rows))
            X = np.array([[x[c] for c in COLUMNS] for x, _ in data], dtype=float)
            explainer = IPFIEstimator(FunctionPredictor(oracle), COLUMNS, alpha=0.001, n_repeats=10,
                                       sampling=sampling, seed=seed)
            trace = explainer.explain_many(X, [y for _, y in data])
            early.append(np.abs(trace[999] - TRUTH))
            final.append(np.abs(trace[-1] - TRUTH))
        early_max = np.max(early, axis=0)
        final_median = np.median(final, axis=0)
        print(f"{sampling:9s} max |error| after 1,000 rows: salary {early_max[0]:.4f} age {early_max[2]:.4f} "
              f"others {np.delete(early_max, [0, 2]).max():.4f} (target <= 0.05)")
        print(f"{sampling:9s} median |error| after {args.rows:,} rows: salary {final_median[0]:.4f} "
              f"age {final_median[2]:.4f} (target <= 0.004)  [{time.perf_counter() - start:.1f} s]")


if __name__ == "__main__":
    main()
