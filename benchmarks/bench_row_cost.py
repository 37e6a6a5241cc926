"""ipfi's own cost per row, through the command, against the floor measured in the same run.

For each case, every round runs (in turn, so a burst of load from other processes hits all):

* the **floor**: the same model predicting every perturbed row (each stream row, then one
  copy per realisation and feature with that feature replaced by an earlier row's value)
  in large batches, built with numpy and predicted from a DataFrame, with no explainer
  bookkeeping; in this process. Printed with the model's ``predict`` alone beside it;
* ``ipfi explain`` (the console script beside this Python, as users run it) on the N rows and
  on 2 rows (its start-up: Python, imports, the model); ``python -m ipfi_cli`` on 2 rows too;
  ipfi's cost per row beyond start-up is ``(cpu(N rows) - cpu(2 rows)) / (N - 2)``;
* for the start-up target, ``python -c`` loading the same model file with joblib.

Every figure is CPU time (user + system; of the child process for commands), so a machine
shared with other work inflates it less than wall time; one OpenMP/BLAS thread everywhere.
Printed: the median over the rounds and the spread (min-max) of each figure and ratio.

Cases (targets from the project's performance issue):

* ``lr9``: LogisticRegression on river's Agrawal stream (9 features), M = 10, 20,000 rows:
  ipfi per row beyond start-up <= 1.3x the floor for the file, <= 1.6x for the same file
  through a pipe (``cat FILE | ipfi explain ... -``; cat's CPU is not counted);
* ``hgb9``: HistGradientBoostingClassifier, the same stream: <= 1.1x the floor;
* ``lr300``: LogisticRegression, 300 features, M = 10: <= 1.2x the model's own predict.

Run from the repository root::

    python benchmarks/bench_row_cost.py                     # all cases, 5 rounds (~5 minutes)
    python benchmarks/bench_row_cost.py --quick             # fewer rows, 3 rounds
    python benchmarks/bench_row_cost.py --cases lr9 --rounds 7
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402

M = 10
#: the targets of the project's issue 41: a regular file, and the same file through a pipe
FILE_TARGET, PIPE_TARGET = 1.3, 1.6
#: a 2-row explain against python -c loading the same model (the same issue)
STARTUP_TARGET = 1.2


@dataclass
class Case:
    name: str
    data: Path
    tiny: Path
    model: Path
    rows: int
    columns: list[str]
    target: float  # ratio target
    against: str  # "floor" or "model"


def run_cpu(command: list[str], env: dict[str, str]) -> float:
    """CPU seconds (user + system) of one child process and everything it exec'd."""
    with tempfile.TemporaryFile() as errors:
        pid = os.posix_spawn(command[0], command, env, file_actions=[
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0), (os.POSIX_SPAWN_DUP2, errors.fileno(), 2)])
        _, status, usage = os.wait4(pid, 0)
        if os.waitstatus_to_exitcode(status):
            errors.seek(0)
            raise SystemExit(f"failed: {' '.join(command)}\n{errors.read().decode(errors='replace')[-3000:]}")
    return usage.ru_utime + usage.ru_stime


def run_cpu_piped(command: list[str], data: Path, env: dict[str, str]) -> float:
    """CPU seconds of ``command`` reading ``data`` from a pipe that ``cat`` writes (not counted)."""
    read, write = os.pipe()
    try:
        cat = os.posix_spawn("/bin/cat", ["cat", str(data)], env, file_actions=[(os.POSIX_SPAWN_DUP2, write, 1),
                                                                              (os.POSIX_SPAWN_CLOSE, read)])
        with tempfile.TemporaryFile() as errors:
            pid = os.posix_spawn(command[0], command, env, file_actions=[
                (os.POSIX_SPAWN_DUP2, read, 0), (os.POSIX_SPAWN_CLOSE, write),
                (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0), (os.POSIX_SPAWN_DUP2, errors.fileno(), 2)])
            os.close(read)
            os.close(write)
            read = write = -1
            _, status, usage = os.wait4(pid, 0)
            os.waitpid(cat, 0)
            if os.waitstatus_to_exitcode(status):
                errors.seek(0)
                raise SystemExit(f"failed: {' '.join(command)}\n{errors.read().decode(errors='replace')[-3000:]}")
    finally:
        for fd in (read, write):
            if fd >= 0:
                os.close(fd)
    return usage.ru_utime + usage.ru_stime


def make_agrawal(folder: Path, rows: int, kind: str) -> Case:
    import joblib
    import pandas as pd
    from river.datasets import synth
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression

    stream = list(synth.Agrawal(classification_function=1, seed=7).take(5000 + rows))
    frame = pd.DataFrame([x for x, _ in stream])
    columns = list(frame.columns)
    frame["class"] = [y for _, y in stream]
    train = frame.iloc[:5000]
    if kind == "lr9":
        model = LogisticRegression(max_iter=1000).fit(train[columns], train["class"])
        target = FILE_TARGET
    else:
        model = HistGradientBoostingClassifier(max_iter=50, random_state=0).fit(train[columns], train["class"])
        target = 1.1
    joblib.dump(model, folder / f"{kind}.joblib")
    frame.iloc[5000:].to_csv(folder / f"{kind}.csv", index=False)
    frame.iloc[5000:5002].to_csv(folder / f"{kind}-tiny.csv", index=False)
    return Case(kind, folder / f"{kind}.csv", folder / f"{kind}-tiny.csv", folder / f"{kind}.joblib", rows,
                columns, target, "floor")


