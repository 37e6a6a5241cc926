"""An output that is a file the command reads (or another output) is refused before anything is
written: exit 2, one message naming the option and the path, the input's bytes untouched.
Files are compared by identity, so a symlink, a hard link and another spelling are caught."""

from __future__ import annotations

import os
import re
import shutil

import pytest
from typer.testing import CliRunner

from ipfi_cli.cli.app import app

from .conftest import SAMPLE, head_lines

BATCH = ["-t", "class", "--seed", "1", "-M", "2", "-q"]
STATIC = [*BATCH, "--no-live"]


def ipfi(*args, input: bytes | None = None):
    """Run ``ipfi`` in-process with a wide terminal, so the usage box does not fold the message."""
    return CliRunner().invoke(app, [str(a) for a in args], input=input, env={"COLUMNS": "2000"},
                              catch_exceptions=False)


def message(result) -> str:
    return " ".join(re.sub("[│╭╮╰╯─]", " ", result.stderr).split())


@pytest.fixture
def files(tmp_path):
    """Data, a model, labels and a reference in tmp_path: the inputs a run might destroy."""
    data = tmp_path / "data.csv"
    data.write_text(head_lines(SAMPLE / "agrawal_static.csv", 30))
    model = tmp_path / "model.joblib"
    shutil.copy(SAMPLE / "agrawal_hgb.joblib", model)
    return data, model


def refused(result, option: str, path, *untouched) -> None:
    """Exit 2, the option and path named, and every input as it was."""
    text = message(result)
    assert result.exit_code == 2, result.stderr
    assert f"'{option}': is the same file as" in text and f"({path})" in text, text
    assert result.stdout == ""
    for name, data in untouched:
        assert name.read_bytes() == data, name


@pytest.mark.parametrize("option", ["--output", "--meta", "--events", "--state", "--metrics-textfile"])
def test_explain_refuses_each_output_on_the_input(files, option):
    data, model = files
    before = data.read_bytes()
    result = ipfi("explain", data, "-m", model, *STATIC, option, data)
    refused(result, option, data, (data, before))
    assert "same file as INPUT, an input" in message(result)


@pytest.mark.parametrize("link", ["symlink", "hardlink", "spelling"])
def test_explain_refuses_the_input_by_another_name(files, link, tmp_path):
    data, model = files
    before = data.read_bytes()
    if link == "symlink":
        other = tmp_path / "link.csv"
        other.symlink_to(data)
    elif link == "hardlink":
        other = tmp_path / "hard.csv"
        os.link(data, other)
    else:
        (tmp_path / "sub").mkdir()
        other = tmp_path / "sub" / ".." / "data.csv"
    refused(ipfi("explain", data, "-m", model, *STATIC, "-o", other), "--output", other, (data, before))
    refused(ipfi("explain", other, "-m", model, *STATIC, "--meta", data), "--meta", data, (data, before))


def test_explain_refuses_the_model_labels_and_reference(files, tmp_path):
    data, model = files
    saved = model.read_bytes()
    refused(ipfi("explain", data, "-m", model, *STATIC, "-o", model), "--output", model, (model, saved))
    labels = tmp_path / "labels.csv"
    labels.write_text("id,class\n1,0\n")
    result = ipfi("explain", data, "-m", model, *STATIC, "--labels", labels, "--id", "id", "--events", labels)
    refused(result, "--events", labels, (labels, b"id,class\n1,0\n"))
    reference = tmp_path / "reference.csv"
    assert ipfi("batch", data, "-m", model, *BATCH, "-o", reference).exit_code == 0
    kept = reference.read_bytes()
    result = ipfi("explain", data, "-m", model, *STATIC, "--reference", reference, "--meta", reference)
    refused(result, "--meta", reference, (reference, kept))


def test_save_model_on_the_model_is_refused(tmp_path):
    data = tmp_path / "drift.csv"
    data.write_text(head_lines(SAMPLE / "agrawal_drift.csv", 20))
    model = tmp_path / "tree.pkl"
    shutil.copy(SAMPLE / "agrawal_hoeffding.pkl", model)
    saved = model.read_bytes()
    result = ipfi("explain", data, "-m", model, *STATIC, "--learn", "--save-model", model)
    refused(result, "--save-model", model, (model, saved))


def test_a_state_being_resumed_is_an_input_and_is_still_written_back(files, tmp_path):
    data, model = files
    state, traces = tmp_path / "run.state", tmp_path / "traces.csv"
    assert ipfi("explain", data, "-m", model, *STATIC, "-o", traces, "--state", state).exit_code == 0
    saved = state.read_bytes()
    refused(ipfi("explain", data, "-m", model, *STATIC, "--meta", state, "--state", state),
            "--meta", state, (state, saved))
    result = ipfi("explain", data, "-m", model, *STATIC, "-o", traces, "--state", state)  # resumes, on purpose
    assert result.exit_code == 0, result.stderr


def test_two_outputs_on_one_file_are_refused(files, tmp_path):
    data, model = files
    both = tmp_path / "out.json"
    result = ipfi("explain", data, "-m", model, *STATIC, "--meta", both, "--events", both)
    assert result.exit_code == 2 and "'--events'" in message(result) and "same file as --meta" in message(result)
    assert not both.exists()


