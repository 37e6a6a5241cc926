"""Fixtures for models that live elsewhere: small data, small fitted models, real servers on 127.0.0.1.

Servers are started once per session in their own process group and stopped at the end;
readiness is polled with a bounded loop (a server that does not come up fails the tests
that need it, with its log).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ipfi_cli.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_data"
FEATURES = ["salary", "commission", "age", "elevel", "car", "zipcode", "hvalue", "hyears", "loan"]
#: rows the models are fitted on, and rows the tests explain (the next ones)
FIT_ROWS = 1000
TEST_ROWS = 150


def _lines() -> list[str]:
    return (SAMPLE / "agrawal_static.csv").read_text().splitlines()


@pytest.fixture(scope="session")
def fit_frame() -> Any:
    import pandas as pd

    return pd.read_csv(SAMPLE / "agrawal_static.csv", nrows=FIT_ROWS)


@pytest.fixture(scope="session")
def data_csv(tmp_path_factory) -> Path:
    """150 agrawal rows the models were not fitted on (all numeric)."""
    lines = _lines()
    path = tmp_path_factory.mktemp("data") / "agrawal.csv"
    path.write_text("\n".join([lines[0], *lines[1 + FIT_ROWS:1 + FIT_ROWS + TEST_ROWS]]) + "\n")
    return path


def with_text_zipcode(frame: Any) -> Any:
    """``zipcode`` as text categories ``z0``..``z8`` (a string categorical column)."""
    frame = frame.copy()
    frame["zipcode"] = "z" + frame["zipcode"].astype(str)
    return frame


@pytest.fixture(scope="session")
def text_csv(tmp_path_factory) -> Path:
    """The same 150 rows with ``zipcode`` as text (z0..z8)."""
    import pandas as pd

    frame = pd.read_csv(SAMPLE / "agrawal_static.csv", skiprows=range(1, 1 + FIT_ROWS), nrows=TEST_ROWS)
    path = tmp_path_factory.mktemp("data") / "agrawal_text.csv"
    with_text_zipcode(frame).to_csv(path, index=False)
    return path


@pytest.fixture(scope="session")
def forest(tmp_path_factory, fit_frame) -> tuple[Any, Path]:
    """A small random forest fitted on a DataFrame (it names its columns), and its joblib file."""
    import joblib
    from sklearn.ensemble import RandomForestClassifier

    model = RandomForestClassifier(n_estimators=15, max_depth=6, random_state=0, n_jobs=1)
    model.fit(fit_frame[FEATURES], fit_frame["class"])
    path = tmp_path_factory.mktemp("models") / "forest.joblib"
    joblib.dump(model, path)
    return model, path


@pytest.fixture
def run() -> Callable[..., Any]:
    """Invoke ``ipfi`` in-process; returns the Result (exit_code, stdout, stderr separately)."""
    runner = CliRunner()

    def invoke(*args: Any, input: str | None = None, env: dict[str, str] | None = None):
        return runner.invoke(app, [str(a) for a in args], input=input, env=env, catch_exceptions=False)
    return invoke


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env() -> dict[str, str]:
    """This environment with the venv's scripts first on PATH (mlflow runs `uvicorn` by name)."""
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.setdefault("OMP_NUM_THREADS", "1")
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


def start_server(command: list[str], ready_url: str, log: Path, timeout: float = 120.0,
                 cwd: Path | None = None) -> subprocess.Popen:
    """Start ``command`` in its own process group; wait (at most ``timeout`` s) until ``ready_url`` answers 200."""
    handle = open(log, "wb")
    process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=server_env(), cwd=cwd,
                               start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        try:
            with urllib.request.urlopen(ready_url, timeout=2) as response:
                if response.status == 200:
                    return process
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.25)
    stop_server(process)
    raise RuntimeError(f"{command[0]} did not get ready in {timeout:.0f} s: {log.read_text()[-2000:]}")


