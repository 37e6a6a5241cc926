"""The label and answer contract for served models, through the real command.

Labels are matched to what a served model answers as they are to an in-process model's classes
(``True`` in a CSV finds a JSON ``true``, ``1`` finds ``"1"``), against real `mlflow models serve`
and MLServer processes; a run whose answers cannot be right exits 1 with one line; an answer that
is not what the protocol promises is a service error naming the URL (never a row, never skipped).
The in-process run of the same fitted model is the reference: with the same seed the traces must be
the same bytes.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from .answers import Answers, Reply, rows_of

ARGS = ("--seed", "5", "-q")


def one_line_error(result: Any) -> str:
    assert result.exit_code == 1, (result.exit_code, result.stdout[-300:], result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr and "unexpected" not in result.stderr
    return lines[0]


@pytest.fixture(scope="module")
def bool_in_process(bool_forest, bool_csv) -> dict[str, str]:
    from typer.testing import CliRunner

    from ipfi_cli.cli.app import app

    def run(*args: Any) -> Any:
        return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    _, path = bool_forest
    found = {}
    for command in ("explain", "batch"):
        extra = ("--no-live",) if command == "explain" else ()
        result = run(command, bool_csv, "-m", path, "-t", "rich", *ARGS, *extra)
        assert result.exit_code == 0, result.stderr
        found[command] = result.stdout
    return found


@pytest.mark.parametrize("classes", [(), ("--classes", "False,True"), ("--classes", "false,true")])
def test_bool_answers_of_mlflow_serve_match_true_false_labels(run, bool_mlflow_server, bool_csv, bool_in_process,
                                                               classes):
    served = ("--model-url", bool_mlflow_server, "--task", "classification", *classes)
    explained = run("explain", bool_csv, *served, "-t", "rich", *ARGS, "--no-live")
    assert explained.exit_code == 0, explained.stderr
    assert explained.stdout == bool_in_process["explain"]
    batch = run("batch", bool_csv, *served, "-t", "rich", *ARGS)
    assert batch.exit_code == 0, batch.stderr
    assert batch.stdout == bool_in_process["batch"]
    assert ",zero-one,1.0" not in batch.stdout  # not every row wrong


def test_bool_answers_of_mlserver_match_true_false_labels(run, mlserver_server, bool_csv, bool_in_process):
    url = mlserver_server.replace("/forest", "/forest-bool")
    result = run("batch", bool_csv, "--model-url", url, "--task", "classification", "-t", "rich", *ARGS)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == bool_in_process["batch"]


def test_probability_answers_of_mlflow_serve_work_with_the_log_loss(run, proba_mlflow_server, forest, data_csv):
    _, path = forest
    for command, extra in (("explain", ("--no-live",)), ("batch", ())):
        reference = run(command, data_csv, "-m", path, "-t", "class", "--loss", "log", *ARGS, *extra)
        assert reference.exit_code == 0, reference.stderr
        served = run(command, data_csv, "--model-url", proba_mlflow_server, "--classes", "0,1", "--loss", "log",
                     "-t", "class", *ARGS, *extra)
        assert served.exit_code == 0, served.stderr
        assert served.stdout == reference.stdout
    # without --loss log the label is the likeliest class: the zero-one traces equal in-process too
    reference = run("batch", data_csv, "-m", path, "-t", "class", *ARGS)
    served = run("batch", data_csv, "--model-url", proba_mlflow_server, "--classes", "0,1", "-t", "class", *ARGS)
    assert served.exit_code == 0, served.stderr
    assert served.stdout == reference.stdout


@pytest.mark.parametrize("loss", ["log", "zero-one"])
def test_class_probability_objects_of_mlflow_serve_need_no_classes(run, dict_proba_mlflow_server, forest, data_csv,
                                                                   loss):
    """A pyfunc model answering {"0": p0, "1": p1} per row: the classes come from the keys (--loss log takes the
    label's probability, zero-one the likeliest class), for explain, batch and compare: the in-process forest's
    numbers. It was refused: "each prediction has 2 fields (0, 1); expected one label or value per row"."""
    _, path = forest
    for command, extra in (("explain", ("--no-live",)), ("batch", ()), ("compare", ("-M", "2"))):
        reference = run(command, data_csv, "-m", path, "-t", "class", "--loss", loss, *ARGS, *extra)
        assert reference.exit_code == 0, reference.stderr
        served = run(command, data_csv, "--model-url", dict_proba_mlflow_server, "--task", "classification",
                     "--loss", loss, "-t", "class", *ARGS, *extra)
        assert served.exit_code == 0, (command, served.stderr)
        assert served.stdout == reference.stdout, command


# -- standard-library servers whose answers a test writes --------------------------------------------------
@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[str, Any], Any]], Answers]]:
    started: list[Answers] = []

    def start(reply: Callable[[str, Any], Any]) -> Answers:
        server = Answers(reply)
        started.append(server)
        return server
    yield start
    for server in started:
        server.close()


def forest_answers(model: Any, spell: Callable[[Any], Any]) -> Callable[[str, Any], Any]:
    """The forest's predictions, each spelled by ``spell`` (e.g. as the text "0"/"1")."""
    import pandas as pd

    def reply(path: str, payload: Any) -> Any:
        frame = pd.DataFrame(rows_of(payload))
        return {"predictions": [spell(v) for v in model.predict(frame).tolist()]}
    return reply


def test_text_answers_match_number_labels(run, serve, forest, data_csv):
    """A server answering "0"/"1" against 0/1 labels: the numbers of the in-process model."""
    model, path = forest
    server = serve(forest_answers(model, str))
    for command, extra in (("explain", ("--no-live",)), ("batch", ())):
        reference = run(command, data_csv, "-m", path, "-t", "class", *ARGS, *extra)
        served = run(command, data_csv, "--model-url", server.url, "--task", "classification", "-t", "class",
                     *ARGS, *extra)
        assert served.exit_code == 0, served.stderr
        assert served.stdout == reference.stdout and served.stderr == ""


@pytest.mark.parametrize("command", ["explain", "batch", "compare"])
def test_labels_the_model_never_answers_exit_1(run, serve, forest, data_csv, command):
    model, _ = forest
    server = serve(forest_answers(model, lambda v: "yes" if v else "maybe"))
    extra = ("--no-live",) if command == "explain" else ("-M", "2") if command == "compare" else ()
    result = run(command, data_csv, "--model-url", server.url, "--task", "classification", "-t", "class",
                 *ARGS, *extra)
    line = one_line_error(result)
    assert "maximal zero-one loss" in line and "never match what the" in line


def forest_probabilities(model: Any) -> Callable[[str, Any], Any]:
    """The forest's [p0, p1] per row (a model logged with pyfunc_predict_fn="predict_proba")."""
    import pandas as pd

    def reply(path: str, payload: Any) -> Any:
        return {"predictions": model.predict_proba(pd.DataFrame(rows_of(payload))).tolist()}
    return reply


@pytest.mark.parametrize("loss", ["log", "zero-one"])
def test_probability_lists_without_or_with_the_wrong_classes_say_so(run, serve, forest, data_csv, loss):
    """[p0, p1] answers without --classes once got "expected one label or value per row (for probabilities use
    --loss log)" under --loss log; --classes naming three classes got the same."""
    server = serve(forest_probabilities(forest[0]))
    served = ("--model-url", server.url, "--task", "classification", "--loss", loss, "-t", "class", *ARGS)
    for command in ("explain", "batch"):
        line = one_line_error(run(command, data_csv, *served))
        assert "the server gives probabilities without class names: give --classes" in line, line
        line = one_line_error(run(command, data_csv, *served, "--classes", "0,1,2"))
        assert "2 probabilities per row, but --classes names 3 classes" in line, line


@pytest.mark.parametrize("command", ["explain", "batch", "compare"])
def test_answers_that_are_no_probabilities_are_refused_naming_the_row(run, serve, forest, data_csv, command):
    """A server answering [1.5, -0.5] for one row under --loss log: every importance was 0 with exit 0."""
    import pandas as pd

    bad = pd.read_csv(data_csv).salary[4]  # row 5's salary: only row 5 has it, until a later row borrows it
    probabilities = forest_probabilities(forest[0])

    def reply(path: str, payload: Any) -> Any:
        answer = probabilities(path, payload)["predictions"]
        return {"predictions": [[1.5, -0.5] if row["salary"] == bad else p
                                for row, p in zip(rows_of(payload), answer)]}
    server = serve(reply)
    extra = ("--no-live",) if command == "explain" else ("-M", "2") if command == "compare" else ()
    result = run(command, data_csv, "--model-url", server.url, "--task", "classification", "--classes", "0,1",
                 "--loss", "log", "-t", "class", *ARGS, *extra)
    line = one_line_error(result)
    assert "row 5 (line 6)" in line and "[1.5, -0.5] is not class probabilities" in line, line
    assert "ModelError" not in line, line


@pytest.mark.parametrize("command", ["explain", "batch", "compare"])
def test_every_answer_no_probabilities_under_skip_says_why(run, serve, data_csv, command):
    """--on-bad-row skip with a server answering [1.5, -0.5] for every row ended with "all 150 row(s) were
    bad" and no reason; the reason read "ModelError: ..." where it was one."""
    def reply(path: str, payload: Any) -> Any:
        return {"predictions": [[1.5, -0.5] for _ in rows_of(payload)]}
    server = serve(reply)
    extra = ("--no-live",) if command == "explain" else ("-M", "2") if command == "compare" else ()
    result = run(command, data_csv, "--model-url", server.url, "--task", "classification", "--classes", "0,1",
                 "--loss", "log", "-t", "class", "--on-bad-row", "skip", *ARGS, *extra)
    line = one_line_error(result)
    assert "all 150 row(s) were bad; the first: row 1 (line 2): " in line, line
    assert line.endswith("the server's answer [1.5, -0.5] is not class probabilities (each in [0, 1], summing to 1)")
    assert "ModelError" not in line and line.count(str(data_csv)) == 1, line


@pytest.mark.parametrize("command", ["explain", "batch"])
def test_huge_answers_that_overflow_the_loss_exit_1(run, serve, data_csv, command):
    def reply(path: str, payload: Any) -> Any:
        return {"predictions": [1e200 * (1 + row["commission"]) for row in rows_of(payload)]}
    server = serve(reply)
    extra = ("--no-live",) if command == "explain" else ()
    result = run(command, data_csv, "--model-url", server.url, "--task", "regression", "-t", "salary",
                 "--loss", "squared", *ARGS, *extra)
    assert "not a finite number" in one_line_error(result)
    assert "RuntimeWarning" not in result.stderr


MALFORMED = {
    "null predictions": {"predictions": None},
    "no predictions": {"result": [1, 2]},
    "a number": 7,
    "too few": {"predictions": [1]},
    "objects": {"predictions": [{"a": 1, "b": 2}]},
    "lists": {"predictions": [[1, 2, 3]]},
    "nulls": {"predictions": [None]},
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
@pytest.mark.parametrize("skip", [False, True])
def test_a_malformed_answer_is_a_service_error_naming_the_url(run, serve, data_csv, name, skip):
    answer = MALFORMED[name]

    def reply(path: str, payload: Any) -> Any:
        rows = rows_of(payload)
        if isinstance(answer, dict) and answer.get("predictions") and len(answer["predictions"]) == 1:
            return {"predictions": answer["predictions"] * (len(rows) if name != "too few" else 1)}
        return answer
    server = serve(reply)
    result = run("batch", data_csv, "--model-url", server.url, "--task", "classification", "-t", "class", *ARGS,
                 *(("--on-bad-row", "skip") if skip else ()))
    line = one_line_error(result)
    assert server.url in line and not re.search(r"\brow \d", line), line


def test_text_answers_from_a_regressor_are_a_service_error(run, serve, data_csv):
    server = serve(lambda path, payload: {"predictions": ["high"] * len(rows_of(payload))})
    line = one_line_error(run("explain", data_csv, "--model-url", server.url, "--task", "regression", "-t", "salary",
                              *ARGS, "--no-live", "--on-bad-row", "skip"))
    assert server.url in line and "malformed" in line and not re.search(r"\brow \d", line)


def test_v2_metadata_without_names_is_a_service_error(run, serve, data_csv):
    server = serve(lambda path, payload: {"name": "m", "inputs": [{"datatype": "FP64", "shape": [-1, 9]}]})
    line = one_line_error(run("batch", data_csv, "--model-url", server.base + "/v2/models/m", "--task",
                              "classification", "-t", "class", *ARGS))
    assert "/v2/models/m" in line and "metadata is malformed" in line


def test_a_trickled_answer_is_bounded_by_the_timeout(run, serve, data_csv):
    server = serve(lambda path, payload: Reply({"predictions": [0] * len(rows_of(payload))}, trickle=0.05))
    started = time.monotonic()
    result = run("batch", data_csv, "--model-url", server.url, "--task", "classification", "-t", "class", *ARGS,
                 "--timeout", "0.5", "--retries", "1", "--retry-wait", "1")
    elapsed = time.monotonic() - started
    line = one_line_error(result)
    assert "no complete answer within --timeout 0.5 s" in line
    # two tries of 0.5 s and one pause of 0.25 s; generous for a loaded machine, far below the trickle's ~100 s
    assert elapsed < 10, elapsed


def test_a_huge_answer_is_refused_at_the_cap(serve):
    import numpy as np

    from ipfi_cli.core.losses import Output
    from ipfi_cli.models.http import HttpModelError, HttpOptions, HttpPredictor

    big = b'{"predictions": [' + b"1," * 600_000 + b'1]}'
    server = serve(lambda path, payload: Reply(big))
    predictor = HttpPredictor(HttpOptions(url=server.url, max_answer_bytes=1_000_000, retries=0))
    with pytest.raises(HttpModelError, match="larger than 1,000,000 bytes"):
        predictor.predict_block(np.zeros((2, 1)), ["x"], Output.LABEL, None)
    # a server that sends more than its Content-Length says is cut at the cap too
    server2 = serve(lambda path, payload: Reply(big, length=10))
    predictor = HttpPredictor(HttpOptions(url=server2.url, max_answer_bytes=1_000_000, retries=0))
    with pytest.raises(HttpModelError):
        predictor.predict_block(np.zeros((2, 1)), ["x"], Output.LABEL, None)


PASSWORDS = ["p#ss", "pa/ss", "pa?ss", "p@ss", "p%23x", "UPPERlower"]


@pytest.mark.parametrize("password", PASSWORDS)
def test_a_password_with_reserved_characters_is_never_shown(run, serve, data_csv, password, tmp_path):
    seen: list[str] = []

    def reply(path: str, payload: Any) -> Any:
        seen.append(path)
        # a careless server that echoes what it was sent, in capitals
        return Reply({"message": f"bad credentials {password.upper()} {password}"}, status=401)
    server = serve(reply)
    url = server.url.replace("http://", f"http://user:{password}@")
    meta = tmp_path / "meta.json"
    for command, extra in (("explain", ("--meta", meta, "--no-live")), ("batch", ())):
        result = run(command, data_csv, "--model-url", url, "--task", "classification", "-t", "class", *ARGS,
                     *extra)
        line = one_line_error(result)
        assert "HTTP 401" in line, line
        for secret in {password, password.upper(), password.lower(), password[1:], password[:-1]}:
            assert secret not in line and secret not in result.stdout, (secret, line)
    assert seen and all(path.startswith("/invocations") for path in seen)  # the right host and path
    assert password not in meta.read_text() and "user" not in meta.read_text()


def test_header_values_are_scrubbed_whatever_their_case(run, serve, data_csv):
    token = "Tok3n-Secret-Value"

    def reply(path: str, payload: Any) -> Any:
        return Reply({"message": f"token {token.lower()} and {token.upper()} refused"}, status=403)
    server = serve(reply)
    result = run("batch", data_csv, "--model-url", server.url, "--task", "classification", "-t", "class", *ARGS,
                 "-H", f"authorization: Bearer {token}")
    line = one_line_error(result)
    assert token.lower() not in line.lower() and "***" in line


def test_a_header_value_http_cannot_send_is_one_line(run, data_csv):
    result = run("batch", data_csv, "--model-url", "http://127.0.0.1:9/invocations", "--task", "classification",
                 "-t", "class", *ARGS, "-H", "X-Team: équipe✓")
    line = one_line_error(result)
    assert "X-Team" in line and "latin-1" in line and "row" not in line and "✓" not in line


def test_one_url_credential_header_is_sent(serve, data_csv):
    """URL credentials and an --header of the same name in another case: one Authorization header goes."""
    import numpy as np

    from ipfi_cli.core.losses import Output
    from ipfi_cli.models.http import HttpOptions, HttpPredictor

    got: list[Any] = []
    server = serve(lambda path, payload: {"predictions": [1] * len(rows_of(payload))})
    original = server.reply

    def spy(path: str, payload: Any) -> Any:
        got.append(payload)
        return original(path, payload)
    server.reply = spy
    predictor = HttpPredictor(HttpOptions(url=server.url.replace("//", "//u:p@"),
                                          headers=(("AUTHORIZATION", "Bearer x"),)))
    assert [k.lower() for k in predictor._headers].count("authorization") == 1
    assert predictor.predict_block(np.zeros((1, 1)), ["x"], Output.LABEL, None).tolist() == [1]
    assert json.loads(json.dumps(got[0]))["dataframe_split"]["columns"] == ["x"]


def test_max_answer_mb_caps_an_answer_through_the_command(run, serve, data_csv):
    big = b'{"predictions": [' + b"1," * 1_000_000 + b'1]}'  # 2 MB
    server = serve(lambda path, payload: Reply(big))
    line = one_line_error(run("batch", data_csv, "--model-url", server.url, "--task", "classification", "-t",
                              "class", *ARGS, "--max-answer-mb", "1"))
    assert "larger than 1,048,576 bytes (--max-answer-mb)" in line and server.url in line
