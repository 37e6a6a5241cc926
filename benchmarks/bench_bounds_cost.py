"""What the confidence bounds cost per row, through the command, against the same run without them.

Every round runs, in turn (so a burst of load from other processes hits all), ``ipfi explain``
on the same stream and model:

* ``plain``: no bounds option (the reference, measured in the same round);
* ``chebyshev``: ``--bounds`` (the paper's bound, a column per feature in the trace);
* ``realisations``: ``--bounds-method realisations`` (the calibrated bound, in the table,
  the ``--meta`` file and the metrics);
* ``realisations+columns``: both (the calibrated bound as trace columns too).

Each figure is the child process's CPU time (user + system), one OpenMP/BLAS thread; printed:
the median over the rounds and the spread (min-max), the extra cost per row over ``plain``
and the ratio to it. With ``--other-src DIR`` every command is also run from another
checkout's ``src`` (an earlier version, say), interleaved with this one's, for a before/after
in the same run.

The stream: river's Agrawal generator (9 features), LogisticRegression fitted on 5,000 rows
before it, M = 10, ``--every 1000``. Run from the repository root::

    python benchmarks/bench_bounds_cost.py                         # 20,000 rows, 5 rounds
    python benchmarks/bench_bounds_cost.py --rounds 3 --reservoir-size 1000
    python benchmarks/bench_bounds_cost.py --other-src /path/to/older/checkout/src
    python benchmarks/bench_bounds_cost.py --rows 5000 --rounds 3 --every 10 --smoothings --other-src ../main/src
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_row_cost import make_agrawal, run_cpu  # noqa: E402

VARIANTS = {
    "plain": [],
    "chebyshev": ["--bounds"],
    "realisations": ["--bounds-method", "realisations"],
    "realisations+columns": ["--bounds", "--bounds-method", "realisations"],
}
#: ``--smoothings``: the smoothings that merge, with and without bounds (the stream gets an event time per
#: second, column ``t``)
SMOOTHINGS = {
    "running-mean": ["--running-mean"],
    "running-mean+bounds": ["--running-mean", "--bounds"],
    "half-life": ["--half-life", "1h", "--time-column", "t"],
    "half-life+bounds": ["--half-life", "1h", "--time-column", "t", "--bounds"],
}


def spread(values: list[float], scale: float = 1.0, digits: int = 2) -> str:
    values = [v * scale for v in values]
    return f"{statistics.median(values):.{digits}f} [{min(values):.{digits}f}-{max(values):.{digits}f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reservoir-size", type=int, default=100)
    parser.add_argument("--other-src", type=Path, help="another checkout's src folder, run beside this one")
    parser.add_argument("--every", type=int, default=1000, help="a record every N rows (default 1000)")
    parser.add_argument("--smoothings", action="store_true",
                        help="also --running-mean and --half-life, with and without --bounds")
    args = parser.parse_args()
    variants = VARIANTS | (SMOOTHINGS if args.smoothings else {})
    here = Path(__file__).resolve().parents[1] / "src"
    sources = {"this": here} | ({"other": args.other_src.resolve()} if args.other_src else {})
    folder = Path(tempfile.mkdtemp(prefix="ipfi-boundscost-"))
    case = make_agrawal(folder, args.rows, "lr9")
    if args.smoothings:  # an event time per row, a second apart
        import pandas as pd

        pd.read_csv(case.data).assign(t=lambda f: range(len(f))).to_csv(case.data, index=False)
    base = [sys.executable, "-m", "ipfi_cli", "explain", str(case.data), "-m", str(case.model), "-t", "class",
            "-M", "10", "--seed", "1", "-q", "--threads", "1", "--every", str(args.every),
            "--reservoir-size", str(args.reservoir_size)]
    cpu: dict[tuple[str, str], list[float]] = {(s, v): [] for s in sources for v in variants}
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; {args.rows:,} rows, "
          f"reservoir {args.reservoir_size}, --every {args.every}, {args.rounds} rounds (one more to warm up); "
          "CPU seconds")
    for round_ in range(args.rounds + 1):
        for source, path in sources.items():
            env = dict(os.environ, PYTHONPATH=str(path), PYTHONHASHSEED="0")
            for variant, options in variants.items():
                seconds = run_cpu([*base, *options], env)
                if round_:
                    cpu[(source, variant)].append(seconds)
    explained = args.rows - 1
    for source, path in sources.items():
        print(f"\n== {source} ({path})")
        plain = cpu[(source, "plain")]
        for variant in variants:
            values = cpu[(source, variant)]
            extra = [(v - p) / explained for v, p in zip(values, plain)]
            ratio = [v / p for v, p in zip(values, plain)]
            print(f"   {variant:22s} {spread(values)} s   extra per row {spread(extra, 1e6, 1)} us   "
                  f"ratio {spread(ratio)}x")


if __name__ == "__main__":
    main()
