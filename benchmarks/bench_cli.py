"""Benchmark of ``ipfi explain`` as a command (a script printing figures, not a test).

1. ``ipfi --help`` wall time (target < 0.3 s), and a check that scikit-learn, river and
   pandas are not imported on that path.
2. Throughput through a pipe, ``cat rows.csv | ipfi explain -m agrawal_hgb.joblib -M 10``,
   against the engine's own rows/s (``IPFIEstimator.explain_many`` on the same rows,
   already parsed, in batches of the same size) in the same run (target >= 90 %). Rounds
   alternate engine and command so that a busy machine slows both alike.
3. Peak memory (RSS) of the command for 1,000,000 vs 100,000 rows (target within 10 %),
   rows generated on the fly into a pipe, a cheap model (a depth-4 decision tree), M = 1.

Run from the repository root::

    python benchmarks/bench_cli.py                 # everything (a few minutes)
    python benchmarks/bench_cli.py --skip-memory   # help and throughput only
"""

from __future__ import annotations

import argparse
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data"
IPFI = [sys.executable, "-m", "ipfi_cli"]
FEATURES = ["salary", "commission", "age", "elevel", "car", "zipcode", "hvalue", "hyears", "loan"]


# -- 1. --help ------------------------------------------------------------------------------------
def bench_help(repeats: int) -> None:
    script = Path(sys.executable).with_name("ipfi")
    command = [str(script)] if script.exists() else IPFI
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([*command, "--help"], stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - start)
    code = ("import sys; sys.argv = ['ipfi', '--help']\nfrom ipfi_cli.cli.app import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(','.join(m for m in ('sklearn', 'river', 'pandas', 'numpy') if m in sys.modules), file=sys.stderr)")
    heavy = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stderr.strip()
    print(f"ipfi --help ({' '.join(Path(c).name for c in command)}): min {min(times):.3f} s, "
          f"median {statistics.median(times):.3f} s over {repeats} runs (target < 0.3 s)")
    print(f"  heavy modules imported on the --help path: {heavy or 'none'}")
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([*command, "explain", "--help"], stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - start)
    print(f"ipfi explain --help: min {min(times):.3f} s, median {statistics.median(times):.3f} s")


# -- 2. throughput ----------------------------------------------------------------------------------
def engine_rate(path: Path, model_path: Path, repeats: int, batch: int, skip: int) -> tuple[float, float]:
    """Rows/s of explain_many on pre-parsed rows: (after the first ``skip`` rows, whole run)."""
    import joblib

    from ipfi_cli.core import IPFIEstimator
    from ipfi_cli.io.readers import RowReader
    from ipfi_cli.models import as_predictor

    with open(path, "rb") as f:
        rows = [r.values for r in RowReader(f)]
    targets = [r["class"] for r in rows]
    predictor = as_predictor(joblib.load(model_path))
    explainer = IPFIEstimator(predictor, predictor.columns, n_repeats=repeats, seed=0)
    start = time.perf_counter()
    mark = None
    for i in range(0, len(rows), batch):
        if i == skip:
            mark = time.perf_counter()
        explainer.explain_many(rows[i:i + batch], targets[i:i + batch])
    end = time.perf_counter()
    return (len(rows) - skip) / (end - mark), len(rows) / (end - start)


def command_rate(path: Path, model_path: Path, repeats: int, batch: int, skip: int, n_rows: int,
                 env: dict[str, str]) -> tuple[float, float]:
    """Rows/s of ``cat path | ipfi explain``: (between records ``skip`` and the last, whole run)."""
    start = time.perf_counter()
    cat = subprocess.Popen(["cat", str(path)], stdout=subprocess.PIPE)
    process = subprocess.Popen([*IPFI, "explain", "-m", str(model_path), "-t", "class", "-M", str(repeats),
                                "--seed", "0", "-q", "--batch-size", str(batch)],
                               stdin=cat.stdout, stdout=subprocess.PIPE, env=env)
    cat.stdout.close()
    fd = process.stdout.fileno()
    lines = 0
    mark = None
    while True:
        select.select([fd], [], [])
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        now = time.perf_counter()
        lines += chunk.count(b"\n")
        if mark is None and lines - 1 >= skip:  # header + `skip` records have arrived
            mark, rows_at_mark = now, lines - 1
    end = time.perf_counter()
    process.wait()
    cat.wait()
    assert lines - 1 == n_rows, (lines, n_rows)
    return (n_rows - rows_at_mark) / (end - mark), n_rows / (end - start)


