"""Models over HTTP, against real servers on 127.0.0.1: `mlflow models serve`, Seldon MLServer
(scikit-learn runtime) and small standard-library servers that fail on purpose.

The served model is the same fitted forest as the joblib file, so with the same seed the
traces must be byte for byte those of the model loaded in-process.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

SECRET = "s3cr3t-token-value"


def explain(run, *args: Any, env: dict[str, str] | None = None) -> Any:
    return run("explain", *args, "--seed", 11, "--no-live", "-q", env=env)


def flat(text: str) -> str:
    """Typer's boxed usage error as one line of words."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def ok(result: Any) -> str:
    assert result.exit_code == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def in_process(forest, data_csv) -> dict[str, str]:
    """Traces and batch PFI of the joblib forest, the reference for every server."""
    from typer.testing import CliRunner

    from ipfi_cli.cli.app import app

    runner = CliRunner()
    _, path = forest
    found = {}
    for loss in ("zero-one", "log"):
        result = runner.invoke(app, ["explain", str(data_csv), "-m", str(path), "-t", "class", "--seed", "11",
                                     "--no-live", "-q", "--loss", loss])
        found[loss] = ok(result)
        found["batch " + loss] = ok(runner.invoke(app, ["batch", str(data_csv), "-m", str(path), "-t", "class",
                                                        "--seed", "11", "-q", "--loss", loss]))
    return found


# -- real model servers ---------------------------------------------------------------------------------
def access_lines(log: Path, method: str, path: str) -> int:
    """Requests the server logged (uvicorn's access log: one line per answered request)."""
    return len(re.findall(rf'"{method} {re.escape(path)} HTTP/1\.[01]" \d{{3}}', log.read_text(errors="replace")))


