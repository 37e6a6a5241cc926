"""Served at the server's speed? rows/s of one model in-process and served by MLServer (a script that
prints figures, not a test).

The model is the sample ``agrawal_hgb.joblib`` (HistGradientBoosting), M = 10, on the first
``--rows`` rows of ``agrawal_static.csv``. MLServer's scikit-learn runtime serves the same file on
127.0.0.1 (Open Inference Protocol v2). Three ways are run in interleaved rounds (``--rounds``):

1. in-process (``-m``), the reference;
2. served, ``--concurrency 1`` (one request at a time);
3. served, ``--concurrency 4`` (the default);
4. served with a declared tensor input (one ``[-1, 9]`` FP64 tensor instead of a column each), ``--concurrency 4``.

Each way is timed on ``--rows`` rows and on a fifth of them, and the rates are computed from the
difference (so process start-up and model loading cancel out); the figure is the median over the
rounds. It prints rows/s, the served/in-process ratio, the concurrency's gain, the requests and
retries recorded in ``--meta`` (``retried`` must be 0), and checks that every run's traces are the
same bytes as in-process.

    python benchmarks/bench_served.py                    # 5,000 rows, 3 rounds, --max-request-rows 2000
    python benchmarks/bench_served.py --rows 2000 --rounds 5 --max-request-rows 1000
"""

from __future__ import annotations

import argparse
import json
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
    parser.add_argument("--max-request-rows", type=int, default=2000)
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
        served = ["--model-url", f"http://127.0.0.1:{port}/v2/models/hgb", "--task", "classification",
                  "--max-request-rows", str(args.max_request_rows)]
        tensor = ["--model-url", f"http://127.0.0.1:{port}/v2/models/hgb-tensor", *served[2:]]
        ways = {"in-process": (["-m", str(MODEL)], None),
                "served, --concurrency 1": ([*served, "--concurrency", "1"], server),
                "served, --concurrency 4": ([*served, "--concurrency", "4"], server),
                "served tensor, conc. 4": ([*tensor, "--concurrency", "4"], server)}
        rates: dict[str, list[float]] = {way: [] for way in ways}
        last: dict[str, dict[str, float]] = {}
        try:
            for round_ in range(args.rounds):
                for way, (model_args, process) in ways.items():
                    timed = {}
                    for name in sizes:
                        out = work / f"{way.replace(' ', '_').replace(',', '')}-{name}.csv"
                        timed[name] = explain(model_args, data[name], out, env, process)
                        reference = work / f"in-process-{name}.csv"
                        if way != "in-process" and out.read_bytes() != reference.read_bytes():
                            raise SystemExit(f"{way}: the traces differ from in-process ({name})")
                    seconds = timed["full"]["wall"] - timed["fifth"]["wall"]
                    rates[way].append((sizes["full"] - sizes["fifth"]) / seconds)
                    last[way] = timed["full"]
                    print(f"round {round_ + 1} {way:<25} {rates[way][-1]:9.0f} rows/s", flush=True)
        finally:
            stop(server)
    median = {way: statistics.median(values) for way, values in rates.items()}
    print(f"\nrows {args.rows:,} (and {sizes['fifth']:,}), M = 10, HistGradientBoosting, --max-request-rows "
          f"{args.max_request_rows}, median of {args.rounds} interleaved rounds; traces equal in every run")
    print(f"{'way':<26}{'rows/s':>9}{'vs in-process':>15}{'requests':>10}{'retried':>9}{'server CPU s':>14}")
    for way, rate in median.items():
        figures = last[way]
        print(f"{way:<26}{rate:9.0f}{rate / median['in-process']:14.2f}x{int(figures.get('http_requests', 0)):>10}"
              f"{int(figures.get('http_retried', 0)):>9}{figures['server_cpu']:14.1f}")
    gain = median["served, --concurrency 4"] / median["served, --concurrency 1"]
    print(f"concurrency 4 over 1: {gain:.2f}x")


if __name__ == "__main__":
    main()
