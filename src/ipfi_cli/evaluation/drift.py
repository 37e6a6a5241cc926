"""Concept drift for experiments: a change of labelling function, or swapped feature values.

* **function drift**: the rows before ``at`` come from one concept, the rows from
  ``at`` on from another, with the features' distribution unchanged
  (:func:`function_drift`; :func:`agrawal_function_drift` builds the paper's stream);
* **feature drift**: from row ``at`` on, the values of paired columns are swapped
  (:func:`swap_features`): the label still depends on the same *values*, which now
  arrive under other column names, so the model's dependence on the names changes.

Rows are lists of ``(x, y)`` pairs with ``x`` a dict, so they feed the prequential loop
directly.

>>> rows = [({"a": i, "b": -i}, i) for i in range(4)]
>>> [x for x, _ in swap_features(rows, {"a": "b"}, at=2)]
[{'a': 0, 'b': 0}, {'a': 1, 'b': -1}, {'a': -2, 'b': 2}, {'a': -3, 'b': 3}]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

Row = tuple[dict[str, Any], Any]


def swap_features(rows: Iterable[tuple[Mapping[str, Any], Any]], pairs: Mapping[str, str], at: int) -> list[Row]:
    """Swap each pair's values in every row from position ``at`` (0-based) on; earlier rows are copied as they are."""
    seen: set[str] = set()
    for a, b in pairs.items():
        if a == b or a in seen or b in seen:
            raise ValueError(f"swap pairs must name distinct columns once each, got {dict(pairs)}")
        seen.update((a, b))
    out: list[Row] = []
    for t, (x, y) in enumerate(rows):
        x = dict(x)
        if t >= at:
            for a, b in pairs.items():
                x[a], x[b] = x[b], x[a]
        out.append((x, y))
    return out


def function_drift(before: Iterable[Row], after: Iterable[Row], at: int) -> list[Row]:
    """The first ``at`` rows of ``before`` followed by ``after``'s rows (an abrupt drift at ``at``)."""
    head = []
    for t, row in enumerate(before):
        if t >= at:
            break
        head.append(row)
    if len(head) < at:
        raise ValueError(f"the stream before the drift has only {len(head)} rows, fewer than {at}")
    return head + list(after)


def gradual_drift(before: Sequence[Row], after: Sequence[Row], at: int, width: int, seed: int) -> list[Row]:
    """River's ``ConceptDriftStream`` over two lists of rows: a sigmoid change ``width`` rows wide around ``at``.

    Row ``i`` (1-based) comes from ``after`` with probability ``1 / (1 + exp(-4 (i - at) / width))``
    and otherwise from ``before``; each list is read in order, and the stream ends when the list
    drawn from runs out (the paper's drift streams, with river's own generator).

    >>> rows = gradual_drift([({"a": 0}, 0)] * 50, [({"a": 1}, 1)] * 50, at=25, width=10, seed=1)
    >>> "".join(str(y) for _, y in rows[15:35]), sum(y for _, y in rows[:15]), sum(1 - y for _, y in rows[35:])
    ('00001100111111111111', 1, 0)
    """
    from river.datasets import base, synth

    class Listed(base.SyntheticDataset):
        def __init__(self, rows: Sequence[Row]) -> None:
            # river's __init__ is unannotated, and untyped_calls_exclude misses calls through super()
            # (python/mypy#16653)
            super().__init__(task=base.BINARY_CLF,  # type: ignore[no-untyped-call]
                             n_features=len(rows[0][0]) if rows else 0)
            self.rows = rows

        def __iter__(self):  # type: ignore[no-untyped-def]
            return iter(self.rows)

    stream = synth.ConceptDriftStream(Listed(before), Listed(after), position=at, width=width, seed=seed)
    return [(dict(x), y) for x, y in stream]


def agrawal_rows(n: int, function: int, seed: int) -> list[Row]:
    """``n`` rows of river's ``Agrawal(classification_function=function, seed=seed)`` (river numbers from 0)."""
    from river.datasets import synth

    return [(dict(x), y) for x, y in synth.Agrawal(classification_function=function, seed=seed).take(n)]


def agrawal_function_drift(n: int, at: int, functions: Sequence[int] = (1, 2), seed: int = 0) -> list[Row]:
    """Agrawal rows with labelling function ``functions[0]`` before row ``at`` and ``functions[1]`` after."""
    first, second = np.random.SeedSequence(seed).generate_state(2)
    return function_drift(agrawal_rows(at, functions[0], int(first)),
                          agrawal_rows(n - at, functions[1], int(second)), at)


def pick_swap_partner(columns: Sequence[str], feature: str, seed: int | None = None,
                      exclude: Sequence[str] = ()) -> str:
    """A random column other than ``feature`` (and ``exclude``) to swap it with."""
    candidates = [c for c in columns if c != feature and c not in exclude]
    if not candidates:
        raise ValueError(f"no column to swap {feature!r} with")
    return candidates[int(np.random.default_rng(seed).integers(len(candidates)))]
