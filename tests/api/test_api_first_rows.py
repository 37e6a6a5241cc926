"""The Python API checks what the command line checks before the first row is kept."""

import numpy as np
import pytest
from sklearn.datasets import load_diabetes
from sklearn.linear_model import LinearRegression

from ipfi_cli import IncrementalPDP, IncrementalPFI, IncrementalSAGE
from ipfi_cli.errors import InputError, ModelError


@pytest.fixture(scope="module")
def diabetes():
    X, y = load_diabetes(return_X_y=True, as_frame=True)
    return LinearRegression().fit(X, y), X.iloc[:60].to_dict("records"), y.iloc[:60].tolist()


@pytest.mark.parametrize("cls", [IncrementalPFI, IncrementalSAGE])
@pytest.mark.parametrize(("bad", "what"), [(float("nan"), "missing value"), ("abc", "needs a number, got 'abc'"),
                                           (float("inf"), "inf is too large")])
def test_a_first_row_the_model_cannot_take_is_refused_not_kept(diabetes, cls, bad, what):
    """The first row was stored without a model call: its bmi then reached every later row's
    perturbed copies, and each later row raised, blaming itself, for ever (0 rows explained)."""
    model, rows, ys = diabetes
    explainer = cls(model, seed=0)
    with pytest.raises(ModelError, match=f"^row 1, column 'bmi': .*{what}"):
        explainer.explain_one({**rows[0], "bmi": bad}, ys[0])
    for x, y in zip(rows[1:], ys[1:]):
        explainer.explain_one(x, y)
    assert explainer.n_explained == len(rows) - 2  # the second row is the first kept


def test_a_model_of_unnamed_inputs_is_refused_rows_of_another_width(diabetes):
    """A model fitted on a 10-column array got rows of 9 keys: row 1 was kept, every later row
    failed with scikit-learn's message, each naming itself."""
    model, rows, ys = diabetes
    X = np.array([list(r.values()) for r in rows])
    unnamed = LinearRegression().fit(X, ys)
    narrow = [{k: v for k, v in r.items() if k != "s6"} for r in rows]
    with pytest.raises(ModelError, match="fitted on 10 unnamed features .* but the rows have 9: age, sex"):
        IncrementalPFI(unnamed, seed=0).explain_one(narrow[0], ys[0])
    with pytest.raises(ModelError, match="fitted on 10 unnamed features"):
        IncrementalPFI(unnamed, [f"c{i}" for i in range(9)], seed=0)


def test_pdp_names_the_row_of_a_value_that_is_not_finite(diabetes):
    """It said 'row 0 (0-based in this call)' on the 5th call."""
    model, rows, _ = diabetes
    pdp = IncrementalPDP(model, list(rows[0]), ["bmi"], warm_up=3)
    for x in rows[:4]:
        pdp.explain_one(x)
    before = [c[1].copy() for c in pdp.curves.values()]
    # (a missing value, NaN, is taken: left out of the grid, and replaced by it, as in partial_dependence)
    with pytest.raises(InputError, match=r"^row 5, column 'bmi': inf is not a finite number") as caught:
        pdp.explain_one({**rows[4], "bmi": float("inf")})
    assert "0-based" not in str(caught.value)
    assert [c[1].tolist() for c in pdp.curves.values()] == [b.tolist() for b in before]


@pytest.mark.parametrize("seed", [np.random.default_rng(0), 1.5, True])
def test_a_seed_that_is_not_one_integer_is_refused_in_a_sentence(diabetes, seed):
    with pytest.raises(TypeError, match="seed must be an int or None, got"):
        IncrementalPFI(diabetes[0], seed=seed)
