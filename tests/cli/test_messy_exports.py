"""Files with the mess real exports have: each case once gave a wrong answer with exit 0, an
unreadable line or a message that did not say what the file is. Every case runs through the real
command, on data the test writes."""

from __future__ import annotations

import pytest

from .conftest import SAMPLE, head_lines, parse_csv

BASE = ["--seed", "3", "-M", "3", "--no-live"]


def one_line(stderr: str, prefix: str = "ipfi: error: ") -> str:
    lines = [line for line in stderr.strip().splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, stderr
    return lines[0]


# -- a junk field in a message ------------------------------------------------------------------
def test_a_huge_junk_field_is_quoted_cut_with_its_length(run, hgb, tmp_path):
    lines = head_lines(SAMPLE / "agrawal_static.csv", 30).splitlines()
    fields = lines[4].split(",")
    fields[0] = "J" * 100_000
    lines[4] = ",".join(fields)
    path = tmp_path / "junk.csv"
    path.write_text("\n".join(lines) + "\n")
    result = run("explain", path, "-m", hgb, "-t", "class", *BASE)
    assert result.exit_code == 1
    line = one_line(result.stderr)
    assert len(line) < 400, len(line)
    assert "row 4 (line 5), column 'salary'" in line
    assert "'" + "J" * 80 + "…' (100,000 characters)" in line
    assert len(result.stdout.splitlines()) == 4  # the header and rows 1-3 (nothing computed is lost)


def test_a_huge_column_name_leaves_a_line_of_bounded_length(run, hgb, tmp_path):
    lines = head_lines(SAMPLE / "agrawal_static.csv", 30).splitlines()
    lines[0] = lines[0].replace("car", "c" * 50_000)
    path = tmp_path / "wide.csv"
    path.write_text("\n".join(lines) + "\n")
    result = run("explain", path, "-m", hgb, "-t", "label", *BASE)  # the message lists the columns
    assert result.exit_code == 1
    line = one_line(result.stderr)
    assert len(line) < 2100 and "characters cut" in line, line[:300]
    assert "no column 'label' (the --target)" in line and line.endswith("loan, class")


# -- ', ' between fields (UCI's files) and a model's one-hot encoder ------------------------------
@pytest.fixture(scope="module")
def census(tmp_path_factory):
    """An adult-like table: two text columns a OneHotEncoder(handle_unknown="ignore") reads, one number.
    ``spaced.csv`` is written as UCI writes adult.data (', ' between fields)."""
    import joblib
    import numpy as np
    import pandas as pd
    from sklearn.compose import make_column_transformer
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    rng = np.random.default_rng(0)
    n = 120
    frame = pd.DataFrame({"age": rng.integers(18, 80, n),
                          "workclass": rng.choice(["State-gov", "Private", "Self-emp"], n),
                          "sex": rng.choice(["Male", "Female"], n)})
    frame["class"] = np.where((frame.workclass == "Private") ^ (rng.random(n) < 0.1), ">50K", "<=50K")
    encoder = make_pipeline(SimpleImputer(strategy="most_frequent"), OneHotEncoder(handle_unknown="ignore"))
    model = make_pipeline(make_column_transformer((encoder, ["workclass", "sex"]), remainder="passthrough"),
                          LogisticRegression(max_iter=500))
    model.fit(frame.drop(columns="class"), frame["class"])
    folder = tmp_path_factory.mktemp("census")
    joblib.dump(model, folder / "model.joblib")
    frame.to_csv(folder / "clean.csv", index=False)
    lines = [", ".join(frame.columns)] + [", ".join(map(str, row)) for row in frame.itertuples(index=False)]
    (folder / "spaced.csv").write_text("\n".join(lines) + "\n")
    return folder


def test_values_after_comma_space_are_refused_naming_the_fix(run, census):
    common = ["-m", census / "model.joblib", "-t", "class", *BASE]
    result = run("explain", census / "spaced.csv", *common)
    assert result.exit_code == 2, result.stderr
    line = one_line(result.stderr, "ipfi: usage error: ")
    assert "spaced.csv: row 1 (line 2), column 'workclass': ' " in line, line
    assert "is none of the categories the model's OneHotEncoder learned" in line
    assert "(so for 1 more column(s): 'sex')" in line and "--skip-initial-space" in line
    assert "--allow-unknown-categories" in line and "Invalid value" not in line
    assert len(result.stdout.splitlines()) <= 1  # nothing explained: the header at most

    piped = run("explain", "-", *common, input=(census / "spaced.csv").read_bytes())
    assert piped.exit_code == 2 and "<stdin>: row 1 (line 2), column 'workclass'" in piped.stderr

    for command in ("batch", "compare"):
        whole = run(command, census / "spaced.csv", "-m", census / "model.joblib", "-t", "class", "--seed", "3")
        assert whole.exit_code == 2 and "--skip-initial-space" in whole.stderr, (command, whole.stderr)


def test_skip_initial_space_reads_the_values_as_the_model_learned_them(run, census):
    common = ["-m", census / "model.joblib", "-t", "class", *BASE]
    clean = run("explain", census / "clean.csv", *common)
    spaced = run("explain", census / "spaced.csv", *common, "--skip-initial-space")
    assert clean.exit_code == 0 and spaced.exit_code == 0, spaced.stderr
    assert spaced.stdout == clean.stdout
    final = parse_csv(spaced.stdout)[-1]
    assert float(final["workclass"]) > 0.05  # the column the label depends on
    piped = run("explain", "-", *common, "--skip-initial-space", input=(census / "spaced.csv").read_bytes())
    assert piped.stdout == clean.stdout


def test_allow_unknown_categories_runs_with_a_warning(run, census):
    result = run("explain", census / "spaced.csv", "-m", census / "model.joblib", "-t", "class", *BASE,
                 "--allow-unknown-categories")
    assert result.exit_code == 0, result.stderr
    line = one_line(result.stderr, "ipfi: warning: " + str(census / "spaced.csv"))
    assert "column 'workclass'" in line and "--skip-initial-space" in line
    assert float(parse_csv(result.stdout)[-1]["workclass"]) == 0.0  # what the warning says


def test_values_none_of_which_the_encoder_knows_get_a_warning(run, census, tmp_path):
    import pandas as pd

    frame = pd.read_csv(census / "clean.csv")
    frame["workclass"] = frame.workclass.str.upper()
    frame.to_csv(tmp_path / "upper.csv", index=False)
    result = run("explain", tmp_path / "upper.csv", "-m", census / "model.joblib", "-t", "class", *BASE)
    assert result.exit_code == 0, result.stderr
    line = one_line(result.stderr, "ipfi: warning: ")
    assert "row 1 (line 2), column 'workclass': none of the first 20 rows' values is a category" in line
    assert "'STATE-GOV'" in line or "'PRIVATE'" in line or "'SELF-EMP'" in line
    assert "sex" not in line


def test_spaced_jsonl_values_are_refused_without_the_csv_option(run, census, tmp_path):
    import json

    import pandas as pd

    frame = pd.read_csv(census / "clean.csv")
    rows = [{**row, "workclass": " " + row["workclass"]} for row in frame.to_dict("records")]
    (tmp_path / "spaced.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = run("explain", tmp_path / "spaced.jsonl", "-m", census / "model.joblib", "-t", "class", *BASE)
    assert result.exit_code == 2
    line = one_line(result.stderr, "ipfi: usage error: ")
    assert "column 'workclass'" in line and "take the spaces off the values" in line
    assert "--skip-initial-space" not in line


# -- ipfi pdp reads its input as explain does -------------------------------------------------------
def test_pdp_reads_decimal_commas_as_its_error_advises(run, hgb, tmp_path):
    lines = head_lines(SAMPLE / "agrawal_static.csv", 60).splitlines()
    path = tmp_path / "euro.csv"
    path.write_text("\n".join(";".join(f.replace(".", ",") for f in line.split(",")) for line in lines) + "\n")
    common = ["-m", hgb, "--feature", "salary", "--class", "1", "-t", "class", "--every", "50"]
    refused = run("pdp", path, *common)
    assert refused.exit_code == 1 and "use --decimal ," in one_line(refused.stderr)
    result = run("pdp", path, *common, "--decimal", ",")
    assert result.exit_code == 0, result.stderr
    (tmp_path / "plain.csv").write_text("\n".join(lines) + "\n")
    plain = run("pdp", tmp_path / "plain.csv", *common)
    assert result.stdout == plain.stdout and len(parse_csv(result.stdout)) == 20  # rows 50 and 60, 10 points
    piped = run("pdp", "-", *common, "--decimal", ",", input=path.read_bytes())
    assert piped.stdout == plain.stdout


# -- JSONL with nested objects, as log shippers write ---------------------------------------------
@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    """agrawal rows as a log shipper writes them: a nested 'host' object first, a 'tags' array last."""
    import json

    rows = parse_csv(head_lines(SAMPLE / "agrawal_static.csv", 80))
    folder = tmp_path_factory.mktemp("shipped")
    with open(folder / "logs.jsonl", "w") as out:
        for i, row in enumerate(rows):
            values = {k: float(v) if k != "class" else int(v) for k, v in row.items()}
            out.write(json.dumps({"host": {"name": "a", "ip": [10, 0, 0, i % 3]}, **values, "tags": ["x"]}) + "\n")
    with open(folder / "plain.jsonl", "w") as out:
        for row in rows:
            out.write(json.dumps({k: float(v) if k != "class" else int(v) for k, v in row.items()}) + "\n")
    return folder


def test_nested_keys_the_model_does_not_take_are_ignored(run, hgb, shipped):
    common = ["-m", hgb, "-t", "class", *BASE]
    plain = run("explain", shipped / "plain.jsonl", *common)
    assert plain.exit_code == 0, plain.stderr
    for extra in ([], ["--drop", "host,tags"]):
        result = run("explain", shipped / "logs.jsonl", *common, *extra)
        assert result.exit_code == 0, result.stderr
        assert result.stdout == plain.stdout
    piped = run("explain", "-", *common, input=(shipped / "logs.jsonl").read_bytes())
    assert piped.stdout == plain.stdout
    batch = run("batch", shipped / "logs.jsonl", "-m", hgb, "-t", "class", "--seed", "3")
    assert batch.exit_code == 0, batch.stderr


def test_nested_keys_dropped_for_a_model_without_names(run, hoeffding, shipped):
    common = ["-m", hoeffding, "-t", "class", "--learn", *BASE]
    refused = run("explain", shipped / "logs.jsonl", *common)
    assert refused.exit_code == 1
    line = one_line(refused.stderr)
    assert """logs.jsonl: row 1 (line 1), column 'host': a nested JSON object ('{"name":"a","ip":[10,0,0,0]}')""" \
        in line, line
    assert "--drop host" in line
    result = run("explain", shipped / "logs.jsonl", *common, "--drop", "host,tags")
    plain = run("explain", shipped / "plain.jsonl", *common)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == plain.stdout


def test_a_nested_value_in_a_model_input_names_its_row_and_column(run, hgb, shipped, tmp_path):
    lines = (shipped / "logs.jsonl").read_text().splitlines()
    lines[6] = lines[6].replace('"age": ', '"age": {"years": 3}, "x": ', 1)
    (tmp_path / "bad.jsonl").write_text("\n".join(lines) + "\n")
    result = run("explain", tmp_path / "bad.jsonl", "-m", hgb, "-t", "class", *BASE)
    assert result.exit_code == 1
    line = one_line(result.stderr)
    assert """bad.jsonl: row 7 (line 7), column 'age': a nested JSON object ('{"years":3}')""" in line, line
    assert len(parse_csv(result.stdout)) == 6  # rows 1-6 explained and written (the first only fills the reservoir)


# -- compressed and non-UTF-8 inputs --------------------------------------------------------------
def test_bz2_and_xz_inputs_are_read_and_zip_and_utf16_are_named(run, hgb, tmp_path):
    import bz2
    import lzma
    import zipfile

    text = head_lines(SAMPLE / "agrawal_static.csv", 40)
    common = ["-m", hgb, "-t", "class", *BASE]
    (tmp_path / "plain.csv").write_text(text)
    plain = run("explain", tmp_path / "plain.csv", *common)
    (tmp_path / "d.csv.bz2").write_bytes(bz2.compress(text.encode()))
    (tmp_path / "d.tsv.xz").write_bytes(lzma.compress(text.replace(",", "\t").encode()))  # a tab, as .tsv says
    for name in ("d.csv.bz2", "d.tsv.xz"):
        result = run("explain", tmp_path / name, *common)
        assert result.exit_code == 0, result.stderr
        assert result.stdout == plain.stdout
    piped = run("explain", "-", *common, input=bz2.compress(text.encode()))
    assert piped.stdout == plain.stdout

    with zipfile.ZipFile(tmp_path / "d.zip", "w") as archive:
        archive.writestr("d.csv", text)
    result = run("explain", tmp_path / "d.zip", *common)
    assert result.exit_code == 1
    assert one_line(result.stderr).startswith(f"ipfi: error: {tmp_path / 'd.zip'}: a zip archive, which ipfi does "
                                              f"not open")
    assert f"unzip -p {tmp_path / 'd.zip'} FILE | ipfi ... -" in result.stderr
    utf16 = text.encode("utf-16")
    result = run("explain", "-", *common, input=utf16)
    assert result.exit_code == 1
    line = one_line(result.stderr)
    assert line.startswith("ipfi: error: <stdin>: UTF-16 text") and "iconv -f UTF-16 -t UTF-8 FILE" in line


# -- Excel's exports: rows of empty fields, a `sep=` first line ----------------------------------
def test_rows_of_empty_fields_are_skipped_as_blank_lines_and_counted(run, hgb, tmp_path):
    text = head_lines(SAMPLE / "agrawal_static.csv", 40)
    common = ["-m", hgb, "-t", "class", *BASE]
    (tmp_path / "plain.csv").write_text(text)
    plain = run("explain", tmp_path / "plain.csv", *common)
    lines = text.splitlines()
    lines[10:10] = [",,,,,,,,,"]  # one inside, as a spreadsheet's empty row
    (tmp_path / "excel.csv").write_text("\n".join(lines) + "\n" + ",,,,,,,,,\n" * 4)
    result = run("explain", tmp_path / "excel.csv", *common)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == plain.stdout
    line = one_line(result.stderr, "ipfi: note: ")
    assert "excel.csv: skipped 5 row(s) whose every field is empty (the first at line 11)" in line
    piped = run("explain", "-", *common, input=(tmp_path / "excel.csv").read_bytes())
    assert piped.exit_code == 0 and piped.stdout == plain.stdout
    batch = run("batch", tmp_path / "excel.csv", "-m", hgb, "-t", "class", "--seed", "3")
    assert batch.exit_code == 0 and "skipped 5 row(s) whose every field is empty" in batch.stderr


def test_a_long_file_with_empty_rows_reads_as_without_them(run, hgb, tmp_path):
    """The bulk parser (a block of rows at a time) leaves such rows to the row reader, which skips them."""
    text = head_lines(SAMPLE / "agrawal_static.csv", 3000)
    common = ["-m", hgb, "-t", "class", *BASE, "--every", "500"]
    (tmp_path / "plain.csv").write_text(text)
    lines = text.splitlines()
    for at in (2900, 1700, 1500):
        lines[at:at] = [",,,,,,,,,"]
    (tmp_path / "excel.csv").write_text("\n".join(lines) + "\n")
    plain = run("explain", tmp_path / "plain.csv", *common)
    result = run("explain", tmp_path / "excel.csv", *common)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == plain.stdout and "skipped 3 row(s)" in result.stderr


def test_excels_sep_line_names_the_separator(run, hgb, tmp_path):
    text = head_lines(SAMPLE / "agrawal_static.csv", 40)
    common = ["-m", hgb, "-t", "class", *BASE]
    (tmp_path / "plain.csv").write_text(text)
    plain = run("explain", tmp_path / "plain.csv", *common)
    lines = text.replace(",", ";").splitlines()
    lines[8] = lines[8].replace(";", ";x", 1)
    (tmp_path / "excel.csv").write_bytes(b"\xef\xbb\xbfsep=;\r\n" + "\r\n".join(lines).encode() + b"\r\n")
    result = run("explain", tmp_path / "excel.csv", *common)
    assert result.exit_code == 1
    assert "excel.csv: row 8 (line 10), column 'commission'" in one_line(result.stderr)  # lines count the sep= line
    assert result.stdout == "".join(plain.stdout.splitlines(keepends=True)[:8])  # rows 1-7's records
    lines[8] = text.replace(",", ";").splitlines()[8]
    data = b"sep=;\n" + "\n".join(lines).encode() + b"\n"
    assert run("explain", "-", *common, input=data).stdout == plain.stdout


def test_the_categories_of_encoders_where_pipelines_put_them():
    import pandas as pd
    from sklearn.compose import make_column_transformer
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LinearRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, OrdinalEncoder, StandardScaler

    from ipfi_cli.models.categories import learned_categories

    # a missing value as readers give it (NaN): scikit-learn 1.3's SimpleImputer leaves None alone
    X = pd.DataFrame({"city": ["paris", "rome", "oslo", float("nan")], "size": [1.0, 2.0, 3.0, 4.0],
                      "code": [1, 2, 1, 2]})
    y = [1.0, 2.0, 3.0, 4.0]
    ordinal = OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1)
    nested = make_pipeline(make_column_transformer(
        (make_pipeline(SimpleImputer(strategy="constant", fill_value="none"), ordinal), ["city"]),
        (OneHotEncoder(), ["code"]), (StandardScaler(), ["size"])), LinearRegression()).fit(X, y)
    found = learned_categories(nested)
    assert sorted(found) == ["city", "code"]
    assert found["city"].known == {"paris", "rome", "oslo", "none"} and not found["city"].fails
    assert found["code"].known == {1, 2} and found["code"].fails  # handle_unknown="error" (the default)
    first = make_pipeline(OneHotEncoder(handle_unknown="ignore"), LinearRegression())
    first.fit(X[["city", "code"]].fillna("?"), y)
    assert sorted(learned_categories(first)) == ["city", "code"]
    changed = make_pipeline(make_column_transformer((make_pipeline(FunctionTransformer(), OneHotEncoder()),
                                                     ["city"])), LinearRegression()).fit(X.fillna("?"), y)
    assert learned_categories(changed) == {}  # an encoder after a step that may change the values: not read
