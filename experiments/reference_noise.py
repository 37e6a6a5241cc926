"""How much of a window's error is the interval reference's own noise (Experiments B and C).

Interval PFI averages M permutations of one window's rows; its mean is itself an estimate. This
script takes each window's per-permutation values and measures, with the error the experiments
use (:func:`ipfi_cli.core.ranking.importance_error`):

- ``ref_vs_truth``: an M-permutation reference resampled from the window's own permutations
  (bootstrap, 400 draws) against the window's reference: the reference's error against the one
  of infinitely many permutations, approximately;
- ``ref_vs_ref``: two such resampled references against each other;
- ``half_vs_half``: the means of the first and the second half of the permutations.

The values come from a run's checkpoint (``compare_learning(checkpoint=...)`` keeps every
window's :class:`~ipfi_cli.core.batch.PFIResult`, per-permutation values included), written to
a CSV the script reads again::

    R=experiments/results/paper_protocol
    python experiments/reference_noise.py --checkpoint $R/experiment_c_seed2.checkpoint \\
        --save $R/experiment_c_seed2_reference_permutations.csv
    python experiments/reference_noise.py --values $R/experiment_c_seed2_reference_permutations.csv

The checkpoint is a pickle (it runs code when loaded): give only one the experiments wrote.
"""

from __future__ import annotations

import argparse
import csv
import pickle
import sys
from collections import defaultdict

import numpy as np

from ipfi_cli.core.ranking import importance_error


def from_checkpoint(path: str) -> list[dict[str, object]]:
    """One record per window, feature and permutation, with iPFI's errors at that window."""
    with open(path, "rb") as f:
        saved = pickle.load(f)  # noqa: S301  # the experiments' own file (see the docstring)
    records: list[dict[str, object]] = []
    for point in saved["intervals"]:
        values = np.asarray(point.result.values)
        for j, name in enumerate(point.result.names):
            for m, value in enumerate(values[j].tolist()):
                records.append({"window_end": point.row, "feature": name, "permutation": m, "value": value,
                                **{f"error_{label}": error for label, error in point.errors.items()}})
    return records


def table(records: list[dict[str, str | object]], draws: int = 400, seed: int = 0) -> list[dict[str, float]]:
    rng = np.random.default_rng(seed)
    windows: dict[int, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    errors: dict[int, dict[str, float]] = {}
    for r in records:
        row = int(float(str(r["window_end"])))
        windows[row][str(r["feature"])][int(float(str(r["permutation"])))] = float(str(r["value"]))
        errors[row] = {k[len("error_"):]: float(str(v)) for k, v in r.items() if k.startswith("error_")}
    out = []
    for row in sorted(windows):
        features = windows[row]
        values = np.array([[features[f][m] for m in sorted(features[f])] for f in features])
        m = values.shape[1]
        reference = values.mean(axis=1)

        def resampled(values: np.ndarray = values, m: int = m) -> np.ndarray:
            return values[:, rng.integers(0, m, m)].mean(axis=1)

        out.append({"window_end": row, **{f"ipfi {k}": v for k, v in errors[row].items()},
                    "ref_vs_truth": float(np.median([importance_error(resampled(), reference) for _ in range(draws)])),
                    "ref_vs_ref": float(np.median([importance_error(resampled(), resampled()) for _ in range(draws)])),
                    "half_vs_half": importance_error(values[:, :m // 2].mean(axis=1), values[:, m // 2:].mean(axis=1))})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", help="a compare_learning checkpoint to read the permutations from")
    parser.add_argument("--save", help="with --checkpoint: write the per-permutation values to this CSV")
    parser.add_argument("--values", help="a CSV written by --save")
    parser.add_argument("--from-row", type=int, default=10_000, help="the summary's first window end")
    args = parser.parse_args()
    if args.checkpoint:
        records = from_checkpoint(args.checkpoint)
        if args.save:
            with open(args.save, "w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=list(records[0]))
                writer.writeheader()
                writer.writerows(records)
    elif args.values:
        with open(args.values, newline="") as f:
            records = list(csv.DictReader(f))
    else:
        parser.error("give --checkpoint or --values")
    rows = table(records)
    names = list(rows[0])
    print(" ".join(f"{n:>22}" for n in names))
    for r in rows:
        print(" ".join(f"{r[n]:>22.3f}" if n != "window_end" else f"{r[n]:>22,}" for n in names))
    later = [r for r in rows if r["window_end"] >= args.from_row]
    if later:
        print(f"medians of the windows from row {args.from_row:,}: " + ", ".join(
            f"{n} {np.median([r[n] for r in later]):.3f}" for n in names if n != "window_end"))


if __name__ == "__main__":
    sys.exit(main())
