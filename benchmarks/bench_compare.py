"""Time ``ipfi compare`` against ``ipfi explain`` + ``ipfi batch`` run separately.

The issue's target: on the 20,000-row agrawal sample with a scikit-learn model,
``ipfi compare`` takes at most twice the time of ``ipfi explain`` plus ``ipfi batch``.
Each command runs as a subprocess (so start-up and model loading count, as for a user),
the commands are interleaved round by round so that background load hits them alike, and
the median wall time over the rounds is reported.

Default ``compare`` runs *two* iPFI passes (uniform and geometric sampling) plus one
batch PFI, so its expected cost is about (2 E + B) / (E + B) of the separate commands;
``compare --sampling geometric`` does exactly the work of ``explain`` + ``batch`` and
shows the overhead of comparing (should be about 1x).

    python benchmarks/bench_compare.py [--rounds 3] [--data sample_data/agrawal_drift.csv]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(REPO / "sample_data" / "agrawal_drift.csv"))
    parser.add_argument("--model", default=str(REPO / "sample_data" / "agrawal_hgb.joblib"))
    parser.add_argument("--target", default="class")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", default="1", help="OMP_NUM_THREADS for every command (stable timings)")
    args = parser.parse_args()
    ipfi = [sys.executable, "-m", "ipfi_cli"]
    common = [args.data, "-m", args.model, "-t", args.target, "--seed", "0", "-q", "-o", os.devnull]
    commands = {
        "explain": [*ipfi, "explain", *common],
        "batch": [*ipfi, "batch", *common],
        "compare": [*ipfi, "compare", *common],
        "compare --sampling geometric": [*ipfi, "compare", *common, "--sampling", "geometric"],
    }
    env = dict(os.environ, OMP_NUM_THREADS=args.threads)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for round_ in range(args.rounds):
        for name, command in commands.items():
            start = time.perf_counter()
            subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
            times[name].append(time.perf_counter() - start)
            print(f"round {round_ + 1}: {name}: {times[name][-1]:.1f} s", file=sys.stderr, flush=True)
    median = {name: statistics.median(values) for name, values in times.items()}
    separate = median["explain"] + median["batch"]
    print(f"data {args.data}, model {args.model}, {args.rounds} round(s), OMP_NUM_THREADS={args.threads}")
    for name, value in median.items():
        print(f"{name:30s} median {value:6.1f} s   (all: {', '.join(f'{v:.1f}' for v in times[name])})")
    print(f"{'explain + batch':30s} median {separate:6.1f} s")
    print(f"compare / (explain + batch):                     {median['compare'] / separate:.2f}x")
    print(f"compare --sampling geometric / (explain + batch): {median['compare --sampling geometric'] / separate:.2f}x")


if __name__ == "__main__":
    main()
