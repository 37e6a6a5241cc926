"""Benchmark of ``ipfi batch`` on a local Dask cluster with 1 and 2 workers (a script, not a test).

Batch PFI of the sample model (HistGradientBoosting, 9 features) on the sample data repeated to
``--rows`` rows, ``--repeats`` permutations: one task per feature, run in this process (the
reference), then on local clusters of 1 and 2 worker processes (one thread each), in interleaved
rounds; wall time (the work is spread over processes, so CPU time of this process says nothing).
Prints the speed-up and efficiency against 1 worker, each worker's peak memory (RSS), and what
crosses to the workers (the pickled rows and model, once per worker; a task carries only its
columns and random stream). The numbers of every run are checked equal to the reference's.

    python benchmarks/bench_dask.py [--rows 20000] [--repeats 3] [--rounds 2]
"""

from __future__ import annotations

import argparse
import logging
import pickle
import statistics
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data"


def main() -> None:
    import joblib
    import pandas as pd
    from dask.distributed import Client, LocalCluster
    from threadpoolctl import threadpool_limits

    from ipfi_cli.core import batch_pfi
    from ipfi_cli.models import as_predictor
    from ipfi_cli.run.distributed import dask_runner

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    frame = pd.read_csv(SAMPLE / "agrawal_static.csv")
    frame = pd.concat([frame] * (args.rows // len(frame) + 1), ignore_index=True).iloc[:args.rows]
    columns = [c for c in frame.columns if c != "class"]
    model = as_predictor(joblib.load(SAMPLE / "agrawal_hgb.joblib"))
    X, y = frame[columns], frame["class"].tolist()

    def work(client):
        return batch_pfi(model, X, y, columns, loss="zero-one", n_repeats=args.repeats, seed=0,
                         runner=None if client is None else dask_runner(client))

    clusters = {}
    for n in (1, 2):
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                               dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR,
                               env={"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"})
        clusters[n] = (cluster, Client(cluster, set_as_default=False))
    times: dict[str, list[float]] = {"one process": [], "1 worker": [], "2 workers": []}
    reference = None
    with threadpool_limits(limits=1):
        for _ in range(args.rounds):
            for name, client in (("one process", None), ("1 worker", clusters[1][1]), ("2 workers", clusters[2][1])):
                start = time.perf_counter()
                result = work(client)
                times[name].append(time.perf_counter() - start)
                reference = result.values if reference is None else reference
                assert np.array_equal(result.values, reference), name
    one = statistics.median(times["1 worker"])
    print(f"batch PFI, {args.rows:,} rows x 9 features, {args.repeats} repeats (wall time, median of {args.rounds} "
          "interleaved rounds; the same numbers everywhere):")
    for name, values in times.items():
        median = statistics.median(values)
        line = f"   {name:<12} {median:6.2f} s"
        if name == "2 workers":
            line += f"  speed-up vs 1 worker {one / median:.2f}, efficiency {one / median / 2:.0%}"
        print(line)
    for n, (cluster, client) in clusters.items():
        peaks = client.run(lambda: __import__("psutil").Process().memory_info().rss)
        print(f"   {n} worker(s): RSS per worker " + ", ".join(f"{v / 2**20:.0f} MiB" for v in peaks.values()))
        client.close()
        cluster.close()
    shipped = len(pickle.dumps((model, X.to_numpy(), y)))
    print(f"   the rows and the model go once to each worker: {shipped / 1e6:.2f} MB ({shipped / args.rows:.0f} "
          f"bytes per row); a task adds its columns and seed, a result is {args.repeats} floats")


if __name__ == "__main__":
    main()