@pytest.mark.parametrize("option", ["--output", "--metrics-textfile"])
def test_batch_refuses_its_data(files, option, tmp_path):
    data, model = files
    before = data.read_bytes()
    link = tmp_path / "link.csv"
    link.symlink_to(data)
    refused(ipfi("batch", data, "-m", model, *BATCH, option, link), option, link, (data, before))


@pytest.mark.parametrize("option", ["--output", "--traces", "--metrics-textfile"])
def test_compare_refuses_its_data(files, option):
    data, model = files
    before = data.read_bytes()
    refused(ipfi("compare", data, "-m", model, *BATCH, option, data), option, data, (data, before))


def test_pdp_refuses_its_data_and_model(files):
    data, model = files
    before, saved = data.read_bytes(), model.read_bytes()
    for target in (data, model):
        result = ipfi("pdp", data, "-m", model, "--feature", "age", "-t", "class", "--class", "1", "-o", target)
        refused(result, "--output", target, (data, before), (model, saved))


def test_plot_refuses_its_traces(files, tmp_path):
    data, model = files
    traces, other = tmp_path / "traces.csv", tmp_path / "interval.csv"
    assert ipfi("explain", data, "-m", model, *STATIC, "-o", traces).exit_code == 0
    shutil.copy(traces, other)
    kept = traces.read_bytes()
    refused(ipfi("plot", traces, "-o", traces), "--output", traces, (traces, kept))
    refused(ipfi("plot", traces, "--interval-traces", other, "-o", other), "--output", other, (other, kept))


def test_merge_refuses_its_states(files, tmp_path):
    data, model = files
    states = []
    for shard in (1, 2):
        state = tmp_path / f"shard{shard}.state"
        result = ipfi("explain", data, "-m", model, *STATIC, "--running-mean", "-o", os.devnull, "--state", state)
        assert result.exit_code == 0, result.stderr
        states.append(state)
    saved = states[1].read_bytes()
    hard = tmp_path / "hard.state"
    os.link(states[1], hard)
    refused(ipfi("merge", *states, "-o", hard), "--output", hard, (states[1], saved))


@pytest.mark.parametrize(("command", "option"), [
    ("explain", "--meta"), ("explain", "--state"), ("explain", "--metrics-textfile"), ("explain", "--save-model"),
    ("batch", "--metrics-textfile"), ("compare", "--metrics-textfile"), ("merge", "--output"), ("plot", "--output")])
def test_a_dash_for_an_output_that_is_a_file_is_refused(files, tmp_path, monkeypatch, command, option):
    """'-' is standard output for the records (-o of explain, batch, compare, pdp; compare's --traces)
    and standard error for --events. Other outputs are files: '-' is refused before any work (before,
    --meta - and the others wrote a file named '-' in the current folder, merge -o - a state named
    '-', plot -o - an image '-.png'); './-' still names such a file."""
    data, model = files
    monkeypatch.chdir(tmp_path)
    args = {"explain": ["explain", data, "-m", model, *STATIC],
            "batch": ["batch", data, "-m", model, *BATCH], "compare": ["compare", data, "-m", model, *BATCH],
            "merge": ["merge", "a.state", "b.state"], "plot": ["plot", "traces.csv"]}[command]
    if option == "--save-model":
        args = ["explain", data, "-m", SAMPLE / "agrawal_hoeffding.pkl", "--learn", *STATIC]
    result = ipfi(*args, option, "-")
    assert result.exit_code == 2, result.stderr
    assert f"'{option}': '-' is no file here: this option writes a file (./- names a file '-')" in message(result)
    assert result.stdout == "" and not (tmp_path / "-").exists()
    assert not (tmp_path / "-.png").exists() and not (tmp_path / "-.lock").exists()


def test_stdin_devices_and_new_files_are_fine(files, tmp_path):
    data, model = files
    result = ipfi("explain", "-", "-m", model, *STATIC, "-o", os.devnull, "--meta", tmp_path / "new.json",
                  input=data.read_bytes())
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "new.json").exists()
    result = ipfi("explain", data, "-m", model, *STATIC, "-o", "-", "--events", "-", "--meta", os.devnull)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("row,")


def test_parquet_folder_input_holds_its_files(files, tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    data, model = files
    folder = tmp_path / "parts"
    folder.mkdir()
    part = folder / "part-0.parquet"
    pd.read_csv(data).to_parquet(part)
    before = part.read_bytes()
    refused(ipfi("explain", folder, "-m", model, *STATIC, "-o", part), "--output", part, (part, before))
    refused(ipfi("batch", str(folder / "*.parquet"), "-m", model, *BATCH, "-o", part), "--output", part,
            (part, before))


def test_meta_keeps_no_webhook_token(run, static_csv, hgb, tmp_path):
    """A Slack or Discord webhook's token is its URL's path: --meta wrote it whole."""
    import json

    token = "T0TOKEN/B0/Zsecretsecret"
    meta = tmp_path / "meta.json"
    result = run("explain", static_csv, "-m", hgb, "-t", "class", "-M", "1", "--seed", "0", "-q", "--no-live",
                 "--webhook", f"https://hooks.example.com/services/{token}", "--meta", meta,
                 "-o", tmp_path / "out.csv", "--every", "100000")
    text = meta.read_text()
    assert result.exit_code == 0 and token not in text, result.stderr
    assert json.loads(text)["settings"]["monitor"]["webhook"] == "https://hooks.example.com/***"
