"""The :class:`Explainer` protocol: what the run layer asks of an incremental explainer, and
the registry of methods (:data:`METHODS`) it builds one from.

An explainer explains rows one at a time (``explain_one``) or a static model's block of
consecutive rows at once (``explain_many``), and keeps one smoothed estimate per explained
name (a feature or a group). Everything the streaming run, ``--state``, ``--meta`` and
change detection read from an explainer is in the protocol, so a second method (iSAGE,
conditional removal) plugs in with a class that satisfies it and one entry in
:data:`METHODS` (and its name in :data:`ipfi_cli.core.choices.METHOD_NAMES`, from which
the command's ``--method`` choices are built).

Saving and restoring: a run's ``--state`` holds ``state_dict()``, the explainer's state as plain
data (dicts, lists, strings, numbers, booleans, ``None`` and NumPy arrays; a random generator's
state as its dict), and a resumed run builds a new explainer with the same settings and calls
``load_state_dict()`` on it: loading a state runs no code (:mod:`ipfi_cli.core.plain_state`).

>>> from ipfi_cli.core.incremental import IPFIEstimator
>>> from ipfi_cli.models import FunctionPredictor
>>> isinstance(IPFIEstimator(FunctionPredictor(lambda X: X[:, 0]), ["a"], loss="squared"), Explainer)
True
>>> sorted(METHODS)
['pfi', 'sage']
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ipfi_cli.core.incremental import IPFIEstimator
from ipfi_cli.errors import UsageError

if TYPE_CHECKING:
    import numpy as np

    from ipfi_cli.core.incremental import IPFIEstimator
    from ipfi_cli.core.losses import Loss
    from ipfi_cli.core.predictor import Predictor


@runtime_checkable
class Explainer(Protocol):
    """An incremental explainer of one model on one stream (arrays in ``names`` order)."""

    #: the explained names (features and groups), in the order of every array below
    names: list[str]
    #: the predictor explained (``None`` while detached for saving)
    model: Any
    #: rows seen (explained or only stored: the stream's first row is only stored)
    n_seen: int
    #: the last explained row's unperturbed loss (NaN before the first)
    last_loss: float

    def explain_one(self, x: Mapping[str, Any], y: Any) -> np.ndarray:
        """Explain one row with the model as it is now; the estimates after it."""
        ...

    def explain_many(self, block: Iterable[Mapping[str, Any]] | np.ndarray, targets: Sequence[Any] | np.ndarray, *,
                     return_contributions: bool = False) -> Any:
        """Explain consecutive rows of a static model, all or nothing: estimates of shape
        ``(T, G)``, or ``(estimates, contributions, losses)`` with ``return_contributions``."""
        ...

    def importance_array(self) -> np.ndarray:
        """The current estimates (NaN before the first explained row)."""
        ...

    def bound_array(self, delta: float = 0.05) -> np.ndarray:
        """Half-widths of the estimates' confidence intervals at level ``1 - delta``."""
        ...

    @property
    def last_contribution(self) -> np.ndarray:
        """The last explained row's contribution per name: the value folded into the estimates."""
        ...

    @property
    def n_explained(self) -> int:
        """Rows explained."""
        ...

    @property
    def mean_loss(self) -> float:
        """The model's mean loss over the explained rows (NaN before the first)."""
        ...

    def params(self) -> dict[str, Any]:
        """The settings a resumed run must share (plain data: names, numbers, lists, dicts),
        with ``method`` (its key in :data:`METHODS`), ``columns``, ``names``, ``groups``
        (name -> columns) and ``loss`` (the loss's name) among them."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything the explainer learned from the stream, as plain data (see the module docstring)."""
        ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s data; a :class:`ValueError` when its settings differ."""
        ...


def loss_sum(explainer: Any) -> float:
    """The model's loss summed over the explained rows: the explainer's running ``loss_sum`` where it
    keeps one (iPFI's and SAGE's do: it never decreases), else ``mean_loss * n_explained`` (which a
    rounding can make fall by 1 ulp from one row to the next).

    >>> class Plain:
    ...     mean_loss, n_explained = 0.5, 4
    >>> loss_sum(Plain())
    2.0
    """
    kept = getattr(explainer, "loss_sum", None)
    if kept is not None:
        return float(kept)
    n = int(explainer.n_explained)
    return float(explainer.mean_loss) * n if n else 0.0


#: builds an explainer: ``(predictor, columns, *, loss, features, groups, seed, **settings)``
ExplainerFactory = Callable[..., Explainer]


def _both_or_one(cls: type[IPFIEstimator], predictor: Predictor, columns: Sequence[str],
                 settings: dict[str, Any]) -> Explainer:
    """``removal="both"``: the marginal and the conditional explainer side by side (:mod:`ipfi_cli.core.paired`)."""
    if settings.get("removal") != "both":
        try:
            return cls(predictor, columns, **settings)
        except ValueError as error:
            if "unknown removal" in str(error):  # "both" is chosen here, before the explainer
                raise ValueError(f"{error}, both") from None
            raise
    from ipfi_cli.core.paired import BothRemovals

    marginal = cls(predictor, columns, **{**settings, "removal": "marginal"})
    return BothRemovals(marginal, cls(predictor, columns, **{**settings, "removal": "conditional"}))


def _pfi(predictor: Predictor, columns: Sequence[str], **settings: Any) -> Explainer:
    settings.pop("n_inner", None)  # SAGE's
    settings.pop("empty", None)
    return _both_or_one(IPFIEstimator, predictor, columns, settings)


def _sage(predictor: Predictor, columns: Sequence[str], *, features: Sequence[str] | None = None,
          groups: Mapping[str, Sequence[str]] | None = None, **settings: Any) -> Explainer:
    from ipfi_cli.core.sage import ISAGEEstimator

    grouped = {c for members in (groups or {}).values() for c in members}
    if features is not None and set(features) | grouped != set(columns):
        left = [c for c in columns if c not in set(features) | grouped]
        raise UsageError(f"SAGE shares the loss among all the model's inputs; {', '.join(left)} would be left "
                         "out (explain every input; --group is fine)", "--features")
    return _both_or_one(ISAGEEstimator, predictor, columns, {**settings, "groups": groups})


#: method name -> factory; the keys are :data:`ipfi_cli.core.choices.METHOD_NAMES` (a test checks it)
METHODS: dict[str, ExplainerFactory] = {"pfi": _pfi, "sage": _sage}


def make_explainer(method: str, predictor: Predictor, columns: Sequence[str], *, loss: str | Loss,
                   features: Sequence[str] | None = None, groups: Mapping[str, Sequence[str]] | None = None,
                   seed: int | None = None, **settings: Any) -> Explainer:
    """A new explainer of ``method`` for ``predictor``, whose inputs are ``columns``.

    ``settings`` are the method's own (for ``pfi``: ``alpha``, ``n_repeats``, ``sampling``,
    ``reservoir_size``, ``smoothing``, ``removal`` -- ``marginal``, ``conditional`` or ``both`` --
    and ``conditional_sampler``; ``sage`` takes ``n_inner`` and ``empty`` besides).

    >>> from ipfi_cli.models import as_predictor
    >>> from sklearn.linear_model import LinearRegression
    >>> model = LinearRegression().fit([[0.0, 1.0], [1.0, 0.0], [2.0, 1.0]], [0.0, 2.0, 4.0])
    >>> explainer = make_explainer("pfi", as_predictor(model), ["a", "b"], loss="squared", seed=0)
    >>> explainer.params()["method"], explainer.names
    ('pfi', ['a', 'b'])
    """
    try:
        factory = METHODS[method]
    except KeyError:
        raise ValueError(f"unknown method {method!r} (the methods: {', '.join(METHODS)})") from None
    return factory(predictor, columns, loss=loss, features=features, groups=groups, seed=seed, **settings)
