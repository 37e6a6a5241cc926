"""Benchmark of models where they live (a script printing figures, not a test).

The model is the sample ``agrawal_hgb.joblib`` (HistGradientBoosting), the data the first
``--rows`` rows of ``agrawal_static.csv``, M = 10, the same seed everywhere. Each line is
``ipfi explain`` run as a command (wall time, so process start-up and model loading count):

1. in-process (joblib), the reference;
2. ``--model-url`` to ``mlflow models serve`` (MLflow scoring protocol);
3. ``--model-url`` to Seldon MLServer's scikit-learn runtime (Open Inference Protocol v2);
4. ``--model`` the same model exported to ONNX (skl2onnx), run by onnxruntime.

Each is run on ``--rows`` rows and on a fifth of them: the difference gives rows/s without
start-up (importing scikit-learn and pandas and loading the model takes seconds here). For the
served runs it also prints the requests per explained row and the rows per
request (from ``--meta``), and the server's own share of the time: the CPU seconds the
server's processes used during the run (``/proc/PID/stat``, all processes of its group)
over the run's wall time. Traces are checked to be equal to the in-process ones (the
served runs byte for byte; ONNX, computing in float32, to 1e-6).

Run from the repository root (needs the dev extra: mlflow, mlserver-sklearn, skl2onnx)::

    python benchmarks/bench_model_sources.py            # the whole file: 5,000 rows (about a minute)
    python benchmarks/bench_model_sources.py --rows 2000 --max-request-rows 1000
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data"
MODEL = SAMPLE / "agrawal_hgb.joblib"
FEATURES = ["salary", "commission", "age", "elevel", "car", "zipcode", "hvalue", "hyears", "loan"]
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environment(threads: int) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["OMP_NUM_THREADS"] = str(threads)
    return env


def start(command: list[str], ready: str, env: dict[str, str], log: Path, cwd: Path | None = None,
          timeout: float = 120.0) -> subprocess.Popen:
    process = subprocess.Popen(command, stdout=open(log, "wb"), stderr=subprocess.STDOUT, env=env, cwd=cwd,
                               start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(ready, timeout=2) as answer:
                if answer.status == 200:
                    return process
        except OSError:
            time.sleep(0.25)
    stop(process)
    raise SystemExit(f"{command[:3]} did not get ready: {log.read_text()[-1500:]}")


def stop(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=15)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def group_cpu_seconds(pgid: int) -> float:
    """User + system CPU seconds of every live process in process group ``pgid``."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # fields after the name: state, ppid, pgrp, ...
            total += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return total


