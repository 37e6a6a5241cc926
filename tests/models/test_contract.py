"""The contract every adapter keeps: the whole ``Predictor`` protocol, and the same predictions
whichever shape the rows come in (a block or records). Run over every adapter, so a new
adapter is checked by adding one line to ``ADAPTERS``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ipfi_cli.core import Output, Predictor
from ipfi_cli.errors import ModelError
from ipfi_cli.models import as_predictor

COLUMNS = ["x", "z"]


def _data(n: int = 120, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"x": rng.normal(size=n), "z": rng.normal(size=n)})
    return frame, (frame.x + 0.3 * frame.z > 0).astype(int).to_numpy()


def sklearn_classifier():
    from sklearn.linear_model import LogisticRegression

    frame, y = _data()
    return LogisticRegression().fit(frame, y), "classification"


def sklearn_regressor():
    from sklearn.linear_model import LinearRegression

    frame, y = _data()
    return LinearRegression().fit(frame, frame.x * 2 - frame.z), "regression"


def river_classifier():
    from river import linear_model, preprocessing

    model = preprocessing.StandardScaler() | linear_model.LogisticRegression()
    frame, y = _data()
    for x, label in zip(frame.to_dict("records"), y.tolist()):
        model.learn_one(x, label)
    return model, "classification"


def river_regressor():
    from river import linear_model

    model = linear_model.LinearRegression()
    frame, _ = _data()
    for x in frame.to_dict("records"):
        model.learn_one(x, 2 * x["x"] - x["z"])
    return model, "regression"


def plain_function():
    return (lambda block: (np.asarray(block[:, 0], dtype=float) > 0).astype(int)), "function"


ADAPTERS = [sklearn_classifier, sklearn_regressor, river_classifier, river_regressor, plain_function]


@pytest.fixture(params=ADAPTERS, ids=lambda make: make.__name__)
def adapter(request):
    model, kind = request.param()
    return as_predictor(model), kind


def test_every_adapter_is_a_predictor_with_every_attribute(adapter):
    predictor, kind = adapter
    assert isinstance(predictor, Predictor)
    for name in ("supports_batch", "columns", "n_features", "can_learn", "classes", "is_classifier", "has_proba"):
        getattr(predictor, name)  # declared by the protocol: every adapter answers
    assert predictor.is_classifier is (kind == "classification")
    assert predictor.can_learn is hasattr(predictor.model if hasattr(predictor, "model") else None, "learn_one")


def test_block_and_records_give_the_same_predictions(adapter):
    predictor, kind = adapter
    frame, y = _data(30, seed=1)
    block = frame[COLUMNS].to_numpy()
    output = Output.VALUE if kind == "regression" else Output.LABEL
    from_block = predictor.predict_block(block, COLUMNS, output, None)
    from_records = np.concatenate([predictor.predict_records([row], output, label)
                                   for row, label in zip(frame[COLUMNS].to_dict("records"), y.tolist())])
    assert from_block.shape == (30,)
    np.testing.assert_allclose(np.asarray(from_block, dtype=float), np.asarray(from_records, dtype=float),
                               rtol=1e-12)


def test_probabilities_of_the_true_label_where_the_model_has_them(adapter):
    predictor, kind = adapter
    frame, y = _data(30, seed=2)
    if not predictor.has_proba:
        with pytest.raises((ModelError, ValueError)):
            predictor.predict_block(frame[COLUMNS].to_numpy(), COLUMNS, Output.PROBA, y)
        return
    proba = predictor.predict_block(frame[COLUMNS].to_numpy(), COLUMNS, Output.PROBA, y)
    assert proba.shape == (30,) and ((0 <= proba) & (proba <= 1)).all()
    # the probability of the true label and of the other one add up to 1 (two classes)
    other = predictor.predict_block(frame[COLUMNS].to_numpy(), COLUMNS, Output.PROBA, 1 - y)
    np.testing.assert_allclose(proba + other, 1.0, rtol=1e-9)
