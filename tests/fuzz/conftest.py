"""Shared settings for the property-based fuzz tests.

Every test runs a fixed, derandomized set of examples (``derandomize=True``, no example
database), so CI sees the same inputs on every run. ``IPFI_FUZZ_SCALE=10`` multiplies the
example counts for a deeper local run (then the examples differ from CI's).
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import joblib
import numpy as np
import pytest
from hypothesis import HealthCheck, settings

SCALE = float(os.environ.get("IPFI_FUZZ_SCALE", "1"))


def fuzz(max_examples: int) -> settings:
    """Settings for one fuzz test: reproducible, no deadline, ``max_examples`` scaled."""
    return settings(max_examples=max(1, int(max_examples * SCALE)), derandomize=SCALE == 1, database=None,
                    deadline=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


# -- models for the command tests ----------------------------------------------------------
@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """A decision tree fitted on a DataFrame (takes NaN, refuses text and inf) and an untrained
    river Hoeffding tree (learns; takes text as categories)."""
    import pandas as pd
    from river import tree
    from sklearn.tree import DecisionTreeClassifier

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=300), "b": rng.normal(size=300)})
    labels = ((frame.a + 0.5 * frame.b) > 0).astype(int)
    folder = tmp_path_factory.mktemp("fuzz-models")
    joblib.dump(DecisionTreeClassifier(max_depth=4, random_state=0).fit(frame, labels), folder / "tree.joblib")
    with open(folder / "hoeffding.pkl", "wb") as f:
        pickle.dump(tree.HoeffdingTreeClassifier(grace_period=5), f)
    return {"static": folder / "tree.joblib", "learn": folder / "hoeffding.pkl"}