def stop_server(process: subprocess.Popen) -> None:
    """Stop the server's process group (SIGTERM, then SIGKILL after 10 s)."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(timeout=10)


@pytest.fixture(scope="session")
def mlflow_model_dir(tmp_path_factory, forest, fit_frame) -> Path:
    """The forest saved as an MLflow model (scikit-learn flavour, with a signature)."""
    mlflow_sklearn = pytest.importorskip("mlflow.sklearn")
    from mlflow.models import infer_signature

    model, _ = forest
    path = tmp_path_factory.mktemp("mlflow") / "forest"
    sample = fit_frame[FEATURES].astype("float64")
    mlflow_sklearn.save_model(model, str(path), signature=infer_signature(sample, model.predict(sample)),
                              serialization_format="cloudpickle")
    return path


class ServedUrl(str):
    """A served model's URL, and where the server says what it counted: ``metrics`` (MLServer's
    Prometheus endpoint) or ``log`` (the server's log, one access line per request)."""

    metrics: str | None
    log: Path | None

    def __new__(cls, url: str, metrics: str | None = None, log: Path | None = None) -> ServedUrl:
        served = super().__new__(cls, url)
        served.metrics, served.log = metrics, log
        return served


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory, mlflow_model_dir) -> Iterator[ServedUrl]:
    """`mlflow models serve` of the forest; yields its /invocations URL (``.log``: the server's log,
    where uvicorn writes one access line per request)."""
    port = free_port()
    log = tmp_path_factory.mktemp("logs") / "mlflow-serve.log"
    process = start_server([sys.executable, "-m", "mlflow", "models", "serve", "-m", str(mlflow_model_dir),
                            "--env-manager", "local", "-h", "127.0.0.1", "-p", str(port), "-w", "1"],
                           f"http://127.0.0.1:{port}/ping", log)
    yield ServedUrl(f"http://127.0.0.1:{port}/invocations", log=log)
    stop_server(process)


@pytest.fixture(scope="session")
def bool_forest(tmp_path_factory, fit_frame) -> tuple[Any, Path]:
    """A small forest fitted on a bool label (``salary > 60000``, so it is learnable): its classes
    are ``[False, True]`` and a server answers JSON ``true``/``false``."""
    import joblib
    from sklearn.ensemble import RandomForestClassifier

    model = RandomForestClassifier(n_estimators=10, max_depth=5, random_state=0, n_jobs=1)
    model.fit(fit_frame[FEATURES], fit_frame["salary"] > 60000)
    path = tmp_path_factory.mktemp("models") / "bool_forest.joblib"
    joblib.dump(model, path)
    return model, path


@pytest.fixture(scope="session")
def bool_csv(tmp_path_factory) -> Path:
    """The 150 test rows with a label column ``rich`` spelled ``True``/``False`` (as pandas writes bools)."""
    import pandas as pd

    frame = pd.read_csv(SAMPLE / "agrawal_static.csv", skiprows=range(1, 1 + FIT_ROWS), nrows=TEST_ROWS)
    frame["rich"] = frame["salary"] > 60000
    path = tmp_path_factory.mktemp("data") / "agrawal_bool.csv"
    frame[[*FEATURES, "rich"]].to_csv(path, index=False)
    return path


def _serve_mlflow(tmp_path_factory, model: Any, fit_frame: Any, name: str, **save: Any) -> Iterator[str]:
    mlflow_sklearn = pytest.importorskip("mlflow.sklearn")
    from mlflow.models import infer_signature

    path = tmp_path_factory.mktemp("mlflow") / name
    sample = fit_frame[FEATURES].astype("float64")
    mlflow_sklearn.save_model(model, str(path), signature=infer_signature(sample, model.predict(sample)),
                              serialization_format="cloudpickle", **save)
    port = free_port()
    log = tmp_path_factory.mktemp("logs") / f"mlflow-{name}.log"
    process = start_server([sys.executable, "-m", "mlflow", "models", "serve", "-m", str(path),
                            "--env-manager", "local", "-h", "127.0.0.1", "-p", str(port), "-w", "1"],
                           f"http://127.0.0.1:{port}/ping", log)
    yield f"http://127.0.0.1:{port}/invocations"
    stop_server(process)


@pytest.fixture(scope="session")
def bool_mlflow_server(tmp_path_factory, bool_forest, fit_frame) -> Iterator[str]:
    """`mlflow models serve` of the bool forest (answers true/false)."""
    yield from _serve_mlflow(tmp_path_factory, bool_forest[0], fit_frame, "bool_forest")


@pytest.fixture(scope="session")
def proba_mlflow_server(tmp_path_factory, forest, fit_frame) -> Iterator[str]:
    """`mlflow models serve` of the 0/1 forest logged with ``pyfunc_predict_fn="predict_proba"``
    (answers one [p0, p1] per row), the README's setup for --loss log."""
    yield from _serve_mlflow(tmp_path_factory, forest[0], fit_frame, "proba_forest", pyfunc_predict_fn="predict_proba")


