"""What fuzzing ``ipfi explain`` found, pinned as plain examples (each was a traceback-free but
wrong or unlocated outcome before its fix)."""

from __future__ import annotations

import pickle

from typer.testing import CliRunner

from ipfi_cli.cli.app import app

BASE = ("-t", "y", "-M", "2", "--seed", "1", "-q")


def run(model, data: bytes, *args: str):
    return CliRunner().invoke(app, ["explain", "-m", str(model), *BASE, *args], input=data, catch_exceptions=False)


def one_error(result, *parts: str) -> str:
    assert result.exit_code == 1, (result.exit_code, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ipfi: error: "), result.stderr
    for part in parts:
        assert part in lines[0], (part, lines[0])
    return lines[0]


def test_infinity_is_a_bad_row_naming_row_and_column(models):
    # before: "rows 1-3: the model failed: ValueError: Input X contains infinity..."
    data = b"a,b,y\n1,2,1\n-1,inf,0\n0.5,1e400,1\n0.2,0.1,1\n"  # (row 4 predicted right: a measurable run)
    one_error(run(models["static"], data), "row 2 (line 3), column 'b'", "not a finite number")
    skipped = run(models["static"], data, "--on-bad-row", "skip")
    assert skipped.exit_code == 0 and [line.split(",")[0] for line in skipped.stdout.splitlines()] == ["row", "1", "4"]


def test_a_value_beyond_32_bit_floats_is_located(models):
    # scikit-learn trees take 32-bit floats: 1e39 is finite for Python but "too large" for the model
    one_error(run(models["static"], b"a,b,y\n1,2,1\n-1,1e39,0\n"), "row 2 (line 3), column 'b'", "too large")


def test_missing_value_with_learn_is_a_bad_row(models, tmp_path):
    # before: a river linear model learned NaN and every later importance was silently 0
    from river import linear_model

    path = tmp_path / "lr.pkl"
    path.write_bytes(pickle.dumps(linear_model.LogisticRegression()))
    data = b"a,b,y\n1,2,1\n-1,,0\n0.5,2,1\n"
    one_error(run(path, data, "--learn"), "row 2 (line 3), column 'b'", "missing value")
    skipped = run(path, data, "--learn", "--on-bad-row", "skip")
    assert skipped.exit_code == 0 and [line.split(",")[0] for line in skipped.stdout.splitlines()] == ["row", "1", "3"]
    # a static model still gets NaN as the missing value (this tree handles it)
    assert run(models["static"], data).exit_code == 0


def test_regression_label_inf_is_refused(tmp_path):
    import joblib
    from sklearn.linear_model import LinearRegression

    path = tmp_path / "lin.joblib"
    joblib.dump(LinearRegression().fit([[0.0, 0.0], [1.0, 1.0], [2.0, 0.0]], [0.0, 1.0, 2.0]), path)
    one_error(run(path, b"a,b,y\n1,2,1\n-1,2,inf\n0.5,1,2\n"), "row 2 (line 3), column 'y'", "not a finite number")


def test_overflowing_loss_stops_with_one_line_and_no_numpy_warnings(tmp_path):
    # before: RuntimeWarnings on stderr, then NaN importances for every later row, exit 0
    import joblib
    from sklearn.linear_model import LinearRegression

    path = tmp_path / "lin.joblib"
    joblib.dump(LinearRegression().fit([[0.0, 0.0], [1.0, 1.0], [2.0, 0.0]], [0.0, 1.0, 2.0]), path)
    result = run(path, b"a,b,y\n1,2,1\n0,1,2\n-1,2,1e200\n0.5,1,2\n", "--loss", "squared")
    one_error(result, "row 3 (line 4)", "loss is not a finite number")
    assert [line.split(",")[0] for line in result.stdout.splitlines()] == ["row", "1", "2"]  # the rows before


def test_jsonl_first_object_lacking_an_input_is_its_missing_value(models, tmp_path):
    # before: "the model needs column(s) b, which the input lacks" at start-up, naming no row; then a
    # row error; the tree names its inputs and takes NaN: the key left out is that row's missing value
    lacking, null = tmp_path / "lacking.jsonl", tmp_path / "null.jsonl"
    lacking.write_bytes(b'{"a": 1, "y": 1}\n{"a": 0.5, "b": 2, "y": 0}\n{"a": 0.1, "b": 1, "y": 1}\n')
    null.write_bytes(b'{"a": 1, "b": null, "y": 1}\n{"a": 0.5, "b": 2, "y": 0}\n{"a": 0.1, "b": 1, "y": 1}\n')
    results = [CliRunner().invoke(app, ["explain", str(path), "-m", str(models["static"]), *BASE])
               for path in (lacking, null)]
    assert results[0].exit_code == 0 and results[0].stdout == results[1].stdout, results[0].stderr
    assert [line.split(",")[0] for line in results[0].stdout.splitlines()] == ["row", "1", "2", "3"]


def test_jsonl_with_only_bad_lines_fails_when_asked(models, tmp_path):
    # before: a model without input names saw no columns, said "no rows" and exited 0 even with fail
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b"[1, 2]\n{bad\n")
    result = CliRunner().invoke(app, ["explain", str(path), "-m", str(models["learn"]), "--learn", *BASE])
    one_error(result, "row 1 (line 1)", "expected a JSON object")
    result = CliRunner().invoke(app, ["explain", str(path), "-m", str(models["learn"]), "--learn", *BASE,
                                      "--on-bad-row", "skip"])
    one_error(result, "no row was explained", "2 bad one(s)")