def server_counts(metrics_url: str, model: str) -> dict[str, float]:
    """What MLServer counted, from its Prometheus endpoint: its REST server's POSTs to an infer path and
    GETs of a model's metadata (every model, every status), and the inference requests of ``model``."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(metrics_url, timeout=10) as answer:
        text = answer.read().decode()
    counts = {"posts": 0.0, "metadata_gets": 0.0, "model_infers": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            if sample.name == "rest_server_requests_total":
                if labels["method"] == "POST" and labels["path"].endswith("/infer"):
                    counts["posts"] += sample.value
                elif labels["method"] == "GET" and labels["path"] == "/v2/models/{model_name}":
                    counts["metadata_gets"] += sample.value
            elif sample.name in ("model_infer_request_success_total", "model_infer_request_failure_total") \
                    and labels["model"] == model:
                counts["model_infers"] += sample.value
    return counts


def counted_until(count: Any, expected: float) -> float:
    """``count()`` once it reaches ``expected`` (a server may write its count just after answering),
    or as it stands after 5 s."""
    deadline = time.monotonic() + 5.0
    while (found := count()) < expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def test_mlflow_server_traces_equal_in_process(run, mlflow_server, data_csv, in_process, tmp_path):
    """The POSTs `mlflow models serve` logged are the requests ipfi recorded, none sent again (--retries 0)."""
    served = ("--model-url", mlflow_server, "--task", "classification")
    meta = tmp_path / "meta.json"
    before = access_lines(mlflow_server.log, "POST", "/invocations")
    assert ok(explain(run, data_csv, *served, "-t", "class", "--max-request-rows", 64, "--retries", 0,
                      "--meta", meta)) == in_process["zero-one"]
    stats = json.loads(meta.read_text())["http"]
    assert stats["retried"] == 0 and stats["outcomes"] == {"ok": stats["requests"]} and stats["requests"] > 150
    posts = counted_until(lambda: access_lines(mlflow_server.log, "POST", "/invocations") - before,
                          stats["requests"])
    assert posts == stats["requests"]
    result = run("batch", data_csv, *served, "-t", "class", "--seed", 11, "-q")
    assert ok(result) == in_process["batch zero-one"]


def test_mlserver_traces_equal_in_process(run, mlserver_server, data_csv, in_process, tmp_path):
    """The requests MLServer counted (its Prometheus metrics) are those ipfi recorded, none sent again."""
    served = ("--model-url", mlserver_server, "-t", "class")
    assert ok(explain(run, data_csv, *served, "--task", "classification")) == in_process["zero-one"]
    # probabilities: the predict_proba output, classes named in the order of its columns
    meta = tmp_path / "meta.json"
    before = server_counts(mlserver_server.metrics, "forest")
    assert ok(explain(run, data_csv, *served, "--classes", "0,1", "--loss", "log", "--max-request-rows", 100,
                      "--retries", 0, "--meta", meta)) == in_process["log"]
    stats = json.loads(meta.read_text())["http"]
    assert stats["retried"] == 0 and stats["outcomes"] == {"ok": stats["requests"]} and stats["requests"] > 100
    # ipfi's requests: the model's metadata (one GET), then the POSTs of the predictions
    counted = counted_until(lambda: server_counts(mlserver_server.metrics, "forest")["posts"] - before["posts"],
                            stats["requests"] - 1)
    after = server_counts(mlserver_server.metrics, "forest")
    assert after["metadata_gets"] - before["metadata_gets"] == 1
    assert counted == after["model_infers"] - before["model_infers"] == stats["requests"] - 1
    result = run("batch", data_csv, *served, "--classes", "0,1", "--loss", "log", "--seed", 11, "-q")
    assert ok(result) == in_process["batch log"]


def test_a_declared_tensor_input_gets_the_columns_by_position(run, mlserver_server, data_csv, in_process):
    """A v2 model whose metadata declares one [-1, 9] input (as Triton's do) gets one tensor per request."""
    from ipfi_cli.models.http import HttpOptions, HttpPredictor

    url = mlserver_server + "-tensor"
    predictor = HttpPredictor(HttpOptions(url=url))
    assert predictor.columns is None and predictor.n_features == 9
    assert ok(explain(run, data_csv, "--model-url", url, "-t", "class", "--task", "classification")) \
        == in_process["zero-one"]


def test_a_micro_batch_travels_in_capped_requests(mlserver_server, forest, fit_frame):
    from ipfi_cli.core import IPFIEstimator
    from ipfi_cli.models.http import HttpOptions, HttpPredictor
    from sources.conftest import FEATURES

    rows = fit_frame[FEATURES].to_numpy()[:8]
    targets = fit_frame["class"].tolist()[:8]
    counts = []
    for cap in (10_000, 50):
        predictor = HttpPredictor(HttpOptions(url=mlserver_server, max_request_rows=cap))
        explainer = IPFIEstimator(predictor, FEATURES, n_repeats=2, seed=0)
        before = predictor.stats()["requests"]
        explainer.explain_many(rows, targets)
        counts.append((predictor.stats()["requests"] - before, predictor.stats()["rows_sent"]))
    # 8 rows x (1 + 9 features x 2 repeats) evaluations = 152 rows (the first row has no history: fewer)
    (one, sent), (capped, sent_capped) = counts
    assert one == 1 and sent == sent_capped
    assert capped == -(-sent // 50)


def test_a_4xx_stops_with_one_line_and_no_secret(run, mlflow_server, data_csv, tmp_path):
    meta = tmp_path / "meta.json"
    result = explain(run, data_csv, "--model-url", mlflow_server, "--task", "classification", "-t", "class",
                     "--drop", "salary", "-H", f"Authorization: Bearer {SECRET}", "--meta", meta)
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "HTTP 400" in lines[0] and "salary" in lines[0], result.stderr
    assert SECRET not in result.stderr and SECRET not in result.stdout
    recorded = meta.read_text()
    assert SECRET not in recorded and "Authorization" in recorded
    assert json.loads(recorded)["settings"]["http"]["headers"] == ["Authorization"]


# -- standard-library servers that misbehave on purpose ------------------------------------------------
class Stub:
    """A real HTTP server on 127.0.0.1 speaking MLflow's protocol with the forest.

    ``plan`` lists what to answer before answering properly: an HTTP status (with a body
    that echoes the Authorization header, as careless servers do) or ``"slow"`` (sleep 2 s).
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        self.plan: list[Any] = []
        self.seen: list[tuple[int, dict[str, str]]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                body = self.rfile.read(int(self.headers["Content-Length"]))
                step = stub.plan.pop(0) if stub.plan else None
                if step == "slow":
                    time.sleep(2.0)
                if isinstance(step, int):
                    stub.seen.append((step, dict(self.headers)))
                    token = str(self.headers.get("Authorization")).split()[-1]
                    self.answer(step, {"error_code": "BAD", "message": f"refused token {token}"})
                    return
                import pandas as pd

                split = json.loads(body)["dataframe_split"]
                frame = pd.DataFrame(split["data"], columns=split["columns"])
                stub.seen.append((200, dict(self.headers)))
                self.answer(200, {"predictions": stub.model.predict(frame).tolist()})

            def answer(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except BrokenPipeError:  # the client timed out and left
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/invocations"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub(forest) -> Iterator[Stub]:
    server = Stub(forest[0])
    yield server
    server.close()


def test_a_503_is_retried_and_headers_come_from_the_environment(run, stub, data_csv, in_process, tmp_path):
    stub.plan = [503]
    env = {"IPFI_MODEL_HEADERS": f"Authorization: Bearer {SECRET}\nX-Team: ml"}
    result = explain(run, data_csv, "--model-url", stub.url, "--task", "classification", "-t", "class",
                     "--meta", tmp_path / "meta.json", env=env)
    assert ok(result) == in_process["zero-one"]
    meta = (tmp_path / "meta.json").read_text()
    assert SECRET not in meta
    stats = json.loads(meta)["http"]
    assert stats["retried"] == 1 and stats["requests"] == len(stub.seen) - 1 and stats["rows_sent"] > 0
    statuses = [status for status, _ in stub.seen]
    assert statuses[0] == 503 and set(statuses[1:]) == {200}
    assert all(h.get("Authorization") == f"Bearer {SECRET}" and h.get("X-Team") == "ml" for _, h in stub.seen)


def test_a_401_names_status_and_message_without_the_token(run, stub, data_csv):
    stub.plan = [401]
    result = explain(run, data_csv, "--model-url", stub.url, "--task", "classification", "-t", "class",
                     "-H", f"Authorization: Bearer {SECRET}")
    assert result.exit_code == 1 and len(stub.seen) == 1
    line = result.stderr.strip()
    assert "\n" not in line and "HTTP 401" in line and "refused token ***" in line and SECRET not in line


def test_an_unavailable_model_is_waited_for_at_most_model_wait(run, stub, data_csv):
    """--retry-wait, the old spelling of --model-wait, still takes seconds."""
    stub.plan = [503] * 50
    started = time.monotonic()
    result = explain(run, data_csv, "--model-url", stub.url, "--task", "classification", "-t", "class",
                     "--retries", 20, "--retry-wait", 1.0)
    assert result.exit_code == 1 and re.search(r"did not answer for 1\.\d s \(--model-wait 1 s\)", result.stderr)
    assert "HTTP 503" in result.stderr
    assert time.monotonic() - started < 5.0
    assert 3 <= len(stub.seen) <= 5  # pauses 0.25 + 0.5 fit in 1 s, the next (1 s) does not


def test_a_timeout_is_retried_then_answered(run, stub, data_csv, in_process):
    stub.plan = ["slow"]
    result = explain(run, data_csv, "--model-url", stub.url, "--task", "classification", "-t", "class",
                     "--timeout", 0.5)
    assert ok(result) == in_process["zero-one"]


def test_usage_errors(run, data_csv, forest):
    _, path = forest
    both = run("explain", data_csv, "-m", path, "--model-url", "http://127.0.0.1:9/invocations", "-t", "class")
    assert both.exit_code == 2 and "not both" in flat(both.stderr)
    none = run("batch", data_csv, "-t", "class")
    assert none.exit_code == 2 and "--model-url" in flat(none.stderr)
    header = run("explain", data_csv, "-m", path, "-t", "class", "-H", "X-A: b")
    assert header.exit_code == 2 and "needs --model-url" in flat(header.stderr)
    unknown = run("explain", data_csv, "--model-url", "http://127.0.0.1:9/predict", "-t", "class")
    assert unknown.exit_code == 2 and "--protocol" in flat(unknown.stderr)
    bad_header = run("compare", data_csv, "--model-url", "http://127.0.0.1:9/invocations", "-t", "class",
                     "-H", f"Authorization Bearer {SECRET}")
    assert bad_header.exit_code == 2 and SECRET not in bad_header.stderr
    no_task = run("explain", data_csv, "--model-url", "http://127.0.0.1:9/invocations", "-t", "class")
    assert no_task.exit_code == 1 and "--task" in no_task.stderr


def test_url_credentials_are_never_shown(tmp_path):
    from ipfi_cli.models.http import HttpOptions

    options = HttpOptions(url=f"https://user:{SECRET}@models.example/invocations?key={SECRET}",
                          headers=(("Authorization", SECRET),))
    assert SECRET not in options.display_url and SECRET not in repr(options)
    assert SECRET not in json.dumps(options.for_meta())
    assert np.all(["Authorization" in options.for_meta()["headers"]])
