"""A model copy whose sets iterate in an order that depends only on their elements.

Python builds an unpickled set by inserting its elements in the order the pickling
process iterated them, and that order depends on the set's history, so a set can iterate
in another order after a pickle round trip (seen for river's ``compose.Select``, whose
columns are a set: the order of the sums inside the model changes, and so do the last
digits of its predictions). A run that learns saves its model in ``--state`` and a resumed
run unpickles it, so both copies are made canonical: every set is rebuilt from its
elements in sorted order. With the fixed string-hash seed of the ``ipfi`` command, the
same elements inserted in the same order give the same iteration order in every process.

>>> import pickle
>>> names = {f"col_{i}" for i in range(40)}
>>> once, twice = canonical_copy(names), canonical_copy(pickle.loads(pickle.dumps(names)))
>>> list(once) == list(twice) == list(canonical_copy(once))
True
"""

from __future__ import annotations

import io
import pickle
from typing import Any


def _element_key(value: Any) -> tuple[str, str]:
    return type(value).__name__, repr(value)


def _rebuilt_set(elements: list[Any]) -> set[Any]:
    return set(elements)


def _rebuilt_frozenset(elements: list[Any]) -> frozenset[Any]:
    return frozenset(elements)


# The pure-Python pickler: the C one does not call reducer_override for exact sets (a speed-up).
class _CanonicalPickler(pickle._Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is set:
            return _rebuilt_set, (sorted(obj, key=_element_key),)
        if type(obj) is frozenset:
            return _rebuilt_frozenset, (sorted(obj, key=_element_key),)
        return NotImplemented


def canonical_copy(model: Any) -> Any:
    """A deep copy of ``model`` (through pickle) with every set rebuilt in sorted order."""
    buffer = io.BytesIO()
    _CanonicalPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(model)
    return pickle.loads(buffer.getvalue())
