"""The API keeps the command line's contract: the same label matching, the same refusals with the
same one-line messages, the same spread, and any model the command takes (one public loader)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from ipfi_cli import IncrementalPFI, batch_pfi, load_model
from ipfi_cli.cli.app import app
from ipfi_cli.errors import ModelError
from tests.sources.answers import Answers, rows_of


@pytest.fixture(scope="module")
def bool_model() -> tuple[object, pd.DataFrame, np.ndarray]:
    """A tree fitted on a bool label: its classes are [False, True]."""
    from sklearn.tree import DecisionTreeClassifier

    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=400), "b": rng.normal(size=400)})
    y = (X["a"] + 0.3 * rng.normal(size=400)) > 0
    return DecisionTreeClassifier(max_depth=3, random_state=0).fit(X, y), X, y.to_numpy()


SPELLINGS = {
    "text True/False": lambda v: "True" if v else "False",
    "true/false": lambda v: "true" if v else "false",
    "yes/no": lambda v: "yes" if v else "no",
    "1/0": lambda v: int(v),
    "'1'/'0'": lambda v: "1" if v else "0",
}


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_batch_pfi_matches_labels_as_the_command_does(bool_model, spelling):
    model, X, y = bool_model
    reference = batch_pfi(model, X, y, n_repeats=3, seed=1)
    spelled = batch_pfi(model, X, [SPELLINGS[spelling](v) for v in y], n_repeats=3, seed=1)
    assert reference.baseline_loss < 0.2  # the tree is mostly right: a real comparison
    np.testing.assert_array_equal(spelled.importances, reference.importances)
    assert spelled.baseline_loss == reference.baseline_loss


@pytest.mark.parametrize("spelling", ["text True/False", "yes/no"])
def test_incremental_pfi_matches_labels_as_the_command_does(bool_model, spelling):
    model, X, y = bool_model
    rows = X.to_dict("records")[:120]
    plain = IncrementalPFI(model, n_repeats=2, seed=3)
    spelled = IncrementalPFI(model, n_repeats=2, seed=3)
    for x, label in zip(rows, y[:120]):
        expected = plain.explain_one(x, label)
        got = spelled.explain_one(x, SPELLINGS[spelling](label))
    assert got == expected and any(v != 0 for v in got.values())


def test_labels_none_of_which_are_classes_raise_the_commands_line(bool_model, tmp_path):
    model, X, y = bool_model
    labels = ["up" if v else "down" for v in y]
    with pytest.raises(ModelError, match="no label is one of the model's classes") as raised:
        batch_pfi(model, X, labels, n_repeats=2, seed=0)
    explainer = IncrementalPFI(model, n_repeats=2, seed=0)
    with pytest.raises(ModelError, match="no label is one of the model's classes"):
        for x, label in zip(X.to_dict("records"), labels):
            explainer.explain_one(x, label)
    assert explainer.n_explained == 25  # stopped at the check, not at the end of the stream
    # the command says the same line, with its option named
    import joblib

    frame = X.assign(y=labels)
    frame.to_csv(tmp_path / "d.csv", index=False)
    joblib.dump(model, tmp_path / "m.joblib")
    result = CliRunner().invoke(app, ["batch", str(tmp_path / "d.csv"), "-m", str(tmp_path / "m.joblib"), "-t", "y",
                                      "-q"])
    assert result.exit_code == 1 and "check --target and the label values" in result.stderr
    assert str(raised.value) in result.stderr.replace("check --target and ", "check ")


def test_every_row_at_the_maximal_loss_raises(bool_model):
    model, X, y = bool_model
    flipped = ~y  # the model's classes, all wrong: zero-one loss 1 on every row... almost
    wrong = np.where(model.predict(X), False, True)
    assert flipped.dtype == bool
    with pytest.raises(ModelError, match="every one of the 400 rows has the maximal zero-one loss"):
        batch_pfi(model, X, wrong, n_repeats=2, seed=0)
    explainer = IncrementalPFI(model, n_repeats=2, seed=0)
    for x, label in zip(X.to_dict("records")[:10], wrong[:10]):
        explainer.explain_one(x, label)
    with pytest.raises(ModelError, match="every one of the 9 rows has the maximal zero-one loss"):
        explainer.check()


def test_a_loss_that_cannot_measure_the_model_is_refused_before_the_first_row():
    from sklearn.linear_model import LinearRegression

    model = LinearRegression().fit(np.eye(3), [1.0, 2.0, 3.0])
    for loss in ("log", "zero-one"):
        with pytest.raises(ModelError, match="the model is a regressor"):
            IncrementalPFI(model, ["x0", "x1", "x2"], loss=loss)
        with pytest.raises(ModelError, match="the model is a regressor"):
            batch_pfi(model, np.eye(3), [1.0, 2.0, 3.0], loss=loss)


def test_a_non_finite_loss_raises():
    def huge(block: np.ndarray) -> np.ndarray:
        return 1e300 * (1 + np.abs(block[:, 0]))

    X = np.random.default_rng(0).normal(size=(50, 2))
    with pytest.raises(ModelError, match="not a finite number"):
        batch_pfi(huge, X, np.zeros(50), loss="squared", n_repeats=2, seed=0)
    explainer = IncrementalPFI(huge, ["x0", "x1"], loss="squared", n_repeats=2, seed=0)
    with pytest.raises(ModelError, match="not a finite number"):
        for row in X:
            explainer.explain_one({"x0": row[0], "x1": row[1]}, 0.0)


def test_importances_std_is_ipfi_batchs_std(bool_model, tmp_path):
    """One convention (ddof=1): the API's spread equals the command's for the same run."""
    import joblib

    model, X, y = bool_model
    X.assign(y=y).to_csv(tmp_path / "d.csv", index=False)
    joblib.dump(model, tmp_path / "m.joblib")
    result = CliRunner().invoke(app, ["batch", str(tmp_path / "d.csv"), "-m", str(tmp_path / "m.joblib"), "-t", "y",
                                      "-M", "4", "--seed", "2", "-q"])
    assert result.exit_code == 0, result.stderr
    import io

    printed = pd.read_csv(io.StringIO(result.stdout)).set_index("feature")
    api = batch_pfi(model, X, y, n_repeats=4, seed=2)
    expected_std = api.importances.std(axis=1, ddof=1)  # the definition, not the function under test
    np.testing.assert_allclose(api.importances_std, expected_std)
    np.testing.assert_allclose(printed.loc[api.feature_names, "std"], api.importances_std, rtol=1e-12)
    np.testing.assert_allclose(printed.loc[api.feature_names, "importance"], api.importances_mean, rtol=1e-12)


def test_one_loader_for_a_file_and_a_served_model(bool_model, tmp_path):
    import joblib

    model, X, y = bool_model
    joblib.dump(model, tmp_path / "m.joblib")
    from_file = load_model(str(tmp_path / "m.joblib"))
    assert from_file.classes == [False, True]
    reference = batch_pfi(model, X, y, n_repeats=2, seed=5)
    np.testing.assert_array_equal(batch_pfi(from_file, X, y, n_repeats=2, seed=5).importances,
                                  reference.importances)

    server = Answers(lambda path, payload: {"predictions": model.predict(pd.DataFrame(rows_of(payload))).tolist()})
    try:
        served = load_model(server.url.replace("//", "//user:p%23ss@"), headers={"X-Team": "ml"})
        got = batch_pfi(served, X, ["True" if v else "False" for v in y], loss="zero-one", n_repeats=2, seed=5)
    finally:
        server.close()
    np.testing.assert_array_equal(got.importances, reference.importances)
    with pytest.raises(ModelError, match="cannot tell the protocol"):
        load_model("http://127.0.0.1:9/predict")