#: saves an MLflow pyfunc model whose predict answers the forest's predict_proba as a DataFrame with one
#: column per class ("0", "1"): `mlflow models serve` then answers one {class: probability} object per row.
#: Run as a script, so that cloudpickle keeps the class by value (the server cannot import the tests)
PYFUNC_PROBA = """
import sys
import mlflow.pyfunc


class Proba(mlflow.pyfunc.PythonModel):
    def load_context(self, context):
        import joblib
        self.model = joblib.load(context.artifacts["model"])

    def predict(self, context, model_input, params=None):
        import pandas as pd
        return pd.DataFrame(self.model.predict_proba(model_input), columns=[str(c) for c in self.model.classes_])


mlflow.pyfunc.save_model(sys.argv[1], python_model=Proba(), artifacts={"model": sys.argv[2]})
"""


@pytest.fixture(scope="session")
def dict_proba_mlflow_server(tmp_path_factory, forest) -> Iterator[str]:
    """`mlflow models serve` of a pyfunc model answering ``{"0": p0, "1": p1}`` per row (the forest's)."""
    pytest.importorskip("mlflow.pyfunc")
    folder = tmp_path_factory.mktemp("mlflow")
    (folder / "save.py").write_text(PYFUNC_PROBA)
    subprocess.run([sys.executable, str(folder / "save.py"), str(folder / "proba"), str(forest[1])], check=True,
                   env=server_env(), capture_output=True, timeout=300)
    port = free_port()
    log = tmp_path_factory.mktemp("logs") / "mlflow-dict-proba.log"
    process = start_server([sys.executable, "-m", "mlflow", "models", "serve", "-m", str(folder / "proba"),
                            "--env-manager", "local", "-h", "127.0.0.1", "-p", str(port), "-w", "1"],
                           f"http://127.0.0.1:{port}/ping", log)
    yield f"http://127.0.0.1:{port}/invocations"
    stop_server(process)


@pytest.fixture(scope="session")
def mlserver_server(tmp_path_factory, forest, bool_forest) -> Iterator[ServedUrl]:
    """Seldon MLServer with its scikit-learn runtime serving the forest; yields .../v2/models/forest
    (and .../v2/models/forest-tensor serves it too, declaring one tensor input; ``.metrics``: its
    Prometheus endpoint)."""
    pytest.importorskip("mlserver_sklearn")
    import json
    import shutil

    _, joblib_path = forest
    folder = tmp_path_factory.mktemp("mlserver")
    # two models: "forest" declares no inputs (one input per column, pandas content type); "forest-tensor"
    # declares one [-1, 9] tensor, as Triton and KServe models usually do (columns by position)
    # and "forest-bool" is the forest fitted on a bool label (it answers true/false)
    for name, inputs in (("forest", []), ("forest-tensor", [{"name": "input-0", "datatype": "FP64",
                                                             "shape": [-1, len(FEATURES)]}]), ("forest-bool", [])):
        (folder / name).mkdir()
        shutil.copy(bool_forest[1] if name == "forest-bool" else joblib_path, folder / name / "model.joblib")
        (folder / name / "model-settings.json").write_text(json.dumps(
            {"name": name, "implementation": "mlserver_sklearn.SKLearnModel", "inputs": inputs,
             "parameters": {"uri": "./model.joblib"}}))
    port, metrics_port = free_port(), free_port()
    # its Prometheus metrics on their own port: the requests the server itself counted
    (folder / "settings.json").write_text(json.dumps(
        {"host": "127.0.0.1", "http_port": port, "grpc_port": free_port(), "metrics_port": metrics_port,
         "parallel_workers": 0, "metrics_endpoint": "/metrics"}))
    log = tmp_path_factory.mktemp("logs") / "mlserver.log"
    process = start_server([os.path.join(os.path.dirname(sys.executable), "mlserver"), "start", str(folder)],
                           f"http://127.0.0.1:{port}/v2/models/forest/ready", log, cwd=folder)
    yield ServedUrl(f"http://127.0.0.1:{port}/v2/models/forest", metrics=f"http://127.0.0.1:{metrics_port}/metrics")
    stop_server(process)
