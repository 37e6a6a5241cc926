"""Why geometric sampling's error on elec2 is high before the drift: the `date` column.

elec2 is a time series and its `date` column grows with the row. Geometric sampling draws
replacement values from the last few reservoir-lengths of rows, so a replaced `date` is
close to the row's own and iPFI finds `date` unimportant; interval PFI permutes within a
2,000-row window (about six weeks) and finds it as important as `day` or `period`.

Two parts, printed as tables:

* ``--parts traces``: Experiment C's committed run (the traces of its first seed and its
  interval PFI vectors): the median error before / after the drift as published, and
  recomputed with `date` (and with `date`, `day`, `period`) left out of both vectors.
* ``--parts reservoir``: a smaller forest on the first rows of elec2 (no drift), geometric
  sampling with reservoirs of 100 and 1,000 rows: `date`'s importance beside interval PFI's,
  and the error, per window.

    python experiments/elec2_date.py [--data DIR] [--results DIR] [--parts traces,reservoir]
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DEFAULT_DATA, DEFAULT_OUT, fmt, log, need_files, table  # noqa: E402


def _error(a: np.ndarray, b: np.ndarray) -> float:
    """The paper's error: both vectors clipped at 0 and divided by their sum, then the L1 distance."""
    a, b = np.clip(a, 0, None), np.clip(b, 0, None)
    return float(np.abs(a / a.sum() - b / b.sum()).sum())


def traces_part(results: Path) -> None:
    run = json.loads((results / "experiment_c.json").read_text())["runs"]
    seed = min(run, key=lambda unit: int(unit.rsplit("seed", 1)[1]))
    entry = run[seed]
    names, drift_at = entry["names"], entry["drift_at"]
    traces: dict[str, dict[int, np.ndarray]] = {}
    with gzip.open(results / "experiment_c_traces.csv.gz", "rt") as f:
        for record in csv.DictReader(f):
            traces.setdefault(record["method"], {})[int(record["row"])] = np.array(
                [float(record[n]) if record[n] else np.nan for n in names])
    rows = []
    for left_out in ([], ["date"], ["date", "day", "period"]):
        keep = [i for i, n in enumerate(names) if n not in left_out]
        for label in ("ipfi-uniform-0.001", "ipfi-geometric-0.001"):
            errors = [(w["row"], _error(traces[label][w["row"]][keep], np.asarray(w["interval"])[keep]))
                      for w in entry["intervals"]]
            parts = [[e for _, e in errors], [e for r, e in errors if r <= drift_at],
                     [e for r, e in errors if r > drift_at]]
            rows.append([", ".join(left_out) or "(none)", label,
                         *(fmt(float(np.median(p))) if p else "–" for p in parts)])
    print(f"Experiment C, {seed}: median error over its windows, with columns left out of both vectors\n")
    print(table(["left out", "trace", "whole", "before", "after"], rows))
    date = names.index("date")
    print("\n`date` at the window ends before the drift (interval PFI / uniform / geometric):\n")
    print(table(["window end", "interval PFI", "uniform", "geometric"],
                [[w["row"], fmt(w["interval"][date]), fmt(traces["ipfi-uniform-0.001"][w["row"]][date]),
                  fmt(traces["ipfi-geometric-0.001"][w["row"]][date])]
                 for w in entry["intervals"] if w["row"] <= drift_at]))


def reservoir_part(data: Path, rows: int, trees: int, seed: int) -> None:
    import pandas as pd
    from river import forest

    from ipfi_cli.evaluation import compare_learning
    from ipfi_cli.models import as_predictor

    need_files(data, ["elec2.csv"])
    frame = pd.read_csv(data / "elec2.csv").iloc[:rows]
    columns = [c for c in frame.columns if c != "class"]
    stream = [(dict(zip(columns, values)), label)
              for values, label in zip(frame[columns].itertuples(index=False, name=None), frame["class"])]
    results = {}
    for reservoir in (100, 1000):
        started = time.process_time()
        model = as_predictor(forest.ARFClassifier(n_models=trees, seed=seed, binary_split=True))
        results[reservoir] = compare_learning(model, stream, columns, interval=2000, samplings=["geometric"],
                                              alphas=[0.001], n_repeats=10, reservoir_size=reservoir, seed=seed)
        log(f"reservoir {reservoir}: {time.process_time() - started:.0f} s CPU")
    date = columns.index("date")
    table_rows = []
    for w100, w1000 in zip(results[100].intervals, results[1000].intervals):
        label = "ipfi-geometric-0.001"
        table_rows.append([w100.row, fmt(float(np.asarray(w100.result.mean)[date])),
                           fmt(float(w100.ipfi[label][date])), fmt(float(w1000.ipfi[label][date])),
                           fmt(w100.errors[label]), fmt(w1000.errors[label])])
    print(f"\nelec2, first {rows:,} rows, ARF with {trees} trees, seed {seed}, geometric sampling, alpha 0.001, "
          "M = 10 (interval PFI of the forest with the reservoir of 100)\n")
    print(table(["window end", "interval PFI: date", "iPFI date, L = 100", "iPFI date, L = 1,000",
                 "error, L = 100", "error, L = 1,000"], table_rows))
    for reservoir, result in results.items():
        print(f"median error, reservoir {reservoir:,}: {fmt(float(np.median(result.errors('ipfi-geometric-0.001'))))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder with elec2.csv")
    parser.add_argument("--results", type=Path, default=DEFAULT_OUT / "paper_scale",
                        help="folder with experiment_c.json and experiment_c_traces.csv.gz")
    parser.add_argument("--parts", default="traces,reservoir")
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--trees", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    parts = {p.strip() for p in args.parts.split(",")}
    if "traces" in parts:
        traces_part(args.results)
    if "reservoir" in parts:
        reservoir_part(args.data, args.rows, args.trees, args.seed)


if __name__ == "__main__":
    main()
