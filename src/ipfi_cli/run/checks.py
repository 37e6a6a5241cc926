"""Checks that stop a run from printing numbers that cannot be right, or say why they may not be.

Each names the cause and the fix in one line: a river model that never learned the input's
columns (:func:`check_inputs`), a feature whose name is one of the traces' own fields
(:func:`check_output_names`), labels none of which is a class of the model
(:func:`labels_match_nothing`), and importances that are all exactly zero
(:func:`all_zero_warning`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ipfi_cli.errors import InputError
from ipfi_cli.text import quoted

if TYPE_CHECKING:  # imported when used: the command line loads this module for --help
    from ipfi_cli.models.loading import LoadedModel
    from ipfi_cli.run.labels import LabelMatcher

#: explained rows before all-zero importances are worth a warning
ZERO_ROWS = 30


def check_inputs(loaded: LoadedModel, columns: Sequence[str], source: str) -> None:
    """Refuse a river model that learned features none of which is an input column."""
    if loaded.kind != "river":
        return
    from ipfi_cli.models.introspect import unseen_inputs

    problem = unseen_inputs(loaded.model, list(columns))
    if problem:
        raise InputError(problem, source=source)


#: the fields of the trace files besides the features: ``row`` (explain's and compare's), and
#: ``method`` (compare --traces'; ``ipfi plot`` takes a file that has one for compare's traces)
TRACE_FIELDS = ("row", "method")


def check_output_names(names: Sequence[str], bounds: bool, source: str) -> None:
    """Refuse feature or group names that would collide with the traces' own fields.

    ``bounds``: the traces hold a ``<name>_bound`` column per name (explain --bounds); the
    traces of compare have none, but ``ipfi plot`` takes a ``<name>_bound`` column beside
    ``<name>`` for a bound (and does not draw it), so compare --traces passes True too.

    >>> check_output_names(["row", "x"], False, "data.csv")
    Traceback (most recent call last):
    ...
    ipfi_cli.errors.InputError: data.csv: the feature 'row' has the name of the traces' row-number field; ...
    >>> check_output_names(["x", "method"], False, "data.csv")
    Traceback (most recent call last):
    ...
    ipfi_cli.errors.InputError: data.csv: the feature 'method' has the name of the method field of compare's ...
    """
    taken = set(TRACE_FIELDS) | ({f"{name}_bound" for name in names} if bounds else set())
    clash = [name for name in names if name in taken]
    if clash:
        if clash[0] == "method":
            why = "the method field of compare's traces, which `ipfi plot` reads as one"
        elif clash[0] == "row":
            why = "the traces' row-number field; the traces would hold two fields of that name"
        else:
            why = f"the bound column of {clash[0][:-6]!r}; the traces would hold two fields of that name"
        raise InputError(f"the feature {clash[0]!r} has the name of {why}: report it under another name with "
                         f"--group NEW={clash[0]}", source=source)


def labels_match_nothing(matcher: LabelMatcher) -> str:
    """The line for a run in which no label is one of the model's classes."""
    examples = ", ".join(quoted(label) for label in list(matcher.unknown)[:3])
    classes = ", ".join(repr(c) for c in (matcher.classes or [])[:6])
    return (f"no label is one of the model's classes ({classes}); the labels read like {examples}: every "
            "prediction would count as wrong and every importance would be 0; check --target and the label values")


def all_zero_warning(importances: Any, explained: int) -> str | None:
    """A warning when every importance is exactly 0 after enough rows: no permutation of any
    feature changed any prediction, which is what a model that does not see its inputs does."""
    values = [float(v) for v in importances]
    if explained < ZERO_ROWS or not values or any(v != 0.0 for v in values):
        return None
    return (f"every feature scored exactly 0 after {explained:,} rows: no feature's permutation changed any "
            "prediction. A model that ignores these inputs gives that; if it should use them, check that the "
            "input's columns are the ones the model was trained on (names and types)")
