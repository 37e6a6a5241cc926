"""Labels as read find the model's classes: a class's own text always finds it, and the
case-insensitive aliases only where they are not ambiguous."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_iris
from sklearn.tree import DecisionTreeClassifier

from ipfi_cli.run.labels import LabelMatcher


def test_a_class_that_differs_from_another_only_in_case_is_found_by_its_own_text():
    matcher = LabelMatcher(classification=True, classes=["Setosa", "setosa", "virginica"])
    assert [matcher(label) for label in ("setosa", "Setosa", "virginica")] == ["setosa", "Setosa", "virginica"]
    matcher = LabelMatcher(classification=True, classes=["setosa", "Setosa"])  # the other order
    assert [matcher(label) for label in ("setosa", "Setosa")] == ["setosa", "Setosa"]


def test_an_alias_two_classes_share_finds_neither():
    matcher = LabelMatcher(classification=True, classes=["Setosa", "setosa"])
    assert matcher("SETOSA") == "SETOSA"  # no class: counted as unknown, not given to one of them
    assert matcher.unknown == {"SETOSA": 1}


def test_unambiguous_aliases_still_find_their_class():
    matcher = LabelMatcher(classification=True, classes=["setosa", "versicolor"])
    assert [matcher(label) for label in (" Setosa", "VERSICOLOR")] == ["setosa", "versicolor"]
    assert LabelMatcher(classification=True, classes=[0, 1])("yes") == 1
    assert LabelMatcher(classification=True, classes=[1, 2])(2.0) == 2


def test_batch_measures_a_perfect_model_whose_classes_differ_only_in_case(tmp_path, run):
    """A tree that fits iris exactly, with classes setosa / Setosa / virginica: the loss on its own
    training rows is 0 (it was 1/3 when "Setosa"'s lower-cased alias took the label "setosa")."""
    iris = load_iris(as_frame=True)
    frame = iris.frame.drop(columns="target")
    frame["species"] = np.array(["setosa", "Setosa", "virginica"])[iris.target]
    frame = frame.sample(frac=1.0, random_state=0)
    model = DecisionTreeClassifier(random_state=0).fit(frame.drop(columns="species"), frame["species"])
    assert (model.predict(frame.drop(columns="species")) == frame["species"]).all()
    import joblib

    joblib.dump(model, tmp_path / "tree.joblib")
    frame.to_csv(tmp_path / "iris.csv", index=False)
    result = run("batch", tmp_path / "iris.csv", "-m", tmp_path / "tree.joblib", "-t", "species", "--seed", "1", "-q",
                 "--output-format", "jsonl")
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert records and all(r["baseline_loss"] == 0.0 for r in records)
    assert pd.Series({r["feature"]: r["importance"] for r in records}).max() > 0.1


def test_a_log_loss_far_worse_than_guessing_is_said(tmp_path, run):
    """A classifier whose probability columns are not in the order of its classes (as a served
    model given --classes in another order): its log loss, about 9.5 here, is more than three times a
    uniform guess's (ln 3); the run says so. The model in the right order is not warned about."""
    import joblib
    from sklearn.linear_model import LogisticRegression

    iris = load_iris(as_frame=True)
    frame = iris.frame.drop(columns="target")
    frame["species"] = np.array(["setosa", "versicolor", "virginica"])[iris.target]
    frame = frame.sample(frac=1.0, random_state=0)
    frame.to_csv(tmp_path / "iris.csv", index=False)
    model = LogisticRegression(max_iter=1000).fit(frame.drop(columns="species"), frame["species"])
    joblib.dump(model, tmp_path / "right.joblib")
    model.classes_ = model.classes_[::-1].copy()  # its probabilities now name the wrong classes
    joblib.dump(model, tmp_path / "wrong.joblib")
    for name, warned in (("wrong", True), ("right", False)):
        result = run("explain", tmp_path / "iris.csv", "-m", tmp_path / f"{name}.joblib", "-t", "species",
                     "--loss", "log", "--seed", "1", "--no-live")
        assert result.exit_code == 0, result.stderr
        said = " ".join(result.stderr.split())
        assert ("more than three times a uniform guess's (ln 3 = 1.10)" in said) == warned, said


def test_an_untrained_river_model_without_learn_is_named_as_a_cause(tmp_path, run):
    """A river tree that has learned nothing predicts no class: every row is wrong, and the one
    line names the missing --learn besides the labels."""
    import pickle

    from river import tree

    iris = load_iris(as_frame=True)
    frame = iris.frame.drop(columns="target")
    frame["species"] = np.array(["setosa", "versicolor", "virginica"])[iris.target]
    frame.to_csv(tmp_path / "iris.csv", index=False)
    (tmp_path / "tree.pkl").write_bytes(pickle.dumps(tree.HoeffdingTreeClassifier()))
    result = run("explain", tmp_path / "iris.csv", "-m", tmp_path / "tree.pkl", "-t", "species", "--no-live")
    assert result.exit_code == 1
    assert "does not learn without --learn" in " ".join(result.stderr.split()), result.stderr
    learned = run("explain", tmp_path / "iris.csv", "-m", tmp_path / "tree.pkl", "-t", "species", "--learn",
                  "--no-live", "--seed", "1")
    assert learned.exit_code == 0, learned.stderr


def test_a_label_too_large_for_a_float_is_a_bad_row_naming_the_row_and_the_label_column(tmp_path, run, agrawal_small,
                                                                                           hgb):
    """A 400-digit label stopped the run with "unexpected OverflowError", even with --on-bad-row skip. It is
    a bad row: the run stops naming it, or skips it and gives the numbers of a run without that row."""
    huge = int("1" * 400)
    for matcher in (LabelMatcher(classification=True, classes=[0, 1]), LabelMatcher(classification=False)):
        for label in (huge, -huge):
            with pytest.raises(ValueError, match="a label of 400 digits, too large for a float"):
                matcher(label)
    assert LabelMatcher(classification=True, classes=[0, 1]).many([0, huge]) is None  # the row-by-row check names it
    assert LabelMatcher(classification=True, classes=["1" * 400, "2"])(huge) == "1" * 400  # a class's own text
    lines = agrawal_small.read_text().splitlines()
    fields = lines[5].split(",")
    fields[-1] = "1" * 400
    bad, without = tmp_path / "bad.csv", tmp_path / "without.csv"
    bad.write_text("\n".join([*lines[:5], ",".join(fields), *lines[6:]]) + "\n")
    without.write_text("\n".join([*lines[:5], *lines[6:]]) + "\n")
    for command in ("explain", "batch"):
        stopped = run(command, bad, "-m", hgb, "-t", "class", "--seed", "3", "-q")
        assert stopped.exit_code == 1
        assert stopped.stderr.strip() == (f"ipfi: error: {bad}: row 5 (line 6), column 'class': a label of 400 digits, "
                                          "too large for a float; no model predicts it"), stopped.stderr
        skipped = run(command, bad, "-m", hgb, "-t", "class", "--seed", "3", "-q", "--on-bad-row", "skip",
                      "--output-format", "jsonl")
        plain = run(command, without, "-m", hgb, "-t", "class", "--seed", "3", "-q", "--output-format", "jsonl")
        assert skipped.exit_code == plain.exit_code == 0, skipped.stderr
        def records(text: str) -> list[dict]:  # the row numbers after the bad row differ by one
            return [{k: v for k, v in json.loads(line).items() if k != "row"} for line in text.splitlines()]

        assert records(skipped.stdout) == records(plain.stdout) and skipped.stdout


@pytest.mark.parametrize("classes", [[0, 1], [0.0, 1.0], ["0", "1"], ["0.0", "1.0"]])
def test_one_rule_for_a_0_1_model_whatever_the_type_of_its_classes(classes):
    """Classes 0.0/1.0 refused yes/no and True/False labels that classes 0/1 accept (every row counted
    as a label the model never predicts); any 0/1 classes now take the same spellings."""
    zero, one = sorted(classes, key=float)
    matcher = LabelMatcher(classification=True, classes=classes)
    for label in ("yes", "Y", "true", "TRUE", True, 1, 1.0, "1", "1.0", " 1 "):
        assert matcher(label) == one and type(matcher(label)) is type(one), label
    for label in ("no", "n", "false", False, 0, 0.0, "0", "0.0"):
        assert matcher(label) == zero and type(matcher(label)) is type(zero), label
    assert matcher("maybe") == "maybe" and matcher.unknown == {"maybe": 1}


def test_explain_measures_a_float_0_1_model_on_yes_no_labels(tmp_path, run, agrawal_small):
    """A model fitted on class 0.0/1.0 explained on the same rows with the labels yes/no gives the run on the
    labels 0/1 (it stopped with "no label is one of the model's classes (0.0, 1.0)")."""
    import joblib
    from sklearn.linear_model import LogisticRegression

    frame = pd.read_csv(agrawal_small)
    model = LogisticRegression(max_iter=2000).fit(frame.drop(columns="class"), frame["class"].astype(float))
    assert model.classes_.tolist() == [0.0, 1.0]
    joblib.dump(model, tmp_path / "lr.joblib")
    frame.assign(**{"class": frame["class"].map({1: "yes", 0: "no"})}).to_csv(tmp_path / "yesno.csv", index=False)
    outputs = [run("explain", data, "-m", tmp_path / "lr.joblib", "-t", "class", "--seed", "5", "-q",
                   "--output-format", "jsonl") for data in (tmp_path / "yesno.csv", agrawal_small)]
    assert [o.exit_code for o in outputs] == [0, 0], outputs[0].stderr
    assert outputs[0].stdout == outputs[1].stdout and outputs[0].stdout


def test_labels_that_match_no_class_are_refused_before_any_record(tmp_path, run, agrawal_small, hgb, monkeypatch):
    """explain wrote a record per row (all zeros) and printed the summary table, then refused labels none of
    which is a class of the model. Refused now before any record and without the table; rows whose labels
    match no class yet are held back until one does, and then give the records of a run without the hold."""
    lines = agrawal_small.read_text().splitlines()
    header, rows = lines[0], lines[1:]
    renamed = [row.rsplit(",", 1)[0] + ",group_" + row.rsplit(",", 1)[1] for row in rows]
    every = tmp_path / "every.csv"
    every.write_text("\n".join([header, *renamed]) + "\n")
    for batch in ("1", "100"):
        result = run("explain", every, "-m", hgb, "-t", "class", "--seed", "1", "--no-live", "--batch-size", batch)
        assert result.exit_code == 1
        assert result.stdout == header.replace(",class", "").replace("salary", "row,salary", 1) + "\n"
        assert result.stderr.strip().splitlines()[-1] == (
            f"ipfi: error: {every}: no label is one of the model's classes (0, 1); the labels read like 'group_1', "
            "'group_0': every prediction would count as wrong and every importance would be 0; check --target and "
            "the label values")
        assert "┃" not in result.stderr and "seed 1" not in result.stderr  # no summary table
    long = tmp_path / "long.csv"  # a long stream is refused once 1,000 rows' labels matched none
    long.write_text("\n".join([header, *(renamed * 5)]) + "\n")
    result = run("explain", long, "-m", hgb, "-t", "class", "--seed", "1", "-q", "--batch-size", "7")
    assert result.exit_code == 1 and result.stdout.count("\n") == 1
    assert "the first 1,001 rows' labels: no label is one of the model's classes" in result.stderr
    # the first 30 labels match no class, the rest do: the same records as a run that holds nothing back
    some = tmp_path / "some.csv"
    some.write_text("\n".join([header, *renamed[:30], *rows[30:]]) + "\n")
    args = ("explain", some, "-m", hgb, "-t", "class", "--seed", "1", "--no-live", "--batch-size", "7")
    held = run(*args)
    from ipfi_cli.run.explaining import SingleExplainer

    monkeypatch.setattr(SingleExplainer, "_hold", lambda self, good, stopping: good)
    plain = run(*args)
    assert held.exit_code == plain.exit_code == 0, held.stderr
    assert held.stdout == plain.stdout and held.stdout.count("\n") == 301
    assert "30 row(s) have a label the model never predicts" in held.stderr


def test_text_labels_spelled_apart_are_counted_when_taken_as_they_are():
    """A model that learns its classes from the labels (river from scratch) takes them as read: the
    spellings of one class that differ in case or surrounding spaces become classes of their own."""
    matcher = LabelMatcher(classification=True, classes=None, fixed=False)
    assert [matcher(v) for v in ("setosa", " SETOSA", "virginica", "setosa", "Setosa ")] == \
        ["setosa", " SETOSA", "virginica", "setosa", "Setosa "]
    assert matcher.spelling_summary() == (
        "labels that differ only in case or surrounding spaces were taken as different classes: ' SETOSA', "
        "'Setosa ' and 'setosa'; the model learns each spelling as a class of its own: write each class one way")
    clean = LabelMatcher(classification=True, classes=None, fixed=False)
    assert clean.many(["a", "b", "a"]) == ["a", "b", "a"] and clean.spelling_summary() is None
    fitted = LabelMatcher(classification=True, classes=["setosa"])  # found by its alias: nothing to say
    assert fitted(" SETOSA") == "setosa" and fitted.spelling_summary() is None


def test_explain_learn_says_when_one_class_is_spelled_two_ways(tmp_path, run):
    """river's HoeffdingTreeClassifier learning iris whose labels are 'setosa' and ' SETOSA' by turns:
    it learned six classes, with exit 0 and no word (loss 0.52 against 0.11 with one spelling per class)."""
    import pickle

    from river import tree

    iris = load_iris(as_frame=True)
    frame = iris.frame.sample(frac=1.0, random_state=0).reset_index(drop=True)
    names = np.array(iris.target_names)[frame.pop("target")]
    frame["species"] = [f" {n.upper()}" if i % 2 else n for i, n in enumerate(names)]
    data = tmp_path / "iris.csv"
    frame.to_csv(data, index=False)
    model = tmp_path / "tree.pkl"
    model.write_bytes(pickle.dumps(tree.HoeffdingTreeClassifier()))
    result = run("explain", data, "-m", model, "-t", "species", "--learn", "--seed", "0", "--no-live", "-e", "500")
    assert result.exit_code == 0, result.stderr
    assert ("ipfi: warning: labels that differ only in case or surrounding spaces were taken as different "
            "classes: ' SETOSA' and 'setosa', ' VERSICOLOR' and 'versicolor', ' VIRGINICA' and 'virginica'; the "
            "model learns each spelling as a class of its own: write each class one way") in result.stderr
