"""Reading a state's fields: each checked where it is read, an error naming it.

A state file's checksum proves that the file is whole, not that ipfi wrote it: a file crafted with a
recomputed checksum can hold anything plain data can (:mod:`ipfi_cli.core.plain_state`). So each
piece that continues from a state (an explainer's ``load_state_dict``, a run's counters) reads its
fields through these functions, which refuse a value this ipfi never writes there (a negative count,
a NaN mean, an array of another shape, a missing key, a text where a number goes) with a
:class:`StateFieldError` naming the field, instead of a quiet wrong number or an error deep in the
run. :func:`within` puts the name of the part a field is in before it (``explainer.tracker.count``).

>>> with within("tracker"):
...     integer({"count": -5}, "count")
Traceback (most recent call last):
ipfi_cli.core.state_fields.StateFieldError: the state's tracker.count must be at least 0, not -5
>>> number({"weight": 0.5}, "weight", low=0.0)
0.5
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ipfi_cli.errors import StateError, first_line
from ipfi_cli.text import quoted


class StateFieldError(StateError):
    """A field of a state holds what this ipfi never writes there; ``str(error)`` is one line naming it."""

    def __init__(self, field: str, problem: str) -> None:
        self.field, self.problem = field, problem
        super().__init__(f"the state's {field} {problem}" if field else f"the state {problem}")

    def inside(self, part: str) -> StateFieldError:
        """The same error, its field named from ``part`` (the part of the state it is in)."""
        return StateFieldError(f"{part}.{self.field}" if self.field else part, self.problem)


@contextlib.contextmanager
def within(part: str) -> Iterator[None]:
    """Read the part ``part`` of a state: a :class:`StateFieldError` raised inside names its field from
    ``part``; a missing key is a missing field; a value of the wrong type that reading it stumbles on
    (``TypeError``, ``IndexError``, ``AttributeError``, ``OverflowError``, ``ZeroDivisionError``) is
    refused naming ``part``. A ``ValueError`` of the reading code's own (other settings) goes through."""
    try:
        yield
    except StateFieldError as error:
        raise error.inside(part) from None
    except KeyError as error:
        key = error.args[0] if error.args else None
        raise StateFieldError(f"{part}.{key}" if isinstance(key, str) else part, "is missing") from None
    except (TypeError, IndexError, AttributeError, OverflowError, ZeroDivisionError) as error:
        raise StateFieldError(part, f"is not what this ipfi writes there ({type(error).__name__}: "
                                    f"{first_line(error)})") from None


def fields(value: Any) -> Mapping[str, Any]:
    """``value`` as a mapping of fields (a part of the state), else refused."""
    if not isinstance(value, Mapping):
        raise StateFieldError("", f"must be a mapping of fields, not {_shown(value)}")
    return value


def _get(state: Any, key: str) -> Any:
    state = fields(state)
    if key not in state:
        raise StateFieldError(key, "is missing")
    return state[key]


#: the largest count a state may hold (NumPy's counters are 64-bit)
MAX_COUNT = 2**63 - 1


def integer(state: Any, key: str, *, low: int | None = 0, high: int | None = MAX_COUNT) -> int:
    """The whole number ``state[key]``, at least ``low`` and at most ``high`` (where given)."""
    value = _get(state, key)
    if type(value) is not int:
        raise StateFieldError(key, f"must be a whole number, not {_shown(value)}")
    if low is not None and value < low:
        raise StateFieldError(key, f"must be at least {low}, not {value}")
    if high is not None and value > high:
        raise StateFieldError(key, f"must be at most {high}, not {value}")
    return value


def number(state: Any, key: str, *, low: float | None = None, nan: bool = False, infinite: bool = False) -> float:
    """The number ``state[key]``: finite (NaN with ``nan``, infinities with ``infinite``), at least ``low``."""
    value = _get(state, key)
    if type(value) not in (int, float):
        raise StateFieldError(key, f"must be a number, not {_shown(value)}")
    value = float(value)
    if math.isnan(value):
        if nan:
            return value
        raise StateFieldError(key, "must be a number, not NaN")
    if math.isinf(value) and not infinite:
        raise StateFieldError(key, f"must be finite, not {value}")
    if low is not None and value < low:
        raise StateFieldError(key, f"must be at least {low:g}, not {value:g}")
    return value


def array(state: Any, key: str, shape: Sequence[int | None], *, kinds: str = "f", finite: bool = True,
          low: float | None = None) -> np.ndarray:
    """The array ``state[key]``: of ``shape`` (``None``: any length there), of a dtype of ``kinds``
    (NumPy's kind letters; ``"O"``: rows of values), its numbers finite and at least ``low`` (where given)."""
    value = _get(state, key)
    if not isinstance(value, np.ndarray) or value.dtype.kind not in kinds:
        what = f"an array of {value.dtype}" if isinstance(value, np.ndarray) else _shown(value)
        raise StateFieldError(key, f"must be an array of {_KINDS.get(kinds, kinds)}, not {what}")
    if value.ndim != len(shape) or any(want is not None and got != want for got, want in zip(value.shape, shape)):
        wanted = "(" + ", ".join("any" if n is None else str(n) for n in shape) + ")"
        raise StateFieldError(key, f"must be an array of shape {wanted}, not {tuple(value.shape)}")
    if value.dtype.kind == "f":
        if finite and not np.isfinite(value).all():
            raise StateFieldError(key, "must hold finite numbers, not NaN or infinities")
        if low is not None and (value < low).any():
            raise StateFieldError(key, f"must hold numbers of at least {low:g}, not {float(value.min()):g}")
    return value


def generator_state(generator: np.random.Generator, state: Any, key: str) -> None:
    """Set ``generator``'s state from ``state[key]`` (NumPy checks it: a wrong one is refused naming ``key``)."""
    value = _get(state, key)
    try:
        generator.bit_generator.state = dict(fields(value))
    except (StateFieldError, TypeError, ValueError, KeyError, OverflowError):
        raise StateFieldError(key, f"is not the state of NumPy's {type(generator.bit_generator).__name__} random "
                                   "generator") from None


def choice(state: Any, key: str, choices: Sequence[Any]) -> Any:
    """``state[key]``, one of ``choices``."""
    value = _get(state, key)
    if not any(type(value) is type(option) and value == option for option in choices):
        raise StateFieldError(key, f"must be one of {', '.join(map(repr, choices))}, not {_shown(value)}")
    return value


def text(state: Any, key: str) -> str:
    """The text ``state[key]``."""
    value = _get(state, key)
    if not isinstance(value, str):
        raise StateFieldError(key, f"must be a text, not {_shown(value)}")
    return value


_KINDS = {"f": "floating-point numbers", "iu": "whole numbers", "fiu": "numbers", "fiubO": "values"}


def _shown(value: Any) -> str:
    """A value found in a state, in a message: numbers and short texts as they are, else its type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({value})"
    if isinstance(value, (int, float)):
        return repr(value) if len(repr(value)) <= 40 else f"a number of {len(repr(value))} digits"
    if isinstance(value, str):
        return f"the text {quoted(value, 40)}"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)}"
    return f"a {type(value).__name__}"
