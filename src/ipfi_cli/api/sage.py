"""Incremental SAGE in the Python API: :class:`IncrementalSAGE`, the Shapley values of the loss game
on a stream, row by row as :class:`~ipfi_cli.api.streams.IncrementalPFI` (whose row loop it uses)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ipfi_cli.api._shared import _check_columns, _columns_of, _default_loss
from ipfi_cli.api.streams import IncrementalPFI, _check_seed
from ipfi_cli.core.losses import Loss
from ipfi_cli.core.params import DEFAULT_ALPHA


class IncrementalSAGE(IncrementalPFI):
    """Incremental SAGE (iSAGE): the Shapley values of the loss game, on a stream.

    Per row, ``n_repeats`` random orderings of the features; along each, features are added
    one by one (the absent ones imputed from earlier rows, or drawn given the present ones)
    and each is credited with the loss decrease its arrival brings, folded into a smoothed
    mean like iPFI's. The values add up to :attr:`explained_loss`, the loss with no feature
    known (every feature imputed, or the smoothed mean prediction with ``empty="mean"``) minus
    the model's: how much the model explains at all. See :mod:`ipfi_cli.core.sage` for the game
    and when it is Covert's SAGE.

    Parameters
    ----------
    model, columns, alpha, sampling, reservoir_size, seed, smoothing
        As in :class:`IncrementalPFI`.
    loss : {"zero-one", "log", "absolute", "squared"}, default=None
        ``None``: zero-one for a classifier, absolute error otherwise. With ``log`` (cross-entropy,
        the SAGE paper's for classifiers) a coalition's loss is that of its imputations' mean
        probability vector; one imputation (the default ``n_inner``) scores a confident wrong one
        at up to 34.5, so the values are far above Covert et al.'s game: ``n_inner=16`` comes near it.
    n_repeats : int, default=1
        Orderings per row (iXAI: 1). The command line's ``--repeats`` defaults to 10 for every
        method: pass ``n_repeats=10`` for ``ipfi explain --method sage``'s numbers.
    n_inner : int, default=None
        Imputations per coalition, their predictions averaged (labels: the most frequent).
        ``None``: 2 for the squared loss (whose values then estimate Covert et al.'s SAGE
        without bias), else 1 (the Shapley values of the loss under one random imputation).
    empty : {"imputed", "mean"}, default="imputed"
        The empty coalition: imputed as the others (a feature the model never reads gets 0),
        or scored by the smoothed mean prediction as iXAI's ``IncrementalSage`` (which makes
        unused features negative when ``n_inner`` is small).
    groups : dict of str to list of str, default=None
        Columns that enter together. Every column takes part (no ``features``).
    removal : {"marginal", "conditional", "both"}, default="marginal"
        ``"conditional"`` uses the Gaussian sampler (SAGE removes whole coalitions); ``"both"``
        as for :class:`IncrementalPFI`.

    Attributes
    ----------
    importances : dict of str to float
        The current SAGE value per feature or group.
    explained_loss, marginal_loss, model_loss : float
        The smoothed losses without features, with all, and their difference.

    Examples
    --------
    >>> import numpy as np
    >>> from ipfi_cli import IncrementalSAGE
    >>> X = np.random.default_rng(0).normal(size=(3000, 2))
    >>> explainer = IncrementalSAGE(lambda B: 2 * B[:, 0], ["a", "b"], loss="squared", n_inner=20,
    ...                             smoothing="mean", seed=0)
    >>> for x, target in zip(X.tolist(), (2 * X[:, 0]).tolist()):
    ...     values = explainer.explain_one({"a": x[0], "b": x[1]}, target)
    >>> round(explainer.explained_loss, 2), round(values["a"], 2), round(values["b"], 2)
    (3.98, 4.01, -0.03)

    The explained loss estimates 4 Var(a) = 4 (4.01 over these rows), and it all goes to ``a``, up to the noise
    of 3,000 rows.
    """

    _method = "sage"

    def __init__(self, model: Any, columns: Sequence[str] | None = None, *, loss: str | Loss | None = None,
                 alpha: float = DEFAULT_ALPHA, n_repeats: int = 1, n_inner: int | None = None,
                 sampling: str = "geometric",
                 reservoir_size: int = 100, groups: Mapping[str, Sequence[str]] | None = None,
                 seed: int | None = None, smoothing: str = "exponential", removal: str = "marginal",
                 empty: str = "imputed") -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {alpha}")
        _check_seed(seed)
        self.model = model
        self._given = {"columns": columns, "loss": loss}  # as passed, for get_params
        self.loss = _default_loss(model, loss)
        self.options = {"alpha": alpha, "n_repeats": n_repeats, "n_inner": n_inner, "sampling": sampling,
                        "reservoir_size": reservoir_size, "groups": groups, "seed": seed, "smoothing": smoothing,
                        "removal": removal, "empty": empty}
        _check_columns(model, columns)
        self.columns = list(columns) if columns is not None else _columns_of(model)
        self._init_stream()  # labels matched and refused as for PFI
        if self.columns is not None:
            self._start(self.columns)
        else:
            self._check_settings()

    def _sage(self, name: str) -> float:
        return float(getattr(self._core, name)) if self._core is not None else float("nan")

    @property
    def explained_loss(self) -> float:
        return self._sage("explained_loss")

    @property
    def marginal_loss(self) -> float:
        return self._sage("marginal_loss")

    @property
    def model_loss(self) -> float:
        return self._sage("model_loss")