def test_csv_on_stdin_with_a_brace_in_the_first_name_is_csv(models):
    result = run(models["learn"], b"{a},b,y\n1,2,1\n0,1,1\n1,2,1\n", "--learn")  # (predicted right: measurable)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == "row,{a},b"


def test_header_problems_and_a_very_long_field_are_one_line(models):
    one_error(run(models["static"], b"a,b,a,y\n1,2,3,1\n"), "line 1", "duplicate column name(s) in the header: a")
    one_error(run(models["static"], b"a,,Unnamed: 1,y\n1,2,3,1\n"), "line 1", "field 2 is empty")
    long_row = b"a,b,y\n1,2,1\n" + b"1," + b"9" * 200_000 + b",0\n0.5,0.5,1\n"
    one_error(run(models["static"], long_row), "row 2 (line 3)", "longer than 131,072 characters")
    skipped = run(models["static"], long_row, "--on-bad-row", "skip")
    assert skipped.exit_code == 0 and [line.split(",")[0] for line in skipped.stdout.splitlines()] == ["row", "1", "3"]


def test_bom_crlf_quotes_and_invalid_utf8_through_the_command(models):
    data = b'\xef\xbb\xbf"a","b","y"\r\n1,"2.5",1\r\n\r\n"0.5",1,0\r\n\xff,1,0\r\n0.2,0.1,1\r\n'
    one_error(run(models["static"], data), "row 3 (line 5)", "not valid UTF-8")
    result = run(models["static"], data, "--on-bad-row", "skip")
    assert result.exit_code == 0 and [line.split(",")[0] for line in result.stdout.splitlines()] == \
        ["row", "1", "2", "4"]


def test_a_number_of_400_digits_is_a_bad_row_naming_row_and_column(models):
    # before: "unexpected OverflowError: int too large to convert to float", not skippable
    data = b"a,b,y\n1,2,1\n1" + b"9" * 400 + b",2,1\n0.5,2,1\n-1,-1,0\n"
    one_error(run(models["static"], data), "row 2 (line 3), column 'a'", "401 digits, too large for a float")
    skipped = run(models["static"], data, "--on-bad-row", "skip")
    assert skipped.exit_code == 0, skipped.stderr
    assert [line.split(",")[0] for line in skipped.stdout.splitlines()] == ["row", "1", "3", "4"]
