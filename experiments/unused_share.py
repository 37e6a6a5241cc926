"""Where Experiment B's error after the drift sits: the features the new concept does not use.

After the drift the labels depend on two features only (function drift: ``age`` and
``elevel``; feature drift: ``salary`` and ``car``, the swapped-in columns). Every share of
importance on the other seven is either the model really using them or noise. For each
window that ends after the drift, this prints the paper's error between iPFI and interval
PFI and the share of each vector on the unused features, for each run given, from the traces
the experiment committed (``experiment_b_<scenario>_traces.csv.gz``: the first seed's).

    python experiments/unused_share.py --scenario function \\
        --runs "explained first=experiments/results/paper_scale" \\
        --runs "learned first=experiments/results/paper_protocol"
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import fail, fmt, table  # noqa: E402

USED_AFTER = {"function": ("age", "elevel"), "feature": ("salary", "car")}


def _error(a: np.ndarray, b: np.ndarray) -> float:
    """The paper's error: both vectors clipped at 0 and divided by their sum, then the L1 distance."""
    a, b = np.clip(a, 0, None), np.clip(b, 0, None)
    return float(np.abs(a / a.sum() - b / b.sum()).sum())


def _share(values: np.ndarray, unused: np.ndarray) -> float:
    clipped = np.clip(values, 0, None)
    return float(clipped[unused].sum() / clipped.sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=sorted(USED_AFTER), default="function")
    parser.add_argument("--runs", action="append", required=True, metavar="LABEL=DIR",
                        help="a results folder of experiment_b.py (repeatable)")
    parser.add_argument("--drift-at", type=int, default=10_000)
    args = parser.parse_args()
    import pandas as pd

    rows = []
    for run in args.runs:
        label, _, folder = run.partition("=")
        path = Path(folder) / f"experiment_b_{args.scenario}_traces.csv.gz"
        if not path.is_file():
            fail(f"no traces at {path}")
        traces = pd.read_csv(path)
        names = list(traces.columns[2:])
        unused = np.array([n not in USED_AFTER[args.scenario] for n in names])
        reference = traces[traces["method"] == "interval"].set_index("row")[names]
        ends = [int(r) for r in reference.index if r > args.drift_at]
        for method in sorted(set(traces["method"]) - {"interval"}):
            trace = traces[traces["method"] == method].set_index("row")[names]
            cells = []
            for end in ends:
                a, b = trace.loc[end].to_numpy(float), reference.loc[end].to_numpy(float)
                cells.append(f"{fmt(_error(a, b))} ({fmt(_share(a, unused))} / {fmt(_share(b, unused))})")
            rows.append([label, method.removeprefix("ipfi-"), *cells])
    print(f"Experiment B, {args.scenario} drift: per window ending after row {args.drift_at:,}, the error, and "
          f"in brackets the share of iPFI / interval PFI on the features other than "
          f"{' and '.join(USED_AFTER[args.scenario])}\n")
    print(table(["run", "trace", *(f"row {e:,}" for e in ends)], rows))


if __name__ == "__main__":
    main()
