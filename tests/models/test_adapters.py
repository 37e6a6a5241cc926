"""Model adapters: chosen by capability, values passed through untouched, models never changed."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pandas as pd
import pytest
from river import linear_model as river_linear
from river import preprocessing as river_pre
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder

from ipfi_cli.core import IPFIEstimator, Output, explain_then_learn
from ipfi_cli.models import FunctionPredictor, ModelError, RiverPredictor, SklearnPredictor, as_predictor


def _frame(n=200, seed=0):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"x": rng.normal(size=n), "colour": rng.choice(["red", "blue"], n),
                          "k": rng.integers(0, 4, n)})
    return frame, np.where(frame.x + (frame.colour == "red") > 0.5, "yes", "no")


# -- choosing the adapter ----------------------------------------------------------------------
def test_river_models_and_pipelines():
    for model, classifier in [(river_linear.LogisticRegression(), True),
                              (river_pre.StandardScaler() | river_linear.LogisticRegression(), True),
                              (river_linear.LinearRegression(), False),
                              (river_pre.StandardScaler() | river_linear.LinearRegression(), False)]:
        predictor = as_predictor(model)
        assert isinstance(predictor, RiverPredictor) and predictor.model is model
        assert predictor.can_learn and not predictor.supports_batch and predictor.columns is None
        assert predictor.is_classifier is classifier and predictor.has_proba is classifier


def test_sklearn_estimators_and_pipelines():
    frame, labels = _frame()
    X = frame[["x", "k"]].to_numpy()
    for model, classifier, columns in [
        (LogisticRegression().fit(X, labels), True, None),                        # fitted on an array
        (LinearRegression().fit(frame[["x", "k"]], frame.x * 2), False, ["x", "k"]),
        (make_pipeline(ColumnTransformer([("c", OneHotEncoder(), ["colour"])], remainder="passthrough"),
                       LogisticRegression()).fit(frame, labels), True, ["x", "colour", "k"]),
    ]:
        predictor = as_predictor(model)
        assert isinstance(predictor, SklearnPredictor) and predictor.model is model
        assert predictor.supports_batch and not predictor.can_learn
        assert predictor.is_classifier is classifier and predictor.has_proba is classifier
        assert predictor.columns == columns
    assert as_predictor(LogisticRegression().fit(X, labels)).classes == ["no", "yes"]


def test_plain_functions_and_adapters_pass_through():
    def double(block):
        return block[:, 0] * 2

    predictor = as_predictor(double)
    assert isinstance(predictor, FunctionPredictor) and predictor.supports_batch
    assert not predictor.can_learn and not predictor.has_proba and not predictor.is_classifier
    assert as_predictor(predictor) is predictor
    assert FunctionPredictor(double, is_classifier=True).is_classifier


def test_choice_is_by_capability_not_by_type():
    class RiverLike:
        def predict_one(self, x):
            return 1

    class SklearnLike:
        def fit(self, X, y):
            return self

        def predict(self, X):
            return np.zeros(len(X))

    class CallableWithPredict:          # predict without fit/get_params: treated as a function
        def predict(self, X):
            raise AssertionError

        def __call__(self, block):
            return block[:, 0]

    assert isinstance(as_predictor(RiverLike()), RiverPredictor)
    assert isinstance(as_predictor(SklearnLike()), SklearnPredictor)
    assert isinstance(as_predictor(CallableWithPredict()), FunctionPredictor)
    assert not as_predictor(RiverLike()).can_learn


def test_an_object_with_no_capability_is_refused():
    class Nothing:
        def predict(self, X):           # predict alone (no fit, no get_params) is not enough
            return X

    for thing in (object(), Nothing(), 42):
        with pytest.raises(ModelError, match=r"cannot explain a \w+: it has no predict_one \(river\), "
                                             r"no predict \(scikit-learn\) and is not callable"):
            as_predictor(thing)
    with pytest.raises(ModelError, match="no predict method"):
        SklearnPredictor(object())
    with pytest.raises(ModelError, match="no predict_one method"):
        RiverPredictor(object())
    with pytest.raises(ModelError, match="not callable"):
        FunctionPredictor(3)


def test_only_river_models_learn():
    frame, labels = _frame()
    with pytest.raises(ModelError, match="cannot learn one row at a time"):
        as_predictor(LogisticRegression().fit(frame[["x"]], labels)).learn_one({"x": 1.0}, "yes")
    with pytest.raises(ModelError, match="cannot learn"):
        as_predictor(lambda block: block[:, 0]).learn_one({"x": 1.0}, 1)

    class PredictOnly:
        def predict_one(self, x):
            return 0

    with pytest.raises(ModelError, match="no learn_one"):
        as_predictor(PredictOnly()).learn_one({"x": 1.0}, 1)


# -- what the models receive ---------------------------------------------------------------------
class _RecordingRiverModel:
    """Keeps every dict it is given; predicts from the number of characters in 'name'."""

    def __init__(self):
        self.predicted, self.learned = [], []

    def predict_one(self, x):
        self.predicted.append(dict(x))
        return float(len(x["name"]) + x["count"])

    def learn_one(self, x, y):
        self.learned.append(dict(x))


def test_values_reach_a_river_model_untouched():
    model = _RecordingRiverModel()
    predictor = as_predictor(model)
    rows = [{"name": "ab", "count": 3, "ratio": 0.5}, {"name": "xyz", "count": 10, "ratio": 1.25},
            {"name": "é", "count": -1, "ratio": 2.0}]
    explainer = IPFIEstimator(predictor, ["name", "count", "ratio"], loss="absolute", n_repeats=2, seed=0)
    for _row in explain_then_learn(explainer, predictor, [(r, 1.0) for r in rows]):
        pass
    assert model.learned == rows and all(type(x["count"]) is int for x in model.learned)
    valid = {("name", r["name"]) for r in rows} | {("count", r["count"]) for r in rows} \
        | {("ratio", r["ratio"]) for r in rows}
    # rows 2 and 3 each make 1 + 2 x 3 records; equal records are asked once
    assert len({tuple(r.items()) for r in model.predicted}) <= len(model.predicted) <= 2 * (1 + 2 * 3)
    for record in model.predicted:
        assert list(record) == ["name", "count", "ratio"]
        assert type(record["name"]) is str and type(record["count"]) is int and type(record["ratio"]) is float
        assert {(k, v) for k, v in record.items()} <= valid
    assert any(record["name"] == "ab" and record["count"] == 10 for record in model.predicted)  # replaced


def test_sklearn_gets_a_dataframe_in_its_fitted_column_order_with_proper_dtypes():
    received = []

    class FrameModel:
        feature_names_in_ = np.array(["k", "colour", "x"])

        def get_params(self):
            return {}

        def predict(self, data):
            received.append(data)
            return np.where(data["colour"] == "red", data["x"], -data["x"])

    predictor = as_predictor(FrameModel())
    block = np.empty((2, 3), dtype=object)
    block[:] = [[1.5, "red", 2], [-0.5, "blue", 7]]
    predicted = predictor.predict_block(block, ["x", "colour", "k"], Output.VALUE, None)
    frame = received[0]
    assert isinstance(frame, pd.DataFrame) and list(frame.columns) == ["k", "colour", "x"]
    assert frame["k"].tolist() == [2, 7] and frame["k"].dtype.kind == "i"
    assert frame["x"].dtype.kind == "f" and frame["colour"].tolist() == ["red", "blue"]
    assert predicted.tolist() == [1.5, 0.5]
    records = predictor.predict_records([{"colour": "blue", "k": 1, "x": 3.0}], Output.VALUE, None)
    assert records.tolist() == [-3.0] and list(received[1].columns) == ["k", "colour", "x"]


def test_river_regressor_cold_start_none_is_nan():
    class ColdStart:
        def predict_one(self, x):
            return None

    predicted = as_predictor(ColdStart()).predict_records([{"a": 1}], Output.VALUE, None)
    assert np.isnan(predicted).all()


# -- river pipelines in the prequential loop ---------------------------------------------------
def _river_stream(n=300, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) * [1.0, 10.0, 0.1] + [0.0, 50.0, 0.0]
    return [({"a": a, "b": b, "c": c}, bool(a + (b - 50) / 10 > 0)) for a, b, c in X.tolist()]


def _pipeline():
    return river_pre.StandardScaler() | river_linear.LogisticRegression()


@pytest.mark.parametrize("loss", ["zero-one", "log"])
def test_explaining_never_changes_a_river_pipeline(loss):
    stream = _river_stream()
    model = _pipeline()
    for x, y in stream[:100]:
        model.learn_one(x, y)
    predictor = as_predictor(model)
    explainer = IPFIEstimator(predictor, ["a", "b", "c"], loss=loss, n_repeats=5, seed=0)
    probes = [x for x, _ in _river_stream(20, seed=9)]
    before = [model.predict_proba_one(p) for p in probes]
    state = pickle.dumps(model)
    for x, y in stream[100:200]:
        explainer.explain_one(x, y)                      # no learn_one
    assert [model.predict_proba_one(p) for p in probes] == before
    assert pickle.dumps(model) == state
    assert explainer.importances["a"] > 0                # it did evaluate the model


def test_prequential_loop_explains_then_learns():
    stream = _river_stream()
    model = _pipeline()
    predictor = as_predictor(model)
    explainer = IPFIEstimator(predictor, ["a", "b", "c"], loss="zero-one", alpha=0.01, n_repeats=5, seed=2)
    traces = np.array(list(explain_then_learn(explainer, predictor, stream)))
    # the same loop by hand, on a fresh copy: explain row t with h_t, then learn it
    manual_model = _pipeline()
    manual = IPFIEstimator(as_predictor(manual_model), ["a", "b", "c"], loss="zero-one", alpha=0.01,
                            n_repeats=5, seed=2)
    expected = []
    for x, y in stream:
        expected.append(manual.explain_one(x, y))
        manual_model.learn_one(x, y)
    assert np.array_equal(traces, np.array(expected), equal_nan=True)
    assert traces.shape == (300, 3)
    # the model learned the rule: a and b matter, c (noise) does not; the loss fell. Measured with
    # explainer seeds 0-2: a 0.34-0.35, b 0.25-0.27, c 0.013-0.020, mean loss 0.074; the explainer's
    # own Chebyshev half-widths (delta = 0.05) are ~0.1, so the thresholds below sit > 2 of them away.
    final = dict(zip(explainer.names, traces[-1]))
    assert final["a"] > 0.05 and final["b"] > 0.05 and abs(final["c"]) < 0.5 * min(final["a"], final["b"])
    assert model.predict_one({"a": 2.0, "b": 60.0, "c": 0.0}) is True
    assert explainer.mean_loss < 0.3


def test_river_use_many_agrees_with_records():
    stream = _river_stream(150)
    model = _pipeline()
    for x, y in stream[:100]:
        model.learn_one(x, y)
    by_record = IPFIEstimator(as_predictor(model), ["a", "b", "c"], loss="log", n_repeats=3, seed=4)
    many = as_predictor(model, use_many=True)
    assert many.supports_batch
    by_frame = IPFIEstimator(many, ["a", "b", "c"], loss="log", n_repeats=3, seed=4)
    one = np.array([by_record.explain_one(x, y) for x, y in stream[100:]])
    batched = np.array([by_frame.explain_one(x, y) for x, y in stream[100:]])
    # the same draws; river's dict and DataFrame paths round differently, hence rtol 1e-9
    np.testing.assert_allclose(batched, one, rtol=1e-9, atol=1e-12)
    assert by_frame.last_loss == pytest.approx(-math.log(model.predict_proba_one(stream[-1][0])[stream[-1][1]]))


def test_river_model_is_asked_once_per_distinct_record_with_the_same_answers():
    """A step's perturbed rows repeat; the river adapter asks each distinct one once, and the
    answers (hence every estimate) are those of asking each record."""
    from river import tree

    from ipfi_cli.core import IPFIEstimator
    from ipfi_cli.evaluation.drift import agrawal_rows
    from ipfi_cli.models import as_predictor

    rows = agrawal_rows(600, 2, 3)
    columns = list(rows[0][0])

    class Counting(tree.HoeffdingTreeClassifier):
        calls = 0

        def predict_proba_one(self, x, **kwargs):
            Counting.calls += 1
            return super().predict_proba_one(x, **kwargs)

    def run(distinct):
        import ipfi_cli.models.adapters as adapters

        saved = adapters._distinct
        if not distinct:
            adapters._distinct = lambda records: (records, None)
        try:
            Counting.calls = 0
            predictor = as_predictor(Counting())
            explainer = IPFIEstimator(predictor, columns, loss="zero-one", n_repeats=10, sampling="geometric",
                                      reservoir_size=100, seed=5)
            trace = []
            for x, y in rows:
                trace.append(explainer.explain_one(x, y).copy())
                predictor.learn_one(x, y)
            return np.array(trace), Counting.calls, explainer.n_predictions
        finally:
            adapters._distinct = saved

    asked_each, calls_each, predictions = run(distinct=False)
    asked_once, calls_once, _ = run(distinct=True)
    assert asked_once.tobytes() == asked_each.tobytes()
    assert calls_each == predictions  # without it, one call per perturbed row
    assert calls_once < 0.9 * calls_each  # about a quarter of Agrawal's perturbed rows repeat


def test_distinct_records_keep_types_apart_and_skip_unhashable_values():
    from ipfi_cli.models.adapters import _distinct

    unique, where = _distinct([{"a": 1}, {"a": True}, {"a": 1.0}, {"a": 1}])
    assert unique == [{"a": 1}, {"a": True}, {"a": 1.0}] and where == [0, 1, 2, 0]
    assert [type(r["a"]) for r in unique] == [int, bool, float]
    records = [{"a": [1]}, {"a": [1]}]
    assert _distinct(records) == (records, None)
    nan = float("nan")
    assert _distinct([{"a": nan}, {"a": float("nan")}])[1] is None  # two NaNs are not known equal
