"""Conditional (observational) feature removal: draw a removed feature given the others.

Marginal removal (iPFI's default) replaces a feature's value by an earlier row's value. With
correlated features that feeds the model rows that never occur and splits the credit among
copies. A *conditional sampler* instead draws the removed value(s) from their distribution
*given* the values that stay, learned as the stream goes. Importance under conditional
removal answers "is this feature replaceable by the others?"; the gap to marginal removal
is how much of a feature's importance another feature could carry.

Two samplers, both numeric:

* :class:`GaussianSampler`: running (exponentially weighted when the explainer forgets)
  mean and covariance; ``x_A | x_B ~ N(mu_A - P_AA^-1 P_AB (x_B - mu_B), P_AA^-1)`` with
  ``P`` the precision matrix, refreshed every ``refresh_every`` rows. Any subset ``A`` can
  be removed, so it serves iPFI (one feature or group) and iSAGE (every coalition).
* :class:`TreeSampler`: one incremental river regression tree per feature predicting it from
  the others, plus a memory of that tree's recent residuals; a draw is the tree's prediction
  plus a residual drawn at random (the residual-permutation form of conditional sampling,
  Chamma et al. 2023, with a tree as the regressor; ipfi's documented equivalent of iXAI's
  leaf reservoirs: it follows non-linear dependence and needs no per-leaf memory that a split
  would throw away). It removes one feature given all the others, so it serves iPFI only.

The Gaussian sampler's state is plain data (:meth:`ConditionalSampler.state_dict`: its running
moments and precision matrix), so a run with it resumes from ``--state``; the tree sampler's
river trees can be saved only by pickle, and its ``state_dict`` says so.

Each reports its own fit: :attr:`ConditionalSampler.fit` is a rolling R^2 per column of the
sampler's conditional mean, measured on each row *before* the sampler learns it
(prequential). A feature's conditional importance is only as good as that fit: near 0 the
sampler knows little more than the marginal.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> sampler = GaussianSampler(n_columns=2, alpha=0.01)
>>> for _ in range(2000):
...     a = rng.normal()
...     sampler.learn(np.array([a, 2 * a + 0.1 * rng.normal()]))
>>> [round(r, 2) for r in sampler.fit]          # each column almost determined by the other
[1.0, 1.0]
>>> draws = sampler.draw_groups(rng, np.array([1.0, 2.0]), [np.array([0])], 500)
>>> round(float(draws.mean()), 1)             # x0 given x1 = 2 is about 1
1.0
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np

from ipfi_cli.core.params import DEFAULT_ALPHA
from ipfi_cli.core.smoothing import ExponentialMean, RunningMean, make_smoother

#: names of the removal strategies an explainer takes
REMOVALS = ("marginal", "conditional")
#: names of the conditional samplers
CONDITIONAL_SAMPLERS = ("gaussian", "tree")


class ConditionalSampler(ABC):
    """Draws removed columns given the present ones; learns one row at a time."""

    name: str = ""
    #: the sampler can remove any subset of columns (iSAGE needs it), not just one feature
    any_subset: bool = False

    def __init__(self, n_columns: int, *, alpha: float = DEFAULT_ALPHA, smoothing: str = "exponential") -> None:
        self.n_columns = int(n_columns)
        self.alpha = float(alpha)
        self.smoothing = smoothing
        self.n_seen = 0
        # prequential squared error of the conditional mean, and the column's own spread
        self._errors: ExponentialMean | RunningMean = make_smoother(smoothing, alpha, self.n_columns)
        self._spread: ExponentialMean | RunningMean = make_smoother(smoothing, alpha, self.n_columns)

    @property
    def fit(self) -> list[float]:
        """Rolling R^2 of each column's conditional mean given the others (NaN until measured).

        1 means the others determine the column; 0 means they say nothing about it (the
        conditional draw is then no better than a marginal one); negative: worse than the mean.
        """
        if self._errors.count < 2:
            return [float("nan")] * self.n_columns
        variance = self._spread.variance
        with np.errstate(divide="ignore", invalid="ignore"):
            r2 = np.where(variance > 0, 1.0 - self._errors.mean / variance, np.nan)
        return [float(v) for v in r2]

    def learn(self, row: np.ndarray) -> None:
        """Update with one row (numeric, in column order), scoring the fit on it first."""
        row = _numeric(row)
        if self.n_seen >= 2:
            error = row - self.predict_each(row)
            self._errors.update(error * error)
        self._spread.update(row)
        self._learn(row)
        self.n_seen += 1

    @abstractmethod
    def _learn(self, row: np.ndarray) -> None:
        ...

    @abstractmethod
    def predict_each(self, row: np.ndarray) -> np.ndarray:
        """Each column's conditional mean given all the other columns of ``row``."""

    @abstractmethod
    def draw_groups(self, rng: np.random.Generator, row: np.ndarray, groups: Sequence[np.ndarray],
                    n_repeats: int) -> np.ndarray:
        """Draw each group's columns given the rest of ``row``, ``n_repeats`` times.

        Returns shape ``(n_repeats, cells)``: per repeat, group by group, each group's columns
        in order (the order of iPFI's replaced cells).
        """

    def draw_absent(self, rng: np.random.Generator, row: np.ndarray, absent: np.ndarray,
                    n_draws: int) -> np.ndarray:
        """Rows with the ``absent`` columns (a ``(K, C)`` mask) drawn given the present ones.

        Returns shape ``(K, n_draws, C)``; present columns keep ``row``'s values.
        """
        raise ValueError(f"the {self.name} sampler removes one feature given all the others; "
                         "removing any subset (as SAGE does) needs the gaussian sampler")

    def state_dict(self) -> dict[str, Any]:
        """What the sampler learned, as plain data (numbers and arrays), for :meth:`load_state_dict`."""
        return {"sampler": self.name, "n_columns": self.n_columns, "n_seen": self.n_seen,
                "errors": self._errors.state_dict(), "spread": self._spread.state_dict(), **self._own_state()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s data (a sampler of the same kind and columns)."""
        if state.get("sampler") != self.name or state.get("n_columns") != self.n_columns:
            raise ValueError(f"the state is of a {state.get('sampler')} sampler of {state.get('n_columns')} "
                             f"columns, not a {self.name} one of {self.n_columns}")
        self.n_seen = int(state["n_seen"])
        self._errors.load_state_dict(state["errors"])
        self._spread.load_state_dict(state["spread"])
        self._load_own_state(state)

    def _own_state(self) -> dict[str, Any]:
        raise ValueError(f"the {self.name} sampler's state is not plain data")

    def _load_own_state(self, state: Mapping[str, Any]) -> None:
        raise ValueError(f"the {self.name} sampler's state is not plain data")


def _numeric(row: np.ndarray) -> np.ndarray:
    try:
        return np.asarray(row, dtype=np.float64)
    except (TypeError, ValueError):
        bad = next((v for v in np.ravel(row) if not isinstance(v, (int, float, np.number))), None)
        raise ValueError(f"conditional removal needs numeric features, got {bad!r}") from None


class GaussianSampler(ConditionalSampler):
    """Conditional draws from a running multivariate normal fit of the columns.

    ``ridge`` (relative to each column's variance) keeps the covariance invertible when
    columns are exact copies; ``refresh_every`` rows the precision matrix is recomputed
    (``O(C^3)``), and the per-subset factors are cached until the next refresh.
    """

    name = "gaussian"
    any_subset = True

    def __init__(self, n_columns: int, *, alpha: float = DEFAULT_ALPHA, smoothing: str = "exponential",
                 ridge: float = 1e-6, refresh_every: int = 10) -> None:
        super().__init__(n_columns, alpha=alpha, smoothing=smoothing)
        self.ridge = float(ridge)
        self.refresh_every = max(1, int(refresh_every))
        self._moments: ExponentialMean | RunningMean = make_smoother(smoothing, alpha, n_columns)
        self._sum_outer = np.zeros((n_columns, n_columns))  # weighted sum of outer deviations
        self._decay = 1.0 - self.alpha if smoothing == "exponential" else 1.0
        self._step = self.alpha if smoothing == "exponential" else 1.0
        self._since_refresh = 0
        self._mean = np.zeros(n_columns)
        self._precision: np.ndarray | None = None
        self._subsets: dict[bytes, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}

    @property
    def covariance(self) -> np.ndarray:
        """The current (weighted, population) covariance matrix."""
        weight = self._moments.weight
        return self._sum_outer / weight if weight > 0 else np.zeros_like(self._sum_outer)

    def _learn(self, row: np.ndarray) -> None:
        before = self._moments.mean.copy() if self._moments.count else row.copy()
        mean = self._moments.update(row)
        if self._moments.count > 1:
            self._sum_outer = self._sum_outer * self._decay + self._step * np.outer(row - before, row - mean)
        self._since_refresh += 1
        if self._precision is None or self._since_refresh >= self.refresh_every:
            self._refresh()

    def _refresh(self) -> None:
        covariance = self.covariance
        scale = np.maximum(np.diag(covariance), 0.0)
        floor = max(float(scale.mean()) if scale.size else 0.0, 1e-12) * 1e-12
        regular = covariance + np.diag(self.ridge * scale + floor)
        self._precision = np.linalg.inv(regular)
        self._mean = np.array(self._moments.mean, dtype=np.float64)
        self._subsets.clear()
        self._since_refresh = 0

    def _own_state(self) -> dict[str, Any]:
        # the per-subset factors are not kept: they are recomputed, identically, from the precision
        return {"ridge": self.ridge, "refresh_every": self.refresh_every, "moments": self._moments.state_dict(),
                "sum_outer": self._sum_outer.copy(), "since_refresh": self._since_refresh,
                "mean": self._mean.copy(), "precision": None if self._precision is None else self._precision.copy()}

    def _load_own_state(self, state: Mapping[str, Any]) -> None:
        if float(state["ridge"]) != self.ridge or int(state["refresh_every"]) != self.refresh_every:
            raise ValueError(f"the state is of a gaussian sampler with ridge {state['ridge']} and refresh_every "
                             f"{state['refresh_every']}, not {self.ridge} and {self.refresh_every}")
        self._moments.load_state_dict(state["moments"])
        self._sum_outer = np.array(state["sum_outer"], dtype=np.float64).reshape(self.n_columns, self.n_columns)
        self._since_refresh = int(state["since_refresh"])
        self._mean = np.array(state["mean"], dtype=np.float64)
        precision = state["precision"]
        self._precision = None if precision is None else np.array(precision, dtype=np.float64)
        self._subsets.clear()

    def _ready(self) -> np.ndarray:
        if self._precision is None:
            raise ValueError("the conditional sampler has seen no row yet")
        return self._precision

    def predict_each(self, row: np.ndarray) -> np.ndarray:
        precision = self._ready()
        return row - precision @ (row - self._mean) / np.diag(precision)

    def _factors(self, absent: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        key = absent.tobytes()
        cached = self._subsets.get(key)
        if cached is None:
            precision = self._ready()
            a, b = np.flatnonzero(absent), np.flatnonzero(~absent)
            block_inverse = np.linalg.inv(precision[np.ix_(a, a)])
            gain = block_inverse @ precision[np.ix_(a, b)]
            block_inverse = (block_inverse + block_inverse.T) / 2
            try:
                root = np.linalg.cholesky(block_inverse)
            except np.linalg.LinAlgError:
                values, vectors = np.linalg.eigh(block_inverse)
                root = vectors * np.sqrt(np.maximum(values, 0.0))
            cached = (a, b, gain, root)
            self._subsets[key] = cached
        return cached

    def _conditional(self, rng: np.random.Generator, row: np.ndarray, absent: np.ndarray,
                     n_draws: int) -> np.ndarray:
        a, b, gain, root = self._factors(absent)
        mean = self._mean[a] - gain @ (row[b] - self._mean[b])
        return cast(np.ndarray, mean + rng.standard_normal((n_draws, len(a))) @ root.T)

    def draw_groups(self, rng: np.random.Generator, row: np.ndarray, groups: Sequence[np.ndarray],
                    n_repeats: int) -> np.ndarray:
        row = _numeric(row)
        parts = []
        for columns in groups:
            absent = np.zeros(self.n_columns, dtype=bool)
            absent[columns] = True
            parts.append(self._conditional(rng, row, absent, n_repeats))
        return np.concatenate(parts, axis=1)

    def draw_absent(self, rng: np.random.Generator, row: np.ndarray, absent: np.ndarray,
                    n_draws: int) -> np.ndarray:
        row = _numeric(row)
        out = np.repeat(np.repeat(row[None, None, :], absent.shape[0], axis=0), n_draws, axis=1)
        for k, mask in enumerate(absent):
            if mask.any():
                out[k][:, mask] = self._conditional(rng, row, mask, n_draws)
        return out


class TreeSampler(ConditionalSampler):
    """Per column, a river Hoeffding adaptive regression tree predicting it from the others,
    and a memory of its ``memory_size`` latest residuals; a draw is the tree's prediction plus
    a residual drawn uniformly from that memory (every new residual replaces a random slot
    once it is full, so the memory follows drift like the geometric reservoir)."""

    name = "tree"

    def __init__(self, n_columns: int, *, alpha: float = DEFAULT_ALPHA, smoothing: str = "exponential",
                 grace_period: int = 200, memory_size: int = 100, seed: int | None = None) -> None:
        super().__init__(n_columns, alpha=alpha, smoothing=smoothing)
        from river import tree

        seeds = np.random.SeedSequence(seed).generate_state(n_columns)
        self._trees: list[Any] = [tree.HoeffdingAdaptiveTreeRegressor(grace_period=grace_period, seed=int(s))
                                  for s in seeds]
        self._names = [f"x{j}" for j in range(n_columns)]
        self.memory_size = int(memory_size)
        self._residuals = np.zeros((n_columns, self.memory_size))
        self._filled = 0
        self._memory_rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0])
        self._cache: tuple[bytes, np.ndarray] | None = None

    def _own_state(self) -> dict[str, Any]:
        raise ValueError("the tree sampler's river trees can be saved only by pickle (river has no other "
                         "format), which a state file does not hold")

    def _inputs(self, row: np.ndarray, j: int) -> dict[str, float]:
        names = self._names
        return {names[k]: float(row[k]) for k in range(self.n_columns) if k != j}

    def predict_each(self, row: np.ndarray) -> np.ndarray:
        key = row.tobytes()
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        predicted = np.array([t.predict_one(self._inputs(row, j)) or 0.0 for j, t in enumerate(self._trees)],
                             dtype=np.float64)
        self._cache = (key, predicted)
        return predicted

    def _learn(self, row: np.ndarray) -> None:
        residual = row - self.predict_each(row)
        if self._filled < self.memory_size:
            self._residuals[:, self._filled] = residual
            self._filled += 1
        else:
            self._residuals[np.arange(self.n_columns),
                            self._memory_rng.integers(0, self.memory_size, self.n_columns)] = residual
        for j, t in enumerate(self._trees):
            t.learn_one(self._inputs(row, j), float(row[j]))
        self._cache = None

    def draw_groups(self, rng: np.random.Generator, row: np.ndarray, groups: Sequence[np.ndarray],
                    n_repeats: int) -> np.ndarray:
        if any(len(g) != 1 for g in groups):
            raise ValueError("the tree sampler removes one column at a time; use the gaussian sampler for groups")
        if self._filled == 0:
            raise ValueError("the conditional sampler has seen no row yet")
        row = _numeric(row)
        columns = np.array([int(g[0]) for g in groups], dtype=np.intp)
        predicted = self.predict_each(row)[columns]
        slots = rng.integers(0, self._filled, size=(n_repeats, len(columns)))
        return predicted[None, :] + self._residuals[columns[None, :], slots]


def make_conditional_sampler(name: str, n_columns: int, *, alpha: float, smoothing: str,
                             seed: int | None = None) -> ConditionalSampler:
    """Build a conditional sampler by name: ``gaussian`` or ``tree``."""
    if name == "gaussian":
        return GaussianSampler(n_columns, alpha=alpha, smoothing=smoothing)
    if name == "tree":
        return TreeSampler(n_columns, alpha=alpha, smoothing=smoothing, seed=seed)
    raise ValueError(f"unknown conditional sampler {name!r}; choose one of {', '.join(CONDITIONAL_SAMPLERS)}")
