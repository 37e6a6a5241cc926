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


def test_compare_learn_writes_the_windows_finished_before_a_bad_row(tmp_path, run):
    """compare --learn read the whole stream first: a bad row at 150 dropped the windows ending at 50 and
    100 (exit 1, nothing written, no word of it)."""
    import pickle

    from river import linear_model

    rng = np.random.default_rng(0)
    X = rng.normal(size=(160, 3))
    lines = ["a,b,c,y\n"] + [f"{a!r},{b!r},{c!r},{3 * a + 2 * b - c!r}\n" for a, b, c in X.tolist()]
    bad = list(lines)
    bad[150] = "0.5,0.5,abc,1.0\n"  # row 150
    (tmp_path / "bad.csv").write_text("".join(bad))
    (tmp_path / "first149.csv").write_text("".join(lines[:150]))
    (tmp_path / "lr.pkl").write_bytes(pickle.dumps(linear_model.LinearRegression()))
    common = ["-m", tmp_path / "lr.pkl", "-t", "y", "--learn", "--loss", "squared", "--seed", "0", "-M", "2", "-q"]
    args = [*common, "--interval", "50"]
    stopped = run("compare", tmp_path / "bad.csv", *args, "--traces", tmp_path / "bad_tr.csv")
    assert stopped.exit_code == 1
    lines_said = stopped.stderr.strip().splitlines()
    assert len(lines_said) == 1 and "row 150" in lines_said[0] and "column 'c'" in lines_said[0]
    assert "wrote the records and traces of the 2 window(s) before it (rows 1 to 100)" in lines_said[0]
    assert sorted({r["row"] for r in parse_csv(stopped.stdout)}) == ["100", "50"]
    # the same as a run on the rows before it and nothing after them
    clean = run("compare", tmp_path / "first149.csv", *args, "--traces", tmp_path / "clean_tr.csv")
    assert clean.exit_code == 0, clean.stderr
    assert stopped.stdout == clean.stdout
    assert (tmp_path / "bad_tr.csv").read_text() == (tmp_path / "clean_tr.csv").read_text()
    # a bad row before the first window ends: nothing to write, and said so
    early = run("compare", tmp_path / "bad.csv", *common, "--interval", "200")
    assert early.exit_code == 1 and early.stdout == ""
    assert "row 150" in early.stderr and "no window was finished before it: nothing was written" in early.stderr