def make_wide(folder: Path, rows: int, features: int = 300) -> Case:
    import joblib
    import pandas as pd
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    X = rng.normal(size=(rows + 2000, features))
    weights = rng.normal(size=features) * (rng.random(features) < 0.1)
    y = (X @ weights + rng.normal(size=len(X)) > 0).astype(int)
    columns = [f"f{i}" for i in range(features)]
    frame = pd.DataFrame(X, columns=columns)
    model = LogisticRegression(max_iter=500).fit(frame.iloc[:2000], y[:2000])
    joblib.dump(model, folder / "lr300.joblib")
    frame["class"] = y
    frame.iloc[2000:].to_csv(folder / "lr300.csv", index=False)
    frame.iloc[2000:2002].to_csv(folder / "lr300-tiny.csv", index=False)
    return Case("lr300", folder / "lr300.csv", folder / "lr300-tiny.csv", folder / "lr300.joblib", rows, columns,
                1.2, "model")


def floor_cpu(case: Case, chunk_rows: int = 65_536) -> tuple[float, float]:
    """CPU seconds of the floor (blocks built and predicted) and of the model's predict alone."""
    import joblib
    import pandas as pd
    from threadpoolctl import threadpool_limits

    model = joblib.load(case.model)
    X = pd.read_csv(case.data)[case.columns].to_numpy(dtype=np.float64)
    n, p = X.shape
    per_row = 1 + p * M
    rng = np.random.default_rng(0)
    clock = time.process_time
    predicting = 0.0
    with threadpool_limits(limits=1):
        start = clock()
        rows_per_chunk = max(1, chunk_rows // per_row)
        for first in range(1, n, rows_per_chunk):
            last = min(n, first + rows_per_chunk)
            block = np.repeat(X[first:last], per_row, axis=0)
            which = np.tile(np.r_[-1, np.tile(np.arange(p), M)], last - first)
            donors = rng.integers(0, first, size=len(block))
            replaced = which >= 0
            block[np.nonzero(replaced)[0], which[replaced]] = X[donors[replaced], which[replaced]]
            frame = pd.DataFrame(block, columns=case.columns, copy=False)
            begin = clock()
            model.predict(frame)
            predicting += clock() - begin
        total = clock() - start
    return total, predicting


def _has_module(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def spread(values: list[float], unit: str = "", scale: float = 1.0, digits: int = 2) -> str:
    values = [v * scale for v in values]
    return (f"{statistics.median(values):.{digits}f}{unit} "
            f"[{min(values):.{digits}f}-{max(values):.{digits}f}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="lr9,hgb9,lr300", help="comma-separated: lr9, hgb9, lr300")
    parser.add_argument("--rows", type=int, default=20_000, help="stream rows of the 9-feature cases")
    parser.add_argument("--wide-rows", type=int, default=2_000, help="stream rows of the 300-feature case")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="5,000 / 500 rows, 3 rounds")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.wide_rows, args.rounds = 5_000, 500, 3
    names = [c.strip() for c in args.cases.split(",") if c.strip()]
    folder = Path(tempfile.mkdtemp(prefix="ipfi-rowcost-"))
    env = dict(os.environ)
    env.pop("PYTHONHASHSEED", None)  # as a user runs it
    # as installed: pip compiles a package's bytecode when it installs it, and an editable checkout
    # writes it on its first run (round 0 here); with PYTHONDONTWRITEBYTECODE set, every run of a
    # checkout would compile ipfi's ~100 modules again (about 0.05 s of start-up no user pays)
    bytecode_note = (" (PYTHONDONTWRITEBYTECODE unset for the commands)"
                     if env.pop("PYTHONDONTWRITEBYTECODE", None) else "")
    python = sys.executable
    # the command as users run it: the console script beside this Python (else python -m ipfi_cli);
    # python -m is also measured for start-up (CPython 3.11 runs it about 0.3 s slower, see the note)
    script = Path(python).parent / "ipfi"
    ipfi = [str(script)] if script.is_file() else [python, "-m", "ipfi_cli"]
    ipfi_name = ["ipfi"] if script.is_file() else ["python", "-m", "ipfi_cli"]
    try:
        cases = [make_wide(folder, args.wide_rows) if n == "lr300" else make_agrawal(folder, args.rows, n)
                 for n in names]
        print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; {args.rounds} rounds; "
              f"CPU seconds; median [min-max] over rounds{bytecode_note}")
        startup_ratios: list[float] = []
        load_cpu: list[float] = []
        tiny_cpu: list[float] = []
        tiny_m_cpu: list[float] = []
        typer_cpu: list[float] = []
        # typer >= 0.27 coerces every option through pydantic, which it imports when it parses
        typer_coercion = [python, "-c", "import typer._adapters"] if _has_module("typer._adapters") else None
        results: dict[str, dict[str, list[float]]] = {
            c.name: {"floor": [], "model": [], "full": [], "tiny": [], "pipe": []} for c in cases}
        for round_ in range(args.rounds + 1):  # round 0 warms the caches up and is not counted
            for case in cases:
                command = [*ipfi, "explain", "-m", str(case.model), "-t", "class",
                           "-M", str(M), "--seed", "1", "-q", "--threads", "1"]
                floor, model = floor_cpu(case)
                full = run_cpu([*command, str(case.data)], env)
                piped = run_cpu_piped([*command, "-"], case.data, env) if case.name == "lr9" else 0.0
                tiny = run_cpu([*command, str(case.tiny)], env)
                if round_:
                    for key, value in (("floor", floor), ("model", model), ("full", full), ("tiny", tiny),
                                       ("pipe", piped)):
                        results[case.name][key].append(value)
            load = run_cpu([python, "-c", f"import joblib; joblib.load({str(cases[0].model)!r})"], env)
            tiny_args = ["explain", "-m", str(cases[0].model), "-t", "class", "-M", str(M), "--seed", "1", "-q",
                         "--threads", "1", str(cases[0].tiny)]
            tiny = run_cpu([*ipfi, *tiny_args], env)
            tiny_m = run_cpu([python, "-m", "ipfi_cli", *tiny_args], env)
            if typer_coercion is not None:
                coercion = run_cpu(typer_coercion, env) - run_cpu([python, "-c", "import typer"], env)
            if round_:
                if typer_coercion is not None:
                    typer_cpu.append(coercion)
                load_cpu.append(load)
                tiny_cpu.append(tiny)
                tiny_m_cpu.append(tiny_m)
                startup_ratios.append(tiny / load)
        for case in cases:
            r = results[case.name]
            explained = case.rows - 1
            per_row = [(f - t) / (case.rows - 2) for f, t in zip(r["full"], r["tiny"])]
            floor_row = [f / explained for f in r["floor"]]
            model_row = [m / explained for m in r["model"]]
            reference = floor_row if case.against == "floor" else model_row
            ratios = [a / b for a, b in zip(per_row, reference)]
            print(f"\n== {case.name}: {case.rows:,} rows x {len(case.columns)} features, M = {M}")
            print(f"   ipfi explain, whole run          {spread(r['full'], ' s')}")
            print(f"   ipfi explain on 2 rows (start-up) {spread(r['tiny'], ' s')}")
            print(f"   ipfi per row beyond start-up     {spread(per_row, ' us', 1e6, 1)}")
            print(f"   floor per row (blocks + predict)  {spread(floor_row, ' us', 1e6, 1)}")
            print(f"   model's predict alone per row    {spread(model_row, ' us', 1e6, 1)}")
            met = statistics.median(ratios) <= case.target
            print(f"   ratio ipfi / {case.against:<5}               {spread(ratios, 'x')}   "
                  f"target <= {case.target}: {'MET' if met else 'MISSED'} (median)")
            if case.against == "model":
                print(f"   ratio ipfi / floor               {spread([a / b for a, b in zip(per_row, floor_row)], 'x')}")
            if case.name == "lr9":  # the same file through a pipe (cat FILE | ipfi explain ... -)
                piped_row = [(f - t) / (case.rows - 2) for f, t in zip(r["pipe"], r["tiny"])]
                piped_ratios = [a / b for a, b in zip(piped_row, floor_row)]
                met = statistics.median(piped_ratios) <= PIPE_TARGET
                print(f"   through a pipe, per row           {spread(piped_row, ' us', 1e6, 1)}")
                print(f"   ratio piped / floor               {spread(piped_ratios, 'x')}   target <= {PIPE_TARGET}: "
                      f"{'MET' if met else 'MISSED'} (median)")
        print(f"\n== start-up ({cases[0].name}'s model)")
        print(f"   python -c 'joblib.load(model)'    {spread(load_cpu, ' s')}")
        print(f"   ipfi explain on 2 rows            {spread(tiny_cpu, ' s')}   ({' '.join(ipfi_name)})")
        met = statistics.median(startup_ratios) <= STARTUP_TARGET
        print(f"   ratio                             {spread(startup_ratios, 'x')}   target <= {STARTUP_TARGET}: "
              f"{'MET' if met else 'MISSED'} (median)")
        print(f"   the same as python -m ipfi_cli    {spread(tiny_m_cpu, ' s')}   ratio "
              f"{spread([t / b for t, b in zip(tiny_m_cpu, load_cpu)], 'x')}")
        if typer_cpu:
            print(f"   of it, typer's pydantic coercion   {spread(typer_cpu, ' s', digits=3)}   "
                  f"(import typer._adapters beyond import typer; typer >= 0.27)")
    finally:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
