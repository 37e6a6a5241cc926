"""The input contract through the real commands: decimal commas, --drop, True/False columns and
inputs without rows read alike in CSV, JSONL and Parquet."""

from __future__ import annotations

import pytest

from .conftest import SAMPLE, head_lines, parse_csv

MODEL = str(SAMPLE / "agrawal_hgb.joblib")
BASE = ["-m", MODEL, "-t", "class", "--seed", "1", "-M", "2"]


def error_lines(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("ipfi: error: ")]


# -- decimal commas ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def european(tmp_path_factory):
    """20 rows of the sample data as a European spreadsheet exports them: ';' and decimal commas,
    beside the same rows as a plain CSV."""
    folder = tmp_path_factory.mktemp("eu")
    plain = head_lines(SAMPLE / "agrawal_static.csv", 20)
    (folder / "plain.csv").write_text(plain)
    (folder / "eu.csv").write_text(plain.replace(",", ";").replace(".", ","))
    return folder


@pytest.mark.parametrize("command", ["explain", "batch", "compare"])
def test_decimal_comma_reads_the_same_numbers(run, european, command):
    extra = ["--no-live", "-q"] if command == "explain" else ["-q"]
    if command == "compare":
        extra = ["-q", "-o", str(european / f"{command}.csv")]
    plain = run(command, european / "plain.csv", *BASE, *extra)
    assert plain.exit_code == 0, plain.stderr
    if command == "compare":
        expected = (european / f"{command}.csv").read_text()
    comma = run(command, european / "eu.csv", *BASE, *extra, "--decimal", ",")
    assert comma.exit_code == 0, comma.stderr
    if command == "compare":
        assert (european / f"{command}.csv").read_text() == expected
    else:
        assert comma.stdout == plain.stdout and parse_csv(plain.stdout)


@pytest.mark.parametrize("command", ["explain", "batch"])
def test_decimal_comma_without_the_option_is_refused_with_the_hint(run, european, command):
    extra = ["--no-live"] if command == "explain" else []
    result = run(command, european / "eu.csv", *BASE, *extra)
    assert result.exit_code == 1, result.stderr
    [line] = error_lines(result)
    assert "row 1 (line 2), column 'salary'" in line and "use --decimal ," in line, line


@pytest.mark.parametrize("amounts", [["1.200", "2.500", "3.750", "1.999"], ["1.200", "2.500", "3.750,5", "1.999"]],
                         ids=["thousands-only", "thousands-and-comma"])
def test_a_thousands_separator_with_the_decimal_comma_is_refused_not_read_as_a_point(run, tmp_path, amounts):
    """With --decimal , a field such as 1.200 (1,200 in a German export) was kept as text, and the
    model read the text as 1.2: a model of y = amount gave a mean loss of 2746.9 with exit 0."""
    import joblib
    import pandas as pd
    from sklearn.linear_model import LinearRegression

    train = pd.DataFrame({"amount": [1000.0, 2000, 3000, 4000], "other": [0.0, 1, 0, 1]})
    model = tmp_path / "m.joblib"
    joblib.dump(LinearRegression().fit(train, train["amount"]), model)
    values = [float(a.replace(".", "").replace(",", ".")) for a in amounts]
    data = tmp_path / "eu.csv"
    data.write_text("amount;other;y\n" + "".join(f"{a};{i % 2};{str(v).replace('.', ',')}\n"
                                                   for i, (a, v) in enumerate(zip(amounts, values))))
    result = run("explain", data, "-m", model, "-t", "y", "--decimal", ",", "--no-live")
    assert result.exit_code == 1, result.stderr
    [line] = error_lines(result)
    assert "row 1 (line 2), column 'amount'" in line and "'1.200' has a '.'" in line, line
    # written without the separator, the same numbers give the model's exact answers: a loss of 0
    plain = tmp_path / "plain.csv"
    plain.write_text("amount;other;y\n" + "".join(f"{str(v).replace('.', ',')};{i % 2};{str(v).replace('.', ',')}\n"
                                                    for i, v in enumerate(values)))
    meta = tmp_path / "meta.json"
    result = run("explain", plain, "-m", model, "-t", "y", "--decimal", ",", "--no-live", "-q", "--meta", meta)
    assert result.exit_code == 0, result.stderr
    import json

    assert json.loads(meta.read_text())["final"]["mean_loss"] == pytest.approx(0, abs=1e-9)


