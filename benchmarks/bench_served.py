"""Served at the server's speed? rows/s of one model in-process and served by MLServer (a script that
prints figures, not a test).

The model is the sample ``agrawal_hgb.joblib`` (HistGradientBoosting), M = 10, on the first
``--rows`` rows of ``agrawal_static.csv``. MLServer's scikit-learn runtime serves the same file on
127.0.0.1 (Open Inference Protocol v2; ``OMP_NUM_THREADS=1``, Prometheus metrics off, no parallel
workers). Five ways are run in interleaved rounds (``--rounds``):

1. in-process (``-m``), the reference;
2. served, ``--concurrency 1`` (one request at a time);
3. served, ``--concurrency 4`` (the default);
4. served with a declared tensor input (one ``[-1, 9]`` FP64 tensor instead of a column each), ``--concurrency 4``;
5. served, ``--concurrency 4`` and ``--max-request-rows 2000`` (the server's fixed cost per request paid
   ten times as often).

Ways 2-4 use ipfi's default ``--max-request-rows`` unless ``--max-request-rows`` is given. Each way is
timed on ``--rows`` rows and on a fifth of them, and the rates are computed from the difference (so
process start-up and model loading cancel out); the figure is the median over the rounds. It prints
rows/s, the served/in-process ratio, the concurrency's gain, the requests and retries recorded in
``--meta`` (``retried`` must be 0), the CPU milliseconds per row of ipfi's process and of the server's
(from the same difference), and checks that every run's traces are the same bytes as in-process.

The bound: served rows/s cannot pass ``1 / (server CPU per row)`` while the server predicts on one
core, whatever ipfi does, nor ``cores / (ipfi's + the server's CPU per row)``; in-process runs at
``1 / (in-process CPU per row)``. The last lines print both bounds as ratios to in-process.

    python benchmarks/bench_served.py                    # 5,000 rows, 3 rounds
    python benchmarks/bench_served.py --rows 2000 --rounds 5 --max-request-rows 1000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_model_sources import MODEL, SAMPLE, environment, explain, free_port, start, stop  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-request-rows", type=int, default=None, help="default: ipfi's")
    args = parser.parse_args()
    env = environment(threads=1)
    with tempfile.TemporaryDirectory(prefix="ipfi-bench-served-") as folder:
        work = Path(folder)
        lines = (SAMPLE / "agrawal_static.csv").read_text().splitlines()
        sizes = {"full": args.rows, "fifth": args.rows // 5}
        data = {}
        for name, n in sizes.items():
            data[name] = work / f"{name}.csv"
            data[name].write_text("\n".join(lines[:n + 1]) + "\n")
        # two models: "hgb" declares no inputs (one input per column, pandas content type, MLServer's default);
        # "hgb-tensor" declares one [-1, 9] FP64 tensor (as Triton and KServe models usually do)
        for name, inputs in (("hgb", []), ("hgb-tensor", [{"name": "input-0", "datatype": "FP64", "shape": [-1, 9]}])):
            (work / "mlserver" / name).mkdir(parents=True)
            shutil.copy(MODEL, work / "mlserver" / name / "model.joblib")
            (work / "mlserver" / name / "model-settings.json").write_text(json.dumps(
                {"name": name, "implementation": "mlserver_sklearn.SKLearnModel", "inputs": inputs,
                 "parameters": {"uri": "./model.joblib"}}))
        port = free_port()
        (work / "mlserver" / "settings.json").write_text(json.dumps(
            {"host": "127.0.0.1", "http_port": port, "grpc_port": free_port(), "metrics_port": free_port(),
             "parallel_workers": 0, "metrics_endpoint": None}))
        server = start([str(Path(sys.executable).parent / "mlserver"), "start", str(work / "mlserver")],
                       f"http://127.0.0.1:{port}/v2/models/hgb/ready", env, work / "mlserver.log",
                       cwd=work / "mlserver")
        for _ in range(240):  # the second model loads after the first
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/models/hgb-tensor/ready", timeout=2):
                    break
            except OSError:
                time.sleep(0.25)
        cap = ["--max-request-rows", str(args.max_request_rows)] if args.max_request_rows else []
        served = ["--model-url", f"http://127.0.0.1:{port}/v2/models/hgb", "--task", "classification"]
        tensor = ["--model-url", f"http://127.0.0.1:{port}/v2/models/hgb-tensor", *served[2:]]
        ways = {"in-process": (["-m", str(MODEL)], None),
                "served, --concurrency 1": ([*served, *cap, "--concurrency", "1"], server),
                "served, --concurrency 4": ([*served, *cap, "--concurrency", "4"], server),
                "served tensor, conc. 4": ([*tensor, *cap, "--concurrency", "4"], server),
                "served, conc. 4, 2000-row": ([*served, "--concurrency", "4", "--max-request-rows", "2000"], server)}
        rates: dict[str, list[float]] = {way: [] for way in ways}
        cpu: dict[str, list[tuple[float, float]]] = {way: [] for way in ways}  # ms per row: ipfi's, the server's
        last: dict[str, dict[str, float]] = {}
        try:
            for round_ in range(args.rounds):
                for way, (model_args, process) in ways.items():
                    timed = {}
                    for name in sizes:
                        out = work / f"{way.replace(' ', '_').replace(',', '')}-{name}.csv"
                        before = resource.getrusage(resource.RUSAGE_CHILDREN)
                        timed[name] = explain(model_args, data[name], out, env, process)
                        after = resource.getrusage(resource.RUSAGE_CHILDREN)
                        timed[name]["client_cpu"] = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
                        reference = work / f"in-process-{name}.csv"
                        if way != "in-process" and out.read_bytes() != reference.read_bytes():
                            raise SystemExit(f"{way}: the traces differ from in-process ({name})")
                    seconds = timed["full"]["wall"] - timed["fifth"]["wall"]
                    rows = sizes["full"] - sizes["fifth"]
                    rates[way].append(rows / seconds)
                    client, server_cpu = (1000 * (timed["full"][k] - timed["fifth"][k]) / rows
                                          for k in ("client_cpu", "server_cpu"))
                    cpu[way].append((client, server_cpu))
                    last[way] = timed["full"]
                    print(f"round {round_ + 1} {way:<25} {rates[way][-1]:9.0f} rows/s", flush=True)
        finally:
            stop(server)
    median = {way: statistics.median(values) for way, values in rates.items()}
    ms = {way: tuple(statistics.median(v[i] for v in values) for i in (0, 1)) for way, values in cpu.items()}
    cap_text = args.max_request_rows or "ipfi's default"
    print(f"\nrows {args.rows:,} (and {sizes['fifth']:,}), M = 10, HistGradientBoosting, --max-request-rows "
          f"{cap_text}, median of {args.rounds} interleaved rounds; traces equal in every run; {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f} at the end")
    print(f"{'way':<27}{'rows/s':>8}{'vs in-process':>15}{'requests':>10}{'retried':>9}"
          f"{'ipfi CPU ms/row':>17}{'server CPU ms/row':>19}")
    for way, rate in median.items():
        figures = last[way]
        print(f"{way:<27}{rate:8.0f}{rate / median['in-process']:14.2f}x{int(figures.get('http_requests', 0)):>10}"
              f"{int(figures.get('http_retried', 0)):>9}{ms[way][0]:17.3f}{ms[way][1]:19.3f}")
    gain = median["served, --concurrency 4"] / median["served, --concurrency 1"]
    print(f"concurrency 4 over 1: {gain:.2f}x")
    own, (client, server) = ms["in-process"][0], ms["served, --concurrency 4"]
    cores = os.cpu_count() or 1
    print(f"bound: the server predicts on one core, so served <= 1 / {server:.3f} ms = "
          f"{own / server:.2f}x in-process ({own:.3f} ms/row of CPU); on {cores} free cores served <= "
          f"{cores} / ({client:.3f} + {server:.3f}) ms = {cores * own / (client + server):.2f}x")


if __name__ == "__main__":
    main()
