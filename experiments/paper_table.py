"""Experiment A's cells beside the paper's Table 1, from the runs CSV (markdown on stdout).

Every run experiment_a.py finished is a row of ``experiments/results/experiment_a_runs.csv``;
this takes each (data set, sampling) cell's median and IQR over the orderings found there
(with the paper's settings: alpha 0.001, M 10, reservoir 1000, seed 0) and says where a cell
has fewer orderings than the paper's 10.

    python experiments/paper_table.py [--runs experiments/results/experiment_a_runs.csv]
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DEFAULT_OUT, table  # noqa: E402
from experiment_a import PAPER  # noqa: E402

PAPER_SETTINGS = {"alpha": "0.001", "repeats": "10", "reservoir": "1000", "seed": "0", "max_rows": ""}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=DEFAULT_OUT / "experiment_a_runs.csv")
    args = parser.parse_args()
    with args.runs.open() as f:
        runs = [r for r in csv.DictReader(f) if all(r[k] == v for k, v in PAPER_SETTINGS.items())]
    rows = []
    for name, paper in PAPER.items():
        cells = [name, paper[0]]
        for sampling, (p_median, p_iqr) in (("uniform", paper[2:4]), ("geometric", paper[4:6])):
            mine = [r for r in runs if r["dataset"] == name and r["sampling"] == sampling]
            errors = np.array([float(r["error"]) for r in mine])
            if not len(errors):
                cells += ["not run", f"{p_median:.3f} ({p_iqr:.3f})", ""]
                continue
            q1, median, q3 = np.percentile(errors, [25, 50, 75])
            verdict = "at or below" if median <= p_median else f"{median / p_median:.2f}x"
            cpu = [float(r["cpu_seconds"]) for r in mine if not math.isnan(float(r["cpu_seconds"]))]
            cells += [f"{median:.3f} ({q3 - q1:.3f}) [{q1:.3f}, {q3:.3f}], {len(errors)} orderings"
                      + (" (paper: 10)" if len(errors) < 10 else ""),
                      f"{p_median:.3f} ({p_iqr:.3f})",
                      verdict + (f"; {np.median(cpu):.0f} s CPU/run" if cpu else "")]
        rows.append(cells)
    print(table(["data", "model", "ours uniform: median (IQR) [Q1, Q3]", "paper uniform", "uniform vs paper",
                 "ours geometric", "paper geometric", "geometric vs paper"], rows))


if __name__ == "__main__":
    main()