def test_decimal_comma_on_stdin_and_its_misuse(run, european):
    text = (european / "eu.csv").read_text()
    assert run("batch", "-", *BASE, "-q", "--decimal", ",", input=text).exit_code == 0
    for bad in (["--decimal", "x"], ["--decimal", ",", "--delimiter", ","]):
        result = run("batch", european / "eu.csv", *BASE, *bad)
        assert result.exit_code == 2 and "--decimal" in result.stderr, result.stderr
    # the delimiter the user gave is named as theirs (not "give --delimiter")
    given = " ".join(run("batch", european / "eu.csv", *BASE, "--decimal", ",", "-d", ",").stderr.split())
    assert "--delimiter is ','" in given and "give --delimiter" not in given, given


def test_decimal_does_not_apply_to_typed_formats(run, european, tmp_path):
    """JSONL and Parquet numbers are typed: --decimal , changes nothing for them (as documented)."""
    import pandas as pd

    frame = pd.read_csv(european / "plain.csv")
    frame.to_json(tmp_path / "rows.jsonl", orient="records", lines=True)
    frame.to_parquet(tmp_path / "rows.parquet")
    expected = run("batch", european / "plain.csv", *BASE, "-q").stdout
    for path in (tmp_path / "rows.jsonl", tmp_path / "rows.parquet"):
        result = run("batch", path, *BASE, "-q", "--decimal", ",")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == expected


# -- --drop of a column the model does not take ------------------------------------------------------
@pytest.fixture(scope="module")
def with_id(tmp_path_factory):
    """12 rows of the sample data with an `id` column the model never took, as CSV, JSONL and Parquet."""
    import pandas as pd

    folder = tmp_path_factory.mktemp("drop")
    frame = pd.read_csv(SAMPLE / "agrawal_static.csv", nrows=12)
    frame.to_csv(folder / "plain.csv", index=False)
    frame.insert(0, "id", range(100, 112))
    frame.to_csv(folder / "rows.csv", index=False)
    frame.to_json(folder / "rows.jsonl", orient="records", lines=True)
    frame.to_parquet(folder / "rows.parquet")
    return folder


@pytest.mark.parametrize("name", ["rows.csv", "rows.jsonl", "rows.parquet"])
@pytest.mark.parametrize("command", ["explain", "batch"])
def test_drop_of_a_column_the_model_does_not_take_is_a_note_in_every_format(run, with_id, name, command):
    extra = ["--no-live"] if command == "explain" else []
    expected = run(command, with_id / "plain.csv", *BASE, *extra, "-q")
    result = run(command, with_id / name, *BASE, *extra, "--drop", "id")
    assert result.exit_code == 0, result.stderr
    assert "note: --drop id: not an input of the model" in result.stderr, result.stderr
    assert result.stdout == expected.stdout
    typo = run(command, with_id / name, *BASE, *extra, "--drop", "id,nosuch")
    assert typo.exit_code == 2 and "no such column: nosuch" in typo.stderr, typo.stderr


