"""A run that a bad row stops keeps what it computed: its output ends with the record of the
last row it explained. Lines of spaces at the end of a CSV are blank lines."""

from __future__ import annotations

import joblib
import numpy as np
from sklearn.datasets import load_iris
from sklearn.ensemble import RandomForestClassifier

from .conftest import parse_csv


def _iris(tmp_path):
    iris = load_iris(as_frame=True)
    frame = iris.frame.rename(columns={"target": "species"}).sample(frac=1.0, random_state=1)
    model = RandomForestClassifier(n_estimators=10, random_state=0).fit(frame.drop(columns="species"),
                                                                         frame["species"])
    joblib.dump(model, tmp_path / "rf.joblib")
    text = frame.to_csv(index=False, float_format="%.1f")
    return text.splitlines(keepends=True), tmp_path / "rf.joblib"


def test_a_bad_row_still_ends_the_output_with_the_last_explained_rows_record(tmp_path, run):
    lines, model = _iris(tmp_path)
    bad = list(lines)
    fields = bad[41].split(",")
    bad[41] = ",".join(["abc", *fields[1:]])  # row 41's first feature
    (tmp_path / "bad.csv").write_text("".join(bad))
    (tmp_path / "first40.csv").write_text("".join(lines[:41]))
    args = ["-m", model, "-t", "species", "--seed", "3", "-e", "30", "-q"]
    stopped = run("explain", tmp_path / "bad.csv", *args)
    assert stopped.exit_code == 1
    assert "row 41" in stopped.stderr and "sepal length (cm)" in stopped.stderr
    clean = run("explain", tmp_path / "first40.csv", *args)  # the same 40 rows and nothing after them
    assert clean.exit_code == 0
    assert [r["row"] for r in parse_csv(stopped.stdout)] == ["30", "40"]
    assert stopped.stdout == clean.stdout


def test_lines_of_spaces_at_the_end_are_blank_lines(tmp_path, run):
    lines, model = _iris(tmp_path)
    (tmp_path / "plain.csv").write_text("".join(lines))
    (tmp_path / "trailing.csv").write_text("".join(lines) + "\n\n  \n\t \n")
    args = ["-m", model, "-t", "species", "--seed", "3", "-e", "50", "-q"]
    plain, trailing = run("explain", tmp_path / "plain.csv", *args), run("explain", tmp_path / "trailing.csv", *args)
    assert plain.exit_code == trailing.exit_code == 0, trailing.stderr
    assert trailing.stdout == plain.stdout
    assert np.isfinite([float(v) for v in parse_csv(plain.stdout)[-1].values()]).all()
