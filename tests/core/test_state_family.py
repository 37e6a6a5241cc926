"""The state of SAGE, conditional removal and the realisations' bounds is plain data: explain half the
rows, save, load into a new explainer, explain the rest: the numbers of one uninterrupted explainer."""

from __future__ import annotations

import numpy as np
import pytest

from ipfi_cli.core import plain_state
from ipfi_cli.core.explainer import make_explainer
from ipfi_cli.models import FunctionPredictor

COLUMNS = ["a", "b", "c"]
REGRESSION = FunctionPredictor(lambda X: 2 * X[:, 0] + X[:, 1])
LABELS = FunctionPredictor(lambda X: (X[:, 0] + X[:, 1] > 0).astype(int))

CASES = {
    "sage": ("sage", REGRESSION, "squared", {"n_inner": 2}),
    "sage-labels": ("sage", LABELS, "zero-one", {}),
    "sage-conditional-mean": ("sage", REGRESSION, "squared", {"removal": "conditional", "smoothing": "mean"}),
    "sage-both": ("sage", REGRESSION, "absolute", {"removal": "both"}),
    "pfi-conditional": ("pfi", REGRESSION, "squared", {"removal": "conditional"}),
    "pfi-both": ("pfi", LABELS, "zero-one", {"removal": "both"}),
    "pfi-realisations": ("pfi", REGRESSION, "squared", {"bounds_method": "realisations"}),
}


def stream(n=120):
    rng = np.random.default_rng(11)
    X = rng.normal(size=(n, 3))
    X[:, 2] = X[:, 0] + 0.3 * rng.normal(size=n)  # a stand-in for the conditional samplers to learn
    return X


@pytest.mark.parametrize("case", CASES.values(), ids=list(CASES))
def test_state_round_trip_continues_exactly(case):
    method, model, loss, settings = case
    X = stream()
    y = LABELS.predict_block(X, COLUMNS, None, None) if model is LABELS else 2 * X[:, 0] + X[:, 1] + 0.1 * X[:, 2]

    def make():
        return make_explainer(method, model, COLUMNS, loss=loss, alpha=0.05, n_repeats=2, seed=3, **settings)

    whole = make()
    expected = np.vstack([whole.explain_many(X[:60], y[:60]), whole.explain_many(X[60:], y[60:])])
    first = make()
    first.explain_many(X[:45], y[:45])
    for x, target in zip(X[45:60], y[45:60]):  # row by row too
        first.explain_one(dict(zip(COLUMNS, x.tolist())), target)
    state = plain_state.loads(plain_state.dumps(first.state_dict()))  # through the bytes of a state file
    second = make()
    second.load_state_dict(state)
    got = second.explain_many(X[60:], y[60:])
    assert np.array_equal(got, expected[60:], equal_nan=True)
    assert np.array_equal(second.bound_array(0.05), whole.bound_array(0.05), equal_nan=True)
    if method == "sage":
        assert second.explained_loss == whole.explained_loss


def test_a_state_loads_only_into_its_own_kind_and_settings():
    X = stream(20)
    sage = make_explainer("sage", REGRESSION, COLUMNS, loss="squared", seed=3)
    sage.explain_many(X, X[:, 0])
    with pytest.raises(ValueError, match="explainer: state 'isage'"):
        make_explainer("pfi", REGRESSION, COLUMNS, loss="squared", seed=3, n_repeats=1).load_state_dict(
            sage.state_dict())
    with pytest.raises(ValueError, match="removal: state None"):
        make_explainer("sage", REGRESSION, COLUMNS, loss="squared", seed=3,
                       removal="conditional").load_state_dict(sage.state_dict())
    with pytest.raises(ValueError, match="n_inner"):
        make_explainer("sage", REGRESSION, COLUMNS, loss="squared", seed=3, n_inner=3).load_state_dict(
            sage.state_dict())


def test_an_isage_state_from_before_the_orderings_had_their_stream_is_refused():
    """Such a state's orderings came from the reservoirs' stream: its continuation cannot be drawn
    the same way, so it is refused (one line) and the explainer stays as it was."""
    X = stream(20)
    sage = make_explainer("sage", REGRESSION, COLUMNS, loss="squared", seed=3)
    sage.explain_many(X, X[:, 0])
    earlier = {k: v for k, v in sage.state_dict().items() if k != "order_rng"}
    fresh = make_explainer("sage", REGRESSION, COLUMNS, loss="squared", seed=3)
    with pytest.raises(ValueError, match="earlier ipfi") as refused:
        fresh.load_state_dict(earlier)
    assert "\n" not in str(refused.value)
    assert fresh.n_seen == 0 and np.isnan(fresh.importance_array()).all()
    both = make_explainer("sage", REGRESSION, COLUMNS, loss="squared", seed=3, removal="both")
    both.explain_many(X, X[:, 0])
    state = both.state_dict()
    del state["marginal"]["order_rng"]
    with pytest.raises(ValueError, match="earlier ipfi"):
        make_explainer("sage", REGRESSION, COLUMNS, loss="squared", seed=3, removal="both").load_state_dict(state)


def test_the_tree_sampler_says_why_its_state_is_not_data():
    explainer = make_explainer("pfi", REGRESSION, COLUMNS, loss="squared", seed=3, removal="conditional",
                               conditional_sampler="tree")
    with pytest.raises(ValueError, match="only by pickle"):
        explainer.state_dict()