def explain(model_args: list[str], data: Path, out: Path, env: dict[str, str],
            server: subprocess.Popen | None = None) -> dict[str, float]:
    meta = out.with_suffix(".meta.json")
    command = [sys.executable, "-m", "ipfi_cli", "explain", str(data), *model_args, "-t", "class", "-M", "10",
               "--seed", "1", "-q", "--no-live", "-o", str(out), "--meta", str(meta)]
    server_before = group_cpu_seconds(server.pid) if server else 0.0
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"failed: {' '.join(command)}\n{result.stderr}")
    figures = {"wall": wall, "server_cpu": (group_cpu_seconds(server.pid) - server_before) if server else 0.0}
    recorded = json.loads(meta.read_text())
    figures["explained"] = recorded["rows"]["explained"]
    figures["rows"] = recorded["rows"]["processed"]
    if "http" in recorded:
        figures.update({f"http_{k}": v for k, v in recorded["http"].items()})
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS for ipfi and the servers")
    parser.add_argument("--max-request-rows", type=int, default=5000)
    args = parser.parse_args()
    env = environment(args.threads)
    work = Path(tempfile.mkdtemp(prefix="ipfi-bench-"))
    processes: list[subprocess.Popen] = []
    try:
        lines = (SAMPLE / "agrawal_static.csv").read_text().splitlines()
        data = work / "rows.csv"
        data.write_text("\n".join(lines[: args.rows + 1]) + "\n")

        import joblib
        import numpy as np
        import pandas as pd

        model = joblib.load(MODEL)
        # the same model as an MLflow model directory, an MLServer folder and an ONNX graph
        import mlflow.sklearn
        from mlflow.models import infer_signature
        from skl2onnx import to_onnx

        sample = pd.read_csv(data, nrows=200)[FEATURES].astype("float64")
        mlflow.sklearn.save_model(model, str(work / "mlflow-model"), serialization_format="cloudpickle",
                                  signature=infer_signature(sample, model.predict(sample)))
        (work / "mlserver").mkdir()
        shutil.copy(MODEL, work / "mlserver" / "model.joblib")
        (work / "mlserver" / "model-settings.json").write_text(json.dumps(
            {"name": "hgb", "implementation": "mlserver_sklearn.SKLearnModel",
             "parameters": {"uri": "./model.joblib"}}))
        v2_port = free_port()
        (work / "mlserver" / "settings.json").write_text(json.dumps(
            {"host": "127.0.0.1", "http_port": v2_port, "grpc_port": free_port(), "metrics_port": free_port(),
             "parallel_workers": 0, "metrics_endpoint": None}))
        onnx_path = work / "hgb.onnx"
        onnx_path.write_bytes(to_onnx(model, np.zeros((1, 9), dtype=np.float32)).SerializeToString())

        mlflow_port = free_port()
        mlflow_server = start([sys.executable, "-m", "mlflow", "models", "serve", "-m", str(work / "mlflow-model"),
                               "--env-manager", "local", "-h", "127.0.0.1", "-p", str(mlflow_port), "-w", "1"],
                              f"http://127.0.0.1:{mlflow_port}/ping", env, work / "mlflow.log")
        processes.append(mlflow_server)
        v2_server = start([str(BIN / "mlserver"), "start", str(work / "mlserver")],
                          f"http://127.0.0.1:{v2_port}/v2/models/hgb/ready", env, work / "mlserver.log",
                          cwd=work / "mlserver")
        processes.append(v2_server)

        cap = ["--max-request-rows", str(args.max_request_rows)]
        sources = {
            "in-process (joblib)": (["-m", str(MODEL)], "joblib", None),
            "HTTP mlflow (mlflow models serve)": (
                ["--model-url", f"http://127.0.0.1:{mlflow_port}/invocations", "--task", "classification", *cap],
                "mlflow", mlflow_server),
            "HTTP v2 (MLServer sklearn)": (
                ["--model-url", f"http://127.0.0.1:{v2_port}/v2/models/hgb", "--task", "classification", *cap],
                "v2", v2_server),
            "ONNX (onnxruntime)": (["-m", str(onnx_path)], "onnx", None),
        }
        # a run of a fifth of the rows too: the difference of the two is the rate without start-up
        short = work / "short.csv"
        short.write_text("\n".join(lines[: args.rows // 5 + 1]) + "\n")
        runs, marginal = {}, {}
        for name, (model_args, tag, server) in sources.items():
            runs[name] = explain(model_args, data, work / f"{tag}.csv", env, server)
            brief = explain(model_args, short, work / f"{tag}-short.csv", env, server)
            marginal[name] = (runs[name]["rows"] - brief["rows"]) / (runs[name]["wall"] - brief["wall"])
        reference = (work / "joblib.csv").read_bytes()
        equal = {"mlflow": (work / "mlflow.csv").read_bytes() == reference,
                 "v2": (work / "v2.csv").read_bytes() == reference}
        onnx_diff = float(np.nanmax(np.abs(pd.read_csv(work / "onnx.csv").to_numpy(float)
                                           - pd.read_csv(io.BytesIO(reference)).to_numpy(float))))
    finally:
        for process in processes:
            stop(process)
        shutil.rmtree(work, ignore_errors=True)

    base = marginal["in-process (joblib)"]
    print(f"ipfi explain, agrawal_hgb.joblib, {args.rows} rows, M = 10, OMP_NUM_THREADS={args.threads}, "
          f"--max-request-rows {args.max_request_rows}")
    print("command: wall time of the whole command (start-up and model loading included); rows/s: "
          f"(rows - rows/5) / (wall({args.rows}) - wall({args.rows // 5})), i.e. without start-up")
    print(f"{'model':34} {'command s':>9} {'rows/s':>7} {'vs in-proc':>10} {'req/row':>8} {'rows/req':>9} "
          f"{'server CPU/wall':>15}")
    for name, figures in runs.items():
        requests = figures.get("http_requests")
        per_row = f"{requests / figures['rows']:.3f}" if requests else "-"
        per_request = f"{figures['http_rows_sent'] / requests:,.0f}" if requests else "-"
        share = f"{figures['server_cpu'] / figures['wall']:.0%}" if requests else "-"
        print(f"{name:34} {figures['wall']:9.2f} {marginal[name]:7.0f} {marginal[name] / base:10.0%} "
              f"{per_row:>8} {per_request:>9} {share:>15}")
    print(f"traces equal to in-process byte for byte: mlflow {equal['mlflow']}, v2 {equal['v2']}; "
          f"ONNX largest difference {onnx_diff:.2e}")


if __name__ == "__main__":
    main()
