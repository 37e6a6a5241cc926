"""The bundled sample models are recipes: they build with the installed versions, deterministically, cached."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import joblib
import numpy as np
import pandas as pd
import pytest

from ipfi_cli import sample_models
from ipfi_cli.sample_models import Recipe, hist_gradient_boosting, river_model

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
FEATURES = ["salary", "commission", "age", "elevel", "car", "zipcode", "hvalue", "hyears", "loan"]


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(sample_models.CACHE_ENV, str(folder))
    return folder


def small_recipe_args(n: int = 400) -> tuple:
    frame = pd.read_csv(SAMPLE / "agrawal_static.csv", nrows=n)
    data = {column: frame[column].tolist() for column in FEATURES}
    return {"random_state": 0, "max_iter": 20}, FEATURES, data, frame["class"].tolist()


def test_the_sample_files_hold_no_library_state():
    """Only the recipe's function is named: no scikit-learn, river or numpy class is pickled."""
    import pickletools

    for name in ("agrawal_hoeffding.pkl", "elec2_hoeffding.pkl"):
        text = "\n".join(str(arg) for op, arg, _ in pickletools.genops((SAMPLE / name).read_bytes()) if arg)
        assert "ipfi_cli.sample_models" in text and "river_model" in text
        assert "river.tree" not in text and "numpy" not in text


def test_river_sample_model_is_a_new_untrained_tree():
    from river import tree

    model = pickle.loads((SAMPLE / "agrawal_hoeffding.pkl").read_bytes())
    assert isinstance(model, tree.HoeffdingAdaptiveTreeClassifier)
    assert (model.grace_period, model.delta, model.seed) == (100, 1e-5, 0)
    assert model.predict_proba_one({"salary": 1.0}) == {}  # nothing learned yet


def test_river_model_takes_public_names():
    from river import linear_model

    model = river_model("linear_model.LogisticRegression", {"l2": 0.5})
    assert isinstance(model, linear_model.LogisticRegression) and model.l2 == 0.5
    with pytest.raises(AttributeError):
        river_model("tree.NoSuchTree", {})


def test_hgb_sample_model_predicts_the_static_stream():
    """The recipe's model, from the test run's cache (tests/conftest.py): fitted once per run, by the
    first test that loads the sample (its fit and its cache have tests of their own below)."""
    model = joblib.load(SAMPLE / "agrawal_hgb.joblib")
    assert list(model.feature_names_in_) == FEATURES
    test = pd.read_csv(SAMPLE / "agrawal_static.csv")
    accuracy = (model.predict(test[FEATURES]) == test["class"].to_numpy()).mean()
    assert accuracy > 0.99  # 0.9984 with scikit-learn 1.9.1 (sample_data/README.md)


def test_hgb_is_fitted_once_then_loaded_from_the_cache(cache, monkeypatch):
    args = small_recipe_args()
    first = hist_gradient_boosting(*args)
    cached = list(cache.iterdir())
    assert len(cached) == 1 and cached[0].suffix == ".joblib"

    def no_fit(*_):
        raise AssertionError("fitted again")

    monkeypatch.setattr(sample_models, "_fit_hist_gradient_boosting", no_fit)
    second = hist_gradient_boosting(*args)
    rows = pd.DataFrame(args[2])
    assert np.array_equal(first.predict_proba(rows), second.predict_proba(rows))
    with pytest.raises(AssertionError, match="fitted again"):  # other rows: another cache entry
        hist_gradient_boosting(*small_recipe_args(300))


def test_a_damaged_cache_is_rebuilt_and_an_unwritable_one_skipped(cache, tmp_path, monkeypatch):
    args = small_recipe_args()
    reference = hist_gradient_boosting(*args)
    (entry,) = cache.iterdir()
    entry.write_bytes(b"torn")
    rebuilt = hist_gradient_boosting(*args)
    rows = pd.DataFrame(args[2])
    assert np.array_equal(reference.predict_proba(rows), rebuilt.predict_proba(rows))
    assert entry.read_bytes() != b"torn"
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(sample_models.CACHE_ENV, str(blocker / "cache"))  # cannot be created
    assert np.array_equal(reference.predict_proba(rows), hist_gradient_boosting(*args).predict_proba(rows))


@pytest.mark.process
def test_the_same_recipe_gives_the_same_model_in_another_process(cache):
    """Deterministic: a fresh process (no cache) fits the same model."""
    args = small_recipe_args()
    path = cache.parent / "recipe.joblib"
    joblib.dump(Recipe(hist_gradient_boosting, *args), path)
    here = joblib.load(path).predict_proba(pd.DataFrame(args[2]))
    code = ("import sys, joblib, pandas as pd, numpy as np; m = joblib.load(sys.argv[1]); "
            "np.save(sys.argv[2], m.predict_proba(pd.read_csv(sys.argv[3], nrows=400)[m.feature_names_in_]))")
    env = {**__import__("os").environ, sample_models.CACHE_ENV: str(cache.parent / "other-cache")}
    out = cache.parent / "there.npy"
    subprocess.run([sys.executable, "-c", code, str(path), str(out), str(SAMPLE / "agrawal_static.csv")],
                   check=True, env=env, timeout=120)
    assert np.array_equal(here, np.load(out))
