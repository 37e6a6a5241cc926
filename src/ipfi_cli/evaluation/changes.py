"""Streams with a known change of a model's reliance, for the change detector's tests and benchmark.

River's Agrawal generator with its own labelling rule as the model, so the importances are
known (function 1: salary ``80/169 ~ 0.473``, age ``~ 0.343``, the rest 0; function 2 uses
age and elevel only):

* ``stationary``: function 1 throughout, the rule as a fixed model (a change is a false alarm);
* ``drift``: function 1 before row ``at``, function 2 from ``at`` on, and the model switches
  to the new rule at once (salary's importance falls to 0, elevel's rises, age's rises ~0.1);
* ``swap``: from ``at`` on two columns' values are swapped and the model follows them
  (it reads the swapped columns), so the two columns' importances trade places;
* ``swap-fixed``: the same swap, the model does not follow: its loss jumps.

>>> run = change_scenario("drift", seed=0, n_rows=8000, at=4000, n_repeats=3)
>>> sorted(run.delays)   # features flagged after the drift
['age', 'elevel', 'salary']
>>> run.false_alarms
[]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ipfi_cli.core.changes import ChangeDetector, ChangeEvent, RankingEvent
from ipfi_cli.core.incremental import IPFIEstimator
from ipfi_cli.core.params import DEFAULT_ALPHA
from ipfi_cli.evaluation.drift import agrawal_function_drift
from ipfi_cli.models import FunctionPredictor

#: river's Agrawal columns, in its order
AGRAWAL_COLUMNS = ["salary", "commission", "age", "elevel", "car", "zipcode", "hvalue", "hyears", "loan"]
SCENARIOS = ("stationary", "drift", "swap", "swap-fixed")


def agrawal_rule_1(block: np.ndarray) -> np.ndarray:
    """river's ``Agrawal._classification_function_1`` on every row of a block (columns in river's order)."""
    salary = np.asarray(block[:, 0], dtype=np.float64)
    age = np.asarray(block[:, 2], dtype=np.float64)
    young = (50000 <= salary) & (salary <= 100000)
    middle = (75000 <= salary) & (salary <= 125000)
    old = (25000 <= salary) & (salary <= 75000)
    return np.where(age < 40, young, np.where(age < 60, middle, old)).astype(np.int64)


def agrawal_rule_2(block: np.ndarray) -> np.ndarray:
    """river's ``Agrawal._classification_function_2`` on every row of a block."""
    age = np.asarray(block[:, 2], dtype=np.float64)
    elevel = np.asarray(block[:, 3], dtype=np.float64)
    young = (elevel == 0) | (elevel == 1)
    middle = (elevel >= 1) & (elevel <= 3)
    old = (elevel >= 2) & (elevel <= 4)
    return np.where(age < 40, young, np.where(age < 60, middle, old)).astype(np.int64)


@dataclass(frozen=True)
class SwappedRule:
    """A rule reading columns ``i`` and ``j`` swapped (a model that follows a feature swap); pickles."""

    rule: Callable[[np.ndarray], np.ndarray]
    i: int
    j: int

    def __call__(self, block: np.ndarray) -> np.ndarray:
        block = np.array(block, dtype=np.float64)
        block[:, [self.i, self.j]] = block[:, [self.j, self.i]]
        return self.rule(block)


@dataclass
class ChangeRun:
    """The events of one scenario run, and what they mean against the known change at ``at``."""

    scenario: str
    seed: int
    n_repeats: int
    at: int
    events: list[ChangeEvent | RankingEvent]
    detector: ChangeDetector
    explainer: IPFIEstimator
    delays: dict[str, int] = field(default_factory=dict)   # feature (or "loss") -> rows from ``at`` to its first event
    false_alarms: list[ChangeEvent] = field(default_factory=list)   # before ``at`` (stationary: all)

    def first(self, feature: str) -> ChangeEvent | None:
        """The first change event of ``feature`` at or after the change."""
        return next((e for e in self.events if isinstance(e, ChangeEvent) and e.feature == feature
                     and e.row >= self.at), None)


def scenario_stream(scenario: str, seed: int, n_rows: int = 20000, at: int = 10000,
                    swap: Sequence[str] = ("salary", "age")) -> tuple[np.ndarray, np.ndarray, list[Any]]:
    """``(X, y, models)``: the rows, labels, and the model before and from ``at`` on (plain rules)."""
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; choose one of {', '.join(SCENARIOS)}")
    functions = (1, 2) if scenario == "drift" else (1, 1)
    rows = agrawal_function_drift(n_rows, at, functions, seed=seed)
    X = np.array([[x[c] for c in AGRAWAL_COLUMNS] for x, _ in rows], dtype=np.float64)
    y = np.array([label for _, label in rows], dtype=np.int64)
    after: Any = agrawal_rule_1
    if scenario == "drift":
        after = agrawal_rule_2
    elif scenario.startswith("swap"):
        i, j = (AGRAWAL_COLUMNS.index(c) for c in swap)
        X[at:, [i, j]] = X[at:, [j, i]]
        if scenario == "swap":
            after = SwappedRule(agrawal_rule_1, i, j)
    return X, y, [agrawal_rule_1, after]


def change_scenario(scenario: str, *, seed: int = 0, n_repeats: int = 10, n_rows: int = 20000, at: int = 10000,
                    alpha: float = DEFAULT_ALPHA, batch: int = 500, swap: Sequence[str] = ("salary", "age"),
                    **detector_options: Any) -> ChangeRun:
    """Explain a scenario's stream with iPFI (``explain_many`` in micro-batches of ``batch`` rows,
    the model replaced at ``at``) and feed every row to a :class:`ChangeDetector`."""
    X, y, (before, after) = scenario_stream(scenario, seed, n_rows, at, swap)
    explainer = IPFIEstimator(FunctionPredictor(before), AGRAWAL_COLUMNS, loss="zero-one", alpha=alpha,
                               n_repeats=n_repeats, seed=seed)
    detector = ChangeDetector.from_explainer(explainer, **detector_options)
    events: list[ChangeEvent | RankingEvent] = []
    bounds = sorted({*range(0, n_rows, batch), at})
    for a, b in zip(bounds, bounds[1:] + [n_rows]):
        if a == at:
            explainer.model = FunctionPredictor(after)
        estimates, contributions, losses = explainer.explain_many(X[a:b], y[a:b], return_contributions=True)
        events += detector.update_many(np.arange(a, b), contributions, losses, estimates)
    run = ChangeRun(scenario, seed, n_repeats, at, events, detector, explainer)
    for event in events:
        if not isinstance(event, ChangeEvent):
            continue
        if event.row < at or scenario == "stationary":
            run.false_alarms.append(event)
        else:
            run.delays.setdefault(event.feature, event.row - at)
    return run
