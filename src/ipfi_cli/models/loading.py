"""A model given on the command line, loaded and wrapped for the core.

:func:`load_predictor` reads a model file (:mod:`ipfi_cli.models.files`) and picks its
adapter (:func:`ipfi_cli.models.adapters.as_predictor`); the result, a
:class:`LoadedModel`, tells the run what kind of model it is and which warnings loading
gave (a library version mismatch, say).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ipfi_cli.core.predictor import Predictor
from ipfi_cli.errors import IpfiError, ModelCallError, ModelError, first_line
from ipfi_cli.models.adapters import RiverPredictor, SklearnPredictor, as_predictor
from ipfi_cli.models.files import load_model
from ipfi_cli.models.sources import open_model


class GuardedPredictor:
    """``predictor`` with each model call's own exceptions raised as :class:`ModelCallError`.

    A run explains through this, so that it locates and names (or skips) the rows the model fails
    on, while an error of ipfi's own is never taken for one. ipfi's errors from the adapters
    (:class:`~ipfi_cli.errors.IpfiError`: a served model out of reach, an answer of the wrong
    shape) pass as they are. Everything else is the wrapped predictor's.

    >>> from ipfi_cli.core.losses import Output
    >>> from ipfi_cli.models.adapters import as_predictor
    >>> guarded = GuardedPredictor(as_predictor(lambda X: 1.0 / X[:, 0]))
    >>> guarded.predict_records([{"a": "x"}], Output.VALUE, None)
    Traceback (most recent call last):
    ...
    ipfi_cli.errors.ModelCallError: TypeError: unsupported operand type(s) for /: 'float' and 'str'
    """

    def __init__(self, predictor: Predictor) -> None:
        self.predictor = predictor

    def __getattr__(self, name: str) -> Any:
        if name == "predictor":  # not yet set (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.predictor, name)

    def predict_block(self, block: Any, columns: Sequence[str], output: Any, targets: Any) -> Any:
        try:
            return self.predictor.predict_block(block, columns, output, targets)
        except IpfiError:
            raise
        except Exception as error:  # noqa: BLE001 - whatever the model raises is the model's failure
            raise ModelCallError(error) from error

    def predict_records(self, records: list[dict[str, Any]], output: Any, target: Any) -> Any:
        try:
            return self.predictor.predict_records(records, output, target)
        except IpfiError:
            raise
        except Exception as error:  # noqa: BLE001
            raise ModelCallError(error) from error

    def learn_one(self, x: dict[str, Any], y: Any) -> None:
        try:
            self.predictor.learn_one(x, y)
        except IpfiError:
            raise
        except Exception as error:  # noqa: BLE001
            raise ModelCallError(error) from error


@dataclass
class LoadedModel:
    """A loaded model and its predictor.

    ``kind`` is ``"scikit-learn"``, ``"river"`` or ``"function"``; ``warnings`` are one-line
    messages from loading. The predictor is kept guarded (:class:`GuardedPredictor`).
    """

    path: str
    model: Any
    predictor: Predictor
    kind: str
    warnings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not isinstance(self.predictor, GuardedPredictor):
            self.predictor = GuardedPredictor(self.predictor)

    @property
    def description(self) -> str:
        return f"{self.kind} {type(self.model).__name__}"

    def rewrap(self, model: Any) -> None:
        """Use ``model`` (a copy of the loaded one) from now on, with a new predictor."""
        from ipfi_cli.models.adapters import as_predictor

        self.model = model
        self.predictor = GuardedPredictor(as_predictor(model))


def load_predictor(path: str, *, learn: bool = False, trust: Sequence[str] | None = None,
                   http: Any = None) -> LoadedModel:
    """Load a model and wrap it for the core; errors name the model (:class:`ModelError`).

    ``path`` is a model file (joblib/pickle, ``.skops``, ``.onnx``), an MLflow model directory
    or URI, or with ``http`` (:class:`~ipfi_cli.models.http.HttpOptions`) a served model's URL.
    With ``learn``, the model must learn one row at a time (river's ``learn_one``).
    ``trust``: the types a ``.skops`` file may hold (``--trust``).
    """
    opened = open_model(path, http=http)  # ONNX, MLflow or served models; None for a model file
    if opened is not None:
        if learn:
            raise ModelError(f"{path}: --learn needs a model that learns one row at a time (river's learn_one); "
                             f"this {opened[2]} model cannot")
        return LoadedModel(path, *opened)

    model, warnings = load_model(path, trust or ())
    return wrap_model(model, name=path, learn=learn, warnings=warnings)


def wrap_model(model: Any, *, name: str | None = None, learn: bool = False,
               warnings: Sequence[str] = ()) -> LoadedModel:
    """A model object (scikit-learn, river, a function) as a :class:`LoadedModel`; errors name it
    (``name``: how messages call it, by default ``<TypeName>``)."""
    name = name if name is not None else f"<{type(model).__name__}>"
    try:
        predictor = as_predictor(model)
    except ModelError as error:
        raise ModelError(f"{name}: {first_line(error)}") from None
    kind = ("river" if isinstance(predictor, RiverPredictor)
            else "scikit-learn" if isinstance(predictor, SklearnPredictor) else "function")
    if learn and not predictor.can_learn:
        raise ModelError(f"{name}: --learn needs a model that learns one row at a time (river's learn_one); "
                         f"this {kind} {type(model).__name__} cannot")
    return LoadedModel(name, model, predictor, kind, list(warnings))
