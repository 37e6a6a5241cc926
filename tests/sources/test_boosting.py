"""XGBoost and LightGBM (their scikit-learn API) fitted with pandas categorical columns, one of
them text, as first-class models of explain, batch and compare.

The reference wraps the model in a plain function that builds the categorical frame the way
the libraries' own documentation does (``astype(CategoricalDtype(training categories))``),
and goes through the core's function adapter, not through the predictor under test.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from sources.conftest import FEATURES, with_text_zipcode

CATEGORICAL = ["car", "zipcode"]


def fit_categorical(frame: Any, make: Callable[[], Any]) -> Any:
    import pandas as pd

    frame = with_text_zipcode(frame)
    X = frame[FEATURES].copy()
    for column in CATEGORICAL:
        X[column] = X[column].astype(pd.CategoricalDtype(sorted(frame[column].unique())))
    return make().fit(X, frame["class"]), {c: X[c].dtype for c in CATEGORICAL}


def xgboost_model() -> Any:
    xgb = pytest.importorskip("xgboost")
    return xgb.XGBClassifier(n_estimators=25, max_depth=3, enable_categorical=True, tree_method="hist", n_jobs=1,
                             random_state=0)


def lightgbm_model() -> Any:
    lgb = pytest.importorskip("lightgbm")
    return lgb.LGBMClassifier(n_estimators=25, num_leaves=8, min_child_samples=5, n_jobs=1, verbose=-1,
                              random_state=0)


@pytest.fixture(scope="module", params=["xgboost", "lightgbm"])
def booster(request, fit_frame, tmp_path_factory) -> tuple[Any, dict[str, Any], Any]:
    import joblib

    model, dtypes = fit_categorical(fit_frame, xgboost_model if request.param == "xgboost" else lightgbm_model)
    path = tmp_path_factory.mktemp(request.param) / "model.joblib"
    joblib.dump(model, path)
    return model, dtypes, path


def reference_function(model: Any, dtypes: dict[str, Any]) -> Callable[[np.ndarray], np.ndarray]:
    import pandas as pd

    def predict(block: np.ndarray) -> np.ndarray:
        frame = pd.DataFrame(block, columns=FEATURES).infer_objects()
        return model.predict(frame.astype(dtypes))
    return predict


def test_explain_batch_and_compare(run, booster, text_csv):
    import pandas as pd

    from ipfi_cli.core import IPFIEstimator, batch_pfi
    from ipfi_cli.models import FunctionPredictor

    model, dtypes, path = booster
    frame = pd.read_csv(text_csv)
    rows, labels = frame[FEATURES].to_numpy(dtype=object), frame["class"].tolist()
    reference = FunctionPredictor(reference_function(model, dtypes))

    result = run("explain", text_csv, "-m", path, "-t", "class", "--seed", 3, "--no-live", "-q")
    assert result.exit_code == 0, result.stderr
    got = pd.read_csv(io.StringIO(result.stdout))
    expected = IPFIEstimator(reference, FEATURES, seed=3).explain_many(rows, labels)
    np.testing.assert_allclose(got[FEATURES].to_numpy(float), expected, rtol=0, atol=1e-12, equal_nan=True)
    assert np.nanmax(np.abs(expected[-1])) > 0.01

    result = run("batch", text_csv, "-m", path, "-t", "class", "--seed", 3, "-q")
    assert result.exit_code == 0, result.stderr
    got_batch = pd.read_csv(io.StringIO(result.stdout)).set_index("feature").loc[FEATURES, "importance"]
    expected_batch = batch_pfi(reference, frame[FEATURES], labels, FEATURES, seed=3).mean
    np.testing.assert_allclose(got_batch.to_numpy(), expected_batch, rtol=0, atol=1e-12)

    result = run("compare", text_csv, "-m", path, "-t", "class", "--seed", 3, "-K", 2, "-q")
    assert result.exit_code == 0, result.stderr
    compared = pd.read_csv(io.StringIO(result.stdout))
    reported = compared[compared["method"] == "batch"].set_index("feature").loc[FEATURES, "importance"]
    # compare draws its own permutations: the same quantity, other random draws
    np.testing.assert_allclose(reported.to_numpy(), expected_batch, rtol=0, atol=0.06)
    assert set(reported.sort_values().index[-2:]) == {"salary", "age"}
    assert len(compared[compared["method"] != "batch"]) >= 2 * len(FEATURES)


def test_the_predictor_casts_to_the_fitted_categories(booster, fit_frame):
    from ipfi_cli.core.losses import Output
    from ipfi_cli.models import as_predictor

    model, dtypes, _ = booster
    frame = with_text_zipcode(fit_frame)
    predictor = as_predictor(model)
    assert set(predictor.categories) == set(CATEGORICAL)
    rows = frame[FEATURES].to_numpy(dtype=object)
    got = predictor.predict_block(rows, FEATURES, Output.PROBA, frame["class"].to_numpy())
    expected = model.predict_proba(frame[FEATURES].astype(dtypes))[np.arange(len(frame)), frame["class"].to_numpy()]
    np.testing.assert_array_equal(got, expected)
