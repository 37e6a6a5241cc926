"""Soak run: a long stream through ``ipfi explain --learn``, watching memory and speed.

Rows are generated on the fly (a drifting logistic concept over standard-normal features)
and written into the stdin of one ``ipfi explain`` subprocess whose river model learns
prequentially; its traces (one record per row, ``--every 1``) are read back from its
stdout as they come. Reported:

* peak memory of the ipfi process (``VmHWM`` from ``/proc/<pid>/status``) and its current
  ``VmRSS`` after 100,000 rows and at the end;
* rows/s in windows of ``--window`` rows (flat is the target: the explainer's state is of
  constant size, so neither speed nor memory may drift with the stream's length);
* a check that the output holds exactly one record per row, numbered 1..N in order, with
  the header once and no torn line.

    python benchmarks/bench_soak.py                      # 1,000,000 rows (about 15 minutes here)
    python benchmarks/bench_soak.py --rows 200000 --json soak.json
    python benchmarks/bench_soak.py --checkpoint-every 10000   # with --state: the cost of checkpoints

Linux only (reads ``/proc``). The exit code is 1 when the record check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent


def status_kib(pid: int) -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` (peak) of a process, in KiB; empty once it has gone."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    out[key] = int(value.split()[0])
    except OSError:
        pass
    return out


def make_model(kind: str, path: Path) -> None:
    from river import linear_model, preprocessing, tree

    if kind == "logreg":
        model = preprocessing.StandardScaler() | linear_model.LogisticRegression()
    else:
        model = tree.HoeffdingTreeClassifier(grace_period=200)
    path.write_bytes(pickle.dumps(model))


def feed(stdin, rows: int, n_features: int, seed: int, chunk: int = 5000) -> None:
    """Write the header and ``rows`` rows into ``stdin``; the concept changes halfway."""
    rng = np.random.default_rng(seed)
    names = [f"x{i}" for i in range(n_features)]
    before = np.linspace(2.0, 0.0, n_features)  # x0 matters most, the last feature not at all
    after = before[::-1].copy()  # then the order flips
    try:
        stdin.write((",".join([*names, "y"]) + "\n").encode())
        done = 0
        while done < rows:
            n = min(chunk, rows - done)
            X = rng.standard_normal((n, n_features))
            weights = np.where((np.arange(done, done + n) < rows // 2)[:, None], before, after)
            p = 1.0 / (1.0 + np.exp(-(X * weights).sum(axis=1)))
            y = (rng.random(n) < p).astype(int)
            lines = [",".join(f"{v:.4f}" for v in x) + f",{label}" for x, label in zip(X.tolist(), y.tolist())]
            stdin.write(("\n".join(lines) + "\n").encode())
            done += n
        stdin.close()
    except BrokenPipeError:  # ipfi stopped early: its exit code and stderr tell why
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--features", type=int, default=5)
    parser.add_argument("--model", choices=["logreg", "hoeffding"], default="logreg",
                        help="river StandardScaler|LogisticRegression (cheap) or HoeffdingTreeClassifier")
    parser.add_argument("--repeats", type=int, default=2, help="ipfi's -M (permutations per row and feature)")
    parser.add_argument("--window", type=int, default=50_000, help="rows per speed window")
    parser.add_argument("--mark", type=int, default=100_000, help="also report memory after this many rows")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint-every", type=int, help="run with --state (in a temporary folder) and "
                        "--checkpoint-every N, to see what checkpoints cost")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="ipfi-soak-"))
    model_path = workdir / f"{args.model}.pkl"
    make_model(args.model, model_path)
    command = [sys.executable, "-m", "ipfi_cli", "explain", "-m", str(model_path), "-t", "y", "--learn",
               "-M", str(args.repeats), "--seed", "1", "-q", "--every", "1"]
    if args.checkpoint_every:
        command += ["--state", str(workdir / "run.state"), "--checkpoint-every", str(args.checkpoint_every)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    start = time.perf_counter()
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=env, cwd=REPO)
    writer = threading.Thread(target=feed, args=(process.stdin, args.rows, args.features, args.seed), daemon=True)
    writer.start()
    stderr_lines: list[bytes] = []
    threading.Thread(target=lambda: stderr_lines.extend(process.stderr), daemon=True).start()
    latest: dict[str, int] = {}  # the last /proc sample, kept while the process lives

    def sample() -> None:
        while process.poll() is None:
            memory = status_kib(process.pid)
            if memory:
                latest.update(memory)
            time.sleep(0.2)
    threading.Thread(target=sample, daemon=True).start()

    windows = []
    marks: dict[str, dict[str, float]] = {}
    problems: list[str] = []
    expected = 1
    header = None
    window_start, window_rows = time.perf_counter(), 0
    for raw in process.stdout:
        if header is None:
            header = raw.decode().rstrip("\n").split(",")
            continue
        if not raw.endswith(b"\n"):
            problems.append(f"record {expected}: no line end (torn record)")
        number = raw.split(b",", 1)[0]
        if number != str(expected).encode():
            if len(problems) < 5:
                problems.append(f"record {expected}: row number {number.decode()!r}, expected {expected}")
        expected += 1
        window_rows += 1
        rows_done = expected - 1
        if rows_done % args.window == 0 or rows_done == args.rows:
            now = time.perf_counter()
            memory = status_kib(process.pid)
            windows.append({"rows_to": rows_done, "seconds": round(now - window_start, 2),
                            "rows_per_s": round(window_rows / (now - window_start)),
                            "rss_mib": round(memory.get("VmRSS", 0) / 1024, 1),
                            "peak_mib": round(memory.get("VmHWM", 0) / 1024, 1)})
            print(f"{rows_done:>10,} rows  {windows[-1]['rows_per_s']:>7,} rows/s  "
                  f"RSS {windows[-1]['rss_mib']:.1f} MiB  peak {windows[-1]['peak_mib']:.1f} MiB",
                  file=sys.stderr, flush=True)
            window_start, window_rows = now, 0
        if rows_done == args.mark:
            memory = status_kib(process.pid)
            marks[f"{args.mark}"] = {"rss_mib": memory.get("VmRSS", 0) / 1024,
                                     "peak_mib": memory.get("VmHWM", 0) / 1024}
    # the process has closed its output: its memory now, or the sampler's last reading if it is gone
    memory = status_kib(process.pid) or dict(latest)
    marks["end"] = {"rss_mib": memory.get("VmRSS", 0) / 1024, "peak_mib": memory.get("VmHWM", 0) / 1024}
    code = process.wait()
    elapsed = time.perf_counter() - start
    records = expected - 1
    if header != ["row", *[f"x{i}" for i in range(args.features)]]:
        problems.append(f"header {header!r}")
    if records != args.rows:
        problems.append(f"{records:,} records for {args.rows:,} rows")
    if code != 0:
        problems.append(f"exit code {code}: {b''.join(stderr_lines).decode(errors='replace').strip()}")

    speeds = [w["rows_per_s"] for w in windows]
    steady = speeds[1:] or speeds  # the first window includes start-up and the model's first rows
    result = {
        "rows": args.rows, "features": args.features, "model": args.model, "repeats": args.repeats,
        "checkpoint_every": args.checkpoint_every,
        "seconds": round(elapsed, 1), "rows_per_s_overall": round(records / elapsed) if elapsed else None,
        "memory_mib": {k: {kk: round(vv, 1) for kk, vv in v.items()} for k, v in marks.items()},
        "windows": windows,
        "speed_steady_min_max": [min(steady), max(steady)] if steady else None,
        "speed_last_over_second_window": round(steady[-1] / steady[0], 3) if steady else None,
        "check": "ok" if not problems else problems,
    }
    state = f", --state every {args.checkpoint_every:,} rows" if args.checkpoint_every else ""
    print(f"\nipfi explain --learn, river {args.model}, {args.features} features, -M {args.repeats}{state}, "
          f"{args.rows:,} rows in {elapsed:.0f} s ({result['rows_per_s_overall']:,} rows/s overall)")
    for key, value in result["memory_mib"].items():
        label = f"after {int(key):,} rows" if key.isdigit() else "at the end"
        print(f"memory {label}: RSS {value['rss_mib']:.1f} MiB, peak (VmHWM) {value['peak_mib']:.1f} MiB")
    print(f"rows/s per {args.window:,}-row window: " + ", ".join(f"{s:,}" for s in speeds))
    if steady:
        print(f"after the first window: min {min(steady):,}, max {max(steady):,}, "
              f"last/first {result['speed_last_over_second_window']:.2f}")
    print("output check: " + ("one record per row, numbered 1..N, header once: ok" if not problems
                              else "FAILED: " + "; ".join(problems)))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    shutil.rmtree(workdir, ignore_errors=True)
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
