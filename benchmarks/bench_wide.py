"""Benchmark of a wide input: time and peak memory of ``ipfi explain`` against the floor.

The case: 3,000 rows x 300 numeric features, a scikit-learn LogisticRegression fitted on a
DataFrame, M = 10, zero-one loss. Each row costs 1 + 300 x 10 = 3,001 predictions of 300
columns, so one micro-batch of 1,000 rows is 900 million cells: evaluated in one model call,
that is 7 GB. ipfi sizes its model calls in cells instead (at most 4 million), whatever
``--batch-size`` says.

Printed per case: seconds, rows/s, peak RSS of the ``ipfi`` process, and the ratio of its
time to the **floor**: the same model predicting the same number of perturbed rows (each a
copy of a row with one column replaced by another row's value) in large batches, in this
process, timing block construction and ``predict`` only. Every case runs with one
OpenMP/BLAS thread (``--threads 1``), the floor too. The traces of every case must be
byte-identical (the batch size never changes a number).

Run from the repository root::

    python benchmarks/bench_wide.py            # full size (about a minute)
    python benchmarks/bench_wide.py --quick    # 500 rows
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

RUNNER = """
import resource, subprocess, sys
result = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
sys.stderr.write(f"{result.returncode} {peak}\\n")
sys.stdout.buffer.write(result.stdout)
"""


def make_case(folder: Path, rows: int, features: int) -> tuple[Path, Path]:
    import joblib
    import pandas as pd
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    X = rng.normal(size=(rows, features))
    weights = rng.normal(size=features) * (rng.random(features) < 0.1)
    y = (X @ weights + rng.normal(size=rows) > 0).astype(int)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(features)])
    model = LogisticRegression(max_iter=500).fit(frame, y)
    joblib.dump(model, folder / "model.joblib")
    frame["label"] = y
    frame.to_csv(folder / "wide.csv", index=False)
    return folder / "wide.csv", folder / "model.joblib"


def run_case(data: Path, model: Path, repeats: int, extra: list[str]) -> tuple[float, int, str]:
    """Seconds, peak RSS (bytes) and the SHA-256 of the traces of one ``ipfi explain`` process."""
    command = [sys.executable, "-m", "ipfi_cli", "explain", str(data), "-m", str(model), "-t", "label",
               "-M", str(repeats), "--seed", "1", "-q", "--threads", "1", *extra]
    env = dict(os.environ, PYTHONHASHSEED="0")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", RUNNER, *command], capture_output=True, env=env, check=True)
    seconds = time.perf_counter() - start
    code, peak_kb = done.stderr.decode().split()[-2:]
    if code != "0":
        raise SystemExit(f"ipfi failed: {done.stderr.decode()}")
    return seconds, int(peak_kb) * 1024, hashlib.sha256(done.stdout).hexdigest()[:12]


def floor_seconds(data: Path, model_path: Path, repeats: int, chunk_rows: int = 50_000) -> float:
    """The same number of perturbed predictions, in large batches, built and predicted in this process."""
    import joblib
    import pandas as pd
    from threadpoolctl import threadpool_limits

    model = joblib.load(model_path)
    frame = pd.read_csv(data)
    X = frame.drop(columns="label").to_numpy()
    n, p = X.shape
    per_row = 1 + p * repeats
    rng = np.random.default_rng(0)
    columns = list(frame.columns[:-1])
    start = time.perf_counter()
    with threadpool_limits(limits=1):
        rows_per_chunk = max(1, chunk_rows // per_row)
        for first in range(1, n, rows_per_chunk):
            last = min(n, first + rows_per_chunk)
            block = np.repeat(X[first:last], per_row, axis=0)
            # replace one column per perturbed row with an earlier row's value
            which = np.tile(np.r_[-1, np.repeat(np.arange(p), repeats)], last - first)
            donors = rng.integers(0, first, size=len(block))
            target = which >= 0
            block[np.nonzero(target)[0], which[target]] = X[donors[target], which[target]]
            model.predict(pd.DataFrame(block, columns=columns, copy=False))
    return time.perf_counter() - start


def reading_seconds(data: Path) -> float:
    """How long ipfi's reader takes to parse the whole CSV (part of every ipfi run, not of the floor)."""
    from ipfi_cli.io.readers import open_rows

    start = time.perf_counter()
    with open_rows(str(data)) as reader:
        for _ in reader:
            pass
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--features", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="500 rows")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    rows = 500 if args.quick else args.rows
    folder = Path(tempfile.mkdtemp(prefix="ipfi-wide-"))
    try:
        data, model = make_case(folder, rows, args.features)
        print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
        print(f"{rows:,} rows x {args.features} features, LogisticRegression, M = {args.repeats}, one thread")
        floor = floor_seconds(data, model, args.repeats)
        print(f"floor (model.predict on the same perturbed rows, batches of ~50,000 rows): {floor:.2f} s, "
              f"{(rows - 1) / floor:,.0f} rows/s")
        reading = reading_seconds(data)
        print(f"reading the CSV alone (ipfi's reader, in this process): {reading:.2f} s; floor + reading: "
              f"{floor + reading:.2f} s")
        tiny = folder / "tiny.csv"
        tiny.write_text("".join(open(data).readlines()[:3]))
        startup = min(run_case(tiny, model, args.repeats, [])[0] for _ in range(3))
        print(f"start-up (the same command on 2 rows: Python, scikit-learn's import, the model): {startup:.2f} s")
        print(f"{'case':<26}{'seconds':>9}{'rows/s':>9}{'peak RSS':>11}{'x floor':>9}{'beyond start-up, x':>22}  traces")  # noqa: E501
        for label, extra in (("default options", []), ("--batch-size 100", ["--batch-size", "100"]),
                             ("--batch-size 10", ["--batch-size", "10"])):
            seconds, peak, digest = run_case(data, model, args.repeats, extra)
            print(f"{label:<26}{seconds:>9.2f}{rows / seconds:>9,.0f}{peak / 2**20:>8,.0f} MB"
                  f"{seconds / floor:>9.2f}{(seconds - startup) / (floor + reading):>22.2f}  {digest}")
        print("(x floor: the whole command's time over the floor; beyond start-up: (seconds - start-up) over "
              "floor + reading; the traces column must be one value)")
    finally:
        if args.keep:
            print(f"kept {folder}")
        else:
            import shutil

            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
