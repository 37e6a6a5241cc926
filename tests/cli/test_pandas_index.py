"""A CSV that pandas wrote with its index (``to_csv()`` without ``index=False``) has an unnamed
first column: it is read as pandas reads it, ``Unnamed: 0``."""

from __future__ import annotations

import joblib
from sklearn.datasets import load_iris
from sklearn.ensemble import RandomForestClassifier


def _files(tmp_path):
    iris = load_iris(as_frame=True)
    frame = iris.frame.rename(columns={"target": "species"}).sample(frac=1.0, random_state=2)
    features = frame.drop(columns="species")
    joblib.dump(RandomForestClassifier(n_estimators=5, random_state=0).fit(features, frame["species"]),
                tmp_path / "named.joblib")
    joblib.dump(RandomForestClassifier(n_estimators=5, random_state=0).fit(features.to_numpy(), frame["species"]),
                tmp_path / "array.joblib")
    frame.to_csv(tmp_path / "indexed.csv")  # pandas' default: the index first, under an empty name
    frame.to_csv(tmp_path / "plain.csv", index=False)
    return tmp_path


def test_a_model_with_named_inputs_ignores_the_index_column(tmp_path, run):
    folder = _files(tmp_path)
    args = ["-m", folder / "named.joblib", "-t", "species", "--seed", "2", "-e", "50"]
    indexed, plain = run("explain", folder / "indexed.csv", *args), run("explain", folder / "plain.csv", *args)
    assert indexed.exit_code == plain.exit_code == 0, indexed.stderr
    assert indexed.stdout == plain.stdout
    assert "Unnamed" not in indexed.stderr  # not given to the model: nothing to say


def test_a_model_taking_columns_by_position_names_the_index_column_and_the_fix(tmp_path, run):
    folder = _files(tmp_path)
    args = ["-m", folder / "array.joblib", "-t", "species", "--seed", "2", "-e", "50"]
    refused = run("explain", folder / "indexed.csv", *args)
    assert refused.exit_code == 1 and "Unnamed: 0" in refused.stderr
    assert "has no name (pandas writes its index so)" in refused.stderr and "--drop 'Unnamed: 0'" in refused.stderr
    dropped = run("explain", folder / "indexed.csv", *args, "--drop", "Unnamed: 0")
    assert dropped.exit_code == 0 and dropped.stdout == run("explain", folder / "plain.csv", *args).stdout


def test_an_empty_name_that_would_clash_is_still_refused(tmp_path, run):
    folder = _files(tmp_path)
    (folder / "clash.csv").write_text(",Unnamed: 0,species\n1,2,0\n")
    result = run("explain", folder / "clash.csv", "-m", folder / "named.joblib", "-t", "species")
    assert result.exit_code != 0 and "the header's field 1 is empty" in result.stderr
