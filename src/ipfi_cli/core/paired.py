"""Marginal and conditional removal side by side: both estimates per feature and their gap.

The gap (marginal minus conditional) is how much of a feature's importance the other
features could carry: large for a feature with a stand-in, near 0 for one without.
:class:`BothRemovals` runs two explainers of one kind (iPFI or iSAGE) over the same rows and
reports, per feature ``f``, ``f`` (marginal), ``f_conditional`` and ``f_gap``, in that
order, so anything that writes an explainer's ``names`` and ``importance_array`` writes all
three. Both see every row or neither: if the second fails on a micro-batch, the first is put
back as it was.

>>> import numpy as np
>>> from ipfi_cli.core.incremental import IPFIEstimator
>>> from ipfi_cli.models import FunctionPredictor
>>> model = FunctionPredictor(lambda X: X[:, 0])
>>> make = lambda removal: IPFIEstimator(model, ["a", "b"], loss="squared", removal=removal,
...                                       smoothing="mean", seed=0)
>>> both = BothRemovals(make("marginal"), make("conditional"))
>>> a = np.random.default_rng(0).normal(size=3000)
>>> X = np.column_stack([a, a + 0.05 * np.random.default_rng(1).normal(size=3000)])  # b: a stand-in
>>> final = both.explain_many(X, X[:, 0])[-1]
>>> dict(zip(both.names, np.round(final, 2).tolist()))
{'a': 1.98, 'b': 0.0, 'a_conditional': 0.01, 'b_conditional': 0.0, 'a_gap': 1.97, 'b_gap': 0.0}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import numpy as np

from ipfi_cli.core.incremental import IPFIEstimator


class BothRemovals:
    """Two explainers of one kind, marginal and conditional removal, as one."""

    def __init__(self, marginal: IPFIEstimator, conditional: IPFIEstimator) -> None:
        if marginal.names != conditional.names:
            raise ValueError("the two explainers must explain the same features")
        self.marginal, self.conditional = marginal, conditional
        base = marginal.names
        self.names = [*base, *(f"{n}_conditional" for n in base), *(f"{n}_gap" for n in base)]

    def __getattr__(self, name: str) -> Any:  # settings and counters: the marginal explainer's
        if name in ("marginal", "conditional"):
            raise AttributeError(name)
        return getattr(self.marginal, name)

    @property
    def model(self) -> Any:
        return self.marginal.model

    @model.setter
    def model(self, predictor: Any) -> None:  # a saved state detaches the model from both
        self.marginal.model = self.conditional.model = predictor

    def params(self) -> dict[str, Any]:
        return {**self.conditional.params(), "names": list(self.names), "removal": "both"}

    def state_dict(self) -> dict[str, Any]:
        """Both explainers' states (:meth:`IPFIEstimator.state_dict`), as plain data."""
        return {"explainer": "both", "marginal": self.marginal.state_dict(),
                "conditional": self.conditional.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s data (each explainer checks its own settings)."""
        if state.get("explainer") != "both":
            raise ValueError(f"the state is of a {state.get('explainer')!r} explainer, not of marginal and "
                             "conditional removal side by side")
        self.marginal.load_state_dict(state["marginal"])
        self.conditional.load_state_dict(state["conditional"])

    @property
    def explained_loss(self) -> float:  # SAGE: the model's, the same under either removal
        marginal: Any = self.marginal  # an AttributeError for PFI, which has none
        return float(marginal.explained_loss)

    @staticmethod
    def _join(first: np.ndarray, second: np.ndarray) -> np.ndarray:
        return np.concatenate([first, second, first - second], axis=-1)

    def explain_one(self, x: Mapping[str, Any], y: Any) -> np.ndarray:
        return cast(np.ndarray, self.explain_many([x], [y])[-1])

    def explain_many(self, rows: Iterable[Mapping[str, Any]] | np.ndarray, targets: Sequence[Any] | np.ndarray, *,
                     return_contributions: bool = False) -> Any:
        rows = rows if isinstance(rows, np.ndarray) else list(rows)
        saved = self.marginal._save_stream_state()
        first = self.marginal.explain_many(rows, targets, return_contributions=return_contributions)
        try:
            second = self.conditional.explain_many(rows, targets, return_contributions=return_contributions)
        except Exception:
            self.marginal._restore_stream_state(saved)
            raise
        if not return_contributions:
            return self._join(first, second)
        return self._join(first[0], second[0]), self._join(first[1], second[1]), first[2]

    def importance_array(self) -> np.ndarray:
        return self._join(self.marginal.importance_array(), self.conditional.importance_array())

    @property
    def importances(self) -> dict[str, float]:
        return dict(zip(self.names, self.importance_array().tolist()))

    def bound_array(self, delta: float = 0.05) -> np.ndarray:
        """Each estimate's bound; the gap's is the sum of the two (a union bound, conservative)."""
        first, second = self.marginal.bound_array(delta), self.conditional.bound_array(delta)
        return np.concatenate([first, second, first + second])

    def bounds(self, delta: float = 0.05) -> dict[str, float]:
        return dict(zip(self.names, self.bound_array(delta).tolist()))

    @property
    def last_contribution(self) -> np.ndarray:
        return self._join(self.marginal.last_contribution, self.conditional.last_contribution)

    @property
    def removal_fit(self) -> dict[str, float]:
        return self.conditional.removal_fit
