"""A row's values in the model's column order, and the checks an explainer makes before using them.

>>> row_values(["b", "a"], {"a": 1, "b": 2.5}), all_numbers([1, 2.5]), all_numbers([True, 1])
([2.5, 1], True, False)
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any

import numpy as np

from ipfi_cli.errors import InputError


class RowError(InputError):
    """A row cannot be explained; ``column`` names the offending column when known."""


class NeedsNumbersError(RowError):
    """Conditional removal got a value that is not a number (text) in ``column``."""


_PLAIN_NUMBERS = (int, float)
_PLAIN_TYPES = frozenset(_PLAIN_NUMBERS)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def all_numbers(values: Sequence[Any]) -> bool:
    """True when every value is a real number (not a bool), so it can live in a float array."""
    plain = _PLAIN_NUMBERS
    return all(type(v) in plain for v in values) or all(_is_number(v) for v in values)


def all_rows_numbers(rows: list[list[Any]]) -> bool:
    """True when every value of every row is a real number (not a bool)."""
    return set(map(type, chain.from_iterable(rows))) <= _PLAIN_TYPES or all(all_numbers(row) for row in rows)


def row_values(columns: Sequence[str], x: Mapping[str, Any]) -> list[Any]:
    """The row's values of ``columns``, in their order; a :class:`RowError` names a missing column."""
    try:
        return [x[c] for c in columns]
    except KeyError as error:
        raise RowError("missing from the row", column=str(error.args[0])) from None


def check_finite_numbers(columns: Sequence[str], values: Sequence[Any]) -> None:
    """Conditional removal draws finite numbers: another value is the row's problem, named with its
    column before anything of the row is drawn, predicted or stored (a sampler that learned a NaN
    would draw nothing but NaN from then on)."""
    try:
        if np.isfinite(np.asarray(values, dtype=np.float64)).all():
            return
    except (TypeError, ValueError, OverflowError):
        pass
    for column, value in zip(columns, values):
        try:
            number = float(np.asarray(value, dtype=np.float64))
        except (TypeError, ValueError, OverflowError):
            raise NeedsNumbersError(f"conditional removal needs numbers, got {value!r} (marginal removal takes "
                                    "any value)", column=column) from None
        if number != number:
            raise RowError("missing value, which conditional removal cannot take", column=column)
        if math.isinf(number):
            raise RowError(f"{number} is not a finite number, which conditional removal cannot take", column=column)
