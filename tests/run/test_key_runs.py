"""A key's pieces say when their state changed (``KeyRun.state_version``), so that a key evicted again
unchanged with ``--max-keys`` keeps its saved bytes: any row its explainer takes, any model call it
counts (a failed one too) and any record it writes changes the version."""

from __future__ import annotations

import numpy as np
import pytest

from ipfi_cli.core import IPFIEstimator
from ipfi_cli.errors import ModelCallError
from ipfi_cli.models import FunctionPredictor
from ipfi_cli.run.key_runs import KeyRun


def _run(fail: list[bool]) -> KeyRun:
    def predict(X):
        if fail[0]:
            raise ModelCallError("the model failed")
        return X[:, 0] * 2.0
    return KeyRun(IPFIEstimator(FunctionPredictor(predict), ["a", "b"], loss="squared", seed=3), None)


def test_the_version_changes_with_every_change_of_the_state_and_only_then():
    fail = [False]
    run = _run(fail)
    X = np.random.default_rng(0).normal(size=(6, 2))
    versions = [run.state_version()]
    run.explainer.explain_many(X[:3], (2 * X[:3, 0]).tolist())
    versions.append(run.state_version())
    assert versions[1] != versions[0]
    assert run.state_version() == versions[1]  # read twice, nothing in between: the same
    fail[0] = True
    with pytest.raises(ModelCallError):
        run.explainer.explain_many(X[3:], (2 * X[3:, 0]).tolist())
    versions.append(run.state_version())  # the rows were not taken, but the call is counted in the state
    assert versions[2] != versions[1]
    run.progress.rows += 1
    assert run.state_version() != versions[2]
    assert len(set(versions)) == len(versions)