SHARE_RUNNER = r"""
import atexit, sys, time
from ipfi_cli.core import IPFIEstimator
from ipfi_cli.run import explain as command
spent = {"engine": 0.0, "stream": 0.0}
explain_many, stream = IPFIEstimator.explain_many, command.ExplainSession._stream
def timed_many(self, *args, **kwargs):
    start = time.perf_counter()
    try:
        return explain_many(self, *args, **kwargs)
    finally:
        spent["engine"] += time.perf_counter() - start
def timed_stream(self, reader):
    start = time.perf_counter()
    try:
        return stream(self, reader)
    finally:
        spent["stream"] += time.perf_counter() - start
IPFIEstimator.explain_many, command.ExplainSession._stream = timed_many, timed_stream
atexit.register(lambda: print(f"{spent['engine']:.3f} {spent['stream']:.3f}", file=sys.stderr))
from ipfi_cli.cli.app import main
main()
"""


def engine_share(path: Path, model_path: Path, repeats: int, batch: int, env: dict[str, str]) -> float:
    """Inside one real ``cat | ipfi explain | consumer`` run: the share of the streaming loop's time
    spent in the engine (explain_many); the rest is reading, checking and writing."""
    cat = subprocess.Popen(["cat", str(path)], stdout=subprocess.PIPE)
    process = subprocess.Popen([sys.executable, "-c", SHARE_RUNNER, "explain", "-m", str(model_path), "-t", "class",
                                "-M", str(repeats), "--seed", "0", "-q", "--batch-size", str(batch)],
                               stdin=cat.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    cat.stdout.close()
    out, err = process.communicate()
    cat.wait()
    engine, loop = map(float, err.decode().split()[-2:])
    return engine / loop


def bench_throughput(rounds: int, repeats: int, batch: int, threads: str | None) -> None:
    path = SAMPLE / "agrawal_drift.csv"
    model = SAMPLE / "agrawal_hgb.joblib"
    n_rows = sum(1 for _ in open(path)) - 1
    env = dict(os.environ)
    # model commands may re-execute themselves under a fixed PYTHONHASHSEED (see ipfi_cli.cli.hash_seed); set one so
    # the timing wrapper below stays in the process that runs the command
    env["PYTHONHASHSEED"] = "0"
    if threads:
        env["OMP_NUM_THREADS"] = threads
        os.environ["OMP_NUM_THREADS"] = threads  # the engine below runs in this process
    skip = batch  # leave out the first batch: start-up and warm-up
    engine, command, engine_all, command_all = [], [], [], []
    for r in range(rounds):
        e_steady, e_all = engine_rate(path, model, repeats, batch, skip)
        c_steady, c_all = command_rate(path, model, repeats, batch, skip, n_rows, env)
        engine.append(e_steady)
        command.append(c_steady)
        engine_all.append(e_all)
        command_all.append(c_all)
        print(f"  round {r + 1}: engine {e_steady:,.0f} rows/s, command {c_steady:,.0f} rows/s "
              f"({c_steady / e_steady:.0%}); whole runs: engine {e_all:,.0f}, command {c_all:,.0f} rows/s "
              f"(command wall time includes start-up)")
    shares = [engine_share(path, model, repeats, batch, env) for _ in range(rounds)]
    print(f"  inside the command, the engine takes {statistics.median(shares):.1%} of the streaming loop's time "
          f"(median of {rounds} runs: {', '.join(f'{x:.1%}' for x in shares)}); the rest is reading, parsing, "
          "checking and writing")
    e, c = statistics.median(engine), statistics.median(command)
    ratio = statistics.median(x / y for x, y in zip(command, engine))
    print(f"throughput, {n_rows:,} rows of {path.name}, {model.name} (9 features), M={repeats}, batch {batch}, "
          f"OMP_NUM_THREADS={threads or 'default'}: engine {e:,.0f} rows/s, through the pipe {c:,.0f} rows/s; "
          f"command/engine per round, median {ratio:.0%} of {rounds} rounds (target >= 90%)")


# -- 3. memory --------------------------------------------------------------------------------------
GENERATOR = r"""
import random, sys
n = int(sys.argv[1])
rng = random.Random(0)
out = sys.stdout
out.write("salary,commission,age,elevel,car,zipcode,hvalue,hyears,loan,class\n")
lines = []
for i in range(n):
    salary = round(rng.uniform(20000, 150000), 2)
    age = rng.randint(20, 80)
    label = int((age < 40 and 50000 <= salary <= 100000) or (40 <= age < 60 and 75000 <= salary <= 125000)
                or (age >= 60 and 25000 <= salary <= 75000))
    lines.append(f"{salary},{0.0 if salary >= 75000 else round(rng.uniform(10000, 75000), 2)},{age},"
                 f"{rng.randint(0, 4)},{rng.randint(1, 20)},{rng.randint(0, 8)},{round(rng.uniform(5e4, 9e5), 2)},"
                 f"{rng.randint(1, 30)},{round(rng.uniform(0, 5e5), 2)},{label}\n")
    if len(lines) == 1000:
        out.write("".join(lines))
        lines = []
out.write("".join(lines))
"""


def cheap_model(directory: str) -> Path:
    import joblib
    import pandas as pd
    from sklearn.tree import DecisionTreeClassifier

    frame = pd.read_csv(SAMPLE / "agrawal_static.csv")
    model = DecisionTreeClassifier(max_depth=4, random_state=0).fit(frame[FEATURES], frame["class"])
    path = Path(directory) / "tree.joblib"
    joblib.dump(model, path)
    return path


def peak_rss(n_rows: int, model: Path, env: dict[str, str]) -> tuple[float, float, int]:
    """(peak RSS in MiB, seconds, records written) of generator | ipfi explain > counted."""
    start = time.perf_counter()
    generator = subprocess.Popen([sys.executable, "-c", GENERATOR, str(n_rows)], stdout=subprocess.PIPE)
    process = subprocess.Popen([*IPFI, "explain", "-m", str(model), "-t", "class", "-M", "1", "--seed", "0", "-q"],
                               stdin=generator.stdout, stdout=subprocess.PIPE, env=env)
    generator.stdout.close()
    lines = 0
    while chunk := process.stdout.read(1 << 20):
        lines += chunk.count(b"\n")
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    generator.wait()
    assert process.returncode == 0
    return usage.ru_maxrss / 1024, time.perf_counter() - start, lines - 1


def bench_memory(small: int, large: int) -> None:
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as directory:
        model = cheap_model(directory)
        results = {}
        for n in (small, large):
            rss, seconds, records = peak_rss(n, model, env)
            assert records == n, (records, n)
            results[n] = rss
            print(f"  {n:>9,} rows: peak RSS {rss:.1f} MiB, {seconds:.1f} s ({n / seconds:,.0f} rows/s), "
                  f"{records:,} records")
    ratio = results[large] / results[small]
    print(f"peak memory, {large:,} vs {small:,} rows (depth-4 tree, M=1, one record per row): "
          f"{results[large]:.1f} vs {results[small]:.1f} MiB = {ratio - 1:+.1%} (target within 10%)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--help-repeats", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=10, help="M for the throughput run")
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--threads", default=None, help="OMP_NUM_THREADS for the throughput run (both sides)")
    parser.add_argument("--small", type=int, default=100_000)
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--skip-help", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-memory", action="store_true")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    if not args.skip_help:
        bench_help(args.help_repeats)
    if not args.skip_throughput:
        bench_throughput(args.rounds, args.repeats, args.batch_size, args.threads)
    if not args.skip_memory:
        bench_memory(args.small, args.large)


if __name__ == "__main__":
    main()