# -- True/False columns ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bools(tmp_path_factory):
    """A logistic regression fitted by pandas/scikit-learn on a bool feature and a bool label, and 40
    rows as pandas writes them: CSV (True/False), JSONL (true/false) and CSV with 1/0."""
    import joblib
    import numpy as np
    import pandas as pd
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    n = 200
    frame = pd.DataFrame({"x": rng.normal(size=n).round(3), "flag": rng.random(n) < 0.5})
    frame["y"] = frame.flag ^ (rng.random(n) < 0.15)
    folder = tmp_path_factory.mktemp("bools")
    joblib.dump(LogisticRegression().fit(frame[["x", "flag"]], frame.y), folder / "model.joblib")
    joblib.dump(LogisticRegression().fit(frame[["x", "flag"]], frame.y.astype(str)), folder / "text_classes.joblib")
    rows = frame.head(40)
    rows.to_csv(folder / "rows.csv", index=False)
    rows.to_json(folder / "rows.jsonl", orient="records", lines=True)
    rows.astype({"flag": int, "y": int}).to_csv(folder / "numbers.csv", index=False)
    return folder, rows


def test_true_false_features_are_bools_in_csv_as_in_jsonl(run, bools):
    folder, _ = bools
    common = ["-m", folder / "model.joblib", "-t", "y", "--seed", "2", "-M", "3", "-q"]
    expected = run("batch", folder / "numbers.csv", *common)
    assert expected.exit_code == 0, expected.stderr
    assert float(parse_csv(expected.stdout)[1]["importance"]) > 0.2  # flag: the label is flag, 15% flipped
    for name in ("rows.csv", "rows.jsonl"):
        result = run("batch", folder / name, *common)
        assert result.exit_code == 0, result.stderr
        assert result.stdout == expected.stdout
    traces = [run("explain", folder / name, *common, "--no-live").stdout for name in ("rows.csv", "rows.jsonl")]
    assert traces[0] == traces[1] and len(parse_csv(traces[0])) == 40
    kept = run("batch", folder / "rows.csv", *common, "--text", "flag")  # --text keeps them as text
    assert kept.exit_code == 1 and "column 'flag'" in kept.stderr, kept.stderr


def test_a_true_false_label_matches_text_classes(run, bools):
    """A CSV's True/False label read as a bool finds the classes 'False'/'True' of a model fitted on text."""
    import joblib

    folder, rows = bools
    model = joblib.load(folder / "text_classes.joblib")
    error = float((model.predict(rows[["x", "flag"]]) != rows.y.astype(str)).mean())
    result = run("batch", folder / "rows.csv", "-m", folder / "text_classes.joblib", "-t", "y", "--seed", "2",
                 "-M", "3", "-q")
    assert result.exit_code == 0, result.stderr
    assert float(parse_csv(result.stdout)[0]["baseline_loss"]) == pytest.approx(error, abs=1e-12)


# -- inputs without rows ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def no_rows(tmp_path_factory):
    folder = tmp_path_factory.mktemp("empty")
    (folder / "header.csv").write_text((SAMPLE / "agrawal_static.csv").read_text().split("\n", 1)[0] + "\n")
    (folder / "empty.jsonl").write_text("")
    return folder


@pytest.mark.parametrize("name", ["header.csv", "empty.jsonl", "-"])
@pytest.mark.parametrize("command", ["explain", "batch", "compare"])
def test_an_input_without_rows_is_one_line_and_exit_1(run, no_rows, name, command):
    """No table (not even an empty one) before the line; exit 1 as for every run that explains nothing."""
    extra = ["--no-live"] if command == "explain" else []
    path = no_rows / name if name != "-" else "-"
    result = run(command, path, *BASE, *extra, input=(no_rows / "header.csv").read_text() if name == "-" else None)
    assert result.exit_code == 1, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("ipfi: error: ") and "the input has no rows" in result.stderr


@pytest.mark.process  # the command on a pseudo-terminal
def test_an_input_without_rows_leaves_no_live_table_on_a_terminal(no_rows, tmp_path):
    from .test_terminal import run_in_pty

    code, terminal = run_in_pty(["explain", str(no_rows / "header.csv"), *BASE, "-o", str(tmp_path / "t.csv")],
                                tmp_path / "stdout")
    shown = terminal.decode(errors="replace")
    assert code == 1, shown
    assert "the input has no rows" in shown and "feature" not in shown and "importance" not in shown, shown
