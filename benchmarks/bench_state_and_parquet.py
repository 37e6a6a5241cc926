"""Benchmark of the columnar input and of mergeable state (a script printing figures, not a test).

1. Reading: rows/s of the Parquet reader against the CSV reader on the same table (the sample
   data repeated to ``--rows`` rows), CPU time, interleaved rounds; Arrow's peak allocation
   while reading (one record batch) against the table's size.
2. State: the size of an explainer's plain-data state (JSON + NumPy arrays) and the CPU time to
   write and read it, for the sample model's 9 features, M = 10, a reservoir of 100.
3. Merge: shards of one stream explained separately and merged (2 and 4 shards, by key), the
   merged running mean against the whole stream's (gap and the estimate's standard error), and
   the CPU time of ``merge_states``.

Run from the repository root (``pip install 'ipfi-cli[parquet]'``)::

    python benchmarks/bench_state_and_parquet.py [--rows 200000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data"


def cpu(fn):
    start = time.process_time()
    out = fn()
    return time.process_time() - start, out


def bench_reading(rows: int, rounds: int, folder: Path) -> None:
    import pandas as pd
    import pyarrow as pa

    from ipfi_cli.io.readers import open_rows

    frame = pd.read_csv(SAMPLE / "agrawal_static.csv")
    frame = pd.concat([frame] * (rows // len(frame) + 1), ignore_index=True).iloc[:rows]
    csv_path, parquet_path = folder / "rows.csv", folder / "rows.parquet"
    frame.to_csv(csv_path, index=False)
    frame.to_parquet(parquet_path, index=False)

    def read(path: Path) -> int:
        with open_rows(str(path), hint=False) as reader:
            return sum(1 for _ in reader)

    times: dict[str, list[float]] = {"csv": [], "parquet": []}
    for _ in range(rounds):  # interleaved: a busy machine slows both alike
        for name, path in (("csv", csv_path), ("parquet", parquet_path)):
            seconds, n = cpu(lambda path=path: read(path))
            assert n == rows
            times[name].append(seconds)
    csv_rate, parquet_rate = (rows / statistics.median(times[k]) for k in ("csv", "parquet"))
    print(f"1. reading {rows:,} rows x 10 columns (CPU time, median of {rounds} interleaved rounds):")
    print(f"   CSV     {csv_rate:>10,.0f} rows/s  ({csv_path.stat().st_size / 1e6:.1f} MB)")
    print(f"   Parquet {parquet_rate:>10,.0f} rows/s  ({parquet_path.stat().st_size / 1e6:.1f} MB)  "
          f"ratio Parquet/CSV {parquet_rate / csv_rate:.2f}")
    before, peak = pa.total_allocated_bytes(), 0
    with open_rows(str(parquet_path), hint=False) as reader:
        for i, _ in enumerate(reader):
            if i % 1000 == 0:
                peak = max(peak, pa.total_allocated_bytes() - before)
    table_bytes = pa.Table.from_pandas(frame).nbytes
    print(f"   Arrow's peak allocation while reading: {peak / 1e6:.2f} MB; the whole table: {table_bytes / 1e6:.1f} MB")


def explained(X, y, seed, model, columns, **options):
    from ipfi_cli.core.mergeable import MergeablePFI

    explainer = MergeablePFI(model, columns, seed=seed, **options)
    explainer.explain_many(X, y)
    return explainer


def bench_state_and_merge(rows: int, rounds: int) -> None:
    import joblib
    import pandas as pd

    from ipfi_cli.core import plain_state
    from ipfi_cli.core.mergeable import MergeablePFI, merge_states
    from ipfi_cli.models import as_predictor

    frame = pd.read_csv(SAMPLE / "agrawal_static.csv")
    columns = [c for c in frame.columns if c != "class"]
    X, y = frame[columns].to_numpy(dtype=float)[:rows], frame["class"].to_numpy()[:rows]
    model = as_predictor(joblib.load(SAMPLE / "agrawal_hgb.joblib"))
    options = {"loss": "zero-one", "n_repeats": 10, "sampling": "uniform", "reservoir_size": 100}
    whole = explained(X, y, 0, model, columns, **options)
    state = whole.state_dict()
    write, data = cpu(lambda: [plain_state.dumps(state) for _ in range(rounds)][-1])
    read, _ = cpu(lambda: [plain_state.loads(data) for _ in range(rounds)])
    print(f"2. plain-data state of one explainer (9 features, M = 10, reservoir 100): {len(data) / 1e3:.1f} kB, "
          f"write {write / rounds * 1e3:.1f} ms, read {read / rounds * 1e3:.1f} ms (CPU)")
    se = np.sqrt(whole._tracker.variance / whole._tracker.effective_count)
    print(f"3. merge of shards by key ({len(y):,} rows of the sample data, running mean, uniform sampling):")
    for n_shards in (2, 4):
        shard_of = np.random.default_rng(1).integers(0, n_shards, len(y))
        shards = [explained(X[shard_of == k], y[shard_of == k], 1 + k, model, columns, **options)
                  for k in range(n_shards)]
        seconds, merged_state = cpu(lambda shards=shards: merge_states([s.state_dict() for s in shards], seed=9))
        merged = MergeablePFI(model, columns, seed=9, **options)
        merged.load_state_dict(merged_state)
        gap = np.abs(merged.importance_array() - whole.importance_array())
        print(f"   {n_shards} shards: largest gap to the whole stream {gap.max():.4f} "
              f"({gap.max() / se[gap.argmax()]:.1f} standard errors of the whole's estimate); "
              f"merge {seconds * 1e3:.1f} ms CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        bench_reading(args.rows, args.rounds, Path(folder))
    bench_state_and_merge(5000, args.rounds)


if __name__ == "__main__":
    main()
