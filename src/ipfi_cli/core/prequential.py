"""The prequential loop: explain row t with the model h_t, then let the model learn it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol

import numpy as np

from ipfi_cli.core.incremental import IPFIEstimator


class Learner(Protocol):
    def learn_one(self, x: dict[str, Any], y: Any) -> None: ...


def explain_then_learn(
    explainer: IPFIEstimator,
    learner: Learner,
    stream: Iterable[tuple[Mapping[str, Any], Any]],
) -> Iterator[np.ndarray]:
    """For each ``(x, y)``: explain it with the current model, then ``learner.learn_one(x, y)``.

    Yields the estimates after each row. The explainer never changes the model;
    only this loop does, and only after the row is explained.

    >>> from river import linear_model
    >>> from ipfi_cli.models import as_predictor
    >>> model = as_predictor(linear_model.LinearRegression())
    >>> explainer = IPFIEstimator(model, ["a", "b"], loss="absolute", seed=0)
    >>> stream = [({"a": i % 7, "b": i % 3}, 2.0 * (i % 7)) for i in range(50)]
    >>> traces = list(explain_then_learn(explainer, model, stream))
    >>> len(traces), traces[-1].shape
    (50, (2,))
    """
    for x, y in stream:
        estimates = explainer.explain_one(x, y)
        learner.learn_one(x if isinstance(x, dict) else dict(x), y)
        yield estimates
