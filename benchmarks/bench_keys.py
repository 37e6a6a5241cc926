"""Benchmark of ``ipfi explain --by``: 100 keys over 10,000 rows (a script, not a test).

The sample data (HistGradientBoosting, 9 features) repeated to ``--rows`` rows, each row given a
key ``shop`` (``row % --keys``, so every key's rows are spread over the whole stream and keys
alternate row by row: the hardest case for the micro-batches). Runs, in interleaved rounds, each
as its own ``ipfi explain`` process (start-up included, the same for all):

* ``plain``: one explainer over all rows (the key column dropped), the reference;
* ``--by shop``: one explainer per key;
* ``--by shop --max-keys 10``: at most 10 live, the others saved as plain data and restored;
* ``--by shop --workers 1`` and ``--workers 2``: the keys spread over a local Dask cluster (its
  start-up included; each worker reads the whole input and explains its keys' rows).

Prints the wall and CPU time of the ``ipfi`` process (the workers' CPU is not in it: compare wall
times for them), the ratio to ``plain``, the speed-up of 2 workers over 1, the peak memory (RSS) of
the ``ipfi`` process and the size of the ``--state`` file with every key. The traces of every keyed
run are checked equal.

    python benchmarks/bench_keys.py [--rows 10000] [--keys 100] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data"


def run(command: list[str], out: Path) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (MiB) of one ``ipfi`` process."""
    start = time.perf_counter()
    with open(out, "wb") as handle:
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.DEVNULL,
                                   env={**os.environ, "OMP_NUM_THREADS": "1"})
        _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {process.returncode}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    lines = (SAMPLE / "agrawal_static.csv").read_text().splitlines()
    folder = Path(tempfile.mkdtemp(prefix="ipfi-bench-keys-"))
    data = folder / "keyed.csv"
    with open(data, "w") as handle:
        handle.write("shop," + lines[0] + "\n")
        for i in range(args.rows):
            handle.write(f"s{i % args.keys}," + lines[1 + i % (len(lines) - 1)] + "\n")
    base = [sys.executable, "-m", "ipfi_cli", "explain", str(data), "-m", str(SAMPLE / "agrawal_hgb.joblib"),
            "-t", "class", "--seed", "0", "--no-live", "-q", "--threads", "1", "--every", "100"]
    cases = {
        "plain": [*base, "--drop", "shop"],
        "--by shop": [*base, "--by", "shop"],
        "--by shop --max-keys 10": [*base, "--by", "shop", "--max-keys", "10"],
        "--by shop --workers 1": [*base, "--by", "shop", "--workers", "1"],
        "--by shop --workers 2": [*base, "--by", "shop", "--workers", "2"],
    }
    found: dict[str, list[tuple[float, float, float]]] = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, command in cases.items():
            found[name].append(run(command, folder / f"{len(found[name])}-{name.replace(' ', '_')}.csv"))
    keyed = [(folder / f"0-{name.replace(' ', '_')}.csv").read_bytes() for name in list(cases)[1:]]
    assert all(traces == keyed[0] for traces in keyed), "eviction or the workers changed the traces"
    state = folder / "all.state"
    run([*cases["--by shop"], "--state", str(state)], folder / "state-run.csv")
    reference_cpu = statistics.median(c for _, c, _ in found["plain"])
    print(f"ipfi explain on {args.rows:,} rows of the sample data, {args.keys} keys alternating row by row, "
          f"HistGradientBoosting, 9 features, M=10 (median of {args.rounds} interleaved rounds, one process each, "
          "start-up included):")
    for name, values in found.items():
        wall = statistics.median(w for w, _, _ in values)
        cpu = statistics.median(c for _, c, _ in values)
        peak = max(p for _, _, p in values)
        print(f"   {name:<26} wall {wall:6.2f} s  CPU {cpu:6.2f} s ({cpu / reference_cpu:4.2f}x plain)  "
              f"peak RSS {peak:5.0f} MiB")
    walls = {name: statistics.median(w for w, _, _ in values) for name, values in found.items()}
    one, two = walls["--by shop --workers 1"], walls["--by shop --workers 2"]
    print(f"   2 workers against 1: speed-up {one / two:.2f}, efficiency {one / two / 2:.0%} (wall)")
    size = state.stat().st_size
    print(f"   --state with every key: {size / 1e6:.1f} MB ({size / args.keys / 1e3:.1f} kB per key)")


if __name__ == "__main__":
    main()
